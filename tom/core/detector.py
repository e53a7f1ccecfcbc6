"""Failure detection: when each peer was last heard, which members are suspected, which are dead.

Invariants: a member is *suspected* from the moment it was silent for `Timing.suspect_after` (or
found restarted, or never announcing the view) and *verified* (taken for dead: a view change removes
it) once suspected for `Timing.verify_after`; a suspicion ends only when the same incarnation speaks
again in the current view (`Core.receive`) or a view change settles it (`FailureDetector.settle`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .records import View


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

    def sweep(self, view: View, me: str, now: float, suspect_after: float, started_at: float,
              installed_at: float, connected_as_member: Callable[[str], bool], announced: Mapping[str, int]) -> None:
        """Suspect the members of ``view`` not suspected yet that are silent for ``suspect_after``, never
        announced the view that long after it was installed (in another group?), or are connected as
        another incarnation (restarted: verified at once)."""
        suspected, last_heard = self.suspected, self.last_heard
        for pid in view.members:
            if pid != me and pid not in suspected:
                if not connected_as_member(pid):
                    self.dead_now(pid, now)
                elif now - last_heard.get(pid, started_at) >= suspect_after:
                    suspected[pid] = now
                elif announced.get(pid, -1) < view.id and now - installed_at >= suspect_after:
                    suspected[pid] = now

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
