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
                                                the order its group runs (absent: lamport); wire v2
                                                (below) is announced as ``<order>cumulative``
    MARKS-<c1>,<c2>,...                         wire v2, a cumulative ACK: for the k-th member of the
                                                view (pid order), the sender holds every message of it
                                                up to clock c_k that it received from that member
    MESSAGE@<sent_at>+<c1>,<c2>,...-<clock>-<pid>-<text>   (and CMESSAGE...+<marks>-...)
                                                wire v2: a message with the sender's MARKS riding on it
    HEARTBEAT-<view>[-<count>-<digest>-<clock>-<pid>]
                                                "I am alive, in view <view>" (0: not in a group yet),
                                                "delivered <count> messages in it, digest <crc32>, the
                                                last event I delivered is (<clock>, <pid>)"
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
    FLUSH-<view>-<attempt>-<coordinator>        marker: I sent everything I will send before <view>
    FLUSHED-<view>-<attempt>-<clock>            to the coordinator: my old view is fully delivered
    REMOVED-<view>                              you are not a member of my view <view>
    RESUME-<count>, RECEIVED-<count>            link layer: frames received from you so far (this
                                                incarnation); on reconnect and every few hundred frames
    PROPOSE-<json>, INSTALL-<json>              a view change proposed, a view change decided

In ``text`` a backslash, a newline and a carriage return travel as ``\\\\``, ``\\n`` and ``\\r``, so a
frame never spans lines; `parse_frame(format_frame(f)) == f` for every valid frame. The acker of an
ACK is not in the frame: it is the peer named by the connection's HELLO.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from zlib import crc32

from ..errors import FrameError
from .pid import is_pid

MAX_FRAME_BYTES = 65536
"""The one size limit: the longest frame, in bytes of its UTF-8 line without the newline. A sender
refuses a message whose frame could exceed it (`message_frame_bytes`, at any clock and send time);
a receiver takes a longer line on a member's link for a link fault."""

_MESSAGE_HEAD_MAX = len("MESSAGE@") + len("99999999999.999999") + 1 + len(str(2**63 - 1)) + 1

_VALID_PIDS: set[str] = set()  # pids already checked: a peer sees few, and checks them per frame


def _check_pid(pid: str) -> None:
    if pid in _VALID_PIDS:
        return
    if not is_pid(pid):
        raise FrameError(f"bad pid {pid!r}")
    if len(_VALID_PIDS) < 4096:
        _VALID_PIDS.add(pid)


MAX_CLOCK = 2**63 - 1


def _check_clock(clock: int) -> None:
    if type(clock) is not int or not 0 <= clock <= MAX_CLOCK:
        raise FrameError(f"bad clock {clock!r}")


MAX_VC_CHARS = 4096
"""Room a causal message's vector takes at most on the wire (`check_text` keeps it free): 256 members
with counts of up to 15 digits."""


def _check_vc(vc: tuple[int, ...]) -> None:
    if type(vc) is not tuple or not vc:
        raise FrameError(f"bad vector timestamp {vc!r}")
    for count in vc:
        if type(count) is not int or not 0 <= count <= MAX_CLOCK:
            raise FrameError(f"bad vector timestamp {vc!r}")


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
    vc: tuple[int, ...] | None = None  # causal order: the vector timestamp (counts in the view's pid order)
    marks: tuple[int, ...] | None = None  # wire v2: the sender's cumulative ACKs riding on it (`Marks`)

    def __post_init__(self) -> None:
        _check_clock(self.clock)
        _check_pid(self.pid)
        if self.vc is not None:
            _check_vc(self.vc)
        if getattr(self, "marks", None) is not None:  # (a Relay has none)
            _check_marks(self.marks)
        if type(self.text) is not str:
            raise FrameError("text must be a string")
        if len(self.text) > MAX_FRAME_BYTES:  # a cheap bound (a character is at least a byte)
            raise FrameError(f"text of {len(self.text)} characters is over the frame limit of {MAX_FRAME_BYTES} bytes")
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


MAX_MARKS = 1024
"""The most members a MARKS frame (or a message's marks) may name: far above any group TOM runs."""


def _check_marks(marks: tuple[int, ...]) -> None:
    if type(marks) is not tuple or not 1 <= len(marks) <= MAX_MARKS:
        raise FrameError("bad marks: one clock per member of the view")
    for clock in marks:
        if type(clock) is not int or not 0 <= clock <= MAX_CLOCK:
            raise FrameError(f"bad mark {clock!r}")


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


