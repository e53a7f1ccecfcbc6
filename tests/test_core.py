"""The pure core: Lamport rules, tie-break, premature and duplicate ACKs, head-of-line blocking;
cumulative ACKs (wire v2: marks, alone or riding on a message) and the explicit ACKs of wire 1."""

import pytest

from tom.core import Core, LamportClock
from tom.errors import FrameError, UsageError
from tom.codec.frames import Ack, Acks, Marks, Message, Relay

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
    assert core.ready().sends == [((A, C), Marks((10, 0, 0)))]  # B holds A's messages up to clock 10


def test_wire_1_acknowledges_each_message():
    core = Core(B, GROUP, wire=1)
    core.receive(A, Message(10, A, "x"))
    assert core.ready().sends == [((A, C), Ack(10, A))]


def test_marks_of_a_step_go_out_once_riding_on_the_last_message():
    """Everything received in a step is acknowledged once, at its end: on this peer's message when
    that is the last frame of the step (it then carries every mark), in a MARKS frame otherwise."""
    core = Core(B, GROUP)
    core.receive(A, Message(1, A, "a1"))
    core.receive(C, Message(2, C, "c2"))
    core.receive(A, Message(3, A, "a3"))
    msg = core.broadcast("b")
    assert core.ready().sends == [((A, C), Message(msg.clock, B, "b", None, None, (3, 0, 2)))]
    core.receive(A, Message(7, A, "a7"))
    b2 = core.broadcast("b2")
    core.receive(C, Message(8, C, "c8"))  # after b2 in the step, still before b2 leaves: it rides on b2
    assert core.ready().sends == [((A, C), Message(b2.clock, B, "b2", None, None, (7, 0, 8)))]
    core.connected(A, 0)
    core.connected(C, 0)
    core.broadcast("b3")
    core.tick(100.0)  # a heartbeat
    core.receive(A, Message(20, A, "a20"))  # then the step's last frame is not a message of B's
    sends = core.ready().sends
    assert [type(f).__name__ for _, f in sends] == ["Message", "Heartbeat", "Marks"]
    assert sends[0][1].marks is None and sends[2][1] == Marks((20, 0, 8))
    core.receive(A, Message(21, A, "a21"))
    core.tick(200.0)  # a heartbeat names the last delivery here: the marks go before it
    assert [(type(f).__name__, getattr(f, "marks", None)) for _, f in core.ready().sends] == [
        ("Marks", (21, 0, 8)), ("Heartbeat", None)]
    assert core.ready().sends == []  # nothing new held: nothing to acknowledge


def test_a_mark_acknowledges_every_earlier_message_of_its_origin_once():
    core = Core(B, GROUP)
    for clock in (1, 2, 3):
        core.receive(A, Message(clock, A, f"a{clock}"))
    core.ready()
    core.receive(C, Marks((2, 0, 0)))  # C holds A's messages up to clock 2
    assert texts(core.ready()) == ["a1", "a2"]
    core.receive(C, Marks((2, 0, 0)))  # a repeat (e.g. sent again after a reconnect): nothing
    core.receive(C, Marks((1, 0, 0)))  # an older one: nothing
    assert texts(core.ready()) == [] and [p.missing for p in core.status().pending] == [(C,)]
    core.receive(C, Message(4, C, "c4", None, None, (3, 0, 0)))  # the mark rides on C's message
    assert texts(core.ready()) == ["a3"]  # (4, C) waits for A


def test_marks_that_overtake_a_message_count_when_it_comes():
    """C's marks can reach B before A's message does (other links): the entry starts acknowledged."""
    core = Core(B, GROUP)
    core.receive(C, Marks((5, 0, 0)))
    assert core.status().pending == ()  # a mark reserves nothing: it covers what B will get
    core.receive(A, Message(5, A, "a5"))
    assert texts(core.ready()) == ["a5"]
    assert core.stats["premature_acks"] == 1  # counted as an ACK that overtook its message


def test_own_messages_are_acknowledged_by_the_others_marks():
    core = Core(A, GROUP)
    core.broadcast("m1")
    core.broadcast("m2")
    core.ready()
    core.receive(B, Marks((2, 0, 0)))
    assert [p.missing for p in core.status().pending] == [(C,), (C,)]
    core.receive(C, Marks((1, 0, 0)))
    assert texts(core.ready()) == ["m1"]


def test_a_relay_is_acknowledged_explicitly_not_by_a_mark():
    """A mark speaks for what came from the origin itself (its link is FIFO); a relayed message
    comes on another link, so it gets an explicit ACK and no mark moves."""
    core = Core(B, GROUP)
    core._on_relay(C, Relay(4, A, "relayed"))
    assert core.ready().sends == [((A, C), Ack(4, A))]


def test_marks_must_name_every_member_of_the_view():
    core = Core(B, GROUP)
    with pytest.raises(FrameError):
        core.receive(C, Marks((1, 2)))
    with pytest.raises(FrameError):
        Core(B, GROUP, order="sequencer").receive(C, Marks((1, 0, 0)))
    with pytest.raises(FrameError):  # rejected whole: the message is not taken either
        core.receive(C, Message(1, C, "c1", None, None, (1, 0)))
    assert core.status().pending == () and core.ready().sends == []


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
    assert len(core.order) == 1


