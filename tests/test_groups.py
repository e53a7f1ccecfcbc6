"""Groups, not view numbers, and a primary component of the neighbors file (issue 25), on the pure core.

* A view change keeps a primary component of the file as well as of the view before it: a group
  that shrinks step by step stops at the file's majority (no deliveries, its users' messages held,
  the NoQuorum notice); with ``last_man_standing`` it goes on (`tom.core.quorum`).
* A REMOVED names its group: one from a peer of another group does nothing to a peer with a quorum,
  and makes a peer without one join again (`Peers.removed_by`).
"""

from __future__ import annotations

import pytest

from guarantees import check
from simnet import Network, tag
from tom.codec.frames import Heartbeat, Removed
from tom.core import Core, ViewDelivery, has_quorum
from tom.core.quorum import lost_quorum, may_change_without
from tom.core.records import View


def views_of(net: Network, pid: str) -> list[ViewDelivery]:
    return [d for d in net.nodes[pid].delivered if isinstance(d, ViewDelivery)]


def texts_of(net: Network, pid: str) -> list[str]:
    return [d.text for d in net.nodes[pid].delivered if not isinstance(d, ViewDelivery)]


def shrinking(last_man_standing: bool, order: str = "lamport") -> tuple[Network, list[str]]:
    """A 5-peer file, all in one group; then three crash, one every 20 s, and a survivor sends."""
    net = Network.fixed(5, expected=True, order=order, last_man_standing=last_man_standing)
    notices: dict[str, list[str]] = {p: [] for p in net.pids}
    net.on_step = lambda node, ready: notices[node.pid].extend(map(tag, ready.notices))
    a, b, c, d, e = net.pids
    for p in net.pids:
        net.start(p)
    net.run(until=10, exact=True)
    assert {views_of(net, p)[-1].members for p in net.pids} == {tuple(net.pids)}
    for k, victim in enumerate((e, d, c)):
        net.crash(victim)
        net.run(until=30 + 20 * k, exact=True)
    net.send(a, "after")
    net.run(until=100, exact=True)
    return net, notices


@pytest.mark.parametrize("order", ["lamport", "sequencer", "causal"])
def test_a_group_that_shrinks_stops_at_the_majority_of_the_file(order):
    net, notices = shrinking(False, order)
    a, b, c = net.pids[:3]
    for p in (a, b):
        members = [v.members for v in views_of(net, p)]
        assert members[-1] == (a, b, c), members  # 3 of 5: removing c would leave 2 of the file's 5
        core = net.cores[p]
        assert core.no_quorum == (2, 3)
        assert "no-quorum" in notices[p]
    assert texts_of(net, a) == [] and texts_of(net, b) == []  # nothing delivered, "after" held
    assert [t for t, _ in net.cores[a].held.texts] == ["after"]


def test_with_last_man_standing_it_goes_on():
    net, notices = shrinking(True)
    a, b = net.pids[:2]
    for p in (a, b):
        assert views_of(net, p)[-1].members == (a, b)
        assert net.cores[p].no_quorum is None
        assert texts_of(net, p) == ["after"]
    check(net)


def test_the_file_rule_and_founding_use_one_has_quorum():
    file = frozenset("ABCDE")
    # a view of A B C shrinking to A B: a majority of the view, not of the file
    assert may_change_without(frozenset("ABC"), {"C"}, (), True)
    assert not may_change_without(frozenset("ABC"), {"C"}, (), True, file)
    assert may_change_without(frozenset("ABC"), set(), (), True, file)  # (a change removing nobody)
    view = View(1, frozenset("ABC"), dict.fromkeys("ABC", 1), "A", "A/1")
    assert lost_quorum(view, {"C"}, {}) is None
    assert lost_quorum(view, {"C"}, {}, file) == (2, 3)
    assert lost_quorum(view, set(), {}, file) is None  # all here: the view was decided by them
    # whatever sets the two rules see, two primaries of the file never exist at once
    sides = [set(s) for s in ("AB", "CDE", "ABC", "DE", "A", "BCDE")]
    for x in sides:
        for y in sides:
            if not x & y:
                assert not (has_quorum(file, x) and has_quorum(file, y))


def group_of_three() -> Network:
    net = Network.fixed(3, expected=True)
    for p in net.pids:
        net.start(p)
    net.run(until=10, exact=True)
    return net


def test_a_removed_of_another_group_does_nothing_to_a_peer_with_a_quorum():
    net = group_of_three()
    a, _, c = net.pids
    core = net.cores[a]
    view = core.view
    core.receive(c, Removed(5, "127.0.0.1:5009/7"))
    ready = core.ready()
    assert core.mode == "normal" and core.view == view
    assert not ready.notices


def test_a_removed_of_another_group_makes_a_peer_without_a_quorum_rejoin():
    net = Network.fixed(3, expected=True)
    a, b, c = net.pids
    net.start(a)
    net.start(b)
    net.run(until=10, exact=True)
    net.send(a, "mine")
    net.crash(b)  # before anything of "mine" was acknowledged: A alone, 1 of the file's 3
    net.run(until=30, exact=True)
    core = net.cores[a]
    assert core.no_quorum is not None and core.view.members == frozenset((a, b))
    net.start(c)  # a peer of the file, connected: it speaks for a group A never was in
    net.run(until=30.5, exact=True)
    assert core.mode == "normal"
    core.receive(c, Removed(1, core.view.group))  # (our own group, not a newer view: nothing)
    assert core.mode == "normal"
    core.receive(c, Removed(1, "127.0.0.1:5002/9"))
    ready = core.ready()
    assert core.mode == "joining" and "rejoining" in map(tag, ready.notices)
    assert [t for _, t, _ in core.held.resubmit] == ["mine"]  # sent again once admitted


def test_a_heartbeat_of_another_group_is_not_compared_with_ours():
    net = group_of_three()
    a, b, _ = net.pids
    core = net.cores[a]
    # b's view 1 of another group claims deliveries ours never had: no alarm, no change of ours
    core.receive(b, Heartbeat(core.view.id, 9, 0x1234, (99, b), "127.0.0.1:5001/9"))
    assert not core.ready().alarms
    assert b in core.peers.elsewhere(core.view)
