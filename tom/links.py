"""Links: one long-lived TCP connection per pair of peers, each with one ordered writer.

The peer with the smaller pid dials, the larger one accepts, so a pair never holds two connections.
A link owns a FIFO buffer of encoded frames, each with a release time (the artificial delay): frames
leave in the order they were queued and never before their release time, so a constant delay can
never reorder a link. Frames queued while the neighbor is not connected wait in the buffer.
"""

from __future__ import annotations

import logging
import math
from collections import deque

import trio

from .frames import MAX_FRAME_BYTES, FrameError, Hello, encode_frame, parse_frame

log = logging.getLogger("tom.links")

WRITE_BATCH_BYTES = 256 * 1024
HANDSHAKE_TIMEOUT = 5.0


class Link:
    """The state of the connection to one neighbor and the frames waiting for it."""

    def __init__(self, pid: str) -> None:
        self.pid = pid
        self.buffer: deque[tuple[float, bytes]] = deque()
        self.stream: trio.abc.Stream | None = None
        self.state = "down"  # down -> connecting -> up
        self.incarnation: int | None = None
        self.frames_in = 0
        self.frames_out = 0
        self.last_heard: float | None = None
        self._wake = trio.Event()
        self._down = trio.Event()

    # -- buffer --------------------------------------------------------------------------------

    def push(self, release: float, data: bytes) -> None:
        self.buffer.append((release, data))
        self._wake.set()

    async def _wait(self) -> None:
        self._wake = trio.Event()
        await self._wake.wait()

    # -- connection ----------------------------------------------------------------------------

    def attach(self, stream: trio.abc.Stream, incarnation: int) -> None:
        """Make ``stream`` this link's connection (the newest one wins)."""
        old = self.stream
        self.stream, self.state, self.incarnation = stream, "up", incarnation
        self._down = trio.Event()
        self._wake.set()
        if old is not None:
            log.info("%s: replaced an older connection", self.pid)

    def detach(self, stream: trio.abc.Stream) -> None:
        """Forget ``stream`` if it is still this link's connection."""
        if self.stream is stream:
            self.stream, self.state = None, "down"
            self._down.set()
            log.warning("%s: connection lost", self.pid)

    async def wait_down(self) -> None:
        await self._down.wait()

    async def writer(self) -> None:
        """Send buffered frames in order, batched into few writes, each no earlier than its release."""
        buffer = self.buffer
        while True:
            if not buffer or self.stream is None:
                await self._wait()
                continue
            release = buffer[0][0]
            if release > trio.current_time():
                await trio.sleep_until(release)
                continue
            now = trio.current_time()
            chunks, size = [], 0
            while buffer and size < WRITE_BATCH_BYTES and buffer[0][0] <= now:
                data = buffer.popleft()[1]
                chunks.append(data)
                size += len(data)
            stream = self.stream
            try:
                await stream.send_all(b"".join(chunks))
                self.frames_out += len(chunks)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                # Unsure how much arrived: send the batch again on the next connection. Frames are
                # idempotent at the receiver (a set of ACKers, a message keyed by (clock, pid)).
                buffer.extendleft(reversed([(now, c) for c in chunks]))
                self.detach(stream)
                await trio.aclose_forcefully(stream)


async def read_frames(stream: trio.abc.ReceiveStream, on_frames, on_error) -> None:
    """Read lines from ``stream`` until EOF; hand each chunk's frames to ``on_frames(list)``.

    A malformed or over-long line is reported through ``on_error(reason)`` and skipped; the rest of
    the stream is still read.
    """
    pending = b""
    skipping = False
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return
        data = pending + chunk
        lines = data.split(b"\n")
        pending = lines.pop()
        frames = []
        for raw in lines:
            if skipping:  # tail of an over-long line
                skipping = False
                continue
            try:
                frames.append(parse_frame(raw.rstrip(b"\r").decode("utf-8")))
            except (FrameError, UnicodeDecodeError) as e:
                on_error(f"{e}" if isinstance(e, FrameError) else f"not UTF-8: {raw[:40]!r}")
        if len(pending) > MAX_FRAME_BYTES:
            on_error(f"frame over {MAX_FRAME_BYTES} bytes dropped")
            pending, skipping = b"", True
        if frames:
            await on_frames(frames)


async def read_hello(stream: trio.abc.ReceiveStream) -> tuple[Hello, bytes]:
    """Read the first line, which must be a HELLO; return it and any bytes read past it."""
    data = b""
    with trio.fail_after(HANDSHAKE_TIMEOUT):
        while b"\n" not in data:
            chunk = await stream.receive_some(4096)
            if not chunk:
                raise FrameError("connection closed before HELLO")
            data += chunk
            if len(data) > 1024 and b"\n" not in data:
                raise FrameError("no HELLO in the first 1024 bytes")
    line, _, rest = data.partition(b"\n")
    try:
        frame = parse_frame(line.rstrip(b"\r").decode("utf-8"))
    except UnicodeDecodeError:
        raise FrameError(f"first line is not UTF-8: {line[:40]!r}") from None
    if not isinstance(frame, Hello):
        raise FrameError(f"expected HELLO, got {line[:60]!r}")
    return frame, rest


class PrefixedStream(trio.abc.ReceiveStream):
    """A receive stream that first yields bytes already read past the handshake."""

    def __init__(self, prefix: bytes, stream: trio.abc.ReceiveStream) -> None:
        self._prefix, self._stream = prefix, stream

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            data, self._prefix = self._prefix, b""
            return data
        return await self._stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._stream.aclose()


def hello_bytes(pid: str, incarnation: int) -> bytes:
    return encode_frame(Hello(pid, incarnation))


def backoff(attempt: int) -> float:
    """Seconds to wait before reconnect attempt ``attempt`` (0-based): 0.05 s doubling to 2 s."""
    return min(2.0, 0.05 * math.pow(2, attempt))
