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

The interface `Core` uses — what an order is in TOM: `own` (this peer's message), `message` (a
member's, or a relay), `acks`, `release` (what is deliverable now, in order), `skip_to` (a view event
passed), and the pending entries (`__iter__`, `__len__`, `head`).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..frames import Message, Relay
from ..pid import pid_key
from .queue import Entry, PendingQueue


class LamportOrder:
    """Pending messages and the delivery rule of the Lamport total order."""

    name = "lamport"
    __slots__ = ("me", "queue", "final_key", "stats")

    def __init__(self, me: str, stats: dict[str, int]) -> None:
        self.me = me
        self.queue = PendingQueue()
        self.final_key: tuple[int, tuple[str, int]] = (-1, ("", 0))
        self.stats = stats  # counts "premature_acks"

    def __len__(self) -> int:
        return len(self.queue)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.queue)

    def head(self) -> Entry | None:
        return self.queue.head()

    def stale(self, clock: int, pid: str) -> bool:
        return (clock, pid_key(pid)) <= self.final_key

    def own(self, msg: Message) -> None:
        """This peer multicast ``msg``: it holds it."""
        entry = self.queue.reserve(msg.clock, self.me)
        entry.text, entry.sent_at = msg.text, msg.sent_at
        entry.acks.add(self.me)

    def message(self, src: str, msg: Message | Relay) -> Entry | None:
        """``msg`` came from ``src`` (its origin, or a relaying member): the new entry (to be
        acknowledged), or None if it is stale or already held."""
        if (msg.clock, pid_key(msg.pid)) <= self.final_key:
            return None
        entry = self.queue.reserve(msg.clock, msg.pid)
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
            entry = queue.reserve(clock, pid)
            if entry.text is None and not entry.acks:
                stats["premature_acks"] += 1  # this ACK overtook its message: it reserves the entry
            if src not in entry.acks:
                entry.acks.add(src)
                if entry is head or head is None:
                    touched_head = True
        # an ACK for an entry behind the head changes nothing yet; a new, smaller head is bodiless
        return touched_head, top

    def release(self, required: frozenset[str], final: bool) -> list[Entry]:
        """Pop and return, in order, the entries deliverable now: each heads the queue with its body
        and ``required <= acks``. ``final`` (the flush has every survivor's marker): a bodiless head
        is held by no survivor, so it is dropped — delivered by none."""
        queue, out = self.queue, []
        while True:
            head = queue.head()
            if head is None:
                break
            if head.text is None:
                if final:
                    queue.pop()
                    continue
                break
            if not required <= head.acks:
                break
            queue.pop()
            out.append(head)
        if out:
            last = out[-1]
            self.final_key = (last.clock, pid_key(last.pid))
        return out

    def skip_to(self, clock: int, pid: str) -> None:
        """An event was delivered at ``(clock, pid)`` (a view change): everything up to it is final."""
        self.final_key = (clock, pid_key(pid))
