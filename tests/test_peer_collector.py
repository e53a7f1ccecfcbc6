"""A peer tunes Python's garbage collector for a stream of short-lived frames and deliveries: under
load the default thresholds ran a young collection every 700 allocations and full ones over tens of
thousands of pending messages (12-14 % of a peer's busy time in a native profile)."""

from __future__ import annotations

import gc

from tom.peer.process import GC_THRESHOLDS, tune_collector


def test_a_peer_collects_garbage_less_often_than_pythons_default():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        tune_collector()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] >= 10_000 and GC_THRESHOLDS[2] >= 100
    finally:
        gc.set_threshold(*before)
