"""Founding the first group among the expected peers (the neighbors file): a handshake.

A Join may be stale (a link re-sends it after a heal, when its sender has joined a group on the
other side meanwhile), so with a quorum a founder does not install on Joins alone: it proposes view 1
(PROPOSE, attempt k) to the founders it counted; each still joining answers with a *promise*
(FLUSHED of view 1) that binds it for the attempt's *window* (`window`): no INSTALL of another group is
taken, no other founder is promised. The founder installs only once every founder promised, within
half that window of its proposal; else it proposes again, with the next attempt.

The window doubles with each attempt (`Timing.suspect_after` for the first, at most
``2 ** MAX_DOUBLINGS`` times that): both sides derive it from the attempt number the proposal carries,
so no clock or delay is shared. This cannot livelock on slow links: a founding fails for want of time
only while a round trip is longer than half the window, and the window outgrows any round trip up to
``2 ** MAX_DOUBLINGS * suspect_after / 2`` (160 s with the default timing: a one-way delay of 80 s,
more than ``--delay`` takes) after a few attempts (docs/design/slow-links.md).

Invariants: a peer holds at most one live promise; ``last_promised`` remembers the members of the last
founding it promised — it may have been installed without this peer hearing of it (a partition) —
so until it knows better (a view installed, that founder restarted) it founds, or promises, only
with a primary component of them. A peer cut off from its group (``rejoining``) joins it again: it
founds no other, promises no founder, and takes no view of that group from before the cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mypy_extensions import mypyc_attr

from ..codec.frames import Flushed, Install, Join, Propose
from ..codec.pid import pid_key
from .notices import NoFoundingQuorum
from .peers import Peers
from .quorum import has_quorum, kept_file
from .records import Timing, View
from .roundtrip import RoundTrips

Members = tuple[tuple[str, int], ...]
"""(pid, incarnation) pairs in pid order."""

MAX_DOUBLINGS = 6
"""A founding attempt's window doubles at most this many times (`window`)."""


