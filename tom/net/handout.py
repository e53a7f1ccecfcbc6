"""The handout's connections (`tom peer --wire handout`): one line per connection, as its base tool.

Sending: each frame goes to each of its targets on a connection of its own (connect, one line, close),
the targets in the neighbors file's order, one connection at a time per neighbor: so one sender's
frames reach a neighbor in the order sent, which is all the handout's rule needs (FIFO links). The
artificial delay waits before each frame, once, as the handout's sending thread does. A neighbor that
refuses is retried with a bounded back-off while `must_reach` says so (static: always; a neighbor that
is not running blocks delivery, as the handout says), else the frame is not sent to it.

Receiving: a connection may carry one line (the base tool) or many (a long-lived connection, the
handout's extra); the last line may end with the close instead of ``\\n``. Lines are passed on in
accept order: a connection's lines wait until every connection accepted before it has passed its first
line on or closed. A sender's next connection is opened only after its previous one was written and
closed, so its lines always come after the previous one's; connections of different senders need no
order among them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import trio

from ..codec.handout import MAX_LINE_BYTES
from ..codec.pid import split_pid
from .ratelimit import LogLimiter, held_back

log = logging.getLogger("tom.handout")

NEIGHBOR_QUEUE = 4096  # frames waiting for one neighbor; more and the processor waits (backpressure)
FIRST_LINE_WAIT = 5.0  # a connection that sends nothing holds later connections back at most this long
BACKOFF_FIRST, BACKOFF_MAX = 0.05, 2.0
REFUSED = LogLimiter(30.0)


@dataclass(frozen=True, slots=True)
class LineIn:
    """A line read (without its line ending) from the connection from ``address``."""

    line: str
    address: str


async def serve_lines(listeners: list[trio.SocketListener], incoming: trio.MemorySendChannel,
                      *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Accept connections for ever; pass every line read on to ``incoming`` in accept order."""
    async with trio.open_nursery() as nursery:
        port = listeners[0].socket.getsockname()[1]
        task_status.started(port)
        previous = trio.Event()
        previous.set()
        accepted = trio.Semaphore(256)  # connections read at once; further ones wait in the backlog

        async def accept_loop(listener: trio.SocketListener) -> None:
            nonlocal previous
            while True:
                await accepted.acquire()
                stream = await listener.accept()
                turn, previous = previous, trio.Event()
                nursery.start_soon(_read_connection, stream, turn, previous, incoming, accepted)

        for lst in listeners:
            nursery.start_soon(accept_loop, lst)


def _address(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except (OSError, ValueError):
        return "?"
    return f"{host}:{port}"


async def _read_connection(stream: trio.SocketStream, turn: trio.Event, done: trio.Event,
                           incoming: trio.MemorySendChannel, accepted: trio.Semaphore) -> None:
    """Read ``stream``'s lines; pass them on once ``turn`` is set; set ``done`` once the first line is
    passed on (or there is none)."""
    address = _address(stream)
    try:
        await _read_lines(stream, address, turn, done, incoming)
    except trio.BrokenResourceError:
        pass  # the processor has stopped (the peer is quitting): nothing more is read
    finally:
        if not done.is_set():
            await turn.wait()
            done.set()
        accepted.release()


async def _read_lines(stream: trio.SocketStream, address: str, turn: trio.Event, done: trio.Event,
                      incoming: trio.MemorySendChannel) -> None:
    """The lines of one connection, the first one once ``turn`` is set (see the module docstring)."""
    buffer = b""
    released = False
    async with stream:
        while True:
            chunk = b""
            try:
                if not released:
                    with trio.move_on_after(FIRST_LINE_WAIT):
                        chunk = await stream.receive_some(65536)
                        if not chunk:
                            break
                    if not chunk:  # nothing within the wait: stop holding later connections back
                        if not turn.is_set():
                            await turn.wait()
                        released = True
                        done.set()
                        continue
                else:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        break
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > MAX_LINE_BYTES:
                log.warning("a line of over %d bytes from %s: connection closed", MAX_LINE_BYTES, address)
                buffer = b""
                break
            if lines:
                if not released:
                    await turn.wait()
                for raw in lines:
                    await incoming.send(LineIn(_text(raw), address))
                if not released:
                    released = True
                    done.set()
        if buffer:  # the last line, ended by the close instead of "\n"
            if not released:
                await turn.wait()
            await incoming.send(LineIn(_text(buffer), address))


def _why(error: OSError) -> str:
    """The reason of a failed connect, as the system says it (trio wraps it in its own OSError)."""
    cause = error.__cause__ if isinstance(error.__cause__, OSError) else error
    return cause.strerror or str(cause)


def _text(raw: bytes) -> str:
    return (raw[:-1] if raw.endswith(b"\r") else raw).decode("utf-8", "replace")


async def send_lines(outgoing: trio.MemoryReceiveChannel, neighbors: list[str], delay: float,
                     must_reach: Callable[[str], bool]) -> None:
    """Send each ``(line, targets)`` of ``outgoing``: wait ``delay``, then queue it for each target."""
    channels = {}
    async with trio.open_nursery() as nursery:
        for pid in neighbors:
            tx, rx = trio.open_memory_channel(NEIGHBOR_QUEUE)
            channels[pid] = tx
            nursery.start_soon(_neighbor, pid, rx, must_reach)
        async with outgoing:
            async for line, targets in outgoing:
                if delay:
                    await trio.sleep(delay)
                for pid in targets:
                    await channels[pid].send(line)
        for tx in channels.values():
            await tx.aclose()


async def _neighbor(pid: str, lines: trio.MemoryReceiveChannel, must_reach: Callable[[str], bool]) -> None:
    """Deliver ``lines`` to ``pid``, one connection each, in order."""
    host, port = split_pid(pid)
    host = host.strip("[]")
    async with lines:
        async for line in lines:
            data = line.encode() + b"\n"
            backoff = BACKOFF_FIRST
            while True:
                try:
                    stream = await trio.open_tcp_stream(host, port)
                    async with stream:
                        await stream.send_all(data)
                    break
                except OSError as e:
                    why = _why(e)
                    if not must_reach(pid):
                        log.debug("not sent to %s (%s; not a member): %s", pid, why, line[:80])
                        break
                    held = REFUSED.allow(pid)
                    if held is not None:
                        log.warning("cannot reach %s (%s): retrying, nothing is reordered%s", pid, why,
                                    held_back(held))
                    await trio.sleep(backoff)
                    backoff = min(BACKOFF_MAX, backoff * 2)
                except trio.BrokenResourceError:
                    # connected but the write failed: the neighbor closed at once; try again
                    await trio.sleep(backoff)
                    backoff = min(BACKOFF_MAX, backoff * 2)
