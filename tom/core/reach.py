"""Shared suspicions: who cannot reach whom, and what the coordinator does about it.

Only the coordinator changes the view, and it removes only the members *it* stops hearing; a member
that cannot hear another (a one-way cut, neighbors files that differ) would otherwise wait for ever
for the ACKs that never cross the missing link. So:

* **Report.** A member that takes a member ``s`` for dead (its own `FailureDetector` verified it)
  and sees it still in the view a heartbeat period later (a crash: the coordinator's own detector acts
  first, and nothing is reported) sends ``SUSPECT(view, s, incarnation, since)`` to the coordinator,
  again every heartbeat period while that holds (`Reach.report`). "The coordinator" is the one this
  member takes for the coordinator *and* the smallest staying member of the view, when they differ
  (a member that cannot hear the smallest still tells it: it may be the one cut off); a member that
  takes itself for the coordinator reports only while it has no quorum (a broken receiver).
* **Act.** The coordinator keeps the reports that are fresh (renewed within `FRESH_PERIODS` heartbeat
  periods) and settled (held `SETTLE_PERIODS` periods, or answered by the target's own report of the
  reporter) and removes, by a normal view change, the peer each report costs (`removals`): the
  suspect — unless the reporter is the one cut off (it reports a majority of the other members, or
  others report it — not counting the reports of a member that is itself cut off that way), then the
  reporter; two members that report each other: the larger pid. A report of the coordinator itself
  removes nobody (a side of a partition reports it; the coordinator's own detector and the quorum
  rules decide). Never a set whose removal leaves no strict majority of the view: then nobody is
  removed by this rule, and the quorum rules hold as before.
* **Joins.** A member that receives a joiner's JOIN on its own link sends ``SEES(view, j,
  incarnation)`` to the coordinator. The coordinator admits ``j`` only when every member that stays
  reported it (`Reach.hold_back`); after `Timing.suspect_after` without some member's report it says
  which member cannot reach the joiner, and tells the joiner (``SUSPECT`` with view 0, naming that
  member), so that the joiner's `NotAdmitted` notice names it too.
* **Say so.** Each pair ``(reporter, target)`` is noticed once while it lasts (`notices.Unreachable`),
  at the reporter and at the coordinator; the pairs held now are `Reach.pairs` (the status).

No I/O, no clock: the caller passes ``now``. Nothing here is on the message path: reports go out at
most once a heartbeat period, SEES once per JOIN received.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from mypy_extensions import mypyc_attr

from ..codec.frames import Join, Sees, Suspect
from ..codec.pid import pid_key, sorted_pids
from .notices import NotAdmitted, Unreachable
from .peers import Peers
from .quorum import coordinator
from .records import Sends, Timing, View

FRESH_PERIODS = 3
"""A report counts while renewed within this many heartbeat periods (its reporter sends one a period)."""

SETTLE_PERIODS = 2
"""A report counts once held this many heartbeat periods (or once its target reports its reporter too):
a one-way cut on TCP soon cuts the other way (the receiver's acknowledgements are lost, the sender's
window closes), and the two members' reports, a moment apart, then name the same loser — the larger
pid — whichever reaches the coordinator first."""

Pair = tuple[str, str]
"""(reporter, target): the reporter cannot reach (hear) the target."""


def removals(members: Collection[str], coordinator: str, reported: Mapping[str, Collection[str]],
             dead: Collection[str] = ()) -> dict[str, Pair]:
    """Who the shared suspicions remove from a view of ``members`` run by ``coordinator``:
    ``reported`` maps each reporter to the members it cannot hear; the answer maps each peer to remove
    to the first pair (in pid order) that costs it. See the module's "Act" for the rule. A report of a
    member the coordinator finds ``dead`` itself counts for nothing: its own detector removes it, and
    a member that reports the crashed is no broken receiver."""
    members = set(members)
    by: dict[str, set[str]] = {}
    for r, targets in reported.items():
        ts = {t for t in targets if t in members and t != r and t not in dead}
        if r in members and r != coordinator and ts:
            by[r] = ts
    others = len(members) - 1
    cut_off = {r for r, ts in by.items() if 2 * len(ts) > others}  # a broken receiver reports everyone
    reporters_of: dict[str, set[str]] = {}
    for r, ts in by.items():
        if r not in cut_off:  # (what a cut-off member reports says nothing about the others)
            for t in ts:
                reporters_of.setdefault(t, set()).add(r)
    out: dict[str, Pair] = {}
    for r in sorted_pids(by):
        for t in sorted_pids(by[r]):
            if t == coordinator:
                continue  # its own detector and the quorum rules decide (a partition's side reports it)
            if r in cut_off or reporters_of.get(r, set()) - {t}:
                loser = r  # the reporter is the one cut off
            elif r in by.get(t, ()):
                loser = max(r, t, key=pid_key)  # a pair that cannot hear each other
            else:
                loser = t
            out.setdefault(loser, (r, t))
    if 2 * len(members - set(out)) <= len(members):
        return {}  # never the group's majority (nor half of it): the quorum rules decide, as before
    return out


def unadmitted(joiner: str, incarnation: int, staying: Iterable[str], sees: Mapping[str, tuple[int, float]],
               since: float) -> list[str]:
    """The ``staying`` members that did not report joiner ``joiner`` (as ``incarnation``) since ``since``:
    ``sees`` maps each member to the incarnation and time of its last SEES."""
    missing = []
    for m in sorted_pids(staying):
        seen = sees.get(m)
        if seen is None or seen[0] != incarnation or seen[1] < since:
            missing.append(m)
    return missing


def report_to(view: View, me: str, leaves: Collection[str], verified: Collection[str]) -> tuple[str, ...]:
    """Where a member's SUSPECT and SEES go: the coordinator it sees (``verified``: the members it takes
    for dead; ``leaves``: those asking to leave), and the smallest staying member (the coordinator if
    this member's own suspicions are wrong: it may be the one cut off)."""
    to = {coordinator(view.members, (), leaves), coordinator(view.members, verified, leaves)} - {me, None}
    return tuple(sorted_pids(p for p in to if p is not None))


def sees(view: View, me: str, join: Join, leaves: Collection[str], verified: Collection[str]) -> Sends:
    """A joiner's ``join`` came on this member's own link: the SEES that tells the coordinator
    (`report_to`), which admits a joiner only once every member that stays has a link to it."""
    to = report_to(view, me, leaves, verified)
    return [(to, Sees(view.id, join.pid, join.incarnation))] if to else []


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Reach:
    """What this peer knows of who cannot reach whom: as a reporter, when it last reported; as the
    coordinator, the reports and SEES it holds, the joiners it holds back; as a joiner, the members
    its group's coordinator says do not reach it; and the pairs noticed."""

    __slots__ = ("reports", "sees", "held_since", "told_joiner", "reported_at", "mine", "decided", "holding",
                 "unreached_by", "not_admitted_at")

    def __init__(self) -> None:
        # suspect -> reporter -> (incarnation, when last renewed, since when it holds)
        self.reports: dict[str, dict[str, tuple[int, float, float]]] = {}
        self.sees: dict[str, dict[str, tuple[int, float]]] = {}  # joiner -> member -> (incarnation, when)
        self.held_since: dict[str, tuple[int, float]] = {}  # joiner -> (incarnation, held back since)
        self.told_joiner: dict[str, float] = {}  # joiner -> when it was last told who does not reach it
        self.reported_at = float("-inf")  # when this member last sent its SUSPECTs
        self.mine: dict[Pair, str] = {}  # the pairs this member reports (it is their reporter), and why
        self.decided: dict[Pair, str] = {}  # as the coordinator: the pairs acted on, and how
        self.holding: dict[Pair, str] = {}  # as the coordinator: members that do not reach a joiner
        self.unreached_by: dict[str, float] = {}  # as a joiner: members said not to reach it -> when
        self.not_admitted_at = float("-inf")  # as a joiner: when it last said it was not admitted

    @property
    def pairs(self) -> tuple[Pair, ...]:
        """The unreachable pairs known here now (reported, acted on, or holding a joiner back)."""
        held = set(self.mine) | set(self.decided) | set(self.holding)
        return tuple(sorted(held, key=lambda p: (pid_key(p[0]), pid_key(p[1]))))

    # -- a reporter --------------------------------------------------------------------------------

    def report(self, view: View, me: str, verified: Collection[str], leaves: Collection[str],
               suspected: Mapping[str, float], gone: Collection[str], no_quorum: bool, now: float,
               t: Timing) -> tuple[Sends, list[Unreachable]]:
        """The SUSPECTs this member of ``view`` sends now, to the coordinator (`report_to`: ``verified``,
        the members it takes for dead, ``leaves``, those asking to leave; none while it takes itself for
        the coordinator, but for when it has no quorum: it may be the one cut off), one per member it
        took for dead (``suspected``: pid -> since) a heartbeat period ago and that is still in the view
        (``gone``: the members the flush under way removes are not), at most once a heartbeat period;
        and the notices of the pairs new since the last report."""
        if not suspected:  # (every tick of every member: nothing to report, no pair to say)
            self.mine = {}
            return [], []
        acting = coordinator(view.members, verified, leaves) == me and not no_quorum
        to = () if acting else report_to(view, me, leaves, verified)
        period = t.heartbeat
        targets = {p: since for p, since in suspected.items() if now - since >= t.verify_after + period
                   and p not in gone and p in view.members and p != me}
        if not to:
            targets = {}
        pairs = {(me, p): f"telling {', '.join(sorted_pids(to))}" for p in targets}
        notices = _news(self.mine, pairs)
        self.mine = pairs
        if not targets or now - self.reported_at < period:
            return [], notices
        self.reported_at = now
        return [(to, Suspect(view.id, p, view.incarnations[p], max(0, int(now - since))))
                for p, since in sorted(targets.items(), key=lambda kv: pid_key(kv[0]))], notices

    # -- the coordinator -------------------------------------------------------------------------

    def suspect(self, src: str, frame: Suspect, view: View, now: float, t: Timing | None = None) -> bool:
        """A member's SUSPECT: whether it is kept (of this view, about a member as its incarnation); a
        report renewed while fresh (`FRESH_PERIODS` of ``t``'s heartbeat) goes on holding since its first."""
        fresh = FRESH_PERIODS * t.heartbeat if t is not None else float("inf")
        if (frame.view != view.id or src not in view.members or frame.pid not in view.members
                or view.incarnations[frame.pid] != frame.incarnation or frame.pid == src):
            return False
        by = self.reports.setdefault(frame.pid, {})
        held = by.get(src)
        since = held[2] if held is not None and held[0] == frame.incarnation and now - held[1] <= fresh else now
        by[src] = (frame.incarnation, now, since)
        return True

    def seen(self, src: str, frame: Sees, now: float) -> bool:
        """A member's SEES: it has a link to the joiner (kept: always)."""
        self.sees.setdefault(frame.pid, {})[src] = (frame.incarnation, now)
        return True

    def removals(self, view: View, me: str, now: float, fresh: float,
                 dead: Collection[str] = (), settle: float = 0.0) -> tuple[dict[str, Pair], list[Unreachable]]:
        """As the coordinator of ``view``: the members the fresh reports remove (`removals`; ``dead``:
        those its own detector verified), each with the pair that costs it, and the notices of pairs
        new since the last call. A report counts once held ``settle`` seconds, or at once if its target
        reports its reporter too (`SETTLE_PERIODS`)."""
        live: dict[str, set[str]] = {}
        held: set[Pair] = set()
        for target, by in self.reports.items():
            for reporter, (inc, when, since) in by.items():
                if now - when <= fresh and view.incarnations.get(target) == inc:
                    live.setdefault(reporter, set()).add(target)
                    if now - since >= settle:
                        held.add((reporter, target))
        reported: dict[str, set[str]] = {}
        for reporter, targets in live.items():
            for target in targets:
                if (reporter, target) in held or reporter in live.get(target, ()):
                    reported.setdefault(reporter, set()).add(target)
        out = removals(view.members, me, reported, dead)
        pairs = {pair: f"removing {loser}" for loser, pair in out.items()}
        for r, ts in reported.items():  # pairs that cost nobody (the loser is already going): said too
            for t in ts:
                if (r, t) not in pairs and (r in out or t in out):
                    pairs[(r, t)] = f"removing {r if r in out else t}"
        notices = _news(self.decided, pairs)
        self.decided = pairs
        return out, notices

    def hold_back(self, view: View, joiners: Mapping[str, int], staying: Collection[str], now: float,
                  fresh: float, after: float) -> tuple[set[str], list[Unreachable]]:
        """As the coordinator: the ``joiners`` (pid -> incarnation) not to admit yet, since some member
        that stays (``staying``, this coordinator left out) has not reported them within ``fresh``; and
        the notices of members not reporting a joiner held back for ``after``."""
        held: set[str] = set()
        pairs: dict[Pair, str] = {}
        for j, inc in joiners.items():
            missing = unadmitted(j, inc, staying, self.sees.get(j, {}), now - fresh)
            if not missing:
                self.held_since.pop(j, None)
                continue
            held.add(j)
            inc0, since = self.held_since.get(j, (inc, now))
            if inc0 != inc:
                since = now
            self.held_since[j] = (inc, since)
            if now - since >= after:
                pairs.update({(m, j): "not admitting it" for m in missing})
        for j in list(self.held_since):
            if j not in joiners:
                del self.held_since[j]
                self.told_joiner.pop(j, None)
        for j in list(self.sees):
            if j not in joiners:
                del self.sees[j]
        notices = _news(self.holding, pairs)
        self.holding = pairs
        return held, notices

    def found_dead(self, view: View, me: str, verified: set[str], peers: Peers, now: float,
                   t: Timing) -> tuple[set[str], set[str], list[Unreachable], Sends]:
        """As the coordinator of ``view``: the members a view change removes now — those its own
        detector ``verified``, and those the fresh reports cost (`removals`) —, the joiners (`Peers.joiners`,
        held back or not) it holds back (`hold_back`: some member that stays, neither removed nor
        leaving, has no link to them), the notices of pairs new, and the SUSPECTs telling the joiners
        held back, on a link, why (`tell_joiners`)."""
        fresh = FRESH_PERIODS * t.heartbeat
        shared, said = self.removals(view, me, now, fresh, verified, SETTLE_PERIODS * t.heartbeat)
        dead = verified | set(shared)
        staying = view.members - dead - set(peers.leaves) - {me}
        held, held_said = self.hold_back(view, peers.joiners(view, True), staying, now, fresh + t.suspect_after,
                                         t.suspect_after)
        told: Sends = [((j,), frame) for j, frame in self.tell_joiners(view, now, t.heartbeat) if j in peers.links]
        return dead, held, said + held_said, told

    def tell_joiners(self, view: View, now: float, period: float) -> list[tuple[str, Suspect]]:
        """The SUSPECTs (view 0) that tell each joiner held back which members do not reach it, once a
        ``period``."""
        due = {j for _, j in self.holding if now - self.told_joiner.get(j, float("-inf")) >= period}
        for j in due:
            self.told_joiner[j] = now
        return [(j, Suspect(0, m, view.incarnations.get(m, 0), max(0, int(now - self.held_since[j][1]))))
                for m, j in sorted(self.holding, key=lambda p: (pid_key(p[1]), pid_key(p[0]))) if j in due]

    # -- a joiner ----------------------------------------------------------------------------------

    def not_reached_by(self, frame: Suspect, now: float) -> None:
        """Its group's coordinator says member ``frame.pid`` does not reach this joining peer."""
        self.unreached_by[frame.pid] = now

    def not_admitted(self, now: float, since: float, after: float) -> NotAdmitted | None:
        """Joining ``since``: the notice that this peer is not admitted yet, once it waited ``after``,
        and again each such period, with the members said within it not to reach it."""
        if now - max(since, self.not_admitted_at) < after:
            return None
        self.not_admitted_at = now
        return NotAdmitted(tuple(sorted_pids(p for p, when in self.unreached_by.items() if now - when <= after)))

    # -- views -------------------------------------------------------------------------------------

    def new_view(self, members: Iterable[str]) -> None:
        """A view was installed: reports were about the old one (their reporters send them again);
        the joiners now members are done with. What this member reports stays (it is said once)."""
        self.reports.clear()
        self.decided.clear()
        for m in members:
            self.sees.pop(m, None)
            self.held_since.pop(m, None)
        self.unreached_by.clear()

    def restart(self) -> None:
        """This peer rejoins (or is out of any group): everything about the old group is void."""
        self.__init__()  # type: ignore[misc]


def _news(old: Mapping[Pair, str], new: Mapping[Pair, str]) -> list[Unreachable]:
    """The notices of the pairs in ``new`` that ``old`` did not hold with the same action."""
    return [Unreachable(r, t, action) for (r, t), action in new.items() if old.get((r, t)) != action]
