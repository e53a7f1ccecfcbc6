"""What a peer knows of the others: its connections, their incarnations, the views they announced,
and their requests to join and to leave.

Invariants: ``links`` holds exactly the peers connected now (pid -> incarnation); ``views[p]`` is the
highest view ``p`` announced on its link (a heartbeat) in the group ``groups[p]`` it last named (a
view is ``(group, view)``: a peer that names another group starts again from the view it names; a
heartbeat naming no group — a static group, a joining peer — keeps the group), both forgotten when
``p`` is seen as a new incarnation — what an old incarnation said is void; a join request names the incarnation that asked
and lapses unless renewed (`Peers.expire_joins`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mypy_extensions import mypyc_attr

from ..codec.frames import Heartbeat, Join, Leave, Removed
from ..errors import FrameError
from ..codec.pid import pid_key
from .records import View

NO_INCARNATION = 0
"""Incarnation of a static member: any incarnation is accepted."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Peers:
    """Connections, announced views, and join / leave requests of the other peers."""

    __slots__ = ("links", "incarnations", "views", "groups", "joins", "leaves", "told_removed", "held_back",
                 "resumes")

    def __init__(self) -> None:
        self.links: dict[str, int] = {}  # connected peers -> their incarnation
        self.incarnations: dict[str, int] = {}  # last incarnation seen of each peer, connected or not
        self.views: dict[str, int] = {}  # the view each peer last announced on its link
        self.groups: dict[str, str] = {}  # the group of that view ("" or absent: none named)
        self.joins: dict[str, tuple[int, float]] = {}  # join requests: pid -> (incarnation, when)
        self.resumes: dict[str, tuple[int, str]] = {}  # durable joiners' history: pid -> (last view, group)
        self.leaves: dict[str, float] = {}  # leave requests: pid -> when
        self.told_removed: dict[str, float] = {}  # pid -> when it was last told it is not a member
        self.held_back: set[str] = set()  # joiners not admitted yet: a member does not reach them (`Reach`)

    def connected(self, pid: str, incarnation: int, joining: bool) -> bool:
        """A connection to ``pid`` as ``incarnation`` is up: whether that is a new incarnation. A peer
        still ``joining`` forgets what the peer said before (it may have joined a group meanwhile): not
        heard on this connection yet, it neither founds a group with this peer nor is founded over
        (`founders`); it says again what it is at once (a JOIN, a heartbeat)."""
        self.links[pid] = incarnation
        if self.incarnations.get(pid) != incarnation:
            self.incarnations[pid] = incarnation
            self.views.pop(pid, None)
            self.groups.pop(pid, None)
            return True
        if joining:
            self.views.pop(pid, None)
            self.groups.pop(pid, None)
            self.joins.pop(pid, None)
        return False

    def announced(self, pid: str, view: int, group: str = "") -> bool:
        """``pid`` announced ``view`` of ``group``: whether that is newer than what it said before (or
        of another group than the one it named before)."""
        if group and view > 0 and group != self.groups.get(pid, group):
            self.groups[pid] = group
            self.views[pid] = view
            return True
        if group and view > 0:
            self.groups[pid] = group
        if view > self.views.get(pid, -1):
            self.views[pid] = view
            return True
        return False

    def elsewhere(self, view: View | None) -> set[str]:
        """The peers whose last announced view is of another group than ``view``'s: whatever its
        number, it is not our view (a member among them never installed ours, or left it)."""
        if view is None or not self.groups:
            return set()
        return {p for p, g in self.groups.items() if g and g != view.group}

    def member_link(self, view: View | None, pid: str) -> bool:
        """Whether ``pid`` is a member of ``view``, connected (if at all) as the incarnation it holds."""
        if view is None or pid not in view.members:
            return False
        inc = view.incarnations[pid]
        return inc == NO_INCARNATION or self.links.get(pid, inc) == inc

    def check_join(self, src: str, join: Join) -> None:
        """FrameError unless ``join`` asks for ``src`` itself, as the incarnation connected."""
        if join.pid != src or self.links.get(src) != join.incarnation:
            raise FrameError(f"JOIN for {join.pid}/{join.incarnation} on the link of {src}")

    @staticmethod
    def check_leave(src: str, frame: Leave) -> None:
        """FrameError unless ``frame`` asks to remove ``src`` itself."""
        if frame.pid != src:
            raise FrameError(f"{src} asked to remove {frame.pid}")

    def counts_in(self, pid: str, beat: Heartbeat, view: View) -> bool:
        """Whether ``beat`` is a heartbeat of ``view`` from a member of it that says what it delivered in
        it (a view of that number in another group is not ours: edge seed 1037's false alarm)."""
        return (beat.count is not None and beat.view == view.id and beat.group in ("", view.group)
                and self.member_link(view, pid))

    def removed_meanwhile(self, pid: str, announced: int, view: View | None) -> bool:
        """Whether ``pid``, in a group (it ``announced`` a view), is no member of ``view``: cut off by a
        partition and removed meanwhile, it cannot know (it hears nothing else from us) — it is to be
        told, so that it joins again."""
        return announced > 0 and view is not None and not self.member_link(view, pid)

    def join(self, pid: str, incarnation: int, view: View | None, now: float,
             resume: tuple[int, str] = (0, "")) -> bool:
        """``pid`` asks ``now`` to join as ``incarnation`` (with its history's last view and group, if
        durable: ``resume``): the request is kept, and a peer that is not a member of ``view`` is in no
        group now (cut off, and told so). Whether it is a member of ``view`` as that incarnation
        already (it missed the INSTALL)."""
        self.joins[pid] = (incarnation, now)
        self.resumes[pid] = resume
        if resume[0] and resume[0] >= self.views.get(pid, 0) and self.groups.get(pid, resume[1]) == resume[1]:
            self.views[pid] = 0  # (it left the last view it announced, to found its group again: in none now)
        if view is None:
            return False
        if not self.member_link(view, pid) and self.views.get(pid, 0):
            self.views[pid] = 0
            self.groups.pop(pid, None)
        return pid in view.members and view.incarnations[pid] == incarnation

    def removed_by(self, src: str, frame: Removed, view: View | None, no_quorum: bool) -> str | None:
        """Why ``src``, saying that this peer is not in its view, puts this member of ``view`` out of the
        group, or None. Of our group: a newer view went on without it (if ``src`` is a member of ours).
        Of another group (a view is ``(group, view)``): only while it has no quorum (``no_quorum``) —
        its group is dead or cut off for good, and it delivers nothing meanwhile; with one, nothing."""
        if view is None:
            return None
        if frame.group and frame.group != view.group:
            return f"{src} is in group {frame.group} and this peer has no quorum" if no_quorum else None
        if not self.member_link(view, src) or frame.view <= view.id:
            return None
        return f"{src} is in view {frame.view} without this peer"

    def expire_joins(self, now: float, after: float) -> None:
        for pid, (_, when) in list(self.joins.items()):
            if now - when > after:
                del self.joins[pid]

    def joiners(self, view: View, held_back: bool = False) -> dict[str, int]:
        """The peers asking to join ``view``'s group now (pid -> incarnation): connected as the
        incarnation that asked, not in the view as it, in no group of their own, and not held back
        (unless ``held_back``: those too)."""
        links, held = self.links, () if held_back else self.held_back
        return {p: inc for p, (inc, _) in self.joins.items()
                if p in links and links[p] == inc and view.incarnations.get(p) != inc
                and self.views.get(p, 0) == 0 and p not in held}

    def founders(self, me: str, incarnation: int, last_heard: Mapping[str, float],
                 heard_since: float) -> dict[str, int] | None:
        """The members of a group this joining peer may found now (pid -> incarnation): itself and
        every connected peer that asked to join, as the incarnation connected. None (it keeps asking
        to join) while a group exists — a peer announced a view and was heard after ``heard_since``,
        even if its link is down for a moment —, a connected peer was not heard yet, or a smaller pid
        is joining too: the smallest joining peer forms the group, the others join it."""
        if any(v > 0 and last_heard.get(p, float("-inf")) > heard_since for p, v in self.views.items()):
            return None
        if any(p not in self.views for p in self.links):
            return None
        if any(pid_key(p) < pid_key(me) for p in self.links):
            return None
        members = {me: incarnation}
        members.update({p: inc for p, (inc, _) in self.joins.items() if self.links.get(p) == inc})
        return members

    def may_tell_removed(self, pid: str, now: float, period: float) -> bool:
        """Whether to tell ``pid`` again that it is not a member (at most once a ``period``)."""
        if now - self.told_removed.get(pid, float("-inf")) < period:
            return False
        self.told_removed[pid] = now
        return True

    def installed(self, members: Iterable[str]) -> None:
        """A view of ``members`` was installed: their join requests are answered; the leave requests of
        members no longer in it are done."""
        members = set(members)
        for pid in members:
            self.joins.pop(pid, None)
        for pid in list(self.leaves):
            if pid not in members:
                del self.leaves[pid]

    def restart(self) -> None:
        """This peer rejoins: requests and notes about the old group are void (connections stay)."""
        self.joins.clear()
        self.leaves.clear()
        self.told_removed.clear()
        self.held_back.clear()
