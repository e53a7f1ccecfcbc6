"""The catch-up's decisions (`tom.durable.catchup`), sans-IO: positions, what a member serves, and a
restarted peer's side through asks, answers, refusals, silence and a member gone."""

from __future__ import annotations

import json

from tom.codec.frames import CatchUp, History
from tom.durable.catchup import MAX_HISTORY_BYTES, HistoryIndex, Recovery, advance, answer, follows, plan

A, B, C = "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"


def msg(view: int, clock: int, pid: str = A) -> str:
    return json.dumps({"kind": "message", "view": view, "clock": clock, "pid": pid, "text": f"t{clock}"})


def view(v: int) -> str:
    return json.dumps({"kind": "view", "view": v, "members": [A, B], "joined": [], "left": [], "removed": [C]})


def test_positions_count_the_messages_of_a_view_after_its_record():
    assert advance(None, "view", 1) == (1, 0)
    assert advance((1, 0), "message", 1) == (1, 1)
    assert advance((1, 4), "view", 2) == (2, 0)
    assert follows((1, 4), "message", 1) and follows((1, 4), "view", 2)
    assert not follows((1, 4), "message", 2) and not follows((2, 0), "view", 2)


def history(*records: tuple[str, int]) -> HistoryIndex:
    index = HistoryIndex()
    for kind, v in records:
        index.add(kind, v)
    return index


def test_a_member_serves_from_after_the_asked_position_up_to_the_view_asked():
    index = history(("view", 1), ("message", 1), ("message", 1), ("view", 2), ("message", 2), ("view", 3))
    assert plan(index, CatchUp(1, 1, 3)) == (2, 5)  # records from 0: 2, the second message of view 1, to 5
    assert plan(index, CatchUp(1, 2, 3)) == (3, 5)
    assert plan(index, CatchUp(1, 3, 3)) == "none"  # more messages of view 1 than it delivered
    assert plan(index, CatchUp(0, 0, 3)) == "none"  # before its history
    assert plan(index, CatchUp(2, 0, 4)) == "wait"  # view 4 not delivered here yet
    assert plan(index, CatchUp(2, 0, 4), holding=True) == (4, 6)  # ... but held here too: all it has


def test_a_group_founded_again_asks_every_member_in_turn_from_where_the_last_answer_ended():
    r = Recovery(C, (1, 1), patience=5.0)
    step = r.delivered("view", 3, (A, B, C), (A, B, C), "view-3", now=0.0, coordinator=B)  # founded again by B
    assert step is not None and step.sends == [(A, CatchUp(1, 1, 3))]  # (its founder is asked last)
    step = r.history(A, History("end", 1, (msg(1, 5),)), now=0.1)
    assert step is not None and step.sends == [(B, CatchUp(1, 2, 3))] and len(step.records) == 1 and not step.done
    assert r.tick(60.0) is None  # (the founder answers once it decided: it is not timed out)
    step = r.history(B, History("end", 1, (msg(1, 6, B),)), now=61.0)  # B's end of view 1
    assert step is not None and step.done and step.gap is None and step.release == ["view-3"]
    assert [rec["clock"] for rec in step.records] == [6]


def test_the_founder_decides_and_writes_its_end_only_once_every_other_member_holds_the_view():
    r = Recovery(A, (1, 1), patience=5.0)
    step = r.delivered("view", 3, (A, B, C), (A, B, C), "view-3", now=0.0, coordinator=A)
    assert step is not None and step.sends == [(B, CatchUp(1, 1, 3))]
    step = r.history(B, History("end", 0, ()), now=0.1)
    assert step is not None and step.sends == [(C, CatchUp(1, 1, 3))]
    step = r.history(C, History("end", 1, (json.dumps({"kind": "message", "view": 1, "clock": 4, "pid": C,
                                                        "text": "t", "pending": True}),)), now=0.2)
    assert step is not None and step.offered is not None and (1, 4, C) in step.offered  # decided ...
    assert not step.done and not step.release and r.catching_up  # ... not written: B and C may not hold it
    assert r.delivered("message", 3, (), (), "m", now=0.3) == step.__class__()  # (still held)
    assert r.reported(B, (1, 1)) is None and r.reported(B, (3, 0)) is None  # B wrote view 3
    step = r.gone(C, now=0.4)  # C went away: it wrote the end it was sent, or catches up from here
    assert step is not None and step.done and step.decided and step.release == ["view-3", "m"]


