"""The handout's protocol as the handout states it (`tom peer --wire handout`): pure, no I/O.

The SE424 handout's delivery rule, with its ACK *counting*:

* every peer acknowledges every MESSAGE it receives (its own included: a peer's frames go to every
  neighbor, itself too) with ``ACK-<clock>-<from>`` to every neighbor, so each peer gets n ACKs per
  message, n being the neighbors file's length (the file lists the peer itself);
* the pending queue is ordered by ``(clock, from as written)``; an ACK that overtakes its message
  reserves the entry (a *premature* ACK) and the MESSAGE fills it in;
* only the head leaves the queue, once it has its body and its ACKs; a head released late releases
  every ready entry behind it (the cascade).

With ``dynamic`` (the handout's extras, section 6.1) the group is the peers whose JOIN was seen and no
LEAVE (nor 5 s of silence since: HEARTBEATs), and a message needs the ACKs of the members whose join
clock is below its clock. JOIN is idempotent: a peer always sends the same ``JOIN-<join clock>-<from>``,
and a member answers a newcomer's JOIN with its own, so every peer learns the same join clocks.

What this rule gives up, as the handout does (docs/handout-wire.md): ACKs are counted, not attributed
(a repeated ACK counts twice, and who is missing cannot be known); it is safe only over FIFO links;
with ``dynamic``, peers may disagree on the group and so on the order.

Invariants kept here beyond the handout's text: the queue never holds a key at or below the last
delivered key (a late ACK or MESSAGE for such a key is counted and reported, not queued, so it cannot
block the head for ever); a message sent before this peer joined (``dynamic``) is acknowledged but
not delivered here; nothing is delivered but by the rule above.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from mypy_extensions import mypyc_attr

from ..codec.handout import HAck, HandoutFrame, HHeartbeat, HJoin, HLeave, HMessage, origin_pid

STALE_LATE_ACK = "late-ack"  # an ACK for a key at or below the last delivery (counted, dropped)
STALE_LATE_MESSAGE = "late-message"  # a MESSAGE that arrived after a later one was delivered
BEFORE_JOIN = "before-join"  # --dynamic: a message sent before this peer joined


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class HandoutEntry:
    """A pending entry: ``text`` is None while it is only reserved by premature ACKs."""

    clock: int
    origin: str
    text: str | None
    acks: int = 0

    @property
    def key(self) -> tuple[int, str]:
        return (self.clock, self.origin)

    def line(self) -> str:
        if self.text is None:
            return f"ACK-{self.clock}-{self.origin}"
        return f"MESSAGE-{self.clock}-{self.origin}-{self.text}"


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class HandoutDelivery:
    """The ``index``-th message this peer delivers, with the ACK count it was released with."""

    index: int
    clock: int
    origin: str  # <from> as written
    pid: str  # the host:port it names (the raw from when it names none)
    text: str
    acks: int


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Send:
    """Send ``frame`` to ``to`` (pids, in the neighbors file's order)."""

    frame: HandoutFrame
    to: tuple[str, ...]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class HandoutReady:
    sends: list[Send] = field(default_factory=list)
    deliveries: list[HandoutDelivery] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # membership changes, one line each, for the log
    drops: list[tuple[str, str]] = field(default_factory=list)  # (reason, line): what was not queued


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class HandoutPendingStatus:
    line: str  # the entry as the handout's status prints it: MESSAGE-... (or ACK-... while reserved)
    reserved: bool
    acks: int
    needed: int


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class HandoutStatus:
    me: str
    origin: str
    clock: int
    delivered: int
    pending: tuple[HandoutPendingStatus, ...]
    members: tuple[str, ...]  # static: the neighbors; dynamic: the joined set
    dynamic: bool
    dropped: dict[str, int]  # what was not queued, by reason (see the STALE_* and BEFORE_JOIN names)
    bad_lines: int


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class HandoutCore:
    """One peer of a handout group. Feed `receive` (frames read, in order), `send` (the user's texts),
    `tick` (time, for ``dynamic``), `join`/`leave`; then take `ready`."""

    def __init__(self, me: str, origin: str, neighbors: list[str], *, dynamic: bool = False,
                 heartbeat: float = 1.0, timeout: float = 5.0, now: float = 0.0) -> None:
        if me not in neighbors:
            raise ValueError(f"{me} is not in the neighbors list")
        self.me, self.origin, self.neighbors = me, origin, list(neighbors)
        self.dynamic = dynamic
        self.heartbeat, self.timeout = heartbeat, timeout
        self.clock = 0
        self._keys: list[tuple[int, str]] = []  # the queue's keys, sorted
        self._entries: dict[tuple[int, str], HandoutEntry] = {}
        self._last_key: tuple[int, str] | None = None  # the last delivered key
        self.delivered = 0
        self.dropped: dict[str, int] = {}
        self.bad_lines = 0
        self.premature_acks = 0  # entries reserved by an ACK that overtook its message
        self.released_behind_head = 0  # deliveries released in a cascade behind a released head
        self._ready = HandoutReady()
        # dynamic: pid -> join clock; static: every neighbor, from the start
        self.joined: dict[str, int] = {} if dynamic else {p: 0 for p in neighbors}
        self.join_clock: int | None = None if dynamic else 0
        self._heard: dict[str, float] = {}
        self._next_beat = now
        self.left = False

    # -- the user's side --------------------------------------------------------------------------
    def join(self) -> None:
        """``dynamic``: join the group: JOIN at the next clock to every neighbor (this peer included)."""
        assert self.dynamic and self.join_clock is None
        self.clock += 1
        self.join_clock = self.joined[self.me] = self.clock
        self._send(HJoin(self.clock, self.origin))

    def send(self, text: str) -> HMessage:
        """Multicast ``text``: the MESSAGE goes to every neighbor, this peer too; it enters this peer's
        queue when it comes back, as any other message does."""
        self.clock += 1
        frame = HMessage(self.clock, self.origin, text)  # FrameError for a text with a line break
        self._send(frame)
        return frame

    def leave(self) -> None:
        """``dynamic``: LEAVE to every neighbor; nothing more is sent after it."""
        if self.dynamic and self.join_clock is not None and not self.left:
            self._send(HLeave(self.clock, self.origin))
        self.left = True

    # -- the network's side -----------------------------------------------------------------------
    def bad_line(self) -> None:
        """A line that is not a handout frame was read (the shell logs it)."""
        self.bad_lines += 1

    def receive(self, frame: HandoutFrame, now: float = 0.0) -> None:
        if isinstance(frame, HMessage):
            self._on_message(frame, now)
        elif isinstance(frame, HAck):
            self._on_ack(frame)
        else:
            self._on_membership(frame, now)
        self._release()

    def tick(self, now: float) -> None:
        """``dynamic``: heartbeat when due; a member silent for ``timeout`` counts as left."""
        if not self.dynamic or self.join_clock is None or self.left:
            return
        if now >= self._next_beat:
            self._next_beat = now + self.heartbeat
            self._send(HHeartbeat(self.clock, self.origin), [p for p in self.neighbors if p != self.me])
        for pid in [p for p in self.joined if p != self.me]:
            heard = self._heard.get(pid, now)
            self._heard.setdefault(pid, now)
            if now - heard >= self.timeout:
                del self.joined[pid]
                self._notice(f"{pid} silent for {now - heard:.1f} s: taken as a LEAVE "
                             f"({len(self.joined)} members now)")
        self._release()

    def ready(self) -> HandoutReady:
        ready, self._ready = self._ready, HandoutReady()
        return ready

    # -- the rule ---------------------------------------------------------------------------------
    def needed(self, clock: int) -> int:
        """ACKs a message of ``clock`` needs: every neighbor (static), or every member that had joined
        before it was sent (dynamic: join clock below ``clock``)."""
        if not self.dynamic:
            return len(self.neighbors)
        return sum(1 for j in self.joined.values() if j < clock)

    def _late(self, key: tuple[int, str]) -> bool:
        return self._last_key is not None and key <= self._last_key

    def _on_message(self, m: HMessage, now: float) -> None:
        self.clock = max(self.clock, m.clock) + 1
        if self.dynamic:
            pid = origin_pid(m.origin)
            if pid in self._heard:
                self._heard[pid] = now
        key = (m.clock, m.origin)
        # acknowledge to every neighbor, this peer included, as the handout's tool does
        self._send(HAck(m.clock, m.origin))
        if self.dynamic and (self.join_clock is None or m.clock <= self.join_clock):
            self._drop(BEFORE_JOIN, f"MESSAGE-{m.clock}-{m.origin}: sent before this peer joined "
                                    f"(at clock {self.join_clock}): acknowledged, not delivered here")
            return
        if self._late(key):
            self._drop(STALE_LATE_MESSAGE, f"MESSAGE-{m.clock}-{m.origin} arrived after "
                                           f"{self._last_key} was delivered: not delivered (a link "
                                           f"that reorders frames breaks the handout's rule)")
            return
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = HandoutEntry(m.clock, m.origin, m.text)
            bisect.insort(self._keys, key)
        elif entry.text is None:
            entry.text = m.text  # fills the entry a premature ACK reserved
        else:
            self._drop("duplicate-message", f"MESSAGE-{m.clock}-{m.origin} received twice: the copy "
                                            f"is not queued again")

    def _on_ack(self, a: HAck) -> None:
        self.clock = max(self.clock, a.clock)
        key = (a.clock, a.origin)
        if self._late(key) or (self.dynamic and self.join_clock is not None and a.clock <= self.join_clock):
            self.dropped[STALE_LATE_ACK] = self.dropped.get(STALE_LATE_ACK, 0) + 1
            return
        entry = self._entries.get(key)
        if entry is None:  # a premature ACK: reserve the entry
            entry = self._entries[key] = HandoutEntry(a.clock, a.origin, None)
            bisect.insort(self._keys, key)
            self.premature_acks += 1
        entry.acks += 1

    def _on_membership(self, f: HandoutFrame, now: float) -> None:
        if not self.dynamic:
            self._drop("membership-in-static", f"{type(f).__name__[1:].upper()}-{f.clock}-{f.origin}: "
                                               f"a static group (no --dynamic) takes no JOIN, LEAVE or "
                                               f"HEARTBEAT")
            return
        self.clock = max(self.clock, f.clock)
        pid = origin_pid(f.origin)
        if pid is None or pid not in self.neighbors:
            self._drop("stranger", f"{f.origin} is not in the neighbors file: its "
                                   f"{type(f).__name__[1:].upper()} is ignored")
            return
        self._heard[pid] = now
        if pid == self.me:
            return
        t = type(f)
        if t is HJoin:
            if self.joined.get(pid) != f.clock:
                new = pid not in self.joined
                self.joined[pid] = f.clock
                self._notice(f"{pid} joined at clock {f.clock} ({len(self.joined)} members)")
                if new and self.join_clock is not None and not self.left:
                    self._send(HJoin(self.join_clock, self.origin), [pid])  # tell it our join clock
        elif t is HLeave:
            if self.joined.pop(pid, None) is not None:
                self._notice(f"{pid} left ({len(self.joined)} members)")

    def _release(self) -> None:
        """Deliver from the head while the head has its body and its ACKs (the cascade)."""
        keys, entries = self._keys, self._entries
        released = 0
        while keys:
            head = entries[keys[0]]
            if head.text is None or head.acks < self.needed(head.clock):
                return
            keys.pop(0)
            del entries[head.key]
            released += 1
            if released > 1:
                self.released_behind_head += 1
            self._last_key = head.key
            self.delivered += 1
            self._ready.deliveries.append(HandoutDelivery(
                self.delivered, head.clock, head.origin, origin_pid(head.origin) or head.origin, head.text,
                head.acks))

    # -- out --------------------------------------------------------------------------------------
    def _send(self, frame: HandoutFrame, to: list[str] | None = None) -> None:
        if self.left:
            return
        self._ready.sends.append(Send(frame, tuple(self.neighbors if to is None else to)))

    def _drop(self, reason: str, line: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        self._ready.drops.append((reason, line))

    def _notice(self, line: str) -> None:
        self._ready.notices.append(line)

    def backlog(self) -> int:
        return len(self._keys)

    def status(self) -> HandoutStatus:
        pending = tuple(HandoutPendingStatus(e.line(), e.text is None, e.acks, self.needed(e.clock))
                        for e in (self._entries[k] for k in self._keys))
        return HandoutStatus(self.me, self.origin, self.clock, self.delivered, pending,
                             tuple(p for p in self.neighbors if p in self.joined), self.dynamic,
                             dict(self.dropped), self.bad_lines)
