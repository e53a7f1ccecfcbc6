"""Who sends a joiner the group's state, and when the joiner takes it: decided from the group's ordered
stream alone, so every member decides the same (sans-IO: events in, decisions out; no clock, no I/O).

A member that joins a running group (it is in a view's ``joined`` beside members that are not) needs
the group's state before it applies anything. Every member keeps ``awaiting``: each joiner without
the state yet, and the member sending it. At a view change (in the group's order):

* members that left are no longer awaited, and no longer send;
* each joiner of the view is awaited; a joiner whose sender is gone (or that has none) gets a new one:
  the least pid (`tom.codec.pid.pid_key`) among the view's members that are not awaited. If that is
  this member, it takes a snapshot right there in the order (`SendState`) and sends it;
* the joiner's own ``ok`` (a message, ordered) ends its wait everywhere.

The joiner holds every event it delivers after the view that admitted it. A snapshot is taken at a view
``w`` (the one that chose its sender); the joiner restores it once it has seen that view (its join, or
a held view change ``w``), then applies the held events after ``w`` (`Restore`). The bookkeeping
(``awaiting``) travels with the snapshot: the joiner takes the sender's, as of ``w``.

Invariant: a joiner's replica after `Restore` equals every other member's after the same position of
the order, as long as snapshots are deterministic functions of the state at ``w``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .codec.pid import pid_key
from .library import GroupEvent, ViewChanged

__all__ = ["Restore", "SendState", "StateTransfer"]


@dataclass(frozen=True, slots=True)
class SendState:
    """Take a snapshot now (this point of the order: view ``view`` just applied) and send it to ``joiner``."""

    joiner: str
    view: int


@dataclass(frozen=True, slots=True)
class Restore:
    """Restore the snapshot of view ``view`` (``data``, as sent), then apply ``then`` in order."""

    view: int
    data: bytes | bytearray
    then: list[GroupEvent] = field(default_factory=list)


class StateTransfer:
    """One member's side of the state transfer (the module docstring)."""

    def __init__(self, me: str) -> None:
        self.me = me
        self.awaiting: dict[str, str | None] = {}  # joiner -> its sender (None: nobody has the state)
        self.needs_state = False  # this member joined a running group and holds what it delivers
        self.join_view: int | None = None
        self.held: list[GroupEvent] = []
        self.snapshots: dict[int, bytes | bytearray] = {}  # whole snapshots that came, by view

    def at_view(self, view: ViewChanged) -> list[SendState | Restore]:
        """A view change applied by a member that has the state (or is joining at it)."""
        old = [m for m in view.members if m not in view.joined]
        for gone in view.left:
            self.awaiting.pop(gone, None)
        if self.me in view.joined and old:  # we join a running group: hold until its state comes
            self.needs_state, self.join_view, self.held = True, view.view, []
            self.snapshots = {v: d for v, d in self.snapshots.items() if v >= view.view}
            restore = self._restore_if_ready()
            return [restore] if restore is not None else []
        if old:
            for joiner in view.joined:
                self.awaiting[joiner] = None
        have = sorted((m for m in view.members if m not in self.awaiting), key=pid_key)
        sends: list[SendState | Restore] = []
        for joiner, sender in list(self.awaiting.items()):
            if sender is not None and sender in view.members:
                continue  # its transfer goes on
            self.awaiting[joiner] = have[0] if have else None
            if have and have[0] == self.me:
                sends.append(SendState(joiner, view.view))
        return sends

    def took(self, joiner: str) -> None:
        """``joiner``'s ok was delivered: it has the state."""
        self.awaiting.pop(joiner, None)
        if joiner == self.me:
            self.snapshots.clear()  # (a snapshot sent again before our ok was ordered)

    def hold(self, event: GroupEvent) -> Restore | None:
        """An event delivered while this member waits for its state: held; a view change may be the one
        a snapshot that already came was taken at."""
        self.held.append(event)
        return self._restore_if_ready() if isinstance(event, ViewChanged) else None

    def snapshot(self, view: int, data: bytes | bytearray) -> Restore | None:
        """A whole snapshot of view ``view`` came (its chunks put together)."""
        self.snapshots[view] = data  # (it may come before the view change that admits us is applied)
        return self._restore_if_ready() if self.needs_state else None

    def restored(self, awaiting: dict[str, str | None]) -> None:
        """The snapshot restored: take the sender's bookkeeping; stop holding."""
        self.awaiting = dict(awaiting)
        self.needs_state, self.held, self.snapshots = False, [], {}

    def _restore_if_ready(self) -> Restore | None:
        """The newest snapshot whose view this member has seen (its join, or a held view change)."""
        seen = {self.join_view} | {e.view for e in self.held if isinstance(e, ViewChanged)}
        ready = [v for v in self.snapshots if v in seen]
        if not ready:
            return None
        view = max(ready)
        at = next((i for i, e in enumerate(self.held) if isinstance(e, ViewChanged) and e.view == view), -1)
        return Restore(view, self.snapshots[view], self.held[at + 1:])
