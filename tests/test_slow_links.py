"""Slow links on the pure core (issue 41): founding, joining and view changes finish under a link
delay of seconds, given time, and nobody is suspected for a silence the delay explains.

Every frame takes the same fixed latency (`simnet.Network.fixed`): the delay a student sets with
``--delay``. A founding attempt's window doubles per attempt (`tom.core.founding.window`), so a
round trip longer than the first window only costs attempts."""

from __future__ import annotations

import pytest

from guarantees import check
from simnet import Network, tag
from tom.core import ViewDelivery
from tom.core.founding import MAX_DOUBLINGS, window


def texts(net: Network, pid: str) -> list[str]:
    return [d.text for d in net.nodes[pid].delivered if not isinstance(d, ViewDelivery)]


def views(net: Network, pid: str) -> list[tuple[str, ...]]:
    return [d.members for d in net.nodes[pid].delivered if isinstance(d, ViewDelivery)]


def founded(n: int, latency: float, until: float = 200.0) -> tuple[Network, float | None]:
    """``n`` peers of one file start at once; when every one has a view (or None by ``until``)."""
    net = Network.fixed(n, latency=latency, expected=True)
    for p in net.pids:
        net.start(p)
    t = 0.0
    while t < until:
        t += 0.5
        net.run(until=t, exact=True)
        if all(net.cores[p].view is not None for p in net.pids):
            return net, t
    return net, None


def test_the_window_doubles_per_attempt_up_to_its_bound():
    assert [window(5.0, k) for k in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert window(5.0, 100) == 5.0 * 2 ** MAX_DOUBLINGS


@pytest.mark.parametrize("latency", [0.5, 1.5, 2.0, 3.0, 5.0])
def test_three_peers_found_a_group_under_any_fixed_delay(latency):
    # before the fix: from 1.5 s on (a round trip of 3 s, over half the 5 s promise) no view, ever
    net, at = founded(3, latency)
    assert at is not None, f"no group after 200 s at a delay of {latency} s"
    for p in net.pids:
        net.send(p, f"hello from {p}")
    net.run(until=at + 20 * latency + 10, exact=True)
    for p in net.pids:
        assert views(net, p) == [tuple(net.pids)]  # one view: nobody was suspected, nobody removed
        assert sorted(texts(net, p)) == sorted(f"hello from {q}" for q in net.pids)
    check(net)
