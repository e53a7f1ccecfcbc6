"""Who decides and who may go on: the quorum and coordinator rules, as pure functions of a view.

A *primary component* of a view is a strict majority of its members, or exactly half holding the
view's smallest pid (the tie-breaker): two disjoint sets of members are never both primary, so two
sides of a partition never both go on (with ``quorum="majority"``).

The neighbors file (``expected``: the pids a core is given) is a set of the same kind: a group is
founded only by a primary component of it (`tom.core.founding`), and, unless the group runs with
``last_man_standing`` (an empty ``expected`` here), every view change keeps one of it too and a member
that cannot reach one stops. All three use `has_quorum`, and primary components of one set pairwise
intersect, so two primaries of the file never exist at once: a group that shrank step by step below
a majority of the file would otherwise go on beside a group the rest of the file founds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from ..codec.pid import pid_key
from .notices import NoQuorum, QuorumBack
from .records import View


def has_quorum(members: Collection[str], reachable: Iterable[str]) -> bool:
    """Whether ``reachable`` is a primary component of a view of ``members``: a strict majority, or
    exactly half holding the view's smallest pid (the tie-breaker)."""
    here = set(reachable) & set(members)
    twice = 2 * len(here)
    return twice > len(members) or (twice == len(members) and min(members, key=pid_key) in here)


def lost_quorum(view: View, verified: set[str], announced: Mapping[str, int],
                expected: Collection[str] = ()) -> tuple[int, int] | None:
    """``(reachable, members)`` while the members of ``view`` not found dead (``verified``) are no
    primary component of it, or — some of them missing — of the neighbors file ``expected`` (if
    given), else None. A member that ``announced`` a newer view went on without this peer: it is not
    with it. (A view whose members are all here was decided by them: it keeps its quorum even if it
    is smaller than the file's majority, e.g. after leaves.)"""
    reachable = {p for p in view.members - verified if announced.get(p, -1) <= view.id}
    if has_quorum(view.members, reachable) and (
            not expected or reachable == view.members or has_quorum(expected, reachable)):
        return None
    return (len(reachable), len(view.members))


def quorum_news(was: tuple[int, int] | None, lost: tuple[int, int] | None) -> NoQuorum | QuorumBack | None:
    """What to say when the quorum state goes from ``was`` to ``lost`` (each `lost_quorum`'s answer, None
    with a quorum): that it is lost, that it is back, or nothing (no change, or only in the numbers)."""
    if lost is None:
        return None if was is None else QuorumBack()
    return NoQuorum(*lost) if was is None else None


def kept_file(expected: Collection[str], quorum: bool, last_man_standing: bool) -> frozenset[str]:
    """The file a view change keeps a primary component of, as founding does: the ``expected`` peers
    with a ``quorum``; none with ``last_man_standing``, where a group may shrink below it (Corosync's
    votequorum option)."""
    return frozenset() if last_man_standing or not quorum else frozenset(expected)


def coordinator(members: Iterable[str], verified: Collection[str], leaving: Collection[str]) -> str | None:
    """The member that runs the next view change: the smallest not found dead (``verified``) and not
    leaving; the smallest alive if all are leaving; None if none is alive.

    A leaver does not coordinate its own leave: it would deliver the view it leaves in and exit, and if
    its INSTALL died with it the others would install another view v+1. Run by a remaining member, the
    decision is held by a survivor before the leaver delivers it."""
    if not verified and not leaving:  # (every tick of every member: the common case, no lists)
        return min(members, key=pid_key, default=None)
    alive = [p for p in members if p not in verified]
    staying = [p for p in alive if p not in leaving]
    return min(staying or alive, key=pid_key) if alive else None


def may_change_without(members: frozenset[str], removed: Collection[str], suspected: Collection[str],
                       quorum: bool, expected: Collection[str] = ()) -> bool:
    """Whether a view change removing ``removed`` may go ahead: always without a quorum; with one, if
    the members that stay and were heard from lately (not even suspected, so that a side cut off does
    not count on the other before it finds it gone) are a primary component of the view, and of the
    neighbors file ``expected`` too if given (empty: ``last_man_standing``, or no file) when the change
    removes anyone."""
    if not quorum:
        return True
    staying = members - set(removed) - set(suspected)
    return has_quorum(members, staying) and (not expected or not removed or has_quorum(expected, staying))
