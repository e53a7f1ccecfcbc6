"""Typed frames and their wire codec.

A frame is one UTF-8 line on a TCP link, fields separated by ``-``, free text last. The course tool's
frames are the baseline and are accepted unchanged:

    MESSAGE-<clock>-<host:port>-<text>          a multicast, stamped with the origin's Lamport clock
    ACK-<clock>-<host:port>                     the sender of the ACK has the message (clock, pid)

TOM adds:

    MESSAGE@<sent_at>-<clock>-<pid>-<text>      the same, with the origin's send time (Unix seconds)
    HELLO-<pid>-<incarnation>                   first frame on a new connection: who is speaking

In ``text`` a backslash, a newline and a carriage return travel as ``\\\\``, ``\\n`` and ``\\r``, so a
frame never spans lines; `parse_frame(format_frame(f)) == f` for every valid frame. The acker of an
ACK is not in the frame: it is the peer named by the connection's HELLO.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import FrameError

MAX_FRAME_BYTES = 65536
"""Longest line accepted from the network, newline excluded."""
MAX_TEXT_CHARS = 16384
"""Longest message text a peer may send (escaping can at most double it; still under the frame limit)."""

_PID = re.compile(r"(?:\[[0-9a-f:.]+\]|[a-z0-9._-]+):(?:[1-9][0-9]{0,4})\Z")


_VALID_PIDS: set[str] = set()  # pids already checked: a peer sees few, and checks them per frame


def _check_pid(pid: str) -> None:
    if pid in _VALID_PIDS:
        return
    if type(pid) is not str or not _PID.match(pid) or int(pid.rpartition(":")[2]) > 65535:
        raise FrameError(f"bad pid {pid!r}")
    if len(_VALID_PIDS) < 4096:
        _VALID_PIDS.add(pid)


MAX_CLOCK = 2**63 - 1


def _check_clock(clock: int) -> None:
    if type(clock) is not int or not 0 <= clock <= MAX_CLOCK:
        raise FrameError(f"bad clock {clock!r}")


@dataclass(frozen=True, slots=True)
class Frame:
    """Base of all frames."""


@dataclass(frozen=True, slots=True)
class Message(Frame):
    """A multicast ``text`` sent by ``pid`` at Lamport time ``clock`` (wall time ``sent_at``, if known)."""

    clock: int
    pid: str
    text: str
    sent_at: float | None = None

    def __post_init__(self) -> None:
        _check_clock(self.clock)
        _check_pid(self.pid)
        if type(self.text) is not str:
            raise FrameError("text must be a string")
        if len(self.text) > MAX_TEXT_CHARS:
            raise FrameError(f"text of {len(self.text)} characters is over the limit of {MAX_TEXT_CHARS}")
        if self.sent_at is not None:
            # microseconds are kept, so that the decimal wire form round-trips exactly
            object.__setattr__(self, "sent_at", round(float(self.sent_at), 6))

    @property
    def key(self) -> tuple[int, str]:
        return (self.clock, self.pid)


@dataclass(frozen=True, slots=True)
class Ack(Frame):
    """The sending peer holds the message ``(clock, pid)``."""

    clock: int
    pid: str

    def __post_init__(self) -> None:
        _check_clock(self.clock)
        _check_pid(self.pid)

    @property
    def key(self) -> tuple[int, str]:
        return (self.clock, self.pid)


@dataclass(frozen=True, slots=True)
class Hello(Frame):
    """Opens a connection: the speaker is ``pid``, running as ``incarnation`` (new at each start)."""

    pid: str
    incarnation: int

    def __post_init__(self) -> None:
        _check_pid(self.pid)
        if type(self.incarnation) is not int or self.incarnation < 0:
            raise FrameError(f"bad incarnation {self.incarnation!r}")


# -- text escaping -------------------------------------------------------------------------------

_UNESCAPE = {"\\\\": "\\", "\\n": "\n", "\\r": "\r"}
_ESCAPED = re.compile(r"\\(.?)", re.S)


def escape_text(text: str) -> str:
    """Make ``text`` fit on one line; `unescape_text` inverts it."""
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\n" in text:
        text = text.replace("\n", "\\n")
    if "\r" in text:
        text = text.replace("\r", "\\r")
    return text


def _unescape_one(m: re.Match[str]) -> str:
    try:
        return _UNESCAPE[m.group(0)]
    except KeyError:
        raise FrameError(f"bad escape {m.group(0)!r} in text") from None


def unescape_text(wire: str) -> str:
    """Restore text escaped by `escape_text`; raise FrameError on an unknown escape."""
    if "\\" not in wire:
        return wire
    return _ESCAPED.sub(_unescape_one, wire)


# -- codec ---------------------------------------------------------------------------------------


def format_frame(frame: Frame) -> str:
    """The wire form of ``frame``, without the newline."""
    t = type(frame)
    if t is Ack:
        return f"ACK-{frame.clock}-{frame.pid}"  # type: ignore[attr-defined]
    if t is Message:
        m: Message = frame  # type: ignore[assignment]
        head = "MESSAGE" if m.sent_at is None else f"MESSAGE@{m.sent_at:.6f}"
        return f"{head}-{m.clock}-{m.pid}-{escape_text(m.text)}"
    if t is Hello:
        h: Hello = frame  # type: ignore[assignment]
        return f"HELLO-{h.pid}-{h.incarnation}"
    raise TypeError(f"not a frame: {frame!r}")


def encode_frame(frame: Frame) -> bytes:
    """The wire bytes of ``frame``, newline included."""
    return (format_frame(frame) + "\n").encode()


def _int(field: str, what: str) -> int:
    if not field.isdigit() or not field.isascii() or (len(field) > 1 and field[0] == "0") or len(field) > 19:
        raise FrameError(f"bad {what} {field!r}")
    return int(field)


def _split_pid(rest: str) -> tuple[str, str]:
    """Split ``<pid>-<tail>`` where the pid may itself hold ``-`` (host names) or ``:`` (IPv6)."""
    start = rest.find("]") if rest.startswith("[") else 0
    colon = rest.find(":", max(start, 0))
    dash = rest.find("-", colon) if colon >= 0 else -1
    if colon < 0 or dash < 0:
        raise FrameError("missing host:port")
    return rest[:dash], rest[dash + 1 :]


def parse_frame(line: str) -> Frame:
    """Parse one line (without its newline) into a Frame; raise FrameError if it is not one."""
    if len(line) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(line)} characters is over the limit")
    kind, sep, rest = line.partition("-")
    if not sep:
        raise FrameError(f"not a frame: {line[:60]!r}")
    try:
        if kind == "ACK":
            clock, sep, pid = rest.partition("-")
            if not sep:
                raise FrameError("ACK needs clock and pid")
            return Ack(_int(clock, "clock"), pid)
        if kind == "MESSAGE" or kind.startswith("MESSAGE@"):
            sent_at = None
            if kind != "MESSAGE":
                stamp = kind[8:]
                if not stamp.replace(".", "", 1).isdigit() or not stamp.isascii():
                    raise FrameError(f"bad send time {stamp[:30]!r}")
                sent_at = float(stamp)
                if not sent_at < 1e11:
                    raise FrameError(f"bad send time {kind[8:]!r}")
            clock, sep, rest = rest.partition("-")
            if not sep:
                raise FrameError("MESSAGE needs clock, pid and text")
            pid, text = _split_pid(rest)
            return Message(_int(clock, "clock"), pid, unescape_text(text), sent_at)
        if kind == "HELLO":
            pid, inc = rest.rsplit("-", 1) if "-" in rest else (rest, "")
            return Hello(pid, _int(inc, "incarnation"))
    except FrameError as e:
        raise FrameError(f"{e} in {line[:80]!r}") from None
    raise FrameError(f"unknown frame kind {kind[:20]!r}")
