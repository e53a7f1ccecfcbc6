"""Typed frames and their wire codec.

A frame is one UTF-8 line on a TCP link, fields separated by ``-``, free text last. The course tool's
frames are the baseline and are accepted unchanged:

    MESSAGE-<clock>-<host:port>-<text>          a multicast, stamped with the origin's Lamport clock
    ACK-<clock>-<host:port>                     the sender of the ACK has the message (clock, pid)

TOM adds:

    MESSAGE@<sent_at>-<clock>-<pid>-<text>      the same, with the origin's send time (Unix seconds)
    ACKS-<clock>,<clock>,...-<pid>              several ACKs of one origin's messages in one line:
                                                exactly one ACK per clock, in that order
    HELLO-<pid>-<incarnation>[-<order>]         first frame on a new connection: who is speaking, and
                                                the order its group runs (absent: lamport); wire v3
                                                (runs, below) is announced as ``<order>runs``
    MARKS-<c1>,<c2>,...                         wire v2, a cumulative ACK: for the k-th member of the
                                                view (pid order), the sender holds every message of it
                                                up to clock c_k that it received from that member
    MESSAGE@<sent_at>+<c1>,<c2>,...-<clock>-<pid>-<text>   (and CMESSAGE...+<marks>-...)
                                                wire v2: a message with the sender's MARKS riding on it
    MESSAGES@<sent_at>[+<marks>]-<clock>-<pid>-<n1>,<n2>,...-<texts>
                                                wire v3: a run, the sender's messages of one step at
                                                clocks <clock>, <clock>+1, ...: the texts one after the
                                                other, n_i characters each (a causal one: CMESSAGES,
                                                with the growing count and first vector after the pid)
    HEARTBEAT-<view>[-<count>-<digest>-<clock>-<pid>][ <group>]
                                                "I am alive, in view <view>" (0: not in a group yet),
                                                "delivered <count> messages in it, digest <crc32>, the
                                                last event I delivered is (<clock>, <pid>)"; a dynamic
                                                group's member names its group after a space
    REFUSED-<reason>                            last line on a connection the sender will not take
    RELAY[@<sent_at>]-<clock>-<pid>-<text>      a removed member's message, forwarded during a flush
    CMESSAGE[@<sent_at>]-<clock>-<pid>-<vc>-<text>, CRELAY[@<sent_at>]-<clock>-<pid>-<vc>-<text>
                                                the same in a causal group: <vc> is the message's
                                                vector timestamp, counts in the view's pid order
                                                joined by ``,``
    SEQ-<first>-<clock>,<clock>,...-<pid>       sequencer order: the messages (clock, pid) of one
                                                origin get the sequence numbers first, first+1, ...
    JOIN-<pid>-<incarnation>                    please add me to the group
    LEAVE-<pid>                                 please take me out of the group
    FLUSH-<view>-<attempt>-<coordinator>[-<clock>]
                                                marker: I sent everything I will send before <view>;
                                                my Lamport clock is <clock> (left out when 0)
    FLUSHED-<view>-<attempt>-<clock>            to the coordinator: my old view is fully delivered
    REMOVED-<view>[ <group>]                    you are not a member of my view <view> (of <group>)
    SUSPECT-<view>-<incarnation>-<since>-<pid>  to the coordinator: I have not heard member <pid>
                                                (<incarnation>) for <since> s (a shared suspicion); from
                                                the coordinator to a joiner (view 0): <pid> does not
                                                reach you
    SEES-<view>-<incarnation>-<pid>             to the coordinator: joiner <pid> (<incarnation>) asked me
                                                to join, on my own link to it
    RESUME-<count>, RECEIVED-<count>            link layer: frames received from you so far (this
                                                incarnation); on reconnect and every few hundred frames
    PROPOSE-<json>, INSTALL-<json>              a view change proposed, a view change decided
    PREPARE-<json>, PROMISE-<json>              a view change's phase 1: a ballot asked for, promised

In ``text`` a backslash, a newline and a carriage return travel as ``\\\\``, ``\\n`` and ``\\r``, so a
frame never spans lines; `parse_frame(format_frame(f)) == f` for every valid frame. The acker of an
ACK is not in the frame: it is the peer named by the connection's HELLO.

The codec is one table, `FRAME_KINDS`: for each kind its tags (the first field of its line), its class,
its format and its parse; `format_frame` and `parse_frame` are driven by it and by nothing else. A kind
may add a fast parse for its busiest form, which builds the frame without re-checking the fields it has
just read and returns None for any line it is not sure of; the kind's parse then decides (every check,
every error message). `tests/test_frames.py` holds each fast parse to its kind's parse.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Final, Generic, TypeVar
from zlib import crc32

from mypy_extensions import mypyc_attr

from ..errors import FrameError
from .pid import is_pid

__all__ = [
    "FRAME_KINDS", "LINK_WIRE", "MAX_CLOCK", "MAX_FRAME_BYTES", "MAX_MARKS", "MAX_RUN", "MAX_VC_CHARS",
    "WIRE_VERSION",
    "Ack", "Acks", "CatchUp", "Direct", "History", "Progress", "Flush", "Flushed", "Frame", "FrameError", "FrameKind", "Heartbeat", "Hello", "Install",
    "Join", "Leave", "Marks", "Message", "Messages", "Prepare", "Promise", "Propose", "Received", "Refused", "Relay", "Removed",
    "Resume", "Sees", "Seq", "Suspect", "delivery_digest", "encode_frame", "escape_text", "format_frame",
    "message_frame_bytes",
    "parse_frame", "trusted_ack", "trusted_acks", "trusted_marks", "trusted_message", "trusted_messages",
    "unescape_text",
    "wire_of",
]

MAX_FRAME_BYTES: Final = 65536
"""The one size limit: the longest frame, in bytes of its UTF-8 line without the newline. A sender
refuses a message whose frame could exceed it (`message_frame_bytes`, at any clock and send time);
a receiver takes a longer line on a member's link for a link fault."""

MAX_CLOCK: Final = 2**63 - 1
"""The largest clock, count or view number (a Java long, as the course's tools read them)."""

MAX_VC_CHARS: Final = 4096
"""Room a causal message's vector takes at most on the wire (`check_text` keeps it free): 256 members
with counts of up to 15 digits."""

MAX_MARKS: Final = 1024
"""The most members a MARKS frame (or a message's marks) may name: far above any group TOM runs."""

MAX_RUN: Final = 256
"""The most messages one MESSAGES line (a run, wire v3) holds."""

RUN_CHARS: Final = 16000
"""The most characters of text a sender puts in one run: escaped and in UTF-8 a character takes at
most four bytes, so a run's line stays under `MAX_FRAME_BYTES` (a sender that finds it over, with
very long marks, sends the messages one per line)."""

_MESSAGE_HEAD_MAX: Final = len("MESSAGE@") + len("99999999999.999999") + 1 + len(str(MAX_CLOCK)) + 1


# -- field checks (what every frame runs when built) ---------------------------------------------


@functools.lru_cache(maxsize=4096)
def _is_pid(pid: str) -> bool:
    """`is_pid`, remembered: a peer sees few pids, and checks one or more in every frame."""
    return is_pid(pid)


def _check_pid(pid: str) -> None:
    if type(pid) is not str or not _is_pid(pid):
        raise FrameError(f"bad pid {pid!r}")


def _check_clock(clock: int) -> None:
    if type(clock) is not int or not 0 <= clock <= MAX_CLOCK:
        raise FrameError(f"bad clock {clock!r}")


def _check_count(value: int, what: str) -> None:
    if type(value) is not int or not 0 <= value <= MAX_CLOCK:
        raise FrameError(f"bad {what} {value!r}")


def _check_vc(vc: tuple[int, ...]) -> None:
    if type(vc) is not tuple or not vc:
        raise FrameError(f"bad vector timestamp {vc!r}")
    for count in vc:
        if type(count) is not int or not 0 <= count <= MAX_CLOCK:
            raise FrameError(f"bad vector timestamp {vc!r}")


def _check_marks(marks: tuple[int, ...]) -> None:
    if type(marks) is not tuple or not 1 <= len(marks) <= MAX_MARKS:
        raise FrameError("bad marks: one clock per member of the view")
    for clock in marks:
        if type(clock) is not int or not 0 <= clock <= MAX_CLOCK:
            raise FrameError(f"bad mark {clock!r}")


def _check_text_frame(frame: Message | Relay) -> None:
    """The fields a message and a relay share. ``sent_at`` is set to whole microseconds, so that its
    decimal wire form round-trips exactly, and must be one the wire can carry (0 <= sent_at < 1e11)."""
    _check_clock(frame.clock)
    _check_pid(frame.pid)
    if frame.vc is not None:
        _check_vc(frame.vc)
    if type(frame.text) is not str:
        raise FrameError("text must be a string")
    if len(frame.text) > MAX_FRAME_BYTES:  # a cheap bound (a character is at least a byte)
        raise FrameError(f"text of {len(frame.text)} characters is over the frame limit of {MAX_FRAME_BYTES} bytes")
    _check_sent_at(frame)


