"""TOM as a library: a member of a group inside a trio program.

    async with tom.open_group(["127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"],
                              "127.0.0.1:5000") as group:
        await group.send("hello")
        async for event in group:
            if isinstance(event, tom.Delivered):
                print(event.origin, event.payload)
            else:  # tom.ViewChanged
                print("members:", event.members)

The group runs on the same peer as ``tom peer`` (`tom.peer.process.Peer`: the same core, links,
handshake, failure detection and closed-group TLS); the program is its front-end where ``tom peer``
has the terminal or stdin.

Invariants:

* every member yields the group's events in the group's order (``order``: lamport and sequencer, the
  same total order everywhere; causal, every message after those it follows), each once: the messages
  (`Delivered`) and the membership changes (`ViewChanged`) ordered with them. The first event is the
  view this member was admitted in;
* ``send`` returns once the message left this member (`Sent`: its clock), or ``None`` while it is held
  for the next view (it then goes out there, before anything sent later); a message refused here
  (too long, or this member has left) raises `tom.errors.UsageError`. Its delivery, here too, comes
  through the iteration;
* events wait in memory until the program reads them (``async for``); a program that stops reading
  holds them all;
* leaving the ``async with`` block leaves the group (bounded by ``leave_timeout``) and stops the member;
  the iteration ends once the member has stopped (left, or removed by the group).

No signal handler is installed and nothing is printed: the program owns both (the member logs to the
``tom`` logger). Payloads are ``str`` or ``bytes``; bytes travel as the text ``tom-b64 <base64>``
(`BYTES_PREFIX`, docs/design/wire.md), so a str may not start with it. The limit is the frame's: about 65,400
bytes of UTF-8 text (fewer with backslashes and line breaks, which are escaped), or about 49,000 bytes.
"""

from __future__ import annotations

import base64
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import trio

from .codec.frames import Message
from .codec.pid import split_pid
from .core import ORDERS, QUORUMS, Delivery, ViewDelivery
from .errors import ConfigError, UsageError
from .peer.lines import BYTES_PREFIX
from .peer.process import Peer, PeerConfig

__all__ = ["Delivered", "Group", "GroupEvent", "Sent", "ViewChanged", "open_group"]


@dataclass(frozen=True, slots=True)
class Delivered:
    """A message delivered: the ``index``-th event of this member (a durable member's: of its history,
    across restarts), sent by ``origin`` at Lamport clock
    ``clock`` in view ``view``; ``payload`` as it was sent, ``str`` or ``bytes``. ``seq``: its number in
    the sequencer order; ``vc``: its vector timestamp in the causal order; ``sent_at``: its origin's wall
    clock when sent (seconds); ``caught_up``: a durable member started again (``data=``) missed it while
    away and took it from the group before the view that admitted it again (``index``: its place in
    the member's history)."""

    index: int
    clock: int
    origin: str
    payload: str | bytes
    view: int
    sent_at: float | None = None
    seq: int | None = None
    vc: Mapping[str, int] | None = None
    caught_up: bool = False


@dataclass(frozen=True, slots=True)
class ViewChanged:
    """The group's membership changed: view ``view`` has ``members``; ``joined`` came in, ``left`` went
    out (of whom ``removed`` were taken for failed), ordered with the messages as the ``index``-th event;
    ``caught_up`` as for `Delivered`."""

    index: int
    view: int
    members: tuple[str, ...]
    joined: tuple[str, ...]
    left: tuple[str, ...]
    removed: tuple[str, ...]
    caught_up: bool = False


GroupEvent = Delivered | ViewChanged


@dataclass(frozen=True, slots=True)
class Sent:
    """A message that left this member: ``(clock, origin)`` names it in every member's `Delivered`."""

    clock: int
    origin: str


