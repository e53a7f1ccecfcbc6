"""The listener task: accepts connections from neighbors with smaller pids and reads their frames.

Each accepted connection must pass `tom.net.handshake.accept` (a HELLO from a neighbor whose pid is smaller
than ours, the smaller pid dials; inside mutual TLS when the group is secured); anything else is
logged (rate-limited) and closed, and the peer goes on serving everyone else.
"""

from __future__ import annotations

import errno
import logging
from functools import partial

import trio

from ..errors import ConfigError, FrameError
from ..peer.events import Connected, Disconnected, EventSink, FramesIn
from ..peer.pathtrace import TRACE
from ..codec.frames import decode_lines
from .handshake import HANDSHAKE_TIMEOUT, MAX_PENDING, Knocked, OrderMismatch, TlsNotConfigured, accept
from .keys import GroupKeys
from .links import Link, LineReader
from .ratelimit import LogLimiter, held_back

log = logging.getLogger("tom.net.listener")

FAULTS = LogLimiter()  # link faults, per neighbor
REJECTS = LogLimiter()  # rejected connections, per claimed pid or reason


def _address(stream: trio.abc.Stream) -> str:
    """``host:port`` of the other end of an accepted connection (for log lines)."""
    try:
        host, port = stream.socket.getpeername()[:2]  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return "?"
    return f"{host}:{port}"


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
                     incoming: EventSink) -> None:
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
            if TRACE is not None:
                TRACE.note("recv")
            if lines is None:
                closed = True
                break
            if link.trace is not None and lines:
                link.trace.received(src, link.incarnation, link.received + 1, reader.raw)
            frames, taken, received, fault = decode_lines(lines)
            for count in received:
                link.on_received(count)
            if frames:
                link.count_in(taken, trio.current_time())  # (lines: a run of messages is one)
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
                   incoming: EventSink) -> None:
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
    incoming: EventSink,
    keys: GroupKeys | None = None,
    *,
    order: str = "lamport",
    task_status=trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept connections on ``listeners`` for ever; report the bound port through ``task_status``.
    With ``keys``, only mutual-TLS connections from members (see `tom.net.handshake`); only from peers
    whose group runs ``order``."""
    pending = 0

    def reject(address: str, key: str, reason: str) -> None:
        held = REJECTS.allow(key)
        if held is not None:
            log.warning("rejected a connection from %s: %s%s", address, reason, held_back(held))

    async def handle(stream: trio.SocketStream) -> None:
        nonlocal pending
        if pending >= MAX_PENDING:
            reject(_address(stream), "busy", f"{MAX_PENDING} handshakes already under way")
            await trio.aclose_forcefully(stream)
            return
        pending += 1
        address = _address(stream)  # now: the TLS layer may take the socket over
        try:
            with trio.fail_after(HANDSHAKE_TIMEOUT):
                link, stream, reader, neighbor_has = await accept(stream, me, incarnation, links, keys, order)
        except Knocked:  # (its dial goes now: `tom.net.handshake`)
            await trio.aclose_forcefully(stream)
            return
        except OrderMismatch as e:
            held = REJECTS.allow(e.kind)
            if held is not None:
                log.warning("%s%s", e, held_back(held))
            await trio.aclose_forcefully(stream)
            return
        except TlsNotConfigured as e:
            await trio.aclose_forcefully(stream)
            if not any(link.state == "up" for link in links.values()):
                raise ConfigError("a neighbor opened a TLS connection: the group is secured; "
                                  "start this peer with --keys DIR (see tom keys)") from None
            reject(address, e.kind, str(e))
            return
        except (FrameError, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            reason = "no handshake in time" if isinstance(e, trio.TooSlowError) else str(e)
            kind = getattr(e, "kind", "timeout" if isinstance(e, trio.TooSlowError) else "handshake")
            reject(address, kind, reason)
            await trio.aclose_forcefully(stream)
            return
        finally:
            pending -= 1
        await run_link(link, stream, reader, neighbor_has, incoming)

    async with trio.open_nursery() as nursery:
        for lst in listeners:
            nursery.start_soon(partial(trio.serve_listeners, handle, [lst], handler_nursery=nursery))
        task_status.started(listeners[0].socket.getsockname()[1])