def window(first: float, attempt: int) -> float:
    """How long a promise of founding attempt ``attempt`` (from 1) binds; its founder installs only
    on the promises that came within half of it. ``first``: the first attempt's."""
    return first * 2.0 ** min(max(attempt - 1, 0), MAX_DOUBLINGS)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Founding:
    """This peer's side of the founding handshake, as founder and as promiser."""

    __slots__ = ("expected", "short", "proposing", "promise", "last_promised", "attempts", "bound_for",
                 "rejoining", "cut_from", "trips", "file", "resume")

    def __init__(self, expected: Iterable[str], bound_for: float, trips: RoundTrips | None = None,
                 quorum: bool = True, last_man_standing: bool = False, resume: tuple[int, str] = (0, "")) -> None:
        self.expected = frozenset(expected)  # empty: any peer may found a group of its own
        self.file = kept_file(self.expected, quorum, last_man_standing)  # what a view change keeps a primary of
        self.short: tuple[int, int] | None = None  # (here, expected) while too few are here to found
        # this founder's proposal of view 1, the founders that promised (-> their clock), when it went
        self.proposing: tuple[Propose, dict[str, int], float] | None = None
        self.promise: tuple[str, str, int, float] | None = None  # (founder, group, attempt, until)
        self.last_promised: tuple[str, int, frozenset[str]] | None = None  # (founder, its incarnation, members)
        self.attempts = 0
        self.bound_for = bound_for  # how long a promise of the first attempt binds (`window`)
        self.rejoining = False
        self.cut_from: tuple[str, int] = ("", 0)  # (group, view) this peer was cut off from, if any
        self.trips = RoundTrips() if trips is None else trips  # (timed: a proposal, a promise)
        self.resume = resume  # a durable peer's history: its last view and group ((0, ""): none)

    def refoundable(self, view: View, peers: Peers, reachable: Iterable[str]) -> bool:
        """Whether this member, without a quorum of ``view``, may found its group again: members that
        restarted from their data (a new incarnation connected, asking to join with a history of this
        group) and the members it still reaches are a primary component of the view and of the file.
        Their old incarnations are dead, so no other side can go on; the founding itself still needs a
        primary component of the file (`form`)."""
        restarted = {p for p, (v, g) in peers.resumes.items() if v and g == view.group and p in view.members
                     and peers.links.get(p, view.incarnations[p]) != view.incarnations[p]}
        here = restarted | set(reachable)
        return bool(restarted) and has_quorum(view.members, here) and (not self.file or has_quorum(self.file, here))

    def refound(self, view: View) -> None:
        """This member left ``view`` to found the group again with the members that restarted: it may
        found and promise (unlike a peer cut off), and says where its history ends."""
        self.rejoining, self.cut_from = False, ("", 0)
        self.resume = (view.id, view.group)

    def join(self, me: str, incarnation: int) -> Join:
        """This joining peer's JOIN (naming where its history ends, if it has one)."""
        return Join(me, incarnation, *self.resume)

    def done(self) -> None:
        """A view was installed: the handshake is over (and a rejoin with it)."""
        self.rejoining = False
        self.short = None
        self.proposing = self.promise = self.last_promised = None

    def cut_off(self, group: str, view: int) -> None:
        """This peer, cut off from ``view`` of ``group``, starts again as a joiner: no proposal or
        promise of before holds."""
        self.proposing = self.promise = self.last_promised = None
        self.cut_from = (group, view)
        self.rejoining = True

    def admits(self, i: Install, me: str, incarnation: int, now: float) -> bool:
        """Whether INSTALL ``i`` admits this peer, outside any group: it names this incarnation, is
        not another founding's while this peer's promise binds it (the founder it promised may
        install it; this group asks again), and is no view from before this peer was cut off (sent
        by a member that did not know yet)."""
        if dict(i.members).get(me) != incarnation:
            return False
        founding = len(i.joined) == len(i.members)  # (a group founded, or founded again from its members' data)
        if self.promised_elsewhere(i.coordinator if founding else "", i.group, now):
            return False
        return not (i.group == self.cut_from[0] and i.view <= self.cut_from[1])

    def left(self, pid: str) -> None:
        """``pid`` left before it was in any group (or asked to leave ours): a founding it proposed was
        not installed (its INSTALL would have come first, and been taken: this peer's last promise
        was to it), and one counting it will not be; promises to it and such a proposal are void."""
        last, promise, proposing = self.last_promised, self.promise, self.proposing
        if last is not None and last[0] == pid:
            self.last_promised = None
        if promise is not None and promise[0] == pid:
            self.promise = None
        if proposing is not None and pid in dict(proposing[0].members):
            self.proposing = None

    def restarted(self, pid: str, incarnation: int) -> None:
        """``pid`` is now ``incarnation``: a founding it proposed, installed or not, died with its old one."""
        last = self.last_promised
        if last is not None and last[0] == pid and last[1] != incarnation:
            self.last_promised = None

    def form(self, me: str, incarnation: int, peers: Peers, last_heard: Mapping[str, float], clock: int,
             now: float, since: float, t: Timing, quorum: bool) -> Install | Propose | NoFoundingQuorum | None:
        """This peer, joining ``since``, may found a group once it waited `Timing.form_after` — at once
        when every expected peer is connected and asked to join —, if nobody
        with a group answered and no smaller joining peer is here (`Peers.founders`: then it is the
        smallest joining one) — a group of itself and every connected peer that asked to join: the
        INSTALL of view 1 to install now (no flush is needed: nobody delivered anything yet), or the
        proposal of view 1 to send (with a quorum, among expected peers: the handshake), or why not
        (too few of the expected peers, said when their number changes), or None (wait; never while it
        rejoins)."""
        members = peers.founders(me, incarnation, last_heard, now - t.suspect_after - t.verify_after)
        if members is None or self.rejoining:
            return None
        if now - since < t.form_after and not (self.expected and self.expected <= members.keys()):
            return None  # (every expected peer here and joining: nobody is left to wait for)
        if quorum and self.expected and not has_quorum(self.expected, members):
            # (Corosync's expected votes: a lone peer, or a minority cut off at the start, waits)
            short = (len(members.keys() & self.expected), len(self.expected))
            if short == self.short:
                return None
            self.short = short
            return NoFoundingQuorum(*short)
        self.short = None
        if self.possibly_in_another(members, me):
            return None  # it may be in a group founded meanwhile: it waits to hear of it
        ordered = tuple(sorted(members.items(), key=lambda kv: pid_key(kv[0])))
        view, group = self.first_view(me, incarnation, members, peers.resumes)
        if not (quorum and self.expected) or len(ordered) == 1:
            return view_one(me, 0, clock, ordered, group, view)
        return self.propose(me, group, ordered, clock, now, view)

    def first_view(self, me: str, incarnation: int, members: Iterable[str],
                   resumes: Mapping[str, tuple[int, str]]) -> tuple[int, str]:
        """The view a founding installs and its group: view 1 of a new group, or — when founders
        bring a history (durable peers restarted: `resume`) — the view after the last one any of them
        delivered, of that view's group: a group restarted as a whole goes on."""
        known = [self.resume] + [resumes.get(p, (0, "")) for p in members if p != me]
        last, group = max(known, key=lambda r: (r[0], r[1]))
        return (last + 1, group) if last else (1, f"{me}/{incarnation}")

    def promised_elsewhere(self, founder: str, group: str, now: float) -> bool:
        """Whether this peer holds a live promise to another founder (or another group of it)."""
        promise = self.promise
        return promise is not None and promise[3] > now and (promise[0], promise[1]) != (founder, group)

    def possibly_in_another(self, members: Iterable[str], me: str) -> bool:
        """Whether ``members`` lack a primary component of a founding this peer promised and may be a
        member of (`binding`)."""
        last = self.binding(me)
        return last is not None and not has_quorum(last, members)

    def binding(self, me: str) -> frozenset[str] | None:
        """The members of the founding this peer promised last, while it binds: installed without this
        peer hearing of it, that group could go on without it — its other members are a primary
        component of it, and of the file a view change keeps (`file`). Otherwise (its founder left
        or crashed before installing, say) it could never deliver or change its view without this
        peer: None, it binds no more (only with expected peers; without, every promise binds)."""
        last = self.last_promised
        if last is None:
            return None
        others = last[2] - {me}
        if self.expected and not (has_quorum(last[2], others) and (not self.file or has_quorum(self.file, others))):
            return None
        return last[2]

    def propose(self, me: str, group: str, ordered: Members, clock: int, now: float,
                view: int = 1) -> Propose | None:
        """The proposal of view 1 to send to the other founders, or None (one is under way, or this
        peer promised another founder)."""
        if self.promised_elsewhere(me, group, now):
            return None
        current = self.proposing
        if (current is not None and current[0].members == ordered and current[0].view == view
                and now - current[2] < window(self.bound_for, current[0].attempt) / 2):
            return None
        self.attempts += 1
        proposal = Propose(view, self.attempts, me, ordered, (), group)
        self.proposing = (proposal, {me: clock}, now)
        self.trips.ask(("found", 1, proposal.attempt), now)
        return proposal

    def on_proposal(self, src: str, p: Propose, me: str, incarnation: int, clock: int,
                    now: float, founder_joining: bool = True) -> Flushed | None:
        """A founder's proposal reached this joining peer: the promise to send it, or None.
        ``founder_joining``: ``src`` is outside any group too (it announced no view)."""
        if self.rejoining:
            return None
        members = dict(p.members)
        # view 1 of a new group; or, for a durable peer, a later view founded again by a joining peer
        # (not a view change of a running group, which a member proposes), past this peer's history
        refounded = self.resume[0] > 0 and founder_joining and p.view > self.resume[0]
        if (not (p.view == 1 or refounded) or p.coordinator != src or p.removed or members.get(me) != incarnation
                or self.promised_elsewhere(src, p.group, now)):
            return None
        last = self.last_promised
        if last is not None and last[0] != src and self.possibly_in_another(members, me):
            return None
        self.promise = (src, p.group, p.attempt, now + window(self.bound_for, p.attempt))
        self.trips.ask(("install", 1, p.attempt), now)
        self.last_promised = (src, members[src], frozenset(members))
        return Flushed(p.view, p.attempt, clock)

    def on_promise(self, me: str, src: str, f: Flushed, now: float) -> Install | None:
        """A founder's promise came: the INSTALL of view 1 once every founder promised in time."""
        self.trips.answer(("found", 1, f.attempt), src, now)
        current = self.proposing
        if current is None or f.view != current[0].view or f.attempt != current[0].attempt:
            return None
        proposal, promised, at = current
        if src not in dict(proposal.members):
            return None
        promised[src] = f.clock
        if len(promised) < len(proposal.members):
            return None
        self.proposing = None
        if now - at >= window(self.bound_for, proposal.attempt) / 2:
            return None  # too late to be sure every promise still holds: the next tick proposes again
        return view_one(me, proposal.attempt, max(promised.values()), proposal.members, proposal.group, proposal.view)


def view_one(me: str, attempt: int, clock: int, members: Members, group: str, view: int = 1) -> Install:
    """The INSTALL of a founding by ``me`` of ``members`` (view 1 of a new group, or the next view of a
    group founded again from its members' data): every member joins it."""
    return Install(view, attempt, me, clock, members, tuple(p for p, _ in members), (), (), group=group)