def _check_sent_at(frame: Message | Relay | Messages) -> None:
    """``sent_at`` (if any) set to whole microseconds, so that its decimal wire form round-trips
    exactly; one the wire can carry (0 <= sent_at < 1e11)."""
    if frame.sent_at is not None:
        if type(frame.sent_at) is not float and type(frame.sent_at) is not int:
            raise FrameError(f"bad send time {frame.sent_at!r}")
        sent_at = round(frame.sent_at, 6) + 0.0  # (+ 0.0: -0.0 would be written -0.000000)
        if not 0 <= sent_at < 1e11:  # (NaN too)
            raise FrameError(f"bad send time {frame.sent_at!r}")
        object.__setattr__(frame, "sent_at", sent_at)


def _check_members(members: tuple[tuple[str, int], ...], what: str) -> None:
    if type(members) is not tuple:
        raise FrameError(f"{what} must be a tuple")
    for item in members:
        if type(item) is not tuple or len(item) != 2:
            raise FrameError(f"bad {what} entry {item!r}")
        _check_pid(item[0])
        _check_count(item[1], "incarnation")


def _check_group(group: str) -> None:
    if type(group) is not str or len(group) > 200 or "\n" in group:
        raise FrameError(f"bad group {group!r}")


# -- the frames ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """Base of all frames."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied and pickled as its class and field values (`_rebuild`): the compiled build's own
        way sets the fields of a frozen frame with setattr, which a frozen dataclass refuses."""
        return _rebuild, (type(self), tuple(getattr(self, f.name) for f in fields(self)))


@dataclass(frozen=True, slots=True)
class Message(Frame):
    """A multicast ``text`` sent by ``pid`` at Lamport time ``clock`` (wall time ``sent_at``, if known)."""

    clock: int
    pid: str
    text: str
    sent_at: float | None = None
    vc: tuple[int, ...] | None = None  # causal order: the vector timestamp (counts in the view's pid order)
    marks: tuple[int, ...] | None = None  # wire v2: the sender's cumulative ACKs riding on it (`Marks`)

    def __post_init__(self) -> None:
        _check_text_frame(self)
        if self.marks is not None:
            _check_marks(self.marks)

    @property
    def key(self) -> tuple[int, str]:
        return (self.clock, self.pid)


@dataclass(frozen=True, slots=True)
class Relay(Frame):
    """A message of (removed) member ``pid``, forwarded by a survivor during a flush."""

    clock: int
    pid: str
    text: str
    sent_at: float | None = None
    vc: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _check_text_frame(self)

    @property
    def key(self) -> tuple[int, str]:
        return (self.clock, self.pid)


@dataclass(frozen=True, slots=True)
class Messages(Frame):
    """A run of member ``pid``'s messages sent in one step (wire v3): ``texts[i]`` at Lamport time
    ``clock + i``, every one sent at ``sent_at``; ``marks`` ride on the last. One line on the wire for
    what would be ``len(texts)`` MESSAGE lines; a receiver takes it as those messages, in order
    (`messages`), so the core never sees a run. In a causal group the first message's vector is
    ``vc`` and each next one's is the one before with count ``grows`` one higher (the sender's own
    count: nothing was delivered between them)."""

    clock: int
    pid: str
    texts: tuple[str, ...]
    sent_at: float | None = None
    marks: tuple[int, ...] | None = None
    vc: tuple[int, ...] | None = None
    grows: int = 0

    def __post_init__(self) -> None:
        _check_clock(self.clock)
        _check_pid(self.pid)
        texts = self.texts
        if type(texts) is not tuple or not 2 <= len(texts) <= MAX_RUN:
            raise FrameError(f"a run holds 2 to {MAX_RUN} texts")
        if self.clock + len(texts) - 1 > MAX_CLOCK:
            raise FrameError(f"bad clock {self.clock!r} for a run of {len(texts)}")
        size = 0
        for text in texts:
            if type(text) is not str:
                raise FrameError("text must be a string")
            size += len(text)
        if size > MAX_FRAME_BYTES:  # a cheap bound (a character is at least a byte)
            raise FrameError(f"texts of {size} characters are over the frame limit of {MAX_FRAME_BYTES} bytes")
        _check_sent_at(self)
        if self.marks is not None:
            _check_marks(self.marks)
        if self.vc is not None:
            _check_vc(self.vc)
            if type(self.grows) is not int or not 0 <= self.grows < len(self.vc):
                raise FrameError(f"bad growing count {self.grows!r} for a vector of {len(self.vc)}")
            if self.vc[self.grows] + len(texts) - 1 > MAX_CLOCK:
                raise FrameError(f"bad vector timestamp {self.vc!r} for a run of {len(texts)}")
        elif self.grows != 0:
            raise FrameError("a growing count without a vector")

    def messages(self) -> list[Message]:
        """The messages the run stands for, in order (the marks on the last)."""
        clock, pid, sent_at, first = self.clock, self.pid, self.sent_at, self.vc
        last = len(self.texts) - 1
        if first is None:
            return [trusted_message(clock + i, pid, text, sent_at, None, self.marks if i == last else None)
                    for i, text in enumerate(self.texts)]
        grows, counts = self.grows, list(first)
        out: list[Message] = []
        for i, text in enumerate(self.texts):
            out.append(trusted_message(clock + i, pid, text, sent_at, tuple(counts), self.marks if i == last else None))
            counts[grows] += 1
        return out


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
class Acks(Frame):
    """The sending peer holds the messages ``(c, pid)`` for each ``c`` in ``clocks`` (two or more; one
    is a plain `Ack`): what a peer sends when it acknowledges a run of messages at once."""

    clocks: tuple[int, ...]
    pid: str

    def __post_init__(self) -> None:
        if type(self.clocks) is not tuple or len(self.clocks) < 2:
            raise FrameError("ACKS needs two clocks or more")
        for clock in self.clocks:
            _check_clock(clock)
        _check_pid(self.pid)


@dataclass(frozen=True, slots=True)
class Marks(Frame):
    """Wire v2's cumulative ACK: for the k-th member of the sender's view (pid order), the sender holds
    every message of that member up to clock ``marks[k]`` that it received from that member itself
    (0: none). Links are FIFO and a member's clock only grows, so one mark covers all of an origin's
    earlier messages; the receiver derives from it who holds which message (`tom.core.marks`). The
    same marks may ride on a message instead (`Message.marks`)."""

    marks: tuple[int, ...]

    def __post_init__(self) -> None:
        _check_marks(self.marks)


@dataclass(frozen=True, slots=True)
class Seq(Frame):
    """Sequencer order: the messages ``(c, pid)`` for ``c`` in ``clocks`` get the sequence numbers
    ``first``, ``first + 1``, ... of the view (sent by the view's sequencer, or relayed in a flush)."""

    first: int
    clocks: tuple[int, ...]
    pid: str

    def __post_init__(self) -> None:
        _check_count(self.first, "sequence number")
        if self.first < 1:
            raise FrameError("sequence numbers start at 1")
        if type(self.clocks) is not tuple or not self.clocks:
            raise FrameError("SEQ needs a clock or more")
        for clock in self.clocks:
            _check_clock(clock)
        _check_pid(self.pid)


_ORDER_WORD: Final = re.compile(r"[a-z]{1,20}")
_WIRE_WORDS: Final = {2: "cumulative", 3: "runs"}  # what follows the order word in a HELLO, per wire


@dataclass(frozen=True, slots=True)
class Hello(Frame):
    """Opens a connection: the speaker is ``pid``, running as ``incarnation`` (new at each start), in a
    group that runs ``order`` (a lowercase word, e.g. ``sequencer``; the handshake compares it with its
    own) with wire protocol ``wire``. ``lamport`` is not written on the wire, so the course's plain
    HELLO stays what it was; wires 2 and 3 are written as the order word followed by ``cumulative``
    or ``runs`` (so a peer of an older TOM reads another order and refuses in one line)."""

    pid: str
    incarnation: int
    order: str = "lamport"
    wire: int = 1

    def __post_init__(self) -> None:
        _check_pid(self.pid)
        if type(self.incarnation) is not int or self.incarnation < 0:
            raise FrameError(f"bad incarnation {self.incarnation!r}")
        if (type(self.order) is not str or not _ORDER_WORD.fullmatch(self.order)
                or any(self.order.endswith(word) for word in _WIRE_WORDS.values())):
            raise FrameError(f"bad order {str(self.order)[:30]!r}")
        if self.wire not in (1, 2, 3):
            raise FrameError(f"bad wire version {self.wire!r}")


WIRE_VERSION: Final = 2
"""How the members of a group whose order acknowledges messages (lamport, causal) acknowledge: by
cumulative ACKs (`Marks`), riding on messages (`tom.core.Core`'s ``wire``; 1: an ACK per message)."""

LINK_WIRE: Final = 3
"""The wire protocol this TOM's links speak, what HELLO announces and the handshake compares: v2's
cumulative ACKs (orders with ACKs), and a step's messages of one member as one line (`Messages`,
every order). v1: the course's frames and per-message ACKs; v2: cumulative ACKs, no runs."""


def wire_of(order: str) -> int:
    """The wire version a link of a group of ``order`` speaks (what HELLO announces and the handshake
    compares): `LINK_WIRE` for every order."""
    return LINK_WIRE


@dataclass(frozen=True, slots=True)
class Heartbeat(Frame):
    """The sender is alive and has view ``view`` installed (0: not a member of any group yet).

    With a digest: the sender has delivered ``count`` messages in that view, ``digest`` is the CRC-32
    chain of their keys and texts (`delivery_digest`), and ``last`` the key ``(clock, pid)`` of the last
    event it delivered; peers compare them with their own to notice a divergence. ``count`` is None
    (and ``last`` too) in the plain ``HEARTBEAT-<view>``. ``group``: the group the view belongs to
    (`View.group`, e.g. ``127.0.0.1:5000/1``; a view is ``(group, view)``, never a bare number), empty
    in a static group and outside any group — the handout's wire.
    """

    view: int
    count: int | None = None
    digest: int = 0
    last: tuple[int, str] | None = None
    group: str = ""

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_group(self.group)
        if self.count is not None:
            _check_count(self.count, "count")
        if type(self.digest) is not int or not 0 <= self.digest <= 0xFFFFFFFF:
            raise FrameError(f"bad digest {self.digest!r}")
        if (self.count is None) != (self.last is None):
            raise FrameError("a heartbeat's digest needs its last key, and the other way round")
        if self.last is not None:
            if type(self.last) is not tuple or len(self.last) != 2:
                raise FrameError(f"bad last key {self.last!r}")
            _check_clock(self.last[0])
            _check_pid(self.last[1])


def delivery_digest(previous: int, clock: int, pid: str, text: str) -> int:
    """The running digest after delivering message ``(clock, pid, text)``: CRC-32 over its key and
    text, chained on ``previous`` (0 at the start of a view). Cheap and the same on every peer that
    delivers the same sequence; a check against accidents (a divergence), not against forgery."""
    return crc32(f"{clock}-{pid}-{text}".encode(), previous)


@dataclass(frozen=True, slots=True)
class Refused(Frame):
    """The last frame on a connection the sender will not take: ``reason`` says why, for its user
    (e.g. the dialler is not in the sender's neighbors file)."""

    reason: str

    def __post_init__(self) -> None:
        if type(self.reason) is not str or len(self.reason) > 1000:
            raise FrameError("bad refusal reason")


@dataclass(frozen=True, slots=True)
class Direct(Frame):
    """The program's ``text`` for the one member this link leads to, outside the group's order (FIFO on
    its link like every frame): what `tom.Replicated` sends a joiner its state in."""

    text: str

    def __post_init__(self) -> None:
        if type(self.text) is not str or len(self.text) > MAX_FRAME_BYTES:
            raise FrameError("a direct text is a str that fits in a frame")


@dataclass(frozen=True, slots=True)
class CatchUp(Frame):
    """A durable peer admitted again asks a member for the group's events it missed: those after
    message ``count`` of view ``view`` (``count`` 0: right after the view's record), up to view
    ``upto``'s record, which it delivers itself (`tom.durable.catchup`)."""

    view: int
    count: int
    upto: int

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_count(self.count, "count")
        _check_count(self.upto, "view")


HISTORY_STATUS: Final = ("more", "end", "none")
"""A `History` frame's status: more records follow; the last records (the catch-up is complete); the
sender does not hold what was asked (ask another member)."""


@dataclass(frozen=True, slots=True)
class History(Frame):
    """An answer to `CatchUp`: ``records``, the group's delivered events in its order, each the JSON of
    an output record (docs/output-format.md), whether more follow (``status``), and how many the whole
    answer holds (``total``)."""

    status: str
    total: int = 0
    records: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_count(self.total, "total")
        if self.status not in HISTORY_STATUS:
            raise FrameError(f"bad history status {self.status!r}")
        if type(self.records) is not tuple or any(type(r) is not str for r in self.records):
            raise FrameError("history records are JSON texts")


@dataclass(frozen=True, slots=True)
class Progress(Frame):
    """A durable peer tells the members of its view how far its history goes on its disk: to message
    ``count`` of view ``view`` (``count`` 0: the view's record); ``view`` 0 (``PROGRESS-none``): the
    sender keeps no history, so it never asks for any (`tom.durable.progress`)."""

    view: int = 0
    count: int = 0

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_count(self.count, "count")


def _format_progress(p: Progress) -> str:
    return f"PROGRESS-{p.view}-{p.count}" if p.view else "PROGRESS-none"


def _parse_progress(head: str, rest: str) -> Progress:
    if rest == "none":
        return Progress()
    parts = rest.split("-")
    if len(parts) != 2:
        raise FrameError("PROGRESS takes a view and a count, or none")
    view = _int(parts[0], "view")
    if view == 0:
        raise FrameError("PROGRESS of view 0: say none")
    return Progress(view, _int(parts[1], "count"))


def _parse_catch_up(head: str, rest: str) -> CatchUp:
    parts = rest.split("-")
    if len(parts) != 3:
        raise FrameError("CATCHUP takes a view, a count and a view")
    return CatchUp(_int(parts[0], "view"), _int(parts[1], "count"), _int(parts[2], "view"))


def _parse_history(head: str, rest: str) -> History:
    status, _, rest = rest.partition("-")
    total, _, body = rest.partition("-")
    try:
        records = json.loads(body) if body else []
    except ValueError:
        raise FrameError("HISTORY records are not JSON") from None
    if not isinstance(records, list):
        raise FrameError("HISTORY records are a JSON list")
    return History(status, _int(total, "total"), tuple(records))


@dataclass(frozen=True, slots=True)
class Join(Frame):
    """Request: add ``pid`` (running as ``incarnation``) to the group. A durable peer started again
    (``tom peer --data``) says where its history ends: the last ``view`` of ``group`` it delivered
    (0 and no group: none), so that a group restarted as a whole goes on from there
    (`tom.core.founding`)."""

    pid: str
    incarnation: int
    view: int = 0
    group: str = ""

    def __post_init__(self) -> None:
        _check_pid(self.pid)
        _check_count(self.incarnation, "incarnation")
        _check_count(self.view, "view")
        _check_group(self.group)
        if (self.view == 0) != (self.group == "") or " " in self.group:
            raise FrameError("a join's history is a view and its group, or neither")


@dataclass(frozen=True, slots=True)
class Leave(Frame):
    """Request: take ``pid`` out of the group."""

    pid: str

    def __post_init__(self) -> None:
        _check_pid(self.pid)


@dataclass(frozen=True, slots=True)
class Flush(Frame):
    """Marker for ``coordinator``'s proposal ``(view, attempt)``: the sender has sent every frame
    it will send in the view before ``view``; ``clock`` is its Lamport clock when it sent the marker
    (the INSTALL's clock is the highest of the flush set's markers: `ViewChange.value`)."""

    view: int
    attempt: int
    coordinator: str
    clock: int = 0

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_pid(self.coordinator)
        _check_clock(self.clock)


@dataclass(frozen=True, slots=True)
class Flushed(Frame):
    """To the coordinator: the sender delivered all of the old view; its Lamport clock is ``clock``."""

    view: int
    attempt: int
    clock: int

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_clock(self.clock)


@dataclass(frozen=True, slots=True)
class Removed(Frame):
    """The receiver is not a member of the sender's view ``view`` of ``group`` (empty: a static group)."""

    view: int
    group: str = ""

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_group(self.group)


@dataclass(frozen=True, slots=True)
class Suspect(Frame):
    """To the coordinator of view ``view``: the sender has not heard member ``pid`` (running as
    ``incarnation``) for ``since`` whole seconds (`tom.core.reach`). From a coordinator to a joiner,
    with view 0: member ``pid`` of its group does not reach the joiner (it is not admitted for that)."""

    view: int
    pid: str
    incarnation: int
    since: int

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_pid(self.pid)
        _check_count(self.incarnation, "incarnation")
        _check_count(self.since, "since")


@dataclass(frozen=True, slots=True)
class Sees(Frame):
    """To the coordinator of view ``view``: joiner ``pid`` (as ``incarnation``) asked the sender to
    join, on the sender's own link to it (`tom.core.reach`)."""

    view: int
    pid: str
    incarnation: int

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_pid(self.pid)
        _check_count(self.incarnation, "incarnation")


@dataclass(frozen=True, slots=True)
class Resume(Frame):
    """Link handshake after HELLO: the sender has received ``count`` frames from the receiver's
    current incarnation; the receiver re-sends everything after them."""

    count: int

    def __post_init__(self) -> None:
        _check_count(self.count, "count")


@dataclass(frozen=True, slots=True)
class Received(Frame):
    """Link layer: the sender has received ``count`` frames; the receiver may forget them."""

    count: int

    def __post_init__(self) -> None:
        _check_count(self.count, "count")


@dataclass(frozen=True, slots=True)
class Propose(Frame):
    """The coordinator proposes view ``view`` (try ``attempt``) replacing view ``view - 1``.

    ``members`` is the new view as ``(pid, incarnation)`` pairs; ``removed`` are members of the old
    view taken out as failed. Every old member not removed flushes; ``members`` minus the old view
    are joining, the old view minus ``members`` minus ``removed`` are leaving.

    ``adopts`` (left out on the wire when None): the INSTALL of an earlier attempt of this
    view change that may have been decided, carried on under this ballot ``(attempt, coordinator)``
    instead of a new view. Then no flush runs: the old members not in ``removed`` vote (FLUSHED) at
    once, and the decision is that INSTALL, byte for byte.
    """

    view: int
    attempt: int
    coordinator: str
    members: tuple[tuple[str, int], ...]
    removed: tuple[tuple[str, int], ...]
    group: str = ""
    adopts: Install | None = None

    def __post_init__(self) -> None:
        _check_group(self.group)
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_pid(self.coordinator)
        _check_members(self.members, "members")
        _check_members(self.removed, "removed")
        if self.adopts is not None and (type(self.adopts) is not Install or self.adopts.view != self.view):
            raise FrameError("adopts must be an INSTALL of the same view")


@dataclass(frozen=True, slots=True)
class Install(Frame):
    """Decided: view ``view`` with ``members`` starts after Lamport time ``clock``.

    ``joined``, ``left`` and ``removed`` list the pids that changed; the view event is ordered at
    ``(clock + 1, coordinator)``, after everything of the old view and before everything of the new.
    ``group`` names the group's lineage (its founder and founder's incarnation): views of another
    group with the same number are never mixed up with ours. ``delivered`` (only when someone joins;
    ``marks`` on the wire, left out when empty): for each pid, the clock of its last message the group
    delivered (joiners learn them all) — a member cut off by a partition that rejoins sends again only
    what came after.
    """

    view: int
    attempt: int
    coordinator: str
    clock: int
    members: tuple[tuple[str, int], ...]
    joined: tuple[str, ...]
    left: tuple[str, ...]
    removed: tuple[str, ...]
    group: str = ""
    delivered: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        _check_group(self.group)
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_pid(self.coordinator)
        _check_clock(self.clock)
        _check_members(self.members, "members")
        if type(self.delivered) is not tuple:
            raise FrameError("marks must be a tuple")
        for mark in self.delivered:
            if type(mark) is not tuple or len(mark) != 2:
                raise FrameError(f"bad mark {mark!r}")
            _check_pid(mark[0])
            _check_clock(mark[1])
        for group in (self.joined, self.left, self.removed):
            if type(group) is not tuple:
                raise FrameError("change lists must be tuples")
            for pid in group:
                _check_pid(pid)


# -- frames from fields already checked (the core's hot path) ------------------------------------

_SETTERS: dict[type, tuple[Any, ...]] = {}


def _rebuild(cls: type[Frame], values: tuple[Any, ...]) -> Frame:
    """A frame of ``cls`` with these field values, as it was pickled or copied (checked then)."""
    setters = _SETTERS.get(cls)
    if setters is None:
        setters = _SETTERS[cls] = tuple(vars(cls)[f.name].__set__ for f in fields(cls))
    frame = cls.__new__(cls)
    for setter, value in zip(setters, values):
        setter(frame, value)
    return frame


_ACK_SET: Final = tuple(vars(Ack)[name].__set__ for name in ("clock", "pid"))
_ACKS_SET: Final = tuple(vars(Acks)[name].__set__ for name in ("clocks", "pid"))
_MARKS_SET: Final = vars(Marks)["marks"].__set__
_SEQ_SET: Final = tuple(vars(Seq)[name].__set__ for name in ("first", "clocks", "pid"))
_MESSAGE_SET: Final = tuple(vars(Message)[name].__set__ for name in ("clock", "pid", "text", "sent_at", "vc", "marks"))
_MESSAGES_SET: Final = tuple(vars(Messages)[name].__set__ for name in ("clock", "pid", "texts", "sent_at", "marks",
                                                                        "vc", "grows"))


def trusted_ack(clock: int, pid: str) -> Ack:
    """An Ack from fields the caller has already validated (skips `__post_init__`)."""
    ack: Ack = Ack.__new__(Ack)
    set_clock, set_pid = _ACK_SET
    set_clock(ack, clock)
    set_pid(ack, pid)
    return ack


def trusted_acks(clocks: tuple[int, ...], pid: str) -> Acks:
    """An Acks from validated fields (two clocks or more)."""
    acks: Acks = Acks.__new__(Acks)
    set_clocks, set_pid = _ACKS_SET
    set_clocks(acks, clocks)
    set_pid(acks, pid)
    return acks


def trusted_marks(marks: tuple[int, ...]) -> Marks:
    """A Marks frame from validated clocks."""
    frame: Marks = Marks.__new__(Marks)
    _MARKS_SET(frame, marks)
    return frame


_NATIVE: Final = type(vars(Message)["clock"]).__name__ == "getset_descriptor"
"""Whether this module runs compiled: a frame's fields are then native attributes, which a trusted
constructor stores directly (past the frozen frame's ``__setattr__``, which still guards them from
everyone else); interpreted, it sets them through their slot descriptors."""


def trusted_message(clock: int, pid: str, text: str, sent_at: float | None,
                    vc: tuple[int, ...] | None = None, marks: tuple[int, ...] | None = None) -> Message:
    """A Message from validated fields, ``sent_at`` already at whole microseconds."""
    msg: Message = Message.__new__(Message)
    if _NATIVE:  # (a tenth of a compiled peer's time went to setting the fields one call each)
        msg.clock = clock  # type: ignore[misc]
        msg.pid = pid  # type: ignore[misc]
        msg.text = text  # type: ignore[misc]
        msg.sent_at = sent_at  # type: ignore[misc]
        msg.vc = vc  # type: ignore[misc]
        msg.marks = marks  # type: ignore[misc]
        return msg
    set_clock, set_pid, set_text, set_sent, set_vc, set_marks = _MESSAGE_SET
    set_clock(msg, clock)
    set_pid(msg, pid)
    set_text(msg, text)
    set_sent(msg, sent_at)
    set_vc(msg, vc)
    set_marks(msg, marks)
    return msg


def trusted_messages(clock: int, pid: str, texts: tuple[str, ...], sent_at: float | None,
                     marks: tuple[int, ...] | None, vc: tuple[int, ...] | None = None, grows: int = 0) -> Messages:
    """A run from validated fields (2 to `MAX_RUN` texts, ``sent_at`` at whole microseconds)."""
    run: Messages = Messages.__new__(Messages)
    set_clock, set_pid, set_texts, set_sent, set_marks, set_vc, set_grows = _MESSAGES_SET
    set_clock(run, clock)
    set_pid(run, pid)
    set_texts(run, texts)
    set_sent(run, sent_at)
    set_marks(run, marks)
    set_vc(run, vc)
    set_grows(run, grows)
    return run


# -- text escaping -------------------------------------------------------------------------------

_UNESCAPE: Final = {"\\\\": "\\", "\\n": "\n", "\\r": "\r"}
_ESCAPED: Final = re.compile(r"\\(.?)", re.S)


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


def message_frame_bytes(pid: str, text: str, vector: bool = False) -> int:
    """A bound on the bytes the MESSAGE (or RELAY) frame of ``text`` from ``pid`` can take on the wire,
    at any clock and send time, newline excluded — exact for texts near the limit: what a sender
    holds against `MAX_FRAME_BYTES`. UnicodeEncodeError if ``text`` cannot be UTF-8 (a lone
    surrogate). ``vector``: a causal group's frame, with room for its vector (`MAX_VC_CHARS`)."""
    head = _MESSAGE_HEAD_MAX + len(pid) + 1 + (2 + MAX_VC_CHARS if vector else 0)
    bound = head + 4 * len(text)  # no character takes over 4 bytes, escaped
    if bound <= MAX_FRAME_BYTES:
        return bound
    return head + len(escape_text(text).encode())


# -- reading fields ------------------------------------------------------------------------------


def _int(field: str, what: str) -> int:
    """A canonical decimal (no sign, no leading zero, at most 19 digits); the frame checks the range."""
    if not field.isdigit() or not field.isascii() or (len(field) > 1 and field[0] == "0") or len(field) > 19:
        raise FrameError(f"bad {what} {field!r}")
    return int(field)


def _ints(field: str, what: str) -> tuple[int, ...]:
    """``<n>,<n>,...``, each one `_int`."""
    return tuple(_int(n, what) for n in field.split(","))


def _short_int(field: str) -> bool:
    """Whether ``field`` is canonical (`_int`) and at most 18 digits, so within `MAX_CLOCK`: what a fast
    parse takes without a check."""
    return field.isdigit() and field.isascii() and len(field) <= 18 and (field[0] != "0" or len(field) == 1)


def _short_ints(field: str) -> tuple[int, ...] | None:
    """``<n>,<n>,...`` when every one is `_short_int`; None otherwise."""
    parts = field.split(",")
    for n in parts:
        if not (n.isdigit() and n.isascii() and len(n) <= 18 and (n[0] != "0" or len(n) == 1)):
            return None
    return tuple([int(n) for n in parts])


def _split_pid(rest: str) -> tuple[str, str]:
    """Split ``<pid>-<tail>`` where the pid may itself hold ``-`` (host names) or ``:`` (IPv6)."""
    start = rest.find("]") if rest.startswith("[") else 0
    colon = rest.find(":", max(start, 0))
    dash = rest.find("-", colon) if colon >= 0 else -1
    if colon < 0 or dash < 0:
        raise FrameError("missing host:port")
    return rest[:dash], rest[dash + 1 :]


def _json_body(cls: type[Frame], rest: str, optional: tuple[str, ...] = (),
               wire_names: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON object of a ``cls`` frame: its fields by name (``wire_names``: field -> key, where they
    differ), each of them (but the ``optional``)."""
    try:
        body = json.loads(rest)
    except (ValueError, RecursionError):  # (a line of 60,000 "[" nests too deep for the decoder)
        raise FrameError("bad JSON body") from None
    names = {(wire_names or {}).get(f.name, f.name) for f in fields(cls)}
    if type(body) is not dict or set(body) - set(optional) != names - set(optional):
        raise FrameError(f"{cls.__name__.upper()} needs fields {sorted(names)}")
    if _has_bool(body):  # (no field is one; the compiled build would take true for 1)
        raise FrameError(f"{cls.__name__.upper()}: true or false where no field is one")
    return body


def _has_bool(value: Any) -> bool:
    if type(value) is bool:
        return True
    if type(value) is dict:
        return any(_has_bool(v) for v in value.values())
    if type(value) is list:
        return any(_has_bool(v) for v in value)
    return False


def _pairs(body: dict[str, Any], key: str) -> tuple[tuple[Any, ...], ...]:
    """``body[key]``, a list of lists, as a tuple of tuples (the frame checks what they hold)."""
    value = body[key]
    if type(value) is not list or not all(type(m) is list for m in value):
        raise FrameError(f"bad {key}")
    return tuple(tuple(m) for m in value)


def _json_frame(cls: type[Frame], body: dict[str, Any]) -> str:
    return f"{cls.__name__.upper()}-{json.dumps(body, separators=(',', ':'))}"


# -- each kind: format and parse -----------------------------------------------------------------
# A parse takes the line's first field (``head``: the tag, and for a stamped kind its suffixes) and
# the rest after its ``-``; it raises FrameError with what is wrong (`parse_frame` adds the line).


def _format_text_frame(tag: str, m: Message | Relay, marks: tuple[int, ...] | None) -> str:
    head = tag if m.vc is None else "C" + tag
    if m.sent_at is not None:
        head = f"{head}@{m.sent_at:.6f}"
    if marks is not None:
        head = f"{head}+{','.join(map(str, marks))}"
    if m.vc is None:
        return f"{head}-{m.clock}-{m.pid}-{escape_text(m.text)}"
    return f"{head}-{m.clock}-{m.pid}-{','.join(map(str, m.vc))}-{escape_text(m.text)}"


_TextFields = tuple[int, str, str, float | None, tuple[int, ...] | None, tuple[int, ...] | None]


def _sent_at(stamp: str) -> float:
    """A send time as written after ``@``: Unix seconds, at whole microseconds."""
    if not stamp.replace(".", "", 1).isdigit() or not stamp.isascii():
        raise FrameError(f"bad send time {stamp[:30]!r}")
    sent_at = float(stamp)
    if "." in stamp and len(stamp) - stamp.find(".") > 7:
        sent_at = round(sent_at, 6)  # whole microseconds, as Message keeps them
    if not sent_at < 1e11:
        raise FrameError(f"bad send time {stamp[:30]!r}")
    return sent_at


def _format_messages(r: Messages) -> str:
    head = "MESSAGES" if r.vc is None else "CMESSAGES"
    if r.sent_at is not None:
        head = f"{head}@{r.sent_at:.6f}"
    if r.marks is not None:
        head = f"{head}+{','.join(map(str, r.marks))}"
    escaped = [escape_text(text) for text in r.texts]
    lengths = ",".join([str(len(text)) for text in escaped])
    if r.vc is not None:
        lengths = f"{r.grows}-{','.join(map(str, r.vc))}-{lengths}"
    return f"{head}-{r.clock}-{r.pid}-{lengths}-{''.join(escaped)}"


def _parse_messages(head: str, rest: str) -> Messages:
    """``MESSAGES[@<sent_at>][+<marks>]-<clock>-<pid>-<n1>,<n2>,...-<texts>``: the texts, escaped, one
    after the other, the i-th ``n_i`` characters long; in a causal group ``CMESSAGES...-<clock>-<pid>-
    <grows>-<vc>-<n1>,<n2>,...-<texts>``."""
    head, plus, marks_field = head.partition("+")
    marks = _ints(marks_field, "mark") if plus else None
    tag, at, stamp = head.partition("@")
    sent_at = _sent_at(stamp) if at else None
    clock, sep, rest = rest.partition("-")
    if not sep:
        raise FrameError("MESSAGES needs clock, pid, lengths and texts")
    pid, tail = _split_pid(rest)
    vc, grows = None, 0
    if tag == "CMESSAGES":
        grows_field, sep, tail = tail.partition("-")
        counts, sep2, tail = tail.partition("-")
        if not (sep and sep2):
            raise FrameError("CMESSAGES needs clock, pid, growing count, vector, lengths and texts")
        grows, vc = _int(grows_field, "growing count"), _ints(counts, "count")
    lengths, sep, body = tail.partition("-")
    if not sep:
        raise FrameError("MESSAGES needs clock, pid, lengths and texts")
    sizes = _ints(lengths, "length")
    if sum(sizes) != len(body):
        raise FrameError(f"the lengths of a run add up to {sum(sizes)}, its texts take {len(body)}")
    texts, start = [], 0
    for size in sizes:
        texts.append(unescape_text(body[start:start + size]))
        start += size
    return Messages(_int(clock, "clock"), pid, tuple(texts), sent_at, marks, vc, grows)


def _fast_messages(head: str, rest: str) -> Messages | None:
    """``MESSAGES@<sent_at>[+<marks>]-<clock>-<pid>-<lengths>-<texts>`` as TOM sends it (the limits of
    `_fast_message`, 2 to `MAX_RUN` texts)."""
    at = head.find("@")
    if at < 0 or head[:at] != "MESSAGES":
        return None
    stamped = _fast_stamp(head, at)
    if stamped is None:
        return None
    sent_at, marks = stamped
    dash = rest.find("-")
    end = rest.find("-", dash + 1) if dash >= 0 else -1
    stop = rest.find("-", end + 1) if end >= 0 else -1
    if stop < 0:
        return None
    clock, pid = rest[:dash], rest[dash + 1:end]
    sizes = _short_ints(rest[end + 1:stop])
    if sizes is None or not 2 <= len(sizes) <= MAX_RUN or not (_short_int(clock) and _is_pid(pid)):
        return None
    body = rest[stop + 1:]
    if sum(sizes) != len(body):
        return None
    texts: list[str] = []
    start = 0
    if "\\" in body:
        try:
            for size in sizes:
                texts.append(unescape_text(body[start:start + size]))
                start += size
        except FrameError:
            return None
    else:
        for size in sizes:
            texts.append(body[start:start + size])
            start += size
    return trusted_messages(int(clock), pid, tuple(texts), sent_at, marks)


def _read_text_frame(head: str, rest: str) -> _TextFields:
    """``<C?tag>[@<sent_at>][+<marks>]`` and ``<clock>-<pid>[-<vc>]-<text>``, as (clock, pid, text,
    sent_at, vc, marks)."""
    head, plus, marks_field = head.partition("+")
    marks = _ints(marks_field, "mark") if plus else None
    tag, at, stamp = head.partition("@")
    sent_at = _sent_at(stamp) if at else None
    clock, sep, rest = rest.partition("-")
    if not sep:
        raise FrameError(f"{tag} needs clock, pid and text")
    pid, text = _split_pid(rest)
    vc = None
    if tag[0] == "C":
        counts, sep, text = text.partition("-")
        if not sep:
            raise FrameError(f"{tag} needs clock, pid, vector and text")
        vc = _ints(counts, "count")
    text = unescape_text(text)
    return _int(clock, "clock"), pid, text, sent_at, vc, marks


def _fast_stamp(head: str, at: int) -> tuple[float, tuple[int, ...] | None] | None:
    """The send time and marks of a stamped head as TOM writes it (``@`` at ``at``): at most 11 + 6
    digits, marks of at most 18 digits each; None for any other form (the full parse decides)."""
    plus = head.find("+", at)
    stamp = head[at + 1:] if plus < 0 else head[at + 1:plus]
    dot = stamp.find(".")
    if not (0 < dot <= 11 and 0 < len(stamp) - dot - 1 <= 6 and stamp.isascii() and stamp[:dot].isdigit()
            and stamp[dot + 1:].isdigit()):
        return None
    marks = None
    if plus >= 0:
        marks = _short_ints(head[plus + 1:])
        if marks is None or len(marks) > MAX_MARKS:
            return None
    return float(stamp), marks


def _fast_message(head: str, rest: str) -> Message | None:
    """``[C]MESSAGE@<sent_at>[+<marks>]-<clock>-<pid>[-<vc>]-<text>`` as TOM sends it: a send time of
    at most 11 + 6 digits, clocks and counts of at most 18 digits (so within `MAX_CLOCK`), a pid
    without ``-``."""
    # (found and sliced, not partitioned: this runs for nearly every frame a peer reads)
    at = head.find("@")
    tag = head[:at]
    if at < 0 or not (tag == "MESSAGE" or tag == "CMESSAGE"):
        return None
    stamped = _fast_stamp(head, at)
    if stamped is None:
        return None
    sent_at, marks = stamped
    dash = rest.find("-")
    end = rest.find("-", dash + 1) if dash >= 0 else -1
    if end < 0:
        return None
    clock, pid, text = rest[:dash], rest[dash + 1:end], rest[end + 1:]
    if not (_short_int(clock) and _is_pid(pid)):
        return None
    vc = None
    if tag == "CMESSAGE":
        counts, sep, text = text.partition("-")
        vc = _short_ints(counts) if sep else None
        if vc is None:
            return None
    if "\\" in text:
        try:
            text = unescape_text(text)
        except FrameError:
            return None
    return trusted_message(int(clock), pid, text, sent_at, vc, marks)


def _parse_relay(head: str, rest: str) -> Relay:
    if "+" in head:
        raise FrameError("a relay carries no marks")
    clock, pid, text, sent_at, vc, _ = _read_text_frame(head, rest)
    return Relay(clock, pid, text, sent_at, vc)


def _parse_ack(head: str, rest: str) -> Ack:
    clock, sep, pid = rest.partition("-")
    if not sep:
        raise FrameError("ACK needs clock and pid")
    return Ack(_int(clock, "clock"), pid)


def _fast_ack(head: str, rest: str) -> Ack | None:
    """``ACK-<clock>-<pid>`` with a clock of at most 18 digits."""
    clock, sep, pid = rest.partition("-")
    return trusted_ack(int(clock), pid) if sep and _short_int(clock) and _is_pid(pid) else None


def _fast_acks(head: str, rest: str) -> Acks | None:
    """``ACKS-<clocks>-<pid>``, two clocks or more of at most 18 digits each."""
    field, sep, pid = rest.partition("-")
    clocks = _short_ints(field) if sep and _is_pid(pid) else None
    return trusted_acks(clocks, pid) if clocks is not None and len(clocks) >= 2 else None


def _parse_acks(head: str, rest: str) -> Acks:
    clocks, sep, pid = rest.partition("-")
    if not sep:
        raise FrameError("ACKS needs clocks and pid")
    return Acks(_ints(clocks, "clock"), pid)


def _fast_marks(head: str, rest: str) -> Marks | None:
    marks = _short_ints(rest)
    return trusted_marks(marks) if marks is not None and len(marks) <= MAX_MARKS else None


def _parse_seq(head: str, rest: str) -> Seq:
    first, clocks, pid = rest.split("-", 2) if rest.count("-") >= 2 else ("", "", "")
    if not pid:
        raise FrameError("SEQ needs a first number, clocks and a pid")
    return Seq(_int(first, "sequence number"), _ints(clocks, "clock"), pid)


def _fast_seq(head: str, rest: str) -> Seq | None:
    """``SEQ-<first>-<clocks>-<pid>`` with numbers of at most 18 digits."""
    first, _, rest = rest.partition("-")
    field, sep, pid = rest.partition("-")
    clocks = _short_ints(field) if sep and _short_int(first) and first != "0" and _is_pid(pid) else None
    if clocks is None:
        return None
    seq: Seq = Seq.__new__(Seq)
    set_first, set_clocks, set_pid = _SEQ_SET
    set_first(seq, int(first))
    set_clocks(seq, clocks)
    set_pid(seq, pid)
    return seq


def _group_suffix(group: str) -> str:
    """A frame's group after a space (nothing before it holds one), or nothing for no group."""
    return f" {group}" if group else ""


def _split_group(rest: str) -> tuple[str, str]:
    """``rest`` without its group suffix, and the group (`_group_suffix`)."""
    rest, sep, group = rest.partition(" ")
    if sep and not group:
        raise FrameError("empty group")
    return rest, group


def _format_heartbeat(h: Heartbeat) -> str:
    if h.last is None:
        return f"HEARTBEAT-{h.view}{_group_suffix(h.group)}"
    return f"HEARTBEAT-{h.view}-{h.count}-{h.digest:08x}-{h.last[0]}-{h.last[1]}{_group_suffix(h.group)}"


def _parse_heartbeat(head: str, rest: str) -> Heartbeat:
    rest, group = _split_group(rest)
    if "-" not in rest:
        return Heartbeat(_int(rest, "view"), group=group)
    parts = rest.split("-", 4)
    if len(parts) != 5:
        raise FrameError("HEARTBEAT needs view, count, digest, clock and pid")
    view, count, digest, clock, pid = parts
    if len(digest) != 8 or any(c not in "0123456789abcdef" for c in digest):
        raise FrameError(f"bad digest {digest!r}")
    return Heartbeat(_int(view, "view"), _int(count, "count"), int(digest, 16), (_int(clock, "clock"), pid), group)


def _parse_removed(head: str, rest: str) -> Removed:
    rest, group = _split_group(rest)
    return Removed(_int(rest, "view"), group)


def _format_hello(h: Hello) -> str:
    if h.order == "lamport" and h.wire == 1:
        return f"HELLO-{h.pid}-{h.incarnation}"
    return f"HELLO-{h.pid}-{h.incarnation}-{h.order}{_WIRE_WORDS.get(h.wire, '')}"


def _parse_hello(head: str, rest: str) -> Hello:
    pid, inc = rest.rsplit("-", 1) if "-" in rest else (rest, "")
    if inc.isalpha() and "-" in pid:  # HELLO-<pid>-<incarnation>-<order>
        order, wire = inc, 1
        for version, word in _WIRE_WORDS.items():
            if order.endswith(word) and len(order) > len(word):
                order, wire = order[:-len(word)], version
                break
        pid, inc = pid.rsplit("-", 1)
        return Hello(pid, _int(inc, "incarnation"), order, wire)
    return Hello(pid, _int(inc, "incarnation"))


def _parse_join(head: str, rest: str) -> Join:
    rest, group = _split_group(rest)
    if group:
        parts = rest.rsplit("-", 2)
        if len(parts) != 3:
            raise FrameError("JOIN with a group takes a pid, an incarnation and a view")
        return Join(parts[0], _int(parts[1], "incarnation"), _int(parts[2], "view"), group)
    pid, inc = rest.rsplit("-", 1) if "-" in rest else (rest, "")
    return Join(pid, _int(inc, "incarnation"))


def _format_join(j: Join) -> str:
    return f"JOIN-{j.pid}-{j.incarnation}-{j.view} {j.group}" if j.group else f"JOIN-{j.pid}-{j.incarnation}"


def _parse_flush(head: str, rest: str) -> Flush:
    view, sep, rest = rest.partition("-")
    attempt, sep2, coordinator = rest.partition("-")
    if not (sep and sep2):
        raise FrameError("FLUSH needs view, attempt and coordinator")
    pid, sep3, clock = coordinator.rpartition("-")
    if sep3 and clock.isdigit():  # FLUSH-<view>-<attempt>-<coordinator>-<clock> (a pid ends in :<port>)
        return Flush(_int(view, "view"), _int(attempt, "attempt"), pid, _int(clock, "clock"))
    return Flush(_int(view, "view"), _int(attempt, "attempt"), coordinator)


def _parse_flushed(head: str, rest: str) -> Flushed:
    parts = rest.split("-")
    if len(parts) != 3:
        raise FrameError("expected 3 fields")
    view, attempt, clock = parts
    return Flushed(_int(view, "view"), _int(attempt, "attempt"), _int(clock, "clock"))


def _parse_suspect(head: str, rest: str) -> Suspect:
    parts = rest.split("-", 3)
    if len(parts) != 4:
        raise FrameError("SUSPECT needs view, incarnation, since and pid")
    view, inc, since, pid = parts
    return Suspect(_int(view, "view"), pid, _int(inc, "incarnation"), _int(since, "since"))


def _parse_sees(head: str, rest: str) -> Sees:
    parts = rest.split("-", 2)
    if len(parts) != 3:
        raise FrameError("SEES needs view, incarnation and pid")
    view, inc, pid = parts
    return Sees(_int(view, "view"), pid, _int(inc, "incarnation"))


def _format_propose(p: Propose) -> str:
    body = {f.name: getattr(p, f.name) for f in fields(p)}
    if p.adopts is None:
        del body["adopts"]  # (optional: the wire form of a view change that adopts nothing is unchanged)
    else:
        body["adopts"] = _install_body(p.adopts)
    return _json_frame(Propose, body)


def _parse_propose(head: str, rest: str) -> Propose:
    body = _json_body(Propose, rest, optional=("adopts",))
    body["members"], body["removed"] = _pairs(body, "members"), _pairs(body, "removed")
    if "adopts" in body:
        body["adopts"] = _install_of(body["adopts"])
    return Propose(**body)


def _format_prepare(p: Prepare) -> str:
    return _json_frame(Prepare, {f.name: getattr(p, f.name) for f in fields(p)})


def _parse_prepare(head: str, rest: str) -> Prepare:
    return Prepare(**_json_body(Prepare, rest))


def _format_promise(p: Promise) -> str:
    body = {f.name: getattr(p, f.name) for f in fields(p)}
    body["accepted"] = [[a, c, list(voters), _install_body(i)] for a, c, voters, i in p.accepted]
    return _json_frame(Promise, body)


def _parse_promise(head: str, rest: str) -> Promise:
    body = _json_body(Promise, rest)
    accepted = body["accepted"]
    if type(accepted) is not list or len(accepted) > 64:
        raise FrameError("bad accepted")
    entries = []
    for entry in accepted:
        if type(entry) is not list or len(entry) != 4 or type(entry[2]) is not list:
            raise FrameError(f"bad accepted entry {entry!r}")
        entries.append((entry[0], entry[1], tuple(entry[2]), _install_of(entry[3])))
    body["accepted"] = tuple(entries)
    return Promise(**body)


_INSTALL_WIRE_NAMES: Final = {"delivered": "marks"}


def _install_body(i: Install) -> dict[str, Any]:
    body = {_INSTALL_WIRE_NAMES.get(f.name, f.name): getattr(i, f.name) for f in fields(i)}
    if not i.delivered:
        del body["marks"]  # (optional: the wire form of a view change without joiners is unchanged)
    return body


def _format_install(i: Install) -> str:
    return _json_frame(Install, _install_body(i))


def _parse_install(head: str, rest: str) -> Install:
    return _install_of(_json_body(Install, rest, optional=("marks",), wire_names=_INSTALL_WIRE_NAMES))


def _install_of(body: dict[str, Any]) -> Install:
    names = {_INSTALL_WIRE_NAMES.get(f.name, f.name) for f in fields(Install)}
    if type(body) is not dict or set(body) - {"marks"} != names - {"marks"}:
        raise FrameError(f"INSTALL needs fields {sorted(names)}")
    body = dict(body)
    body["members"] = _pairs(body, "members")
    if "marks" in body:
        body["delivered"] = _pairs(body, "marks")
        del body["marks"]
    for key in ("joined", "left", "removed"):
        if type(body[key]) is not list:
            raise FrameError(f"bad {key}")
        body[key] = tuple(body[key])
    return Install(**body)


# -- the table -----------------------------------------------------------------------------------

F = TypeVar("F", bound=Frame)


@dataclass(frozen=True, slots=True)
class Prepare(Frame):
    """Phase 1 of a view change (docs/design/view-change.md): ``coordinator`` asks the members of view ``view - 1`` of
    ``group`` to promise ballot ``(attempt, coordinator)``."""

    view: int
    attempt: int
    coordinator: str
    group: str = ""

    def __post_init__(self) -> None:
        _check_group(self.group)
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_pid(self.coordinator)


@dataclass(frozen=True, slots=True)
class Promise(Frame):
    """To ``coordinator``: the sender promises ballot ``(attempt, coordinator)`` of view ``view`` (it
    reports FLUSHED for no lower ballot from now on) and reports every ballot of this view change it
    reported FLUSHED for: ``(attempt, coordinator, voters, install)`` — the ballot, the members whose
    FLUSHED decide it, and the INSTALL it decides (what a new coordinator adopts)."""

    view: int
    attempt: int
    coordinator: str
    accepted: tuple[tuple[int, str, tuple[str, ...], Install], ...] = ()

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_pid(self.coordinator)
        if type(self.accepted) is not tuple:
            raise FrameError("accepted must be a tuple")
        for entry in self.accepted:
            if type(entry) is not tuple or len(entry) != 4:
                raise FrameError(f"bad accepted entry {entry!r}")
            attempt, coordinator, voters, install = entry
            _check_count(attempt, "attempt")
            _check_pid(coordinator)
            if type(voters) is not tuple or type(install) is not Install or install.view != self.view:
                raise FrameError(f"bad accepted entry {entry!r}")
            for pid in voters:
                _check_pid(pid)


@mypyc_attr(native_class=False)  # (a generic slotted dataclass: mypyc cannot make it native)
@dataclass(frozen=True, slots=True)
class FrameKind(Generic[F]):
    """One kind of frame on the wire. ``tags``: the first fields its lines start with (a ``C`` tag: the
    causal form, with a vector); ``stamped``: a tag may carry ``@<sent_at>`` and ``+<marks>``.
    ``parse(head, rest)`` reads a line split at its first ``-``; ``fast``, if any, reads the kind's
    busiest form the same way or returns None."""

    tags: tuple[str, ...]
    cls: type[F]
    format: Callable[[F], str]
    parse: Callable[[str, str], F]
    fast: Callable[[str, str], F | None] | None = None
    stamped: bool = False


FRAME_KINDS = (  # (not annotated: so mypy checks each row's format and parse against the row's class)
    FrameKind(("MESSAGE", "CMESSAGE"), Message, lambda m: _format_text_frame("MESSAGE", m, m.marks),
              lambda head, rest: Message(*_read_text_frame(head, rest)), _fast_message, stamped=True),
    FrameKind(("MESSAGES", "CMESSAGES"), Messages, _format_messages, _parse_messages, _fast_messages, stamped=True),
    FrameKind(("RELAY", "CRELAY"), Relay, lambda r: _format_text_frame("RELAY", r, None), _parse_relay,
              stamped=True),
    FrameKind(("ACK",), Ack, lambda a: f"ACK-{a.clock}-{a.pid}", _parse_ack, _fast_ack),
    FrameKind(("ACKS",), Acks, lambda a: f"ACKS-{','.join(map(str, a.clocks))}-{a.pid}", _parse_acks, _fast_acks),
    FrameKind(("MARKS",), Marks, lambda m: f"MARKS-{','.join(map(str, m.marks))}",
              lambda head, rest: Marks(_ints(rest, "mark")), _fast_marks),
    FrameKind(("SEQ",), Seq, lambda s: f"SEQ-{s.first}-{','.join(map(str, s.clocks))}-{s.pid}", _parse_seq, _fast_seq),
    FrameKind(("HEARTBEAT",), Heartbeat, _format_heartbeat, _parse_heartbeat),
    FrameKind(("REFUSED",), Refused, lambda r: f"REFUSED-{escape_text(r.reason)}",
              lambda head, rest: Refused(unescape_text(rest))),
    FrameKind(("HELLO",), Hello, _format_hello, _parse_hello),
    FrameKind(("JOIN",), Join, _format_join, _parse_join),
    FrameKind(("DIRECT",), Direct, lambda d: f"DIRECT-{escape_text(d.text)}",
              lambda head, rest: Direct(unescape_text(rest))),
    FrameKind(("CATCHUP",), CatchUp, lambda c: f"CATCHUP-{c.view}-{c.count}-{c.upto}", _parse_catch_up),
    FrameKind(("HISTORY",), History,
              lambda h: f"HISTORY-{h.status}-{h.total}-{json.dumps(list(h.records), separators=(',', ':'))}", _parse_history),
    FrameKind(("PROGRESS",), Progress, _format_progress, _parse_progress),
    FrameKind(("LEAVE",), Leave, lambda leave: f"LEAVE-{leave.pid}", lambda head, rest: Leave(rest)),
    FrameKind(("FLUSH",), Flush,
              lambda f: f"FLUSH-{f.view}-{f.attempt}-{f.coordinator}" + (f"-{f.clock}" if f.clock else ""),
              _parse_flush),
    FrameKind(("FLUSHED",), Flushed, lambda f: f"FLUSHED-{f.view}-{f.attempt}-{f.clock}", _parse_flushed),
    FrameKind(("REMOVED",), Removed, lambda r: f"REMOVED-{r.view}{_group_suffix(r.group)}", _parse_removed),
    FrameKind(("SUSPECT",), Suspect, lambda f: f"SUSPECT-{f.view}-{f.incarnation}-{f.since}-{f.pid}", _parse_suspect),
    FrameKind(("SEES",), Sees, lambda f: f"SEES-{f.view}-{f.incarnation}-{f.pid}", _parse_sees),
    FrameKind(("RESUME",), Resume, lambda r: f"RESUME-{r.count}", lambda head, rest: Resume(_int(rest, "count"))),
    FrameKind(("RECEIVED",), Received, lambda r: f"RECEIVED-{r.count}",
              lambda head, rest: Received(_int(rest, "count"))),
    FrameKind(("PROPOSE",), Propose, _format_propose, _parse_propose),
    FrameKind(("INSTALL",), Install, _format_install, _parse_install),
    FrameKind(("PREPARE",), Prepare, _format_prepare, _parse_prepare),
    FrameKind(("PROMISE",), Promise, _format_promise, _parse_promise),
)
"""Every frame kind, once: `format_frame` and `parse_frame` know no other."""

_FORMAT: Final[dict[type[Frame], Callable[[Any], str]]] = {kind.cls: kind.format for kind in FRAME_KINDS}
_BY_TAG: Final[dict[str, FrameKind[Any]]] = {tag: kind for kind in FRAME_KINDS for tag in kind.tags}
_STAMPED: Final[dict[str, FrameKind[Any]]] = {tag: kind for kind in FRAME_KINDS if kind.stamped for tag in kind.tags}


def format_frame(frame: Frame) -> str:
    """The wire form of ``frame``, without the newline."""
    try:
        format_kind = _FORMAT[type(frame)]
    except KeyError:
        raise TypeError(f"not a frame: {frame!r}") from None
    return format_kind(frame)


def encode_frame(frame: Frame) -> bytes:
    """The wire bytes of ``frame``, newline included."""
    return (format_frame(frame) + "\n").encode()


def encode_sends(sends: list[tuple[tuple[str, ...], Frame]]) -> dict[str, list[bytes]]:
    """Each destination's lines, in the order of ``sends``, each encoded once however many
    destinations it has. Consecutive messages of one member to the same destinations, stamped with
    consecutive clocks and the same send time, the marks (if any) on the last, go as one line (a run,
    `Messages`): the receiver's `decode_lines` gives back exactly the messages sent."""
    per_dest: dict[str, list[bytes]] = {}
    i, n = 0, len(sends)
    while i < n:
        dests, frame = sends[i]
        j = i + 1
        data = b""
        if type(frame) is Message and frame.marks is None:
            j, grows = _run_end(sends, i, n)
            if j - i >= 2:
                data = encode_frame(_run(frame, [m for _, m in sends[i + 1:j]], grows))
                if len(data) > MAX_FRAME_BYTES + 1:  # (very long marks): one line each after all
                    j, data = i + 1, b""
        if not data:
            data = encode_frame(frame)
        for dest in dests:
            queued = per_dest.get(dest)
            if queued is None:
                per_dest[dest] = [data]
            else:
                queued.append(data)
        i = j
    return per_dest


def _run(first: Message, rest: list[Frame], grows: int) -> Messages:
    """The run of ``first`` and the messages ``rest`` that `_run_end` found to follow it."""
    texts = [first.text]
    last = first
    for frame in rest:
        assert type(frame) is Message
        texts.append(frame.text)
        last = frame
    return trusted_messages(first.clock, first.pid, tuple(texts), first.sent_at, last.marks, first.vc, grows)


def _run_end(sends: list[tuple[tuple[str, ...], Frame]], i: int, n: int) -> tuple[int, int]:
    """Where the run that starts with the message ``sends[i]`` ends (exclusive), and in a causal
    group which count of the vector grows along it (each next vector is the one before with that count
    one higher: exactly, or the run ends)."""
    dests, first = sends[i]
    assert type(first) is Message
    clock, pid, sent_at, vc = first.clock, first.pid, first.sent_at, first.vc
    chars = len(first.text)
    grows = -1
    j = i + 1
    while j < n and j - i < MAX_RUN:
        d, frame = sends[j]
        if (type(frame) is not Message or frame.clock != clock + (j - i) or frame.pid != pid
                or frame.sent_at != sent_at or d != dests):
            break
        if vc is not None or frame.vc is not None:
            step = frame.vc
            if vc is None or step is None or len(step) != len(vc):
                break
            if grows < 0:  # the one count that differs from the first's
                grows = next((k for k in range(len(vc)) if step[k] != vc[k]), -1)
                if grows < 0:
                    break
            if not _grown(vc, step, grows, j - i):
                break
        chars += len(frame.text)
        if chars > RUN_CHARS:
            break
        j += 1
        if frame.marks is not None:
            break  # the marks ride on the run's last message
    return j, max(grows, 0)


def _grown(first: tuple[int, ...], vc: tuple[int, ...], grows: int, by: int) -> bool:
    """Whether ``vc`` is ``first`` with count ``grows`` higher by ``by``, the others the same."""
    for k in range(len(first)):
        if vc[k] != first[k] + (by if k == grows else 0):
            return False
    return True


OVER_LONG = b"\xff over-long"
"""What a line reader hands over for a line over the limit (not UTF-8: never a frame)."""


def decode_line(raw: str | bytes) -> Frame:
    """Parse one line as a link's reader hands it over (text, or bytes where its chunk was not UTF-8;
    a CRLF line ending's ``\\r`` is not part of it); FrameError if it is not a frame."""
    if isinstance(raw, str):
        return parse_frame(raw[:-1] if raw.endswith("\r") else raw)
    if raw == OVER_LONG:
        raise FrameError(f"a line over the limit of {MAX_FRAME_BYTES} bytes")
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError(f"not UTF-8: {raw[:40]!r}") from None
    return parse_frame(text)


def decode_lines(lines: list[str | bytes]) -> tuple[list[Frame], int, list[int], FrameError | None]:
    """The frames of ``lines`` up to the first that is not one (a run as the messages it holds), how
    many lines they came in (the link counts lines), RECEIVED frames apart (their counts, in order),
    and that line's FrameError (None if every line is a frame)."""
    frames: list[Frame] = []
    received: list[int] = []
    taken = 0
    for raw in lines:
        try:
            frame = decode_line(raw)
        except FrameError as e:
            return frames, taken, received, e
        if type(frame) is Messages:
            frames.extend(frame.messages())
            taken += 1
        elif isinstance(frame, Received):
            received.append(frame.count)
        else:
            frames.append(frame)
            taken += 1
    return frames, taken, received, None


def _plain_message(line: str) -> Message | None:
    """The busiest line there is, a plain MESSAGE as TOM sends it (``MESSAGE@<send time>[+<marks>]-
    <clock>-<pid>-<text>``): `_fast_message`, straight from the line, without the lookups of the kind
    (a tenth of a peer's time was parsing). None if it is not exactly that form, for the full parse."""
    if not line.startswith("MESSAGE@"):
        return None
    head, _, rest = line.partition("-")
    return _fast_message(head, rest)


def parse_frame(line: str) -> Frame:
    """Parse one line (without its newline) into a Frame; raise FrameError if it is not one. (The
    fast parse of its kind first, if it has one; `_parse` is the same without them, inlined here: this
    runs once per frame.)"""
    if len(line) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(line)} characters is over the limit of {MAX_FRAME_BYTES} bytes")
    if line.startswith("MESSAGE@"):
        message = _plain_message(line)
        if message is not None:
            return message
    head, sep, rest = line.partition("-")
    if sep:
        kind = _BY_TAG.get(head)
        if kind is None:  # a stamped head, <tag>[@<sent_at>][+<marks>], or none
            kind = _STAMPED.get(head.partition("@")[0].partition("+")[0])
        if kind is not None and kind.fast is not None:
            quick: Frame | None = kind.fast(head, rest)
            if quick is not None:
                return quick
    return _parse(line, False)


def _parse_by_table(line: str) -> Frame:
    """`parse_frame` without the fast parses: what each fast parse must agree with."""
    return _parse(line, False)


def _parse(line: str, fast: bool) -> Frame:
    if len(line) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(line)} characters is over the limit of {MAX_FRAME_BYTES} bytes")
    head, sep, rest = line.partition("-")
    if not sep:
        raise FrameError(f"not a frame: {line[:60]!r}")
    kind = _BY_TAG.get(head)
    if kind is None:  # a stamped head, <tag>[@<sent_at>][+<marks>], or none
        kind = _STAMPED.get(head.partition("+")[0].partition("@")[0])
        if kind is None:
            raise FrameError(f"unknown frame kind {head[:20]!r}")
    if fast and kind.fast is not None:
        quick: Frame | None = kind.fast(head, rest)
        if quick is not None:
            return quick
    try:
        frame: Frame = kind.parse(head, rest)
    except (FrameError, TypeError) as e:  # (TypeError: a field of the wrong type, in the compiled build)
        raise FrameError(f"{e} in {line[:80]!r}") from None
    return frame
