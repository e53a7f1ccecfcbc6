"""Shared suspicions (`tom.core.reach`, issue 25 hole 2): who the coordinator removes when a member
cannot reach another, and which joiner it does not admit — the rule as a table, then each case on the
simulated network (`simnet`, simulated seconds: the default timing suspects after 5 s of silence and
verifies 1 s later).

The two end-to-end cases of the issue (neighbors files that differ, a one-way cut) are in
``test_dynamic.py`` (``test_hole2_*``)."""

from __future__ import annotations

import pytest

from guarantees import check
from simnet import Network
from tom.core import ViewDelivery
from tom.core.reach import removals
from tom.codec.frames import Sees, Suspect

A, B, C, D, E = (f"127.0.0.1:500{i}" for i in range(5))
ABCD = {A, B, C, D}


@pytest.mark.parametrize("reported,removed", [
    ({B: {D}}, {D: (B, D)}),  # a one-way cut: B cannot hear D, nobody else reports: D goes
    ({B: {D}, D: {B}}, {D: (B, D)}),  # a pair that cannot hear each other: the larger pid goes
    ({B: {A, C, D}}, {B: (B, C)}),  # B's receiver is broken (it reports everyone): B goes, nobody else
    ({B: {C, D}}, {B: (B, C)}),  # B reports a majority of the others: B is the one cut off
    ({B: {D}, C: {B}}, {B: (B, D)}),  # B reports D, but C cannot hear B either: B is the one cut off
    ({B: {D}, C: {D}}, {D: (B, D)}),  # two members cannot hear D: D goes (once)
    ({B: {A}}, {}),  # a report of the coordinator removes nobody (a side of a partition reports it)
    ({A: {D}}, {}),  # the coordinator's own suspicions go through its detector, not this rule
    ({B: {D}, C: {B}, D: {C}}, {}),  # B, C and D all cut off: that is the majority, never removed
    ({E: {D}}, {}),  # not a member
])
def test_who_the_shared_suspicions_remove(reported, removed):
    assert removals(ABCD, A, reported) == removed


def test_what_a_cut_off_member_reports_counts_against_nobody_else():
    """B's receiver is broken (it reports everyone) and, apart from that, C cannot hear D: B goes for
    its own reports, and D (not C, whom only B reports) for C's."""
    assert removals({A, B, C, D, E}, A, {B: {A, C, D, E}, C: {D}}) == {B: (B, C), D: (C, D)}


def test_never_the_group_majority_nor_half():
    assert removals({A, B, C}, A, {B: {C}}) == {C: (B, C)}
    assert removals({A, B}, A, {B: {A}}) == {}
    # B and C cut off from each other and from D's side: removing two of four leaves half: nobody
    assert removals(ABCD, A, {B: {D}, D: {B}, C: {D}, E: {C}}) == {D: (B, D)}
    assert removals(ABCD, A, {B: {C}, C: {D}, D: {B}}) == {}


# -- on the simulated network ------------------------------------------------------------------


def _group(n: int = 4, until: float = 11.0, **options):
    """The first ``n`` of four peers founded as one view; every notice and frame recorded per peer."""
    sim = Network.fixed(4, expected=True, **options)
    notices: dict[str, list] = {}
    frames: dict[str, list] = {}

    def step(node, ready):
        notices.setdefault(node.pid, []).extend(ready.notices)
        frames.setdefault(node.pid, []).extend((sim.now, dst, f) for dst, f in ready.sends)

    sim.on_step = step
    for pid in sim.pids[:n]:
        sim.push(0.0, "start", pid)
    sim.run(until=until)
    assert all(len(sim.nodes[p].core.view.members) == n for p in sim.pids[:n])
    return sim, notices, frames


def _traffic(sim, senders, start, count=10):
    sent = []
    for k in range(count):
        for pid in senders:
            sim.push(start + k, "send", pid, f"{pid[-1]}-{k}")
            sent.append(f"{pid[-1]}-{k}")
    return sent


