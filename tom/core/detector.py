"""Failure detection: when each peer was last heard, which members are suspected, which are dead.

Invariants: a member is *suspected* from the moment it was silent for `Timing.suspect_after` (or
found restarted, or never announcing the view) and *verified* (taken for dead: a view change removes
it) once suspected for `Timing.verify_after`; a suspicion ends only when the same incarnation speaks
again in the current view (`Core.receive`) or a view change settles it (`FailureDetector.settle`).
"""

from __future__ import annotations

from collections.abc import Mapping


class FailureDetector:
    """``last_heard``: peer -> when a frame of it last came; ``suspected``: member -> since when."""

    __slots__ = ("last_heard", "suspected", "verify_after")

    def __init__(self, verify_after: float) -> None:
        self.last_heard: dict[str, float] = {}
        self.suspected: dict[str, float] = {}
        self.verify_after = verify_after

    def heard(self, pid: str, now: float) -> None:
        self.last_heard[pid] = now

    def verified(self, now: float) -> set[str]:
        """The members suspected for at least the verification period: taken for dead."""
        limit = now - self.verify_after
        return {p for p, since in self.suspected.items() if since <= limit}

    def dead_now(self, pid: str, now: float) -> None:
        """``pid``'s old incarnation is certainly gone (a restart): verified at once."""
        self.suspected[pid] = now - self.verify_after

    def settle(self, members: Mapping[str, int], old: Mapping[str, int], now: float) -> None:
        """A view of ``members`` (pid -> incarnation) was installed after one of ``old``: a suspicion
        of a member gone, or of another incarnation, was about someone else; the new ones are heard
        as of now."""
        for pid in list(self.suspected):
            if members.get(pid) != old.get(pid):
                del self.suspected[pid]
        for pid in members:
            self.last_heard.setdefault(pid, now)
            if pid not in old:
                self.last_heard[pid] = now
