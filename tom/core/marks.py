"""Wire v2's cumulative acknowledgements, as a receiver keeps them: who holds which message.

A member q's marks (a MARKS frame, or the marks riding on its MESSAGE) give, for each member p of
the view (pid order), the clock of the last message of p that q received *from p itself*. Links are
FIFO and p stamps its messages with a growing clock, so q then holds every message of p of this view
up to that clock. (A relay reaches q on another link: q acknowledges it with an explicit ACK, as in
wire 1.) A mark only grows; a smaller or equal one changes nothing (a repeat, or a frame sent again
after a reconnect).

`MarkFloors` keeps, per view, every member's latest marks and, per origin, the least of them over
the members that must acknowledge its messages: who holds a message is asked of the marks (and of
the message's explicit ACKs) when it matters, so nothing is done per pending message when a mark
grows.
"""

from __future__ import annotations

from typing import Final

from ..errors import FrameError
from .queue import Entry

MAX_FLOOR: Final = 2**63 - 1  # (a floor no clock passes: an origin no other member must acknowledge)


class MarkFloors:
    """The marks of every member of one view, kept per origin as a floor: the Lamport order's view of
    them (and the causal order's, to forget what every member holds).

    ``marks[q][i]``: member q holds every message of the view's i-th member up to that clock (its
    marks); ``floors[i]``: the least of them over the members that must acknowledge a message of
    member i — all but i itself (its message) and this peer (which holds what it has the text of). A
    message ``(c, p_i)`` this peer has the text of is held by every member once ``c <= floors[i]``;
    below that, member q holds it if q's mark covers it or q acknowledged it explicitly
    (``entry.acks``: a relay, a wire-1 ACK, the message itself). Nothing is done per entry when a
    mark grows, so the work per message does not grow with the group. The causal order reads the
    floors to forget what every member holds."""

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