def test_a_member_whose_founder_went_away_before_answering_writes_nothing_until_a_view_names_who_ends_it():
    r = Recovery(C, (1, 1), patience=5.0)
    r.delivered("view", 3, (A, B, C), (A, B, C), "view-3", now=0.0, coordinator=B)
    r.history(A, History("end", 0, ()), now=0.1)
    step = r.gone(B, now=0.2)  # the founder, asked last, is gone
    assert step is not None and not step.done and not step.release and step.gap is None and r.orphaned
    assert any("went away before it ended view 1" in line for line in step.said)
    step = r.tick(6.0)  # (its link may come back: it asks the founder again now and then)
    assert step is not None and step.sends == [(B, CatchUp(1, 1, 3))]
    # a view change removes B: its coordinator A ends view 1 instead, asked last
    step = r.delivered("view", 4, (A, C), (), "view-4", now=7.0, coordinator=A)
    assert step is not None and step.sends == [(A, CatchUp(1, 1, 3))] and not r.orphaned
    step = r.history(A, History("end", 1, (msg(1, 5),)), now=7.1)
    assert step is not None and step.done and step.release == ["view-3", "view-4"]


def test_a_member_whose_founder_went_away_while_another_member_answered_writes_nothing_either():
    """The founder, not asked yet, goes away while another member answers: that answer holds the
    group's history, not how the founder ended the last view, so the member is orphaned, as when the
    founder goes away while asked (fresh run 74: the member wrote view 2 after the other's answer, and
    the other, ending view 1 instead of the founder, delivered 60 messages more in view 1)."""
    r = Recovery(C, (1, 1), patience=5.0)
    r.delivered("view", 3, (A, B, C), (A, B, C), "view-3", now=0.0, coordinator=B)  # asks A, then B
    assert r.gone(B, now=0.1) is None  # the founder goes away while A is asked
    step = r.history(A, History("end", 1, (msg(1, 5),)), now=0.2)
    assert step is not None and [rec["clock"] for rec in step.records] == [5]  # the group's history: written
    assert not step.done and not step.release and step.gap is None and r.orphaned  # ... view 3: not yet
    assert any("went away before it ended view 1" in line for line in step.said)
    # a view change removes B: its coordinator A ends view 1 instead, asked last
    step = r.delivered("view", 4, (A, C), (), "view-4", now=1.0, coordinator=A)
    assert step is not None and step.sends == [(A, CatchUp(1, 2, 3))] and not r.orphaned
    step = r.history(A, History("end", 1, (msg(1, 6),)), now=1.1)  # A's end of view 1
    assert step is not None and step.done and step.release == ["view-3", "view-4"]
    assert [rec["clock"] for rec in step.records] == [6]


def test_an_orphaned_member_admitted_again_drops_what_it_held_and_catches_up_to_the_new_view():
    r = Recovery(C, (1, 1), patience=5.0)
    r.delivered("view", 2, (B, C), (B, C), "view-2", now=0.0, coordinator=B)
    r.delivered("message", 2, (), (), "m", now=0.1)
    r.gone(B, now=0.2)
    assert r.orphaned
    step = r.delivered("view", 3, (A, C), (A, C), "view-3", now=1.0, coordinator=A)  # founded again, by A
    assert step is not None and step.dropped == 2 and step.sends == [(A, CatchUp(1, 1, 3))]
    step = r.history(A, History("end", 0, ()), now=1.1)
    assert step is not None and step.done and step.release == ["view-3"]


def test_an_answer_is_cut_into_frames_that_fit_and_the_last_says_end():
    records = [msg(1, k) + "x" * 500 for k in range(400)]
    frames = answer(records)
    assert len(frames) > 1 and all(sum(len(r) for r in f.records) <= MAX_HISTORY_BYTES + 600 for f in frames)
    assert [f.status for f in frames] == ["more"] * (len(frames) - 1) + ["end"]
    assert [r for f in frames for r in f.records] == records and frames[0].total == 400
    assert answer([]) == [History("end", 0, ())]


def test_a_restarted_peer_holds_the_new_view_asks_an_old_member_and_releases_after_the_end():
    r = Recovery(C, (1, 1), patience=5.0)
    step = r.delivered("view", 3, (A, B, C), (C,), "view-3", now=0.0)
    assert step is not None and step.sends == [(A, CatchUp(1, 1, 3))]
    assert r.delivered("message", 3, (), (), "m", now=0.1) is not None  # held too
    step = r.history(A, History("more", 3, (msg(1, 5), view(2))), now=0.2)
    assert step is not None and [rec["kind"] for rec in step.records] == ["message", "view"] and not step.release
    step = r.history(A, History("end", 3, (msg(2, 9),)), now=0.3)
    assert step is not None and step.done and step.release == ["view-3", "m"]
    assert r.last == (2, 1) and not r.catching_up


def test_a_gap_is_written_only_once_every_member_asked_said_it_does_not_hold_the_events():
    r = Recovery(C, (1, 1), patience=5.0)
    r.delivered("view", 3, (A, B, C), (C,), "view-3", now=0.0)
    step = r.history(A, History("none"), now=1.0)
    assert step is not None and step.sends == [(B, CatchUp(1, 1, 3))]
    step = r.history(B, History("none"), now=1.5)
    assert step is not None and step.done and step.gap == {"view": 3, "after": [1, 1], "reason": step.gap["reason"]}
    assert step.release == ["view-3"] and any("lost" in line for line in step.said)