@dataclass(frozen=True, slots=True)
class Hello(Frame):
    """Opens a connection: the speaker is ``pid``, running as ``incarnation`` (new at each start), in a
    group that runs ``order`` (a lowercase word, e.g. ``sequencer``; the handshake compares it with its
    own) with wire protocol ``wire``. ``lamport`` is not written on the wire, so the course's plain
    HELLO stays what it was; wire 2 is written as the order word followed by ``cumulative`` (so a
    peer of an older TOM, which knows wire 1 only, reads another order and refuses in one line)."""

    pid: str
    incarnation: int
    order: str = "lamport"
    wire: int = 1

    def __post_init__(self) -> None:
        _check_pid(self.pid)
        if type(self.incarnation) is not int or self.incarnation < 0:
            raise FrameError(f"bad incarnation {self.incarnation!r}")
        if type(self.order) is not str or not _ORDER_WORD.fullmatch(self.order) or self.order.endswith(_WIRE2):
            raise FrameError(f"bad order {str(self.order)[:30]!r}")
        if self.wire not in (1, 2):
            raise FrameError(f"bad wire version {self.wire!r}")


_ORDER_WORD = re.compile(r"[a-z]{1,20}")
_WIRE2 = "cumulative"

WIRE_VERSION = 2
"""The wire protocol this TOM speaks in groups whose order acknowledges messages (lamport, causal):
cumulative ACKs (`Marks`), riding on messages. A sequencer group sends no ACKs: its frames are those
of wire 1 (`wire_of`)."""


def wire_of(order: str) -> int:
    """The wire version a group of ``order`` runs (what HELLO announces and the handshake compares)."""
    return 1 if order == "sequencer" else WIRE_VERSION


@dataclass(frozen=True, slots=True)
class Relay(Frame):
    """A message of (removed) member ``pid``, forwarded by a survivor during a flush."""

    clock: int
    pid: str
    text: str
    sent_at: float | None = None
    vc: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        Message.__post_init__(self)  # type: ignore[arg-type]

    @property
    def key(self) -> tuple[int, str]:
        return (self.clock, self.pid)


@dataclass(frozen=True, slots=True)
class Heartbeat(Frame):
    """The sender is alive and has view ``view`` installed (0: not a member of any group yet).

    With a digest: the sender has delivered ``count`` messages in that view, ``digest`` is the CRC-32
    chain of their keys and texts (`delivery_digest`), and ``last`` the key ``(clock, pid)`` of the last
    event it delivered; peers compare them with their own to notice a divergence. ``count`` is None
    (and ``last`` too) in the plain ``HEARTBEAT-<view>``.
    """

    view: int
    count: int | None = None
    digest: int = 0
    last: tuple[int, str] | None = None

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
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
class Join(Frame):
    """Request: add ``pid`` (running as ``incarnation``) to the group."""

    pid: str
    incarnation: int

    def __post_init__(self) -> None:
        _check_pid(self.pid)
        _check_count(self.incarnation, "incarnation")


@dataclass(frozen=True, slots=True)
class Leave(Frame):
    """Request: take ``pid`` out of the group."""

    pid: str

    def __post_init__(self) -> None:
        _check_pid(self.pid)


@dataclass(frozen=True, slots=True)
class Flush(Frame):
    """Marker for ``coordinator``'s proposal ``(view, attempt)``: the sender has sent every frame
    it will send in the view before ``view``."""

    view: int
    attempt: int
    coordinator: str

    def __post_init__(self) -> None:
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_pid(self.coordinator)


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
    """The receiver is not a member of the sender's view ``view``."""

    view: int

    def __post_init__(self) -> None:
        _check_count(self.view, "view")


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


def _check_members(members: tuple[tuple[str, int], ...], what: str) -> None:
    if type(members) is not tuple:
        raise FrameError(f"{what} must be a tuple")
    for item in members:
        if type(item) is not tuple or len(item) != 2:
            raise FrameError(f"bad {what} entry {item!r}")
        _check_pid(item[0])
        _check_count(item[1], "incarnation")


