"""The world `tom check` explores: the real cores of a small group over an in-memory network.

A *step* is one event, and a state's enabled steps are all the ways it can go on:

* ``deliver A>B`` — the first in-flight frame of the FIFO link A->B reaches B (never past a cut);
* ``send A`` — A multicasts its next message (``--messages`` per peer, texts ``m<A>.<k>``);
* ``crash A`` — A stops: it takes no frame and sends none, and what it sent that has not arrived yet
  is lost (frames delivered before the crash step arrived: every prefix of each link is covered);
* ``cut`` / ``heal`` — the configured cut starts or ends (frames across it wait in their links: TOM's
  links re-send after a reconnect, so a cut delays, never loses; at the heal both sides are told the
  connection is up again, as the shell tells the core after a reconnect);
* ``join A`` / ``leave A`` — a new peer starts and joins, a member asks to leave;
* ``tick A`` — a heartbeat period passes at A, every member it can hear taken as heard: enabled only
  while A is stuck (outside a view, in a view change, without a quorum) or goes on in its view with a
  member it takes for dead (its next period starts the change, or finds the quorum lost), at most
  ``ticks`` times per peer, counted again after a heal (rejoining after a partition, re-sent proposals and joins are
  driven by time);
* ``timeout X@Y`` — the suspicion timeout of X passed at Y: enabled exactly when X is crashed or cut
  off from Y and still a member Y does not take for dead (not suspected, or suspected for less than
  the verification period: a crash Y saw as a closed connection) (with ``false_suspicion`` also when X is neither).
  Y's clock jumps past the timeout and the verification period; every other member is taken as heard
  at the new time (heartbeats are not modelled as a stream: they would make the space infinite).

*Timed mode* (``Config.delay`` set: ``tom check --delay K``): time is global and counted in ticks of
`TICK_SECONDS` (half a heartbeat period). A frame sent at tick t may arrive from tick t + delay on,
and must by tick t + delay + jitter (links stay FIFO: only a link's first frame moves). Steps:

* ``deliver A>B`` — as above, once the first frame of A->B is due;
* ``tick`` — time advances by one tick at every peer at once (`Core.tick` of the new time at every
  running core, each first taking a periodic heartbeat of every running peer not cut off from it,
  once a delay has passed since the start — periodic heartbeats are not put on the links, as above;
  a heartbeat in flight when its sender crashes or is cut off is lost with it): enabled only when no frame is overdue (frames are urgent: one is never held past its
  latest tick, else an unbounded delay would make anything a livelock), before ``Config.horizon``,
  and while the world is not *quiet* (`World.quiet`: nothing in flight, every running peer in a
  view with a quorum, hearing every member of it — where only heartbeats would pass);
* ``send``, ``crash``, ``cut``/``heal``, ``join``, ``leave`` — as above, at any tick; there are no
  ``timeout X@Y`` or per-peer ``tick A`` steps: the clock suspects the silent.

Progress (``Config.max_attempts``, timed mode's default `ATTEMPTS`): a peer that makes more than that
many founding attempts while outside a view, or more than that many rounds of one view change, is a
violation ("livelock"), judged as the step runs: a livelock never reaches a terminal state.

Invariant: a `World` never changes once it is in the explorer's frontier or seen set. `successor`
copies it, deep-copying only the core the step touches (copy on write); the others are shared.
Each core runs as the shell runs it: one event, then `Core.ready`, whose sends go to the links,
frames as text (parsed again on delivery, as on a real link).
"""

from __future__ import annotations

import hashlib
import operator
import pickle
from array import array
from dataclasses import dataclass, field
from typing import Any

from ..core import Core, Delivery, Timing, ViewDelivery, admission
from ..errors import FrameError, UsageError
from ..codec.frames import Heartbeat, Install, format_frame, parse_frame
from ..codec.pid import pid_key

BASE_PORT = 5000
TIMING = Timing(heartbeat=1.0, suspect_after=5.0, verify_after=1.0, form_after=2.5, admit_after=1e9)
TICK_SECONDS = 0.5
"""A tick of the timed mode: half a heartbeat period, so a delay of 3 ticks is 1.5 s."""
HORIZON = 60
"""The timed mode's default horizon in ticks (30 s): time does not advance past it."""
ATTEMPTS = 6
"""The timed mode's default bound on attempts without a decision (`Local.attempts`)."""


DURABLE: Any = None
"""`tom.check.restart` registers itself here when it is imported (`tom.check.explore` imports it): what
durable peers that restart add to the world (their steps, their disks). The world does not import it:
it imports the world."""

_NUMBERS: dict[str, int] = {}


def pid(n: int) -> str:
    """Peer ``n`` (1-based) is ``127.0.0.1:5000`` + n - 1 (``A`` in transcripts is peer 1). A new
    string each time, never a shared one: which objects a core holds shows in its pickle (`freeze`),
    so the cores are fed exactly what they always were."""
    return f"127.0.0.1:{BASE_PORT + n - 1}"


def number(p: str) -> int:
    n = _NUMBERS.get(p)
    if n is None:
        n = int(p.rpartition(":")[2]) - BASE_PORT + 1
        if len(_NUMBERS) < 1024:
            _NUMBERS[p] = n
    return n


