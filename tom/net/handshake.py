"""The link handshake, both sides: what a connection must show before it may touch a link.

Plain (the course's wire format): the dialler sends ``HELLO-pid-incarnation``, the listener answers
with its own HELLO and ``RESUME-n``, the dialler with ``RESUME-n``; then frames flow.

Both HELLOs name the order the speaker's group runs (`tom.codec.frames.Hello.order`; the plain HELLO means
lamport). Peers of different orders never link: the listener answers a HELLO of another order with
its own HELLO (so the dialler learns the listener's order) and a REFUSED, and each side raises
`OrderMismatch`, whose message is the one line a user sees on either side, e.g.
``127.0.0.1:5001 runs the sequencer order, this peer the lamport order: connection refused``.
The HELLOs also name the wire protocol (`tom.codec.frames.wire_of`): peers of one order but another wire
(a TOM from before runs of messages, or before cumulative ACKs) are refused the same way
(`WireMismatch`); an older TOM, which reads the v3 word as another order, refuses with its
order-mismatch line.

A knock: the smaller pid of a pair dials, backing off up to two seconds while its neighbor is down. A
peer that starts (or starts again) therefore dials each smaller neighbor once itself and sends its
HELLO (`knock`); the listener, seeing a HELLO from a larger pid in its neighbors file, ends its dial's
back-off for that link (`Link.knock`), answers ``REFUSED`` (it dials, not the other way round) and
closes. Nothing else of the knock touches the link; under ``--keys`` it comes inside TLS like any
HELLO, so only a member knocks.

Secured (``--keys``): the same, inside mutual TLS 1.3 (`tom.net.tlsstream` on sockets, `trio.SSLStream`
on other streams). Invariants of `accept` (listener side):

* nothing a connection sends is parsed before its TLS handshake completed with a certificate that
  chains to the group CA; its HELLO must then claim exactly the pid that certificate names, so only
  a member speaks, and only as itself;
* only then may it replace the link's current connection (a reconnect), never before;
* a plaintext connection gets one line (`TLS_REQUIRED`) and is closed;
* the whole handshake takes at most HANDSHAKE_TIMEOUT seconds, and at most MAX_PENDING handshakes
  run at once (the listener closes the rest at once), so a flood costs bounded CPU and memory.

`connect` (dialler side) checks the same of the listener: its certificate must name the pid dialled,
before our HELLO (which carries our incarnation) is sent. A plaintext dialler that meets a secured
listener gets `TLS_REQUIRED` and raises PlaintextRefused (a ConfigError: the peer stops with one
line); a plaintext listener that receives a TLS handshake raises TlsNotConfigured.
"""

from __future__ import annotations

import logging
import socket
import ssl

import trio

from ..errors import ConfigError, FrameError, RefusedError
from ..codec.frames import Hello, Refused, Resume, decode_line, encode_frame, wire_of
from .keys import GroupKeys, cert_pid
from .links import Link, LineReader
from ..codec.pid import pid_key
from .tlsstream import TlsSocketStream

HANDSHAKE_TIMEOUT = 5.0
MAX_PENDING = 64
TLS_REQUIRED = b"TOM-TLS-REQUIRED this peer accepts TLS connections only: the group is secured (--keys)\n"


class Rejected(FrameError):
    """A connection did not pass the handshake; ``kind`` groups the reasons for rate-limited logging."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Knocked(Rejected):
    """A larger neighbor knocked (see the module docstring): the link's dial goes now."""


class OrderMismatch(Rejected):
    """The neighbor's group runs another order than ours: no link between the two (both sides)."""

    def __init__(self, pid: str, theirs: str, mine: str) -> None:
        super().__init__(f"order {pid}", f"{pid} runs the {theirs} order, this peer the {mine} order: "
                                          f"connection refused")
        self.pid = pid


class WireMismatch(OrderMismatch):
    """The neighbor runs our order but another wire protocol (an older or newer TOM): no link."""

    def __init__(self, pid: str, order: str, theirs: int, mine: int) -> None:
        Rejected.__init__(self, f"wire {pid}", f"{pid} speaks wire protocol v{theirs} of the {order} order, this "
                                               f"peer v{mine} (every peer of a group needs a TOM that speaks the "
                                               f"same wire): connection refused")
        self.pid = pid


def mismatch(pid: str, hello: Hello, order: str) -> OrderMismatch | None:
    """Why a neighbor that said ``hello`` cannot link with a peer of ``order``: None if it can."""
    if hello.order != order:
        return OrderMismatch(pid, hello.order, order)
    if hello.wire != wire_of(order):
        return WireMismatch(pid, order, hello.wire, wire_of(order))
    return None


class PlaintextRefused(ConfigError):
    """We run without keys and a neighbor refused our plaintext connection: the group is secured."""


class TlsNotConfigured(Rejected):
    """We run without keys and a neighbor opened a TLS handshake: the group is secured."""


