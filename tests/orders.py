"""Checks of what each order promises, on the deliveries of simulated peers (see docs/output-format.md)."""

from __future__ import annotations

from collections import defaultdict

from tom.core import Delivery


def check_sequencer_numbers(deliveries: list, where: str) -> None:
    """At one peer: ``(view, seq)`` strictly increasing (a view event is ``(view, 0)``)."""
    keys = [(d.view, d.seq if isinstance(d, Delivery) else 0) for d in deliveries]
    assert all(isinstance(d, Delivery) is False or d.seq is not None for d in deliveries), where
    assert all(a < b for a, b in zip(keys, keys[1:])), f"(view, seq) not increasing: {keys}; {where}"


def settled(deliveries: list) -> list:
    """What a peer delivered before its last view: the part a peer removed as failed shares with the
    survivors in the non-uniform orders (docs/orders.md, "Uniformity")."""
    last = max((k for k, d in enumerate(deliveries) if not isinstance(d, Delivery)), default=-1)
    return deliveries[:last + 1]


def check_same_numbers(peers: dict[str, list], where: str) -> None:
    """Every copy of a message carries the same number, and no two messages of a view share one
    (``peers``: pass only the settled part of a peer removed as failed)."""
    number: dict[tuple, int] = {}
    owner: dict[tuple, tuple] = {}
    for pid, deliveries in peers.items():
        view: tuple = (1,)  # a view is known by its whole event (two groups may both have a view 2)
        for d in deliveries:
            if isinstance(d, Delivery):
                key = (d.clock, d.pid)
                assert number.setdefault(key, d.seq) == d.seq, f"{key}: numbers {number[key]} and {d.seq}; {where}"
                assert owner.setdefault((view, d.seq), key) == key, f"number {d.seq} given twice; {where}"
            else:
                view = (d.view, d.clock, d.pid, d.members)


def check_causal(deliveries: list, where: str) -> None:
    """At one peer: each message comes after, for every member q, the first vc[q] messages of q in its
    view (vc[origin] - 1 for its origin), and an origin's messages come in their order."""
    seen: dict[tuple[int, str], int] = defaultdict(int)  # (view, origin) -> messages delivered
    for d in deliveries:
        if not isinstance(d, Delivery):
            continue
        assert d.vc is not None, f"a causal delivery without vector: {d}; {where}"
        for q, count in d.vc.items():
            need = count - 1 if q == d.pid else count
            assert seen[(d.view, q)] >= need, (
                f"{d.pid}'s {d.text!r} delivered after {seen[(d.view, q)]} messages of {q}, "
                f"it depends on {need}; {where}")
        assert d.vc.get(d.pid, 0) == seen[(d.view, d.pid)] + 1, f"{d.text!r} out of its origin's order; {where}"
        seen[(d.view, d.pid)] += 1
