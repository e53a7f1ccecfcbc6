"""Links: one long-lived TCP connection per pair of peers, each with one ordered writer.

The peer with the smaller pid dials, the larger one accepts, so a pair never holds two connections.
A link owns a FIFO buffer of encoded frames, each with a release time (the artificial delay): frames
leave in the order they were queued and never before their release time, so a constant delay can
never reorder a link. Frames queued while the neighbor is not connected wait in the buffer.

Nothing is lost or duplicated across reconnects. Frames are numbered implicitly, per pair of
incarnations: the n-th line written to the link is frame n (a run of messages, `Messages`, is one
line, so one frame here, on both sides). A written frame stays in ``unacked``
until the neighbor confirms it (RECEIVED-n, every few hundred frames); after a reconnect each side
says how many frames it has (RESUME-n) and the other re-sends exactly the rest. A neighbor that comes
back as a new incarnation starts from zero and gets none of the frames meant for the old one.
"""

from __future__ import annotations

import logging
import math
import os
from collections import deque

import trio

from ..codec.frames import MAX_FRAME_BYTES, OVER_LONG, FrameError, Received, encode_frame
from ..peer.pathtrace import TRACE
from .frametrace import FrameTrace
from .tlsstream import TlsSocketStream

log = logging.getLogger("tom.net.links")

WRITE_BATCH_BYTES = 256 * 1024
CONFIRM_EVERY = 256


