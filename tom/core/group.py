"""The group: one peer's membership and delivery state, around an order (`LamportOrder`).

No I/O, no clock reads, no randomness, no printing. The shell feeds in frames (`Core.receive`),
connections (`Core.connected`), local sends (`Core.broadcast`, `Core.leave`) and elapsed time
(`Core.tick`), then takes what to send and what to deliver with `Core.ready`.

The order (`tom/core/lamport.py`) holds the pending messages and says what is deliverable; this
module numbers the deliveries, acknowledges, and runs everything about membership.

Acknowledging (wire v2, orders with ACKs): a call of `Core.ready` ends a step. What this peer received
from each member itself in the step is acknowledged then, once, by its marks (`tom.core.marks`): on
its own message if that is the step's last frame to the others, else in a MARKS frame — and before a
heartbeat (which names the last delivery) or a view change, so no frame that claims a delivery
overtakes the acknowledgement it rests on. The step is the linger: the shell calls `ready` after each
batch of events, so an acknowledgement waits for one batch at most, never for a timer. Relays are
acknowledged explicitly (ACK/ACKS), as every message is in wire 1 (``Core(wire=1)``).


Views (virtual synchrony): the group changes only through a *flush* run by the coordinator, the
smallest member not suspected and not leaving. It sends PROPOSE(v+1); every old member that is not being removed
stops multicasting, forwards (RELAY) the pending messages of removed members, and sends a FLUSH
marker to the others. Once a member holds the markers of all of them it holds every message of view
v that any of them holds, so the rest of view v is what it holds, needing only their ACKs (entries
whose body none of them holds are dropped): the flush's *last step*, the same at every survivor. A
member works it out on a copy of its order (`Accepted`) and reports FLUSHED; when all have, the
coordinator sends INSTALL(v+1, attempt, clock C), and only that INSTALL makes the last step real:
every member delivers it, then the view event at ``(C + 1, coordinator)`` — after all of view v and
before all of view v+1 — and every joiner the view event; each forwards INSTALL once so that a
coordinator crash cannot leave it half known. Nothing irrevocable happens before the decision, so a
member may follow a newer attempt with other members (after a heal, one taking back members an
earlier one removed) — but having reported FLUSHED for an attempt, it delivers nothing and reports
for no other until that attempt is known dead: its coordinator runs or follows a newer one, or is
found dead outside the new flush set (`Core._open_accepted`). A member announces each view it installs with a
HEARTBEAT on every link before any frame of that view, so a frame is always attributed to the
right view. A new attempt (a higher ``attempt``) replaces a flush stalled by a further failure.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import FrameError, UsageError
from ..codec.frames import (
    MAX_FRAME_BYTES,
    Ack,
    Acks,
    Flush,
    Flushed,
    Frame,
    Heartbeat,
    Install,
    Join,
    Leave,
    Marks,
    Message,
    Propose,
    Relay,
    Removed,
    Seq,
    trusted_ack,
    trusted_acks,
    trusted_marks,
    trusted_message,
    message_frame_bytes,
    WIRE_VERSION,
)
from ..codec.pid import pid_key, sorted_pids
from .clock import LamportClock
from .digest import DigestChain
from .modes import TRANSITIONS, Mode
from .causal import CausalOrder
from .lamport import LamportOrder
from .sequencer import SeqRun, SequencerOrder
from .records import Delivery, Divergence, PendingStatus, Ready, Status, Timing, View, ViewDelivery


# the modes as plain module names: an Enum attribute lookup costs ~0.2 us, and some checks are per frame
JOINING, NORMAL, FLUSHING, FLUSHED, LEFT, REMOVED = (
    Mode.JOINING, Mode.NORMAL, Mode.FLUSHING, Mode.FLUSHED, Mode.LEFT, Mode.REMOVED)

ORDERS = ("lamport", "sequencer", "causal")
"""The orders a group can run (`Core`'s ``order``); every member of a group runs the same."""

QUORUMS = ("majority", "none")
"""What a group does when a view change would leave fewer than a primary component of the view:
``majority`` (the default) waits for one (see `has_quorum`); ``none`` goes on, so two sides of a
partition may each go on as a group."""


def has_quorum(members: frozenset[str], reachable: Iterable[str]) -> bool:
    """Whether ``reachable`` is a primary component of a view of ``members``: a strict majority, or
    exactly half holding the view's smallest pid (the tie-breaker)."""
    reachable = set(reachable) & members
    twice = 2 * len(reachable)
    return twice > len(members) or (twice == len(members) and min(members, key=pid_key) in reachable)


_ORDER_CLASSES = {"lamport": LamportOrder, "sequencer": SequencerOrder, "causal": CausalOrder}

PROGRESS_EVERY = 256
"""In an order without ACKs (sequencer), a member also sends a heartbeat after this many deliveries:
its delivered count lets the others drop what every member delivered (`SequencerOrder.progress`)."""

NO_INCARNATION = 0
"""Incarnation of a static member: any incarnation is accepted."""

PIGGYBACK_TEXT = 12_000
"""Marks ride on a message of at most this many characters (a longer one could pass the frame limit
with them): after a longer one they go in a MARKS frame of their own."""


class _AckRun:
    """ACKs queued back to back for the same destinations, sent as one frame per origin (`Acks`).

    Only ACKs with no other frame between them share a run, so batching never moves an ACK ahead of
    a frame sent before it (or behind one sent after it): the FIFO argument is untouched."""

    __slots__ = ("clocks",)

    def __init__(self, clock: int, pid: str) -> None:
        self.clocks: dict[str, list[int]] = {pid: [clock]}

    def add(self, clock: int, pid: str) -> None:
        clocks = self.clocks.get(pid)
        if clocks is None:
            self.clocks[pid] = [clock]
        else:
            clocks.append(clock)

    def frames(self) -> list[Frame]:
        return [trusted_ack(c[0], pid) if len(c) == 1 else trusted_acks(tuple(c), pid)
                for pid, c in self.clocks.items()]


@dataclass(slots=True)
class Accepted:
    """The outcome of a flush's last step, worked out on a copy of the order and kept until the view
    change is decided: ``order`` after it, and ``out``, what it delivers (in order). Only an INSTALL
    of that very attempt makes it real (`Core._install`); until then the peer's own order is untouched,
    so it can still follow another attempt."""

    order: object
    out: list


@dataclass(slots=True)
class Flushing:
    """The view change under way: ``proposal`` and the FLUSH markers / FLUSHED reports seen so far."""

    proposal: Propose
    flush_set: frozenset[str]
    removed: frozenset[str]
    markers: set[str] = field(default_factory=set)
    flushed: dict[str, int] = field(default_factory=dict)
    done: bool = False


class Core:
    """One peer's ordering and membership state.

    `Core.static` starts as a member of a fixed group (the handout's mode: no joins, no failure
    detection); `Core.joining` starts outside any group and joins (or forms) one.
    """

    def __init__(self, me: str, members: Iterable[str] = (), *, incarnation: int = NO_INCARNATION,
                 static: bool = True, timing: Timing = Timing(), now: float = 0.0,
                 order: str = "lamport", quorum: str = "majority", wire: int = WIRE_VERSION,
                 expected: Iterable[str] = ()) -> None:
        if wire not in (1, 2):
            raise UsageError(f"unknown wire protocol version {wire!r}: 1 or 2")
        if order not in ORDERS:
            raise UsageError(f"unknown order {order!r}: choose one of {', '.join(ORDERS)}")
        if quorum not in QUORUMS:
            raise UsageError(f"unknown quorum {quorum!r}: choose one of {', '.join(QUORUMS)}")
        self.quorum = quorum == "majority"
        self.no_quorum: tuple[int, int] | None = None  # (reachable, members) while no primary component
        # the peers a first group is founded among (the neighbors file): with a quorum, only a primary
        # component of them founds one (`_maybe_form`); empty: any peer may found a group of its own
        self.expected = frozenset(expected)
        self.founding: tuple[int, int] | None = None  # (here, expected) while too few are here to found
        # founding with expected peers (a handshake, `_maybe_form`): this founder's proposal of view 1,
        # the founders that promised, and when it was sent; and this joiner's promise to a founder
        self._proposing: tuple[Propose, dict[str, int], float] | None = None
        self._promise: tuple[str, str, int, float] | None = None  # (founder, group, attempt, until)
        # the members of the last founding this peer promised: it may have been installed without
        # this peer hearing of it (a partition), so until it knows better this peer founds, or
        # promises, only with a primary component of them
        self._possible: tuple[str, int, frozenset[str]] | None = None  # (founder, its incarnation, members)
        self._found_attempts = 0
        self.marks: dict[str, int] = {}  # origin -> clock of its last message delivered here (any view)
        self._resubmit: list[tuple[int, str, float | None]] = []  # own messages cut off with a rejoin
        self._rejoining = False
        self._cut_from: tuple[str, int] = ("", 0)  # (group, view) this peer was cut off from, if any
        self.me = me
        self.incarnation = incarnation
        self.static = static
        self.timing = timing
        self.clock = LamportClock()
        self.delivered = 0
        self.now = now
        self.started_at = now
        self._ready = Ready()
        self._runs = False  # some of _ready.sends are runs, _AckRun or SeqRun (made frames by `ready`)
        self.stats = {"premature_acks": 0, "released_behind_head": 0, "divergence_alarms": 0}
        self.order = _ORDER_CLASSES[order](me, self.stats)
        self.queue = getattr(self.order, "queue", self.order)  # the pending entries (for inspection and tests)
        self._numbered = order == "sequencer"  # the order hands out `SeqRun`s to send
        # wire v2: a message received from its origin is acknowledged by a mark, `_holding[i]` = the
        # clock of the last message of the view's i-th member received from it (0: none); the marks
        # go out once per step (`_send_marks`), riding on this peer's last message if it ends the step
        self.wire = wire
        self._cumulative = wire == 2 and self.order.acknowledged
        self._index: dict[str, int] = {}  # the view's members -> their position (pid order)
        self._holding: list[int] = []
        self._marks_due = False  # a mark grew since the marks were last sent
        self._since_beat = 0  # deliveries since the last heartbeat (see PROGRESS_EVERY)
        self.view: View | None = None
        self._fast = None  # see _fast_sources
        self.mode = JOINING
        members = frozenset(members)
        self.everyone: tuple[str, ...] = ()  # the other members of the view: where multicasts go
        if static:
            if me not in members:
                raise UsageError(f"{me} is not a member of the group")
            self._set_view(View(1, members, {p: NO_INCARNATION for p in members}))
            self.order.install(tuple(sorted_pids(members)), 0, me)
            self._set_mode(NORMAL)
            if self._numbered:
                self.order.start_numbering()
        self.links: dict[str, int] = {}  # connected peers -> their incarnation
        self._known_inc: dict[str, int] = {}  # last incarnation seen of each peer, connected or not
        self.peer_view: dict[str, int] = {}  # view each peer last announced on its link
        self.last_heard: dict[str, float] = {}
        self.suspected: dict[str, float] = {}  # pid -> since when
        self.joins: dict[str, tuple[int, float]] = {}  # join requests: pid -> (incarnation, when)
        self.leaves: dict[str, float] = {}
        self.flush: Flushing | None = None
        self._early_markers: dict[tuple[int, int, str], set[str]] = {}
        self._max_attempt = -1  # highest attempt seen for the next view
        self._cut: set[str] = set()  # members whose frames are no longer taken in this view change
        # attempts (attempt, coordinator) this peer reported FLUSHED for, with their last step's
        # outcome: each may still be installed until its coordinator is known to have dropped it
        self._accepted: dict[tuple[int, str], Accepted] = {}
        self._cut_frames: list[tuple[str, Frame]] = []  # what they sent since: dropped at the install,
        # or taken after all if a newer attempt keeps them (competing coordinators after a partition)
        self.last_install: Install | None = None
        self.leaving = False
        self._held_texts: list[tuple[str, float | None]] = []
        self._early: list[tuple[str, Frame]] = []
        self._last_heartbeat = float("-inf")
        self._proposed_at = float("-inf")
        self._installed_at = now
        self._removed_told: dict[str, float] = {}
        self._not_admitted_at = float("-inf")  # when "not-admitted" was last noticed
        # divergence check: messages delivered in this view, their running digest, and the digest
        # after each of the last positions (bounded; `_check_digest`)
        self._chain = DigestChain()
        self._digested_upto = 0  # deliveries of _ready already chained into the digest
        self._claims: dict[str, tuple[int, int]] = {}  # peer -> (count, digest) in this view, not yet reached
        self._alarmed: set[tuple[str, int]] = set()
        self.alarms: list[Divergence] = []

    @classmethod
    def joining(cls, me: str, incarnation: int, timing: Timing = Timing(), now: float = 0.0,
                order: str = "lamport", quorum: str = "majority", wire: int = WIRE_VERSION,
                expected: Iterable[str] = ()) -> "Core":
        """Outside any group: join one, or found one. ``expected``: the peers a first group is founded
        among (the neighbors file); with a quorum, a group is only founded by a primary component of
        them (`has_quorum`), so that peers cut off from each other at the start never found two."""
        return cls(me, incarnation=incarnation, static=False, timing=timing, now=now, order=order,
                   quorum=quorum, wire=wire, expected=expected)

    # -- inputs --------------------------------------------------------------------------------

    def broadcast(self, text: str, sent_at: float | None = None) -> Message | None:
        """Multicast ``text``; held (returns None) while no view is installed or a flush runs.
        UsageError (nothing sent) if its frame could exceed MAX_FRAME_BYTES: `check_text`."""
        check_text(self.me, text, self.order.name)
        if self.mode in (LEFT, REMOVED):
            raise UsageError(f"this peer has {self.mode} the group")
        if self.leaving:
            raise UsageError("this peer is leaving the group")
        if self.mode != NORMAL or self.no_quorum is not None:
            self._held_texts.append((text, sent_at))
            return None
        return self._multicast(text, sent_at)

    def _multicast(self, text: str, sent_at: float | None) -> Message:
        msg = self.order.own(self.clock.tick(), text, None if sent_at is None else round(sent_at, 6))
        self._ready.sends.append((self.everyone, msg))
        if self._numbered:
            self._send_numbers()
        self._deliver_ready()
        return msg

    def _send_numbers(self) -> None:
        """Send the sequence numbers the sequencer gave, as runs (frames made by `ready`): a number
        joins the last run queued if it follows it for the same origin — only the last frame grows,
        so nothing moves ahead of a frame."""
        numbered = self.order.take_numbered()  # type: ignore[attr-defined]
        if not (numbered and self.everyone):
            return
        sends = self._ready.sends
        for seq, clock, pid in numbered:
            last = sends[-1][1] if sends else None
            if type(last) is SeqRun and last.pid == pid and last.first + len(last.clocks) == seq:
                last.clocks.append(clock)
            else:
                sends.append((self.everyone, SeqRun(seq, clock, pid)))  # type: ignore[arg-type]
        self._runs = True

    def _send_held(self) -> None:
        """Multicast what was held while no view was installed, a flush ran or the quorum was lost."""
        held, self._held_texts = self._held_texts, []
        for text, sent_at in held:
            self._multicast(text, sent_at)

    def _set_mode(self, mode: Mode) -> None:
        """Change the mode, by `TRANSITIONS` only (anything else is a bug); `_fast_sources` depends
        on it, so its cache goes too."""
        if mode not in TRANSITIONS[self.mode]:
            raise RuntimeError(f"{self.me}: illegal mode change {self.mode} -> {mode}")
        self.mode = mode
        self._fast = None

    def _set_view(self, view: View) -> None:
        self.view = view
        self._fast = None
        members = sorted_pids(view.members)
        self.everyone = tuple(p for p in members if p != self.me)
        self._index = {p: i for i, p in enumerate(members)}
        self._holding = [0] * len(members)
        self._marks_due = False

    def leave(self) -> None:
        """Ask to leave; the peer stays until its leave is delivered (notice ``"left"``)."""
        if self.mode in (LEFT, REMOVED) or self.leaving:
            return
        if self.static or self.view is None:
            self._set_mode(LEFT)
            self._ready.notices.append("left")
            return
        self.leaving = True
        if self.mode == NORMAL:
            self._request_leave()
        # otherwise the request goes out once the held texts are sent, at the next install

    def connected(self, pid: str, incarnation: int) -> None:
        """A connection to ``pid`` (running as ``incarnation``) is up."""
        self.links[pid] = incarnation
        self.last_heard[pid] = self.now
        self._fast = None
        if self._known_inc.get(pid) != incarnation:  # a new incarnation: what the old one said is void
            self._known_inc[pid] = incarnation
            self.peer_view.pop(pid, None)
            if self._possible is not None and self._possible[0] == pid and self._possible[1] != incarnation:
                self._possible = None  # its founding, installed or not, died with it
        elif self.mode == JOINING:
            # what it said before the connection broke may be stale (it joined a group meanwhile):
            # not heard on this connection yet, it neither founds a group with this peer nor is
            # founded over (`_maybe_form`); it says again what it is at once (a Join, a heartbeat)
            self.peer_view.pop(pid, None)
            self.joins.pop(pid, None)
        view = self.view
        if (view is not None and not self.static and pid in view.members
                and view.incarnations[pid] not in (incarnation, NO_INCARNATION)):
            # a restart: the member's old incarnation is certainly gone
            self.suspected[pid] = self.now - self.timing.verify_after
            self._maybe_propose()
        if self.mode == JOINING:
            self._ready.sends.append(((pid,), Join(self.me, self.incarnation)))

    def disconnected(self, pid: str) -> None:
        """The connection to ``pid`` is down (it may come back: silence decides, not this)."""
        self.links.pop(pid, None)
        self._fast = None

    def tick(self, now: float) -> None:
        """Time passed: send heartbeats, suspect silent members, drive joins and view changes."""
        self.now = now
        t = self.timing
        if (self.mode == JOINING and not self.static
                and now - max(self.started_at, self._not_admitted_at) >= t.admit_after):
            self._not_admitted_at = now
            self._ready.notices.append("not-admitted")
        if now - self._last_heartbeat >= t.heartbeat:
            self._last_heartbeat = now
            self._send_heartbeats()
            if self.mode == JOINING and self.links:
                self._ready.sends.append((tuple(self.links), Join(self.me, self.incarnation)))
            elif self.leaving and self.mode == NORMAL:
                self._request_leave()
        if self.static:
            return
        for pid, (_, when) in list(self.joins.items()):
            if now - when > 3 * t.heartbeat + t.suspect_after:
                del self.joins[pid]
        if self.mode == JOINING:
            self._maybe_form()
            return
        view = self.view
        if view is None or self.mode in (LEFT, REMOVED):
            return
        for pid in view.members:
            if pid != self.me and pid not in self.suspected:
                if not self._member_link(pid):
                    # connected as another incarnation: this member restarted, its old self is gone
                    self.suspected[pid] = now - t.verify_after
                elif now - self.last_heard.get(pid, self.started_at) >= t.suspect_after:
                    self.suspected[pid] = now
                elif self.peer_view.get(pid, -1) < view.id and now - self._installed_at >= t.suspect_after:
                    self.suspected[pid] = now  # alive, but it never installed this view (another group?)
        self._check_quorum()
        if self._accepted and self.mode == FLUSHING:
            self._deliver_ready()  # an attempt it flushed may be found dead by now (`_open_accepted`)
        self._maybe_propose()

    def receive(self, src: str, frame: Frame) -> None:
        """Handle ``frame`` from connected peer ``src``; raise FrameError (state untouched) if bad."""
        fast = self._fast
        if fast is None:
            fast = self._fast = self._fast_sources()
        t = type(frame)
        if src in fast and (t is Message or t is Marks or t is Ack or t is Acks or t is Seq) and not self.suspected:
            # the common case, with every check of the slow path already known to pass for src
            self.last_heard[src] = self.now
            if t is Marks:
                self._on_marks(src, frame.marks)  # type: ignore[attr-defined]
            elif t is Ack:
                self._on_acks(src, frame.pid, (frame.clock,))  # type: ignore[attr-defined]
            elif t is Acks:
                self._on_acks(src, frame.pid, frame.clocks)  # type: ignore[attr-defined]
            elif t is Seq:
                self._on_seq(src, frame)  # type: ignore[arg-type]
            elif frame.pid == src:  # type: ignore[attr-defined]
                self._on_message(src, frame, relayed=False)  # type: ignore[arg-type]
            else:
                raise FrameError(f"{src} relayed a message of {frame.pid} outside a flush")  # type: ignore[attr-defined]
            return
        if src == self.me:
            raise FrameError("frame from this peer's own pid")
        if src not in self.links and not self.static:
            raise FrameError(f"frame from {src}, which is not connected")
        self.last_heard[src] = self.now
        if (src in self.suspected and self._member_link(src)
                and self.peer_view.get(src, self._unannounced) >= self.view.id):  # type: ignore[union-attr]
            # (a new incarnation speaking does not clear its old one; nor does a member still in an
            # older view: it missed an install — a partition — and must be removed to join again)
            del self.suspected[src]
        handler = _HANDLERS.get(t)
        if handler is None:
            raise FrameError(f"unexpected {t.__name__} from {src}")
        handler(self, src, frame)

    def _on_heartbeat(self, src: str, frame: Heartbeat) -> None:
        if frame.view > self.peer_view.get(src, -1):
            self.peer_view[src] = frame.view
            self._fast = None
        if (self.quorum and frame.view > 0 and self.view is not None and self.mode == NORMAL
                and not self._member_link(src)):
            # a peer in a group, but not in our view: cut off by a partition and removed meanwhile
            # (it cannot know: it hears nothing else from us): tell it, so that it joins again
            self._tell_removed(src)
        if (frame.count is not None and self.view is not None and frame.view == self.view.id
                and self._member_link(src)):  # (a view 2 of another group is not ours)
            order = self.order
            order.progress(src, frame.count)
            if order.total:  # (in the causal order, peers may deliver one set in different orders)
                self._check_digest(src, frame.count, frame.digest)
            if order.acknowledged and order.total:
                self._check_skipped(src, frame.last)  # type: ignore[arg-type]

    def _on_leave(self, src: str, frame: Leave) -> None:
        if frame.pid != src:
            raise FrameError(f"{src} asked to remove {frame.pid}")
        if not self.static:
            self.leaves[src] = self.now
            self._maybe_propose()

    def ready(self) -> Ready:
        """Take everything to send, to deliver and to notice since the last call. A step ends here:
        the marks of what this peer received in it go out now (wire v2), so no member waits for this
        peer's acknowledgement longer than one step of it."""
        if self._marks_due:
            self._send_marks()
        self._chain_digests()
        out, self._ready = self._ready, Ready()
        self._digested_upto = 0
        if self._runs:
            self._runs = False
            sends: list[tuple[tuple[str, ...], Frame]] = []
            for dests, frame in out.sends:
                if type(frame) is _AckRun or type(frame) is SeqRun:
                    sends.extend([(dests, f) for f in frame.frames()])
                else:
                    sends.append((dests, frame))  # type: ignore[arg-type]
            out.sends = sends
        return out

    # -- ordered traffic -----------------------------------------------------------------------

    def _fast_sources(self) -> frozenset[str]:
        """Peers whose ACKs and MESSAGEs pass every check of `_on_ordered` as things stand now.

        Reset to None (recomputed on use) by everything that changes one of those checks: the view,
        the mode, connections, announced views, the cut.
        """
        view = self.view
        if view is None or self.mode not in (NORMAL, FLUSHING):
            return frozenset()
        return frozenset(src for src in view.members
                         if src != self.me and self.peer_view.get(src, self._unannounced) == view.id
                         and self._member_link(src) and src not in self._cut
                         and (self.static or src in self.links))

    @property
    def _unannounced(self) -> int:
        """The view a peer is taken to be in before it announced one: ours in a static group (views
        are never announced there); -1 otherwise, since a member announces every view it installs
        before sending any frame of it, so a frame before any announcement is of an older view (say,
        one re-sent after a partition healed, reaching a peer that rejoined)."""
        return self.view.id if self.static and self.view is not None else -1

    def _member_link(self, src: str) -> bool:
        view = self.view
        if view is None or src not in view.members:
            return False
        inc = view.incarnations[src]
        return inc == NO_INCARNATION or self.links.get(src, inc) == inc

    def _on_ordered(self, src: str, frame: Frame) -> None:
        t = type(frame)
        view = self.view
        if view is None:
            self._hold(src, frame)
            return
        announced = self.peer_view.get(src, self._unannounced)
        if announced > view.id:
            self._hold(src, frame)  # a frame of a view this peer has not installed yet
            return
        if announced < view.id or self.mode in (LEFT, REMOVED):
            return  # the sender is behind: what it still sends of an old view is stale
        if not self._member_link(src):
            if self.static:
                raise FrameError(f"frame from {src}, which is not a member")
            self._tell_removed(src)
            return
        if src in self._cut:
            # cut off: what a removed member sends after the flush started is not delivered (kept
            # only until the install, in case a newer proposal keeps it after all)
            if len(self._cut_frames) >= 1_000_000:
                raise FrameError("too many frames of removed members waiting")
            self._cut_frames.append((src, frame))
            return
        if t is Marks:
            self._on_marks(src, frame.marks)  # type: ignore[attr-defined]
        elif t is Ack:
            self._on_acks(src, frame.pid, (frame.clock,))  # type: ignore[attr-defined]
        elif t is Acks:
            self._on_acks(src, frame.pid, frame.clocks)  # type: ignore[attr-defined]
        elif t is Message:
            if frame.pid != src:  # type: ignore[attr-defined]
                raise FrameError(f"{src} relayed a message of {frame.pid} outside a flush")  # type: ignore[attr-defined]
            self._on_message(src, frame, relayed=False)  # type: ignore[arg-type]
        elif t is Seq:
            self._on_seq(src, frame)  # type: ignore[arg-type]
        else:
            # A relay is safe whenever it comes: had this peer delivered anything after it, it would
            # hold it already (it had the origin's ACK for that, and links are FIFO).
            if frame.pid not in view.members:  # type: ignore[attr-defined]
                raise FrameError(f"RELAY from {src} of {frame.pid}, which is not a member")  # type: ignore[attr-defined]
            self._on_message(src, frame, relayed=True)  # type: ignore[arg-type]

    def _hold(self, src: str, frame: Frame) -> None:
        if len(self._early) >= 1_000_000:
            raise FrameError("too many frames waiting for a view")
        self._early.append((src, frame))

    @property
    def member_order(self) -> tuple[str, ...]:
        """The view's members in pid order: what the positions of marks name (empty outside a view)."""
        return tuple(self._index) if self.view is not None else ()

    @property
    def delivered_key(self) -> tuple[int, tuple[str, int]]:
        """The key of the last event delivered: everything at or below it is final."""
        return self.order.final_key

    def _on_message(self, src: str, msg: Message | Relay, relayed: bool) -> None:
        order = self.order
        if not relayed and msg.marks is not None and (  # type: ignore[union-attr]
                len(msg.marks) != len(self._holding) or not order.acknowledged):  # type: ignore[union-attr]
            raise FrameError(f"{src} sent a message with {len(msg.marks)} ACK marks in a "  # type: ignore[union-attr]
                             f"{order.name} group of {len(self._holding)}")
        entry = order.message(src, msg)
        if self._cumulative and not relayed:
            # from its origin, in its order: held, with every earlier message of it (even if stale or
            # a duplicate); acknowledged by the marks at the end of this step
            holding, i = self._holding, self._index[src]
            if msg.clock > holding[i]:
                holding[i] = msg.clock
                self._marks_due = True
            if entry is not None:
                self.clock.observe(msg.clock)
                if order.may_release(entry):
                    self._deliver_ready()
            if msg.marks is not None:  # type: ignore[union-attr]
                self._on_marks(src, msg.marks)  # type: ignore[union-attr]
            return
        if entry is None:
            if not relayed and msg.marks is not None:  # type: ignore[union-attr]
                self._on_marks(src, msg.marks)  # type: ignore[union-attr]
            return  # stale, or a duplicate
        self.clock.observe(msg.clock)
        if order.acknowledged:  # wire 1, or a relay: an explicit ACK
            sends = self._ready.sends
            last = sends[-1] if sends else None
            if last is not None and last[0] is self.everyone and type(last[1]) is _AckRun:
                last[1].add(msg.clock, msg.pid)  # type: ignore[attr-defined]
            else:
                sends.append((self.everyone, _AckRun(msg.clock, msg.pid)))  # type: ignore[arg-type]
                self._runs = True
        elif self._numbered:
            self._send_numbers()
        if order.may_release(entry):
            self._deliver_ready()
        if not relayed and msg.marks is not None:  # type: ignore[union-attr]
            self._on_marks(src, msg.marks)  # type: ignore[union-attr]

    def _on_marks(self, src: str, marks: tuple[int, ...]) -> None:
        """``src``'s cumulative ACKs (wire v2, `tom.core.marks`)."""
        order = self.order
        if not order.acknowledged:
            raise FrameError(f"{src} sent ACK marks in a {order.name} group")
        touched_head, top = order.marks(src, marks)  # type: ignore[attr-defined]
        if top >= 0:
            self.clock.observe(top)
            holding, me = self._holding, self._index.get(self.me)
            if any(m > h for i, (m, h) in enumerate(zip(marks, holding)) if i != me):
                # it overtook a message on its way here (it reserves nothing: it counts on arrival)
                self.stats["premature_acks"] += 1
        if touched_head or (top >= 0 and self.flush is not None and not self.flush.done):
            self._deliver_ready()  # (in a flush's last phase, any ACK may be the one it waits for)

    def _send_marks(self) -> None:
        """Send this peer's marks to every other member: on its last message if that is the last frame
        queued (a mark on an earlier frame could pass a message stamped before the mark's clock was
        seen — the FIFO argument needs it after all of them), in a MARKS frame otherwise."""
        self._marks_due = False
        everyone = self.everyone
        if not everyone:
            return
        marks = tuple(self._holding)
        sends = self._ready.sends
        if sends:
            dests, last = sends[-1]
            if dests is everyone and type(last) is Message and len(last.text) <= PIGGYBACK_TEXT:  # type: ignore[attr-defined]
                sends[-1] = (everyone, trusted_message(last.clock, last.pid, last.text, last.sent_at,  # type: ignore[attr-defined]
                                                       last.vc, marks))  # type: ignore[attr-defined]
                return
        sends.append((everyone, trusted_marks(marks)))

    def _on_seq(self, src: str, frame: Seq) -> None:
        """Sequence numbers: from the sequencer, or relayed by a member in a flush."""
        if self.order.sequence(src, frame):
            self._deliver_ready()

    def _on_acks(self, src: str, pid: str, clocks: tuple[int, ...]) -> None:
        """``src`` holds the messages ``(c, pid)`` for each ``c`` in ``clocks`` (one ACK, or an ACKS):
        each reserves its entry if absent (a premature ACK) and counts once per acker; the Lamport
        clock observes the largest once."""
        if pid not in self.view.members:  # type: ignore[union-attr]
            raise FrameError(f"{src} acknowledged a message of {pid}, which is not a member")
        touched_head, top = self.order.acks(src, pid, clocks)
        if top >= 0:
            self.clock.observe(top)
        if touched_head or (self.flush is not None and not self.flush.done):
            self._deliver_ready()  # (in a flush's last phase, any ACK may be the one it waits for)

    def _deliver_ready(self) -> None:
        """Deliver what the order releases now (every member of the view holds it); in a flush that
        has every survivor's marker, work out its last step (`_settle`)."""
        if self.mode not in (NORMAL, FLUSHING) or (self.no_quorum is not None and self.mode == NORMAL):
            return
        flush = self.flush
        if self._accepted and self._open_accepted():
            return  # an attempt this peer flushed may still be installed: nothing leaves until then
        view = self.view
        assert view is not None
        released = self.order.release(view.members, False)
        if released:
            self._emit(released)
        if flush is not None and not flush.done and flush.markers >= flush.flush_set:
            self._settle(flush)

    def _emit(self, released: list) -> None:
        """Number and record deliveries of messages the order released (in order)."""
        view = self.view
        order = self.order
        out, delivered, vid = self._ready.deliveries, self.delivered, view.id  # type: ignore[union-attr]
        marks = self.marks
        if order.name == "lamport":
            for e in released:
                delivered += 1
                out.append(Delivery(delivered, e.clock, e.pid, e.text, e.sent_at, vid))  # type: ignore[arg-type]
                marks[e.pid] = e.clock
        else:
            vector = order.vector if order.name == "causal" else None  # type: ignore[attr-defined]
            for e in released:
                delivered += 1
                out.append(Delivery(delivered, e.clock, e.pid, e.text, e.sent_at, vid,  # type: ignore[arg-type]
                                    e.seq, vector(e.vc) if vector is not None else None))
                marks[e.pid] = e.clock
            if not order.acknowledged:
                self._since_beat += len(released)
                if self._since_beat >= PROGRESS_EVERY:
                    self._since_beat = 0
                    self._send_heartbeats()
        self.delivered = delivered
        if len(released) > 1:  # entries that were complete but waited behind a blocked head
            self.stats["released_behind_head"] += len(released) - 1

    def _settle(self, flush: Flushing) -> None:
        """The flush's last step, once it can leave nothing pending: everything a survivor holds,
        needing only the survivors' ACKs (what none of them holds is dropped). It is the same at
        every survivor, but it is only *worked out* here, on a copy of the order: it takes effect at
        the INSTALL of this attempt. Until then the peer may still follow another attempt (say, one
        that takes back members this one removed, after a partition heals) with its order as it was:
        nothing irrevocable happens before the view change is decided."""
        if not self.order.settles(flush.flush_set):
            return
        trial = copy.deepcopy(self.order, {id(self.stats): self.stats})
        out = trial.release(flush.flush_set, True)
        if trial:
            return
        p = flush.proposal
        self._accepted[(p.attempt, p.coordinator)] = Accepted(trial, out)
        self._flushed()

    def _open_accepted(self) -> bool:
        """Whether an attempt other than the current one, which this peer reported FLUSHED for, may
        still be installed. Dropped (known dead) once its coordinator runs a newer attempt, follows
        the current one (its marker came), or is found dead outside the current flush set."""
        flush = self.flush
        current = (flush.proposal.attempt, flush.proposal.coordinator) if flush is not None else None
        verified = None
        for key in list(self._accepted):
            if key == current:
                continue
            attempt, coordinator = key
            if flush is not None and (
                    (coordinator == current[1] and attempt < current[0])  # type: ignore[index]
                    or coordinator in flush.markers or coordinator == self.me):
                del self._accepted[key]
                continue
            if verified is None:
                verified = self._verified()
            if coordinator in verified and (flush is None or coordinator not in flush.flush_set):
                del self._accepted[key]
                continue
            return True
        return False

    # -- membership ----------------------------------------------------------------------------

    def _send_heartbeats(self) -> None:
        if self._marks_due:
            # a heartbeat names the last event delivered here: the marks of what this peer holds go
            # first, so that a member never sees a delivery claimed before its acknowledgement
            # (`_check_skipped` relies on it)
            self._send_marks()
        if self.links:
            if self.view is not None and self.mode == NORMAL:
                beat = Heartbeat(self.view.id, self.view_delivered, self.digest, self._last_key)
            elif self.view is not None and self.mode != JOINING:
                # a flush's last step may pass over what only removed members held: what this peer
                # delivered is compared again once the next view is installed
                beat = Heartbeat(self.view.id)
            else:
                beat = Heartbeat(0)
            self._ready.sends.append((tuple(self.links), beat))

    # -- divergence check ----------------------------------------------------------------------

    @property
    def view_delivered(self) -> int:
        """Messages delivered in the current view."""
        self._chain_digests()
        return self._chain.count

    @property
    def digest(self) -> int:
        """The running digest of the messages delivered in the current view (`DigestChain`)."""
        self._chain_digests()
        return self._chain.digest

    def _chain_digests(self) -> None:
        """Chain the digest over the messages delivered since the last call: in batches (at `ready`,
        before a view event, before any use), not on the delivery path."""
        out = self._ready.deliveries
        start = self._digested_upto
        if start == len(out):
            return
        self._chain.extend(out[start:] if start else out)
        self._digested_upto = len(out)
        if self._claims:
            self._check_claims()

    def _check_digest(self, src: str, count: int, digest: int) -> None:
        """``src`` says: after ``count`` messages of our view, its digest is ``digest``. Compare it
        with ours at the same position — now, or once we get there (`_claims`)."""
        self._chain_digests()
        if count > self._chain.count:
            self._claims[src] = (count, digest)
            return
        mine = self._chain.at(count)
        if mine is None or mine == digest:
            return
        self._alarm(src, count, mine, digest)

    def _alarm(self, src: str, position: int, mine: int, theirs: int,
               skipped: tuple[int, str] | None = None) -> None:
        key = (src, self.view.id)  # type: ignore[union-attr]
        self.stats["divergence_alarms"] += 1
        if key in self._alarmed:
            return  # once diverged, it stays so in this view: one alarm per peer and view
        self._alarmed.add(key)
        alarm = Divergence(src, key[1], position, mine, theirs, skipped)
        self.alarms = (self.alarms + [alarm])[-100:]
        self._ready.alarms.append(alarm)

    @property
    def _last_key(self) -> tuple[int, str]:
        """The key of the last event this peer delivered in this view (its view event before any
        message; ``(0, me)`` in a static group that has delivered nothing)."""
        if self._chain.last is not None:
            return self._chain.last
        last = self.last_install
        return (last.clock + 1, last.coordinator) if last is not None else (0, self.me)

    def _check_skipped(self, src: str, last: tuple[int, str]) -> None:
        """``src`` says the last event it delivered is ``last``. If that is past our head, whose body we
        hold and which ``src`` never acknowledged, ``src`` delivered past a message it does not hold:
        its ACK would have reached us before this heartbeat (links are FIFO). A divergence, seen while
        we still wait for that ACK (a digest cannot show it: we never reach its position)."""
        head = self.order.head()
        if (head is None or head.text is None or src in head.acks or self.mode != NORMAL or src in self._cut
                or (head.clock, pid_key(head.pid)) > (last[0], pid_key(last[1]))):
            return
        self._alarm(src, self.view_delivered + 1, self.digest, 0, (head.clock, head.pid))

    def _check_claims(self) -> None:
        """Compare the claims our chain has now reached (called as it grows; an install drops the
        claims of the view it ends)."""
        for src, (count, digest) in list(self._claims.items()):
            if count <= self._chain.count:
                del self._claims[src]
                self._check_digest(src, count, digest)

    def _request_leave(self) -> None:
        """Tell every member: a leaver never coordinates (see `_coordinator`), so each must know."""
        self.leaves[self.me] = self.now
        if self.everyone:
            self._ready.sends.append((self.everyone, Leave(self.me)))
        self._maybe_propose()

    def _tell_removed(self, src: str) -> None:
        if self.view is None or self.static:
            return
        if self.now - self._removed_told.get(src, float("-inf")) >= self.timing.heartbeat:
            self._removed_told[src] = self.now
            self._ready.sends.append(((src,), Removed(self.view.id)))

    def _on_removed(self, src: str, frame: Removed) -> None:
        view = self.view
        if view is None or self.static or not self._member_link(src) or frame.view <= view.id:
            return
        self._become_removed(f"{src} is in view {frame.view} without this peer")

    def _become_removed(self, why: str) -> None:
        if self.mode in (LEFT, REMOVED, JOINING):
            return
        if self.quorum and not self.leaving:
            self._rejoin()
            return
        self._set_mode(REMOVED)
        self.flush = None
        self._ready.notices.append("removed")

    # -- partitions ----------------------------------------------------------------------------

    def _check_quorum(self) -> None:
        """With a quorum: note when the members not found dead stop being a primary component of
        the view (`has_quorum`) — the peer then delivers nothing in normal mode and holds its users'
        messages — and when they are one again (a partition healed before anyone was removed)."""
        view = self.view
        if not self.quorum or self.static or view is None or self.mode not in (NORMAL, FLUSHING, FLUSHED):
            return
        # (a member that announces a newer view went on without us: it is not with us)
        reachable = {p for p in view.members - self._verified() if self.peer_view.get(p, -1) <= view.id}
        if has_quorum(view.members, reachable):
            if self.no_quorum is not None:
                self.no_quorum = None
                self._ready.notices.append("quorum")
                if self.mode == NORMAL:
                    self._send_held()
                    self._deliver_ready()
            return
        if self.no_quorum is None:
            self._ready.notices.append("no-quorum")
        self.no_quorum = (len(reachable), len(view.members))

    def _end_view_change(self) -> None:
        """Forget the view change that just ended (an install) or that this peer left (a rejoin)."""
        self.flush = None
        self._early_markers.clear()
        self._max_attempt = -1
        self._cut = set()
        self._cut_frames = []
        self._accepted.clear()

    def _rejoin(self) -> None:
        """The primary component went on without this peer (a partition): start again as a joiner,
        in the same incarnation. Its own messages not delivered here are kept: once admitted it sends
        again those the group did not deliver (`Install.marks`), then what its users entered since."""
        self._chain_digests()
        if self._marks_due:
            self._send_marks()
        self._cut_from = (self.view.group, self.view.id)  # type: ignore[union-attr]
        self._resubmit += sorted((e.clock, e.text, e.sent_at) for e in self.order  # type: ignore[misc]
                                 if e.pid == self.me and e.text is not None)
        self._set_mode(JOINING)
        self.view = None
        self._proposing = self._promise = self._possible = None
        self.everyone = ()
        self.order = type(self.order)(self.me, self.stats)
        self.queue = getattr(self.order, "queue", self.order)
        self._end_view_change()
        self.no_quorum = None
        for state in (self.suspected, self.joins, self.leaves, self._claims, self._removed_told):
            state.clear()
        self._early = []
        self._alarmed = set()
        self.last_install = None
        self._chain = DigestChain()
        self.started_at = self.now
        self._not_admitted_at = float("-inf")
        self._since_beat = 0
        self._rejoining = True
        self._ready.notices.append("rejoining")
        if self.links:
            self._ready.sends.append((tuple(self.links), Join(self.me, self.incarnation)))

    def _on_join(self, src: str, join: Join) -> None:
        if join.pid != src or self.links.get(src) != join.incarnation:
            raise FrameError(f"JOIN for {join.pid}/{join.incarnation} on the link of {src}")
        if self.static:
            return
        self.joins[src] = (join.incarnation, self.now)
        view = self.view
        if view is not None and not self._member_link(src) and self.peer_view.get(src, 0):
            self.peer_view[src] = 0  # it asks to join: it is in no group now (cut off and told so)
            self._fast = None
        if view is not None and src in view.members and view.incarnations[src] == join.incarnation:
            # already a member: it missed the INSTALL; resend it
            if self.last_install is not None and self.mode == NORMAL:
                self._ready.sends.append(((src,), self.last_install))
            return
        self._maybe_propose()

    def _maybe_form(self) -> None:
        """Form a group of one if nobody with a group answered and no smaller joining peer is here."""
        if self.now - self.started_at < self.timing.form_after or self._rejoining:
            return  # (a peer cut off from its group joins it again; it never founds another)
        recent = self.now - self.timing.suspect_after - self.timing.verify_after
        if any(v > 0 and self.last_heard.get(p, float("-inf")) > recent for p, v in self.peer_view.items()):
            return  # a group exists (even if its link is down for a moment): keep asking to join it
        if any(p not in self.peer_view for p in self.links):
            return  # connected but not heard yet
        if any(pid_key(p) < pid_key(self.me) for p in self.links):
            return  # the smallest joining peer forms the group, the others join it
        # the group starts with every connected peer that asked to join: no flush is needed, as
        # nobody has delivered anything yet
        members = {self.me: self.incarnation}
        members.update({p: inc for p, (inc, _) in self.joins.items() if self.links.get(p) == inc})
        if self.quorum and self.expected and not has_quorum(self.expected, members):
            # (Corosync's expected votes: a lone peer, or a minority cut off at the start, waits)
            founding = (len(members.keys() & self.expected), len(self.expected))
            if founding != self.founding:
                self.founding = founding
                self._ready.notices.append("no-founding-quorum")
            return
        self.founding = None
        ordered = tuple(sorted(members.items(), key=lambda kv: pid_key(kv[0])))
        if self._possibly_in_another(members):
            return  # it may be in a group founded meanwhile: it waits to hear of it
        if not (self.quorum and self.expected) or len(ordered) == 1:
            self._install_founding(0, self.clock.time, ordered, f"{self.me}/{self.incarnation}")
            return
        self._propose_founding(ordered)

    def _install_founding(self, attempt: int, clock: int, ordered: tuple[tuple[str, int], ...],
                          group: str) -> None:
        """Install view 1 of a new group of ``ordered`` (every member joins it; nobody has delivered
        anything yet, so no flush is needed)."""
        self._install(Install(1, attempt, self.me, clock, ordered, tuple(p for p, _ in ordered), (), (),
                              group=group))

    # -- founding with expected peers: a handshake -----------------------------------------------
    #
    # A Join may be stale (the link re-sends it after a heal, when its sender has joined a group on
    # the other side meanwhile), so with a quorum a founder does not install on Joins alone: it
    # proposes view 1 (PROPOSE, attempt k) to the founders it counted, each still joining answers
    # with a promise (FLUSHED of view 1) that binds it for `Timing.suspect_after`: no INSTALL of
    # another group is taken, no other founder is promised. The founder installs only once every
    # founder promised, within half that time of its proposal; else it proposes again.

    def _promised_elsewhere(self, founder: str, group: str) -> bool:
        """Whether this peer holds a live promise to another founder (or another group of it)."""
        promise = self._promise
        return promise is not None and promise[3] > self.now and (promise[0], promise[1]) != (founder, group)

    def _possibly_in_another(self, members: Iterable[str]) -> bool:
        """Whether ``members`` lack a primary component of a founding this peer promised and may be
        a member of (`_possible`)."""
        possible = self._possible
        return possible is not None and not has_quorum(possible[2], members)

    def _propose_founding(self, ordered: tuple[tuple[str, int], ...]) -> None:
        group = f"{self.me}/{self.incarnation}"
        if self._promised_elsewhere(self.me, group):
            return  # it promised another founder: that one founds, or the promise runs out
        current = self._proposing
        if (current is not None and current[0].members == ordered
                and self.now - current[2] < self.timing.suspect_after / 2):
            return  # under way
        self._found_attempts += 1
        proposal = Propose(1, self._found_attempts, self.me, ordered, (), group)
        self._proposing = (proposal, {self.me: self.clock.time}, self.now)
        self._ready.sends.append((tuple(p for p, _ in ordered if p != self.me), proposal))

    def _on_founding_proposal(self, src: str, p: Propose) -> None:
        """A founder's proposal of view 1 reaches this joining peer: promise, unless bound elsewhere."""
        members = dict(p.members)
        if (p.view != 1 or p.coordinator != src or self._rejoining or p.removed
                or members.get(self.me) != self.incarnation or self._promised_elsewhere(src, p.group)):
            return
        possible = self._possible
        if possible is not None and possible[0] != src and not has_quorum(possible[2], members):
            return
        self._promise = (src, p.group, p.attempt, self.now + self.timing.suspect_after)
        self._possible = (src, members[src], frozenset(members))
        self._ready.sends.append(((src,), Flushed(1, p.attempt, self.clock.time)))

    def _on_founding_promise(self, src: str, f: Flushed) -> None:
        """A founder's promise came: install view 1 once every founder promised, in time."""
        current = self._proposing
        if current is None or f.view != 1 or f.attempt != current[0].attempt:
            return
        proposal, promised, at = current
        if src not in dict(proposal.members):
            return
        promised[src] = f.clock
        if len(promised) < len(proposal.members):
            return
        self._proposing = None
        if self.now - at >= self.timing.suspect_after / 2:
            return  # too late to be sure every promise still holds: the next tick proposes again
        self._install_founding(proposal.attempt, max(promised.values()), proposal.members, proposal.group)

    def _verified(self) -> set[str]:
        """Members suspected for longer than the verification period."""
        limit = self.now - self.timing.verify_after
        return {p for p, since in self.suspected.items() if since <= limit}

    def _coordinator(self) -> str | None:
        """The smallest member not found dead and not known to be leaving (the smallest alive if all
        are leaving). A leaver does not coordinate its own leave: it would deliver the view it leaves
        in and exit, and if its INSTALL died with it the others would install another view v+1. Run
        by a remaining member, the decision is held by a survivor before the leaver delivers it."""
        view = self.view
        if view is None:
            return None
        alive = [p for p in view.members if p not in self._verified()]
        staying = [p for p in alive if p not in self.leaves]
        return min(staying or alive, key=pid_key) if alive else None

    def _maybe_propose(self) -> None:
        view = self.view
        if self.static or view is None or self.mode not in (NORMAL, FLUSHING, FLUSHED):
            return
        if self._coordinator() != self.me:
            return
        verified = self._verified() & view.members
        flush = self.flush
        if flush is None:
            joins = {p: inc for p, (inc, _) in self.joins.items()
                     if p in self.links and self.links[p] == inc and view.incarnations.get(p) != inc
                     and self.peer_view.get(p, 0) == 0}  # still joining: not in a group of its own
            leaves = set(self.leaves) & view.members
            restarted = {p for p in joins if p in view.members}
            if restarted - verified:
                return  # the old incarnation of a restarted peer must be removed first (it is suspected)
            if not (joins or leaves or verified):
                return
            removed = verified
            members = {p: i for p, i in view.incarnations.items() if p not in removed and p not in leaves}
            members.update(joins)
            attempt = self._max_attempt + 1
            if not self._primary_without(removed):
                return  # wait: for the network, or to be told to rejoin
        else:
            p = flush.proposal
            if p.coordinator == self.me and self.now - self._proposed_at >= self.timing.heartbeat:
                self._resend_proposal()
            if not (verified & flush.flush_set or p.coordinator in verified):
                return
            removed = set(flush.removed) | verified
            if not self._primary_without(removed):
                # not without the members this flush removed: take back those heard from again
                # (a partition healed meanwhile), if that makes a primary component
                removed = verified | (set(flush.removed) & set(self.suspected))
                if not self._primary_without(removed):
                    return
            members = {m: i for m, i in p.members if m not in removed}
            members.update({m: view.incarnations[m] for m in flush.removed if m not in removed})
            attempt = self._max_attempt + 1
        proposal = Propose(
            view.id + 1, attempt, self.me,
            tuple(sorted(members.items(), key=lambda kv: pid_key(kv[0]))),
            tuple(sorted(((p, view.incarnations[p]) for p in removed), key=lambda kv: pid_key(kv[0]))),
            view.group,
        )
        self._resend_proposal(proposal)  # first: the removed must hear it too, and the view may change now
        self._on_propose(self.me, proposal)

    def _primary_without(self, removed: set[str]) -> bool:
        """Whether a view change removing ``removed`` may go ahead: always without a quorum; with one,
        if the members that stay and were heard from lately (not even suspected, so that a side cut off
        does not count on the other before it finds it gone) are a primary component (`has_quorum`)."""
        view = self.view
        assert view is not None
        return not self.quorum or has_quorum(view.members, view.members - removed - set(self.suspected))

    def _resend_proposal(self, proposal: Propose | None = None) -> None:
        """(Re)send this coordinator's proposal: a member may have ignored it while it still followed
        a coordinator it had not yet found dead."""
        view = self.view
        if proposal is None:
            if self.flush is None:
                return
            proposal = self.flush.proposal
        self._proposed_at = self.now
        targets = (set(view.members) | {m for m, _ in proposal.members}) - {self.me}  # type: ignore[union-attr]
        self._ready.sends.append((tuple(sorted_pids(targets)), proposal))

    def _on_propose(self, src: str, p: Propose) -> None:
        view = self.view
        if view is None and self.mode == JOINING and not self.static:
            self._on_founding_proposal(src, p)
            return
        if view is None or self.static or self.mode in (LEFT, REMOVED):
            return
        if p.view == view.id and self.last_install is not None and src != self.me:
            self._ready.sends.append(((src,), self.last_install))  # it missed our INSTALL: here it is
            return
        if p.view != view.id + 1 or p.coordinator != src or p.group != view.group:
            return
        flush = self.flush
        self._max_attempt = max(self._max_attempt, p.attempt)
        if flush is not None:
            current = flush.proposal
            if (p.attempt, p.coordinator) == (current.attempt, current.coordinator):
                return  # the same proposal again
            # follow a newer attempt, or whoever this peer now takes for the coordinator
            if p.attempt <= current.attempt and not (src == self._coordinator() != current.coordinator):
                return
        removed = frozenset(pid for pid, _ in p.removed)
        if self.me in removed:
            if self.quorum:
                return  # only a proposal: if it completes, a member of the new view will say so
            self._become_removed(f"{src} removed this peer")
            return
        flush_set = frozenset(view.members - removed)
        if self.me not in flush_set:
            return
        early = self._early_markers.pop((p.view, p.attempt, p.coordinator), set())
        kept = self._cut - removed  # cut by an earlier proposal, a member in this one
        self._cut = set(removed)
        self.flush = Flushing(p, flush_set, removed, {self.me} | (early & flush_set))
        self._set_mode(FLUSHING)
        if self._numbered:
            self.order.stop_numbering()  # type: ignore[attr-defined]
        sends = self._ready.sends
        others = tuple(sorted_pids(flush_set - {self.me}))
        sends.extend([(others, frame) for frame in self.order.relays(removed)])
        sends.append((others, Flush(p.view, p.attempt, p.coordinator)))
        if kept:
            frames = self._cut_frames
            self._cut_frames = [(s, f) for s, f in frames if s not in kept]
            for s, f in frames:
                if s in kept and s in self.links:
                    try:
                        self._on_ordered(s, f)
                    except FrameError:
                        pass
        self._deliver_ready()

    def _on_flush(self, src: str, f: Flush) -> None:
        flush = self.flush
        p = flush.proposal if flush is not None else None
        if p is None or (f.view, f.attempt, f.coordinator) != (p.view, p.attempt, p.coordinator):
            view = self.view
            if view is not None and f.view == view.id + 1 and len(self._early_markers) < 256:
                # its proposal has not reached this peer yet (it came on another link)
                self._early_markers.setdefault((f.view, f.attempt, f.coordinator), set()).add(src)
            return
        if src in flush.flush_set:
            flush.markers.add(src)
            self._deliver_ready()

    def _flushed(self) -> None:
        flush = self.flush
        assert flush is not None
        flush.done = True
        self._set_mode(FLUSHED)
        p = flush.proposal
        report = Flushed(p.view, p.attempt, self.clock.time)
        if p.coordinator == self.me:
            self._on_flushed(self.me, report)
        else:
            self._ready.sends.append(((p.coordinator,), report))

    def _on_flushed(self, src: str, f: Flushed) -> None:
        if self.view is None and self.mode == JOINING:
            self._on_founding_promise(src, f)
            return
        flush = self.flush
        if flush is None or flush.proposal.coordinator != self.me:
            return
        p = flush.proposal
        if (f.view, f.attempt) != (p.view, p.attempt) or src not in flush.flush_set:
            return
        flush.flushed[src] = f.clock
        if set(flush.flushed) >= flush.flush_set:
            view = self.view
            assert view is not None
            new = {m for m, _ in p.members}
            joined = {m for m, inc in p.members if view.incarnations.get(m) != inc}
            marks = ()
            if joined:  # (what this attempt's last step delivers counts: it is delivered before the view)
                upto = dict(self.marks)
                for e in self._accepted[(p.attempt, self.me)].out:
                    upto[e.pid] = e.clock
                # every pid's, not only the joiners': a joiner learns them all, so that a member that
                # joined after some peer was cut off still knows, as coordinator, what the group
                # delivered of that peer when it admits it again (else it sends it again)
                marks = tuple(sorted(upto.items()))
            install = Install(
                p.view, p.attempt, self.me, max(flush.flushed.values()), p.members,
                tuple(sorted_pids(joined)),
                tuple(sorted_pids(view.members - new - flush.removed)),
                tuple(sorted_pids(flush.removed)),
                view.group,
                marks,
            )
            self._install(install)

    def _on_install(self, src: str, i: Install) -> None:
        view = self.view
        if self.static or self.mode in (LEFT, REMOVED):
            return
        if view is None:
            if dict(i.members).get(self.me) != self.incarnation:
                return
            if self._promised_elsewhere(i.coordinator if i.view == 1 else "", i.group):
                return  # bound to another founder for now (it may install us); this group asks again
            if i.group == self._cut_from[0] and i.view <= self._cut_from[1]:
                return  # a view from before this peer was cut off (a member that did not know yet)
        elif i.view != view.id + 1 or i.group != view.group or self.mode not in (FLUSHING, FLUSHED):
            return
        self._install(i)

    def _install(self, i: Install) -> None:
        if self._marks_due:
            self._send_marks()  # what was received in the old view, before anything of the next
        old = self.view
        members = dict(i.members)
        if old is not None and self.me not in members and self.me not in i.left:
            # removed: it never flushed for this view (it would have been told at the proposal), so
            # it did not deliver all of the old view and must not record the view as if it had
            self._become_removed(f"{i.coordinator} installed view {i.view} without this peer")
            return
        if old is not None:
            accepted = self._accepted.get((i.attempt, i.coordinator))
            if accepted is None:
                # an attempt this peer never flushed (or took for dead): it cannot end the old view
                # as the others did, so it is out of this view, like a member cut off
                self._become_removed(f"{i.coordinator} installed view {i.view} from an attempt this peer "
                                     "did not flush")
                return
            # the flush's last step takes effect now: the old view's rest, then the view
            self.order = accepted.order  # type: ignore[assignment]
            self.queue = getattr(self.order, "queue", self.order)
            if accepted.out:
                self._emit(accepted.out)
        for pid, clock in i.marks:
            if clock > self.marks.get(pid, -1):
                self.marks[pid] = clock
        self._rejoining = False
        if old is None and self._resubmit:
            # admitted again after a partition: what the group delivered of ours is up to our mark
            mark = self.marks.get(self.me, -1)
            self._held_texts[:0] = [(text, sent_at) for clock, text, sent_at in self._resubmit if clock > mark]
            self._resubmit = []
        self.clock.time = max(self.clock.time, i.clock + 1)
        self.delivered += 1
        self.order.install(tuple(sorted_pids(members)), i.clock + 1, i.coordinator)
        self._since_beat = 0
        self._ready.deliveries.append(ViewDelivery(
            self.delivered, i.clock + 1, i.coordinator, i.view, tuple(sorted_pids(members)),
            i.joined, i.left, i.removed, self.order.name))
        self._set_view(View(i.view, frozenset(members), members, i.coordinator, i.group))
        self._installed_at = self.now
        self._chain_digests()  # what was delivered in the old view belongs to its chain
        self._chain = DigestChain()
        self._claims.clear()
        self.last_install = i
        self._end_view_change()
        old_incs = old.incarnations if old is not None else {}
        for pid in list(self.suspected):
            if members.get(pid) != old_incs.get(pid):
                del self.suspected[pid]  # gone, or a new incarnation: the suspicion was about another
        for pid in members:
            self.joins.pop(pid, None)
            self.last_heard.setdefault(pid, self.now)
            if pid not in (old.members if old is not None else ()):
                self.last_heard[pid] = self.now
        for pid in list(self.leaves):
            if pid not in members:
                del self.leaves[pid]
        # forward the decision once, so that it survives the coordinator; then announce the view
        told = tuple(sorted_pids((set(members) | set(i.left)) - {self.me, i.coordinator}))
        if told:
            self._ready.sends.append((told, i))
        if self.me not in members:  # its leave
            self._set_mode(LEFT)
            self._ready.notices.append(self.mode)
            return
        self._set_mode(NORMAL)
        self.founding = None
        self._proposing = self._promise = self._possible = None
        if self.no_quorum is not None:  # a view was installed: its members are a primary component
            self.no_quorum = None
            self._ready.notices.append("quorum")
        if self._numbered:
            self.order.start_numbering()  # type: ignore[attr-defined]
        # the view announcement must precede this view's frames on every link, connected or not
        announce = tuple(sorted_pids(set(self.links) | set(self.everyone)))
        if announce:
            self._ready.sends.append((announce, Heartbeat(i.view, 0, 0, self._last_key)))
        early, self._early = self._early, []
        for src, frame in early:
            if src in self.links:
                try:
                    self.receive(src, frame)
                except FrameError:
                    pass
        self._send_held()
        if self.leaving:
            self._request_leave()
        self._maybe_propose()

    # -- inspection ----------------------------------------------------------------------------

    def backlog(self) -> int:
        """Messages accepted but not yet delivered (pending here or held until a view is installed)."""
        return len(self.order) + len(self._held_texts)

    def undelivered_own(self) -> int:
        """Messages entered at this peer and not delivered here (held, or pending): what a stop now
        would leave undelivered, as far as this peer knows."""
        return len(self._held_texts) + sum(1 for e in self.order if e.pid == self.me and e.text is not None)

    def status(self) -> Status:
        view = self.view
        members = sorted_pids(view.members) if view is not None else []
        pending = tuple(
            PendingStatus(e.clock, e.pid, e.text,
                          tuple(p for p in members if p in e.acks),
                          tuple(p for p in members if p not in e.acks) if self.order.acknowledged else (),
                          self.order.waits(e, members), e.seq)
            for e in self.order
        )
        return Status(self.me, self.mode, self.clock.time, view, self.delivered, pending,
                      tuple(sorted_pids(self.suspected)), dict(self.last_heard), self.now,
                      tuple(self.alarms), self.view_delivered, self.digest, self.order.name, self.no_quorum)


def check_text(me: str, text: str, order: str = "lamport") -> None:
    """UsageError, in one line, if ``text`` cannot be multicast by ``me`` in a group of ``order``: its
    frame could exceed MAX_FRAME_BYTES (at any clock, with any vector), or it is not valid Unicode."""
    if type(text) is not str:
        raise UsageError("a message text must be a string")
    try:
        size = message_frame_bytes(me, text, vector=order == "causal")
    except UnicodeEncodeError:
        raise UsageError("message not sent: its text is not valid Unicode (a lone surrogate)") from None
    if size > MAX_FRAME_BYTES:
        raise UsageError(f"message not sent: its frame would take {size:,} bytes, over the limit of "
                         f"{MAX_FRAME_BYTES:,} (about {MAX_FRAME_BYTES - size + len(text.encode()):,} bytes "
                         f"of UTF-8 text; backslashes and line breaks count twice)")


_HANDLERS = {  # the slow path of `Core.receive`: one handler per frame type (link frames never get here)
    Ack: Core._on_ordered,
    Acks: Core._on_ordered,
    Message: Core._on_ordered,
    Relay: Core._on_ordered,
    Heartbeat: Core._on_heartbeat,
    Join: Core._on_join,
    Leave: Core._on_leave,
    Marks: Core._on_ordered,
    Propose: Core._on_propose,
    Flush: Core._on_flush,
    Flushed: Core._on_flushed,
    Install: Core._on_install,
    Removed: Core._on_removed,
    Seq: Core._on_ordered,
}
