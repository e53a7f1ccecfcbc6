"""The sequencer total order: the view's sequencer (its smallest member) numbers the messages it
receives, and every member delivers them in number order.

Per multicast: the message to the n - 1 others, and the sequencer's numbers (`Seq` frames, one per run
of one origin's messages), instead of an ACK from every member to every member.

Invariants:

* one sequencer per view, and it numbers only while the view is normal: a number names one message,
  and a message gets at most one number; an origin's messages reach the sequencer in their order
  (FIFO links), so they are numbered, and delivered, in clock order;
* a member delivers number ``s`` only with its text and after ``1 .. s - 1`` (normal mode): what it
  delivered is a prefix of the numbering;
* a delivered message stays in ``history`` until every member has said (`progress`, from their
  heartbeats) that it delivered it too: until then the flush may need it.

The flush (see `tom.core.group`): each member forwards the texts of removed origins it holds, pending
or in its history, and, if the sequencer is removed, the numbers it knows. After every survivor's
marker all survivors hold the same texts and numbers, so the final step (`release` with ``final``)
is the same everywhere: the numbered messages whose text someone holds, in number order (a number
whose text died with both its origin and the sequencer is skipped by all), then the messages not
numbered yet, in ``(clock, pid)`` order, taking the next numbers.

This order is not uniform: a member that crashes may have delivered a message nobody else holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..errors import FrameError
from ..codec.frames import Frame, Message, Relay, Seq, trusted_message
from ..codec.pid import pid_key
from .ordering import Order
from .queue import Entry


class SeqRun:
    """Numbers given back to back to one origin's messages: one `Seq` frame (`Core` builds them)."""

    __slots__ = ("first", "clocks", "pid")

    def __init__(self, first: int = 0, clock: int = 0, pid: str = "") -> None:
        # (defaults: the compiled build constructs a copy before it sets its fields, `tom.core.viewchange`)
        self.first, self.clocks, self.pid = first, [clock], pid

    def frames(self) -> list[Frame]:
        return [Seq(self.first, tuple(self.clocks), self.pid)]