class Link:
    """The connection to one neighbor, the frames waiting for it, and the reconnect counters."""

    def __init__(self, pid: str) -> None:
        self.pid = pid
        # (release, data, n): ``data`` holds ``n`` whole frames queued together (n = 0: link control,
        # e.g. RECEIVED, not counted); batches, not frames, so that the hot path handles each once
        self.buffer: deque[tuple[float, bytes, int]] = deque()
        self.unacked: deque[tuple[bytes, int]] = deque()  # written, not yet confirmed: (data, n)
        self.unacked_frames = 0  # the sum of n over unacked
        self.confirmed = 0  # frames the neighbor confirmed: unacked[0] starts with frame confirmed + 1
        self.received = 0  # frames received from the neighbor's current incarnation
        self._confirm_sent = 0
        self.stream: trio.abc.Stream | None = None
        self.state = "down"  # down -> connecting -> up
        self.incarnation: int | None = None
        self.frames_in = 0
        self.frames_out = 0  # frames written (a frame re-sent after a reconnect counts again)
        self.bytes_out = 0  # bytes written, link control (RECEIVED) included
        self.last_heard: float | None = None
        self.refused: str | None = None  # the reason the neighbor gave when it last refused us
        self.mismatch: str | None = None  # the last handshake's line when its group runs another order
        self._wake = trio.Event()
        self._knocked = trio.Event()  # the neighbor knocked (`tom.net.handshake`): dial it now
        self._last_release = float("-inf")
        self._writing = False  # the writer is inside a write (nothing else may write then)
        self.trace: FrameTrace | None = None  # --trace: every frame written and read is recorded

    # -- dialing -------------------------------------------------------------------------------

    def knock(self) -> None:
        """The neighbor (it waits for our dial) says it is up: a back-off under way ends now."""
        self._knocked.set()

    async def back_off(self, seconds: float) -> None:
        """Wait ``seconds`` before the next dial, or until the neighbor knocks."""
        with trio.move_on_after(seconds):
            await self._knocked.wait()
        self._knocked = trio.Event()

    # -- buffer --------------------------------------------------------------------------------

    def push_many(self, release: float, data: list[bytes], now: float | None = None) -> None:
        """Queue ``data`` to leave at ``release`` — or after the frames already queued: never earlier,
        so a random delay per batch (jitter) cannot reorder the link.

        When it is due (``release <= now``), nothing waits before it and nothing is being written, it
        is written at once (`_write_now`), without waking the writer task: one scheduler round less on
        every hop of a message under light load, and a task switch less per batch under load."""
        if release < self._last_release:
            release = self._last_release
        self._last_release = release
        joined = b"".join(data)
        due = now is not None and release <= now
        if due and not self.buffer and not self._writing and self._write_now(joined, len(data), release):
            return
        self.buffer.append((release, joined, len(data)))
        self._wake.set()

    def _write_now(self, data: bytes, n: int, release: float = 0.0) -> bool:
        """Write ``data`` (``n`` frames) straight to the connection's socket, without waiting: a plain
        TCP socket (non-blocking) or TLS on one (`TlsSocketStream.send_nowait`); what a plain socket
        does not take at once is queued first for the writer. False (nothing written) for other
        streams, or if the socket would block or the write fails: the caller queues ``data`` for the
        writer, which sends it next (as TLS requires after a blocked write) or meets the same error."""
        stream = self.stream
        if isinstance(stream, trio.SocketStream):
            try:
                sent = os.write(stream.socket.fileno(), data)  # (trio's sockets are non-blocking)
            except OSError:  # BlockingIOError included: nothing written
                return False
        elif isinstance(stream, TlsSocketStream):
            try:
                sent = stream.send_nowait(data)
            except trio.BrokenResourceError:
                return False
            if not sent:
                return False
        else:
            return False
        if self.trace is not None:
            self.trace.sent(self.pid, self.incarnation, self.confirmed + self.unacked_frames + 1, data,
                            trio.current_time() - release)
        self.unacked.append((data, n))  # written (in part or whole), as the writer counts them
        self.unacked_frames += n
        self.frames_out += n
        self.bytes_out += sent
        if sent < len(data):
            self.buffer.appendleft((float("-inf"), data[sent:], 0))  # the rest, before anything else
            self._wake.set()
        if TRACE is not None:
            TRACE.note("sent")
        return True

    @property
    def queued(self) -> int:
        """Frames waiting to be written (for status)."""
        return sum(n for _, _, n in self.buffer)

    async def _wait(self) -> None:
        self._wake = trio.Event()
        await self._wake.wait()

    # -- connection ----------------------------------------------------------------------------

    def meet(self, incarnation: int) -> int:
        """The neighbor introduced itself as ``incarnation``; return how many of its frames we have."""
        if self.incarnation is not None and incarnation != self.incarnation:
            dropped = self.queued + self.unacked_frames
            log.info("%s restarted (incarnation %s): %d frames meant for the old one dropped",
                     self.pid, incarnation, dropped)
            self.buffer.clear()
            self.unacked.clear()
            self.confirmed = self.received = self._confirm_sent = self.unacked_frames = 0
        self.incarnation = incarnation
        return self.received

    def attach(self, stream: trio.abc.Stream, neighbor_has: int, now: float) -> None:
        """Make ``stream`` the connection; the neighbor has our first ``neighbor_has`` frames."""
        sent = self.confirmed + self.unacked_frames
        if not self.confirmed <= neighbor_has <= sent:
            log.warning("%s claims %d frames; we sent %d", self.pid, neighbor_has, sent)
            neighbor_has = max(self.confirmed, min(neighbor_has, sent))
        self._confirm(neighbor_has)
        if self.unacked:  # written but lost with the old connection: send them again, first
            self.buffer.extendleft(reversed([(now, d, n) for d, n in self.unacked]))
            self.unacked.clear()
            self.unacked_frames = 0
        self.stream, self.state = stream, "up"
        self.mismatch = None
        if self.trace is not None:
            self.trace.connected(self.pid, self.incarnation, neighbor_has)
        self._wake.set()

    def detach(self, stream: trio.abc.Stream) -> bool:
        """Forget ``stream`` if it is still the connection; return whether it was."""
        if self.stream is stream:
            self.stream, self.state = None, "down"
            if self.trace is not None:
                self.trace.disconnected(self.pid)
            return True
        return False

    def _confirm(self, count: int) -> None:
        """Drop the first ``count - confirmed`` unacked frames (splitting a batch at a frame end)."""
        unacked = self.unacked
        k = min(count - self.confirmed, self.unacked_frames)
        while k > 0:
            data, n = unacked[0]
            if n <= k:
                unacked.popleft()
                self.unacked_frames -= n
                k -= n
                continue
            end = -1
            for _ in range(k):  # every frame ends with exactly one newline
                end = data.index(b"\n", end + 1)
            unacked[0] = (data[end + 1:], n - k)
            self.unacked_frames -= k
            k = 0
        self.confirmed = max(self.confirmed, count)

    def on_received(self, count: int) -> None:
        """The neighbor confirmed ``count`` frames."""
        if count <= self.confirmed + self.unacked_frames:
            self._confirm(count)

    def count_in(self, n: int, now: float) -> None:
        """``n`` frames (lines) came in; confirm them every CONFIRM_EVERY frames."""
        self.received += n
        self.frames_in += n
        self.last_heard = now
        if self.received - self._confirm_sent >= CONFIRM_EVERY:
            self._confirm_sent = self.received
            self.buffer.append((now, encode_frame(Received(self.received)), 0))
            self._wake.set()

    async def writer(self) -> None:
        """Send buffered frames in order, batched into few writes, each no earlier than its release."""
        buffer, unacked = self.buffer, self.unacked
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
                release, data, n = buffer.popleft()
                chunks.append(data)
                size += len(data)
                if n:
                    if self.trace is not None:
                        self.trace.sent(self.pid, self.incarnation, self.confirmed + self.unacked_frames + 1, data,
                                        now - release)
                    unacked.append((data, n))
                    self.unacked_frames += n
                    self.frames_out += n
            stream = self.stream
            self.bytes_out += size
            self._writing = True
            try:
                await stream.send_all(b"".join(chunks))
                if TRACE is not None:
                    TRACE.note("sent")
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                # what was written stays in `unacked`; the next connection's RESUME sorts it out
                self.detach(stream)
                await trio.aclose_forcefully(stream)
            finally:
                self._writing = False


