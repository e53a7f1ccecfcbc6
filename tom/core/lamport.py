"""The Lamport total order (the handout's): a message leaves once it heads the queue and every
member the view requires holds it.

Invariants:

* the pending queue is ordered by ``(clock, pid_key(pid))``; an entry's ``acks`` is the *set* of
  members holding the message (its origin's ACK is implied by the message), so a repeated ACK never
  counts twice; an ACK that comes before its message reserves the entry (a premature ACK);
* only the head leaves, and only once its body is known and ``required <= acks``; releasing a stuck
  head releases every ready entry behind it in the same step;
* every key at or below ``final_key`` is final: frames about it are stale and change nothing.

Correctness rests on FIFO links: a member's ACK for (c, q) is sent after its clock passed c, so every
message it sends later sorts after (c, q), and every message it sent earlier arrived before that ACK.
The same argument makes ACKs cumulative (wire v2, `tom.core.marks`): a mark "I hold q's messages up to
clock c" rides on the last frame a member sends in a step, after every message it stamped before.
An ACK of either kind only ever adds its sender to ``acks`` of entries it holds.

The interface `Core` uses — what an order is in TOM (`tom.core.sequencer` and `tom.core.causal` have
the same): `own` (this peer's message), `message` (a member's, or a relay) and `may_release`, `acks`,
`sequence` (sequencer only), `release` (what is deliverable now, in order), `install` (a view event
passed), `relays` (what a flush forwards), `progress` (a member's delivered count), `waits` (for
status), and the pending entries (`__iter__`, `__len__`). ``total``: every member delivers one
sequence (so digests of it compare); ``acknowledged``: members ACK every message they receive.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..errors import FrameError
from ..codec.frames import Frame, Message, Relay, Seq, trusted_message
from ..codec.pid import pid_key
from .marks import MarkFloors
from .ordering import Order
from .queue import Entry, PendingQueue


class LamportOrder(Order):
    """Pending messages and the delivery rule of the Lamport total order."""

    __slots__ = ("me", "queue", "final_key", "stats", "_blocker", "held")

    def __init__(self, me: str = "", stats: dict[str, int] | None = None) -> None:
        # (defaults: the compiled build constructs a copy before it sets its fields, `tom.core.viewchange`)
        Order.__init__(self, "lamport", True, True, False)
        self.me = me
        self.queue = PendingQueue()
        self.held = MarkFloors()  # the members' cumulative ACKs (wire v2), per view
        self.final_key: tuple[int, tuple[str, int]] = (-1, ("", 0))
        self.stats = {} if stats is None else stats  # counts "premature_acks"
        self._blocker: Entry | None = None  # see `settles`

    def __len__(self) -> int:
        return len(self.queue)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.queue)

    def head(self) -> Entry | None:
        return self.queue.head()

    def stale(self, clock: int, pid: str) -> bool:
        final_clock = self.final_key[0]
        return clock < final_clock or (clock == final_clock and (clock, pid_key(pid)) <= self.final_key)

    def own(self, clock: int, text: str, sent_at: float | None) -> Message:
        """This peer multicasts ``text`` at ``clock``: it holds it; the frame to send."""
        msg = trusted_message(clock, self.me, text, sent_at)
        entry = self._reserve(clock, self.me)
        entry.text, entry.sent_at = text, sent_at
        entry.acks.add(self.me)
        return msg

    def _reserve(self, clock: int, pid: str) -> Entry:
        """The entry for ``(clock, pid)``, created (and reached by the marks from then on) if absent."""
        entry = self.queue.get(clock, pid)
        if entry is None:
            entry = self.queue.add(clock, pid)
        return entry

    def holds(self, member: str, entry: Entry) -> bool:
        """Whether ``member`` is known to hold ``entry``: by its ACK, or its marks."""
        return self.held.holds(member, entry)

    def may_release(self, entry: Entry) -> bool:
        """Whether taking ``entry`` may have made something deliverable."""
        return entry is self.queue.head()

    def sequence(self, src: str, frame: Seq) -> bool:
        raise FrameError(f"{src} sent a sequence number in a lamport group")

    def message(self, src: str, msg: Message | Relay) -> Entry | None:
        """``msg`` came from ``src`` (its origin, or a relaying member): the new entry (to be
        acknowledged), or None if it is stale or already held."""
        if msg.vc is not None:
            raise FrameError(f"{src} sent a causal message in a lamport group")
        if self.stale(msg.clock, msg.pid):
            return None
        entry = self._reserve(msg.clock, msg.pid)
        if entry.text is not None:
            return None  # duplicate
        entry.text, entry.sent_at = msg.text, msg.sent_at
        entry.acks.add(msg.pid)
        entry.acks.add(src)
        entry.acks.add(self.me)
        return entry

    def acks(self, src: str, pid: str, clocks: tuple[int, ...]) -> tuple[bool, int]:
        """``src`` holds ``(c, pid)`` for each ``c`` in ``clocks``: each reserves its entry if absent (a
        premature ACK) and counts once per acker. Returns whether the head may now leave, and the
        largest clock acknowledged (-1 if all were stale)."""
        key, final_key = pid_key(pid), self.final_key
        queue, stats = self.queue, self.stats
        head = queue.head()
        touched_head = False
        top = -1
        for clock in clocks:
            if (clock, key) <= final_key:
                continue  # stale: about a message already delivered
            if clock > top:
                top = clock
            entry = queue.get(clock, pid)
            if entry is None:
                entry = self._reserve(clock, pid)
            if entry.text is None and not entry.acks:
                stats["premature_acks"] += 1  # this ACK overtook its message: it reserves the entry
            if src not in entry.acks:
                entry.acks.add(src)
                if entry is head or head is None:
                    touched_head = True
        # an ACK for an entry behind the head changes nothing yet; a new, smaller head is bodiless
        return touched_head, top

    def settles(self, required: frozenset[str]) -> bool:
        """Whether the last step of a flush among ``required`` would leave nothing pending now: every
        entry with a body has the ACK of each of them (bodiless ones are dropped). Asked at every ACK
        of a flush's last phase: the entry that failed last time is tried first."""
        blocker, held = self._blocker, self.held
        if (blocker is not None and blocker.text is not None and not held.all_hold(blocker, required)
                and self.queue.get(blocker.clock, blocker.pid) is blocker):
            return False
        for e in self.queue.unordered():
            if e.text is not None and not held.all_hold(e, required):
                self._blocker = e
                return False
        self._blocker = None
        return True

    def marks(self, src: str, marks: tuple[int, ...]) -> tuple[bool, int]:
        """``src``'s cumulative ACKs (`MarkFloors.update`): whether the head may now leave (src's mark
        of its origin grew to cover it), and the largest mark that grew (-1 if none)."""
        held = self.held
        grew, top = held.update(src, marks)
        head = self.queue.head()
        if head is None or not grew:
            return False, top
        i = held.index.get(head.pid)
        return i is not None and i in grew and held.marks[src][i] >= head.clock, top

    def release(self, required: frozenset[str], final: bool) -> list[Entry]:
        """Pop and return, in order, the entries deliverable now: each heads the queue with its body
        and ``required <= acks``. ``final`` (the flush has every survivor's marker): a bodiless head
        is held by no survivor, so it is dropped — delivered by none."""
        queue, held, out = self.queue, self.held, []
        while True:
            head = queue.head()
            if head is None:
                break
            if head.text is None:
                if final:
                    queue.pop()
                    continue
                break
            if not held.all_hold(head, required):
                break
            queue.pop()
            out.append(head)
        if out:
            last = out[-1]
            self.final_key = (last.clock, pid_key(last.pid))
        return out

    def install(self, members: tuple[str, ...], clock: int, pid: str) -> None:
        """A view of ``members`` (in pid order) was delivered at ``(clock, pid)``: everything up to it
        is final."""
        self.final_key = (clock, pid_key(pid))
        old = self.held
        for entry in self.queue:  # (none normally: a flush leaves nothing pending) who holds it stays known
            entry.acks.update([q for q in old.members if old.holds(q, entry)])
        self.held = MarkFloors(members, self.me)

    def relays(self, removed: frozenset[str]) -> list[Frame]:
        """What a flush forwards: the pending messages of removed members this peer holds."""
        return [Relay(e.clock, e.pid, e.text, e.sent_at) for e in self.queue
                if e.text is not None and e.pid in removed]

    def progress(self, src: str, count: int) -> None:
        """``src`` has delivered ``count`` messages of the view (nothing to do in this order)."""

    def vector(self, vc: tuple[int, ...]) -> Mapping[str, int]:
        raise AssertionError("a lamport message carries no vector")

    def start_numbering(self) -> None:
        """(No numbers in this order.)"""

    def stop_numbering(self) -> None:
        """(No numbers in this order.)"""

    def take_numbered(self) -> list[tuple[int, int, str]]:
        return []

    def waits(self, entry: Entry, members: list[str]) -> str:
        if entry.text is None:
            return "its text (only ACKs came)"
        missing = [p for p in members if not self.held.holds(p, entry)]
        if missing:
            return "ACKs of " + ", ".join(missing)
        return "the messages before it"