@dataclass(frozen=True)
class Config:
    """What to explore. Peers are 1..peers; ``join`` adds peer ``peers + k`` for k in 1..join."""

    order: str = "lamport"
    peers: int = 3
    messages: int = 1
    crash: tuple[int, ...] = ()
    join: int = 0
    leave: tuple[int, ...] = ()
    cut: tuple[frozenset[int], ...] | None = None  # the sides of a two-way cut
    cut_one_way: tuple[tuple[int, int], ...] = ()  # (a, b): a's frames no longer reach b
    false_suspicion: bool = False
    dynamic: bool = False  # views and failure detection (implied by any fault)
    senders: tuple[int, ...] | None = None  # the peers that send (default: every peer)
    ticks: int = 2  # heartbeat periods each peer may see pass while it is stuck (see `World.steps`)
    found: bool = False  # start with no group: the peers found view 1 (the founding handshake)
    # the heal comes only once nothing but time passing is left on either side (`World.steps`): every
    # schedule of the partition itself, and of what follows the heal, without heals in between
    heal_late: bool = False
    # the timed mode (module docstring): a frame's delay in ticks (None: time is abstract), the extra
    # ticks it may take, the last tick, and the bound on attempts without a decision (None: no bound)
    delay: int | None = None
    jitter: int = 0
    horizon: int = HORIZON
    max_attempts: int | None = None
    # durable peers (every peer keeps a data folder); each of these may crash and start again from it
    # once (`tom.check.restart`)
    restart: tuple[int, ...] = ()

    @property
    def timed(self) -> bool:
        return self.delay is not None

    def sends(self, n: int) -> int:
        """How many messages peer ``n`` sends."""
        return self.messages if self.senders is None or n in self.senders else 0

    @property
    def faults(self) -> bool:
        return bool(self.crash or self.join or self.leave or self.cut or self.cut_one_way or self.false_suspicion
                    or self.found or self.restart)

    @property
    def everyone(self) -> list[int]:
        return list(range(1, self.peers + self.join + 1))

    def describe(self) -> str:
        each = "each" if self.senders is None else f"from {','.join(map(str, self.senders))}"
        parts = [self.order, f"{self.peers} peers", f"{self.messages} message{'s' if self.messages != 1 else ''} {each}"]
        parts += [f"crash {c}" for c in self.crash] + [f"leave {x}" for x in self.leave]
        parts += [f"restart {r} from its data folder" for r in self.restart]
        if self.join:
            parts.append(f"join {self.join}")
        heal = " and heal" + (" once nothing else can happen" if self.heal_late else "")
        if self.cut:
            parts.append("cut " + "/".join(",".join(map(str, sorted(s))) for s in self.cut) + heal)
        parts += [f"cut {a}>{b}{heal}" for a, b in self.cut_one_way]
        if self.false_suspicion:
            parts.append("false suspicions")
        if self.found:
            parts.append("founding the group")
        if self.delay is not None:
            jitter = f" (+0..{self.jitter})" if self.jitter else ""
            parts.append(f"delay {self.delay}{jitter} ticks of {TICK_SECONDS:g} s, horizon {self.horizon} ticks")
        if self.max_attempts is not None:
            parts.append(f"livelock past {self.max_attempts} attempts")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Step:
    kind: str  # deliver, send, crash, cut, heal, join, leave, timeout
    a: int = 0
    b: int = 0

    def __str__(self) -> str:
        if self.kind == "deliver":
            return f"deliver {self.a}>{self.b}"
        if self.kind == "timeout":
            return f"timeout {self.a}@{self.b}"
        if self.kind in ("cut", "heal") or (self.kind == "tick" and not self.a):
            return self.kind  # (a tick with no peer: the timed mode's, at every peer)
        if self.kind in ("restart", "crash") and self.b:
            return f"{self.kind} {self.a} mid-step"  # (`tom.check.restart`: its last step's writes after its sends lost)
        return f"{self.kind} {self.a}"

    @staticmethod
    def parse(text: str) -> "Step":
        kind, _, rest = text.strip().partition(" ")
        if kind == "deliver":
            a, _, b = rest.partition(">")
            return Step(kind, int(a), int(b))
        if kind == "timeout":
            a, _, b = rest.partition("@")
            return Step(kind, int(a), int(b))
        if kind in ("cut", "heal") or (kind == "tick" and not rest):
            return Step(kind)
        if kind in ("restart", "crash") and rest.endswith(" mid-step"):
            return Step(kind, int(rest.split()[0]), 1)
        if kind == "restart":
            a, _, mid = rest.partition(" ")
            return Step(kind, int(a), int(mid == "mid-step"))
        if kind in ("send", "crash", "join", "leave", "tick"):
            return Step(kind, int(rest))
        raise ValueError(f"not a step: {text!r}")


@dataclass(frozen=True, slots=True)
class Event:
    """What one step made happen at one peer, for traces: frames out, deliveries, a rejection."""

    peer: int
    sends: tuple[tuple[tuple[int, ...], str], ...] = ()
    deliveries: tuple[str, ...] = ()
    note: str = ""


class Violation(Exception):
    """An invariant broke: ``name`` says which, the message how; ``events``: what the step that
    broke it did, when it broke as the step ran."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.events: list[Event] = []


def freeze(core: Core) -> tuple[bytes, bytes]:
    """``core`` as bytes (to copy it from: `thaw`) and its fingerprint: a digest of everything that
    decides what it does next. Caches are emptied and counters zeroed first, so two cores that
    differ only there are one state (dict and set orders may still differ between two equal cores,
    which only costs a merge, never a missed state)."""
    core.drop_caches()
    stats = core.stats
    for k in stats:
        stats[k] = 0
    _canonical_sets(core)
    blob = pickle.dumps(core, 5)
    return blob, hashlib.blake2b(blob, digest_size=16).digest()


def _canonical_sets(root: object) -> None:
    """Rebuild, in place, every set reachable from ``root`` with its elements inserted in sorted order:
    a set's iteration order (and so its pickle) depends on the order its elements came in and on the
    interpreter's hash seed, and two equal cores must freeze to the same bytes. In place, so a set
    shared by two holders stays shared. Reached: dict values, the items of lists, tuples and deques,
    and the attributes and slots of the objects of TOM's own classes."""
    seen: set[int] = set()
    stack = [root]
    pop, push, extend, mark = stack.pop, stack.append, stack.extend, seen.add
    kinds = _KINDS
    while stack:
        obj = pop()
        t = type(obj)
        kind = kinds.get(t)
        if kind is None:
            kind = _kind(t)
        if kind is _LEAF:
            continue
        if id(obj) in seen:
            continue
        mark(id(obj))
        if kind is _SET:
            if len(obj) > 1:  # type: ignore[arg-type]
                items = sorted(obj, key=repr)  # type: ignore[call-overload]
                obj.clear()  # type: ignore[attr-defined]
                obj.update(items)  # type: ignore[attr-defined]
        elif kind is _DICT:
            extend(obj.values())  # type: ignore[attr-defined]
        elif kind is _ITEMS:
            extend(obj)  # type: ignore[arg-type]
        else:  # one of TOM's classes: its attributes, then its own slots
            attrs = getattr(obj, "__dict__", None)
            if attrs is not None:
                extend(attrs.values())
            for slot in kind:
                value = getattr(obj, slot, _UNSET)
                if value is not _UNSET:
                    push(value)


_LEAF, _SET, _DICT, _ITEMS = "leaf", "set", "dict", "items"
_UNSET = object()  # a slot with no value
_KINDS: dict[type, str | tuple[str, ...]] = {  # how `_canonical_sets` walks each type (`_kind`)
    str: _LEAF, int: _LEAF, float: _LEAF, bool: _LEAF, bytes: _LEAF, type(None): _LEAF,
    set: _SET, dict: _DICT, list: _ITEMS, tuple: _ITEMS}


