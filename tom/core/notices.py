"""What the core tells its shell besides frames and deliveries (`Ready.notices`): typed records.

Each notice is a frozen record; ``tag`` is its name in logs, the event feed and the terminal. A
shell acts on a notice by its type: `Left` and `Removed` end the peer's membership for good,
`Rejoining` starts it again as a joiner, `NoQuorum`/`QuorumBack` bracket a time without a primary
component (nothing is delivered in normal mode, the users' messages are held), `NoFoundingQuorum` and
`NotAdmitted` say why a joining peer is still outside any group, `Unreachable` names a member that
cannot reach another and what the group does about it (`tom.core.reach`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..codec.frames import CatchUp, History, Progress


@dataclass(frozen=True, slots=True)
class Left:
    """This peer's leave was delivered: it is no longer a member (final)."""

    tag: ClassVar[str] = "left"


@dataclass(frozen=True, slots=True)
class Removed:
    """The group went on without this peer (final; with a quorum it rejoins instead: `Rejoining`)."""

    why: str = ""
    tag: ClassVar[str] = "removed"


@dataclass(frozen=True, slots=True)
class Rejoining:
    """The primary component went on without this peer (a partition): it joins again, same incarnation."""

    tag: ClassVar[str] = "rejoining"


@dataclass(frozen=True, slots=True)
class NoQuorum:
    """Only ``reachable`` of the view's ``members`` are reachable: not a primary component."""

    reachable: int
    members: int
    tag: ClassVar[str] = "no-quorum"


@dataclass(frozen=True, slots=True)
class QuorumBack:
    """A primary component of the view is reachable again (or a view was installed)."""

    tag: ClassVar[str] = "quorum"


@dataclass(frozen=True, slots=True)
class NoFoundingQuorum:
    """No group answered and only ``here`` of the ``expected`` peers are here: too few to found one
    (said again when the number changes)."""

    here: int
    expected: int
    tag: ClassVar[str] = "no-founding-quorum"


@dataclass(frozen=True, slots=True)
class NotAdmitted:
    """Joining for longer than `Timing.admit_after` (said again each such period); ``unreachable``:
    the members its group's coordinator says do not reach this peer (why it is not admitted)."""

    unreachable: tuple[str, ...] = ()
    tag: ClassVar[str] = "not-admitted"


@dataclass(frozen=True, slots=True)
class Unreachable:
    """``reporter`` cannot reach (hear) ``target``; ``action``: what is done about it — at the reporter
    "telling <coordinator>", at the coordinator "removing <pid>" (the target, or the reporter when it
    is the one cut off) or "not admitting it" (a joiner). Said once per pair while it lasts."""

    reporter: str
    target: str
    action: str
    tag: ClassVar[str] = "unreachable"

    def __str__(self) -> str:
        return f"{self.reporter} cannot reach {self.target}: {self.action}"


@dataclass(frozen=True, slots=True)
class DirectText:
    """A `Direct` frame's ``text`` from ``src``, for the program (outside the group's order)."""

    src: str
    text: str
    tag: ClassVar[str] = "direct"


@dataclass(frozen=True, slots=True)
class DurableFrame:
    """A durable peer's frame (`CatchUp`, `History`, `Progress`) from ``src``, for the peer's data folder
    (`tom.durable`):
    outside the group's order, like a direct text."""

    src: str
    frame: CatchUp | History | Progress
    tag: ClassVar[str] = "durable"


Notice = Left | Removed | Rejoining | NoQuorum | QuorumBack | NoFoundingQuorum | NotAdmitted | Unreachable | DirectText | DurableFrame