def event_of(delivery: Delivery | ViewDelivery, caught_up: bool = False) -> GroupEvent:
    """The library's event for one of the core's deliveries (or a caught-up one's)."""
    if type(delivery) is ViewDelivery:
        return ViewChanged(delivery.index, delivery.view, tuple(delivery.members), tuple(delivery.joined),
                           tuple(delivery.left), tuple(delivery.removed), caught_up)
    d: Delivery = delivery  # type: ignore[assignment]
    vc = dict(d.vc) if d.vc is not None else None
    return Delivered(d.index, d.clock, d.pid, payload_of(d.text), d.view, d.sent_at, d.seq, vc, caught_up)


def payload_of(text: str) -> str | bytes:
    """A message text as the program sent it: bytes for the bytes form (`BYTES_PREFIX`), else the text."""
    if text.startswith(BYTES_PREFIX):
        try:
            return base64.b64decode(text[len(BYTES_PREFIX):], validate=True)
        except ValueError:
            pass  # (typed by hand at a terminal, say: a text)
    return text


def text_of(payload: str | bytes) -> str:
    """The message text that carries ``payload``; a str in the bytes form is refused (send it as bytes)."""
    if isinstance(payload, bytes):
        return BYTES_PREFIX + base64.b64encode(payload).decode()
    if not isinstance(payload, str):
        raise TypeError(f"a payload is a str or bytes, not {type(payload).__name__}")
    if payload.startswith(BYTES_PREFIX):
        raise UsageError(f"a text may not start with {BYTES_PREFIX!r}, the form of bytes: send bytes")
    return payload


class Group:
    """A running member of a group (`open_group`): ``send`` multicasts, ``async for`` yields the
    group's events in its order."""

    def __init__(self, peer: Peer) -> None:
        self._peer = peer
        self._events: deque[GroupEvent] = deque()
        self._arrived = trio.Event()
        self._closing = trio.Event()
        self._stopped = False
        self._done = trio.Event()
        self.on_direct: Callable[[str, str], None] | None = None  # (src, text), called in the member's task
        peer.on_deliver = self._delivered
        peer.on_stop = self._on_stop
        peer.on_direct = self._direct

    @property
    def me(self) -> str:
        """This member's pid (``host:port``)."""
        return self._peer.me

    @property
    def port(self) -> int | None:
        """The port this member listens on (the one asked for, or the one bound for port 0)."""
        return self._peer.port

    @property
    def members(self) -> tuple[str, ...]:
        """The members of the view this member delivers in now (empty before it is admitted)."""
        view = self._peer.core.view
        return tuple(view.members) if view is not None else ()

    async def send(self, payload: str | bytes) -> Sent | None:
        """Multicast ``payload`` to the group (see the module docstring for what the result says)."""
        text = text_of(payload)
        if self._stopped or self._closing.is_set():
            raise UsageError("this member has left the group: nothing more can be sent")
        result = await self._peer._send_one(text)
        if isinstance(result, UsageError):
            raise result
        if isinstance(result, Message):
            return Sent(result.clock, result.pid)
        return None

    async def send_direct(self, member: str, text: str) -> None:
        """Send ``text`` to ``member`` alone, outside the group's order (FIFO on the link to it; it arrives
        at that member's ``on_direct``). `tom.errors.UsageError` if refused (not a neighbor, this member,
        over the frame's limit)."""
        await self._peer.send_direct(member, text)

    @property
    def gaps(self) -> int:
        """The gap records this member's data folder (``data=``) wrote since it started: stretches of the
        order it missed and no member held any more (0 without a folder)."""
        durable = self._peer.durable
        return len(durable.gaps) if durable is not None else 0

    def hold_history(self, after: tuple[int, int, str] | None) -> None:
        """Keep, in this member's data folder, the events after ``after`` ((view, clock, pid) of a message,
        (view, 0, "") of a view change): a durable replicated object replays them from its snapshot."""
        if self._peer.durable is not None:
            self._peer.durable.hold = after

    def _direct(self, src: str, text: str) -> None:
        if self.on_direct is not None:
            self.on_direct(src, text)

    def __aiter__(self) -> Group:
        return self

    async def __anext__(self) -> GroupEvent:
        while not self._events:
            if self._stopped:
                raise StopAsyncIteration
            await self._arrived.wait()
            self._arrived = trio.Event()
        return self._events.popleft()

    def _delivered(self, deliveries: list[Delivery | ViewDelivery]) -> None:
        durable = self._peer.durable
        if durable is None:
            self._events.extend(event_of(d) for d in deliveries)
        else:  # (indexes in its history, across restarts: a caught-up event's is one already)
            caught, offset = durable.caught_up_now, self._peer.output.offset
            for d in deliveries:
                event = event_of(d, id(d) in caught)
                self._events.append(event if event.caught_up else replace(event, index=event.index + offset))
        self._arrived.set()

    def _on_stop(self) -> None:
        self._stopped = True
        self._arrived.set()
        self._done.set()

    async def _front(self) -> None:
        """The peer's front-end: wait until the program leaves the ``async with`` block."""
        await self._closing.wait()