def _kind(t: type) -> str | tuple[str, ...]:
    """How `_canonical_sets` walks an object of type ``t`` (worked out once per type): a leaf, a set,
    a dict, a sequence, or (TOM's classes) the tuple of its own slots, attributes walked besides."""
    if t is set:
        kind: str | tuple[str, ...] = _SET
    elif t is dict:
        kind = _DICT
    elif t is list or t is tuple or t.__name__ == "deque":
        kind = _ITEMS
    elif t.__module__.startswith("tom."):
        kind = tuple(getattr(t, "__slots__", ()))
    else:
        kind = _LEAF
    _KINDS[t] = kind
    return kind


def thaw(blob: bytes) -> Core:
    return pickle.loads(blob)


@dataclass(frozen=True, slots=True)
class Local:
    """One peer's core, frozen (`freeze`), with what the world asks of it without thawing it."""

    blob: bytes
    fp: bytes
    mode: str
    members: frozenset[str]  # its view's members (empty outside a view)
    verified: frozenset[str]  # the members it takes for dead: suspected for the verification period
    backlog: int
    leaving: bool
    now: float
    no_quorum: bool
    attempts: int  # attempts without a decision: founding attempts outside a view, rounds of a view change
    torn: bool = False  # a durable peer whose last step wrote to its disk after its first frame out (`restart`)
    owes: bool = False  # a durable peer admitted and caught up that has yet to send its accepted texts again

    @property
    def stuck(self) -> bool:
        """Outside a view, in a view change, or without a quorum: what only time moves on."""
        return self.mode in ("joining", "flushing", "flushed") or self.no_quorum

    @staticmethod
    def of(core: Core) -> "Local":
        blob, fp = freeze(core)
        mode = getattr(core.mode, "value", core.mode)
        if core.view is None:
            attempts = core.founding.attempts if mode == "joining" else 0
        else:  # (`ViewChange.highest`: the highest round of the change under way, from 0; -1 outside one)
            attempts = core.change.highest + 1
        shell = getattr(core, "__dict__", {}).get("check_shell")
        return Local(blob, fp, mode, core.view.members if core.view is not None else frozenset(),
                     frozenset(core.detector.verified(core.now)), core.backlog(), core.leaving, core.now, core.no_quorum is not None,
                     attempts, shell is not None and shell.torn is not None, shell is not None and shell.owes)

    def core(self) -> Core:
        return thaw(self.blob)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one input did to a core: its next state and what `Core.ready` handed out."""

    local: Local
    sends: tuple[tuple[tuple[str, ...], str, int | None], ...]  # (dests, frame text, heartbeat view)
    deliveries: tuple[tuple, ...]  # log entries (`_log_entry`)
    described: tuple[str, ...]
    alarm: str = ""
    error: str = ""  # a FrameError/UsageError the input raised (the core is then unchanged)
    sent: tuple[int, str] | None = None  # the key of the message a send multicast (None if held)
    # the lamport order: the messages the core took with their text in this step (`_held`), its own
    # ones (sent in this step) included, in (clock, pid) order
    took: tuple[tuple[int, str], ...] = ()


CACHE_LIMIT = 300_000
_cache: dict[tuple, Outcome] = {}


def step_core(local: Local, kind: str, arg: tuple) -> Outcome:
    """Feed one input to a copy of ``local``'s core and run `Core.ready`; memoised on (state, input):
    a core is a function of its state and its inputs, and the same local step recurs in many
    global states."""
    key = (local.fp, kind, arg)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    core = local.core()
    if "check_shell" in getattr(core, "__dict__", ()):  # a durable peer: its shell too (`tom.check.restart`)
        out = DURABLE.step(local, core, kind, arg)
    else:
        out = _plain_step(local, core, kind, arg)
    if len(_cache) >= CACHE_LIMIT:
        _cache.clear()
    _cache[key] = out
    return out


def _plain_step(local: Local, core: Core, kind: str, arg: tuple) -> Outcome:
    before = _held(core)
    error = ""
    sent = None
    try:
        sent = feed(core, kind, arg)
    except (FrameError, UsageError) as e:
        error = str(e)
        core = local.core()
    ready = core.ready()
    took: tuple[tuple[int, str], ...] = ()
    if before is not None:
        after = _held(core) or set()
        after.update((d.clock, d.pid) for d in ready.deliveries if type(d) is Delivery)
        took = tuple(sorted(after - before, key=_order_key))
    sends = tuple((tuple(dests), format_frame(frame), frame.view if type(frame) is Heartbeat else None)
                  for dests, frame in ready.sends)
    return Outcome(Local.of(core), sends, tuple(_log_entry(d) for d in ready.deliveries),
                   tuple(_describe(d) for d in ready.deliveries), str(ready.alarms[0]) if ready.alarms else "",
                   error, sent, took)


def feed(core: Core, kind: str, arg: tuple) -> tuple[int, str] | None:
    """One input to ``core`` (FrameError/UsageError as the core raises them); for a send, the key of
    the message it multicast (None if held)."""
    sent = None
    if kind == "recv":
        core.receive(arg[0], parse_frame(arg[1]))
    elif kind == "send":
        msg = core.broadcast(arg[0])
        sent = (msg.clock, msg.pid) if msg is not None else None
    elif kind == "timeout":
        x, t = arg  # (past x's allowance, which grows with each false suspicion: `FailureDetector`)
        t += core.detector.allowance(x, TIMING.suspect_after) - TIMING.suspect_after + core.detector.trips.bound()
        for p in list(core.detector.last_heard):
            if p != x:
                core.detector.last_heard[p] = t
        core.tick(t)
        t += TIMING.verify_after
        for p in list(core.detector.last_heard):
            if p != x and p not in core.detector.suspected:
                core.detector.last_heard[p] = t
        core.tick(t)
    elif kind == "tick":
        heard, t = arg
        for p in heard:
            core.detector.last_heard[p] = t
        core.tick(t)
    elif kind == "clock":  # the timed mode: the heartbeats of ``heard`` arrive, then time is ``t``
        heard, t = arg
        detector = core.detector
        unannounced = admission.unannounced(core.view, core.static)
        for p in heard:
            # as the core takes a frame (`Core.receive`): a member that announced the view speaks,
            # which ends a suspicion of it (one raised before its announcement came, say)
            detector.spoke(p, t, core.view, core.peers, unannounced)
        core.tick(t)
    elif kind == "leave":
        core.leave()
    elif kind == "connected":
        core.connected(arg[0], arg[1])
    elif kind == "disconnected":
        core.disconnected(arg[0])
    elif kind != "start":
        raise ValueError(kind)
    return sent


def _held(core: Core) -> set[tuple[int, str]] | None:
    """The keys of the messages a lamport core holds with their text (pending in its order); None in
    the other orders. A message gets its text in the order only where the core takes it
    (`Traffic.message`, which observes its clock): from its origin or relayed in a flush, when it
    arrived, or when a frame held early is taken at last; its own, when it sends one."""
    order = core.order
    if order.name != "lamport":
        return None
    return {(e.clock, e.pid) for e in order if e.text is not None}


def _order_key(key: tuple[int, str]) -> tuple:
    """A message's place in the Lamport order: ``(clock, pid)``, pids as `pid_key` orders them."""
    return (key[0], pid_key(key[1]))


