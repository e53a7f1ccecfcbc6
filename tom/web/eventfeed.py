"""The processor's tap for watchers: deliveries, view changes and frames, fanned out to subscribers.

Only a peer started with ``--http`` has an `EventFeed`; without one the processor skips the tap with
one ``is None`` test per event, so nothing costs. With one:

* counting is always on and cheap: frames in and out by kind (one C-level count per incoming batch, one
  loop over the step's sends), deliveries and a send->deliver latency histogram (one ``bisect`` each);
* the frames themselves are looked at only while a subscriber asked for them (``frames_wanted``), and
  at most about FRAMES_PER_SECOND frames a second are shown (the rest are counted as skipped);
* every subscriber has a bounded queue; one that falls behind by more than ``QUEUE_ITEMS`` steps is
  dropped with a ``lost`` mark instead of slowing the peer down (its client reconnects and re-reads
  the status). Items are appended in the processor's order, so each subscriber sees deliveries in
  delivery order, and the frames of a step before its deliveries;
* the recent past is kept in a ring (``--ring`` events, `RING_EVENTS` by default; 0: none) of the
  same items, frames included (within the same budget), so that a page opened late starts from it:
  `recent` and `subscribe` taken together (no checkpoint between) give every item exactly once.
  Items are numbered in publication order (``n`` in each event), which lets a client that
  reconnects skip what it already has.

Items are tuples of plain objects (immutable frames, delivered records, wall time); turning them into
JSON is the subscriber's job, off the processor's path (`event_dicts`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import trio

from ..core import Delivery, Divergence, ViewDelivery
from ..peer.events import Event, FramesIn
from ..codec.frames import Ack, Acks, Frame, Marks, Message, Seq

QUEUE_ITEMS = 2048
FRAMES_PER_SECOND = 2000
"""Frames shown per second at most; beyond it (full-speed traffic: no eye follows that, but turning
every frame into JSON would cost the peer more than its own work) their batches are skipped and counted
in ``frames_skipped``. Deliveries are never skipped."""
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds (seconds) of the send->deliver latency histogram; a last bucket is +Inf."""

RING_EVENTS = 4000
"""Events (a frame arrow, a delivery, a view...) the ring keeps by default: a few minutes of a class's
group, a moment of a loaded one."""

WATCHED = (Message, Ack, Acks, Marks, Seq)  # the frames a live diagram draws (`arrows` takes only these)


class Subscriber:
    """One watcher's queue of items; `wait` returns once there is something (or it was dropped)."""

    def __init__(self, frames: bool) -> None:
        self.frames = frames
        self.items: deque[tuple[int, tuple]] = deque()  # (number, item)
        self.lost = False
        self._wake = trio.Event()

    def push(self, item: tuple[int, tuple]) -> bool:
        """Queue ``item``; False (and marked lost) when the watcher is too far behind."""
        if len(self.items) >= QUEUE_ITEMS:
            self.lost = True
            self._wake.set()
            return False
        self.items.append(item)
        self._wake.set()
        return True

    async def wait(self) -> None:
        if not self.items and not self.lost:
            self._wake = trio.Event()
            await self._wake.wait()

    def take(self) -> list[tuple[int, tuple]]:
        items = list(self.items)
        self.items.clear()
        return items