@asynccontextmanager
async def open_group(neighbors: Sequence[str] | str | Path, me: str, *, order: str = "lamport",
                     keys: str | Path | None = None, quorum: str = "majority", output: str | Path | None = None,
                     host: str | None = None, heartbeat: float = 1.0, timeout: float = 5.0,
                     leave_timeout: float = 15.0, static: bool = False, data: str | Path | None = None,
                     fsync: str = "batch") -> AsyncIterator[Group]:
    """Join the group of ``neighbors`` (a neighbors file, or its ``host:port`` entries) as member ``me``
    (one of them) and yield the running `Group`; leave it when the block ends.

    ``order``: ``lamport``, ``sequencer`` or ``causal`` (every member runs the same); ``keys``: the group's
    keys folder (`tom keys`): every link is mutual TLS; ``quorum``: ``majority`` (only a primary
    component delivers) or ``none``; ``output``: also record every event in this JSON Lines file (the
    format ``tom verify`` reads); ``host``: the address to listen on (default: ``me``'s host);
    ``heartbeat``/``timeout``: failure detection, seconds; ``static``: a fixed group of all the
    neighbors (no joins or leaves); ``data``: a durable member's data folder (``tom peer --data``: a
    text `Group.send` returned on is delivered once even if this process dies the next instant, and a
    member started again with the same folder catches up what it missed), ``fsync`` its policy. A bad
    argument raises `tom.errors.ConfigError` before anything binds or connects."""
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if quorum not in QUORUMS:
        raise ConfigError(f"quorum must be one of {', '.join(QUORUMS)}, got {quorum!r}")
    listed = None if isinstance(neighbors, (str, Path)) else [str(n) for n in neighbors]
    try:
        my_host, port = split_pid(me)
    except ValueError:
        raise ConfigError(f"{me!r}: a member is host:port") from None
    for name, value in (("heartbeat", heartbeat), ("timeout", timeout), ("leave_timeout", leave_timeout)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
    if fsync not in ("always", "batch", "never"):
        raise ConfigError(f"fsync must be always, batch or never, got {fsync!r}")
    if data is not None and static:
        raise ConfigError("data is for a dynamic group: a static group takes no member back")
    cfg = PeerConfig(Path(str(neighbors)) if listed is None else Path("the neighbors list"),
                     Path(output) if output is not None else None, port, host or my_host.strip("[]"),
                     heartbeat=heartbeat, timeout=timeout, leave_timeout=leave_timeout, static=static,
                     keys=Path(keys) if keys is not None else None, order=order, quorum=quorum, embedded=True,
                     data=Path(data) if data is not None else None, fsync=fsync)
    peer = Peer(cfg, neighbors=listed)
    group = Group(peer)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(peer.run, front=group._front))
            try:
                yield group
            finally:
                group._closing.set()  # the front returns: the peer leaves the group (bounded), then stops
                with trio.CancelScope(shield=True), trio.move_on_after(leave_timeout + 5):
                    await group._done.wait()
                peer.stop()  # a no-op once stopped
    except BaseExceptionGroup as raised:
        # the program's own exception (or the member's) comes out as itself, not in the nursery's group
        if len(raised.exceptions) == 1:
            only = raised.exceptions[0]
            raise only.with_traceback(only.__traceback__) from None
        raise