def _step(kind: str, a: int = 0, b: int = 0) -> Step:
    """The one `Step` of each kind and peers (steps are values: sharing them saves building them)."""
    key = (kind, a, b)
    step = _STEPS.get(key)
    if step is None:
        step = _STEPS[key] = Step(kind, a, b)
    return step


_STEPS: dict[tuple[str, int, int], Step] = {}


class Book:
    """What the worlds of one search share: the layout of a world's *signature* and the ids of the
    values in it, and what is known of each distinct delivery log (`LogInfo`).

    A world's signature has one slot per part of its state (a peer's core, a link, a peer's log, ...)
    holding the id of that part's value (0: absent); ids are handed out per distinct value (equal
    values, equal ids), so two worlds have equal signatures exactly when the parts their fingerprint
    covers are equal. A step changes a few parts, so `World.successor` copies its parent's signature
    and renumbers only those. The slots of the peers 1..peers+join are laid out up front; a part
    with any other key (none is known) gets a slot appended on first sight.

    Equal parts, not equal pickles: the fingerprint used to be a digest of the parts' pickle, which
    writes an object met twice as a reference, so two equal worlds whose links held one frame text
    twice as one object or as two (a frame sent again from one cached outcome, in the founding
    handshake) counted as two states. They are one now; every other count is unchanged."""

    def __init__(self, config: Config) -> None:
        everyone = config.everyone
        self.config = config
        self.everyone = everyone
        self.pairs = [(a, b) for a in everyone for b in everyone if a != b]  # sorted
        parts: list[tuple] = [(kind,) for kind in ("crashed", "cut_on", "cut_done", "started", "left", "timed_out",
                                                   "time", "restarted", "downed")]
        parts += [(kind, n) for n in everyone for kind in ("local", "sent", "log", "ticks")]
        parts += [(kind, pair) for pair in self.pairs for kind in ("link", "announced", "due")]
        self.slots: dict[tuple, int] = {part: i for i, part in enumerate(parts)}
        self.fixed = len(self.slots)
        self.foreign = False  # a part outside the peers' slots was seen (`slot`)
        self.local_slot = {n: self.slots[("local", n)] for n in everyone}
        self.log_slot = {n: self.slots[("log", n)] for n in everyone}
        self.link_slot = {pair: self.slots[("link", pair)] for pair in self.pairs}
        self.due_slot = {pair: self.slots[("due", pair)] for pair in self.pairs}
        self.logs_of = operator.itemgetter(*(self.log_slot[n] for n in everyone))  # sig -> the logs' ids
        self.ids: dict[object, int] = {}
        self.infos: dict[int, object] = {}  # log id -> invariants.LogInfo
        self.fine: set[tuple] = set()  # `invariants._logs_key` of the worlds that passed `invariants.check`
        self.ordered: dict[frozenset, tuple[tuple[str, int], ...]] = {}  # members -> sorted (pid, number)
        self.sends = {n: config.sends(n) for n in everyone}
        self.faults = config.faults
        self.separated = {(a, b): self._separated(a, b) for a in everyone for b in everyone}
        self.deliver = {pair: _step("deliver", *pair) for pair in self.pairs}

    def slot(self, part: tuple) -> int:
        i = self.slots.get(part)
        if i is None:
            i = self.slots[part] = len(self.slots)
            self.foreign = True
        return i

    def id(self, value: object) -> int:
        i = self.ids.get(value)
        if i is None:
            i = self.ids[value] = len(self.ids) + 1
        return i

    def members(self, members: frozenset[str]) -> tuple[tuple[str, int], ...]:
        out = self.ordered.get(members)
        if out is None:
            out = self.ordered[members] = tuple((x, number(x)) for x in sorted(members))
        return out

    def _separated(self, a: int, b: int) -> bool:
        """Whether the cut, while on, keeps a's frames from b."""
        c = self.config
        if c.cut is not None:
            return not any(a in side and b in side for side in c.cut)
        return (a, b) in c.cut_one_way


_books: dict[Config, Book] = {}
_new = object.__new__
_blake2b = hashlib.blake2b


def _book(config: Config) -> Book:
    """The book of a world made without `World.initial` (one per configuration, kept)."""
    book = _books.get(config)
    if book is None:
        if len(_books) > 64:
            _books.clear()
        book = _books[config] = Book(config)
    return book


