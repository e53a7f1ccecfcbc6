"""Who decides and who may go on: the quorum and coordinator rules, as pure functions of a view.

A *primary component* of a view is a strict majority of its members, or exactly half holding the
view's smallest pid (the tie-breaker): two disjoint sets of members are never both primary, so two
sides of a partition never both go on (with ``quorum="majority"``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from ..codec.pid import pid_key
from .records import View


def has_quorum(members: Collection[str], reachable: Iterable[str]) -> bool:
    """Whether ``reachable`` is a primary component of a view of ``members``: a strict majority, or
    exactly half holding the view's smallest pid (the tie-breaker)."""
    here = set(reachable) & set(members)
    twice = 2 * len(here)
    return twice > len(members) or (twice == len(members) and min(members, key=pid_key) in here)


def lost_quorum(view: View, verified: set[str], announced: Mapping[str, int]) -> tuple[int, int] | None:
    """``(reachable, members)`` while the members of ``view`` not found dead (``verified``) are no
    primary component of it, else None. A member that ``announced`` a newer view went on without this
    peer: it is not with it."""
    reachable = {p for p in view.members - verified if announced.get(p, -1) <= view.id}
    return None if has_quorum(view.members, reachable) else (len(reachable), len(view.members))


def coordinator(members: Iterable[str], verified: Collection[str], leaving: Collection[str]) -> str | None:
    """The member that runs the next view change: the smallest not found dead (``verified``) and not
    leaving; the smallest alive if all are leaving; None if none is alive.

    A leaver does not coordinate its own leave: it would deliver the view it leaves in and exit, and if
    its INSTALL died with it the others would install another view v+1. Run by a remaining member, the
    decision is held by a survivor before the leaver delivers it."""
    alive = [p for p in members if p not in verified]
    staying = [p for p in alive if p not in leaving]
    return min(staying or alive, key=pid_key) if alive else None


def may_change_without(members: frozenset[str], removed: Collection[str], suspected: Collection[str],
                       quorum: bool) -> bool:
    """Whether a view change removing ``removed`` may go ahead: always without a quorum; with one, if
    the members that stay and were heard from lately (not even suspected, so that a side cut off does
    not count on the other before it finds it gone) are a primary component."""
    return not quorum or has_quorum(members, members - set(removed) - set(suspected))