def test_a_member_silent_or_gone_before_answering_is_waited_for_since_its_disk_may_hold_the_events():
    # (a gap written then would lose what the member gone holds on its disk: tom check --peers 2 --crash
    # 1,2 --restart 1,2 found it, the one member that could serve killed during the catch-up)
    r = Recovery(C, (1, 1), patience=5.0)
    r.delivered("view", 3, (A, B, C), (C,), "view-3", now=0.0)
    step = r.history(A, History("none"), now=1.0)
    assert step is not None and step.sends == [(B, CatchUp(1, 1, 3))]
    assert r.tick(5.0) is None
    step = r.tick(7.0)  # B silent for longer than the patience: nobody left to ask, B waited for
    assert step is not None and not step.done and step.gap is None and not step.release and r.stalled
    assert any("nothing is written until one of them answers" in line for line in step.said)
    assert r.tick(10.0) is None
    step = r.tick(12.5)  # asked again, a patience later (it may be back)
    assert step is not None and step.sends == [(B, CatchUp(1, 1, 3))] and not step.said
    step = r.gone(B, now=13.0)  # gone again: waited for again, said once
    assert step is not None and not step.done and not step.said and r.stalled
    step = r.tick(18.5)
    assert step is not None and step.sends == [(B, CatchUp(1, 1, 3))]
    step = r.history(B, History("end", 1, (msg(1, 5),)), now=19.0)
    assert step is not None and step.done and step.gap is None and step.release == ["view-3"]
    assert r.last == (1, 2) and not r.stalled and not r.went_away


def test_a_record_that_does_not_follow_is_refused_and_the_next_member_asked():
    r = Recovery(C, (1, 1), patience=5.0)
    r.delivered("view", 3, (A, B, C), (C,), "view-3", now=0.0)
    step = r.history(A, History("more", 1, (msg(2, 4),)), now=0.1)  # a message of view 2 before view 2's record
    assert step is not None and step.sends == [(B, CatchUp(1, 1, 3))] and not step.records


def test_an_answer_from_a_member_not_asked_is_ignored_and_a_member_gone_is_replaced():
    r = Recovery(C, (1, 1), patience=5.0)
    r.delivered("view", 3, (A, B, C), (C,), "view-3", now=0.0)
    assert r.history(B, History("end", 1, (msg(1, 5),)), now=0.1) is None
    step = r.gone(A, now=0.2)
    assert step is not None and step.sends == [(B, CatchUp(1, 1, 3))]


def test_a_new_data_folder_owes_nothing():
    fresh = Recovery(C, None, patience=5.0)
    assert fresh.delivered("view", 3, (A, B, C), (C,), "v", now=0.0) is None


def test_a_member_that_left_its_view_to_found_the_group_again_is_in_no_group_for_a_joiner():
    """A joiner heard A announce view 1; A then asks to join with its history ending at view 1 of the
    same group (it left the view to found the group again): the joiner takes A to be in no group, so
    the founding goes on (a stale JOIN, with a history ending before what A announced, changes nothing)."""
    from tom.core.peers import Peers

    peers = Peers()
    peers.announced(A, 1, "g")
    peers.join(A, 7, None, 0.0, (0, ""))  # a JOIN from before (no history): A is still in view 1
    assert peers.views[A] == 1
    peers.announced(A, 3, "g")
    peers.join(A, 7, None, 0.0, (2, "g"))  # stale: its history ends before the view it announced
    assert peers.views[A] == 3
    peers.join(A, 7, None, 1.0, (3, "g"))
    assert peers.views[A] == 0


def test_a_durable_peer_restarted_into_a_running_group_is_admitted_by_its_first_install():
    """The view change that admits it may reach it before any heartbeat of the member proposing it: it
    is no founding of the group from its data, since its founder would have asked to join first (so
    the restarted peer promises nothing, and takes the INSTALL; promised, it refused the INSTALL until
    the promise lapsed, a second later)."""
    from simnet import Network

    net = Network.fixed(3)
    a, b, c = net.pids
    for p in net.pids:
        net.start(p)
    net.run(until=6.0)
    view = net.cores[a].view
    assert view is not None and c in view.members
    net.crash(c)
    net.run(until=14.0)
    assert c not in net.cores[a].view.members
    net.start(c, resume=(view.id, view.group))
    net.run(until=14.2)  # (simulated: links of 10 ms)
    assert net.cores[c].view is not None and net.cores[c].view.id == net.cores[a].view.id
    assert net.cores[c].founding.promise is None