class LineReader:
    """Splits a byte stream into lines. A line over MAX_FRAME_BYTES ends what `chunk` returns, as
    OVER_LONG: on a member's link that is a link fault, and the caller closes the connection."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.pending = b""
        # the last chunk's buffer and the end of its complete lines: `raw` (for --trace), kept without a copy
        self._buf, self._end = b"", -1

    async def chunk(self) -> list[str | bytes] | None:
        """The complete lines of the next chunk (possibly none), or None at end of stream.

        Lines the handshake (`line`) read past come first, without waiting for more bytes. Lines come
        decoded (str) when the whole chunk is UTF-8 — one decode per chunk, the common case — and as
        bytes otherwise, for `decode` to report the bad ones.
        """
        if b"\n" in self.pending:
            data = b""
        else:
            data = await self.stream.receive_some(MAX_FRAME_BYTES)
            if not data:
                return None
        buf = self.pending + data
        end = buf.rfind(b"\n")
        lines: list = []
        if end >= 0:
            complete, self.pending = buf[:end], buf[end + 1:]
            self._buf, self._end = buf, end
            # only the first line can be over the limit: every later one lies within `data`, which is
            # at most 65,536 bytes (newline included)
            if len(complete) > MAX_FRAME_BYTES and buf.find(b"\n") > MAX_FRAME_BYTES:
                self.pending = b""
                return [OVER_LONG]
            try:
                lines = complete.decode("utf-8").split("\n")
            except UnicodeDecodeError:
                lines = complete.split(b"\n")
        else:
            self.pending = buf
            self._end = -1
        if len(self.pending) > MAX_FRAME_BYTES:
            self.pending = b""
            lines.append(OVER_LONG)
        return lines

    @property
    def raw(self) -> bytes:
        """The complete lines of the last chunk, as bytes, newlines included."""
        return self._buf[:self._end + 1]

    async def line(self, limit: int = 4096) -> bytes:
        """One line, for the handshake: FrameError if the stream ends or the line is too long."""
        while b"\n" not in self.pending:
            data = await self.stream.receive_some(4096)
            if not data:
                raise FrameError("connection closed during the handshake")
            self.pending += data
            if len(self.pending) > limit and b"\n" not in self.pending:
                raise FrameError(f"no line in the first {limit} bytes")
        line, _, self.pending = self.pending.partition(b"\n")
        return line[:-1] if line.endswith(b"\r") else line


MAX_BACKOFF = 2.0
NEW_NEIGHBOR_BACKOFF = 0.5


def backoff(attempt: int, reached: bool = True) -> float:
    """Seconds to wait before reconnect attempt ``attempt`` (0-based): 0.05 s doubling to MAX_BACKOFF, or
    to NEW_NEIGHBOR_BACKOFF for a neighbor never ``reached`` yet (a peer that is still to start: it
    waits for our dial, as the larger pid of the pair, so a late joiner is reached within half a second)."""
    return min(MAX_BACKOFF if reached else NEW_NEIGHBOR_BACKOFF, 0.05 * math.pow(2, attempt))
