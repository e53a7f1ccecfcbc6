"""The pure total-order core: Lamport clock, pending queue, delivery rule.

No I/O, no clock reads, no randomness, no printing. The shell feeds frames in (`Core.receive`) and
local sends (`Core.broadcast`), then takes what to send and what to deliver with `Core.ready`.

Invariants (static group; every member of the view acknowledges every message, sender included):

* the pending queue is ordered by ``(clock, pid_key(pid))`` — the documented total order;
* an entry's ``acks`` is the *set* of members that hold the message, so a repeated ACK never counts
  twice; the origin's ACK is implied by its MESSAGE (and recorded in-process at the origin);
* only the head leaves the queue, and only once its body is known and every member of the view is in
  its ``acks``; releasing a stuck head releases every ready entry behind it in the same step;
* every key at or below ``delivered_key`` is final: frames about it are stale and ignored, so a late
  duplicate can never reserve an entry that would block the queue for ever.

Correctness rests on FIFO links: a member's ACK for (c, q) is sent after its clock passed c, so every
message it sends later sorts after (c, q), and every message it sent earlier arrived before that ACK.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .errors import FrameError, UsageError
from .frames import MAX_TEXT_CHARS, Ack, Frame, Message
from .pid import pid_key, sorted_pids

EVERYONE = None
"""Destination of a frame meant for every other member of the current view."""


class LamportClock:
    """A Lamport clock: `tick` before a send, `observe` on a receive."""

    __slots__ = ("time",)

    def __init__(self, time: int = 0) -> None:
        self.time = time

    def tick(self) -> int:
        """Advance for a local send and return the new time."""
        self.time += 1
        return self.time

    def observe(self, remote: int) -> int:
        """Merge a received timestamp: ``time = max(time, remote) + 1``."""
        t = self.time
        self.time = (remote if remote > t else t) + 1
        return self.time


@dataclass(slots=True)
class Entry:
    """A pending message; ``text is None`` while only premature ACKs have reserved it."""

    clock: int
    pid: str
    text: str | None = None
    sent_at: float | None = None
    acks: set[str] = field(default_factory=set)

    @property
    def frame(self) -> Message | None:
        if self.text is None:
            return None
        return Message(self.clock, self.pid, self.text, self.sent_at)


class PendingQueue:
    """Entries keyed by ``(clock, pid)``, iterated and popped in ``(clock, pid_key)`` order."""

    __slots__ = ("_heap", "_entries")

    def __init__(self) -> None:
        self._heap: list[tuple[int, tuple[str, int], str]] = []
        self._entries: dict[tuple[int, str], Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        """Entries in delivery order (a sorted copy: for status, not for the hot path)."""
        return iter([self._entries[(c, p)] for c, _, p in sorted(self._heap)])

    def get(self, clock: int, pid: str) -> Entry | None:
        return self._entries.get((clock, pid))

    def reserve(self, clock: int, pid: str) -> Entry:
        """The entry for ``(clock, pid)``, created empty (reserved) if absent."""
        entry = self._entries.get((clock, pid))
        if entry is None:
            entry = self._entries[(clock, pid)] = Entry(clock, pid)
            heapq.heappush(self._heap, (clock, pid_key(pid), pid))
        return entry

    def head(self) -> Entry | None:
        if not self._heap:
            return None
        c, _, p = self._heap[0]
        return self._entries[(c, p)]

    def pop(self) -> Entry:
        c, _, p = heapq.heappop(self._heap)
        return self._entries.pop((c, p))


@dataclass(frozen=True, slots=True)
class View:
    """A numbered membership: the peers whose ACKs a message delivered in this view needs."""

    id: int
    members: frozenset[str]


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message leaving the queue: the ``index``-th event this peer delivers, in view ``view``."""

    index: int
    clock: int
    pid: str
    text: str
    sent_at: float | None
    view: int


@dataclass(slots=True)
class Ready:
    """What the shell must do: send ``sends`` (dest pid, or `EVERYONE`), then persist ``deliveries``."""

    sends: list[tuple[str | None, Frame]] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.sends or self.deliveries)


