"""A benchmark group whose peer stops: the benchmark says which peer, how it ended and its log's last
lines in one error (printed as FAILED by ``scripts/bench``), never a traceback of a broken pipe."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from benchmarks.peers import BenchError, BenchGroup

QUITS = "import sys; print('port 1 on 127.0.0.1 is already in use', flush=True); sys.exit(2)"


class QuittingGroup(BenchGroup):
    """Every peer is a program that says why it cannot run and exits with code 2."""

    def peer_argv(self, neighbors: Path, out: Path, port: int, keys: Path) -> list[str]:
        return [sys.executable, "-c", QUITS]


def test_a_peer_gone_before_the_warm_up_is_the_group_s_error_naming_it(tmp_path):
    with QuittingGroup(2, tmp_path) as group:
        for p in group.peers:
            deadline = time.monotonic() + 30
            while p.proc.running() and time.monotonic() < deadline:
                time.sleep(0.02)
        with pytest.raises(BenchError) as err:
            group.warm_up(time.monotonic() + 30)
    first = group.peers[0]
    assert str(err.value).splitlines() == [f"peer {first.pid} exited with code 2:",
                                           "port 1 on 127.0.0.1 is already in use"]
    assert first.sent == 0
