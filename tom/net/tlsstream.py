"""TLS over a connected TCP socket, as a trio Stream, with OpenSSL doing the socket I/O itself.

`trio.SSLStream` runs TLS over any trio stream through memory BIOs: every record crosses Python
several times (transport read, BIO write, SSL read, BIO read, transport write) under trio's locks.
On loopback that cost about 85 us per message hop and halved link bandwidth (measured: round trip
of a 42-byte line 300 us against 130 us in clear, bulk echo 55 MB/s against 350 MB/s), which broke
the issue's budget (light-load p50 within 0.2 ms of plain). A non-blocking `ssl.SSLSocket` reads
and writes the socket in C; trio only waits for readiness. Round trip then matches plain TCP.

Contract, as for any trio Stream used by one reader task and one writer task:

* ``receive_some`` returns decrypted bytes, ``b""`` once the other side closed (TLS close_notify,
  which ``aclose`` sends); a TCP end without it (a crash, a reset) is ``trio.BrokenResourceError``,
  as a reset is on a plain socket: a link is lost either way, and the reconnect logic handles it;
* TLS and socket errors become ``trio.BrokenResourceError``; use after ``aclose`` raises
  ``trio.ClosedResourceError``; ``aclose`` wakes any task waiting on the socket first;
* TLS 1.3 has no renegotiation, so a write never needs a read (``SSLWantReadError`` on write only
  yields and retries: it cannot starve the reader, which owns the socket's read readiness).

`wrap` makes one from a `trio.SocketStream`; the TLS handshake is `do_handshake`, bounded by the
caller. Other streams (memory streams in tests) go through `trio.SSLStream`, same contexts, same checks.
"""

from __future__ import annotations

import socket
import ssl

import trio

FULL_RECORD = 16384  # TLS's largest record payload: what one SSL read returns from a long write


class TlsSocketStream(trio.abc.Stream):
    """A trio Stream over a non-blocking, connected `ssl.SSLSocket` (see the module docstring)."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        self._closed = False
        self._full = False  # the last read stopped at max_bytes: more may be readable at once

    @classmethod
    def wrap(cls, stream: trio.SocketStream, ctx: ssl.SSLContext, server_side: bool) -> "TlsSocketStream":
        """Take over ``stream``'s socket (``stream`` must not be used afterwards)."""
        fd = stream.socket.detach()
        raw = socket.socket(fileno=fd)
        raw.setblocking(False)
        return cls(ctx.wrap_socket(raw, server_side=server_side, do_handshake_on_connect=False,
                                   suppress_ragged_eofs=False))  # an end without close_notify is a loss

    def _check(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the TLS stream was closed")

    async def do_handshake(self) -> None:
        while True:
            self._check()
            try:
                self._sock.do_handshake()
                return
            except ssl.SSLWantReadError:
                await trio.lowlevel.wait_readable(self._fd)
            except ssl.SSLWantWriteError:
                await trio.lowlevel.wait_writable(self._fd)
            except (ssl.SSLError, OSError) as e:
                raise trio.BrokenResourceError(f"TLS handshake failed: {e}") from e

    def getpeercert(self) -> dict | None:
        return self._sock.getpeercert()

    def version(self) -> str | None:
        return self._sock.version()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        n = max_bytes or 65536
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._full and not self._closed and not self._sock.pending():
            # the last read took all there was: wait before reading, as a failed SSL read costs an
            # exception (safe as OpenSSL reads no further than the record it decrypts: no read-ahead)
            await trio.lowlevel.wait_readable(self._fd)
        while True:
            self._check()
            try:
                data = self._sock.recv(n)
            except ssl.SSLWantReadError:
                await trio.lowlevel.wait_readable(self._fd)
                continue
            except ssl.SSLWantWriteError:
                await trio.lowlevel.wait_writable(self._fd)
                continue
            except ssl.SSLZeroReturnError:  # close_notify: the other side closed
                data = b""
            except (ssl.SSLError, OSError) as e:
                raise trio.BrokenResourceError(f"TLS receive failed: {e}") from e
            if FULL_RECORD <= len(data) < n:  # a full record: more may be waiting (a short one ends a write)
                data = self._more(data, n)
            self._full = len(data) >= n
            await trio.lowlevel.cancel_shielded_checkpoint()
            return data

    def _more(self, data: bytes, n: int) -> bytes:
        """``data`` plus whatever further records are readable now, up to ``n`` bytes: one SSL read
        returns one record (16 KiB at most), and a reader woken per record would pay its per-chunk
        work four times as often as on a plain socket. An error or the end waits for the next call."""
        parts, total = [data], len(data)
        while total < n:
            try:
                more = self._sock.recv(n - total)
            except (ssl.SSLError, OSError):
                break
            if not more:
                break
            parts.append(more)
            total += len(more)
        return b"".join(parts) if len(parts) > 1 else data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(data)
        while view:
            self._check()
            try:
                sent = self._sock.send(view)
            except (ssl.SSLWantWriteError, BlockingIOError):
                await trio.lowlevel.wait_writable(self._fd)
                continue
            except ssl.SSLWantReadError:  # never in TLS 1.3 (no renegotiation): yield, retry
                await trio.sleep(0.001)
                continue
            except (ssl.SSLError, OSError) as e:
                raise trio.BrokenResourceError(f"TLS send failed: {e}") from e
            view = view[sent:]
        await trio.lowlevel.cancel_shielded_checkpoint()

    def send_nowait(self, data: bytes) -> int:
        """Write ``data`` now if the socket takes it without waiting: the bytes written (all of them:
        OpenSSL writes a buffer whole or not at all), or 0 if it would block. After 0 the caller must
        send the same bytes next (`send_all`, first): OpenSSL may hold part of a record and wants
        them again. TLS and socket errors as `send_all`."""
        self._check()
        try:
            return self._sock.send(data)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
            return 0
        except (ssl.SSLError, OSError) as e:
            raise trio.BrokenResourceError(f"TLS send failed: {e}") from e

    async def wait_send_all_might_not_block(self) -> None:
        self._check()
        await trio.lowlevel.wait_writable(self._fd)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            trio.lowlevel.notify_closing(self._fd)
            try:  # close_notify, best effort (never waits): the other side reads a clean end
                self._sock.unwrap()
            except (ssl.SSLError, OSError, ValueError):
                pass
            self._sock.close()
        await trio.lowlevel.checkpoint()
