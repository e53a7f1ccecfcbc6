"""Wire v2's cumulative acknowledgements, as a receiver keeps them: who holds which message.

A member q's marks (a MARKS frame, or the marks riding on its MESSAGE) give, for each member p of
the view (pid order), the clock of the last message of p that q received *from p itself*. Links are
FIFO and p stamps its messages with a growing clock, so q then holds every message of p of this view
up to that clock. (A relay reaches q on another link: q acknowledges it with an explicit ACK, as in
wire 1.) A mark only grows; a smaller or equal one changes nothing (a repeat, or a frame sent again
after a reconnect).

`HeldBy` keeps, per view, every member's latest marks and, per origin, the entries a mark may still
reach (in clock order), so that each entry's ``acks`` stays exactly "the members known to hold it" —
what the delivery rule, the flush and ``status`` read:

* a new entry starts with every member whose mark already covers it (the marks overtook it);
* a mark that grows adds its member to the entries of that origin it newly covers, and no other.
"""

from __future__ import annotations

import bisect
from typing import Final

from ..errors import FrameError
from .queue import Entry


def _clock(entry: Entry) -> int:
    return entry.clock


_bisect_right: Final = bisect.bisect_right  # (C statics in the compiled build, not module-dict lookups)
_insort: Final = bisect.insort


class HeldBy:
    """The marks of every member of one view, and per origin the entries they may still reach."""

    __slots__ = ("members", "index", "marks", "highest", "entries", "starts")

    def __init__(self, members: tuple[str, ...] = ()) -> None:
        self.members = members
        self.index = {p: i for i, p in enumerate(members)}
        n = len(members)
        self.marks: dict[str, list[int]] = {p: [0] * n for p in members}  # acker -> per origin
        self.highest = [0] * n  # per origin, the highest mark of any member
        self.entries: list[list[Entry]] = [[] for _ in members]  # per origin, clock order, from starts[i]
        self.starts = [0] * n

    def track(self, entry: Entry) -> None:
        """A new entry: held by every member whose mark already covers it; marks may reach it from now."""
        i = self.index.get(entry.pid)
        if i is None:
            return
        clock = entry.clock
        if clock <= self.highest[i]:
            for q, held in self.marks.items():
                if held[i] >= clock:
                    entry.acks.add(q)
        entries = self.entries[i]
        if not entries or entries[-1].clock < clock:
            entries.append(entry)
        else:  # (a relay or an explicit ACK reserved it out of clock order)
            _insort(entries, entry, lo=self.starts[i], key=_clock)

    def update(self, src: str, marks: tuple[int, ...]) -> tuple[list[Entry], int]:
        """``src``'s marks: add ``src`` to the entries they newly cover. Returns those entries and the
        largest mark that grew (-1 if none). FrameError if ``src`` is not a member or the marks do not
        name one clock per member."""
        held = self.marks.get(src)
        if held is None:
            raise FrameError(f"{src} sent ACK marks but is not a member")
        if len(marks) != len(held):
            raise FrameError(f"{src} sent {len(marks)} ACK marks for a view of {len(held)} members")
        covered: list[Entry] = []
        top = -1
        own = self.index[src]
        for i, new in enumerate(marks):
            old = held[i]
            if new <= old or i == own:
                continue
            held[i] = new
            if new > top:
                top = new
            if new > self.highest[i]:
                self.highest[i] = new
            entries = self.entries[i]
            k = _bisect_right(entries, old, lo=self.starts[i], key=_clock)
            end = len(entries)
            while k < end:
                entry = entries[k]
                if entry.clock > new:
                    break
                acks = entry.acks
                if src not in acks:
                    acks.add(src)
                    covered.append(entry)
                k += 1
        return covered, top

    def drop(self, entry: Entry) -> None:
        """``entry`` needs no more ACKs (delivered, or dropped). An origin's entries usually leave in
        clock order, so it is normally the first of its origin."""
        i = self.index.get(entry.pid)
        if i is None:
            return
        entries, k = self.entries[i], self.starts[i]
        if k < len(entries) and entries[k] is entry:
            k += 1
            if k >= 64 and 2 * k >= len(entries):
                del entries[:k]
                k = 0
            self.starts[i] = k
            return
        for j in range(k, len(entries)):
            if entries[j] is entry:
                del entries[j]
                return


MAX_FLOOR: Final = 2**63 - 1  # (a floor no clock passes: an origin no other member must acknowledge)


class MarkFloors:
    """The marks of every member of one view, kept per origin as a floor: the Lamport order's view of
    them (the causal order, which must also forget what every member holds, uses `HeldBy`).

    ``marks[q][i]``: member q holds every message of the view's i-th member up to that clock (its
    marks); ``floors[i]``: the least of them over the members that must acknowledge a message of
    member i — all but i itself (its message) and this peer (which holds what it has the text of). A
    message ``(c, p_i)`` this peer has the text of is held by every member once ``c <= floors[i]``;
    below that, member q holds it if q's mark covers it or q acknowledged it explicitly
    (``entry.acks``: a relay, a wire-1 ACK, the message itself). Nothing is done per entry when a
    mark grows, so the work per message does not grow with the group."""

    __slots__ = ("members", "me", "index", "marks", "floors")

    def __init__(self, members: tuple[str, ...] = (), me: str = "") -> None:
        self.members = members
        self.me = me
        self.index = {p: i for i, p in enumerate(members)}
        n = len(members)
        self.marks: dict[str, list[int]] = {p: [0] * n for p in members}  # acker -> per origin
        self.floors = [self._floor(i) for i in range(n)]

    def _floor(self, i: int) -> int:
        origin, me, floor = self.members[i], self.me, MAX_FLOOR
        for q, held in self.marks.items():
            if q != origin and q != me and held[i] < floor:
                floor = held[i]
        return floor

    def update(self, src: str, marks: tuple[int, ...]) -> tuple[list[int], int]:
        """``src``'s marks: the origins (their indexes) whose mark from ``src`` grew, and the largest
        mark that grew (-1 if none). FrameError if ``src`` is not a member or the marks do not name one
        clock per member."""
        held = self.marks.get(src)
        if held is None:
            raise FrameError(f"{src} sent ACK marks but is not a member")
        if len(marks) != len(held):
            raise FrameError(f"{src} sent {len(marks)} ACK marks for a view of {len(held)} members")
        grew: list[int] = []
        top = -1
        own = self.index[src]
        for i, new in enumerate(marks):
            old = held[i]
            if new <= old or i == own:
                continue
            held[i] = new
            grew.append(i)
            if new > top:
                top = new
            if old == self.floors[i]:  # src may have held the floor down
                self.floors[i] = self._floor(i)
        return grew, top

    def holds(self, q: str, entry: Entry) -> bool:
        """Whether member ``q`` is known to hold ``entry``."""
        if q in entry.acks:
            return True
        held, i = self.marks.get(q), self.index.get(entry.pid)
        return held is not None and i is not None and held[i] >= entry.clock

    def all_hold(self, entry: Entry, required: frozenset[str]) -> bool:
        """Whether every member in ``required`` is known to hold ``entry`` (whose text this peer has)."""
        i = self.index.get(entry.pid)
        if i is not None and entry.clock <= self.floors[i]:
            return True
        for q in required:
            if not self.holds(q, entry):
                return False
        return True
