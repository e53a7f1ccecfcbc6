"""The listener task: accepts connections from neighbors with smaller pids and reads their frames.

Each accepted connection must open with a HELLO from a neighbor whose pid is smaller than ours (the
smaller pid dials); anything else is logged and closed, and the peer goes on serving everyone else.
"""

from __future__ import annotations

import errno
import logging
from functools import partial

import trio

from .errors import ConfigError, FrameError
from .events import Connected, Disconnected, FramesIn
from .frames import Hello, Received, Resume
from .frames import Refused, encode_frame
from .links import Link, LineReader, decode, expect, hello_bytes, resume_bytes
from .pid import pid_key
from .ratelimit import LogLimiter, held_back

log = logging.getLogger("tom.listener")

FAULTS = LogLimiter()  # link faults, per neighbor
REJECTS = LogLimiter()  # rejected connections, per claimed pid or reason


async def open_listener(host: str, port: int) -> list[trio.SocketListener]:
    """Bind ``host:port``; raise ConfigError with one clear line if that is impossible."""
    try:
        return await trio.open_tcp_listeners(port, host=host)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is already in use (is another peer running?)") from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise ConfigError(f"{host} is not an address of this machine") from None
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


async def serve_link(link: Link, stream: trio.abc.Stream, reader: LineReader,
                     incoming: trio.MemorySendChannel) -> None:
    """Read ``link``'s frames from ``reader`` into ``incoming`` until the connection ends.

    Invariant: the frames passed on are exactly the frames the neighbor wrote, in order, each once.
    A line that is not a frame is a link fault, never a dropped line: the frames before it go on,
    it and everything after it are not counted, and the connection is closed — the next connection's
    RESUME has them sent again (and if the neighbor keeps sending it, its silence behind it is for
    the failure detector to judge).
    """
    src = link.pid
    await incoming.send(Connected(src, link.incarnation))  # type: ignore[arg-type]
    closed = False
    fault: FrameError | None = None
    try:
        while fault is None:
            lines = await reader.chunk()
            if lines is None:
                closed = True
                break
            frames = []
            counted = 0
            for raw in lines:
                try:
                    frame = decode(raw)
                except FrameError as e:
                    fault = e
                    break
                if type(frame) is Received:
                    link.on_received(frame.count)  # type: ignore[attr-defined]
                else:
                    frames.append(frame)
                    counted += 1
            if counted:
                link.count_in(counted, trio.current_time())
            if frames:
                await incoming.send(FramesIn(src, frames))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    if fault is not None:
        held = FAULTS.allow(src)
        if held is not None:
            log.warning("link fault: %s sent a line this peer cannot take (%s): connection closed, so that "
                        "it is sent again%s", src, fault, held_back(held))
    if link.detach(stream):
        if closed:
            log.info("%s closed the connection", src)
        elif fault is None:
            log.warning("%s: connection lost", src)
        await incoming.send(Disconnected(src))


async def run_link(link: Link, stream: trio.abc.Stream, reader: LineReader, neighbor_has: int,
                   incoming: trio.MemorySendChannel) -> None:
    """After a handshake: make ``stream`` the link's connection and serve it until it ends."""
    link.attach(stream, neighbor_has, trio.current_time())
    log.info("connected with %s", link.pid)
    try:
        await serve_link(link, stream, reader, incoming)
    finally:
        await trio.aclose_forcefully(stream)


async def listener(
    listeners: list[trio.SocketListener],
    me: str,
    incarnation: int,
    links: dict[str, Link],
    incoming: trio.MemorySendChannel,
    *,
    task_status=trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept connections on ``listeners`` for ever; report the bound port through ``task_status``."""
    my_key = pid_key(me)

    async def handle(stream: trio.SocketStream) -> None:
        reader = LineReader(stream)
        try:
            hello = await expect(reader, Hello)
            link = links.get(hello.pid)
            if link is None or pid_key(hello.pid) >= my_key:
                if link is None:
                    why = f"{hello.pid} is not in {me}'s neighbors file"
                else:
                    why = f"{me} dials {hello.pid}, not the other way round (do the neighbors files differ?)"
                with trio.move_on_after(1):
                    await stream.send_all(encode_frame(Refused(why)))
                raise FrameError(f"refused {hello.pid}: {why}")
            old = link.stream
            if old is not None:
                link.detach(old)
                await trio.aclose_forcefully(old)
                log.info("%s: replaced an older connection", hello.pid)
            mine = link.meet(hello.incarnation)
            await stream.send_all(hello_bytes(me, incarnation) + resume_bytes(mine))
            resume = await expect(reader, Resume)
        except (FrameError, trio.TooSlowError, trio.BrokenResourceError, OSError) as e:
            reason = "no handshake in time" if isinstance(e, trio.TooSlowError) else str(e)
            held = REJECTS.allow(reason if reason.startswith("refused ") else "handshake")
            if held is not None:
                log.warning("rejected a connection: %s%s", reason, held_back(held))
            await trio.aclose_forcefully(stream)
            return
        await run_link(link, stream, reader, resume.count, incoming)

    async with trio.open_nursery() as nursery:
        for lst in listeners:
            nursery.start_soon(partial(trio.serve_listeners, handle, [lst], handler_nursery=nursery))
        task_status.started(listeners[0].socket.getsockname()[1])
