"""What the core hands out (deliveries, views, status, alarms, what to do next) and its timing settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mypy_extensions import mypyc_attr

from ..codec.frames import Frame
from .modes import Mode
from .notices import Notice


Sends = list[tuple[tuple[str, ...], Frame]]
"""Frames a part decides to send, each with its destinations, in the order they are to go."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class View:
    """A numbered membership: the members (pid -> incarnation) whose ACKs a message in it needs."""

    id: int
    members: frozenset[str]
    incarnations: Mapping[str, int]
    coordinator: str = ""
    group: str = ""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True, init=False)
class Delivery:
    """A message leaving the queue: the ``index``-th event this peer delivers, in view ``view``."""

    index: int
    clock: int
    pid: str
    text: str
    sent_at: float | None
    view: int
    seq: int | None  # sequencer order: the sequence number (the same at every peer)
    vc: Mapping[str, int] | None  # causal order: the vector timestamp, {pid: count} (docs/output-format.md)

    def __init__(self, index: int, clock: int, pid: str, text: str, sent_at: float | None, view: int,
                 seq: int | None = None, vc: Mapping[str, int] | None = None) -> None:
        # written out, not the dataclass's: the compiled build then constructs a delivery natively
        self.index, self.clock, self.pid, self.text = index, clock, pid, text
        self.sent_at, self.view, self.seq, self.vc = sent_at, view, seq, vc


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class ViewDelivery:
    """A view change delivered as the ``index``-th event, ordered at ``(clock, pid)``."""

    index: int
    clock: int
    pid: str
    view: int
    members: tuple[str, ...]
    joined: tuple[str, ...]
    left: tuple[str, ...]
    removed: tuple[str, ...]
    order: str = "lamport"  # the order the group runs (`tom.core.ORDERS`)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Divergence:
    """Peer ``peer`` reports another digest than ours after ``position`` messages of view ``view``:
    the two have not delivered the same sequence (see `DivergenceCheck.compare`)."""

    peer: str
    view: int
    position: int
    mine: int
    theirs: int
    skipped: tuple[int, str] | None = None  # or: ``peer`` delivered past this message without holding it


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class Ready:
    """What the shell must do after a step: send ``sends`` (to each pid of the tuple, in order),
    persist ``deliveries``, act on ``notices`` (`tom.core.notices`) and report ``alarms``. A durable
    peer's ``persist`` — the messages it took in the step, ``(view, clock, pid, text, sent_at)`` — must
    be on its disk before ``sends`` go out: they acknowledge them."""

    sends: list[tuple[tuple[str, ...], Frame]] = field(default_factory=list)
    deliveries: list[Delivery | ViewDelivery] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    alarms: list[Divergence] = field(default_factory=list)
    persist: list[tuple[int, int, str, str, float | None]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.sends or self.deliveries or self.notices or self.alarms)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class PendingStatus:
    clock: int
    pid: str
    text: str | None
    acks: tuple[str, ...]
    missing: tuple[str, ...]
    waits: str = ""  # what it waits for, in the group's order ("ACKs of b, c", "sequence number", ...)
    seq: int | None = None


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Status:
    me: str
    mode: "Mode"
    clock: int
    view: View | None
    delivered: int
    pending: tuple[PendingStatus, ...]
    suspected: tuple[str, ...]
    last_heard: Mapping[str, float]
    now: float
    alarms: tuple[Divergence, ...] = ()
    view_delivered: int = 0  # messages delivered in the current view
    digest: int = 0  # their running digest
    order: str = "lamport"
    no_quorum: tuple[int, int] | None = None  # (reachable, members of the view) while the quorum is lost
    unreachable: tuple[tuple[str, str], ...] = ()  # (reporter, target): pairs that cannot reach each other
    stats: Mapping[str, int] | None = None  # premature ACKs, deliveries released behind a head, alarms
    round_trips: Mapping[str, float] | None = None  # peer -> smoothed round trip, where one was measured


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Timing:
    """Failure-detection settings, in the same seconds as `Core.tick`'s ``now``."""

    heartbeat: float = 1.0
    suspect_after: float = 5.0
    verify_after: float = 1.0
    form_after: float = 2.5
    admit_after: float = 10.0  # joining this long: say so (notice "not-admitted"), and again as long