@dataclass(frozen=True, slots=True)
class Propose(Frame):
    """The coordinator proposes view ``view`` (try ``attempt``) replacing view ``view - 1``.

    ``members`` is the new view as ``(pid, incarnation)`` pairs; ``removed`` are members of the old
    view taken out as failed. Every old member not removed flushes; ``members`` minus the old view
    are joining, the old view minus ``members`` minus ``removed`` are leaving.
    """

    view: int
    attempt: int
    coordinator: str
    members: tuple[tuple[str, int], ...]
    removed: tuple[tuple[str, int], ...]
    group: str = ""

    def __post_init__(self) -> None:
        _check_group(self.group)
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_pid(self.coordinator)
        _check_members(self.members, "members")
        _check_members(self.removed, "removed")


@dataclass(frozen=True, slots=True)
class Install(Frame):
    """Decided: view ``view`` with ``members`` starts after Lamport time ``clock``.

    ``joined``, ``left`` and ``removed`` list the pids that changed; the view event is ordered at
    ``(clock + 1, coordinator)``, after everything of the old view and before everything of the new.
    ``group`` names the group's lineage (its founder and founder's incarnation): views of another
    group with the same number are never mixed up with ours. ``marks`` (only when someone joins; left
    out of the wire form when empty): for each pid, the clock of its last message the group delivered
    (joiners learn them all) — a member cut off by a partition that rejoins sends again only what came
    after.
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
    marks: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        _check_group(self.group)
        _check_count(self.view, "view")
        _check_count(self.attempt, "attempt")
        _check_pid(self.coordinator)
        _check_clock(self.clock)
        _check_members(self.members, "members")
        if type(self.marks) is not tuple:
            raise FrameError("marks must be a tuple")
        for mark in self.marks:
            if type(mark) is not tuple or len(mark) != 2:
                raise FrameError(f"bad mark {mark!r}")
            _check_pid(mark[0])
            _check_clock(mark[1])
        for group in (self.joined, self.left, self.removed):
            if type(group) is not tuple:
                raise FrameError("change lists must be tuples")
            for pid in group:
                _check_pid(pid)


def _check_group(group: str) -> None:
    if type(group) is not str or len(group) > 200 or "\n" in group:
        raise FrameError(f"bad group {group!r}")


def _check_count(value: int, what: str) -> None:
    if type(value) is not int or not 0 <= value <= MAX_CLOCK:
        raise FrameError(f"bad {what} {value!r}")


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
    if t is Acks:
        return f"ACKS-{','.join(map(str, frame.clocks))}-{frame.pid}"  # type: ignore[attr-defined]
    if t is Message or t is Relay:
        m: Message = frame  # type: ignore[assignment]
        base = "MESSAGE" if t is Message else "RELAY"
        if m.vc is not None:
            base = "C" + base
        head = base if m.sent_at is None else f"{base}@{m.sent_at:.6f}"
        if t is Message and m.marks is not None:
            head = f"{head}+{','.join(map(str, m.marks))}"
        if m.vc is not None:
            return f"{head}-{m.clock}-{m.pid}-{','.join(map(str, m.vc))}-{escape_text(m.text)}"
        return f"{head}-{m.clock}-{m.pid}-{escape_text(m.text)}"
    if t is Marks:
        return f"MARKS-{','.join(map(str, frame.marks))}"  # type: ignore[attr-defined]
    if t is Seq:
        return f"SEQ-{frame.first}-{','.join(map(str, frame.clocks))}-{frame.pid}"  # type: ignore[attr-defined]
    if t is Heartbeat:
        h: Heartbeat = frame  # type: ignore[assignment]
        if h.count is None:
            return f"HEARTBEAT-{h.view}"
        return f"HEARTBEAT-{h.view}-{h.count}-{h.digest:08x}-{h.last[0]}-{h.last[1]}"  # type: ignore[index]
    if t is Refused:
        return f"REFUSED-{escape_text(frame.reason)}"  # type: ignore[attr-defined]
    if t is Hello:
        h: Hello = frame  # type: ignore[assignment]
        if h.order == "lamport" and h.wire == 1:
            return f"HELLO-{h.pid}-{h.incarnation}"
        return f"HELLO-{h.pid}-{h.incarnation}-{h.order}{_WIRE2 if h.wire == 2 else ''}"
    if t is Join:
        return f"JOIN-{frame.pid}-{frame.incarnation}"  # type: ignore[attr-defined]
    if t is Leave:
        return f"LEAVE-{frame.pid}"  # type: ignore[attr-defined]
    if t is Flush:
        return f"FLUSH-{frame.view}-{frame.attempt}-{frame.coordinator}"  # type: ignore[attr-defined]
    if t is Flushed:
        return f"FLUSHED-{frame.view}-{frame.attempt}-{frame.clock}"  # type: ignore[attr-defined]
    if t is Removed:
        return f"REMOVED-{frame.view}"  # type: ignore[attr-defined]
    if t is Received:
        return f"RECEIVED-{frame.count}"  # type: ignore[attr-defined]
    if t is Resume:
        return f"RESUME-{frame.count}"  # type: ignore[attr-defined]
    if t is Propose or t is Install:
        body = {k: getattr(frame, k) for k in frame.__dataclass_fields__}  # type: ignore[attr-defined]
        if t is Install and not body["marks"]:
            del body["marks"]  # (optional: the wire form of a view change without joiners is unchanged)
        return f"{t.__name__.upper()}-{json.dumps(body, separators=(',', ':'))}"
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


def _fields(rest: str, n: int) -> list[str]:
    parts = rest.split("-")
    if len(parts) != n:
        raise FrameError(f"expected {n} fields")
    return parts


def _parse_json_frame(cls: type, rest: str) -> Frame:
    try:
        body = json.loads(rest)
    except ValueError:
        raise FrameError("bad JSON body") from None
    if type(body) is not dict or set(body) - {"marks"} != set(cls.__dataclass_fields__) - {"marks"}:
        raise FrameError(f"{cls.__name__.upper()} needs fields {sorted(cls.__dataclass_fields__)}")
    for key in ("members", "removed") if cls is Propose else ("members", "marks") if "marks" in body else ("members",):
        value = body[key]
        if type(value) is not list or not all(type(m) is list for m in value):
            raise FrameError(f"bad {key}")
        body[key] = tuple(tuple(m) for m in value)
    if cls is Install:
        for key in ("joined", "left", "removed"):
            if type(body[key]) is not list:
                raise FrameError(f"bad {key}")
            body[key] = tuple(body[key])
    try:
        return cls(**body)
    except TypeError as e:
        raise FrameError(str(e)) from None


_new = object.__new__
_set_ack_clock, _set_ack_pid = Ack.clock.__set__, Ack.pid.__set__  # type: ignore[attr-defined]
_MESSAGE_SETTERS = tuple(getattr(Message, f).__set__ for f in ("clock", "pid", "text", "sent_at", "vc", "marks"))


def trusted_ack(clock: int, pid: str) -> Ack:
    """An Ack from fields the caller has already validated (the hot path skips `__post_init__`)."""
    ack = _new(Ack)
    _set_ack_clock(ack, clock)
    _set_ack_pid(ack, pid)
    return ack


_set_acks_clocks, _set_acks_pid = Acks.clocks.__set__, Acks.pid.__set__  # type: ignore[attr-defined]


def trusted_acks(clocks: tuple[int, ...], pid: str) -> Acks:
    """An Acks from validated fields (two clocks or more)."""
    acks = _new(Acks)
    _set_acks_clocks(acks, clocks)
    _set_acks_pid(acks, pid)
    return acks


def trusted_message(clock: int, pid: str, text: str, sent_at: float | None,
                    vc: tuple[int, ...] | None = None, marks: tuple[int, ...] | None = None) -> Message:
    """A Message from validated fields, ``sent_at`` already at whole microseconds."""
    msg = _new(Message)
    set_clock, set_pid, set_text, set_sent, set_vc, set_marks = _MESSAGE_SETTERS
    set_clock(msg, clock)
    set_pid(msg, pid)
    set_text(msg, text)
    set_sent(msg, sent_at)
    set_vc(msg, vc)
    set_marks(msg, marks)
    return msg


def trusted_marks(marks: tuple[int, ...]) -> Marks:
    """A Marks frame from validated clocks."""
    frame = _new(Marks)
    _set_marks(frame, marks)
    return frame


_set_marks = Marks.marks.__set__  # type: ignore[attr-defined]


def _fast_counts(field: str) -> tuple[int, ...] | None:
    """``<c1>,<c2>,...`` as ints when every one is canonical (no sign, no leading zero); None
    otherwise (the general path then raises the error)."""
    parts = field.split(",")
    if len(parts) > MAX_MARKS:
        return None
    for c in parts:
        if not (c.isdigit() and c.isascii() and len(c) <= 18 and (c[0] != "0" or len(c) == 1)):
            return None
    return tuple(map(int, parts))


def _fast_ack(line: str) -> Ack | None:
    """An ACK from a pid already seen, built without re-validating what was just checked (the hot
    path: most frames are ACKs); None sends the line down the general path."""
    clock, sep, pid = line[4:].partition("-")
    if (sep and pid in _VALID_PIDS and clock.isdigit() and clock.isascii() and len(clock) <= 18
            and (clock[0] != "0" or len(clock) == 1)):
        return trusted_ack(int(clock), pid)
    return None


def _fast_acks(line: str) -> Acks | None:
    """`_fast_ack` for ACKS; None sends the line down the general path."""
    clocks, sep, pid = line[5:].partition("-")
    if not (sep and pid in _VALID_PIDS and len(line) <= MAX_FRAME_BYTES):
        return None
    parts = clocks.split(",")
    if len(parts) < 2:
        return None
    for c in parts:
        if not (c.isdigit() and c.isascii() and len(c) <= 18 and (c[0] != "0" or len(c) == 1)):
            return None
    return trusted_acks(tuple(map(int, parts)), pid)


_FAST_MESSAGE = re.compile(r"MESSAGE@([0-9]{1,11}\.[0-9]{1,6})(?:\+([0-9,]{1,20000}))?-(0|[1-9][0-9]{0,17})-([^-]*)-",
                           re.ASCII)


def _fast_message(line: str) -> Message | None:
    """A ``MESSAGE@<sent_at>-<clock>-<pid>-<text>`` from a pid already seen, its send time with at
    most 6 decimals (as TOM sends it); None sends the line down the general path (which also
    raises the errors). A pid holding ``-`` is never a known pid here: general path."""
    m = _FAST_MESSAGE.match(line)
    if m is None:
        return None
    stamp, marks_field, clock, pid = m.groups()
    if pid not in _VALID_PIDS:
        return None
    marks = None
    if marks_field is not None:
        marks = _fast_counts(marks_field)
        if marks is None:
            return None
    text = line[m.end():]
    if "\\" in text:
        try:
            text = unescape_text(text)
        except FrameError:
            return None
    return trusted_message(int(clock), pid, text, float(stamp), None, marks)


def parse_frame(line: str) -> Frame:
    """Parse one line (without its newline) into a Frame; raise FrameError if it is not one."""
    if line.startswith("ACK-"):
        ack = _fast_ack(line)
        if ack is not None:
            return ack
    elif line.startswith("ACKS-"):
        acks = _fast_acks(line)
        if acks is not None:
            return acks
    elif line.startswith("MESSAGE@") and len(line) <= MAX_FRAME_BYTES:
        msg = _fast_message(line)
        if msg is not None:
            return msg
    elif line.startswith("MARKS-") and len(line) <= MAX_FRAME_BYTES:
        marks = _fast_counts(line[6:])
        if marks is not None and marks:
            return trusted_marks(marks)
    return _parse_general(line)


def _parse_general(line: str) -> Frame:
    """`parse_frame` without the fast paths: every check, every error message."""
    if len(line) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(line)} characters is over the limit of {MAX_FRAME_BYTES} bytes")
    kind, sep, rest = line.partition("-")
    if not sep:
        raise FrameError(f"not a frame: {line[:60]!r}")
    try:
        if kind == "ACK":
            clock, sep, pid = rest.partition("-")
            if not sep:
                raise FrameError("ACK needs clock and pid")
            return Ack(_int(clock, "clock"), pid)
        if kind == "ACKS":
            clocks, sep, pid = rest.partition("-")
            if not sep:
                raise FrameError("ACKS needs clocks and pid")
            return Acks(tuple(_int(c, "clock") for c in clocks.split(",")), pid)
        if kind == "HEARTBEAT":
            if "-" not in rest:
                return Heartbeat(_int(rest, "view"))
            parts = rest.split("-", 4)
            if len(parts) != 5:
                raise FrameError("HEARTBEAT needs view, count, digest, clock and pid")
            view, count, digest, clock, pid = parts
            if len(digest) != 8 or any(c not in "0123456789abcdef" for c in digest):
                raise FrameError(f"bad digest {digest!r}")
            return Heartbeat(_int(view, "view"), _int(count, "count"), int(digest, 16), (_int(clock, "clock"), pid))
        if kind == "REFUSED":
            return Refused(unescape_text(rest))
        if kind == "MARKS":
            return Marks(tuple(_int(c, "mark") for c in rest.split(",")))
        if kind == "SEQ":
            first, clocks, pid = rest.split("-", 2) if rest.count("-") >= 2 else ("", "", "")
            if not pid:
                raise FrameError("SEQ needs a first number, clocks and a pid")
            return Seq(_int(first, "sequence number"), tuple(_int(c, "clock") for c in clocks.split(",")), pid)
        if kind.startswith(("MESSAGE", "RELAY", "CMESSAGE", "CRELAY")):
            kind, plus, marks_field = kind.partition("+")
            if kind not in ("MESSAGE", "RELAY", "CMESSAGE", "CRELAY") and not kind.startswith(
                    ("MESSAGE@", "RELAY@", "CMESSAGE@", "CRELAY@")):
                raise FrameError(f"unknown frame kind {kind[:20]!r}")
            marks = None
            if plus:
                if "RELAY" in kind:
                    raise FrameError("a relay carries no marks")
                marks = tuple(_int(c, "mark") for c in marks_field.split(","))
            base, _, stamp = kind.partition("@")
            sent_at = None
            if stamp or _:
                if not stamp.replace(".", "", 1).isdigit() or not stamp.isascii():
                    raise FrameError(f"bad send time {stamp[:30]!r}")
                sent_at = float(stamp)
                if len(stamp) - stamp.find(".") > 7 and "." in stamp:
                    sent_at = round(sent_at, 6)  # whole microseconds, as Message keeps them
                if not sent_at < 1e11:
                    raise FrameError(f"bad send time {stamp[:30]!r}")
            clock, sep, rest = rest.partition("-")
            if not sep:
                raise FrameError(f"{base} needs clock, pid and text")
            pid, text = _split_pid(rest)
            vc = None
            if base[0] == "C":
                base = base[1:]
                counts, sep, text = text.partition("-")
                if not sep:
                    raise FrameError(f"C{base} needs clock, pid, vector and text")
                vc = tuple(_int(c, "count") for c in counts.split(","))
            text = unescape_text(text)
            if base == "MESSAGE" and vc is None and marks is None and pid in _VALID_PIDS:
                # every field is checked: the clock by _int, the send time above (6 decimals on the wire)
                return trusted_message(_int(clock, "clock"), pid, text, sent_at)
            if base == "MESSAGE":
                return Message(_int(clock, "clock"), pid, text, sent_at, vc, marks)
            return Relay(_int(clock, "clock"), pid, text, sent_at, vc)
        if kind == "HELLO" or kind == "JOIN":
            pid, inc = rest.rsplit("-", 1) if "-" in rest else (rest, "")
            if kind == "HELLO" and inc.isalpha() and "-" in pid:  # HELLO-<pid>-<incarnation>-<order>
                order, wire = inc, 1
                if order.endswith(_WIRE2) and len(order) > len(_WIRE2):
                    order, wire = order[:-len(_WIRE2)], 2
                pid, inc = pid.rsplit("-", 1)
                return Hello(pid, _int(inc, "incarnation"), order, wire)
            return (Hello if kind == "HELLO" else Join)(pid, _int(inc, "incarnation"))
        if kind == "LEAVE":
            return Leave(rest)
        if kind == "REMOVED":
            return Removed(_int(rest, "view"))
        if kind == "RECEIVED":
            return Received(_int(rest, "count"))
        if kind == "RESUME":
            return Resume(_int(rest, "count"))
        if kind == "FLUSH":
            view, sep, rest = rest.partition("-")
            attempt, sep2, coordinator = rest.partition("-")
            if not (sep and sep2):
                raise FrameError("FLUSH needs view, attempt and coordinator")
            return Flush(_int(view, "view"), _int(attempt, "attempt"), coordinator)
        if kind == "FLUSHED":
            view, attempt, clock = _fields(rest, 3)
            return Flushed(_int(view, "view"), _int(attempt, "attempt"), _int(clock, "clock"))
        if kind == "PROPOSE" or kind == "INSTALL":
            return _parse_json_frame(Propose if kind == "PROPOSE" else Install, rest)
    except FrameError as e:
        raise FrameError(f"{e} in {line[:80]!r}") from None
    raise FrameError(f"unknown frame kind {kind[:20]!r}")