def test_stale_frames_after_delivery_reserve_nothing():
    core = Core(B, GROUP)
    core.receive(A, Message(1, A, "x"))
    core.receive(C, Ack(1, A))
    assert texts(core.ready()) == ["x"]
    core.receive(C, Ack(1, A))
    core.receive(A, Message(1, A, "x"))
    assert len(core.order) == 0
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
    assert len(core.order) == 0 and core.clock.time == 0


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
    """Wire 1: messages handled in one step are acknowledged in one ACKS frame per origin, and an ACKS
    frame counts as exactly one ACK per clock (a repeat counts for nothing)."""
    core = Core(B, [A, B, C], wire=1)
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
    """Wire 1: an ACK never moves past a frame sent before or after it: runs only merge ACKs back to back."""
    core = Core(B, [A, B, C], wire=1)
    core.receive(A, Message(1, A, "a1"))
    core.broadcast("b")
    core.receive(A, Message(2, A, "a2"))
    kinds = [type(f).__name__ for _, f in core.ready().sends]
    assert kinds == ["Ack", "Message", "Ack"]


def test_pending_queue_leaves_in_key_order_whatever_the_order_entries_come_in():
    """The queue merges one FIFO per origin: entries reserved out of their origin's order (a relay, an
    ACK before its message) still leave in ``(clock, pid_key)`` order; checked against a sorted model."""
    import random

    from tom.core import PendingQueue
    from tom.codec.pid import pid_key

    for seed in range(40):
        rng = random.Random(seed)
        queue, model = PendingQueue(), {}
        pids = [A, B, C, "127.0.0.1:10000", "my-host:80"][:rng.randint(1, 5)]
        for _ in range(300):
            if rng.random() < 0.55:
                clock, pid = rng.randint(0, 50), rng.choice(pids)
                model[(clock, pid)] = queue.reserve(clock, pid)
            elif model:
                first = min(model, key=lambda k: (k[0], pid_key(k[1])))
                assert queue.head() is model[first]
                assert queue.pop() is model.pop(first)
            assert [(e.clock, e.pid) for e in queue] == sorted(model, key=lambda k: (k[0], pid_key(k[1])))
        assert len(queue) == len(model) and (queue.head() is None) == (not model)


def test_own_messages_carry_their_send_time_at_whole_microseconds_also_when_texts_share_it():
    """Texts taken together share one send time (so they go as one run); each own message carries it
    rounded to whole microseconds, and a new send time is rounded anew."""
    from tom.core import Core

    a, b = "127.0.0.1:5000", "127.0.0.1:5001"
    core = Core(a, [a, b], order="lamport")
    times = [1795620084.8137824, 1795620084.8137824, 1795620085.0000004, 7.0000006]
    sent = [core.broadcast(f"t{i}", sent_at=t) for i, t in enumerate(times)]
    assert [m.sent_at for m in sent] == [1795620084.813782, 1795620084.813782, 1795620085.0, 7.000001]


def test_the_lamport_order_knows_who_holds_a_message_from_the_marks_without_touching_its_entries():
    """A member's marks count for every message of an origin up to the mark (`MarkFloors`): the
    message is deliverable once every other member's mark covers it, status and the flush see the
    same holders, and a new view keeps what the old marks said about a message still pending."""
    from tom.core.lamport import LamportOrder

    d = "127.0.0.1:5003"
    order = LamportOrder(A, {"premature_acks": 0})
    order.install((A, B, C), 1, A)
    order.message(B, Message(5, B, "b5"))
    order.message(B, Message(6, B, "b6"))
    entry = order.head()
    assert entry is not None and entry.acks == {A, B}
    assert not order.holds(C, entry) and order.release(frozenset((A, B, C)), False) == []
    touched, top = order.marks(C, (0, 5, 0))
    assert touched and top == 5 and order.holds(C, entry) and C not in entry.acks
    assert [e.text for e in order.release(frozenset((A, B, C)), False)] == ["b5"]
    assert order.waits(order.head(), [A, B, C]) == f"ACKs of {C}"
    order.marks(C, (0, 6, 0))  # (not released yet: a view change comes first)
    order.install((A, B, C, d), 9, A)  # b6 still pending: who held it stays known
    assert order.head().acks == {A, B, C} and not order.holds(d, order.head())


def test_a_direct_text_goes_to_one_peer_and_comes_out_as_a_notice_outside_the_order():
    from tom.codec.frames import Direct
    from tom.core import notices
    from tom.core.group import send_direct

    a, b = "127.0.0.1:5000", "127.0.0.1:5001"
    sender, receiver = Core(a, [a, b]), Core(b, [a, b])
    send_direct(sender, b, "state 1/1: {}")
    out = sender.ready()
    assert out.sends == [((b,), Direct("state 1/1: {}"))] and not out.deliveries
    receiver.receive(a, Direct("state 1/1: {}"))
    got = receiver.ready()
    assert got.notices == [notices.DirectText(a, "state 1/1: {}")] and not got.deliveries
    assert receiver.clock.time == 0  # outside the order: no clock moves
    with pytest.raises(UsageError, match="another peer"):
        send_direct(sender, a, "to myself")
    with pytest.raises(UsageError, match="at most"):
        send_direct(sender, b, "x" * 70_000)
    assert not sender.ready().sends
