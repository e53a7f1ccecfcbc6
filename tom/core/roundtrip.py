"""Round trips, measured on the question-and-answer pairs the protocol already has.

No frame is added for it: a founder's PROPOSE and each founder's promise, a coordinator's PROPOSE and
each member's FLUSHED, a member's FLUSHED and the INSTALL it leads to, a joiner's first JOIN and the
INSTALL that admits it. Each is timed from the question's first sending (a re-sent question does not
restart it), so a sample is never shorter than the round trip it spans; some span more (a coordinator
waits for every FLUSHED before it installs), which errs on the side of patience.

Per peer, the samples are smoothed as TCP smooths them (RFC 6298: ``srtt`` and ``rttvar``, gains 1/8
and 1/4); `RoundTrips.bound` is the largest ``srtt + 4 * rttvar`` over the peers, 0 before any sample:
how long, beyond its own timeouts, a peer waits for what only a round trip can bring (a member's
announcement of a view just installed). Invariant: at most `MAX_ASKED` questions are kept open, the
oldest forgotten first.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr

MAX_ASKED = 64
"""Questions timed at once, at most."""

Question = tuple[str, int, int]
"""What was asked: (kind, view, attempt), e.g. ``("flush", 4, 2)``."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class RoundTrips:
    """``asked``: question -> when it was first sent; ``srtt``, ``rttvar``: peer -> seconds."""

    __slots__ = ("asked", "srtt", "rttvar")

    def __init__(self) -> None:
        self.asked: dict[Question, float] = {}
        self.srtt: dict[str, float] = {}
        self.rttvar: dict[str, float] = {}

    def ask(self, question: Question, now: float) -> None:
        """``question`` goes out ``now`` (a second sending keeps the first time)."""
        asked = self.asked
        if question in asked:
            return
        if len(asked) >= MAX_ASKED:
            del asked[next(iter(asked))]
        asked[question] = now

    def answer(self, question: Question, pid: str, now: float, last: bool = False) -> None:
        """``pid`` answered ``question`` ``now``: a sample, if it was asked (``last``: nobody else will
        answer it, it is closed)."""
        at = self.asked.pop(question, None) if last else self.asked.get(question)
        if at is not None:
            self.sample(pid, now - at)

    def sample(self, pid: str, rtt: float) -> None:
        """One round trip with ``pid`` took ``rtt`` seconds (RFC 6298's update)."""
        rtt = max(rtt, 0.0)
        srtt = self.srtt.get(pid)
        if srtt is None:
            self.srtt[pid], self.rttvar[pid] = rtt, rtt / 2
            return
        self.rttvar[pid] = 0.75 * self.rttvar[pid] + 0.25 * abs(srtt - rtt)
        self.srtt[pid] = 0.875 * srtt + 0.125 * rtt

    def installed(self, src: str, view: int, attempt: int, joining: bool, now: float) -> None:
        """An INSTALL of ``view``, ``attempt`` came from ``src``: the answer to this member's FLUSHED or
        promise, and (``joining`` a running group, ``view`` > 1) to its first JOIN, at most."""
        self.answer(("install", view, attempt), src, now, last=True)
        if joining and view > 1:
            self.answer(("join", 0, 0), src, now, last=True)

    def of(self, pid: str) -> float | None:
        """The smoothed round trip with ``pid``, if one was measured."""
        return self.srtt.get(pid)

    def bound(self) -> float:
        """The longest a round trip with any peer is expected to take (0.0: none measured)."""
        rttvar = self.rttvar
        return max((s + 4 * rttvar[p] for p, s in self.srtt.items()), default=0.0)