def looks_like_tls(first: bytes) -> bool:
    """Whether ``first`` (one byte or more) starts a TLS handshake record (content type 22, version 3.x)."""
    return first[:1] == b"\x16" and first[1:2] in (b"", b"\x03")


class Replay(trio.abc.Stream):
    """``stream``, with ``head`` (bytes already read from it) received again first."""

    def __init__(self, stream: trio.abc.Stream, head: bytes) -> None:
        self.stream, self.head = stream, head

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self.head:
            n = len(self.head) if max_bytes is None else max_bytes
            data, self.head = self.head[:n], self.head[n:]
            return data
        return await self.stream.receive_some(max_bytes)

    async def send_all(self, data) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


def _tls_reason(e: BaseException) -> str:
    """What OpenSSL said, in a few words (e.g. ``certificate verify failed: unable to get local issuer``)."""
    cause = e.__cause__ or e.__context__
    if isinstance(cause, trio.BrokenResourceError):  # TlsSocketStream's, around the ssl error
        cause = cause.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"certificate rejected: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError):
        if cause.reason == "UNEXPECTED_EOF_WHILE_READING":
            return "the other side closed the connection (does it run without --keys?)"
        return (cause.reason or str(cause)).lower().replace("_", " ")
    return "connection closed during the TLS handshake"


async def _tls(stream: trio.abc.Stream, keys: GroupKeys, server_side: bool
               ) -> tuple[TlsSocketStream | trio.SSLStream, str | None]:
    """Mutual TLS on ``stream``; return it and the pid the other side's (verified) certificate names.
    On failure the TLS stream is closed here (it owns the socket)."""
    ctx = keys.server if server_side else keys.client
    tls: TlsSocketStream | trio.SSLStream
    if isinstance(stream, trio.SocketStream):
        tls = TlsSocketStream.wrap(stream, ctx, server_side)  # the fast path, see tom.net.tlsstream
    else:
        tls = trio.SSLStream(stream, ctx, server_side=server_side)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as e:
        await trio.aclose_forcefully(tls)
        raise Rejected("tls", f"TLS handshake failed: {_tls_reason(e)}") from None
    except BaseException:
        await trio.aclose_forcefully(tls)
        raise
    return tls, cert_pid(tls.getpeercert() or {})


async def _first_bytes(stream: trio.abc.Stream) -> tuple[bytes, trio.abc.Stream]:
    """The first bytes the other side sent, and a stream that will deliver them again."""
    if isinstance(stream, trio.SocketStream):
        return await stream.socket.recv(8, socket.MSG_PEEK), stream  # left in the socket
    first = await stream.receive_some(4096)
    return first, Replay(stream, first)


