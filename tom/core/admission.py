"""Whether a member takes an ordered frame (a message, its ACKs, sequence numbers) now.

The rule, in the order it is applied: outside any view, or from a peer that announced a newer view
than ours, the frame WAITs for that view (this peer has not installed it yet); from a peer still in
an older view it is STALE; from a peer that is not a member of our view as the incarnation connected,
it comes from a STRANGER (told it is not a member); from a member cut off by the flush under way it is
CUT (kept until the install, in case a newer attempt keeps that member after all); else it is TAKEN.
Every ordered frame of a dynamic group passes this rule before its handler runs (`Core._admit`), but
for the peers `trusted` names, whose frames it is known to take as things stand.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum

from .peers import Peers
from .records import View


class Admission(Enum):
    TAKEN = "taken"
    WAIT = "wait"
    STALE = "stale"
    STRANGER = "stranger"
    CUT = "cut"


def admission(view: int | None, announced: int, member: bool, cut: bool) -> Admission:
    """The rule above for a frame of a peer that announced view ``announced``, is a ``member`` of ours
    (``view``, None outside any), and is or is not ``cut`` off."""
    if view is None or announced > view:
        return Admission.WAIT
    if announced < view:
        return Admission.STALE
    if not member:
        return Admission.STRANGER
    return Admission.CUT if cut else Admission.TAKEN


def unannounced(view: View | None, static: bool) -> int:
    """The view a peer is taken to be in before it announced one: ours in a ``static`` group (views are
    never announced there); -1 otherwise, since a member announces every view it installs before
    sending any frame of it, so a frame before any announcement is of an older view."""
    return view.id if static and view is not None else -1


def admit(view: View | None, src: str, peers: Peers, cut: Collection[str], static: bool) -> Admission:
    """The rule above for an ordered frame from ``src``, as ``peers`` stand (what it announced, its link),
    in ``view`` (None: outside any), with the members ``cut`` by the flush under way."""
    return admission(view.id if view is not None else None, peers.views.get(src, unannounced(view, static)),
                     peers.member_link(view, src), src in cut)


def trusted(view: View | None, me: str, peers: Peers, cut: Collection[str], static: bool) -> frozenset[str]:
    """The peers connected now (any member, in a ``static`` group) whose ordered frames `admit` takes in
    ``view`` (None: none is taken), as things stand."""
    if view is None:
        return frozenset()
    return frozenset(src for src in view.members if src != me and (static or src in peers.links)
                     and admit(view, src, peers, cut, static) is Admission.TAKEN)