@dataclass(frozen=True, slots=True)
class PendingStatus:
    clock: int
    pid: str
    text: str | None
    acks: tuple[str, ...]
    missing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Status:
    me: str
    clock: int
    view: View
    delivered: int
    pending: tuple[PendingStatus, ...]


class Core:
    """One peer's ordering state for a static group ``members`` (which must include ``me``)."""

    def __init__(self, me: str, members: Iterable[str]) -> None:
        members = frozenset(members)
        if me not in members:
            raise UsageError(f"{me} is not a member of the group")
        self.me = me
        self.clock = LamportClock()
        self.view = View(1, members)
        self.queue = PendingQueue()
        self.delivered = 0
        self.delivered_key: tuple[int, tuple[str, int]] = (-1, ("", 0))
        self._ready = Ready()

    # -- inputs --------------------------------------------------------------------------------

    def broadcast(self, text: str, sent_at: float | None = None) -> Message:
        """Multicast ``text`` from this peer; return the MESSAGE frame (also queued in `ready`)."""
        if len(text) > MAX_TEXT_CHARS:
            raise UsageError(f"message of {len(text)} characters is over the limit of {MAX_TEXT_CHARS}")
        msg = Message(self.clock.tick(), self.me, text, sent_at)
        entry = self.queue.reserve(msg.clock, self.me)
        entry.text, entry.sent_at = text, msg.sent_at
        entry.acks.add(self.me)
        self._ready.sends.append((EVERYONE, msg))
        self._deliver_ready()
        return msg

    def receive(self, src: str, frame: Frame) -> None:
        """Handle ``frame`` received from member ``src``; raise FrameError (state untouched) if bad."""
        if src not in self.view.members or src == self.me:
            raise FrameError(f"frame from {src}, which is not a member")
        t = type(frame)
        if t is Ack:
            self._on_ack(src, frame)  # type: ignore[arg-type]
        elif t is Message:
            self._on_message(src, frame)  # type: ignore[arg-type]
        else:
            raise FrameError(f"unexpected {t.__name__} from {src}")

    def ready(self) -> Ready:
        """Take everything to send and to deliver since the last call."""
        out, self._ready = self._ready, Ready()
        return out

    # -- rules ---------------------------------------------------------------------------------

    def _stale(self, clock: int, pid: str) -> bool:
        return (clock, pid_key(pid)) <= self.delivered_key

    def _on_message(self, src: str, msg: Message) -> None:
        if msg.pid != src:
            raise FrameError(f"{src} relayed a message of {msg.pid}")
        if self._stale(msg.clock, msg.pid):
            return
        entry = self.queue.reserve(msg.clock, msg.pid)
        if entry.text is not None:
            return  # duplicate
        self.clock.observe(msg.clock)
        entry.text, entry.sent_at = msg.text, msg.sent_at
        entry.acks.add(src)
        entry.acks.add(self.me)
        self._ready.sends.append((EVERYONE, Ack(msg.clock, msg.pid)))
        self._deliver_ready()

    def _on_ack(self, src: str, ack: Ack) -> None:
        if ack.pid not in self.view.members:
            raise FrameError(f"{src} acknowledged a message of {ack.pid}, which is not a member")
        if self._stale(ack.clock, ack.pid):
            return
        self.clock.observe(ack.clock)
        entry = self.queue.reserve(ack.clock, ack.pid)
        if src not in entry.acks:
            entry.acks.add(src)
            self._deliver_ready()

    def _deliver_ready(self) -> None:
        queue, members, out = self.queue, self.view.members, self._ready.deliveries
        while True:
            head = queue.head()
            if head is None or head.text is None or not members <= head.acks:
                return
            queue.pop()
            self.delivered += 1
            self.delivered_key = (head.clock, pid_key(head.pid))
            out.append(Delivery(self.delivered, head.clock, head.pid, head.text, head.sent_at, self.view.id))

    # -- inspection ----------------------------------------------------------------------------

    def status(self) -> Status:
        members = sorted_pids(self.view.members)
        pending = tuple(
            PendingStatus(
                e.clock,
                e.pid,
                e.text,
                tuple(p for p in members if p in e.acks),
                tuple(p for p in members if p not in e.acks),
            )
            for e in self.queue
        )
        return Status(self.me, self.clock.time, self.view, self.delivered, pending)
