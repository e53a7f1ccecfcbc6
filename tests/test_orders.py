"""The three orders on the pure core: what each delivers when, what each refuses, and that the
simulation's checks of each can fail (docs/output-format.md says what each order promises)."""

from __future__ import annotations

import pytest

from tom.core.notices import NoQuorum

from guarantees import breaks_guarantees, first_seed
from simnet import random_scenario
from orders import check_causal
from tom.core import Core, Delivery
from tom.core.causal import CausalOrder
from tom.core.sequencer import SequencerOrder
from tom.errors import FrameError, UsageError
from tom.codec.frames import MAX_FRAME_BYTES, Ack, Marks, Message, Seq, parse_frame

A, B, C = (f"127.0.0.1:{5000 + i}" for i in range(3))


def texts(core: Core) -> list[str]:
    return [d.text for d in core.ready().deliveries if isinstance(d, Delivery)]


def test_sequencer_delivers_in_number_order_not_arrival_order():
    b = Core(B, [A, B, C], order="sequencer")
    b.receive(C, Message(5, C, "second"))
    b.receive(A, Message(3, A, "first"))
    assert texts(b) == []  # no numbers yet
    b.receive(A, Seq(1, (5,), C))  # the sequencer (A, the smallest) numbered C's message first
    assert texts(b) == ["second"]
    b.receive(A, Seq(2, (3,), A))
    assert texts(b) == ["first"]


def test_a_number_may_come_before_its_message():
    b = Core(B, [A, B, C], order="sequencer")
    b.receive(A, Seq(1, (4,), C))
    assert texts(b) == [] and b.status().pending[0].waits == "its text (it is number 1)"
    b.receive(C, Message(4, C, "late"))
    assert texts(b) == ["late"]


def test_the_sequencer_numbers_what_it_receives_in_runs():
    a = Core(A, [A, B, C], order="sequencer")
    a.receive(B, Message(2, B, "x"))
    a.receive(B, Message(3, B, "y"))
    ready = a.ready()
    assert [f for _, f in ready.sends] == [Seq(1, (2, 3), B)]
    assert [d.seq for d in ready.deliveries] == [1, 2]


def test_the_sequencers_own_messages_of_a_step_go_as_one_run_and_their_numbers_as_one_seq():
    """Its numbers wait behind its own messages of the step (never behind another kind of frame): one
    MESSAGES line and one SEQ line per step, not a SEQ between every two messages."""
    from tom.codec.frames import decode_lines, encode_sends

    a = Core(A, [A, B, C], order="sequencer")
    sent = [a.broadcast(f"t{i}", sent_at=5.0) for i in range(5)]
    a.receive(B, Message(2, B, "x"))
    ready = a.ready()
    assert [f for _, f in ready.sends] == sent + [Seq(1, tuple(m.clock for m in sent), A), Seq(6, (2,), B)]
    lines = encode_sends(ready.sends)[B]
    assert len(lines) == 3 and lines[0].startswith(b"MESSAGES@")
    frames, taken, _, _ = decode_lines([line.decode()[:-1] for line in lines])
    assert frames[:5] == sent and taken == 3
    assert [d.seq for d in ready.deliveries] == [1, 2, 3, 4, 5, 6]


def test_a_causal_peers_messages_of_a_step_go_as_one_line_with_their_vectors():
    """Each own message's vector is the one before with this peer's count one higher: a run carries
    the first and which count grows, and the receiver gets the very messages sent."""
    from tom.codec.frames import decode_lines, encode_sends

    b = Core(B, [A, B, C], order="causal")
    sent = [b.broadcast(f"t{i}", sent_at=5.0) for i in range(4)]
    assert [m.vc for m in sent] == [(0, 1, 0), (0, 2, 0), (0, 3, 0), (0, 4, 0)]
    lines = encode_sends(b.ready().sends)[A]
    assert lines == [b"CMESSAGES@5.000000-1-127.0.0.1:5001-1-0,1,0-2,2,2,2-t0t1t2t3\n"]
    frames, taken, _, fault = decode_lines([line.decode()[:-1] for line in lines])
    assert frames == sent and taken == 1 and fault is None


