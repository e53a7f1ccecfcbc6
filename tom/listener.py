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
from .events import FramesIn
from .links import Link, PrefixedStream, hello_bytes, read_frames, read_hello
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


async def serve_link(link: Link, stream: trio.abc.Stream, prefix: bytes, incoming: trio.MemorySendChannel) -> None:
    """Read frames of ``link`` from ``stream`` (after ``prefix``, already read) into ``incoming``."""
    src = link.pid

    async def on_frames(frames):
        link.frames_in += len(frames)
        link.last_heard = trio.current_time()
        await incoming.send(FramesIn(src, frames))

    def on_error(reason):
        log.warning("rejected frame from %s: %s", src, reason)

    try:
        await read_frames(PrefixedStream(prefix, stream), on_frames, on_error)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        link.detach(stream)


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
        try:
            hello, rest = await read_hello(stream)
        except (FrameError, trio.TooSlowError, trio.BrokenResourceError, OSError) as e:
            log.warning("rejected a connection: %s", e if not isinstance(e, trio.TooSlowError) else "no HELLO in time")
            await trio.aclose_forcefully(stream)
            return
        link = links.get(hello.pid)
        if link is None or pid_key(hello.pid) >= my_key:
            why = "unknown peer" if link is None else "it should accept our connection, not dial us"
            log.warning("rejected a connection from %s: %s", hello.pid, why)
            await trio.aclose_forcefully(stream)
            return
        try:
            await stream.send_all(hello_bytes(me, incarnation))
        except (trio.BrokenResourceError, OSError):
            await trio.aclose_forcefully(stream)
            return
        old = link.stream
        link.attach(stream, hello.incarnation)
        if old is not None:
            await trio.aclose_forcefully(old)
        log.info("%s connected", hello.pid)
        try:
            await serve_link(link, stream, rest, incoming)
        finally:
            await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        for lst in listeners:
            nursery.start_soon(partial(trio.serve_listeners, handle, [lst], handler_nursery=nursery))
        task_status.started(listeners[0].socket.getsockname()[1])