async def _refuse(stream: trio.abc.Stream) -> None:
    """Send TLS_REQUIRED and the end of our side, then read (bounded: 1 s, 64 KiB) what the other side
    sent: closing a socket with unread data resets it, and the reset could destroy our line unread."""
    try:
        with trio.move_on_after(1.0):
            await stream.send_all(TLS_REQUIRED)
            if isinstance(stream, trio.abc.HalfCloseableStream):
                await stream.send_eof()
            got = 0
            while got < 65536 and (data := await stream.receive_some(16384)):
                got += len(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass


async def expect(reader: LineReader, cls: type):
    """The next handshake line as a frame of type ``cls``: RefusedError for a REFUSED, PlaintextRefused
    for a secured peer's refusal of plaintext, Rejected for anything else."""
    raw = await reader.line()
    if raw.startswith(TLS_REQUIRED[:16]):
        raise PlaintextRefused("the group is secured: its peers accept TLS connections only; "
                               "start this peer with --keys DIR (see tom keys)")
    frame = decode_line(raw)
    if type(frame) is Refused:
        raise RefusedError(frame.reason)
    if type(frame) is not cls:
        raise Rejected("frame", f"expected {cls.__name__.upper()}, got {raw[:60]!r}")
    return frame


def hello_bytes(pid: str, incarnation: int, order: str = "lamport") -> bytes:
    return encode_frame(Hello(pid, incarnation, order, wire_of(order)))


def resume_bytes(count: int) -> bytes:
    return encode_frame(Resume(count))


async def accept(stream: trio.abc.Stream, me: str, incarnation: int, links: dict[str, Link],
                 keys: GroupKeys | None, order: str = "lamport") -> tuple[Link, trio.abc.Stream, LineReader, int]:
    """The listener's side (see the module docstring): return the link, the (TLS) stream, its reader and
    how many of our frames the neighbor has. Raises Rejected (or FrameError) on anything else."""
    first, stream = await _first_bytes(stream)
    if not first:
        raise Rejected("closed", "connection closed during the handshake")
    tls = looks_like_tls(first)
    named = None
    if keys is not None:
        if not tls:
            await _refuse(stream)
            raise Rejected("plaintext", "plaintext connection refused (this peer accepts TLS only)")
        stream, named = await _tls(stream, keys, server_side=True)
    elif tls:
        raise TlsNotConfigured("tls", "a TLS handshake: the group is secured but this peer runs without --keys")
    try:
        return await _accept_hello(stream, named, me, incarnation, links, keys is not None, order)
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise


async def _accept_hello(stream: trio.abc.Stream, named: str | None, me: str, incarnation: int,
                        links: dict[str, Link], secured: bool, order: str
                        ) -> tuple[Link, trio.abc.Stream, LineReader, int]:
    if secured and named is None:
        raise Rejected("tls", "the certificate names no TOM peer")
    reader = LineReader(stream)
    hello = await expect(reader, Hello)
    if secured and hello.pid != named:
        raise Rejected("identity", f"HELLO as {hello.pid} with the certificate of {named}")
    link = links.get(hello.pid)
    if link is not None and pid_key(hello.pid) > pid_key(me):  # a knock: this peer dials it
        link.knock()
        with trio.move_on_after(1):
            await stream.send_all(encode_frame(Refused(f"{me} dials {hello.pid}: knocked")))
        raise Knocked("knock", f"{hello.pid} knocked")
    if link is None or pid_key(hello.pid) >= pid_key(me):
        if link is None:
            why = f"{hello.pid} is not in {me}'s neighbors file"
        else:
            why = f"{me} dials {hello.pid}, not the other way round (do the neighbors files differ?)"
        with trio.move_on_after(1):
            await stream.send_all(encode_frame(Refused(why)))
        raise Rejected(f"refused {hello.pid}", f"refused {hello.pid}: {why}")  # logged per pid
    refused = mismatch(hello.pid, hello, order)
    if refused is not None:
        link.mismatch = str(refused)
        if isinstance(refused, WireMismatch):
            why = f"{me} speaks wire protocol v{wire_of(order)} of the {order} order, {hello.pid} v{hello.wire}"
        else:
            why = f"{me} runs the {order} order, {hello.pid} the {hello.order} order"
        with trio.move_on_after(1):
            await stream.send_all(hello_bytes(me, incarnation, order) + encode_frame(Refused(why)))
        raise refused
    old = link.stream
    if old is not None:  # the neighbor reconnected (authenticated, when secured): the new one wins
        link.detach(old)
        await trio.aclose_forcefully(old)
        logging.getLogger("tom.net.listener").info("%s: replaced an older connection", hello.pid)
    mine = link.meet(hello.incarnation)
    await stream.send_all(hello_bytes(me, incarnation, order) + resume_bytes(mine))
    resume = await expect(reader, Resume)
    return link, stream, reader, resume.count


async def knock(stream: trio.abc.Stream, link: Link, me: str, incarnation: int,
                keys: GroupKeys | None, order: str = "lamport") -> None:
    """The knocker's side (see the module docstring): our HELLO to a smaller neighbor, which dials us
    then; returns once it answered (or closed)."""
    named = None
    if keys is not None:
        stream, named = await _tls(stream, keys, server_side=False)
    if keys is not None and named != link.pid:
        raise Rejected("identity", f"answered with the certificate of {named or 'no TOM peer'}")
    await stream.send_all(hello_bytes(me, incarnation, order))
    await LineReader(stream).line()


async def connect(stream: trio.abc.Stream, link: Link, me: str, incarnation: int,
                  keys: GroupKeys | None, order: str = "lamport") -> tuple[trio.abc.Stream, LineReader, int]:
    """The dialler's side: return the (TLS) stream, its reader and how many of our frames the neighbor
    has. Raises Rejected (or FrameError) on a failed handshake, PlaintextRefused if we need keys."""
    named = None
    if keys is not None:
        stream, named = await _tls(stream, keys, server_side=False)
    try:
        return await _connect_hello(stream, named, link, me, incarnation, keys is not None, order)
    except BaseException:
        await trio.aclose_forcefully(stream)
        raise


async def _connect_hello(stream: trio.abc.Stream, named: str | None, link: Link, me: str, incarnation: int,
                         secured: bool, order: str) -> tuple[trio.abc.Stream, LineReader, int]:
    if secured and named != link.pid:
        raise Rejected("identity", f"answered with the certificate of {named or 'no TOM peer'}")
    reader = LineReader(stream)
    await stream.send_all(hello_bytes(me, incarnation, order))
    hello = await expect(reader, Hello)
    if hello.pid != link.pid:
        raise Rejected("identity", f"answered as {hello.pid}")
    refused = mismatch(link.pid, hello, order)
    if refused is not None:
        link.mismatch = str(refused)
        raise refused
    mine = link.meet(hello.incarnation)
    await stream.send_all(resume_bytes(mine))
    resume = await expect(reader, Resume)
    return stream, reader, resume.count
