"""The handout's wire (SE424 TOM handout, section 3 and 6.1): its frames, parsed and formatted.

One frame is one UTF-8 line::

    MESSAGE-<clock>-<from>-<text>     a multicast; <text> is raw (no escaping, no line break)
    ACK-<clock>-<from>                acknowledges the message (clock, from); names no acker
    JOIN-<clock>-<from>               --dynamic: <from> is in the group from <clock> on
    LEAVE-<clock>-<from>              --dynamic: <from> leaves
    HEARTBEAT-<clock>-<from>          --dynamic: <from> is alive (sent every second)

``<from>`` is what the sender writes for itself, in any of the forms Java prints an address:
``localhost/127.0.0.1:5003`` (``InetAddress.toString()`` with a host name), ``/127.0.0.1:5003`` or
``127.0.0.1:5003``. It ends at the first ``:<digits>-`` after the clock, so a host may hold ``-`` and
``/``; in the one-field frames it is the rest of the line.

Invariants: ``parse_line(format_frame(f)) == f`` for every frame; a frame keeps ``from`` byte for
byte (an ACK echoes the acknowledged message's ``from`` as written, and handout tools match ACKs by
that exact string); two frames' order key is ``(clock, from as written)`` compared as strings, as a
Java tool's ``String.compareTo`` does (for the ASCII of addresses Python's ``<`` is the same).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ConfigError, FrameError
from .pid import parse_pid

MAX_LINE_BYTES = 1 << 20
"""A line longer than this is not a handout frame (a Java tool has no limit; TOM needs one)."""

MAX_CLOCK = (1 << 63) - 1  # a Java long

_MESSAGE = re.compile(r"MESSAGE-(\d{1,19})-(.+?:\d{1,5})-(.*)\Z", re.DOTALL)
_ONE_FIELD = re.compile(r"(ACK|JOIN|LEAVE|HEARTBEAT)-(\d{1,19})-(.+?:\d{1,5})\Z", re.DOTALL)


@dataclass(frozen=True, slots=True)
class HandoutFrame:
    """A frame of the handout's wire: a clock and a ``from`` as written."""

    clock: int
    origin: str  # the <from> field, as written

    def __post_init__(self) -> None:
        if type(self.clock) is not int or not 0 <= self.clock <= MAX_CLOCK:
            raise FrameError(f"bad clock {self.clock!r}")
        if not _from_ok(self.origin):
            raise FrameError(f"bad from {self.origin!r}: expected [NAME]/IP:PORT or IP:PORT")

    @property
    def key(self) -> tuple[int, str]:
        """The order key ``(clock, from as written)``."""
        return (self.clock, self.origin)


@dataclass(frozen=True, slots=True)
class HMessage(HandoutFrame):
    text: str

    def __post_init__(self) -> None:
        HandoutFrame.__post_init__(self)
        if "\n" in self.text or "\r" in self.text:
            raise FrameError("a text with a line break cannot travel on the handout's wire")


@dataclass(frozen=True, slots=True)
class HAck(HandoutFrame):
    """Acknowledges the message ``(clock, origin)``."""


@dataclass(frozen=True, slots=True)
class HJoin(HandoutFrame):
    """``origin`` is a member from ``clock`` on (its join clock: every JOIN it sends names the same)."""


@dataclass(frozen=True, slots=True)
class HLeave(HandoutFrame):
    """``origin`` leaves the group."""


@dataclass(frozen=True, slots=True)
class HHeartbeat(HandoutFrame):
    """``origin`` is alive; ``clock`` is its clock now."""


_TAGS: dict[str, type[HandoutFrame]] = {"ACK": HAck, "JOIN": HJoin, "LEAVE": HLeave, "HEARTBEAT": HHeartbeat}
_NAMES = {cls: tag for tag, cls in _TAGS.items()}
_NAMES[HMessage] = "MESSAGE"


def _from_ok(origin: object) -> bool:
    if type(origin) is not str or not origin or "\n" in origin or "\r" in origin:
        return False
    _, sep, port = origin.rpartition(":")
    return bool(sep) and port.isdigit() and 0 < int(port) < 65536 and not origin.startswith(":")


def format_frame(frame: HandoutFrame) -> str:
    """The frame's line, without its ``\\n``."""
    if type(frame) is HMessage:
        return f"MESSAGE-{frame.clock}-{frame.origin}-{frame.text}"
    return f"{_NAMES[type(frame)]}-{frame.clock}-{frame.origin}"


def parse_line(line: str) -> HandoutFrame:
    """One line (its ``\\n``, and the ``\\r`` of a CRLF ending, already cut off) -> a frame; FrameError
    naming what is wrong otherwise."""
    if line.startswith("MESSAGE-"):
        m = _MESSAGE.match(line)
        if m is None:
            raise FrameError("not a handout MESSAGE (expected MESSAGE-<clock>-<from>-<text>)")
        return HMessage(int(m[1]), m[2], m[3])
    m = _ONE_FIELD.match(line)
    if m is None:
        tag = line.partition("-")[0]
        if tag in _TAGS:
            raise FrameError(f"not a handout {tag} (expected {tag}-<clock>-<from>)")
        raise FrameError("not a handout frame (MESSAGE, ACK, JOIN, LEAVE or HEARTBEAT)")
    return _TAGS[m[1]](int(m[2]), m[3])


def origin_pid(origin: str) -> str | None:
    """The ``host:port`` a ``from`` names, for membership and the output's ``pid``: the part after the
    last ``/`` (Java's ``name/ip``), canonical (`tom.codec.pid.parse_pid`); ``localhost`` is ``127.0.0.1``.
    None if it names no valid address."""
    tail = origin.rpartition("/")[2]
    try:
        pid = parse_pid(tail)
    except ConfigError:
        return None
    return "127.0.0.1" + pid[len("localhost"):] if pid.startswith("localhost:") else pid


def java_from(host: str, port: int, name: str | None = None) -> str:
    """What a Java handout tool listening on ``host`` writes as its ``from``: ``InetAddress.toString()``
    then ``:port`` — ``localhost/127.0.0.1:PORT`` on 127.0.0.1, ``/IP:PORT`` on any other address;
    ``name`` (``--name``) is written as given (with ``:PORT`` added unless it has one)."""
    if name:
        written = name if re.search(r":\d+\Z", name) else f"{name}:{port}"
    elif host == "127.0.0.1":
        written = f"localhost/127.0.0.1:{port}"
    else:
        written = f"/{host}:{port}"
    if not _from_ok(written) or "\n" in written:
        raise ConfigError(f"cannot write {written!r} as a handout 'from'")
    return written