class SequencerOrder(Order):
    """Pending messages, their numbers, and the history a flush may need."""

    __slots__ = ("me", "stats", "members", "sequencer", "numbering", "pending", "by_seq", "next_seq",
                 "top_seq", "history", "forgotten", "reported", "last_clock", "floor", "numbered")

    def __init__(self, me: str = "", stats: dict[str, int] | None = None) -> None:
        # (defaults: the compiled build constructs a copy before it sets its fields, `tom.core.viewchange`)
        Order.__init__(self, "sequencer", True, False, True)
        self.me = me
        self.stats = {} if stats is None else stats
        self.members: tuple[str, ...] = ()
        self.sequencer = ""
        self.numbering = False  # this peer is the sequencer and the view is normal
        self.pending: dict[tuple[int, str], Entry] = {}  # not delivered: with text, or numbered only
        self.by_seq: dict[int, Entry] = {}  # numbered, not delivered
        self.next_seq = 1  # the number to deliver next
        self.top_seq = 0  # the largest number given or known in this view
        # delivered, maybe not yet by every member, by number; every number up to ``forgotten`` has left
        # it (a plain dict, native in the compiled build: numbers leave by key, never by its front)
        self.history: dict[int, Entry] = {}
        self.forgotten = 0
        self.reported: dict[str, int] = {}  # member -> messages of the view it said it delivered
        self.last_clock: dict[str, int] = {}  # origin -> clock of its last message delivered here
        self.floor = -1  # the view event's clock: a frame about a message at or below it is of an older view
        self.numbered: list[tuple[int, int, str]] = []  # (seq, clock, pid) given, not yet taken to send

    def __len__(self) -> int:
        return len(self.pending)

    def __iter__(self) -> Iterator[Entry]:
        return iter(sorted(self.pending.values(),
                           key=lambda e: (e.seq is None, e.seq or 0, e.clock, pid_key(e.pid))))

    # -- a view --------------------------------------------------------------------------------

    def install(self, members: tuple[str, ...], clock: int, pid: str) -> None:
        """A new view of ``members`` (pid order): numbering starts again at 1 (the flush delivered or
        dropped everything of the view before)."""
        self.members = members
        self.sequencer = members[0] if members else ""
        self.pending.clear()
        self.by_seq.clear()
        self.history.clear()
        self.forgotten = 0
        self.reported.clear()
        self.last_clock.clear()
        self.floor = clock
        self.next_seq, self.top_seq = 1, 0

    def stop_numbering(self) -> None:
        self.numbering = False

    def start_numbering(self) -> None:
        self.numbering = self.sequencer == self.me

    # -- messages ------------------------------------------------------------------------------

    def own(self, clock: int, text: str, sent_at: float | None) -> Message:
        msg = trusted_message(clock, self.me, text, sent_at)
        entry = self.pending[(clock, self.me)] = Entry(clock, self.me, text, sent_at)
        if self.numbering:
            self._number(entry)
        return msg

    def message(self, src: str, msg: Message | Relay) -> Entry | None:
        if msg.vc is not None:
            raise FrameError(f"{src} sent a causal message in a sequencer group")
        key = (msg.clock, msg.pid)
        if msg.clock <= self.last_clock.get(msg.pid, self.floor) or msg.clock <= self.floor:
            return None  # delivered already (a relay of what this peer holds), or of an older view
        entry = self.pending.get(key)
        if entry is None:
            entry = self.pending[key] = Entry(msg.clock, msg.pid)
        elif entry.text is not None:
            return None  # a duplicate
        entry.text, entry.sent_at = msg.text, msg.sent_at
        if self.numbering and entry.seq is None:
            self._number(entry)
        return entry

    def _number(self, entry: Entry) -> None:
        self.top_seq += 1
        seq = entry.seq = self.top_seq
        self.by_seq[seq] = entry
        self.numbered.append((seq, entry.clock, entry.pid))

    def take_numbered(self) -> list[tuple[int, int, str]]:
        numbered, self.numbered = self.numbered, []
        return numbered

    def may_release(self, entry: Entry) -> bool:
        return entry.seq == self.next_seq

    def sequence(self, src: str, frame: Seq) -> bool:
        """Numbers from the sequencer (or relayed in a flush). Whether the next number may now go."""
        pid, seq = frame.pid, frame.first
        if pid not in self.members:
            raise FrameError(f"{src} numbered a message of {pid}, which is not a member")
        last = max(self.last_clock.get(pid, -1), self.floor)
        for clock in frame.clocks:
            if seq >= self.next_seq and clock > last:
                known = self.by_seq.get(seq)
                if known is None:
                    key = (clock, pid)
                    entry = self.pending.get(key)
                    if entry is None:
                        entry = self.pending[key] = Entry(clock, pid)  # the number came before the text
                    if entry.seq is None:
                        entry.seq = seq
                        self.by_seq[seq] = entry
                        if seq > self.top_seq:
                            self.top_seq = seq
            seq += 1
        return self.next_seq in self.by_seq

    def acks(self, src: str, pid: str, clocks: tuple[int, ...]) -> tuple[bool, int]:
        raise FrameError(f"{src} sent an ACK in a sequencer group")

    def marks(self, src: str, marks: tuple[int, ...]) -> tuple[bool, int]:
        raise FrameError(f"{src} sent ACK marks in a sequencer group")

    def head(self) -> Entry | None:
        """(Only a total order with ACKs has a head that waits for them.)"""
        return None

    def vector(self, vc: tuple[int, ...]) -> Mapping[str, int]:
        raise AssertionError("a sequencer message carries no vector")

    def settles(self, required: frozenset[str]) -> bool:
        """The last step of a flush leaves nothing pending in this order (it numbers the rest)."""
        return True

    def release(self, required: frozenset[str], final: bool) -> list[Entry]:
        """The messages deliverable now, in number order; ``final``: everything this peer holds (the
        same at every survivor), numbered ones first, then the rest in ``(clock, pid)`` order."""
        out: list[Entry] = []
        by_seq, history = self.by_seq, self.history
        seq = self.next_seq
        while True:
            entry = by_seq.get(seq)
            if entry is None or entry.text is None:
                break
            del by_seq[seq]
            out.append(entry)
            history[seq] = entry
            seq += 1
        if final:
            for s in sorted(by_seq):
                entry = by_seq[s]
                if entry.text is not None:  # a number whose text nobody holds is skipped
                    out.append(entry)
                    history[s] = entry
            by_seq.clear()
            rest = sorted((e for e in self.pending.values() if e.seq is None and e.text is not None),
                          key=lambda e: (e.clock, pid_key(e.pid)))
            for entry in rest:
                self.top_seq += 1
                entry.seq = self.top_seq
                out.append(entry)
                history[entry.seq] = entry
            self.pending.clear()
            self.next_seq = self.top_seq + 1
        elif out:
            self.next_seq = seq
        if out:
            pending, last_clock = self.pending, self.last_clock
            for entry in out:
                pending.pop((entry.clock, entry.pid), None)
                last_clock[entry.pid] = entry.clock
            self._forget()
        return out

    # -- what the flush needs ------------------------------------------------------------------

    def progress(self, src: str, count: int) -> None:
        """``src`` says it delivered ``count`` messages of this view: in normal mode that is every
        number up to ``count``, so what everyone delivered leaves the history."""
        if src in self.members and count > self.reported.get(src, 0):
            self.reported[src] = count
            self._forget()

    def _forget(self) -> None:
        history = self.history
        if not history:
            return
        reported = self.reported
        stable = min((reported.get(p, 0) for p in self.members if p != self.me), default=self.next_seq - 1)
        stable = min(stable, self.next_seq - 1)
        # what every member delivered is every number up to ``stable``
        for seq in range(self.forgotten + 1, stable + 1):
            history.pop(seq, None)
        if stable > self.forgotten:
            self.forgotten = stable

    def relays(self, removed: frozenset[str]) -> list[Frame]:
        """What a flush forwards: the texts of removed origins this peer holds (pending or delivered
        but maybe not by all), and, if the sequencer is removed, every number it knows of those."""
        entries = list(self.history.values()) + [e for e in self.pending.values()]
        out: list[Frame] = [Relay(e.clock, e.pid, e.text, e.sent_at) for e in
                            sorted(entries, key=lambda e: (e.clock, pid_key(e.pid)))
                            if e.text is not None and e.pid in removed]
        if self.sequencer in removed:
            out += [Seq(e.seq, (e.clock,), e.pid) for e in sorted(entries, key=lambda e: e.seq or 0)
                    if e.seq is not None]
        return out

    def waits(self, entry: Entry, members: list[str]) -> str:
        if entry.seq is None:
            return f"its sequence number (from {self.sequencer})"
        if entry.text is None:
            return f"its text (it is number {entry.seq})"
        return f"number {self.next_seq} first (it is number {entry.seq})"