def _members(sim, pid):
    return set(sim.nodes[pid].core.view.members)


def _delivered_all(sim, pids, sent):
    for pid in pids:
        texts = {x.text for x in sim.nodes[pid].delivered if not isinstance(x, ViewDelivery)}
        assert set(sent) <= texts, f"{pid} misses {sorted(set(sent) - texts)}"


def _unreachable(notices, pid):
    return [(n.reporter, n.target, n.action) for n in notices.get(pid, []) if n.tag == "unreachable"]


def test_a_pair_that_cannot_hear_each_other_loses_the_larger_pid():
    """B and D lose their connection for good (both suspect the other; A hears both): D goes, B stays."""
    sim, notices, _ = _group()
    sim.cut(B, D)
    sent = _traffic(sim, (A, B, C), 12.0)
    sim.run(until=40.0)
    for pid in (A, B, C):
        assert _members(sim, pid) == {A, B, C}
    _delivered_all(sim, (A, B, C), sent)
    assert (B, D, f"removing {D}") in _unreachable(notices, A) or (D, B, f"removing {D}") in _unreachable(notices, A)
    check(sim, liveness=False)


def test_a_member_whose_receiver_is_broken_is_the_one_removed():
    """Nothing reaches B any more (its sends still go): B reports everyone, nobody reports B; A removes
    B — not the three members B cannot hear — and A, C, D go on."""
    sim, notices, _ = _group()
    for src in (A, C, D):
        sim.hold(src, B)
    sent = _traffic(sim, (A, C, D), 12.0)
    sim.run(until=40.0)
    for pid in (A, C, D):
        assert _members(sim, pid) == {A, C, D}
    _delivered_all(sim, (A, C, D), sent)
    assert any(r == B and action == f"removing {B}" for r, _, action in _unreachable(notices, A))
    check(sim, liveness=False)


def test_a_one_way_cut_removes_the_peer_one_member_cannot_hear_and_the_reporter_says_so():
    """D's frames stop reaching B: B tells A (SUSPECT, once a heartbeat period while it lasts) and says
    so; A removes D and says so."""
    sim, notices, frames = _group()
    sim.hold(D, B)
    sent = _traffic(sim, (A, B, C), 12.0)
    sim.run(until=40.0)
    for pid in (A, B, C):
        assert _members(sim, pid) == {A, B, C}
    _delivered_all(sim, (A, B, C), sent)
    assert (B, D, f"telling {A}") in _unreachable(notices, B)
    assert (B, D, f"removing {D}") in _unreachable(notices, A)
    suspects = [(t, dst, f) for t, dst, f in frames[B] if isinstance(f, Suspect)]
    assert suspects and all(dst == (A,) and f.pid == D for _, dst, f in suspects)
    # no SUSPECT before B's own detector verified D (5 s of silence + 1 s), none after D was removed
    assert all(t - suspects[0][0] < 3 for t, _, _ in suspects)
    check(sim, liveness=False)


def test_without_a_quorum_rule_the_one_way_cut_removes_the_same_peer():
    """``--quorum none``: the same removal; D, told it was removed, stops (it does not join again)."""
    sim, notices, _ = _group(quorum="none")
    sim.hold(D, B)
    sent = _traffic(sim, (A, B, C), 12.0)
    sim.run(until=40.0)
    for pid in (A, B, C):
        assert _members(sim, pid) == {A, B, C}
    _delivered_all(sim, (A, B, C), sent)
    assert (B, D, f"removing {D}") in _unreachable(notices, A)
    assert sim.nodes[D].core.mode == "removed"
    check(sim, liveness=False)


