"""The processor's tap (`tom.web.eventfeed`): counting, frames only for those who asked, a slow watcher
dropped instead of slowing the peer, the SSE payloads."""

from tom.core import Delivery, ViewDelivery
from tom.web.eventfeed import LATENCY_BUCKETS, QUEUE_ITEMS, EventFeed, event_dicts, numbered_dicts
from tom.peer.events import FramesIn
from tom.codec.frames import Ack, Acks, Heartbeat, Marks, Message, Seq

A, B, C = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"


def feed(released: list[int] | None = None, ring: int = 0) -> EventFeed:
    released = released if released is not None else [0]
    return EventFeed(A, lambda: 42, lambda: {"released_behind_head": released[0]}, lambda: 1000.0, ring=ring)


def test_counts_frames_and_latency_without_any_watcher():
    f = feed()
    f.incoming(FramesIn(B, [Message(3, B, "x", 999.0), Ack(3, B), Heartbeat(1)]))
    f.step([((B, C), Message(4, A, "y", 1000.0)), ((B,), Ack(3, B))],
           [Delivery(1, 3, B, "x", 999.9993, 1), ViewDelivery(2, 5, A, 2, (A, B), (), (), ())], [])
    assert f.frames_in == {Message: 1, Ack: 1, Heartbeat: 1}
    assert f.frames_out == {Message: 2, Ack: 1}  # a frame to two peers counts twice
    assert sum(f.latency_counts) == 1 and f.latency_counts[LATENCY_BUCKETS.index(0.001)] == 1
    assert abs(f.latency_sum - 0.0007) < 1e-9


def test_frames_go_only_to_watchers_that_asked_and_in_order():
    f = feed()
    plain, framed = f.subscribe(frames=False), f.subscribe(frames=True)
    assert f.frames_wanted
    f.incoming(FramesIn(B, [Acks((1, 2), A), Heartbeat(1)]))
    f.step([((B, C), Message(5, A, "z", None))], [Delivery(7, 5, A, "z", None, 1)], ["left"])
    assert [i[0] for _, i in plain.take()] == ["deliver", "notice"]
    events = [e for _, item in framed.take() for e in event_dicts(item)]
    assert [(name, d.get("dir"), d.get("clock")) for name, d in events] == [
        ("frame", "in", 1), ("frame", "in", 2), ("frame", "out", 5), ("deliver", None, 5), ("notice", None, None)]
    assert events[0][1] == {"dir": "in", "kind": "ACK", "clock": 1, "pid": A, "from": B, "lamport": 42, "t": 1000.0}
    assert events[2][1]["to"] == [B, C] and events[2][1]["text"] == "z"
    f.unsubscribe(framed)
    assert not f.frames_wanted
    f.incoming(FramesIn(B, [Ack(9, A)]))
    assert plain.take() == []


def test_marks_are_drawn_as_acks_of_the_last_message_of_each_origin_they_cover():
    """Wire v2: a MARKS frame, or marks on a message, names positions of the view (pid order); the
    diagram gets an ACK for each origin heard from, the sender's own position left out."""
    f = EventFeed(A, lambda: 42, lambda: {"released_behind_head": 0}, lambda: 1000.0, lambda: (A, B, C), ring=0)
    framed = f.subscribe(frames=True)
    f.incoming(FramesIn(B, [Marks((4, 9, 0)), Message(10, B, "m", None, None, (5, 9, 2))]))
    f.step([((B, C), Marks((0, 10, 2)))], [], [])
    events = [(d["dir"], d["kind"], d["clock"], d["pid"]) for _, item in framed.take() for _, d in event_dicts(item)]
    assert events == [("in", "ACK", 4, A), ("in", "MESSAGE", 10, B), ("in", "ACK", 5, A), ("in", "ACK", 2, C),
                      ("out", "ACK", 10, B), ("out", "ACK", 2, C)]


