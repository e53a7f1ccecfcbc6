"""Failure detection: when each peer was last heard, which members are suspected, which are dead.

Invariants: a member is *suspected* from the moment it was silent for its allowance (or found
restarted, or never announcing the view that long plus a round trip) and *verified* (taken for dead: a
view change removes it) once suspected for `Timing.verify_after`; a suspicion ends only when the same
incarnation speaks again in the current view (`Core.receive`) or a view change settles it
(`FailureDetector.settle`).

A peer's allowance is `Timing.suspect_after`, doubled for each time it was suspected wrongly for want
of time (at most ``2 ** MAX_DOUBLINGS`` times): suspected for a silence or a view it did not announce
(never for a link that went down), the same incarnation spoke again, or came back to a view after it
was removed (Chandra and Toueg's eventually perfect detector: a timeout grows with
each false suspicion, so on links slower or more jittery than the settings expect, suspicions of a
live peer stop after a few; a crashed peer is still suspected, after its allowance).
"""

from __future__ import annotations

from collections.abc import Mapping

from .peers import NO_INCARNATION, Peers
from .records import View
from .roundtrip import RoundTrips

MAX_DOUBLINGS = 5
"""A peer's allowance doubles at most this many times (`FailureDetector.allowance`)."""


class FailureDetector:
    """``last_heard``: peer -> when a frame of it last came; ``suspected``: member -> since when;
    ``trips``: the round trips measured (`RoundTrips`, shared with the founding and the view change);
    ``timed``: the suspected members suspected for want of time (a silence, a view not announced);
    ``wrong``: peer -> how often such a suspicion was wrong; ``removed``: peer -> the incarnation a view
    change removed while so suspected (if it comes back, that suspicion was wrong)."""

    __slots__ = ("last_heard", "suspected", "verify_after", "trips", "timed", "wrong", "removed")

    def __init__(self, verify_after: float) -> None:
        self.last_heard: dict[str, float] = {}
        self.suspected: dict[str, float] = {}
        self.verify_after = verify_after
        self.trips = RoundTrips()
        self.timed: set[str] = set()
        self.wrong: dict[str, int] = {}
        self.removed: dict[str, int] = {}

    def allowance(self, pid: str, suspect_after: float) -> float:
        """How long ``pid`` may be silent before it is suspected."""
        return suspect_after * 2.0 ** min(self.wrong.get(pid, 0), MAX_DOUBLINGS)

    def _wrongly(self, pid: str) -> None:
        self.wrong[pid] = self.wrong.get(pid, 0) + 1

    def heard(self, pid: str, now: float) -> None:
        self.last_heard[pid] = now

    def verified(self, now: float) -> set[str]:
        """The members suspected for at least the verification period: taken for dead."""
        if not self.suspected:
            return set()
        limit = now - self.verify_after
        return {p for p, since in self.suspected.items() if since <= limit}

    def sweep(self, view: View, me: str, now: float, suspect_after: float, started_at: float,
              installed_at: float, peers: Peers) -> None:
        """Suspect the members of ``view`` not suspected yet that are silent for their `allowance`, never
        announced the view that long plus a round trip after it was installed (an announcement comes
        a round trip after the INSTALL left its coordinator: `RoundTrips.bound`; in another
        group? a peer whose last announced view is of another group never announced ours, whatever
        its number: `Peers.elsewhere`), or are connected as another incarnation (restarted: verified
        at once)."""
        suspected, last_heard = self.suspected, self.last_heard
        round_trip = -1.0  # (`RoundTrips.bound`, only for a member that has not announced the view)
        elsewhere = peers.elsewhere(view)
        announced = {**peers.views, **dict.fromkeys(elsewhere, -1)} if elsewhere else peers.views
        for pid in view.members:
            if pid != me and pid not in suspected:
                allowed = self.allowance(pid, suspect_after)
                if not peers.member_link(view, pid):
                    self.dead_now(pid, now)
                elif now - last_heard.get(pid, started_at) >= allowed:
                    suspected[pid] = now
                    self.timed.add(pid)
                elif announced.get(pid, -1) < view.id:
                    if round_trip < 0.0:
                        round_trip = self.trips.bound()
                    if now - installed_at >= allowed + round_trip:
                        suspected[pid] = now
                        self.timed.add(pid)

    def spoke(self, pid: str, now: float, view: View | None, peers: Peers, unannounced: int) -> None:
        """A frame of ``pid`` came ``now``. A suspicion of it ends if it speaks as a member of ``view``:
        not a new incarnation (that does not clear its old one), nor a member still in an older view
        (it missed an install — a partition — and must be removed to join again; a peer that announced
        none is taken to be in view ``unannounced``), nor one in another group, whatever its view number."""
        self.last_heard[pid] = now
        if (view is not None and pid in self.suspected and peers.member_link(view, pid)
                and peers.views.get(pid, unannounced) >= view.id and peers.groups.get(pid, "") in ("", view.group)):
            del self.suspected[pid]
            if pid in self.timed:
                self.timed.discard(pid)
                self._wrongly(pid)

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
                if pid in self.timed and pid in old and pid not in members:
                    self.removed[pid] = old[pid]
        self.timed &= self.suspected.keys()
        for pid, incarnation in members.items():
            if pid not in old and self.removed.pop(pid, None) == incarnation and incarnation != NO_INCARNATION:
                self._wrongly(pid)  # (removed as dead, and back as the very same process)
        for pid in members:
            self.last_heard.setdefault(pid, now)
            if pid not in old:
                self.last_heard[pid] = now