def test_a_joiner_one_member_cannot_reach_is_not_admitted_until_it_can():
    """D starts after A B C run view 1; B has no connection to D. A admits D only once B reports it
    (SEES): not while the cut lasts (A says B cannot reach D, and tells D, whose not-admitted notice
    names B), and at once when the connection comes back."""
    sim, notices, frames = _group(3)
    sim.cut(B, D)
    sim.push(12.0, "start", D)
    sent = _traffic(sim, (A, B, C), 13.0)
    sim.run(until=35.0)
    for pid in (A, B, C):
        assert _members(sim, pid) == {A, B, C}
    _delivered_all(sim, (A, B, C), sent)
    assert (B, D, "not admitting it") in _unreachable(notices, A)
    assert (B, D) in sim.nodes[A].core.status().unreachable
    told = [n for n in notices.get(D, []) if n.tag == "not-admitted"]
    assert told and told[-1].unreachable == (B,)
    assert any(isinstance(f, Sees) and f.pid == D for _, _, f in frames[C])
    assert not any(isinstance(f, Sees) for _, _, f in frames[B])
    sim.heal()
    sim.run(until=45.0)
    for pid in (A, B, C, D):
        assert _members(sim, pid) == {A, B, C, D}
    assert sim.nodes[A].core.status().unreachable == ()
    check(sim)


def test_nothing_is_sent_while_every_member_hears_every_other():
    """The cost when nothing is wrong: no SUSPECT at all; a SEES only for a JOIN."""
    sim, _, frames = _group(until=30.0)
    assert not [f for fs in frames.values() for _, _, f in fs if isinstance(f, (Suspect, Sees))]


def test_what_a_suspicion_costs_while_it_lasts():
    """The frames the rule adds, per second of simulated time, while B cannot reach a joiner D (it
    asks to join for ever): one SEES a second from C (one per JOIN that reaches it), one SUSPECT a
    second from A telling D who does not reach it; none from B. The message path adds none."""
    sim, notices, frames = _group(3)
    sim.cut(B, D)
    sim.push(12.0, "start", D)
    sim.run(until=52.0)
    window = [(pid, type(f).__name__, len(dst)) for pid, fs in frames.items() for t, dst, f in fs
              if 22.0 <= t < 52.0 and isinstance(f, (Suspect, Sees))]
    rate = {key: sum(n for p, k, n in window if (p, k) == key) / 30.0 for key in {(p, k) for p, k, _ in window}}
    assert rate == {(C, "Sees"): pytest.approx(1.0, abs=0.1), (A, "Suspect"): pytest.approx(1.0, abs=0.1)}


def test_a_report_of_members_the_coordinator_finds_dead_itself_costs_nobody():
    """C reports B and D, which crashed: the coordinator A finds them dead too. C reports more than half
    of the others, but that is no broken receiver: it must not be removed (partition sweep seed 22 in
    every order, once view changes were ballots: A alone stayed flushing for ever)."""
    assert removals(ABCD, A, {C: {B, D}}, dead={B, D}) == {}
    assert removals(ABCD, A, {C: {B, D}}) == {C: (C, B)}  # (what it would cost if A heard B and D)


@pytest.mark.parametrize("first", [B, D])
def test_two_members_that_stop_hearing_each_other_a_moment_apart_lose_the_larger_pid(first):
    """A one-way cut on TCP soon cuts the other way too (the receiver's acknowledgements are lost, so
    the sender's window stops): here ``first``'s frames stop reaching the other at 12 s, the other's
    1.5 s later (more than a heartbeat period: the reports come in different periods). Whichever report reaches A first, A holds it a heartbeat period, gets the other's, and
    removes D, the larger pid — the same peer whichever way the cut went first."""
    second = D if first == B else B
    sim, notices, _ = _group()
    sent = _traffic(sim, (A, B, C), 12.0)
    sim.run(until=12.0)
    sim.hold(first, second)
    sim.run(until=13.5)
    sim.hold(second, first)
    sim.run(until=40.0)
    for pid in (A, B, C):
        assert _members(sim, pid) == {A, B, C}, (pid, _members(sim, pid))
    _delivered_all(sim, (A, B, C), sent)
    check(sim, liveness=False)