def test_causal_holds_a_message_until_its_causal_past_is_delivered():
    c = Core(C, [A, B, C], order="causal")
    c.receive(B, Message(4, B, "answer", vc=(1, 1, 0)))
    assert texts(c) == []
    assert c.status().pending[0].waits == f"its causal past: 1 of {A}"
    c.receive(A, Message(2, A, "question", vc=(1, 0, 0)))
    assert texts(c) == ["question", "answer"]


def test_causal_delivers_concurrent_messages_as_they_come():
    b = Core(B, [A, B, C], order="causal")
    b.receive(C, Message(2, C, "c", vc=(0, 0, 1)))
    b.receive(A, Message(2, A, "a", vc=(1, 0, 0)))
    assert texts(b) == ["c", "a"]


@pytest.mark.parametrize("order,frame,why", [
    ("lamport", Message(2, B, "x", vc=(0, 1, 0)), "causal message in a lamport group"),
    ("causal", Message(2, B, "x"), "without this view's vector timestamp"),
    ("causal", Message(2, B, "x", vc=(0, 1)), "without this view's vector timestamp"),
    ("sequencer", Ack(2, C), "ACK in a sequencer group"),
    ("lamport", Seq(1, (2,), B), "sequence number in a lamport group"),
    ("causal", Seq(1, (2,), B), "sequence number in a causal group"),
])
def test_a_frame_of_another_order_is_refused_in_one_line(order, frame, why):
    core = Core(A, [A, B, C], order=order)
    with pytest.raises(FrameError, match=why):
        core.receive(B, frame)
    assert not core.ready() and len(core.order) == 0


def test_the_wire_forms_round_trip():
    for line in ("CMESSAGE@1.5-3-127.0.0.1:5000-1,0,2-a-b", "CRELAY-3-127.0.0.1:5000-0,1-x",
                 "SEQ-4-1,5,9-127.0.0.1:5001"):
        from tom.codec.frames import format_frame
        assert format_frame(parse_frame(line)) == line.replace("@1.5-", "@1.500000-")
    with pytest.raises(FrameError):
        parse_frame("SEQ-0-1-127.0.0.1:5001")  # numbers start at 1


def test_a_causal_text_leaves_room_for_its_vector():
    Core(A, [A, B], order="lamport").broadcast("x" * (MAX_FRAME_BYTES - 200))
    with pytest.raises(UsageError, match="over the limit"):
        Core(A, [A, B], order="causal").broadcast("x" * (MAX_FRAME_BYTES - 200))


def test_an_unknown_order_is_one_clear_error():
    with pytest.raises(UsageError, match="unknown order 'fifo'"):
        Core(A, [A, B], order="fifo")


# -- the checks can fail ---------------------------------------------------------------------------

def test_the_causal_check_catches_a_message_delivered_before_its_past():
    ok = [Delivery(1, 2, A, "q", None, 1, vc={A: 1}), Delivery(2, 4, B, "a", None, 1, vc={A: 1, B: 1})]
    check_causal(ok, "")
    with pytest.raises(AssertionError, match="depends on 1"):
        check_causal(ok[::-1], "")


def _first_failing_seed(order: str, seeds: range) -> int | None:
    return first_seed(seeds, lambda seed: breaks_guarantees(random_scenario(seed, order=order)))


