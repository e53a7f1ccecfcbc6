"""End to end (real `tom peer` processes on loopback): a group that shrinks one crash at a time stops at
the neighbors file's majority, unless ``--last-man-standing`` (issue 25). Every wait is bounded and
every process is stopped (`procs.PeerProcs`)."""

from __future__ import annotations

import time

import pytest

from procs import PeerProcs, free_ports

FAST = ("--heartbeat", "0.2", "--timeout", "1")


def wait_for(what, deadline: float, why: str, g: PeerProcs) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if what():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {deadline}s: {why}; logs: {g.log_text()}")


@pytest.mark.parametrize("last_man_standing", [False, True], ids=["stops", "last-man-standing"])
def test_a_group_shrinking_below_the_file_majority_stops_unless_last_man_standing(tmp_path, last_man_standing):
    ports = sorted(free_ports(3))  # peer 0 has the smallest pid: the tie-breaker of a view of two
    extra = FAST + (("--last-man-standing",) if last_man_standing else ())
    with PeerProcs(tmp_path, 3, secure=False, ports=ports, extra=extra) as g:
        texts = lambda i: [r["text"] for r in g.messages(i)]  # noqa: E731
        g.send(0, ["one"])
        wait_for(lambda: all(texts(i) == ["one"] for i in range(3)), 30, "one everywhere", g)
        g.procs[2].kill()  # 2 of the file's 3 stay: a majority of the view and of the file
        g.send(0, ["two"])
        wait_for(lambda: all(texts(i) == ["one", "two"] for i in range(2)), 30, "two at 0 and 1", g)
        g.procs[1].kill()  # 1 of 3: half of the view A B with its smallest pid, not of the file
        g.send(0, ["three"])
        if last_man_standing:
            wait_for(lambda: texts(0) == ["one", "two", "three"], 30, "three delivered alone", g)
        else:
            wait_for(lambda: "no quorum" in g.procs[0].log_text(), 30, "the no-quorum line", g)
            time.sleep(3)  # (well past the removal it would have made: 1 s of silence + 1 s)
            assert texts(0) == ["one", "two"], g.log_text()
            assert "of the neighbors file" in g.procs[0].log_text()
        assert g.procs[0].running()
