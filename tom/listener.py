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
from .links import Link, LineReader, decode, expect, hello_bytes, resume_bytes
from .pid import pid_key

log = logging.getLogger("tom.listener")


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
    """Read ``link``'s frames from ``reader`` into ``incoming`` until the connection ends."""
    src = link.pid
    await incoming.send(Connected(src, link.incarnation))  # type: ignore[arg-type]
    closed = False
    try:
        while True:
            lines = await reader.chunk()
            if lines is None:
                closed = True
                break
            frames = []
            counted = len(lines)
            for raw in lines:
                try:
                    frame = decode(raw)
                except FrameError as e:
                    log.warning("rejected frame from %s: %s", src, e)
                    continue
                if type(frame) is Received:
                    link.on_received(frame.count)  # type: ignore[attr-defined]
                    counted -= 1
                else:
                    frames.append(frame)
            if counted:
                link.count_in(counted, trio.current_time())
            if frames:
                await incoming.send(FramesIn(src, frames))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    if link.detach(stream):
        if closed:
            log.info("%s closed the connection", src)
        else:
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
                why = "unknown peer" if link is None else "it should accept our connection, not dial us"
                raise FrameError(f"HELLO from {hello.pid}: {why}")
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
            log.warning("rejected a connection: %s", reason)
            await trio.aclose_forcefully(stream)
            return
        await run_link(link, stream, reader, resume.count, incoming)

    async with trio.open_nursery() as nursery:
        for lst in listeners:
            nursery.start_soon(partial(trio.serve_listeners, handle, [lst], handler_nursery=nursery))
        task_status.started(listeners[0].socket.getsockname()[1])
