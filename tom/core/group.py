"""The group: one peer's membership and delivery state, driving its parts (`Core`).

No I/O, no clock reads, no randomness, no printing. The shell feeds in frames (`Core.receive`),
connections (`Core.connected`), local sends (`Core.broadcast`, `Core.leave`) and elapsed time
(`Core.tick`), then takes what to send and what to deliver with `Core.ready`.

`Core` owns the inputs, the mode and the view, and hands each frame to the handler that the table
`HANDLERS[(static, mode)][frame kind]` names for the mode it is in; the state lives in parts it holds,
which decide (docs/design/architecture.md, "Inside the core"), while `Core` applies what they decide — it
sends their frames, changes its mode, and says their notices:

* `Traffic` and its order (`tom.core.order`): the pending messages and what is deliverable;
* `Outbox`: the step's frames, deliveries and notices, and this peer's marks (what it acknowledges);
* `Peers`: connections, announced views, join and leave requests, and who is told it was removed;
* `FailureDetector`: who was heard when, who is suspected, who is dead;
* `Reach`: the shared suspicions (SUSPECT, SEES) and the joiners held back;
* `ViewChange`: the flush under way, the ballots, the attempts reported, the frames of members cut off;
* `Founding`: the founding handshake of the first group;
* `DivergenceCheck`: the digests of what this peer delivered, its heartbeat, and the claims of others;
* `Held`, `EarlyFrames`: the users' texts held, and the frames of a view not installed yet;
* `tom.core.admission`, `tom.core.quorum`: the admission, quorum and coordinator rules, as functions.

Acknowledging (wire v2, orders with ACKs): a call of `Core.ready` ends a step. What this peer
received from each member itself in the step is acknowledged then, once, by its marks — before a
heartbeat (which names the last delivery) or a view change too, so no frame that claims a delivery
overtakes the acknowledgement it rests on. Relays are acknowledged explicitly (ACK/ACKS), as every
message is in wire 1 (``Core(wire=1)``).

Views (virtual synchrony, `tom.core.viewchange`): the group changes only through a flush run by the
coordinator (`tom.core.quorum.coordinator`), and is a consensus: an attempt is a ballot; every
coordinator but the view's smallest member at attempt 0 first gets PROMISEs from a primary component
(`_on_prepare`, `_on_promise`) and carries on an attempt that may have been decided. Nothing
irrevocable happens before the INSTALL: a member may follow a higher ballot (after a heal, one taking
back members an earlier one removed) — but it reports FLUSHED only for the ballot it promised, and,
having reported one or promised one, delivers nothing in its view until the view change ends. Every member delivers the INSTALL's view event at
``(C + 1, coordinator)`` — after all of view v and before all of view v+1 — and forwards the INSTALL
once, so that a coordinator crash cannot leave it half known. A member announces each view it
installs with a HEARTBEAT on every link before any frame of that view, so a frame is always
attributed to the right view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from ..codec.frames import (
    MAX_FRAME_BYTES, WIRE_VERSION, Ack, Acks, CatchUp, Direct, Flush, Flushed, Frame, Heartbeat, History, Install, Join, Leave,
    Marks, Message, Progress, Prepare, Promise, Propose, Relay, Removed, Sees, Seq, Suspect,
)
from ..codec.frames import escape_text
from ..codec.pid import sorted_pids
from ..errors import FrameError, UsageError
from . import admission, notices
from .admission import Admission
from .clock import LamportClock
from .detector import FailureDetector
from .dispatch import TABLE, Admit
from .divergence import DivergenceCheck
from .early import Early, EarlyFrames
from .founding import Founding
from .held import Held
from .modes import TRANSITIONS, Mode
from .order import ORDERS, Order, pending_status
from .outbox import Outbox
from .peers import NO_INCARNATION, Peers
from .quorum import coordinator, lost_quorum, quorum_news
from .reach import Reach, sees
from .records import Ready, Status, Timing, View
from .texts import check_text
from .traffic import Traffic
from .viewchange import ViewChange, audience

# the modes as plain module names: an Enum attribute lookup costs ~0.2 us, and some checks are per frame
# (Final: C statics in the compiled build)
JOINING: Final = Mode.JOINING
NORMAL: Final = Mode.NORMAL
FLUSHING: Final = Mode.FLUSHING
FLUSHED: Final = Mode.FLUSHED
LEFT: Final = Mode.LEFT
REMOVED: Final = Mode.REMOVED

TAKEN = Admission.TAKEN
MEMBER = (NORMAL, FLUSHING, FLUSHED)  # the modes of a member of a view

QUORUMS = ("majority", "none")
"""What a group does when a view change would leave fewer than a primary component of the view:
``majority`` (the default) waits for one (`has_quorum`); ``none`` goes on, so two sides of a
partition may each go on as a group."""

def check_options(wire: int, order: str, quorum: str) -> None:
    """UsageError (one line) unless ``wire``, ``order`` and ``quorum`` name what a core can run."""
    if wire not in (1, 2):
        raise UsageError(f"unknown wire protocol version {wire!r}: 1 or 2")
    if order not in ORDERS:
        raise UsageError(f"unknown order {order!r}: choose one of {', '.join(ORDERS)}")
    if quorum not in QUORUMS:
        raise UsageError(f"unknown quorum {quorum!r}: choose one of {', '.join(QUORUMS)}")


class Core:
    """One peer's ordering and membership state. `Core(me, members)` starts as a member of a fixed
    group (static: the handout's mode, no joins, no failure detection); `Core.joining` starts outside
    any group and joins (or founds) one (and says so to its links if it leaves before: `Founding.left`)."""

    def __init__(self, me: str, members: Iterable[str] = (), *, incarnation: int = NO_INCARNATION,
                 static: bool = True, timing: Timing = Timing(), now: float = 0.0,
                 order: str = "lamport", quorum: str = "majority", wire: int = WIRE_VERSION,
                 expected: Iterable[str] = (), last_man_standing: bool = False, resume: tuple[int, str] = (0, "")) -> None:
        check_options(wire, order, quorum)
        self.me, self.incarnation, self.static, self.timing = me, incarnation, static, timing
        self.quorum, self.wire = quorum == "majority", wire
        self.now = now
        self.started_at = now
        self.stats = {"premature_acks": 0, "released_behind_head": 0, "divergence_alarms": 0}
        self.out = Outbox()
        self.traffic = Traffic(me, order, wire, self.stats, self.out)
        self.detector = FailureDetector(timing.verify_after)
        self.change = ViewChange(self.detector.trips)
        self.founding = Founding(expected, timing.suspect_after, self.detector.trips, self.quorum, last_man_standing, resume)
        self.file = self.founding.file
        self.divergence = DivergenceCheck(self.stats)
        self.reach = Reach()
        self.mode = JOINING
        self._handlers = HANDLERS[(static, JOINING)]
        self.view: View | None = None
        # the sources `receive` trusts (`admission.trusted`): None (recomputed on use) after anything
        # that changes what it rests on — the view, the mode, connections, announced views, the cut
        self._trusted: frozenset[str] | None = None
        self.no_quorum: tuple[int, int] | None = None  # (reachable, members) while no primary component
        self.peers = Peers()
        self.last_install: Install | None = None
        self.leaving = False
        self.held = Held()
        self.early = EarlyFrames()
        self._last_heartbeat = float("-inf")
        self._installed_at = now
        if static:
            members = frozenset(members)
            if me not in members:
                raise UsageError(f"{me} is not a member of the group")
            self._set_view(View(1, members, {p: NO_INCARNATION for p in members}))
            self.traffic.order.install(tuple(sorted_pids(members)), 0, me)
            self._set_mode(NORMAL)
            self.traffic.order.start_numbering()

    @classmethod
    def joining(cls, me: str, incarnation: int, timing: Timing = Timing(), now: float = 0.0,
                order: str = "lamport", quorum: str = "majority", wire: int = WIRE_VERSION,
                expected: Iterable[str] = (), last_man_standing: bool = False, resume: tuple[int, str] = (0, "")) -> "Core":
        """Outside any group: join one, or found one. ``expected``: the peers a first group is founded
        among (the neighbors file); with a quorum, founding and every view change keep a primary
        component of them, unless ``last_man_standing`` (`tom.core.quorum`). ``resume``: `Founding`'s."""
        return cls(me, incarnation=incarnation, static=False, timing=timing, now=now, order=order,
                   quorum=quorum, wire=wire, expected=expected, last_man_standing=last_man_standing, resume=resume)

    # -- what the shell and tools read -----------------------------------------------------------

    @property
    def order(self) -> Order:
        """The order of the current view: its pending messages (`Traffic`)."""
        return self.traffic.order

    @property
    def clock(self) -> LamportClock:
        return self.traffic.clock

    @property
    def delivered(self) -> int:
        """Events (messages and views) delivered here so far."""
        return self.traffic.delivered

    @property
    def member_order(self) -> tuple[str, ...]:
        """The view's members in pid order: what the positions of marks name (empty outside a view)."""
        return tuple(self.out.index) if self.view is not None else ()

    def __getstate__(self) -> dict[str, Any]:
        """Plain data only (for copies and `tom check`'s fingerprints): the handler table is the
        mode's, and the trusted sources are recomputed on use."""
        return {**{k: v for k, v in self.__dict__.items() if k != "_handlers"}, "_trusted": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._handlers = HANDLERS[(self.static, self.mode)]

    def drop_caches(self) -> None:
        """Forget what is recomputed on use (for tools that compare states: `tom check`)."""
        self._trusted = None
        self.traffic.drop_caches()

    # -- inputs --------------------------------------------------------------------------------

    def broadcast(self, text: str, sent_at: float | None = None) -> Message | None:
        """Multicast ``text``; held (returns None) while no view is installed or a flush runs.
        UsageError (nothing sent) if its frame could exceed MAX_FRAME_BYTES: `check_text`."""
        check_text(self.me, text, self.traffic.order.name)
        if self.mode in (LEFT, REMOVED):
            raise UsageError(f"this peer has {self.mode} the group")
        if self.leaving:
            raise UsageError("this peer is leaving the group")
        if self.mode != NORMAL or self.no_quorum is not None or self.change.promised is not None:
            self.held.hold(text, sent_at)
            return None
        return self._multicast(text, sent_at)

    def leave(self) -> None:
        """Ask to leave; the peer stays until its leave is delivered (notice `notices.Left`)."""
        if self.mode in (LEFT, REMOVED) or self.leaving:
            return
        if self.static or self.view is None:
            self.out.send_some(() if self.static else tuple(self.peers.links), Leave(self.me))
            self._set_mode(LEFT)
            self.out.notice(notices.Left())
            return
        self.leaving = True
        if self.mode == NORMAL:
            self._request_leave()
        # otherwise the request goes out once the held texts are sent, at the next install

    def connected(self, pid: str, incarnation: int) -> None:
        """A connection to ``pid`` (running as ``incarnation``) is up (`Peers.connected`)."""
        if self.peers.connected(pid, incarnation, self.mode == JOINING):
            self.founding.restarted(pid, incarnation)
        self._trusted = None
        view = self.view
        if self.detector.connected(pid, incarnation, None if self.static else view, self.now):
            self._maybe_propose()  # (a member restarted: its old incarnation is gone)
        if self.mode == JOINING:
            self.detector.trips.ask(("join", 0, 0), self.now)
            self.out.send((pid,), self.founding.join(self.me, self.incarnation))
        elif view is not None:
            self._replay(self.early.take(pid))

    def _replay(self, early: list[Early]) -> None:
        """Take the frames held for a view that `EarlyFrames.replay` says to take now, as if they came now."""
        for src, announced, frame in self.early.replay(early, self.peers, self.static):
            if announced is not None:
                self.peers.announced(src, *announced)
                self._trusted = None
            try:
                self.receive(src, frame)
            except FrameError:
                pass

    def disconnected(self, pid: str) -> None:
        """The connection to ``pid`` is down (it may come back: silence decides, not this)."""
        self.peers.links.pop(pid, None)
        self._trusted = None

    def tick(self, now: float) -> None:
        """Time passed: send heartbeats, suspect silent members, drive joins and view changes."""
        self.now = now
        t = self.timing
        if self.mode == JOINING and not self.static:
            self.out.notice(self.reach.not_admitted(now, self.started_at, t.admit_after))
        if now - self._last_heartbeat >= t.heartbeat:
            self._last_heartbeat = now
            self._send_heartbeats()
            if self.mode == JOINING:
                self.out.send_some(tuple(self.peers.links), self.founding.join(self.me, self.incarnation))
            elif self.leaving and self.mode == NORMAL:
                self._request_leave()
        if self.static:
            return
        self.peers.expire_joins(now, 3 * t.heartbeat + t.suspect_after)
        if self.mode == JOINING:
            self._maybe_form()
            return
        view = self.view
        if view is None or self.mode in (LEFT, REMOVED):
            return
        self.detector.sweep(view, self.me, now, t.suspect_after, self.started_at, self._installed_at, self.peers)
        self._check_quorum()
        self._report_unreached()
        if self.change.outcomes and self.mode == FLUSHING:
            self._deliver_ready()  # an attempt it flushed may be found dead by now (`open_outcome`)
        self._maybe_propose()

    def receive(self, src: str, frame: Frame) -> None:
        """Handle ``frame`` from connected peer ``src``: by `HANDLERS` of this peer's mode. FrameError
        for a frame no mode takes, or a frame that breaks the protocol."""
        handler = self._handlers.get(type(frame))
        trusted = self._trusted
        if trusted is None:
            trusted = self._trusted = admission.trusted(self.view if self.mode in (NORMAL, FLUSHING) else None, self.me,
                                                        self.peers, self.change.cut, self.static)
        if src in trusted and type(handler) is Ordered and not self.detector.suspected:
            # the common case: every check of the slow path is known to pass for src
            self.detector.last_heard[src] = self.now
            if type(frame) is Message:  # (the busiest kind: a direct call of what its handler takes it by,
                self._on_message(src, frame)  # `dispatch.ORDERED`)
            else:
                handler.take(self, src, frame)
            return
        if src == self.me:
            raise FrameError("frame from this peer's own pid")
        if src not in self.peers.links and not self.static:
            raise FrameError(f"frame from {src}, which is not connected")
        self.detector.spoke(src, self.now, self.view, self.peers, admission.unannounced(self.view, self.static))
        if handler is None:
            raise FrameError(f"unexpected {type(frame).__name__} from {src}")
        handler(self, src, frame)

    def ready(self) -> Ready:
        """Take everything to send, to deliver and to notice since the last call. A step ends here:
        the marks of what this peer received in it go out now (wire v2), so no member waits for this
        peer's acknowledgement longer than one step of it."""
        self.out.marks_if_due()
        self._chain_digests()
        out = self.out.take()
        out.alarms = self.divergence.step_ended()
        return out

    # -- modes and views -------------------------------------------------------------------------

    def _set_mode(self, mode: Mode) -> None:
        """Change the mode, by `TRANSITIONS` only (anything else is a bug), and with it the handlers."""
        if mode not in TRANSITIONS[self.mode]:
            raise RuntimeError(f"{self.me}: illegal mode change {self.mode} -> {mode}")
        self.mode = mode
        self._handlers = HANDLERS[(self.static, mode)]
        self._trusted = None

    def _set_view(self, view: View) -> None:
        self.view = view
        self._trusted = None
        self.out.new_view(self.me, sorted_pids(view.members))

    @property
    def _current(self) -> View:
        """The installed view (where a handler runs only in one)."""
        view = self.view
        assert view is not None
        return view

    def _member_link(self, src: str) -> bool:
        """Whether ``src`` is a member of the view, connected as the incarnation the view holds."""
        return self.peers.member_link(self.view, src)

    # -- ordered traffic -----------------------------------------------------------------------

    def _admit(self, src: str, frame: Frame) -> bool:
        """Whether an ordered frame is taken now (`tom.core.admission`); what is not taken waits for
        its view, is kept while its sender is cut off, or tells a stranger it is not a member."""
        verdict = admission.admit(self.view, src, self.peers, self.change.cut, self.static)
        if verdict is TAKEN:
            return True
        if verdict is Admission.WAIT:
            self._hold(src, frame)
        elif verdict is Admission.CUT:
            self.change.keep_cut_frame(src, frame)
        elif verdict is Admission.STRANGER:
            if self.static:
                raise FrameError(f"frame from {src}, which is not a member")
            self._tell_removed(src)
        return False

    def _hold(self, src: str, frame: Frame) -> None:
        self.early.hold(src, frame, self.peers)

    def _on_message(self, src: str, msg: Message) -> None:
        if msg.pid != src:
            raise FrameError(f"{src} relayed a message of {msg.pid} outside a flush")
        if self.traffic.message(src, msg, msg.marks, False):
            self._deliver_ready()
        if msg.marks is not None and self.traffic.marks(src, msg.marks, self.change.settling):
            self._deliver_ready()

    def _on_relay(self, src: str, msg: Relay) -> None:
        # A relay is safe whenever it comes: had this peer delivered anything after it, it would hold
        # it already (it had the origin's ACK for that, and links are FIFO).
        if msg.pid not in self._current.members:
            raise FrameError(f"RELAY from {src} of {msg.pid}, which is not a member")
        if self.traffic.message(src, msg, None, True):
            self._deliver_ready()

    def _on_marks(self, src: str, frame: Marks) -> None:
        if self.traffic.marks(src, frame.marks, self.change.settling):
            self._deliver_ready()

    def _on_ack(self, src: str, frame: Ack) -> None:
        if self.traffic.acks(src, frame.pid, (frame.clock,), self._current.members, self.change.settling):
            self._deliver_ready()

    def _on_acks(self, src: str, frame: Acks) -> None:
        if self.traffic.acks(src, frame.pid, frame.clocks, self._current.members, self.change.settling):
            self._deliver_ready()

    def _on_seq(self, src: str, frame: Seq) -> None:
        """Sequence numbers: from the sequencer, or relayed by a member in a flush."""
        if self.traffic.sequence(src, frame):
            self._deliver_ready()

    def _multicast(self, text: str, sent_at: float | None) -> Message:
        msg = self.traffic.own(text, sent_at)
        self._deliver_ready()
        return msg

    def _send_held(self) -> None:
        """Multicast what was held while no view was installed, a flush ran or the quorum was lost."""
        for text, sent_at in self.held.take():
            self._multicast(text, sent_at)

    def _deliver_ready(self) -> None:
        """Deliver what the order releases now (every member of the view holds it); in a flush that
        has every survivor's marker, work out its last step (`ViewChange.settle`) and vote for it."""
        if self.mode not in (NORMAL, FLUSHING) or (self.mode == NORMAL and (
                self.no_quorum is not None or self.change.promised is not None)):
            return  # (promised a ballot: a view change runs, which may remove this peer)
        change, view = self.change, self.view
        assert view is not None
        # an attempt this peer flushed may still be installed: nothing leaves until the view change ends
        if not (change.outcomes and change.open_outcome()):
            released = self.traffic.order.release(view.members, False)
            if released and self.traffic.record(released, view.id):
                self._send_heartbeats()  # (progress, in an order without ACKs)
        if change.markers_in:
            p = change.settle(self.traffic.order, self.stats, view, self.traffic.last_delivered)
            if p is not None:
                self._report(p)

    def _report(self, p: Propose) -> None:
        """Report FLUSHED for ``p`` (this member's vote for it) to its coordinator."""
        if self.mode != FLUSHED:
            self._set_mode(FLUSHED)
        report = Flushed(p.view, p.attempt, self.traffic.clock.time)
        if p.coordinator == self.me:
            self._on_flushed(self.me, report)
        else:
            self.detector.trips.ask(("install", p.view, p.attempt), self.now)
            self.out.send((p.coordinator,), report)

    # -- heartbeats and the divergence check -----------------------------------------------------

    def _send_heartbeats(self) -> None:
        # a heartbeat names the last event delivered here (`DivergenceCheck.beat`): the marks of what this
        # peer holds go first, so that a member never sees a delivery claimed before its acknowledgement
        self.out.marks_if_due()
        if self.peers.links:
            self.out.send(tuple(self.peers.links), self.divergence.beat(
                self.view, self.mode == NORMAL, self.mode == JOINING, self.out.deliveries, self.last_install, self.me))

    def _on_heartbeat(self, src: str, frame: Heartbeat) -> None:
        if self.peers.announced(src, frame.view, frame.group):
            self._trusted = None
        view = self.view
        if self.quorum and self.mode == NORMAL and self.peers.removed_meanwhile(src, frame.view, view):
            self._tell_removed(src)
        if frame.count is not None and view is not None and self.peers.counts_in(src, frame, view):
            self.traffic.order.progress(src, frame.count)
            self.divergence.claimed(src, frame, view.id, self.traffic.order, src in self.change.cut,
                                    self.mode == NORMAL, self.out.deliveries)

    @property
    def view_delivered(self) -> int:
        """Messages delivered in the current view."""
        self._chain_digests()
        return self.divergence.chain.count

    @property
    def digest(self) -> int:
        """The running digest of the messages delivered in the current view (`DigestChain`)."""
        self._chain_digests()
        return self.divergence.chain.digest

    def _chain_digests(self) -> None:
        self.divergence.chain_up(self.out.deliveries, self.view.id if self.view is not None else 0)

    # -- membership ------------------------------------------------------------------------------

    def _on_leave(self, src: str, frame: Leave) -> None:
        """A leave request (a static group takes none: `_check_leave`)."""
        self._check_leave(src, frame)
        self.founding.left(src)
        self.peers.leaves[src] = self.now
        self._maybe_propose()

    def _request_leave(self) -> None:
        """Tell every member: a leaver never coordinates (`tom.core.quorum.coordinator`), so each must know."""
        self.peers.leaves[self.me] = self.now
        self.out.send_some(self.out.others, Leave(self.me))
        self._maybe_propose()

    def _tell_removed(self, src: str) -> None:
        view = self.view
        if view is not None and not self.static and self.peers.may_tell_removed(src, self.now, self.timing.heartbeat):
            self.out.send((src,), Removed(view.id, view.group))

    def _on_removed(self, src: str, frame: Removed) -> None:
        """``src`` says this peer is not in its view: out of the group, if `Peers.removed_by` says so (with
        a quorum it joins again, its undelivered messages sent again: `_rejoin`)."""
        why = self.peers.removed_by(src, frame, self.view, self.no_quorum is not None)
        if why is not None:
            self._become_removed(why)

    def _become_removed(self, why: str) -> None:
        if self.mode in (LEFT, REMOVED, JOINING):
            return
        if self.quorum and not self.leaving:
            self._rejoin()
            return
        self._set_mode(REMOVED)
        self.change.flush = None
        self.out.notice(notices.Removed(why))

    def _check_quorum(self) -> None:
        """With a quorum: say when the members not found dead stop being a primary component of the
        view (`lost_quorum`) — the peer then delivers nothing in normal mode and holds its users'
        messages — and when they are one again (a partition healed before anyone was removed)."""
        view = self.view
        if not self.quorum or self.static or view is None or self.mode not in MEMBER:
            return
        dead = self.detector.verified(self.now) | self.peers.elsewhere(view)
        lost = lost_quorum(view, dead, self.peers.views, self.file)
        if lost is not None and self.founding.refoundable(view, self.peers, view.members - dead):
            self._rejoin()  # (a primary component restarted from its data: found the group again with it)
            self.founding.refound(view)
            return
        said, self.no_quorum = quorum_news(self.no_quorum, lost), lost
        self.out.notice(said)
        if isinstance(said, notices.QuorumBack) and self.mode == NORMAL and self.change.promised is None:
            self._send_held()
            self._deliver_ready()

    def _rejoin(self) -> None:
        """The primary component went on without this peer (a partition): start again as a joiner,
        in the same incarnation. Its own messages not delivered here are kept: once admitted it sends
        again those the group did not deliver (`Install.delivered`), then what its users entered since."""
        self._chain_digests()
        self.out.marks_if_due()
        self._set_mode(JOINING)
        self.founding.cut_off(self._current.group, self._current.id)
        self.view = None
        self.out.others = ()
        self.held.cut_off(self.traffic.restart())
        self.change.end()
        self.no_quorum = None
        self.detector.suspected.clear()
        self.peers.restart()
        self.reach.restart()
        self.early.take()
        self.divergence.restart()
        self.last_install = None
        self.started_at = self.now
        self.out.notice(notices.Rejoining())
        self.out.send_some(tuple(self.peers.links), self.founding.join(self.me, self.incarnation))

    def _on_join(self, src: str, join: Join) -> None:
        self._check_join(src, join)
        view, member = self.view, self.peers.join(src, join.incarnation, self.view, self.now, (join.view, join.group))
        self._trusted = None
        if view is not None and not member and self.mode in MEMBER:
            self.out.send_all(sees(view, self.me, join, self.peers.leaves, self.detector.verified(self.now)))
        if not member:
            self._maybe_propose()
        elif self.last_install is not None and self.mode == NORMAL:
            self.out.send((src,), self.last_install)  # it missed the INSTALL: again

    def _check_join(self, src: str, join: Join) -> None:
        self.peers.check_join(src, join)

    def _check_leave(self, src: str, frame: Leave) -> None:
        self.peers.check_leave(src, frame)

    # -- founding (`tom.core.founding`) ----------------------------------------------------------

    def _maybe_form(self) -> None:
        """Found a group now, if `Founding.form` says so."""
        step = self.founding.form(self.me, self.incarnation, self.peers, self.detector.last_heard,
                                  self.traffic.clock.time, self.now, self.started_at, self.timing, self.quorum)
        if isinstance(step, Install):
            self._install(step)
        elif isinstance(step, Propose):
            self.out.send(tuple(p for p, _ in step.members if p != self.me), step)
        else:
            self.out.notice(step)

    def _on_founding_proposal(self, src: str, p: Propose) -> None:
        """A founder's proposal of view 1 reaches this joining peer: promise, unless bound elsewhere."""
        joining = self.peers.views.get(src, 0) == 0 and src in self.peers.joins  # (a member never asks to join)
        promise = self.founding.on_proposal(src, p, self.me, self.incarnation, self.traffic.clock.time, self.now, joining)
        if promise is not None:
            self.out.send((src,), promise)

    def _on_founding_promise(self, src: str, f: Flushed) -> None:
        """A founder's promise came: install view 1 once every founder promised, in time."""
        install = self.founding.on_promise(self.me, src, f, self.now)
        if install is not None:
            self._install(install)

    # -- view changes (`tom.core.viewchange`) ----------------------------------------------------

    def _coordinator(self) -> str | None:
        view = self.view
        return None if view is None else coordinator(view.members, self.detector.verified(self.now), self.peers.leaves)

    def _maybe_propose(self) -> None:
        """As the coordinator: send what `ViewChange.to_propose` says, then follow its new proposal here
        (once sent: the view may change at once, and the removed must hear it first) or promise its PREPARE."""
        view = self.view
        if self.static or view is None or self.mode not in MEMBER or self._coordinator() != self.me:
            return
        sends, new, prepare = self.change.to_propose(view, self.me, self.now, self.timing.heartbeat,
                                                     self._found_dead(view), self.detector.suspected, self.peers,
                                                     self.quorum, self.file)
        self.out.send_all(sends)
        if new is not None:
            self._on_propose(self.me, new)
        if prepare is not None:
            self._on_prepare(self.me, prepare)

    def _installed_already(self, src: str, view: int, tell: bool) -> bool:
        """Whether a PREPARE or a proposal of ``view``, the view installed here, comes from a member that
        missed its INSTALL (it gets it again, if ``tell``)."""
        if view != self._current.id or self.last_install is None or src == self.me:
            return False
        if tell:
            self.out.send((src,), self.last_install)
        return True

    def _on_prepare(self, src: str, f: Prepare) -> None:
        """PREPARE: promise its ballot if it is not below the one promised (`ViewChange.promise`)."""
        if self._installed_already(src, f.view, self._member_link(src)):
            return
        promise = self.change.promise(src, f, self._current, self.now)
        if promise is None:
            return
        self.traffic.order.stop_numbering()  # (a view change runs: `ViewChange.promise`)
        if src == self.me:
            self._on_promise(self.me, promise)
        else:
            self.out.send((src,), promise)

    def _on_promise(self, src: str, f: Promise) -> None:
        """A PROMISE: once a primary component promised, propose (adopting what may have been decided:
        `ViewChange.choose`)."""
        view = self._current
        if not ((src == self.me or self._member_link(src))
                and self.change.take_promise(src, f, view, self.me, self.now, self._coordinator() == self.me)):
            return
        p = self.change.choose(view, self.me, self._found_dead(view), self.detector.suspected, self.peers,
                               self.quorum, self.file, self.now)
        if p is not None:
            self.out.send(audience(view, p, self.me), p)
            self._on_propose(self.me, p)

    def _on_propose(self, src: str, p: Propose) -> None:
        """A proposal: follow it if `ViewChange.accept` says so — stop numbering, send the flush's frames
        (`Flushing.frames`), take the frames of members cut before and kept now."""
        if self._installed_already(src, p.view, True):
            return
        clock = self.traffic.clock.time
        step = self.change.accept(src, p, self._current, self.me, clock, self.quorum, self.now)
        if isinstance(step, str):
            self._become_removed(step)
        elif isinstance(step, Promise):
            self.out.send((src,), step)  # (below our promise: say which, `ViewChange.refusal`)
        if not isinstance(step, tuple):
            return
        flushing, taken_back = step
        if p.adopts is None or self.mode == NORMAL:
            self._set_mode(FLUSHING)
        self.traffic.order.stop_numbering()
        if p.adopts is not None:  # no flush: vote at once (`ViewChange.start`)
            self._report(p)
            return
        self.out.send_all(flushing.frames(self.traffic.order, self.me, clock))
        for s, f in self.early.taken_back(taken_back, self.peers, self._current):  # (admitted again now)
            try:
                self._handlers[type(f)](self, s, f)
            except FrameError:
                pass
        self._deliver_ready()

    def _on_flush(self, src: str, f: Flush) -> None:
        if self.change.marker(src, f, self.view):
            self._deliver_ready()

    def _on_flushed(self, src: str, f: Flushed) -> None:
        if self.change.report(src, f.view, f.attempt, f.clock, self.me, self.now):
            i, first = self.change.install(self.me)
            self.out.send_all(first)
            self._install(i)

    def _on_install(self, src: str, i: Install) -> None:
        view = self.view
        self.detector.trips.installed(src, i.view, i.attempt, view is None, self.now)
        if (self.founding.admits(i, self.me, self.incarnation, self.now) if view is None
                else i.view == view.id + 1 and i.group == view.group):
            self._install(i)

    def _install(self, i: Install) -> None:
        """Install ``i``: the old view's last step, if `ViewChange.concluded` makes it real, then the
        view event; every part learns of the view; the decision is forwarded once (so that it
        survives its coordinator) and the view announced before any of its frames."""
        self.out.marks_if_due()  # what was received in the old view, before anything of the next
        old = self.view
        outcome = self.change.concluded(i, old, self.me)
        if isinstance(outcome, str):
            self._become_removed(outcome)
            if self.mode == JOINING:  # (rejoined: no copy of this INSTALL admits it, `Founding.cut_off`)
                self.founding.cut_off(i.group, i.view)
            return
        members = dict(i.members)
        if outcome is not None and self.traffic.conclude(outcome.order, outcome.delivered, self._current.id):
            self._send_heartbeats()  # (progress, in an order without ACKs)
        self.traffic.install(i)
        if old is None:  # (admitted again after a partition: the group delivered ours up to our mark)
            self.held.admitted(self.traffic.last_delivered.get(self.me, -1))
        self._set_view(View(i.view, frozenset(members), members, i.coordinator, i.group))
        self._installed_at = self.now
        # (the claims of the removed are void where the order is not uniform: `forget`)
        self.divergence.new_view(self.out.deliveries, i.view, i.removed if self.traffic.order.name != "lamport" else ())
        self.last_install = i
        self.change.end()
        self.detector.settle(members, old.incarnations if old is not None else {}, self.now)
        self.peers.installed(members)
        self.reach.new_view(members)
        self.out.send_some(tuple(sorted_pids((set(members) | set(i.left)) - {self.me, i.coordinator})), i)
        if self.me not in members:  # its leave
            self._set_mode(LEFT)
            self.out.notice(notices.Left())
            return
        self._set_mode(NORMAL)
        self.founding.done()
        said, self.no_quorum = quorum_news(self.no_quorum, None), None  # (its members are a primary component)
        self.out.notice(said)
        self.traffic.order.start_numbering()  # then the view's announcement, on every link, connected or not
        self.out.send_some(tuple(sorted_pids(set(self.peers.links) | set(self.out.others))),
                           Heartbeat(i.view, 0, 0, self.divergence.last_key(self.last_install, self.me), i.group))
        self._replay(self.early.take())
        self._send_held()
        if self.leaving:
            self._request_leave()
        self._maybe_propose()

    # -- shared suspicions (`tom.core.reach`) ------------------------------------------------------

    def _report_unreached(self) -> None:
        """As a member: send the SUSPECTs `Reach.report` says to send now, and say the pairs it says."""
        view = self.view
        if view is not None and self.mode in MEMBER:
            sends, said = self.reach.report(view, self.me, self.detector.verified(self.now), self.peers.leaves,
                                            self.detector.suspected, self.change.removing, self.no_quorum is not None,
                                            self.now, self.timing)
            self.out.send_all(sends)
            self.out.notices += said

    def _on_suspect(self, src: str, frame: Suspect) -> None:
        """A member cannot hear ``frame.pid``: kept by the coordinator (`Reach.removals` decides)."""
        if self._member_link(src) and self.reach.suspect(src, frame, self._current, self.now, self.timing):
            self._maybe_propose()

    def _on_sees(self, src: str, frame: Sees) -> None:
        """A member has a link to joiner ``frame.pid``."""
        if self._member_link(src) and self.reach.seen(src, frame, self.now):
            self._maybe_propose()

    def _on_not_reached(self, src: str, frame: Suspect) -> None:
        """Joining: its group's coordinator says member ``frame.pid`` does not reach it (`NotAdmitted`)."""
        if frame.view == 0 and self.peers.views.get(src, 0) > 0:
            self.reach.not_reached_by(frame, self.now)

    def _found_dead(self, view: View) -> set[str]:
        """As the coordinator: the members a view change removes now (`Reach.found_dead`), the joiners
        it holds back meanwhile, and what it says of both."""
        dead, self.peers.held_back, said, told = self.reach.found_dead(
            view, self.me, self.detector.verified(self.now) & view.members, self.peers, self.now, self.timing)
        self.out.notices += said
        self.out.send_all(told)
        return dead

    def _ignore(self, src: str, frame: Frame) -> None:
        """A frame this mode takes and does nothing with (see `HANDLERS`)."""

    def _hold_or_drop(self, src: str, frame: Frame) -> None:
        """An ordered frame after this peer left: one of a view it never installed waits (as ever);
        the rest is stale."""
        if admission.admit(self.view, src, self.peers, self.change.cut, self.static) is Admission.WAIT:
            self._hold(src, frame)

    # -- inspection ----------------------------------------------------------------------------

    def backlog(self) -> int:
        """Messages accepted but not yet delivered (pending here or held until a view is installed)."""
        return len(self.traffic.order) + len(self.held.texts)

    def undelivered_own(self) -> int:
        """Messages entered here and not delivered here (held, or pending): what a stop now leaves."""
        return len(self.held.texts) + sum(1 for e in self.traffic.order if e.pid == self.me and e.text is not None)

    def status(self) -> Status:
        view, order = self.view, self.traffic.order
        members = sorted_pids(view.members) if view is not None else []
        return Status(self.me, self.mode, self.traffic.clock.time, view, self.traffic.delivered,
                      pending_status(order, members), tuple(sorted_pids(self.detector.suspected)),
                      dict(self.detector.last_heard), self.now, tuple(self.divergence.alarms), self.view_delivered,
                      self.digest, order.name, self.no_quorum, self.reach.pairs, dict(self.stats),
                      dict(self.detector.trips.srtt))


# -- dispatch: `tom.core.dispatch.TABLE`, its names made handlers -----------------------------------

Handler = Callable[[Core, str, Any], None]


class Ordered:
    """The handler of an ordered frame (`tom.core.dispatch.Admit`): taken only as `Core._admit`
    allows; ``take`` handles it once admitted (the fast path of `Core.receive` calls it directly for a
    source known to pass)."""

    __slots__ = ("take",)

    def __init__(self, take: Handler) -> None:
        self.take = take

    def __call__(self, core: Core, src: str, frame: Frame) -> None:
        if core._admit(src, frame):
            self.take(core, src, frame)


def send_direct(core: Core, dest: str, text: str) -> None:
    """Send ``text`` to ``dest`` alone, outside the group's order (a `Direct` frame; FIFO on the link).
    UsageError (nothing sent) for this peer itself or a frame over MAX_FRAME_BYTES."""
    if dest == core.me:
        raise UsageError("a direct text goes to another peer")
    if len(escape_text(text).encode()) + 8 > MAX_FRAME_BYTES:
        raise UsageError(f"a direct text takes at most {MAX_FRAME_BYTES - 8} bytes on the wire")
    core.out.send((dest,), Direct(text))


def heard_at_gate(core: Core, src: str, now: float) -> None:
    """Frames of ``src`` came ``now`` and wait outside the core, in their link's order (step mode,
    `tom.peer.gate`): ``src`` is alive, and its silence is not counted against it. Liveness only:
    nothing it said is taken, and a suspicion of it stays until it speaks (`FailureDetector.spoke`)."""
    core.detector.heard(src, now)


def on_direct(core: Core, src: str, frame: Direct) -> None:
    """A `Direct` frame's text, for the program, outside the order: handed out as a notice."""
    core.out.notice(notices.DirectText(src, frame.text))


def persisting(core: Core) -> None:
    """This peer is durable (``--data``): each step's `Ready.persist` holds the messages it took, to be
    on its disk before the step's frames acknowledge them."""
    if core.out.persist is None:
        core.out.persist = []


def on_durable(core: Core, src: str, frame: CatchUp | History | Progress) -> None:
    """A durable peer's frame (a catch-up, a progress report), for the data folder's side of the peer (`tom.durable.catchup`): a notice."""
    core.out.notice(notices.DurableFrame(src, frame))


BESIDE: dict[str, Handler] = {"on_direct": on_direct, "on_durable": on_durable}
"""Handlers `TABLE` names that are functions beside `Core`, not its methods (it stays small)."""


def _handler(entry: str | Admit) -> Handler | Ordered:
    if isinstance(entry, Admit):
        return Ordered(getattr(Core, entry.name))
    return BESIDE[entry] if entry in BESIDE else getattr(Core, entry)


HANDLERS: dict[tuple[bool, Mode], dict[type[Frame], Handler | Ordered]] = {
    key: {kind: _handler(entry) for kind, entry in row.items()} for key, row in TABLE.items()}
"""`TABLE` with `Core`'s methods in place of their names."""


def receive_all(core: Core, src: str, frames: list[Frame]) -> list[FrameError]:
    """`Core.receive` each of ``frames`` from ``src``, in order; the FrameError of each one refused (the
    frames after it are still taken, as one by one). Compiled, so the shell calls it once per batch."""
    refused: list[FrameError] = []
    for frame in frames:
        try:
            core.receive(src, frame)
        except FrameError as e:
            refused.append(e)
    return refused
