"""What a step of the core hands its shell (`Ready`), built up as the step runs, and wire v2's marks.

Invariants:

* frames leave in the order they were queued, per destination: batching never moves a frame past
  another — ACKs share a run (`AckRun`) and sequence numbers a `SeqRun` only while nothing else was
  queued after them, and only the last frame queued ever grows; the numbers a sequencer gives wait
  only behind its own messages of the step (`numbers`), never behind any other frame;
* ``holding[i]`` is the clock of the last message of the view's i-th member (pid order) received from
  that member itself; the marks of it go out once per step (`Outbox.send_marks`), on this peer's
  last message if that is the last frame queued to the others, else in a MARKS frame — after every
  message stamped before, so the FIFO argument of the delivery rule holds for them.
"""

from __future__ import annotations

from typing import cast

from ..codec.frames import Frame, Message, trusted_ack, trusted_acks, trusted_marks, trusted_message
from .notices import Notice
from .records import Delivery, Ready, Sends, ViewDelivery
from .sequencer import SeqRun

PIGGYBACK_TEXT = 12_000
"""Marks ride on a message of at most this many characters (a longer one could pass the frame limit
with them): after a longer one they go in a MARKS frame of their own."""


class AckRun:
    """ACKs queued back to back for the same destinations, sent as one frame per origin (`Acks`)."""

    __slots__ = ("clocks",)

    def __init__(self, clock: int, pid: str) -> None:
        self.clocks: dict[str, list[int]] = {pid: [clock]}

    def add(self, clock: int, pid: str) -> None:
        clocks = self.clocks.get(pid)
        if clocks is None:
            self.clocks[pid] = [clock]
        else:
            clocks.append(clock)

    def frames(self) -> list[Frame]:
        return [trusted_ack(c[0], pid) if len(c) == 1 else trusted_acks(tuple(c), pid)
                for pid, c in self.clocks.items()]


Queued = Frame | AckRun | SeqRun
"""What a step queues: a frame, or a run that becomes frames when the step ends."""


class Outbox:
    """The frames, deliveries and notices of the step under way, and this peer's marks (``holding``,
    grown by `Traffic.message`)."""

    __slots__ = ("queued", "deliveries", "notices", "runs", "others", "index", "holding", "marks_due", "numbered",
                 "persist")

    def __init__(self) -> None:
        self.queued: list[tuple[tuple[str, ...], Queued]] = []
        self.deliveries: list[Delivery | ViewDelivery] = []
        self.notices: list[Notice] = []
        self.runs = False  # some of ``queued`` are runs, made frames by `take`
        self.others: tuple[str, ...] = ()  # the view's other members: where multicasts go
        self.index: dict[str, int] = {}  # the view's members -> their position (pid order)
        self.holding: list[int] = []
        self.marks_due = False  # a mark grew since the marks were last sent
        self.numbered: list[tuple[int, int, str]] = []  # numbers given, not queued yet (`numbers`)
        # a durable peer's: the messages taken in this step, (view, clock, pid, text, sent_at), to be on
        # its disk before the step's frames (its ACKs of them) go out; None: not durable (`persisting`)
        self.persist: list[tuple[int, int, str, str, float | None]] | None = None

    def new_view(self, me: str, members: list[str]) -> None:
        """A view of ``members`` (pid order): multicasts go to the others; marks start again."""
        if self.numbered:  # (the numbers of the view before go to its members)
            self._queue_numbers()
        self.others = tuple(p for p in members if p != me)
        self.index = {p: i for i, p in enumerate(members)}
        self.holding = [0] * len(members)
        self.marks_due = False

    def send(self, dests: tuple[str, ...], frame: Frame) -> None:
        if self.numbered:
            self._queue_numbers()
        self.queued.append((dests, frame))

    def send_some(self, dests: tuple[str, ...], frame: Frame) -> None:
        """Send ``frame`` to ``dests``, if there are any."""
        if dests:
            self.send(dests, frame)

    def send_all(self, sends: Sends) -> None:
        if self.numbered:
            self._queue_numbers()
        self.queued += sends

    def notice(self, notice: Notice | None) -> None:
        if notice is not None:
            self.notices.append(notice)

    def ack(self, clock: int, pid: str) -> None:
        """ACK ``(clock, pid)`` to the others: into the last run if that is the last frame queued."""
        if self.numbered:
            self._queue_numbers()
        queued = self.queued
        last = queued[-1] if queued else None
        if last is not None and last[0] is self.others and type(last[1]) is AckRun:
            last[1].add(clock, pid)
        else:
            queued.append((self.others, AckRun(clock, pid)))
            self.runs = True

    def numbers(self, numbered: list[tuple[int, int, str]]) -> None:
        """Send the sequence numbers the sequencer gave: queued before the next frame other than this
        peer's own messages, or at the step's end — so the sequencer's messages of a step stay one
        run, and their numbers one SEQ frame (a receiver takes a number after its message as before
        it: links are FIFO, and a number never waits behind another kind of frame)."""
        if numbered and self.others:
            self.numbered += numbered

    def _queue_numbers(self) -> None:
        """Queue the numbers given so far as runs: a number joins the last run queued if it follows it
        for the same origin."""
        numbered, self.numbered = self.numbered, []
        queued = self.queued
        for seq, clock, pid in numbered:
            last = queued[-1][1] if queued else None
            if type(last) is SeqRun and last.pid == pid and last.first + len(last.clocks) == seq:
                last.clocks.append(clock)
            else:
                queued.append((self.others, SeqRun(seq, clock, pid)))
        self.runs = True

    def marks_if_due(self) -> None:
        """Send this peer's marks if one grew since they were last sent (`send_marks`)."""
        if self.marks_due:
            self.send_marks()

    def send_marks(self) -> None:
        """Send this peer's marks to the others: on its last message if that is the last frame queued
        (a mark on an earlier frame could pass a message stamped before the mark's clock was seen),
        in a MARKS frame otherwise."""
        self.marks_due = False
        others = self.others
        if not others:
            return
        if self.numbered:
            self._queue_numbers()
        marks = tuple(self.holding)
        queued = self.queued
        if queued:
            dests, last = queued[-1]
            if dests is others and type(last) is Message and len(last.text) <= PIGGYBACK_TEXT:
                queued[-1] = (others, trusted_message(last.clock, last.pid, last.text, last.sent_at,
                                                      last.vc, marks))
                return
        queued.append((others, trusted_marks(marks)))

    def take(self) -> Ready:
        """End the step: what it produced (runs made frames); the next step starts empty."""
        if self.numbered:
            self._queue_numbers()
        queued = self.queued
        sends: list[tuple[tuple[str, ...], Frame]] = []
        if self.runs:
            self.runs = False
            for dests, item in queued:
                if isinstance(item, (AckRun, SeqRun)):
                    sends.extend([(dests, f) for f in item.frames()])
                else:
                    sends.append((dests, item))
        else:
            sends = cast(list[tuple[tuple[str, ...], Frame]], queued)  # (no runs: every item is a frame)
        out = Ready(sends, self.deliveries, self.notices)
        self.queued, self.deliveries, self.notices = [], [], []
        if self.persist:
            out.persist, self.persist = self.persist, []
        return out
