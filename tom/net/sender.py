"""The sender task: routes the processor's frames to links, dials neighbors, runs one writer per link.

Every frame is encoded once and queued on each destination link with release time ``now + delay``.
The peer dials every neighbor whose pid is larger than its own, retrying with back-off until it
answers, and again whenever the connection drops.
"""

from __future__ import annotations

import logging
import random

import trio

from ..errors import FrameError, RefusedError
from ..codec.frames import encode_sends
from .handshake import HANDSHAKE_TIMEOUT, OrderMismatch, connect
from .keys import GroupKeys
from .links import Link, backoff
from .listener import run_link
from ..codec.pid import pid_key, socket_host, split_pid
from .ratelimit import LogLimiter, held_back

log = logging.getLogger("tom.net.sender")

CONNECT_TIMEOUT = 3.0
REFUSALS = LogLimiter()  # refused or failed handshakes, per neighbor
UNKNOWN = LogLimiter(60.0)  # destinations missing from the neighbors file


async def dial(link: Link, me: str, incarnation: int, incoming: trio.MemorySendChannel,
               keys: GroupKeys | None = None, order: str = "lamport") -> None:
    """Keep ``link`` connected for ever: connect, handshake, read until it breaks, back off, repeat.
    A neighbor that refuses plaintext (we have no keys, it has) stops the peer: PlaintextRefused."""
    host, port = socket_host(link.pid), split_pid(link.pid)[1]
    attempt = 0
    while True:
        if attempt:
            await trio.sleep(backoff(attempt - 1))
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


async def sender(
    outgoing: trio.MemoryReceiveChannel,
    me: str,
    incarnation: int,
    links: dict[str, Link],
    incoming: trio.MemorySendChannel,
    delay: float = 0.0,
    jitter: float = 0.0,
    keys: GroupKeys | None = None,
    order: str = "lamport",
) -> None:
    """Route each batch of ``(dests, frame)`` from ``outgoing`` to the links; own the link tasks.

    Every frame waits ``delay`` seconds, plus a random share of ``jitter`` drawn per link and batch —
    never overtaking a frame queued before it on the same link.
    """
    my_key = pid_key(me)
    async with outgoing, trio.open_nursery() as nursery:
        for link in links.values():
            nursery.start_soon(link.writer)
            if pid_key(link.pid) > my_key:
                nursery.start_soon(dial, link, me, incarnation, incoming, keys, order)
        async for sends in outgoing:
            release = trio.current_time() + delay
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
                link.push_many(release + random.uniform(0.0, jitter) if jitter else release, data)