def test_sequence_numbers_are_drawn_one_per_message_they_number():
    """The sequencer order: a SEQ frame numbers a run of one origin's messages; the diagram gets a SEQ
    arrow per message, with its number (in and out)."""
    f = feed()
    framed = f.subscribe(frames=True)
    f.incoming(FramesIn(B, [Seq(7, (3, 4), C)]))
    f.step([((B, C), Seq(9, (12,), A))], [], [])
    events = [(d["dir"], d["kind"], d["clock"], d["pid"], d["seq"]) for _, item in framed.take()
              for _, d in event_dicts(item)]
    assert events == [("in", "SEQ", 3, C, 7), ("in", "SEQ", 4, C, 8), ("out", "SEQ", 12, A, 9)]


def test_releases_behind_a_late_head_are_marked():
    released = [0]
    f = feed(released)
    sub = f.subscribe(frames=False)
    released[0] = 2  # the core released two entries behind the head in this step
    f.step([], [Delivery(i, i, B, str(i), None, 1) for i in (1, 2, 3)], [])
    marks = [d["released"] for _, item in sub.take() for _, d in event_dicts(item)]
    assert marks == [False, True, True]


def test_a_watcher_that_falls_behind_is_dropped_not_waited_for():
    f = feed()
    slow, fast = f.subscribe(frames=False), f.subscribe(frames=False)
    for i in range(QUEUE_ITEMS + 5):
        f.step([], [Delivery(i, i, B, "t", None, 1)], [])
        fast.take()
    assert slow.lost and slow not in f.subscribers
    assert not fast.lost and fast in f.subscribers


def test_frames_beyond_the_budget_are_skipped_deliveries_never():
    from tom.web.eventfeed import FRAMES_PER_SECOND

    f = feed()  # the wall clock stands still: one second's budget
    sub = f.subscribe(frames=True)
    steps = FRAMES_PER_SECOND // 2 + 10
    for i in range(steps):
        f.incoming(FramesIn(B, [Ack(i, A), Ack(i, B)]))
        f.step([], [Delivery(i, i, B, "t", None, 1)], [])
    kinds = [item[0] for _, item in sub.take()]
    assert kinds.count("in") == FRAMES_PER_SECOND // 2 and f.frames_skipped == 20
    assert kinds.count("deliver") == steps


def test_the_ring_keeps_the_recent_past_frames_included_without_any_watcher():
    """A page opened late starts from the ring: the same items a watcher would have had, numbered."""
    f = feed(ring=100)
    assert f.frames_wanted  # the ring records frames while nobody watches
    f.incoming(FramesIn(B, [Message(3, B, "x", None), Heartbeat(1)]))
    f.step([((B, C), Ack(3, B))], [Delivery(1, 3, B, "x", None, 1)], [])
    past = f.recent(frames=True)
    assert [n for n, _ in past] == [1, 2, 3]
    events = [(name, d.get("dir"), d["n"]) for n, item in past for name, d in numbered_dicts(n, item)]
    assert events == [("frame", "in", 1), ("frame", "out", 2), ("deliver", None, 3)]
    assert [item[0] for _, item in f.recent(frames=False)] == ["deliver"]


def test_the_ring_is_bounded_in_events_and_a_new_watcher_gets_every_item_once():
    f = feed(ring=10)
    for i in range(1, 8):  # 7 steps of 3 deliveries: 21 events
        f.step([], [Delivery(3 * i + k, 3 * i + k, B, "t", None, 1) for k in range(3)], [])
    assert f.ring_events <= 10 and [n for n, _ in f.recent(False)] == [5, 6, 7]
    past = f.recent(False)
    sub = f.subscribe(frames=False)  # taken together: no item twice, none missing
    f.step([], [Delivery(99, 99, B, "t", None, 1)], [])
    assert [n for n, _ in past] + [n for n, _ in sub.take()] == [5, 6, 7, 8]


def test_a_ring_of_zero_keeps_nothing_and_looks_at_no_frame():
    f = feed(ring=0)
    assert not f.frames_wanted
    f.incoming(FramesIn(B, [Message(3, B, "x", None)]))
    f.step([], [Delivery(1, 3, B, "x", None, 1)], [])
    assert f.recent(True) == [] and f.ring_events == 0
