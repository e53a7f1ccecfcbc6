"""The view change under way (virtual synchrony's flush), as one member keeps it.

The coordinator sends PROPOSE(v+1, attempt); every old member that stays stops multicasting,
forwards the removed members' pending messages (RELAY), and sends a FLUSH marker to the others. With
every survivor's marker, a member works out the flush's *last step* on a copy of its order (the
same at every survivor) and reports FLUSHED; the coordinator then sends INSTALL, and only that
INSTALL makes the last step real (`Core._install`).

A view change is a consensus (docs/design/view-change.md): an attempt is a *ballot*
``(attempt, coordinator)``, ordered by attempt (its round) then `pid_key` of the coordinator. Ballot
``(0, smallest member of the view)`` needs no phase 1 (every member promised it when it installed the
view); every other runs phase 1 first: PREPARE to the members, a PROMISE back from a primary component
of the view, each reporting every ballot the member reported FLUSHED for (`ViewChange.promise`). The
coordinator then carries on (adopts) the highest ballot that may have been decided — every promiser
in its flush set reported it — instead of a view of its own (`ViewChange.choose`).

Invariants kept here:

* ``flush`` is the one attempt this member follows; ``promised`` the highest ballot it promised (or
  followed): it follows no lower ballot, and reports FLUSHED only for the ballot it promised — so a
  FLUSHED it sent is either counted by every later coordinator's phase 1 (it came before the
  promise, which reports it) or never sent;
* ``accepted`` holds every ballot this member reported FLUSHED for, with its voters (the flush set:
  all of them decide it) and the INSTALL it decides (`ViewChange.value`: the same at every voter);
* ``outcomes`` holds the last step of every attempt (by the INSTALL it decides) this member reported
  FLUSHED for; while one other than the current's is held, nothing is delivered (any of them may
  still be installed, by its coordinator or an adopter: it is dropped only at the end of the view
  change);
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

from mypy_extensions import mypyc_attr

from ..codec.frames import Flush, Frame, Install, Prepare, Promise, Propose
from ..codec.pid import pid_key, sorted_pids
from ..errors import FrameError
from .peers import Peers
from .queue import Entry
from .quorum import has_quorum, may_change_without
from .records import Sends, View
from .roundtrip import RoundTrips

if TYPE_CHECKING:
    from .order import Order

MAX_CUT_FRAMES = 1_000_000
"""Frames of removed members kept until the install, at most (more: the link is refused)."""

MAX_EARLY_MARKERS = 256
"""Attempts whose markers came before their proposal, kept at most."""

Ballot = tuple[int, str]
"""An attempt of a view change: ``(attempt, coordinator)``, ordered by `ballot_key`."""


def ballot_key(b: Ballot) -> tuple[int, tuple[object, ...]]:
    """The order of ballots: by attempt (round), then by the coordinator's `pid_key`."""
    return b[0], pid_key(b[1])


