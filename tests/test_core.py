"""The pure core: Lamport rules, tie-break, premature and duplicate ACKs, head-of-line blocking."""

import pytest

from tom.core import Core, LamportClock
from tom.errors import FrameError, UsageError
from tom.frames import Ack, Acks, Message

A, B, C = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"
GROUP = [A, B, C]


def texts(ready):
    return [d.text for d in ready.deliveries]


def test_lamport_tick_and_observe():
    clock = LamportClock()
    assert clock.tick() == 1
    assert clock.observe(10) == 11
    assert clock.observe(3) == 12


def test_broadcast_ticks_and_stamps_the_message():
    core = Core(A, GROUP)
    msg = core.broadcast("hi", sent_at=5.0)
    assert msg == Message(1, A, "hi", 5.0)
    assert core.ready().sends == [((B, C), msg)]


def test_receive_merges_clock_and_acks_everyone():
    core = Core(B, GROUP)
    core.clock.time = 3
    core.receive(A, Message(10, A, "x"))
    assert core.clock.time == 11
    assert core.ready().sends == [((A, C), Ack(10, A))]


def test_message_delivers_only_when_every_member_acked():
    core = Core(B, GROUP)
    core.receive(A, Message(1, A, "x"))
    assert texts(core.ready()) == []
    core.receive(C, Ack(1, A))
    ready = core.ready()
    assert texts(ready) == ["x"]
    assert ready.deliveries[0].index == 1


def test_own_message_needs_everyone_elses_ack():
    core = Core(A, GROUP)
    core.broadcast("mine")
    core.ready()
    core.receive(B, Ack(1, A))
    assert texts(core.ready()) == []
    core.receive(C, Ack(1, A))
    assert texts(core.ready()) == ["mine"]


def test_equal_clocks_tie_break_by_pid_port_as_integer():
    hi, lo = "127.0.0.1:10000", "127.0.0.1:9000"  # as strings "1..." < "9...", as ports 9000 < 10000
    core = Core(hi, [hi, lo])
    core.broadcast("from hi")  # clock 1
    core.receive(lo, Message(1, lo, "from lo"))
    core.receive(lo, Ack(1, hi))
    assert texts(core.ready()) == ["from lo", "from hi"]


def test_premature_ack_reserves_the_entry_and_body_fills_it():
    core = Core(B, GROUP)
    core.receive(C, Ack(1, A))  # C's ACK overtook A's MESSAGE
    st = core.status()
    assert [(p.clock, p.pid, p.text, p.acks) for p in st.pending] == [(1, A, None, (C,))]
    assert texts(core.ready()) == []
    core.receive(A, Message(1, A, "late body"))
    assert texts(core.ready()) == ["late body"]


def test_duplicate_ack_never_counts_twice():
    core = Core(B, ["127.0.0.1:5000", B, C, "127.0.0.1:5003"])
    core.receive(A, Message(1, A, "x"))
    core.receive(C, Ack(1, A))
    core.receive(C, Ack(1, A))  # a counter would now reach 4 of 4
    assert texts(core.ready()) == []
    assert core.status().pending[0].missing == ("127.0.0.1:5003",)


def test_duplicate_message_is_ignored():
    core = Core(B, GROUP)
    core.receive(A, Message(1, A, "x"))
    core.ready()
    core.receive(A, Message(1, A, "x"))
    assert core.ready().sends == []
    assert len(core.queue) == 1


def test_stale_frames_after_delivery_reserve_nothing():
    core = Core(B, GROUP)
    core.receive(A, Message(1, A, "x"))
    core.receive(C, Ack(1, A))
    assert texts(core.ready()) == ["x"]
    core.receive(C, Ack(1, A))
    core.receive(A, Message(1, A, "x"))
    assert len(core.queue) == 0
    assert core.ready().sends == []


def test_head_of_line_blocking_then_cascade():
    core = Core(C, GROUP)
    core.receive(A, Message(1, A, "head"))          # head: missing B's ack
    core.receive(B, Message(2, B, "second"))
    core.receive(A, Ack(2, B))
    core.receive(A, Message(3, A, "third"))
    core.receive(B, Ack(3, A))
    assert texts(core.ready()) == []                # both behind the head are complete, but wait
    assert [p.missing for p in core.status().pending] == [(B,), (), ()]
    core.receive(B, Ack(1, A))
    assert texts(core.ready()) == ["head", "second", "third"]


def test_frames_from_non_members_are_rejected_without_state_change():
    core = Core(B, GROUP)
    with pytest.raises(FrameError):
        core.receive("127.0.0.1:6000", Ack(1, A))
    with pytest.raises(FrameError):
        core.receive(C, Ack(1, "127.0.0.1:6000"))
    with pytest.raises(FrameError):
        core.receive(C, Message(1, A, "relayed"))
    assert len(core.queue) == 0 and core.clock.time == 0


def test_core_requires_itself_in_the_group():
    with pytest.raises(UsageError):
        Core("127.0.0.1:9", GROUP)


def test_stats_count_premature_acks_and_releases_behind_the_head():
    core = Core(C, GROUP)
    core.receive(B, Ack(1, A))                      # premature: it overtook A's message
    core.receive(B, Ack(1, A))                      # the same again: not a second premature ACK
    core.receive(B, Message(2, B, "second"))        # complete once A acks it ...
    core.receive(A, Ack(2, B))                      # ... which it does: but (1, A) is the head
    assert core.stats == {"premature_acks": 1, "released_behind_head": 0, "divergence_alarms": 0}
    core.receive(A, Message(1, A, "head"))          # the head completes: both leave together
    assert texts(core.ready()) == ["head", "second"]
    assert core.stats == {"premature_acks": 1, "released_behind_head": 1, "divergence_alarms": 0}


def test_acks_of_a_run_of_messages_go_out_as_one_frame_and_count_as_one_ack_each():
    """Messages handled in one step are acknowledged in one ACKS frame per origin, and an ACKS
    frame counts as exactly one ACK per clock (a repeat counts for nothing)."""
    core = Core(B, [A, B, C])
    for clock in (1, 2, 3):
        core.receive(A, Message(clock, A, f"m{clock}"))
    core.receive(C, Message(1, C, "c1"))
    assert core.ready().sends == [((A, C), Acks((1, 2, 3), A)), ((A, C), Ack(1, C))]
    core.receive(C, Acks((1, 2), A))
    core.receive(C, Acks((1, 2), A))  # a repeat: no second ACK
    out = core.ready()
    assert [(d.clock, d.pid) for d in out.deliveries] == [(1, A)]  # (1, C) still needs A's ACK
    core.receive(A, Ack(1, C))
    assert [(d.clock, d.pid) for d in core.ready().deliveries] == [(1, C), (2, A)]


def test_a_frame_between_acks_splits_the_run():
    """An ACK never moves past a frame sent before or after it: runs only merge ACKs back to back."""
    core = Core(B, [A, B, C])
    core.receive(A, Message(1, A, "a1"))
    core.broadcast("b")
    core.receive(A, Message(2, A, "a2"))
    kinds = [type(f).__name__ for _, f in core.ready().sends]
    assert kinds == ["Ack", "Message", "Ack"]
