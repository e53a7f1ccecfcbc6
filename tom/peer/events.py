"""What the tasks tell the processor over its (bounded) incoming channel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..errors import UsageError
from ..codec.frames import Frame, Message


@dataclass(frozen=True, slots=True)
class FramesIn:
    """Frames read, in order, from the connection of peer ``src``."""

    src: str
    frames: list[Frame]


@dataclass(frozen=True, slots=True)
class Connected:
    """A connection to ``pid``, running as ``incarnation``, is up."""

    pid: str
    incarnation: int


@dataclass(frozen=True, slots=True)
class Disconnected:
    """The connection to ``pid`` broke (it is being re-established)."""

    pid: str


@dataclass(frozen=True, slots=True)
class Heard:
    """Frames of ``pid`` came and wait at the step-mode gate (`tom.peer.gate`): it is alive, though
    nothing it said is taken yet (liveness only)."""

    pid: str


@dataclass(frozen=True, slots=True)
class Replayed:
    """What became of a text whose idempotency key was accepted before, with the same text: nothing
    (it is not accepted again). ``clock``: the Lamport clock the first one was sent with, if this
    process knows it (None while it is held, or after a restart)."""

    clock: int | None


@dataclass(frozen=True, slots=True)
class SendTexts:
    """The local user multicasts ``texts``, in order; ``on_sent``, if given, hears what became of each:
    its Message, None while it is held for the next view, `Replayed` for a key accepted before, or the
    UsageError that refused it (`KeyConflict`: its key was accepted with another text).

    ``keys``: an idempotency key per text, or None (`tom.peer.idempotency`); ``inputs``: per text read
    from ``--input``, the file's inode and the offset just past the lines read with it (a durable peer
    keeps it with the text, and goes on reading there after a restart)."""

    texts: list[str]
    on_sent: Callable[[Message | None | Replayed | UsageError], None] | None = None
    keys: list[str | None] | None = None
    inputs: list[tuple[int, int]] | None = None


@dataclass(frozen=True, slots=True)
class SendDirect:
    """The local program sends ``text`` to member ``dest`` alone, outside the order (`Core.direct`);
    ``on_sent`` hears None once it is queued on the link, or the UsageError that refused it."""

    dest: str
    text: str
    on_sent: Callable[[UsageError | None], None] | None = None


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: heartbeats and failure detection are due for a look."""


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    """The local user quits: leave the group, then stop."""


Event = FramesIn | Connected | Disconnected | SendTexts | SendDirect | Tick | LeaveGroup | Heard


class EventSink(Protocol):
    """Where a task hands the processor its events: the processor's `Inbox`, or a plain memory
    channel's sending end (in tests)."""

    async def send(self, event: Event) -> None: ...