def smallest(view: View) -> str:
    """The member whose ballot ``(0, it)`` needs no phase 1."""
    return min(view.members, key=pid_key)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class Outcome:
    """The last step of a flush, worked out on a copy of the order: ``order`` after it and
    ``delivered``, what it delivers (in order). Real only at an INSTALL of that very attempt."""

    order: Order
    delivered: list[Entry]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class Flushing:
    """The attempt followed: its proposal and the FLUSH markers / FLUSHED reports seen so far."""

    proposal: Propose
    flush_set: frozenset[str]
    removed: frozenset[str]
    markers: dict[str, int] = field(default_factory=dict)  # sender -> its clock at the marker
    flushed: dict[str, int] = field(default_factory=dict)
    done: bool = False

    @property
    def ballot(self) -> Ballot:
        return self.proposal.attempt, self.proposal.coordinator

    @property
    def key(self) -> tuple[int, str]:
        """The INSTALL this attempt decides, by its ``(attempt, coordinator)``: an adopted one's."""
        adopts = self.proposal.adopts
        return (adopts.attempt, adopts.coordinator) if adopts is not None else self.ballot

    def frames(self, order: Order, me: str, clock: int) -> Sends:
        """What member ``me``, following this attempt, sends the rest of its flush set: the messages of
        the removed members it holds (RELAY), then its FLUSH marker, stamped with its ``clock`` (relays
        do not move it, so it bounds them as it bounds this member's messages)."""
        others, p = tuple(sorted_pids(self.flush_set - {me})), self.proposal
        sends: Sends = [(others, frame) for frame in order.relays(self.removed)]
        return sends + [(others, Flush(p.view, p.attempt, p.coordinator, clock))]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class ViewChange:
    """The flush this member follows, the outcomes it reported, and the frames of removed members."""

    __slots__ = ("flush", "early_markers", "highest", "cut", "outcomes", "cut_frames", "proposed_at",
                 "promised", "promised_at", "accepted", "preparing", "promises", "trips")

    def __init__(self, trips: RoundTrips | None = None) -> None:
        self.trips = RoundTrips() if trips is None else trips  # (timed: a proposal of this coordinator's)
        self.flush: Flushing | None = None
        self.early_markers: dict[tuple[int, int, str], dict[str, int]] = {}
        self.highest = -1  # highest attempt (round) seen for the next view
        self.cut: set[str] = set()
        self.outcomes: dict[tuple[int, str], Outcome] = {}
        self.cut_frames: list[tuple[str, Frame]] = []
        self.proposed_at = float("-inf")
        self.promised: Ballot | None = None  # the highest ballot promised or followed
        self.promised_at = float("-inf")  # when
        self.accepted: dict[Ballot, tuple[frozenset[str], Install]] = {}  # reported FLUSHED for
        self.preparing: Ballot | None = None  # as a coordinator: the ballot of the phase 1 under way
        self.promises: dict[str, Promise] = {}  # its promises so far

    def end(self) -> None:
        """Forget the view change that just ended (an install) or that this peer left (a rejoin)."""
        self.flush = None
        self.early_markers.clear()
        self.highest = -1
        self.cut = set()
        self.cut_frames = []
        self.outcomes.clear()
        self.promised = None
        self.accepted.clear()
        self.preparing = None
        self.promises.clear()

    def _above(self, b: Ballot, strictly: bool) -> bool:
        """Whether ballot ``b`` is above the one promised (or at it, unless ``strictly``)."""
        if self.promised is None:
            return True
        k, kp = ballot_key(b), ballot_key(self.promised)
        return k > kp if strictly else k >= kp

    @property
    def markers_in(self) -> bool:
        """A flush runs whose last step is not worked out yet, and every survivor's marker came (`settle`)."""
        flush = self.flush
        return flush is not None and not flush.done and flush.markers.keys() >= flush.flush_set

    @property
    def removing(self) -> frozenset[str]:
        """The members the flush followed removes (none without one)."""
        return self.flush.removed if self.flush is not None else frozenset()

    @property
    def settling(self) -> bool:
        """A flush runs whose last step is not worked out yet: any ACK may be the one it waits for."""
        return self.flush is not None and not self.flush.done

    def keep_cut_frame(self, src: str, frame: Frame) -> None:
        if len(self.cut_frames) >= MAX_CUT_FRAMES:
            raise FrameError("too many frames of removed members waiting")
        self.cut_frames.append((src, frame))

    def early_marker(self, src: str, view: int, attempt: int, coordinator: str, clock: int) -> None:
        """A marker of an attempt whose proposal has not come yet (it came on another link)."""
        if len(self.early_markers) < MAX_EARLY_MARKERS:
            self.early_markers.setdefault((view, attempt, coordinator), {})[src] = clock

    def to_propose(self, view: View, me: str, now: float, period: float, verified: set[str],
                   suspected: Collection[str], peers: Peers, quorum: bool,
                   expected: Collection[str] = ()) -> tuple[Sends, Propose | None, Prepare | None]:
        """As the coordinator of ``view``: what to send now (`to_send`) — its proposal under way, if due
        to be sent again (a ``period`` after the last); the next proposal (`next_proposal`: the
        ``peers`` asking to join or leave, the ``verified`` members found dead; ``expected``: the file
        whose primary component a removal keeps, `may_change_without`) if it is ballot ``(0, me)``,
        the smallest member's, which needs no phase 1; else the PREPARE of a new ballot for it (phase
        1), or the one under way again —, with the new proposal (this coordinator follows it) and the
        PREPARE (this coordinator promises it), or None."""
        flush = self.flush
        again = None
        if (flush is not None and flush.proposal.coordinator == me and now - self.proposed_at >= period
                and self._above(flush.ballot, False)):  # (below the ballot promised: given up)
            again = flush.proposal
        new = self.wanted(view, me, verified, suspected, peers, quorum, expected)
        if (new is None and self.preparing is None and self.promised is not None
                and (flush is None or flush.ballot != self.promised) and now - self.promised_at >= period):
            # a ballot promised a while ago and not followed (its coordinator gave it up, or is no
            # coordinator for this member): the view change it stopped must end
            new = self.again(view, me, verified, suspected, quorum, expected)
        prepare = None
        if self.preparing is not None:
            if self._above(self.preparing, False):  # still the highest ballot: its promises may come
                new = None
                if now - self.proposed_at >= period:
                    prepare = Prepare(view.id + 1, self.preparing[0], me, view.group)
            else:
                self.preparing = None  # a higher ballot runs: a new one, if still wanted
        if new is not None and not (new.attempt == 0 and self.promised is None and me == smallest(view)):
            # (round 0 is the smallest member's only: a phase 1 runs for round 1 or above)
            round_ = max(self.highest, self.promised[0] if self.promised is not None else 0, 0) + 1
            self.highest = round_
            if not quorum:  # no consensus without a quorum (its stated trade): no phase 1 either
                new = Propose(new.view, round_, me, new.members, new.removed, new.group)
                self.proposed_at = now
                return to_send(view, me, again, new, None), new, None
            self.preparing = (round_, me)
            self.promises = {}
            prepare = Prepare(view.id + 1, round_, me, view.group)
            new = None
        if again is not None or new is not None or prepare is not None:
            self.proposed_at = now
        return to_send(view, me, again, new, prepare), new, prepare

    def wanted(self, view: View, me: str, verified: set[str], suspected: Collection[str], peers: Peers,
               quorum: bool, expected: Collection[str] = ()) -> Propose | None:
        """The view change there is reason for now (`next_proposal`), at attempt ``highest + 1``."""
        joins: dict[str, int] = {}
        leaves: set[str] = set()
        if self.flush is None:
            joins = peers.joiners(view)
            leaves = set(peers.leaves) & view.members
        return next_proposal(view, me, self, verified, suspected, joins, leaves, quorum, expected)

    def promise(self, src: str, f: Prepare, view: View, now: float) -> Promise | None:
        """PREPARE ``f`` from ``src``: the PROMISE to send back — every ballot this member reported
        FLUSHED for in this view change, with its voters and the INSTALL it decides — if its ballot
        is not below the one promised (again, if it is that one); else a PROMISE naming the ballot
        promised, and nothing accepted (its sender gives its ballot up and tries a higher one); None
        if ``f`` is not for this view change. Either way this member has promised a ballot: it numbers
        and delivers nothing more in its view, as in a flush, until the change ends (which may remove
        it without its knowing)."""
        if f.view != view.id + 1 or f.coordinator != src or f.group != view.group:
            return None
        self.highest = max(self.highest, f.attempt)
        b = (f.attempt, f.coordinator)
        if not self._above(b, False):
            assert self.promised is not None
            # below the ballot promised: say which, so that its sender tries a higher one (a PROMISE
            # of another ballot than it asked for promises it nothing)
            return Promise(f.view, self.promised[0], self.promised[1], ())
        if self.promised != b:
            self.promised, self.promised_at = b, now
        accepted = tuple((a, c, tuple(sorted_pids(voters)), install)
                         for (a, c), (voters, install) in sorted(self.accepted.items(), key=lambda kv: ballot_key(kv[0])))
        return Promise(f.view, f.attempt, f.coordinator, accepted)

    def take_promise(self, src: str, f: Promise, view: View, me: str, now: float, coordinating: bool) -> bool:
        """A PROMISE reaches this coordinator: whether the promises of the ballot it prepares now come
        from a primary component of ``view`` (choose then: `choose`) — and it is still ``coordinating``:
        else (it asked to leave meanwhile, say) it gives the ballot up, the next coordinator runs the
        view change. One naming another coordinator's ballot, above any this member promised, answers
        a proposal of this member's that ``src`` ignored (`refusal`): this member promises that ballot
        too, so that it gives its proposal up and, a period later, runs phase 1 above it (`to_propose`)."""
        if f.view != view.id + 1 or src not in view.members:
            return False
        if self.preparing is None:
            b = (f.attempt, f.coordinator)
            if not f.accepted and f.coordinator != me and self._above(b, True):
                self.highest = max(self.highest, f.attempt)
                self.promised, self.promised_at = b, now
            return False
        if ballot_key((f.attempt, f.coordinator)) > ballot_key(self.preparing):
            # ``src`` promised a higher ballot: give this one up; the next is above it (`to_propose`)
            self.highest = max(self.highest, f.attempt)
            self.preparing = None
            return False
        if (f.attempt, f.coordinator) != self.preparing or f.coordinator != me:
            return False
        self.promises[src] = f
        if not (self._above(self.preparing, False) and has_quorum(view.members, self.promises)):
            return False
        if not coordinating:
            self.preparing = None
        return coordinating

    def choose(self, view: View, me: str, verified: set[str], suspected: Collection[str], peers: Peers,
               quorum: bool, expected: Collection[str], now: float) -> Propose | None:
        """Phase 1 done (`take_promise`): the proposal of this ballot, to send ``now``. It adopts the
        highest ballot reported that may have been decided — every promiser among its voters reported
        it (a voter that promised without reporting it never will: it reports FLUSHED for no lower
        ballot than it promised); its voters now are the promisers, a primary component, and the
        decision is its INSTALL. Else a proposal of its own (`wanted`), or None if there is no reason
        for one now.

        Safety (Paxos): if ballot ``a`` was decided, all its voters reported it, and every promiser
        among them did before promising (a FLUSHED is sent only for the ballot promised); the
        promisers (a primary component) meet ``a``'s voters (one too), so ``a`` may have been decided
        here, and the ballot adopted is ``a`` or a higher one, which by induction carries ``a``'s
        INSTALL."""
        b = self.preparing
        assert b is not None
        promisers = set(self.promises)
        reports: dict[Ballot, tuple[frozenset[str], Install, set[str]]] = {}
        for src, f in self.promises.items():
            for a, c, voters, install in f.accepted:
                entry = reports.setdefault((a, c), (frozenset(voters), install, set()))
                entry[2].add(src)
        self.preparing = None
        self.promises = {}
        for ballot in sorted(reports, key=ballot_key, reverse=True):
            voters_of, install_of, reporters = reports[ballot]
            if promisers & voters_of <= reporters:
                removed = sorted_pids(view.members - promisers)
                self.proposed_at = now
                return Propose(view.id + 1, b[0], me, install_of.members,
                               tuple((m, view.incarnations[m]) for m in removed), view.group, install_of)
        # (if the reason for it is gone - a partition healed meanwhile - the promises still stopped
        # every flush of a lower ballot: a view change must end this one, `again`)
        new = (self.wanted(view, me, verified, suspected, peers, quorum, expected)
               or self.again(view, me, verified, suspected, quorum, expected))
        if new is None:
            return None
        self.proposed_at = now
        return Propose(new.view, b[0], me, new.members, new.removed, new.group)

    def again(self, view: View, me: str, verified: set[str], suspected: Collection[str], quorum: bool,
              expected: Collection[str] = ()) -> Propose | None:
        """A view change with no reason of its own, to end one that stalled: the view again, without
        the members found dead (if the rest is a primary component)."""
        removed = verified & view.members
        if not may_change_without(view.members, removed, suspected, quorum, expected):
            return None
        return proposal(view, me, self.highest + 1, {m: i for m, i in view.incarnations.items() if m not in removed},
                        removed)

    def refusal(self, src: str, p: Propose, view: View) -> Promise | None:
        """The answer to a proposal of this view change from its coordinator that this member ignores
        because its ballot is below the one promised: a PROMISE naming that ballot, as to a PREPARE
        below it (`promise`): without it a coordinator that hears of no higher ballot sends its
        proposal again for ever. None for any other proposal."""
        if (self.promised is None or p.view != view.id + 1 or p.coordinator != src or p.group != view.group
                or (p.attempt == 0 and p.coordinator != smallest(view)) or self._above((p.attempt, p.coordinator), False)):
            return None
        return Promise(p.view, self.promised[0], self.promised[1], ())

    def follows(self, p: Propose, view: View) -> bool:
        """Whether to follow proposal ``p`` (of the right view and group, from its coordinator): ballot
        0 only from the smallest member; not below the ballot promised; not the one followed."""
        if p.attempt == 0 and p.coordinator != smallest(view):
            return False
        self.highest = max(self.highest, p.attempt)
        b = (p.attempt, p.coordinator)
        if not self._above(b, False):
            return False
        return self.flush is None or self.flush.ballot != b

    def start(self, p: Propose, view: View, me: str, clock: int, now: float) -> tuple[Flushing, set[str]] | None:
        """Follow ``p``: the flush, and the members cut by an earlier attempt that this one keeps
        (their frames are taken after all); None if this member is not in the flush set. ``clock``:
        this member's clock, sent in its marker. An adopting proposal runs no flush: this member votes
        at once (the caller reports FLUSHED), and nothing is taken back."""
        removed = frozenset(pid for pid, _ in p.removed)
        flush_set = frozenset(view.members - removed)
        if me not in flush_set:
            return None
        self.promised, self.promised_at = (p.attempt, p.coordinator), now
        if p.coordinator == me:
            self.trips.ask(("flush", p.view, p.attempt), now)  # (the FLUSHEDs answer it: `report`)
        if p.adopts is not None:
            self.flush = Flushing(p, flush_set, removed, {}, done=True)
            self.accepted[self.flush.ballot] = (flush_set, p.adopts)
            return self.flush, set()
        early = self.early_markers.pop((p.view, p.attempt, p.coordinator), {})
        kept = self.cut - removed
        self.cut = set(removed)
        markers = {src: c for src, c in early.items() if src in flush_set}
        markers[me] = clock
        self.flush = Flushing(p, flush_set, removed, markers)
        return self.flush, kept

    def accept(self, src: str, p: Propose, view: View, me: str, clock: int, quorum: bool,
               now: float) -> tuple[Flushing, list[tuple[str, Frame]]] | str | Promise | None:
        """What proposal ``p`` from ``src`` does to this member of ``view``: the flush it now follows,
        with the frames of members an earlier attempt cut and this one keeps (to be taken now, in
        order); or why this member is out of the group (without a quorum, a proposal that removes it
        does); or, ignored, the PROMISE to send back if it is below the ballot promised (`refusal`),
        else None — not the next view of this group from its coordinator, below the ballot promised
        (`follows`), removing this member with a quorum (only a proposal: if it completes, a member
        of the new view will say so), or this member not in its flush set."""
        step = self._accept(src, p, view, me, clock, quorum, now)
        return self.refusal(src, p, view) if step is None and src != me else step

    def _accept(self, src: str, p: Propose, view: View, me: str, clock: int, quorum: bool,
                now: float) -> tuple[Flushing, list[tuple[str, Frame]]] | str | None:
        if p.view != view.id + 1 or p.coordinator != src or p.group != view.group:
            return None
        if not self.follows(p, view):
            return None
        if any(pid == me for pid, _ in p.removed):
            if p.adopts is not None:
                return None  # (not a voter of an adopted attempt: its INSTALL says what it is)
            return None if quorum else f"{src} removed this peer"
        started = self.start(p, view, me, clock, now)
        if started is None:
            return None
        flushing, kept = started
        return flushing, self.take_back(kept) if kept else []

    def take_back(self, kept: Collection[str]) -> list[tuple[str, Frame]]:
        """The frames of ``kept`` members held since they were cut, in order (they count after all)."""
        frames = self.cut_frames
        self.cut_frames = [(s, f) for s, f in frames if s not in kept]
        return [(s, f) for s, f in frames if s in kept]

    def marker(self, src: str, f: Flush, current: View | None) -> bool:
        """A FLUSH marker from ``src``, in ``current`` (None: outside any view): whether it counts for the
        attempt followed (one of the next view's attempts not followed yet waits, `early_marker`)."""
        view, attempt, coordinator, clock = f.view, f.attempt, f.coordinator, f.clock
        current_view = current.id if current is not None else None
        flush = self.flush
        p = flush.proposal if flush is not None else None
        if flush is None or p is None or (view, attempt, coordinator) != (p.view, p.attempt, p.coordinator):
            if current_view is not None and view == current_view + 1:
                self.early_marker(src, view, attempt, coordinator, clock)
            return False
        if src not in flush.flush_set or p.adopts is not None:
            return False
        flush.markers[src] = clock
        return True

    def open_outcome(self) -> bool:
        """Whether an attempt other than the one followed, which this member reported FLUSHED for, may
        still be installed: until the view change ends, always (its coordinator may have decided it
        and been cut off, or another may adopt it; a rule that dropped it once its coordinator was found
        dead outside the current flush set let two attempts of one view change both be installed)."""
        flush = self.flush
        current = flush.key if flush is not None else None
        return any(key != current for key in self.outcomes)

    def settle(self, order: Order, stats: dict[str, int], view: View,
               delivered_marks: Mapping[str, int]) -> Propose | None:
        """The flush's last step, once it can leave nothing pending: everything a survivor holds,
        needing only the survivors' ACKs (what none of them holds is dropped). The same at every
        survivor, but only *worked out* here, on a copy of ``order``: it takes effect at the INSTALL
        of this attempt (`Outcome`); until then the peer may still follow another. The proposal
        settled (report FLUSHED for it: it is accepted, with the INSTALL it decides, `value`), or None
        — also when this member promised a higher ballot meanwhile (it reports no lower one)."""
        flush = self.flush
        assert flush is not None
        if not order.settles(flush.flush_set):
            return None
        trial = copy.deepcopy(order, {id(stats): stats})
        out = trial.release(flush.flush_set, True)
        if len(trial):
            return None
        flush.done = True
        p = flush.proposal
        if self.promised != flush.ballot:
            return None
        self.outcomes[flush.ballot] = Outcome(trial, out)
        self.accepted[flush.ballot] = (flush.flush_set, value(flush, view, out, delivered_marks))
        return p

    def report(self, src: str, view: int, attempt: int, clock: int, me: str, now: float = 0.0) -> bool:
        """A FLUSHED report reaches this coordinator ``now``: whether every member of the flush set has
        now reported (install then)."""
        self.trips.answer(("flush", view, attempt), src, now)
        flush = self.flush
        if flush is None or flush.proposal.coordinator != me:
            return False
        p = flush.proposal
        if (view, attempt) != (p.view, p.attempt) or src not in flush.flush_set:
            return False
        flush.flushed[src] = clock
        return set(flush.flushed) >= flush.flush_set and flush.ballot in self.accepted

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

    def install(self, me: str) -> tuple[Install, Sends]:
        """The INSTALL of the attempt this coordinator runs, every report in: the one its ballot was
        accepted with (`value`, or the adopted one), the same every voter holds; and where it goes
        first: an adopted view without this coordinator (`choose`) is sent by it to its members, who
        hear the decision from it, before it is out."""
        flush = self.flush
        assert flush is not None
        i = self.accepted[flush.ballot][1]
        members = set(dict(i.members)) | set(i.left)
        return i, [] if me in members else [(tuple(sorted_pids(members - {me})), i)]


