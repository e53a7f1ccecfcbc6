"""Whether a member takes an ordered frame (a message, its ACKs, sequence numbers) now.

The rule, in the order it is applied: outside any view, or from a peer that announced a newer view
than ours, the frame WAITs for that view (this peer has not installed it yet); from a peer still in
an older view it is STALE; from a peer that is not a member of our view as the incarnation connected,
it comes from a STRANGER (told it is not a member); from a member cut off by the flush under way it is
CUT (kept until the install, in case a newer attempt keeps that member after all); else it is TAKEN.
Every ordered frame of a dynamic group passes this rule before its handler runs (`Core._admit`).
"""

from __future__ import annotations

from enum import Enum


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
