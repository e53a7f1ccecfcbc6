"""The view change under way (virtual synchrony's flush), as one member keeps it.

The coordinator sends PROPOSE(v+1, attempt); every old member that stays stops multicasting,
forwards the removed members' pending messages (RELAY), and sends a FLUSH marker to the others. With
every survivor's marker, a member works out the flush's *last step* on a copy of its order (the
same at every survivor) and reports FLUSHED; the coordinator then sends INSTALL, and only that
INSTALL makes the last step real (`Core._install`).

Invariants kept here:

* ``flush`` is the one attempt this member follows; it follows a newer attempt, or the coordinator it
  now takes for the right one, never an older one (``highest`` is the highest attempt seen);
* ``outcomes`` holds the last step of every attempt this member reported FLUSHED for; while one other
  than the current may still be installed (`ViewChange.open_outcome`), nothing is delivered;
* ``cut`` are the members whose frames are no longer taken in this change (removed by it); what they
  sent since (``cut_frames``) is dropped at the install, or taken after all if a newer attempt keeps
  them;
* markers that come before their proposal wait in ``early_markers`` (bounded);
* a coordinator sends its proposal again at most once a heartbeat period (``proposed_at``: when it
  last sent one), to members that may have ignored it while they still followed another.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..codec.frames import Frame, Install, Propose
from ..codec.pid import pid_key, sorted_pids
from ..errors import FrameError
from .peers import Peers
from .queue import Entry
from .quorum import may_change_without
from .records import View

if TYPE_CHECKING:
    from .order import Order

MAX_CUT_FRAMES = 1_000_000
"""Frames of removed members kept until the install, at most (more: the link is refused)."""

MAX_EARLY_MARKERS = 256
"""Attempts whose markers came before their proposal, kept at most."""


@dataclass(slots=True)
class Outcome:
    """The last step of a flush, worked out on a copy of the order: ``order`` after it and
    ``delivered``, what it delivers (in order). Real only at an INSTALL of that very attempt."""

    order: Order
    delivered: list[Entry]


@dataclass(slots=True)
class Flushing:
    """The attempt followed: its proposal and the FLUSH markers / FLUSHED reports seen so far."""

    proposal: Propose
    flush_set: frozenset[str]
    removed: frozenset[str]
    markers: set[str] = field(default_factory=set)
    flushed: dict[str, int] = field(default_factory=dict)
    done: bool = False


class ViewChange:
    """The flush this member follows, the outcomes it reported, and the frames of removed members."""

    __slots__ = ("flush", "early_markers", "highest", "cut", "outcomes", "cut_frames", "proposed_at")

    def __init__(self) -> None:
        self.flush: Flushing | None = None
        self.early_markers: dict[tuple[int, int, str], set[str]] = {}
        self.highest = -1  # highest attempt seen for the next view
        self.cut: set[str] = set()
        self.outcomes: dict[tuple[int, str], Outcome] = {}
        self.cut_frames: list[tuple[str, Frame]] = []
        self.proposed_at = float("-inf")

    def end(self) -> None:
        """Forget the view change that just ended (an install) or that this peer left (a rejoin)."""
        self.flush = None
        self.early_markers.clear()
        self.highest = -1
        self.cut = set()
        self.cut_frames = []
        self.outcomes.clear()

    @property
    def settling(self) -> bool:
        """A flush runs whose last step is not worked out yet: any ACK may be the one it waits for."""
        return self.flush is not None and not self.flush.done

    def keep_cut_frame(self, src: str, frame: Frame) -> None:
        if len(self.cut_frames) >= MAX_CUT_FRAMES:
            raise FrameError("too many frames of removed members waiting")
        self.cut_frames.append((src, frame))

    def early_marker(self, src: str, view: int, attempt: int, coordinator: str) -> None:
        """A marker of an attempt whose proposal has not come yet (it came on another link)."""
        if len(self.early_markers) < MAX_EARLY_MARKERS:
            self.early_markers.setdefault((view, attempt, coordinator), set()).add(src)

    def to_propose(self, view: View, me: str, now: float, period: float, verified: set[str],
                   suspected: Collection[str], peers: Peers, quorum: bool,
                   expected: Collection[str] = ()) -> tuple[Propose | None, Propose | None]:
        """As the coordinator of ``view``: its proposal under way, if due to be sent again (a
        ``period`` after the last), and the next proposal (`next_proposal`: the ``peers`` asking to
        join or leave, the ``verified`` members found dead; ``expected``: the file whose primary
        component a removal keeps, `may_change_without`), each to send now, or None."""
        flush = self.flush
        again = None
        joins: dict[str, int] = {}
        leaves: set[str] = set()
        if flush is None:
            joins = peers.joiners(view)
            leaves = set(peers.leaves) & view.members
        elif flush.proposal.coordinator == me and now - self.proposed_at >= period:
            again = flush.proposal
        new = next_proposal(view, me, self, verified, suspected, joins, leaves, quorum, expected)
        if again is not None or new is not None:
            self.proposed_at = now
        return again, new

    def follows(self, p: Propose, coordinator_now: str | None) -> bool:
        """Whether to follow proposal ``p`` (of the right view and group, from its coordinator): a new
        attempt, newer than the one followed or from the coordinator this member now takes for right."""
        self.highest = max(self.highest, p.attempt)
        flush = self.flush
        if flush is None:
            return True
        current = flush.proposal
        if (p.attempt, p.coordinator) == (current.attempt, current.coordinator):
            return False  # the same proposal again
        return p.attempt > current.attempt or p.coordinator == coordinator_now != current.coordinator

    def start(self, p: Propose, view: View, me: str) -> tuple[Flushing, set[str]] | None:
        """Follow ``p``: the flush, and the members cut by an earlier attempt that this one keeps
        (their frames are taken after all); None if this member is not in the flush set."""
        removed = frozenset(pid for pid, _ in p.removed)
        flush_set = frozenset(view.members - removed)
        if me not in flush_set:
            return None
        early = self.early_markers.pop((p.view, p.attempt, p.coordinator), set())
        kept = self.cut - removed
        self.cut = set(removed)
        self.flush = Flushing(p, flush_set, removed, {me} | (early & flush_set))
        return self.flush, kept

    def accept(self, src: str, p: Propose, view: View, me: str, coordinator_now: str | None,
               quorum: bool) -> tuple[Flushing, list[tuple[str, Frame]]] | str | None:
        """What proposal ``p`` from ``src`` does to this member of ``view``: the flush it now follows,
        with the frames of members an earlier attempt cut and this one keeps (to be taken now, in
        order); or why this member is out of the group (without a quorum, a proposal that removes it
        does); or None: ignored — not the next view of this group from its coordinator, not newer
        than the attempt followed (`follows`), removing this member with a quorum (only a proposal:
        if it completes, a member of the new view will say so), or this member not in its flush set."""
        if p.view != view.id + 1 or p.coordinator != src or p.group != view.group:
            return None
        if not self.follows(p, coordinator_now):
            return None
        if any(pid == me for pid, _ in p.removed):
            return None if quorum else f"{src} removed this peer"
        started = self.start(p, view, me)
        if started is None:
            return None
        flushing, kept = started
        return flushing, self.take_back(kept) if kept else []

    def take_back(self, kept: Collection[str]) -> list[tuple[str, Frame]]:
        """The frames of ``kept`` members held since they were cut, in order (they count after all)."""
        frames = self.cut_frames
        self.cut_frames = [(s, f) for s, f in frames if s not in kept]
        return [(s, f) for s, f in frames if s in kept]

    def marker(self, src: str, view: int, attempt: int, coordinator: str, current_view: int | None) -> bool:
        """A FLUSH marker from ``src``: whether it counts for the attempt followed."""
        flush = self.flush
        p = flush.proposal if flush is not None else None
        if flush is None or p is None or (view, attempt, coordinator) != (p.view, p.attempt, p.coordinator):
            if current_view is not None and view == current_view + 1:
                self.early_marker(src, view, attempt, coordinator)
            return False
        if src not in flush.flush_set:
            return False
        flush.markers.add(src)
        return True

    def open_outcome(self, verified: Collection[str], me: str) -> bool:
        """Whether an attempt other than the one followed, which this member reported FLUSHED for, may
        still be installed. Dropped (known dead) once its coordinator runs a newer attempt, follows the
        current one (its marker came), or is found dead outside the current flush set."""
        flush = self.flush
        current = (flush.proposal.attempt, flush.proposal.coordinator) if flush is not None else None
        for key in list(self.outcomes):
            if key == current:
                continue
            attempt, coordinator = key
            if flush is not None and current is not None and (
                    (coordinator == current[1] and attempt < current[0])
                    or coordinator in flush.markers or coordinator == me):
                del self.outcomes[key]
                continue
            if coordinator in verified and (flush is None or coordinator not in flush.flush_set):
                del self.outcomes[key]
                continue
            return True
        return False

    def settle(self, order: Order, stats: dict[str, int]) -> Propose | None:
        """The flush's last step, once it can leave nothing pending: everything a survivor holds,
        needing only the survivors' ACKs (what none of them holds is dropped). The same at every
        survivor, but only *worked out* here, on a copy of ``order``: it takes effect at the INSTALL
        of this attempt (`Outcome`); until then the peer may still follow another. The proposal
        settled (report FLUSHED for it), or None."""
        flush = self.flush
        assert flush is not None
        if not order.settles(flush.flush_set):
            return None
        trial = copy.deepcopy(order, {id(stats): stats})
        out = trial.release(flush.flush_set, True)
        if len(trial):
            return None
        p = flush.proposal
        self.outcomes[(p.attempt, p.coordinator)] = Outcome(trial, out)
        flush.done = True
        return p

    def report(self, src: str, view: int, attempt: int, clock: int, me: str) -> bool:
        """A FLUSHED report reaches this coordinator: whether every member of the flush set has now
        reported (install then)."""
        flush = self.flush
        if flush is None or flush.proposal.coordinator != me:
            return False
        p = flush.proposal
        if (view, attempt) != (p.view, p.attempt) or src not in flush.flush_set:
            return False
        flush.flushed[src] = clock
        return set(flush.flushed) >= flush.flush_set

    def concluded(self, i: Install, old: View | None, me: str) -> Outcome | str | None:
        """What INSTALL ``i`` makes of ``old``, the view this member is in: the last step of the
        attempt ``i`` ends, real now (None outside any view); or why this member is out of the new
        view instead. Removed: it never flushed for this view (it would have been told at the
        proposal), so it did not deliver all of the old view and must not record the view as if it
        had. An attempt it never flushed (or took for dead): it cannot end the old view as the
        others did, so it is out of the new one, like a member cut off."""
        if old is None:
            return None
        if me not in dict(i.members) and me not in i.left:
            return f"{i.coordinator} installed view {i.view} without this peer"
        outcome = self.outcomes.get((i.attempt, i.coordinator))
        if outcome is None:
            return f"{i.coordinator} installed view {i.view} from an attempt this peer did not flush"
        return outcome

    def install(self, view: View, me: str, delivered_marks: Mapping[str, int]) -> Install:
        """The INSTALL of the attempt this coordinator runs, every report in. ``delivered_marks``: the
        clock of the last message of each origin delivered here."""
        flush = self.flush
        assert flush is not None
        p = flush.proposal
        new = {m for m, _ in p.members}
        joined = {m for m, inc in p.members if view.incarnations.get(m) != inc}
        delivered: tuple[tuple[str, int], ...] = ()
        if joined:  # (what this attempt's last step delivers counts: it is delivered before the view)
            upto = dict(delivered_marks)
            for e in self.outcomes[(p.attempt, me)].delivered:
                upto[e.pid] = e.clock
            # every pid's, not only the joiners': a joiner learns them all, so that a member that
            # joined after some peer was cut off still knows, as coordinator, what the group
            # delivered of that peer when it admits it again (else it sends it again)
            delivered = tuple(sorted(upto.items()))
        return Install(
            p.view, p.attempt, me, max(flush.flushed.values()), p.members,
            tuple(sorted_pids(joined)),
            tuple(sorted_pids(view.members - new - flush.removed)),
            tuple(sorted_pids(flush.removed)),
            view.group,
            delivered,
        )


def proposal(view: View, me: str, attempt: int, members: Mapping[str, int], removed: Collection[str]) -> Propose:
    """PROPOSE(v+1) of ``members`` removing ``removed`` (pairs in pid order)."""
    return Propose(
        view.id + 1, attempt, me,
        tuple(sorted(members.items(), key=lambda kv: pid_key(kv[0]))),
        tuple(sorted(((p, view.incarnations[p]) for p in removed), key=lambda kv: pid_key(kv[0]))),
        view.group,
    )


def next_proposal(view: View, me: str, change: ViewChange, verified: set[str], suspected: Collection[str],
                  joins: Mapping[str, int], leaves: Collection[str], quorum: bool,
                  expected: Collection[str] = ()) -> Propose | None:
    """The proposal this coordinator makes now, or None. Without a flush under way: one that admits the
    ``joins`` (pid -> incarnation, still joining), lets the ``leaves`` go and removes the ``verified``
    (found dead), if there is any of those and the rest is a primary component. With one under way:
    a new attempt once a member of its flush set (or its coordinator) is found dead."""
    flush = change.flush
    if flush is None:
        restarted = {p for p in joins if p in view.members}
        if restarted - verified:
            return None  # the old incarnation of a restarted peer must be removed first (it is suspected)
        if not (joins or leaves or verified):
            return None
        removed: set[str] = verified
        members = {p: i for p, i in view.incarnations.items() if p not in removed and p not in leaves}
        members.update(joins)
        if not may_change_without(view.members, removed, suspected, quorum, expected):
            return None  # wait: for the network, or to be told to rejoin
    else:
        p = flush.proposal
        if not (verified & flush.flush_set or p.coordinator in verified):
            return None
        removed = set(flush.removed) | verified
        if not may_change_without(view.members, removed, suspected, quorum, expected):
            # not without the members this flush removed: take back those heard from again (a
            # partition healed meanwhile), if that makes a primary component
            removed = verified | (set(flush.removed) & set(suspected))
            if not may_change_without(view.members, removed, suspected, quorum, expected):
                return None
        members = {m: i for m, i in p.members if m not in removed}
        members.update({m: view.incarnations[m] for m in flush.removed if m not in removed})
    return proposal(view, me, change.highest + 1, members, removed)
