"""The ordered traffic of a peer: its order, its Lamport clock, and what it delivered.

`Traffic` takes the ordered frames `Core` admitted and this peer's own multicasts, acknowledges them
(`Outbox`), and records what the order releases as numbered deliveries. It decides nothing about
membership: each call returns whether something may now be deliverable, and `Core` decides whether
to deliver (its mode, the quorum, an open view change).

Invariants: the clock observes every message and ACK clock taken; ``delivered`` numbers every event
this peer delivers (messages and view events), without gaps; ``last_delivered[p]`` is the clock of
the last message of ``p`` delivered here (in any view).
"""

from __future__ import annotations

from collections.abc import Collection

from ..codec.frames import Install, Message, Relay, Seq
from ..codec.pid import sorted_pids
from ..errors import FrameError
from .clock import LamportClock
from .order import ORDER_CLASSES, Order
from .outbox import Outbox
from .queue import Entry
from .records import Delivery, ViewDelivery

PROGRESS_EVERY = 256
"""In an order without ACKs (sequencer), a member also sends a heartbeat after this many deliveries:
its delivered count lets the others drop what every member delivered (`SequencerOrder.progress`)."""


class Traffic:
    """The order of the current view, the clock, and the deliveries made so far."""

    __slots__ = ("me", "order", "clock", "delivered", "last_delivered", "since_beat", "cumulative", "view",
                 "stats", "out", "_raw_at", "_sent_at")

    def __init__(self, me: str, order: str, wire: int, stats: dict[str, int], out: Outbox) -> None:
        self.me = me
        self.stats = stats
        self.out = out
        self.order: Order = ORDER_CLASSES[order](me, stats)
        self.clock = LamportClock()
        self.delivered = 0
        self.last_delivered: dict[str, int] = {}
        self.since_beat = 0  # deliveries since the last heartbeat (see PROGRESS_EVERY)
        # wire v2: a message received from its origin is acknowledged by a mark (`Outbox.hold`)
        self.cumulative = wire == 2 and self.order.acknowledged
        self._raw_at, self._sent_at = -1.0, -1.0  # the last send time given to `own`, and it rounded
        self.view = 0  # the view installed last (what a durable peer's persisted messages belong to)

    def restart(self) -> list[Entry]:
        """This peer rejoins: an empty order of the same kind (what it delivered stays delivered). Its
        own messages the old order held (pending here), in its order."""
        own = [e for e in self.order if e.pid == self.me]
        self.order = ORDER_CLASSES[self.order.name](self.me, self.stats)
        self.since_beat = 0
        return own

    def drop_caches(self) -> None:
        """Forget what the order recomputes on use (the Lamport order's blocker, `LamportOrder.settles`)."""
        if getattr(self.order, "_blocker", None) is not None:
            setattr(self.order, "_blocker", None)

    def own(self, text: str, sent_at: float | None) -> Message:
        """Multicast ``text``: held here, sent to the others (with the sequencer's numbers, if any)."""
        order = self.order
        if sent_at is not None:  # at whole microseconds, as frames carry it (texts taken together share it)
            if sent_at != self._raw_at:
                self._raw_at, self._sent_at = sent_at, round(sent_at, 6)
            sent_at = self._sent_at
        msg = order.own(self.clock.tick(), text, sent_at)
        out = self.out
        out.queued.append((out.others, msg))
        if out.persist is not None:
            out.persist.append((self.view, msg.clock, msg.pid, text, msg.sent_at))
        if order.gives_numbers:
            self.out.numbers(order.take_numbered())
        return msg

    def message(self, src: str, msg: Message | Relay, marks: tuple[int, ...] | None, relayed: bool) -> bool:
        """A member's message (from its origin, or ``relayed``): held and acknowledged. Whether
        something may now be deliverable. (The ``marks`` riding on it are checked here and taken
        after: `marks`.)"""
        order = self.order
        if marks is not None and (len(marks) != len(self.out.holding) or not order.acknowledged):
            raise FrameError(f"{src} sent a message with {len(marks)} ACK marks in a "
                             f"{order.name} group of {len(self.out.holding)}")
        entry = order.message(src, msg)
        if entry is not None and self.out.persist is not None:
            self.out.persist.append((self.view, msg.clock, msg.pid, msg.text, msg.sent_at))
        if self.cumulative and not relayed:
            # from its origin, in its order: held, with every earlier message of it (even if stale or
            # a duplicate); acknowledged by the marks at the end of this step (`Outbox.send_marks`)
            out = self.out
            holding, i = out.holding, out.index[src]
            if msg.clock > holding[i]:
                holding[i] = msg.clock
                out.marks_due = True
            if entry is None:
                return False
            self.clock.observe(msg.clock)
            return order.may_release(entry)
        if entry is None:
            return False  # stale, or a duplicate
        self.clock.observe(msg.clock)
        if order.acknowledged:  # wire 1, or a relay: an explicit ACK
            self.out.ack(msg.clock, msg.pid)
        elif order.gives_numbers:
            self.out.numbers(order.take_numbered())
        return order.may_release(entry)

    def marks(self, src: str, marks: tuple[int, ...], settling: bool) -> bool:
        """``src``'s cumulative ACKs (wire v2, `tom.core.marks`): whether something may now be
        deliverable — the head may leave, or, ``settling`` (a flush's last phase, `ViewChange.settling`),
        a mark grew: any ACK may be the one it waits for."""
        order = self.order
        if not order.acknowledged:
            raise FrameError(f"{src} sent ACK marks in a {order.name} group")
        touched_head, top = order.marks(src, marks)
        if top >= 0:
            self.clock.observe(top)
            holding, me = self.out.holding, self.out.index.get(self.me)
            if any(m > h for i, (m, h) in enumerate(zip(marks, holding)) if i != me):
                # it overtook a message on its way here (it reserves nothing: it counts on arrival)
                self.stats["premature_acks"] += 1
        return touched_head or (top >= 0 and settling)

    def acks(self, src: str, pid: str, clocks: tuple[int, ...], members: Collection[str], settling: bool) -> bool:
        """``src`` holds ``(c, pid)`` for each ``c`` (one ACK, or an ACKS): whether something may now be
        deliverable — the head may leave, or any ACK, ``settling`` (see `marks`). FrameError if ``pid`` is
        not one of the view's ``members``."""
        if pid not in members:
            raise FrameError(f"{src} acknowledged a message of {pid}, which is not a member")
        touched_head, top = self.order.acks(src, pid, clocks)
        if top >= 0:
            self.clock.observe(top)
        return touched_head or settling

    def sequence(self, src: str, frame: Seq) -> bool:
        return self.order.sequence(src, frame)

    def conclude(self, order: Order, delivered: list[Entry], view: int) -> bool:
        """A flush's last step takes effect (`tom.core.viewchange.Outcome`): the ``order`` after it, and
        what it ``delivered``, recorded in ``view``. Whether a progress heartbeat is due (`record`)."""
        self.order = order
        return bool(delivered) and self.record(delivered, view)

    def install(self, i: Install) -> None:
        """The view event of ``i`` is delivered: what the group delivered of each origin (``i.delivered``,
        for a joiner) is known, the clock passes the event, the order starts the view."""
        last = self.last_delivered
        for pid, clock in i.delivered:
            if clock > last.get(pid, -1):
                last[pid] = clock
        self.clock.time = max(self.clock.time, i.clock + 1)
        self.delivered += 1
        self.view = i.view
        members = tuple(sorted_pids(p for p, _ in i.members))
        self.order.install(members, i.clock + 1, i.coordinator)
        self.since_beat = 0
        self.out.deliveries.append(ViewDelivery(self.delivered, i.clock + 1, i.coordinator, i.view, members,
                                                i.joined, i.left, i.removed, self.order.name))

    def record(self, released: list[Entry], view: int) -> bool:
        """Number and record the deliveries of what the order released (in order: each with its text).
        Whether a progress heartbeat is due (an order without ACKs: see PROGRESS_EVERY)."""
        order = self.order
        out, delivered, last = self.out.deliveries, self.delivered, self.last_delivered
        for e in released:
            text = e.text
            assert text is not None, "released without its text"
            delivered += 1
            vc = e.vc
            out.append(Delivery(delivered, e.clock, e.pid, text, e.sent_at, view, e.seq,
                                None if vc is None else order.vector(vc)))
            last[e.pid] = e.clock
        self.delivered = delivered
        if len(released) > 1:  # entries that were complete but waited behind a blocked head
            self.stats["released_behind_head"] += len(released) - 1
        if order.acknowledged:
            return False
        self.since_beat += len(released)
        if self.since_beat < PROGRESS_EVERY:
            return False
        self.since_beat = 0
        return True
