"""The lab's fault schedule: the command line's fault options parsed into timed events (pure, no I/O).

Times are seconds after the workload starts: ``30%`` is 30 % of ``--duration``, ``12s`` (or ``12``)
is 12 seconds. Every event lies within the workload (0 .. duration). Peers are numbered 1..N.

Grammar (each option may be given several times)::

    --partition SIDES[@WHEN][+FOR]   SIDES: 1,2/3,4,5 (every peer on exactly one side); default @30%
    --heal WHEN                      every peer back on one switch
    --loss P[:LINKS][@WHEN][+FOR]    drop each IPv4 packet on LINKS with probability P (0 < P <= 1);
                                     LINKS: 1-2,2-3 (peer pairs) or 3 (every link of peer 3); default
                                     every link, @0%, to the end
    --cut-one-way A>B[@WHEN][+FOR]   peer A's packets no longer reach peer B (B's still reach A);
                                     default @30%, to the end
    --pause PEER[@WHEN][+FOR]        SIGSTOP, SIGCONT after FOR (default 2s); default @40%
    --kill PEER[@WHEN]               SIGKILL; default @30%
    --restart PEER[@WHEN][+AFTER]    SIGKILL, started again with its command line AFTER later (default
                                     2s); default @30%

A peer has at most one fault of its own at a time: a killed peer gets none after its kill, and a pause
and a restart of one peer may not overlap (nor two of either). A restarted peer is no killed one: it
does not count against "at least one peer must survive".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import combinations

from ...errors import ConfigError

Link = frozenset  # an unordered pair of peer numbers


@dataclass(frozen=True, slots=True)
class Partition:
    sides: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class Heal:
    pass


@dataclass(frozen=True, slots=True)
class LossOn:
    key: int  # names this loss rule until its LossOff
    probability: float
    links: frozenset  # of Link


@dataclass(frozen=True, slots=True)
class LossOff:
    key: int  # also ends a `CutOneWay` of that key


@dataclass(frozen=True, slots=True)
class CutOneWay:
    key: int  # names this rule until its LossOff (one numbering with the loss rules)
    src: int
    dst: int


@dataclass(frozen=True, slots=True)
class Pause:
    peer: int


@dataclass(frozen=True, slots=True)
class Resume:
    peer: int


@dataclass(frozen=True, slots=True)
class Kill:
    peer: int


@dataclass(frozen=True, slots=True)
class Restart:
    """SIGKILL, to be started again by its `StartAgain`."""

    peer: int


@dataclass(frozen=True, slots=True)
class StartAgain:
    """The peer killed by a `Restart` runs its very command line again."""

    peer: int


Action = Partition | Heal | LossOn | LossOff | CutOneWay | Pause | Resume | Kill | Restart | StartAgain


@dataclass(frozen=True, slots=True, order=True)
class Event:
    at: float  # seconds after the workload starts
    seq: int  # ties keep the command line's order
    action: Action = field(compare=False)


_NUMBER = r"\d+(?:\.\d+)?"
_WHEN = rf"(?:@(?P<at>{_NUMBER}(?:%|s)?))?"
_FOR = rf"(?:\+(?P<for>{_NUMBER}(?:%|s)?))?"


def parse_time(text: str, duration: float, flag: str) -> float:
    """``30%`` of ``duration`` or ``12s`` / ``12`` seconds, within 0 .. duration."""
    m = re.fullmatch(rf"({_NUMBER})(%|s)?", text.strip())
    if not m:
        raise ConfigError(f"{flag}: {text!r} is not a time (like 30% of --duration, or 12s)")
    value = float(m.group(1))
    seconds = value / 100 * duration if m.group(2) == "%" else value
    if seconds > duration + 1e-9:
        raise ConfigError(f"{flag}: {text} is after the workload ends (--duration {duration:g}s)")
    return seconds


def _peer(text: str, peers: int, flag: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= peers:
        raise ConfigError(f"{flag}: {text!r} is not a peer number 1..{peers}")
    return int(text)


def parse_sides(text: str, peers: int, flag: str) -> tuple[tuple[int, ...], ...]:
    sides = tuple(tuple(_peer(p, peers, flag) for p in side.split(",")) for side in text.split("/"))
    named = [p for side in sides for p in side]
    if len(sides) < 2:
        raise ConfigError(f"{flag}: give at least two sides separated by /, like 1,2/3,4,5")
    if len(set(named)) != len(named):
        raise ConfigError(f"{flag}: a peer is named on two sides")
    missing = sorted(set(range(1, peers + 1)) - set(named))
    if missing:
        raise ConfigError(f"{flag}: peers {','.join(map(str, missing))} are on no side (name every peer once)")
    return sides


def parse_links(text: str | None, peers: int, flag: str) -> frozenset:
    """``1-2,2-3`` (pairs) or ``3`` (every link of peer 3); None: every link of the group."""
    if text is None:
        return frozenset(Link(pair) for pair in combinations(range(1, peers + 1), 2))
    links = set()
    for item in text.split(","):
        if "-" in item:
            a, _, b = item.partition("-")
            pair = Link({_peer(a, peers, flag), _peer(b, peers, flag)})
            if len(pair) != 2:
                raise ConfigError(f"{flag}: link {item} joins a peer to itself")
            links.add(pair)
        else:
            p = _peer(item, peers, flag)
            links |= {Link({p, q}) for q in range(1, peers + 1) if q != p}
    return frozenset(links)


@dataclass
class Schedule:
    """The fault options of one run, checked against the group size and the workload's duration."""

    peers: int
    duration: float
    events: list[Event] = field(default_factory=list)

    def _add(self, at: float, action: Action) -> None:
        self.events.append(Event(at, len(self.events), action))

    def _spec(self, flag: str, text: str, head: str, default_at: str) -> tuple[str, float, float | None]:
        m = re.fullmatch(rf"(?P<head>{head}){_WHEN}{_FOR}", text.strip())
        if not m:
            raise ConfigError(f"{flag} {text}: not understood (see --help for the form)")
        at = parse_time(m.group("at") or default_at, self.duration, flag)
        until = None
        if m.group("for"):
            until = at + parse_time(m.group("for"), self.duration, flag)
            if until > self.duration + 1e-9:
                raise ConfigError(f"{flag} {text}: ends after the workload (--duration {self.duration:g}s)")
        return m.group("head"), at, until

    def partition(self, text: str) -> None:
        head, at, until = self._spec("--partition", text, r"[\d,/]+", "30%")
        self._add(at, Partition(parse_sides(head, self.peers, "--partition")))
        if until is not None:
            self._add(until, Heal())

    def heal(self, text: str) -> None:
        self._add(parse_time(text.lstrip("@"), self.duration, "--heal"), Heal())

    def loss(self, text: str) -> None:
        head, at, until = self._spec("--loss", text, rf"{_NUMBER}(?::[\d,\-]+)?", "0%")
        p, _, links = head.partition(":")
        probability = float(p)
        if not 0 < probability <= 1:
            raise ConfigError(f"--loss {text}: the probability must be in (0, 1], like 0.2")
        key = self._next_key()
        self._add(at, LossOn(key, probability, parse_links(links or None, self.peers, "--loss")))
        if until is not None:
            self._add(until, LossOff(key))

    def cut_one_way(self, text: str) -> None:
        head, at, until = self._spec("--cut-one-way", text, r"\d+>\d+", "30%")
        a, _, b = head.partition(">")
        src, dst = _peer(a, self.peers, "--cut-one-way"), _peer(b, self.peers, "--cut-one-way")
        if src == dst:
            raise ConfigError(f"--cut-one-way {text}: cuts a peer from itself")
        key = self._next_key()
        self._add(at, CutOneWay(key, src, dst))
        if until is not None:
            self._add(until, LossOff(key))

    def _next_key(self) -> int:
        return sum(isinstance(e.action, (LossOn, CutOneWay)) for e in self.events)

    def pause(self, text: str) -> None:
        head, at, until = self._spec("--pause", text, r"\d+", "40%")
        peer = _peer(head, self.peers, "--pause")
        self._add(at, Pause(peer))
        self._add(at + 2.0 if until is None else until, Resume(peer))

    def kill(self, text: str) -> None:
        head, at, _ = self._spec("--kill", text, r"\d+", "30%")
        self._add(at, Kill(self._check_kill(_peer(head, self.peers, "--kill"))))

    def restart(self, text: str) -> None:
        head, at, until = self._spec("--restart", text, r"\d+", "30%")
        peer = _peer(head, self.peers, "--restart")
        self._add(at, Restart(peer))
        self._add(at + 2.0 if until is None else until, StartAgain(peer))

    def _check_kill(self, peer: int) -> int:
        if sum(isinstance(e.action, Kill) for e in self.events) + 1 >= self.peers:
            raise ConfigError("--kill: at least one peer must survive")
        return peer

    def ordered(self) -> list[Event]:
        """The events in time order, after checking that they make sense in that order. At one instant
        the end of a peer's pause or restart comes first: a fault of that peer may start then."""
        events = sorted(self.events, key=lambda e: (e.at, not isinstance(e.action, (Resume, StartAgain)), e.seq))
        partitioned, killed = False, set()
        busy: dict[int, str] = {}  # peer -> the fault it is under: "paused" or "down for a restart"
        for e in events:
            a = e.action
            if isinstance(a, Heal) and not partitioned:
                raise ConfigError(f"--heal at {e.at:g}s: no partition before it")
            if isinstance(a, (Partition, Heal)):
                partitioned = isinstance(a, Partition)
            if isinstance(a, (Pause, Kill, Restart)) and a.peer in killed:
                raise ConfigError(f"peer {a.peer} is killed before it is paused, killed or restarted again")
            if isinstance(a, Pause) and busy.get(a.peer) == "paused":
                raise ConfigError(f"peer {a.peer} is paused twice at once")
            if isinstance(a, (Pause, Restart)) and a.peer in busy or isinstance(a, Kill) and \
                    busy.get(a.peer) == "down for a restart":
                what = {Pause: "paused", Restart: "restarted", Kill: "killed"}[type(a)]
                raise ConfigError(f"peer {a.peer} is {what} at {e.at:g}s while it is {busy[a.peer]} "
                                  f"(give one peer one fault at a time)")
            if isinstance(a, Kill):
                killed.add(a.peer)
            if isinstance(a, Pause):
                busy[a.peer] = "paused"
            if isinstance(a, Restart):
                busy[a.peer] = "down for a restart"
            if isinstance(a, (Resume, StartAgain)):
                busy.pop(a.peer, None)
        return events


def describe(action: Action) -> str:
    """One line for the lab's timeline."""
    if isinstance(action, Partition):
        return "partition " + " | ".join(",".join(map(str, s)) for s in action.sides)
    if isinstance(action, Heal):
        return "heal: every peer on one switch again"
    if isinstance(action, LossOn):
        links = sorted("-".join(map(str, sorted(link))) for link in action.links)
        shown = ",".join(links) if len(links) <= 6 else f"{len(links)} links"
        return f"loss {action.probability:g} on {shown} (rule {action.key})"
    if isinstance(action, LossOff):
        return f"loss rule {action.key} ends"
    if isinstance(action, CutOneWay):
        return f"one-way cut: peer {action.src}'s packets no longer reach peer {action.dst} (rule {action.key})"
    if isinstance(action, Pause):
        return f"SIGSTOP peer {action.peer}"
    if isinstance(action, Resume):
        return f"SIGCONT peer {action.peer}"
    if isinstance(action, Restart):
        return f"SIGKILL peer {action.peer} (a restart: started again later)"
    if isinstance(action, StartAgain):
        return f"peer {action.peer} started again with its command line"
    return f"SIGKILL peer {action.peer}"
