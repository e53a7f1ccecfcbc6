"""The sender task and the router: frames from the processor to the links, and the links' own tasks.

The router (called by the processor) encodes every frame once and queues it on each destination link
with release time ``now + delay``. The sender task runs one writer per link and dials every neighbor
whose pid is larger than its own, retrying with back-off until it answers, and again whenever the
connection drops.
"""

from __future__ import annotations

import logging
import random

import trio

from ..errors import FrameError, RefusedError
from ..codec.frames import encode_sends
from ..peer.events import EventSink
from ..core.records import Sends
from ..peer.pathtrace import TRACE
from .handshake import HANDSHAKE_TIMEOUT, OrderMismatch, connect, knock
from .keys import GroupKeys
from .links import Link, backoff
from .listener import run_link
from ..codec.pid import pid_key, socket_host, split_pid
from .ratelimit import LogLimiter, held_back

log = logging.getLogger("tom.net.sender")

CONNECT_TIMEOUT = 3.0
REFUSALS = LogLimiter()  # refused or failed handshakes, per neighbor
UNKNOWN = LogLimiter(60.0)  # destinations missing from the neighbors file


async def dial(link: Link, me: str, incarnation: int, incoming: EventSink,
               keys: GroupKeys | None = None, order: str = "lamport") -> None:
    """Keep ``link`` connected for ever: connect, handshake, read until it breaks, back off, repeat.
    A neighbor that refuses plaintext (we have no keys, it has) stops the peer: PlaintextRefused."""
    host, port = socket_host(link.pid), split_pid(link.pid)[1]
    attempt = 0
    while True:
        if attempt:
            await link.back_off(backoff(attempt - 1, reached=link.incarnation is not None))
        link.state = "connecting"
        stream = None
        try:
            with trio.fail_after(CONNECT_TIMEOUT):
                stream = await trio.open_tcp_stream(host, port)
            with trio.fail_after(HANDSHAKE_TIMEOUT):
                stream, reader, neighbor_has = await connect(stream, link, me, incarnation, keys, order)
        except (OSError, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError, FrameError) as e:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            if isinstance(e, OrderMismatch):
                held = REFUSALS.allow(link.pid)
                if held is not None:
                    log.warning("%s%s", e, held_back(held))
            elif isinstance(e, RefusedError):
                link.refused = str(e)
                held = REFUSALS.allow(link.pid)
                if held is not None:
                    log.warning("%s refuses this peer: %s%s", link.pid, e, held_back(held))
            elif isinstance(e, FrameError):
                held = REFUSALS.allow(link.pid)
                if held is not None:
                    log.warning("%s: handshake failed: %s%s", link.pid, e, held_back(held))
            link.state = "down"
            attempt += 1
            continue
        link.refused = None
        began = trio.current_time()
        await run_link(link, stream, reader, neighbor_has, incoming)
        # a connection that ends at once (e.g. a link fault on a frame that comes again) backs off
        attempt = attempt + 1 if trio.current_time() - began < 1.0 else 0


JITTER_PERIOD = 2.0
"""How long a link keeps the extra delay drawn for it (`Router`), in seconds."""


class Router:
    """Queues the processor's frames on their links, in the processor's own step (no task between):
    each frame encoded once, queued with release time ``now + delay`` (plus, with ``jitter``, an extra
    delay of the link's own, drawn from 0 to ``jitter`` anew every `JITTER_PERIOD` — never overtaking
    a frame queued before it on the same link), and written at once where the link is idle
    (`Link.push_many`).

    Links differ for a while, as real paths do, so a frame that goes A -> B -> C can overtake one
    that goes A -> C: an ACK comes before its message (a premature ACK). A draw per frame would not
    do it: under any load a link's next frame waits for the slowest draw before it, and every link
    ends up as slow as the largest draw."""

    def __init__(self, links: dict[str, Link], delay: float = 0.0, jitter: float = 0.0) -> None:
        self.links, self.delay, self.jitter = links, delay, jitter
        self._extra: dict[str, tuple[float, float]] = {}  # dest -> (its extra delay, when drawn)

    def __call__(self, sends: Sends) -> None:
        if TRACE is not None:
            TRACE.note("routing")
        now = trio.current_time()
        release, jitter, links = now + self.delay, self.jitter, self.links
        for dest, data in encode_sends(sends).items():
            link = links.get(dest)
            if link is None:
                # the group holds a member this peer's neighbors file does not list
                held = UNKNOWN.allow(dest)
                if held is not None:
                    log.warning("%s is a member of the group but not in this peer's neighbors file (do the "
                                "neighbors files differ?): %d frames for it not sent%s", dest, len(data),
                                held_back(held))
                continue
            link.push_many(release + self._extra_delay(dest, now) if jitter else release, data, now)

    def _extra_delay(self, dest: str, now: float) -> float:
        extra, drawn = self._extra.get(dest, (0.0, float("-inf")))
        if now - drawn >= JITTER_PERIOD:
            extra = random.uniform(0.0, self.jitter)
            self._extra[dest] = (extra, now)
        return extra


async def sender(
    me: str,
    incarnation: int,
    links: dict[str, Link],
    incoming: EventSink,
    keys: GroupKeys | None = None,
    order: str = "lamport",
) -> None:
    """Own the link tasks: one writer per link, a dialer for each neighbor whose pid is larger, and a
    knock, once, at each neighbor whose pid is smaller (it dials this peer: now, not after its back-off)."""
    my_key = pid_key(me)
    async with trio.open_nursery() as nursery:
        for link in links.values():
            nursery.start_soon(link.writer)
            if pid_key(link.pid) > my_key:
                nursery.start_soon(dial, link, me, incarnation, incoming, keys, order)
            else:
                nursery.start_soon(knock_once, link, me, incarnation, keys, order)


async def knock_once(link: Link, me: str, incarnation: int, keys: GroupKeys | None, order: str) -> None:
    """Knock at ``link``'s neighbor (`tom.net.handshake.knock`), unless it dialed already. A neighbor
    that is not up, or does not answer in time, dials this peer when it comes: nothing to say."""
    if link.state == "up":
        return
    host, port = socket_host(link.pid), split_pid(link.pid)[1]
    try:
        with trio.fail_after(CONNECT_TIMEOUT):
            stream = await trio.open_tcp_stream(host, port)
    except (OSError, trio.TooSlowError):
        return
    try:
        with trio.fail_after(HANDSHAKE_TIMEOUT):
            await knock(stream, link, me, incarnation, keys, order)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError, FrameError):
        pass
    finally:
        await trio.aclose_forcefully(stream)