@pytest.mark.pure  # (patches an order's method: the compiled core calls it directly)
def test_the_checker_catches_causal_delivery_that_ignores_other_origins(monkeypatch):
    """A FIFO-only rule (each origin's messages in order, nothing else waited for) must fail."""
    real = CausalOrder.release

    def fifo_only(self, required, final):
        vcs = {}
        for waiting in self.by_count.values():
            for entry in waiting.values():
                i = self.index[entry.pid]
                vcs[id(entry)] = entry.vc
                entry.vc = tuple(c if k == i else 0 for k, c in enumerate(entry.vc))
        out = real(self, required, final)
        for entry in out:
            entry.vc = vcs.get(id(entry), entry.vc)
        for waiting in self.by_count.values():
            for entry in waiting.values():
                entry.vc = vcs.get(id(entry), entry.vc)
        return out

    monkeypatch.setattr(CausalOrder, "release", fifo_only)
    assert _first_failing_seed("causal", range(40)) is not None


@pytest.mark.pure  # (patches an order's method: the compiled core calls it directly)
@pytest.mark.parametrize("order,cls", [("causal", CausalOrder), ("sequencer", SequencerOrder)])
def test_the_checker_catches_a_flush_that_relays_nothing(monkeypatch, order, cls):
    """Without the relays of what removed members sent, survivors end with different views."""
    monkeypatch.setattr(cls, "relays", lambda self, removed: [])
    assert _first_failing_seed(order, range(300)) is not None


# -- partitions (issue 10) ---------------------------------------------------------------------------

def test_a_minority_side_holds_and_a_majority_that_went_on_does_not_count_as_back():
    """A member cut off with one other of five holds its messages (no quorum); when the network is
    back but the others announce a newer view, it is still without a quorum (it will be told to
    rejoin), so what it holds is not multicast into the old view."""
    from tom.core import Timing
    from tom.codec.frames import Heartbeat, Install

    pids = [f"127.0.0.1:{5000 + i}" for i in range(5)]
    a = Core.joining(pids[0], 1, Timing())
    for i, p in enumerate(pids[1:], 2):
        a.connected(p, i)
    a._install(Install(1, 0, pids[0], 0, tuple((p, i) for i, p in enumerate(pids, 1)), tuple(pids), (), (),
                       group=f"{pids[0]}/1"))
    for p in pids[1:]:
        a.receive(p, Heartbeat(1))
    a.ready()
    for t in range(1, 13):  # 3, 4, 5 silent: suspected at 5 s, found dead at 6 s
        for p in pids[1:2]:
            a.receive(p, Heartbeat(1))
        a.tick(float(t))
    assert a.no_quorum == (2, 5) and NoQuorum(2, 5) in a.ready().notices
    assert a.broadcast("held") is None and a.backlog() == 1
    for p in pids[2:]:  # the network is back; the majority went on to view 2
        a.receive(p, Heartbeat(2))
    a.tick(13.0)
    assert a.no_quorum == (2, 5) and a.backlog() == 1  # still held, not sent into view 1


def test_a_causal_peer_keeps_what_it_delivered_only_until_every_member_holds_it():
    """The history a flush may relay: a delivered message leaves it once every other member's marks
    (or explicit ACKs) cover it — by the floor of its origin's marks, nothing done per message."""
    c = Core(C, [A, B, C], order="causal")
    for i in range(1, 4):
        c.receive(B, Message(1 + i, B, f"b{i}", vc=(0, i, 0)))
    assert texts(c) == ["b1", "b2", "b3"]
    order = c.traffic.order

    def history() -> list[tuple[int, str]]:
        return [(e.clock, e.pid) for waiting in order.history.values() for e in waiting]

    assert history() == [(2, B), (3, B), (4, B)]  # A's marks missing
    c.receive(A, Marks((0, 3, 0)))  # A holds B's messages up to clock 3
    assert history() == [(4, B)]
    c.receive(A, Ack(4, B))  # an explicit ACK counts too
    assert history() == []
    c.receive(B, Message(6, B, "b4", vc=(0, 4, 0)))
    assert history() == [(6, B)]
    c.receive(A, Marks((0, 7, 0)))  # A got B's next message first: this one never enters the history
    c.receive(B, Message(7, B, "b5", vc=(0, 5, 0)))
    assert texts(c)[-2:] == ["b4", "b5"] and history() == []
