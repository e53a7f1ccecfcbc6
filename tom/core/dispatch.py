"""Which handler takes each frame kind, in each mode: the table `Core` dispatches by.

``TABLE[(static, mode)][kind]`` names the `Core` method that takes a frame of ``kind`` from a peer
while this peer is in ``mode`` (``static``: a fixed group, no view changes). A kind a mode does not
list is refused (`FrameError`: "unexpected ..."); ``IGNORE`` marks a frame a mode takes and does
nothing with. ``Admit(name)`` marks an ordered frame (a message, its ACKs, sequence numbers): it is
admitted first (`Core._admit`: from a member of this view, connected as its incarnation, not cut off;
a frame of a view not installed yet waits) and then taken by ``name``. `Core` swaps its row of the
table when its mode changes (`Core._set_mode`). A name without a leading ``_`` is a function beside
`Core` (`tom.core.group.BESIDE`), called as a method would be.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from ..codec.frames import (
    Ack, Acks, CatchUp, Direct, Flush, Flushed, Frame, Heartbeat, Install, Join, Leave, Marks, Message, Prepare, Promise, Propose,
    History, Progress, Relay, Removed, Sees, Seq, Suspect,
)
from .modes import Mode


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Admit:
    """An ordered frame: admitted by `Core._admit`, then taken by the method ``name``."""

    name: str


IGNORE = "_ignore"

ORDERED: dict[type[Frame], str] = {
    Message: "_on_message", Relay: "_on_relay", Ack: "_on_ack", Acks: "_on_acks", Marks: "_on_marks",
    Seq: "_on_seq",
}
"""The ordered frame kinds and the methods that take them once admitted."""

Row = dict[type[Frame], "str | Admit"]

IN_A_VIEW: Row = {
    **{kind: Admit(name) for kind, name in ORDERED.items()},
    Heartbeat: "_on_heartbeat", Join: "_on_join", Leave: "_on_leave", Propose: "_on_propose",
    Flush: "_on_flush", Flushed: "_on_flushed", Install: "_on_install", Removed: "_on_removed",
    Suspect: "_on_suspect", Sees: "_on_sees",
    Prepare: "_on_prepare", Promise: "_on_promise", Direct: "on_direct",
    CatchUp: "on_durable", History: "on_durable", Progress: "on_durable",
}

_FINAL: Row = {  # left or removed: nothing changes the membership; heartbeats still compare deliveries
    **{kind: "_hold_or_drop" for kind in ORDERED},
    Heartbeat: "_on_heartbeat", Join: "_on_join", Leave: "_on_leave", Propose: IGNORE,
    Flush: "_on_flush", Flushed: IGNORE, Install: IGNORE, Removed: IGNORE, Suspect: IGNORE, Sees: IGNORE,
    Prepare: IGNORE, Promise: IGNORE, Direct: "on_direct", CatchUp: "on_durable", History: "on_durable", Progress: "on_durable",
}

_STATIC: Row = {  # a fixed membership: a JOIN or a LEAVE is checked, never taken
    **IN_A_VIEW, Join: "_check_join", Leave: "_check_leave", Propose: IGNORE, Flushed: IGNORE,
    Install: IGNORE, Removed: IGNORE, Suspect: IGNORE, Sees: IGNORE, Prepare: IGNORE, Promise: IGNORE,
}

TABLE: dict[tuple[bool, Mode], Row] = {
    # outside any group: ordered frames wait for their view; a proposal or a promise is the founding
    # handshake's; an INSTALL may admit this peer
    (False, Mode.JOINING): {
        **{kind: "_hold" for kind in ORDERED},
        Heartbeat: "_on_heartbeat", Join: "_on_join", Leave: "_on_leave",
        Propose: "_on_founding_proposal", Flush: IGNORE, Flushed: "_on_founding_promise",
        Install: "_on_install", Removed: IGNORE, Suspect: "_on_not_reached", Sees: IGNORE, Prepare: IGNORE,
        Promise: IGNORE, Direct: "on_direct",  # (a joiner's state may come before its INSTALL)
        CatchUp: "on_durable", History: "on_durable", Progress: "on_durable",
    },
    # a member, no view change under way: an INSTALL only counts in the flush it ends
    (False, Mode.NORMAL): {**IN_A_VIEW, Install: IGNORE},
    (False, Mode.FLUSHING): IN_A_VIEW,
    (False, Mode.FLUSHED): IN_A_VIEW,
    (False, Mode.LEFT): _FINAL,
    (False, Mode.REMOVED): _FINAL,
    (True, Mode.JOINING): {},  # (a static core is never outside its group: a transition only)
    (True, Mode.NORMAL): _STATIC,
    (True, Mode.LEFT): {**_STATIC, **{kind: "_hold_or_drop" for kind in ORDERED}},
}