def audience(view: View, p: Propose, me: str) -> tuple[str, ...]:
    """Where proposal ``p`` goes: every other member of ``view`` and of ``p`` (the removed hear it too)."""
    return tuple(sorted_pids((set(view.members) | {m for m, _ in p.members}) - {me}))


def to_send(view: View, me: str, again: Propose | None, new: Propose | None, prepare: Prepare | None) -> Sends:
    """The coordinator's proposals (`audience`) and its PREPARE (to the view's other members), in that order."""
    sends: Sends = [(audience(view, p, me), p) for p in (again, new) if p is not None]
    others = tuple(sorted_pids(view.members - {me}))
    if prepare is not None and others:
        sends.append((others, prepare))
    return sends


def value(flush: Flushing, view: View, out: list[Entry], delivered_marks: Mapping[str, int]) -> Install:
    """The INSTALL that attempt ``flush`` decides, worked out by each voter as it settles (its last step
    delivering ``out``; ``delivered_marks``: the clock of the last message of each origin delivered
    here before it): a function of what every voter holds, so that a coordinator that adopts the
    attempt sends the same INSTALL, byte for byte — the view event ``(clock + 1, coordinator)`` is
    the same wherever it is delivered.

    Its clock is the highest of the flush set's markers' clocks. That bounds every message of the old
    view a survivor delivers: each survivor sends its messages and relays before its marker (so their
    clocks are at most its marker's), and every message it holds came before its marker too (what a
    removed member sends after the proposal is cut), so its clock raised the survivor's own.
    ``delivered`` (only when someone joins): every origin's last message delivered here, this last
    step included — the same at every voter, which all delivered the same sequence."""
    p = flush.proposal
    new = {m for m, _ in p.members}
    joined = {m for m, inc in p.members if view.incarnations.get(m) != inc}
    delivered: tuple[tuple[str, int], ...] = ()
    if joined:  # (what this attempt's last step delivers counts: it is delivered before the view)
        upto = dict(delivered_marks)
        for e in out:
            upto[e.pid] = e.clock
        # every pid's, not only the joiners': a joiner learns them all, so that a member that
        # joined after some peer was cut off still knows, as coordinator, what the group
        # delivered of that peer when it admits it again (else it sends it again)
        delivered = tuple(sorted(upto.items()))
    return Install(
        p.view, p.attempt, p.coordinator, max(flush.markers.values()), p.members,
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
        if p.adopts is not None:  # (its "removed" are the members that do not vote, not the view's removed)
            removed = set(verified)
            if not may_change_without(view.members, removed, suspected, quorum, expected):
                return None
            members = {m: i for m, i in view.incarnations.items() if m not in removed}
            return proposal(view, me, change.highest + 1, members, removed)
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