class EventFeed:
    """What the processor shows watchers, and the counters the metrics read."""

    def __init__(self, me: str, clock: Callable[[], int], counters: Callable[[], dict[str, int]],
                 wall: Callable[[], float], members: Callable[[], tuple[str, ...]] = tuple,
                 ring: int = RING_EVENTS) -> None:
        self.me = me
        self._members = members  # the view's members in pid order: what the positions of marks name
        self._clock = clock  # the core's Lamport time, for frame events
        self._counters = counters  # the core's counters (snapshot.counters)
        self._wall = wall
        self.subscribers: list[Subscriber] = []
        self.ring_limit = ring
        self.ring: deque[tuple[int, int, tuple]] = deque()  # (number, events in it, item), oldest first
        self.ring_events = 0  # the sum of the middle field over the ring
        self.published = 0  # items numbered so far
        self.identity = f"{me}@{wall():.6f}"  # numbers count from 1 again for another feed (a restart)
        self.frames_wanted = ring > 0
        self.frames_in: Counter[type] = Counter()
        self.frames_out: Counter[type] = Counter()
        self.latency_counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.frames_skipped = 0
        self._released_seen = 0
        self._window = (0.0, 0)  # (start of the current second, frame batches shown in it)

    # -- subscribers ---------------------------------------------------------------------------

    def subscribe(self, frames: bool) -> Subscriber:
        sub = Subscriber(frames)
        self.subscribers.append(sub)
        self._want()
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        if sub in self.subscribers:
            self.subscribers.remove(sub)
        self._want()

    def _want(self) -> None:
        self.frames_wanted = self.ring_limit > 0 or any(s.frames for s in self.subscribers)

    def recent(self, frames: bool) -> list[tuple[int, tuple]]:
        """The ring's items, oldest first, as ``(number, item)`` (frame items only if ``frames``)."""
        return [(n, item) for n, _, item in self.ring if frames or item[0] not in ("in", "out")]

    def _publish(self, item: tuple, frames_only: bool = False, size: int = 1) -> None:
        """Number ``item`` (``size`` events), keep it in the ring and queue it for the subscribers."""
        self.published += 1
        numbered = (self.published, item)
        if self.ring_limit:
            ring = self.ring
            ring.append((self.published, size, item))
            self.ring_events += size
            while self.ring_events > self.ring_limit and len(ring) > 1:
                self.ring_events -= ring.popleft()[1]
        dropped = False
        for sub in self.subscribers:
            if (sub.frames or not frames_only) and not sub.push(numbered):
                dropped = True
        if dropped:
            for sub in [s for s in self.subscribers if s.lost]:
                self.unsubscribe(sub)

    def _frames_shown(self, n: int) -> bool:
        """Whether a batch of ``n`` more frames fits in this second's budget."""
        start, shown = self._window
        now = self._wall()
        if now - start >= 1.0:
            start, shown = now, 0
        if shown >= FRAMES_PER_SECOND:
            self.frames_skipped += n
            return False
        self._window = (start, shown + n)
        return True

    # -- the processor's tap -------------------------------------------------------------------

    def incoming(self, event: Event) -> None:
        """An event the processor has just applied."""
        if type(event) is FramesIn:
            frames = event.frames  # type: ignore[union-attr]
            self.frames_in.update(map(type, frames))
            if self.frames_wanted and self._frames_shown(len(frames)):
                watched = [f for f in frames if type(f) in WATCHED]
                if watched:
                    self._publish(("in", event.src, watched, self._clock(), self._wall(),  # type: ignore[union-attr]
                                   self._members()), True, len(watched))

    def step(self, sends: list[tuple[tuple[str, ...], Frame]], deliveries: list[Delivery | ViewDelivery],
             notices: Sequence[object], alarms: Sequence[Divergence] = ()) -> None:
        """What one processor step produced: frames to send, deliveries (recorded), notices, alarms."""
        out = self.frames_out
        for dests, frame in sends:
            out[type(frame)] += len(dests)
        if sends and self.frames_wanted and self._frames_shown(len(sends)):
            watched = [(d, f) for d, f in sends if type(f) in WATCHED]
            if watched:
                self._publish(("out", watched, self._clock(), self._wall(), self._members()), True, len(watched))
        if deliveries:
            wall = self._wall()
            counts, total = self.latency_counts, 0.0
            for d in deliveries:
                sent_at = getattr(d, "sent_at", None)
                if sent_at is not None:
                    lat = wall - sent_at
                    if lat < 0:
                        lat = 0.0
                    counts[bisect_left(LATENCY_BUCKETS, lat)] += 1
                    total += lat
            self.latency_sum += total
            released = self._counters()["released_behind_head"]
            behind, self._released_seen = released - self._released_seen, released
            if self.subscribers or self.ring_limit:
                self._publish(("deliver", deliveries, max(0, min(behind, len(deliveries) - 1)), wall),
                              size=len(deliveries))
        for notice in notices:
            self._publish(("notice", notice, self._wall()))
        for alarm in alarms:
            self._publish(("alarm", alarm, self._wall()))


