"""Who sends a member the group's state, and when it takes it: decided from the group's ordered stream
alone, so every member decides the same (sans-IO: events in, decisions out; no clock, no I/O).

A member admitted to a view it has no state for asks for it: one that joins a running group, one that
comes back after a partition, a durable member (``data=``) whose catch-up left a gap, or one without a
data folder in a group founded again from its members' data. A durable member started again with its
state whole (its snapshot, its history, what it caught up) says so instead and takes nothing. Every
member keeps ``awaiting``: each member admitted without saying it has the state yet, and the member
sending it (None: none yet). In the group's order:

* at a view, members that left are no longer awaited and no longer send; each member admitted to a
  running group is awaited until it says ``ok`` (a founder is not: it asks, or has the state);
* a member's ``want`` (an ordered message, `WANT`) gives it a sender: the least pid
  (`tom.codec.pid.pid_key`) among the members not awaited. If that is this member, it takes a snapshot
  right there in the order (`SendState`, keyed by the want) and sends it;
* at a view whose changes took a sender away, each member that wanted and waits gets a new one, who
  takes its snapshot at that view (keyed by the view);
* the member's ``ok`` (`tom.replication.STATE_OK`) ends its wait everywhere.

The asking member holds every event it delivers from the view that admitted it. It restores a snapshot
once it has seen the point it was taken at (its own want, or a held view change), then applies the
held events after that point (`Restore`). The bookkeeping (``awaiting``) travels with the snapshot: the
member takes the sender's, as of that point.

Invariant: a member's replica after `Restore` equals every other member's after the same position of
the order, as long as snapshots are deterministic functions of the state at that position; and a
member that says ``ok`` without a transfer holds that state already.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec.pid import pid_key
from .library import Delivered, GroupEvent, ViewChanged

__all__ = ["WANT", "Ask", "Confirm", "Restore", "SendState", "StateTransfer"]

WANT = "tom-state want"
"""The ordered message of a member admitted without the group's state: send it to me."""


@dataclass(frozen=True, slots=True)
class SendState:
    """Take a snapshot now (this point of the order: ``key``) and send it to ``joiner``."""

    joiner: str
    key: str


@dataclass(frozen=True, slots=True)
class Restore:
    """Restore the snapshot taken at ``key`` (``data``, as sent), then apply ``then`` in order."""

    key: str
    data: bytes | bytearray
    then: list[GroupEvent] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Ask:
    """Send `WANT` to the group (in its order): this member has no state for the view that admitted it."""


@dataclass(frozen=True, slots=True)
class Confirm:
    """Send ``ok`` to the group: this member was admitted with its state whole (a durable member)."""


def view_key(view: int) -> str:
    """The key of a snapshot taken at view ``view`` (a sender replaced there)."""
    return f"v{view}"


def want_key(clock: int) -> str:
    """The key of a snapshot taken at the asking member's want, sent at Lamport ``clock``."""
    return f"w{clock}"


Action = SendState | Restore | Ask | Confirm


class StateTransfer:
    """One member's side of the state transfer (the module docstring)."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.awaiting: dict[str, str | None] = {}  # member admitted -> its sender (None: none yet)
        self.wanted: set[str] = set()  # awaited members whose want is ordered
        self.members: tuple[str, ...] = ()  # the members of the last view
        self.needs_state = False  # this member asked for the state and holds what it delivers
        self.join_view: int | None = None
        self.held: list[GroupEvent] = []
        self.snapshots: dict[str, bytes | bytearray] = {}  # whole snapshots that came, by key

    def at_view(self, view: ViewChanged, has_state: bool = False, acting: bool = True) -> list[Action]:
        """A view change in the order. ``has_state``: whether this member, if the view admits it, holds
        the group's state as of it; ``acting``: false for an event replayed or caught up (what was
        decided then is noted, nothing is done again)."""
        self.members = view.members
        old = [m for m in view.members if m not in view.joined]
        for gone in view.left:
            self.awaiting.pop(gone, None)
            self.wanted.discard(gone)
        if old:  # (a group founded, new or again from its members' data: a founder without state asks)
            for joiner in view.joined:
                self.awaiting[joiner] = None
                self.wanted.discard(joiner)
        if self.me in view.joined and acting:
            if not old and view.view == 1:  # (a new group: every founder's state is the initial one)
                return []
            if has_state:
                return [Confirm()]
            self.needs_state, self.join_view, self.held = True, view.view, []
            self.snapshots = {}
            return [Ask()]
        sends: list[Action] = []
        for joiner in sorted(self.wanted, key=pid_key):
            sender = self.awaiting.get(joiner)
            if sender is not None and sender in view.members:
                continue  # its transfer goes on
            sender = self._sender()
            self.awaiting[joiner] = sender
            if sender == self.me and acting:
                sends.append(SendState(joiner, view_key(view.view)))
        return sends

    def want(self, joiner: str, clock: int, acting: bool = True) -> list[Action]:
        """``joiner``'s want was delivered (at ``clock``): it gets a sender, maybe this member."""
        self.awaiting[joiner] = None  # (not one that has the state, whatever came before)
        self.wanted.add(joiner)
        sender = self._sender()
        self.awaiting[joiner] = sender
        return [SendState(joiner, want_key(clock))] if sender == self.me and acting else []

    def _sender(self) -> str | None:
        have = sorted((m for m in self.members if m not in self.awaiting), key=pid_key)
        return have[0] if have else None

    def took(self, joiner: str) -> None:
        """``joiner``'s ok was delivered: it has the state."""
        self.awaiting.pop(joiner, None)
        self.wanted.discard(joiner)
        if joiner == self.me:
            self.snapshots.clear()  # (a snapshot sent again before our ok was ordered)

    def hold(self, event: GroupEvent) -> Restore | None:
        """An event delivered while this member waits for its state: held; it may be the point a
        snapshot that already came was taken at."""
        self.held.append(event)
        if isinstance(event, ViewChanged):
            self.members = event.members
            return self._restore_if_ready()
        if isinstance(event, Delivered) and event.origin == self.me and event.payload == WANT:
            return self._restore_if_ready()
        return None

    def snapshot(self, key: str, data: bytes | bytearray) -> Restore | None:
        """A whole snapshot taken at ``key`` came (its chunks put together)."""
        self.snapshots[key] = data  # (it may come before this member delivered the point it was taken at)
        return self._restore_if_ready() if self.needs_state else None

    def restored(self, awaiting: dict[str, str | None], wanted: list[str] | None = None) -> None:
        """The snapshot restored: take the sender's bookkeeping; stop holding."""
        self.awaiting = dict(awaiting)
        self.wanted = set(wanted if wanted is not None else (j for j, s in awaiting.items() if s is not None))
        self.needs_state, self.held, self.snapshots = False, [], {}

    def _points(self) -> list[tuple[int, str]]:
        """The points of the held stream a snapshot may be keyed by: (position after which to apply, key)."""
        points: list[tuple[int, str]] = []
        for i, e in enumerate(self.held):
            if isinstance(e, ViewChanged):
                points.append((i, view_key(e.view)))
            elif isinstance(e, Delivered) and e.origin == self.me and e.payload == WANT:
                points.append((i, want_key(e.clock)))
        return points

    def _restore_if_ready(self) -> Restore | None:
        """The latest snapshot whose point this member has seen."""
        ready = [(i, key) for i, key in self._points() if key in self.snapshots]
        if not ready:
            return None
        at, key = max(ready)
        return Restore(key, self.snapshots[key], self.held[at + 1:])