@dataclass(slots=True)
class World:
    config: Config
    locals: dict[int, Local]  # each peer's core, frozen
    links: dict[tuple[int, int], tuple[str, ...]]  # in-flight frames, as text, FIFO
    sent: dict[int, int]  # messages sent so far, per peer
    crashed: frozenset[int] = frozenset()
    cut_on: bool = False
    cut_done: bool = False  # the cut happened (and may have healed): it happens once
    started: frozenset[int] = frozenset()  # joiners started
    left: frozenset[int] = frozenset()  # leave asked
    timed_out: frozenset[tuple[int, int]] = frozenset()  # (x, y) timeouts that fired
    restarted: frozenset[int] = frozenset()  # peers that started again from their data folders
    downed: frozenset[int] = frozenset()  # peers that crashed (each does once: before or after its restart)
    logs: dict[int, tuple[tuple, ...]] = field(default_factory=dict)  # delivered, per peer: see `_log_entry`
    past: dict[tuple[int, str], frozenset] = field(default_factory=dict)  # causal: a message's past
    # the lamport order: a message's happens-before past (the messages its sender had received, directly
    # or through the messages it received, and its own earlier ones, when it sent it), and what each
    # peer has received so far in that sense (`_receive`)
    heard: dict[tuple[int, str], frozenset] = field(default_factory=dict)
    received: dict[int, frozenset] = field(default_factory=dict)
    now: dict[int, float] = field(default_factory=dict)  # each core's abstract time
    announced: dict[tuple[int, int], int] = field(default_factory=dict)  # link -> last view announced
    broken: Violation | None = None  # what the step being taken broke (raised when it is done)
    ticks: dict[int, int] = field(default_factory=dict)  # heartbeat periods each peer saw pass
    # the timed mode: the tick it is, and per link the tick from which each of its frames may arrive
    time: int = 0
    due: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)
    # Derived, never part of the state (see `Book`, `successor`, `invariants.check`): the signature
    # (ids of the parts the fingerprint covers), the fingerprint, the peers whose logs the step that
    # made this world grew with their lengths before (None: unknown), whether this world passed
    # `invariants.check`, and whether the world it came from did.
    book: Book | None = field(default=None, repr=False, compare=False)
    sig: array | None = field(default=None, repr=False, compare=False)
    fp: bytes | None = field(default=None, repr=False, compare=False)
    grew: list[tuple[int, int]] | None = field(default=None, repr=False, compare=False)
    checked: bool = field(default=False, repr=False, compare=False)
    parent_checked: bool = field(default=False, repr=False, compare=False)

    # -- the start ---------------------------------------------------------------------------------
    @classmethod
    def initial(cls, config: Config) -> tuple["World", list[Event]]:
        """View 1 of peers 1..N installed everywhere (a static group when nothing changes the group);
        with ``found``, no view yet: every peer connected to the others and asking to join."""
        members = list(range(1, config.peers + 1))
        pids = [pid(n) for n in members]
        cores: dict[int, Core] = {}
        if not (config.faults or config.dynamic):
            for n in members:
                cores[n] = Core(pid(n), pids, order=config.order)
        else:
            founding = Install(1, 0, pids[0], 0, tuple((p, number(p)) for p in pids), tuple(pids), (), (),
                               group=f"{pids[0]}/1")
            for n in members:
                core = Core.joining(pid(n), n, TIMING, order=config.order)
                for m in members:
                    if m != n:
                        core.connected(pid(m), m)
                if n == 1:
                    core._install(founding)
                else:
                    core.receive(pids[0], founding)
                for m in members:
                    if m != n:
                        core.receive(pid(m), Heartbeat(1))
                core.ready()
                cores[n] = core
        if config.found:  # no group yet: every peer joining, expecting the others (the neighbors file)
            cores = {n: Core.joining(pid(n), n, TIMING, order=config.order, expected=pids) for n in members}
        logs: dict[int, tuple[tuple, ...]] = {n: () for n in members}
        if config.restart:  # every peer durable, each with view 1 in its history (`tom.check.restart`)
            logs = {n: DURABLE.durable(cores[n], config) for n in members}
        book = Book(config)  # a search's own: its ids go when its worlds go
        world = cls(config, {n: Local.of(c) for n, c in cores.items()}, {}, {n: 0 for n in members},
                    logs=logs, now={n: 0.0 for n in config.everyone},
                    announced={} if config.found else {(a, b): 1 for a in members for b in members if a != b},
                    book=book)
        events: list[Event] = []
        if config.found:
            for n in members:
                for m in members:
                    if m != n:
                        world._apply(n, step_core(world.locals[n], "connected", (pid(m), m)), events, f"connected {m}")
        return world, events

    # -- what may happen -------------------------------------------------------------------------
    def blocked(self, a: int, b: int) -> bool:
        """Whether a's frames cannot reach b now (a cut)."""
        if not self.cut_on:
            return False
        separated = self._book().separated.get((a, b))
        if separated is not None:
            return separated
        c = self.config
        if c.cut is not None:
            return not any(a in side and b in side for side in c.cut)
        return (a, b) in c.cut_one_way

    def steps(self) -> list[Step]:
        """Every enabled step, in a fixed order (so a search is a function of its inputs)."""
        c = self.config
        book = self._book()
        crashed = self.crashed
        locals_ = self.locals
        links = self.links
        deliver = book.deliver
        busy = [pair for pair in book.pairs if links.get(pair)]  # sorted, as book.pairs is
        if len(busy) != len(links):  # a link outside the peers' pairs (none is known), or an empty one
            busy = [pair for pair in sorted(links) if links[pair]]
        urgent = False
        if c.timed:  # only a frame that is due moves (module docstring)
            now, due, late = self.time, self.due, self.time - c.jitter
            busy = [pair for pair in busy if due[pair][0] <= now and pair[1] not in crashed
                    and not (self.cut_on and self.blocked(*pair))]
            urgent = any(due[pair][0] <= late for pair in busy)
            out: list[Step] = [deliver.get(pair) or _step("deliver", *pair) for pair in busy]
        elif self.cut_on:
            out = [deliver.get(pair) or _step("deliver", *pair) for pair in busy
                   if pair[1] not in crashed and not self.blocked(*pair)]
        elif crashed:
            out = [deliver.get(pair) or _step("deliver", *pair) for pair in busy if pair[1] not in crashed]
        else:
            out = [deliver.get(pair) or _step("deliver", *pair) for pair in busy]
        left = self.left
        sent = self.sent
        sends = book.sends
        for n in book.everyone:
            local = locals_.get(n)
            if local is None or n in crashed or n in left:
                continue
            if sent.get(n, 0) < sends[n] and local.mode not in ("left", "removed") and not local.leaving:
                out.append(_step("send", n))
        if c.timed and not urgent and self.time < c.horizon and not self.quiet():
            out.append(_step("tick", 0))
        if not book.faults:
            return out
        for n in c.crash:  # (once each: a durable peer before its restart, or after it)
            if n not in crashed and n in locals_ and n not in self.downed:
                out.append(_step("crash", n))
                if locals_[n].torn:  # (a durable peer, killed inside its last step: `tom.check.restart`)
                    out.append(_step("crash", n, 1))
        if (c.cut is not None or c.cut_one_way) and not self.cut_done:
            out.append(_step("cut"))
        if self.cut_on and not c.heal_late:
            out.append(_step("heal"))
        for k in range(1, c.join + 1):
            n = c.peers + k
            if n not in self.started:
                out.append(_step("join", n))
        for n in c.leave:
            if n not in left and n not in crashed and self._member(n, n):
                out.append(_step("leave", n))
        for n in c.restart:  # (once each: running, or crashed by --crash; `tom.check.restart`)
            local = locals_.get(n)
            if local is not None and n not in self.restarted and n not in left:
                out.append(_step("restart", n))
                if local.torn and n not in crashed:
                    out.append(_step("restart", n, 1))
        if self.cut_on and c.heal_late and c.timed and all(s.kind == "tick" for s in out):
            out.append(_step("heal"))
        if c.timed:  # (the clock suspects the silent and moves the stuck: `tick`)
            return out
        timed_out = self.timed_out
        cut_on = self.cut_on
        anyway = c.false_suspicion
        for y in book.everyone:
            local = locals_.get(y)
            if local is None or y in crashed:
                continue
            verified = local.verified  # (a suspicion not verified yet still waits for time: a timeout moves it)
            for x, xn in book.members(local.members):
                if xn == y or x in verified or (xn, y) in timed_out:
                    continue
                if xn in crashed or (cut_on and self.blocked(xn, y)) or anyway:
                    out.append(_step("timeout", xn, y))
        ticks = self.ticks
        for y in book.everyone:
            local = locals_.get(y)
            # (a durable peer sends its accepted texts again at its next step: a tick always comes)
            if local is None or y in crashed:
                continue
            # (and a member of its view it takes for dead while it goes on as if not: its next heartbeat
            # period removes it, or finds the quorum lost)
            due = local.stuck or (local.mode == "normal" and not local.verified.isdisjoint(local.members))
            if (due and ticks.get(y, 0) < c.ticks) or local.owes:
                out.append(_step("tick", y))
        if self.cut_on and c.heal_late and all(s.kind == "tick" for s in out):
            out.append(_step("heal"))
        return out

    def quiet(self) -> bool:
        """The timed mode's rest: nothing in flight that can move (a frame across a cut waits for the
        heal, which is a step), and every running peer (neither crashed nor gone) in a view, not
        changing it, with a quorum, not leaving, and hearing every member of it. Only heartbeats would
        pass, which announce nothing new (module docstring): time stops, as the untimed mode's ticks
        do when no peer is stuck."""
        crashed = self.crashed
        for (a, b), frames in self.links.items():
            if frames and b not in crashed and not (self.cut_on and self.blocked(a, b)):
                return False
        for n, local in self.locals.items():
            if n in crashed or local.mode in ("left", "removed"):
                continue
            if local.stuck or local.mode != "normal" or local.leaving:
                return False
            for m in local.members:
                x = number(m)
                if x != n and (x in crashed or x not in self.locals or self.blocked(x, n)):
                    return False
        return True

    def _cut_pairs(self) -> list[tuple[int, int]]:
        """The directed pairs the cut separates."""
        peers = sorted(self.locals)
        return [(a, b) for a in peers for b in peers if a != b and self.blocked(a, b)]

    def _member(self, n: int, at: int) -> bool:
        local = self.locals.get(at)
        return local is not None and pid(n) in local.members

    def _can_send(self, n: int) -> bool:
        local = self.locals[n]
        return local.mode not in ("left", "removed") and not local.leaving

    # -- doing it ----------------------------------------------------------------------------------
    def successor(self, step: Step) -> tuple["World", list[Event]]:
        """The world after ``step`` (self is left as it is); Violation if an invariant broke."""
        w, events = self._successor(step, True)
        return w, events  # type: ignore[return-value]

    def _successor(self, step: Step, record: bool) -> tuple["World", list[Event] | None]:
        """`successor`; without ``record`` (the search's way) what the step did is not written down
        (events None) unless it breaks an invariant, and the fingerprint is worked out at once. The
        new world shares every dict the step does not change (copy on write) and gets its signature
        from self's, renumbering the parts the step changed."""
        book = self.book or self._book()
        sig = self.sig
        if sig is None:
            sig = self.sig = self._signature()
        w = _new(World)  # as World(...) would, without the cost of its 22 arguments
        w.config = self.config
        w.locals = dict(self.locals)
        w.links = dict(self.links)
        w.sent = self.sent
        w.crashed = self.crashed
        w.cut_on = self.cut_on
        w.cut_done = self.cut_done
        w.started = self.started
        w.left = self.left
        w.timed_out = self.timed_out
        w.restarted = self.restarted
        w.downed = self.downed
        w.logs = self.logs
        w.past = self.past
        w.heard = self.heard
        w.received = self.received
        w.now = self.now
        w.announced = self.announced
        w.broken = None
        w.ticks = self.ticks
        w.time = self.time
        w.due = dict(self.due) if self.config.timed else self.due
        w.book = book
        w.sig = sig[:]
        w.fp = None
        w.grew = []
        w.checked = False
        w.parent_checked = self.checked
        events: list[Event] | None = [] if record else None
        k = step.kind
        if k == "deliver":
            a, b = step.a, step.b
            frames = w.links[(a, b)]
            text, rest = frames[0], frames[1:]
            if rest:
                w.links[(a, b)] = rest
            else:
                del w.links[(a, b)]
            if self.config.delay is not None:
                w._pop_due((a, b))
            slot = book.link_slot.get((a, b))
            if slot is None:
                w._renumber(("link", (a, b)), rest or None)
            else:
                w.sig[slot] = (book.ids.get(rest) or book.id(rest)) if rest else 0
            out = step_core(w.locals[b], "recv", (pid(a), text))
            w._apply(b, out, events, f"<- {a}: {text}" if record else "")
            if out.error:
                w._break(Violation("frame rejected", f"peer {b} rejected {text!r} from member {a}: {out.error}"))
        elif k == "send":
            n = step.a
            w.sent = sent = dict(w.sent)
            count = sent.get(n, 0) + 1
            text = f"m{n}.{count}"
            sent[n] = count
            w._renumber(("sent", n), count)
            out = step_core(w.locals[n], "send", (text,))
            if out.error:
                w._break(Violation("send refused", f"peer {n} refused to send {text!r}: {out.error}"))
            if out.sent is not None and self.config.order == "causal":
                # a message's past: every message its sender delivered before it, each with its view
                before = frozenset((e[1], e[2]) for e in w.logs[n] if e[0] == "m")
                if out.sent in w.past or any(e[1] == out.sent for log in w.logs.values() for e in log):
                    w.grew = None  # the past of a message already delivered changes: judge all again
                w.past = {**w.past, out.sent: before}
            w._apply(n, out, events, f"send {text}")
        elif k == "crash":
            if step.b:
                DURABLE.crash_mid_step(w, step.a)
            w.crashed = w.crashed | {step.a}
            w._renumber(("crashed",), w.crashed)
            w.downed = w.downed | {step.a}
            w._renumber(("downed",), w.downed)
            for link in [link for link in w.links if step.a in link]:
                del w.links[link]  # what was on its way to it, or from it, dies with it
                w._renumber(("link", link), None)
                if w.due.pop(link, None) is not None:
                    w._renumber(("due", link), None)
            if events is not None:
                events.append(Event(step.a, note="crash mid-step" if step.b else "crash"))
        elif k == "cut":
            w.cut_on, w.cut_done = True, True
            w._renumber(("cut_on",), True)
            w._renumber(("cut_done",), True)
        elif k == "heal":
            # the links across the cut broke meanwhile and connect again (each side is told, as the
            # shell tells the core of a new connection); their frames go on in order
            pairs = sorted({tuple(sorted(link)) for link in self._cut_pairs()})
            w.cut_on = False
            w._renumber(("cut_on",), False)
            for n in w.ticks:
                w._renumber(("ticks", n), None)
            w.ticks = {}  # a new situation: each peer may see time pass again
            w.announced = dict(w.announced)
            for a, b in pairs:  # a new connection: the first heartbeat on it announces the view again
                for link in ((a, b), (b, a)):
                    if w.announced.pop(link, None) is not None:
                        w._renumber(("announced", link), None)
            for a, b in pairs:
                for x, y in ((a, b), (b, a)):
                    if x in w.crashed or y in w.crashed:
                        continue
                    w._apply(x, step_core(w.locals[x], "connected", (pid(y), y)), events, f"connected {y}")
        elif k == "join":
            n = step.a
            start = w.time * TICK_SECONDS  # (0 but in the timed mode: it starts now)
            w.locals[n] = Local.of(Core.joining(pid(n), n, TIMING, order=self.config.order, now=start))
            w._renumber(("local", n), w.locals[n].fp)
            if n not in w.sent:
                w.sent = {**w.sent, n: 0}
                w._renumber(("sent", n), 0)
            if n not in w.logs:
                w.logs = {**w.logs, n: ()}
                w._renumber(("log", n), ())
            w.started = w.started | {n}
            w._renumber(("started",), w.started)
            for m in sorted(w.locals):
                if m != n and m not in w.crashed:
                    w._apply(n, step_core(w.locals[n], "connected", (pid(m), m)), events, f"connected {m}")
                    w._apply(m, step_core(w.locals[m], "connected", (pid(n), n)), events, f"connected {n}")
        elif k == "restart":
            DURABLE.restart(w, step.a, bool(step.b), events)
        elif k == "leave":
            n = step.a
            w.left = w.left | {n}
            w._renumber(("left",), w.left)
            w._apply(n, step_core(w.locals[n], "leave", ()), events, "leave")
        elif k == "tick" and not step.a:  # the timed mode: a tick passes everywhere
            w.time = t = self.time + 1
            w._renumber(("time",), t)
            now = t * TICK_SECONDS
            delay = self.config.delay or 0
            if events is not None:
                events.append(Event(0, note=f"t={t} ({now:g} s)"))
            for y in sorted(w.locals):
                if y in w.crashed:
                    continue
                # (heartbeats are sent from the first tick on and take the delay too)
                heard = () if t <= delay else tuple(sorted(pid(p) for p in w.locals
                                                           if p != y and p not in w.crashed and not w.blocked(p, y)))
                w._apply(y, step_core(w.locals[y], "clock", (heard, now)), events, "tick")
        elif k == "tick":
            y = step.a
            w.ticks = {**w.ticks, y: w.ticks.get(y, 0) + 1}
            w._renumber(("ticks", y), w.ticks[y])
            t = max(w.now.get(y, 0.0), w.locals[y].now) + TIMING.heartbeat
            w.now = {**w.now, y: t}
            heard = tuple(sorted(pid(p) for p in w.locals if p != y and p not in w.crashed and not w.blocked(p, y)))
            w._apply(y, step_core(w.locals[y], "tick", (heard, t)), events, "tick")
        elif k == "timeout":
            x, y = step.a, step.b
            w.timed_out = w.timed_out | {(x, y)}
            w._renumber(("timed_out",), w.timed_out)
            t = max(w.now.get(y, 0.0), w.locals[y].now) + TIMING.suspect_after + TIMING.heartbeat
            w.now = {**w.now, y: t + TIMING.verify_after}
            w._apply(y, step_core(w.locals[y], "timeout", (pid(x), t)), events, f"timeout {x}")
        else:
            raise ValueError(step)
        if w.broken is not None:
            if events is None:  # the search's way: take the step again, writing down what it did
                return self._successor(step, True)
            w.broken.events = events
            raise w.broken
        if events is None and len(w.sig) == book.fixed:  # the search asks for it next
            w.fp = _blake2b(w.sig.tobytes(), digest_size=16).digest()
        return w, events

    def _pop_due(self, link: tuple[int, int]) -> None:
        """The first frame of ``link`` left it: so does its due tick."""
        rest = self.due[link][1:]
        if rest:
            self.due[link] = rest
        else:
            del self.due[link]
        self._renumber(("due", link), rest or None)

    def _break(self, violation: Violation) -> None:
        if self.broken is None:
            self.broken = violation

    def _apply(self, n: int, out: Outcome, events: list[Event] | None, what: str) -> None:
        """Take a step's outcome at ``n``: its core's next state, sends to the links, deliveries to
        the log; and, with ``events``, what it did (``what``: the note)."""
        local = out.local
        self.locals[n] = local
        sig = self.sig
        book = self.book or self._book()
        ids = book.ids
        if sig is not None:
            slot = book.local_slot.get(n)
            if slot is None:
                self._renumber(("local", n), local.fp)
            else:
                sig[slot] = ids.get(local.fp) or book.id(local.fp)
        sends: list[tuple[tuple[int, ...], str]] = []
        links = self.links
        locals_ = self.locals
        crashed = self.crashed
        announced = None
        delay = self.config.delay
        for dests, text, beat in out.sends:
            targets: list[int] = []
            for d in dests:
                dn = _NUMBERS.get(d) or number(d)
                link = (n, dn)
                if beat is not None:
                    if self.announced.get(link) == beat:
                        continue  # a periodic heartbeat: nothing new for the link (module docstring)
                    if announced is None:
                        announced = self.announced = dict(self.announced)
                    announced[link] = beat
                    self._renumber(("announced", link), beat)
                if dn in crashed or dn not in locals_:
                    continue
                frames = links.get(link, ()) + (text,)
                links[link] = frames
                if delay is not None:  # due a delay from now, never before the frame ahead of it (FIFO)
                    ahead = self.due.get(link, ())
                    at = self.time + delay
                    self.due[link] = dues = ahead + (max(at, ahead[-1]) if ahead else at,)
                    self._renumber(("due", link), dues)
                if sig is not None:
                    slot = book.link_slot.get(link)
                    if slot is None:
                        self._renumber(("link", link), frames)
                    else:
                        sig[slot] = ids.get(frames) or book.id(frames)
                if events is not None:
                    targets.append(dn)
            if targets:
                sends.append((tuple(targets), text))
        if out.took:
            self._receive(n, out.took)
        if out.deliveries:
            before = self.logs.get(n, ())
            log = before + out.deliveries
            self.logs = {**self.logs, n: log}
            if sig is not None:
                slot = book.log_slot.get(n)
                if slot is None:
                    self._renumber(("log", n), log)
                else:
                    sig[slot] = ids.get(log) or book.id(log)
            if self.grew is not None:
                self.grew.append((n, len(before)))
        if out.alarm:
            self._break(Violation("false divergence alarm", f"peer {n}: {out.alarm}"))
        bound = self.config.max_attempts
        if bound is not None and local.attempts > bound:
            what = "founding attempts outside a view" if not local.members else "rounds of a view change"
            self._break(Violation("livelock", f"{local.attempts} attempts without a decision: peer {n}, "
                                              f"{what} (bound {bound})"))
        if events is not None:
            events.append(Event(n, tuple(sends), out.described, what))

    def _receive(self, n: int, took: tuple[tuple[int, str], ...]) -> None:
        """The lamport order: peer ``n`` took the messages ``took`` (`Outcome.took`). A message of its
        own is one it sent: its happens-before past is what ``n`` had received before this step
        (`heard`), and it must follow all of it in the (clock, pid) order (the *clock condition*,
        judged here as the step runs). Another's it received: what ``n`` has received grows by that
        message and its past. (A step that both receives and sends gives its own message only what
        came before the step: a part of its past, never more.)

        What "received" means: a message taken with its text, the only frame that carries its sender's
        clock. An ACK (or a mark) carries the clock of the message it acknowledges, not its sender's:
        no happens-before of the acknowledging peer reaches the receiver through it, so it is not
        counted (the core's clock passes the acknowledged message's clock all the same, which this
        leaves unasked)."""
        me = pid(n)
        known = self.received.get(n, frozenset())
        grown = set(known)
        heard = None
        for key in took:
            if key[1] == me:
                if heard is None:
                    heard = self.heard = dict(self.heard)
                if key in heard:
                    self.grew = None  # a key sent again: the past of a message judged before changes
                heard[key] = known
                later = [k for k in known if _order_key(k) > _order_key(key)]
                if later:
                    k = max(later, key=_order_key)
                    self._break(Violation(
                        "clock condition",
                        f"peer {n} sent ({key[0]}, {number(key[1])}) after it had received ({k[0]}, {number(k[1])}), "
                        f"which comes later in the (clock, pid) order"))
            else:
                past = self.heard.get(key)
                if past:
                    grown |= past
            grown.add(key)
        if len(grown) != len(known):
            self.received = {**self.received, n: frozenset(grown)}

    # -- the fingerprint -----------------------------------------------------------------------------
    def _book(self) -> Book:
        book = self.book
        if book is None:
            book = self.book = _book(self.config)
        return book

    def _renumber(self, part: tuple, value: object) -> None:
        """The part ``part`` of this world now holds ``value`` (None: it is gone)."""
        sig = self.sig
        if sig is None:
            return
        book = self.book
        i = book.slots.get(part)  # type: ignore[union-attr]
        if i is None:
            i = book.slot(part)  # type: ignore[union-attr]
        if i >= len(sig):
            sig.extend([0] * (i + 1 - len(sig)))
        sig[i] = 0 if value is None else book.id(value)  # type: ignore[union-attr]

    def _signature(self) -> array:
        """The signature (`Book`) worked out from the parts themselves."""
        book = self._book()
        sig = array("I", bytes(4 * book.fixed))
        self.sig = sig
        self._renumber(("crashed",), self.crashed)
        self._renumber(("cut_on",), self.cut_on)
        self._renumber(("cut_done",), self.cut_done)
        self._renumber(("started",), self.started)
        self._renumber(("left",), self.left)
        self._renumber(("timed_out",), self.timed_out)
        if self.restarted:
            self._renumber(("restarted",), self.restarted)
        if self.downed:
            self._renumber(("downed",), self.downed)
        for n, local in self.locals.items():
            self._renumber(("local", n), local.fp)
        for link, frames in self.links.items():
            self._renumber(("link", link), frames)
        for n, count in self.sent.items():
            self._renumber(("sent", n), count)
        for n, log in self.logs.items():
            self._renumber(("log", n), log)
        for link, beat in self.announced.items():
            self._renumber(("announced", link), beat)
        for n, count in self.ticks.items():
            self._renumber(("ticks", n), count)
        if self.config.delay is not None:
            self._renumber(("time",), self.time)
        for link, dues in self.due.items():
            self._renumber(("due", link), dues)
        return sig

    def fingerprint(self) -> bytes:
        """A digest of the cores, the links, the messages sent, the faults so far, the logs, the
        views announced on each link and the ticks seen (in the timed mode: the tick it is and each
        frame's due tick): equal for equal worlds (as far as what happens next and the invariants go;
        the untimed mode's time and a message's past are left out)."""
        fp = self.fp
        if fp is None:
            sig = self.sig
            if sig is None:
                sig = self._signature()
            fixed = self._book().fixed
            end = len(sig)
            while end > fixed and not sig[end - 1]:  # slots appended later, empty here
                end -= 1
            fp = self.fp = hashlib.blake2b((sig[:end] if end < len(sig) else sig).tobytes(), digest_size=16).digest()
        return fp


def _log_entry(d: Delivery | ViewDelivery) -> tuple:
    """``("m", (clock, pid), view, text, seq)`` for a message, ``("v", view, members)`` for a view."""
    if type(d) is ViewDelivery:
        return ("v", d.view, tuple(d.members), tuple(d.removed))
    return ("m", (d.clock, d.pid), d.view, d.text, d.seq)


def _describe(d: Delivery | ViewDelivery) -> str:
    if type(d) is ViewDelivery:
        return f"view {d.view} {' '.join(str(number(m)) for m in d.members)}"
    extra = f" seq={d.seq}" if d.seq is not None else ""
    return f"({d.clock}, {number(d.pid)}) {d.text}{extra}"


__all__ = ["Config", "Event", "Step", "Violation", "World", "freeze", "thaw", "pid", "number"]
