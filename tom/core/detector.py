"""Failure detection: when each peer was last heard, which members are suspected, which are dead.

Invariants: a member is *suspected* from the moment it was silent for `Timing.suspect_after` (or
found restarted, or never announcing the view) and *verified* (taken for dead: a view change removes
it) once suspected for `Timing.verify_after`; a suspicion ends only when the same incarnation speaks
again in the current view (`Core.receive`) or a view change settles it (`FailureDetector.settle`).
"""

from __future__ import annotations

from collections.abc import Mapping

from .peers import NO_INCARNATION, Peers
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
              installed_at: float, peers: Peers) -> None:
        """Suspect the members of ``view`` not suspected yet that are silent for ``suspect_after``, never
        announced the view that long after it was installed (in another group? a peer whose last
        announced view is of another group never announced ours, whatever its number: `Peers.elsewhere`),
        or are connected as another incarnation (restarted: verified at once)."""
        suspected, last_heard = self.suspected, self.last_heard
        elsewhere = peers.elsewhere(view)
        announced = {**peers.views, **dict.fromkeys(elsewhere, -1)} if elsewhere else peers.views
        for pid in view.members:
            if pid != me and pid not in suspected:
                if not peers.member_link(view, pid):
                    self.dead_now(pid, now)
                elif now - last_heard.get(pid, started_at) >= suspect_after:
                    suspected[pid] = now
                elif announced.get(pid, -1) < view.id and now - installed_at >= suspect_after:
                    suspected[pid] = now

    def spoke(self, pid: str, now: float, view: View | None, peers: Peers, unannounced: int) -> None:
        """A frame of ``pid`` came ``now``. A suspicion of it ends if it speaks as a member of ``view``:
        not a new incarnation (that does not clear its old one), nor a member still in an older view
        (it missed an install — a partition — and must be removed to join again; a peer that announced
        none is taken to be in view ``unannounced``), nor one in another group, whatever its view number."""
        self.last_heard[pid] = now
        if (view is not None and pid in self.suspected and peers.member_link(view, pid)
                and peers.views.get(pid, unannounced) >= view.id and peers.groups.get(pid, "") in ("", view.group)):
            del self.suspected[pid]

    def connected(self, pid: str, incarnation: int, view: View | None, now: float) -> bool:
        """A connection to ``pid`` as ``incarnation`` is up: heard ``now``. Whether that is a restart of
        a member of ``view`` (another incarnation than the view holds): its old one is gone, verified
        at once."""
        self.last_heard[pid] = now
        if view is None or pid not in view.members or view.incarnations[pid] in (incarnation, NO_INCARNATION):
            return False
        self.dead_now(pid, now)
        return True

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