def numbered_dicts(n: int, item: tuple) -> Iterator[tuple[str, dict[str, Any]]]:
    """`event_dicts` of item number ``n``, each event carrying that number as ``n``."""
    for name, data in event_dicts(item):
        data["n"] = n
        yield name, data


def event_dicts(item: tuple) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (SSE event name, JSON-able data) pairs of one feed item, in order.

    ``deliver`` items mark the last ``behind`` messages of the step as released behind a late head
    (they were complete but waited for the head, then left with it)."""
    kind = item[0]
    if kind == "deliver":
        _, deliveries, behind, wall = item
        n = len(deliveries)
        for i, d in enumerate(deliveries):
            if type(d) is ViewDelivery:
                yield "view", {"index": d.index, "clock": d.clock, "pid": d.pid, "view": d.view,
                               "members": list(d.members), "joined": list(d.joined), "left": list(d.left),
                               "removed": list(d.removed), "order": d.order, "t": wall}
            else:
                event = {"index": d.index, "clock": d.clock, "pid": d.pid, "text": d.text, "view": d.view,
                         "sent_at": d.sent_at, "t": wall, "released": i >= n - behind}
                if d.seq is not None:
                    event["seq"] = d.seq
                if d.vc is not None:
                    event["vc"] = dict(d.vc)
                yield "deliver", event
    elif kind == "in":
        _, src, frames, lamport, wall, members = item
        for f in frames:
            for what, clock, pid, extra in arrows(f, members, src):
                yield "frame", {"dir": "in", "kind": what, "clock": clock, "pid": pid, "from": src,
                                "lamport": lamport, "t": wall, **extra}
    elif kind == "out":
        _, sends, lamport, wall, members = item
        for dests, f in sends:
            for what, clock, pid, extra in arrows(f, members, None):
                yield "frame", {"dir": "out", "kind": what, "clock": clock, "pid": pid, "to": list(dests),
                                "lamport": lamport, "t": wall, **extra}
    elif kind == "notice":
        yield "notice", {"notice": getattr(item[1], "tag", item[1]), "t": item[2]}
    elif kind == "alarm":
        a = item[1]
        yield "alarm", {"peer": a.peer, "view": a.view, "position": a.position, "mine": f"{a.mine:08x}",
                        "theirs": f"{a.theirs:08x}", "t": item[2]}


_NONE: dict[str, Any] = {}


def arrows(frame: Frame, members: tuple[str, ...],
           sender: str | None) -> Iterator[tuple[str, int, str, dict[str, Any]]]:
    """``(kind, clock, pid, extra fields)`` per arrow a diagram draws for ``frame``: a MESSAGE (with its
    ``text``), an ACK per clock of an ACK or ACKS, a SEQ per message a SEQ numbers (with its ``seq``),
    and for marks (wire v2, alone or on a message) an ACK of the last message of each origin they
    cover (the sender's own position, and origins not heard from yet, left out)."""
    t = type(frame)
    if t is Acks:
        for clock in frame.clocks:  # type: ignore[attr-defined]
            yield "ACK", clock, frame.pid, _NONE  # type: ignore[attr-defined]
        return
    if t is Ack:
        yield "ACK", frame.clock, frame.pid, _NONE  # type: ignore[attr-defined]
        return
    if t is Seq:
        for i, clock in enumerate(frame.clocks):  # type: ignore[attr-defined]
            yield "SEQ", clock, frame.pid, {"seq": frame.first + i}  # type: ignore[attr-defined]
        return
    marks = frame.marks  # type: ignore[attr-defined]
    if t is Message:
        yield "MESSAGE", frame.clock, frame.pid, {"text": frame.text}  # type: ignore[attr-defined]
        sender = frame.pid  # type: ignore[attr-defined]
    if marks is not None and len(marks) == len(members):
        for pid, clock in zip(members, marks):
            if clock and pid != sender:
                yield "ACK", clock, pid, _NONE
