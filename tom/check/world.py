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
  while A is stuck (outside a view, in a view change, without a quorum), at most ``ticks`` times per
  peer, counted again after a heal (rejoining after a partition, re-sent proposals and joins are
  driven by time);
* ``timeout X@Y`` — the suspicion timeout of X passed at Y: enabled exactly when X is crashed or cut
  off from Y and still a member Y does not suspect (with ``false_suspicion`` also when X is neither).
  Y's clock jumps past the timeout and the verification period; every other member is taken as heard
  at the new time (heartbeats are not modelled as a stream: they would make the space infinite).

Invariant: a `World` never changes once it is in the explorer's frontier or seen set. `successor`
copies it, deep-copying only the core the step touches (copy on write); the others are shared.
Each core runs as the shell runs it: one event, then `Core.ready`, whose sends go to the links,
frames as text (parsed again on delivery, as on a real link).
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass, field

from ..core import Core, Delivery, Timing, ViewDelivery
from ..errors import FrameError, UsageError
from ..codec.frames import Heartbeat, Install, format_frame, parse_frame

BASE_PORT = 5000
TIMING = Timing(heartbeat=1.0, suspect_after=5.0, verify_after=1.0, form_after=2.5, admit_after=1e9)


def pid(n: int) -> str:
    """Peer ``n`` (1-based) is ``127.0.0.1:5000`` + n - 1 (``A`` in transcripts is peer 1)."""
    return f"127.0.0.1:{BASE_PORT + n - 1}"


def number(p: str) -> int:
    return int(p.rpartition(":")[2]) - BASE_PORT + 1


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

    def sends(self, n: int) -> int:
        """How many messages peer ``n`` sends."""
        return self.messages if self.senders is None or n in self.senders else 0

    @property
    def faults(self) -> bool:
        return bool(self.crash or self.join or self.leave or self.cut or self.cut_one_way or self.false_suspicion
                    or self.found)

    @property
    def everyone(self) -> list[int]:
        return list(range(1, self.peers + self.join + 1))

    def describe(self) -> str:
        each = "each" if self.senders is None else f"from {','.join(map(str, self.senders))}"
        parts = [self.order, f"{self.peers} peers", f"{self.messages} message{'s' if self.messages != 1 else ''} {each}"]
        parts += [f"crash {c}" for c in self.crash] + [f"leave {x}" for x in self.leave]
        if self.join:
            parts.append(f"join {self.join}")
        if self.cut:
            parts.append("cut " + "/".join(",".join(map(str, sorted(s))) for s in self.cut) + " and heal")
        parts += [f"cut {a}>{b} and heal" for a, b in self.cut_one_way]
        if self.false_suspicion:
            parts.append("false suspicions")
        if self.found:
            parts.append("founding the group")
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
        if self.kind in ("cut", "heal"):
            return self.kind
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
        if kind in ("cut", "heal"):
            return Step(kind)
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
    shared by two holders stays shared."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        t = type(obj)
        if t is set:
            if len(obj) > 1:  # type: ignore[arg-type]
                items = sorted(obj, key=repr)  # type: ignore[call-overload]
                obj.clear()  # type: ignore[attr-defined]
                obj.update(items)  # type: ignore[attr-defined]
            continue
        if t is dict:
            stack.extend(obj.values())  # type: ignore[attr-defined]
        elif t is list or t is tuple or t.__name__ == "deque":
            stack.extend(obj)  # type: ignore[arg-type]
        elif t.__module__.startswith("tom."):
            if hasattr(obj, "__dict__"):
                stack.extend(vars(obj).values())
            for slot in getattr(t, "__slots__", ()):
                if hasattr(obj, slot):
                    stack.append(getattr(obj, slot))


def thaw(blob: bytes) -> Core:
    return pickle.loads(blob)


@dataclass(frozen=True, slots=True)
class Local:
    """One peer's core, frozen (`freeze`), with what the world asks of it without thawing it."""

    blob: bytes
    fp: bytes
    mode: str
    members: frozenset[str]  # its view's members (empty outside a view)
    suspected: frozenset[str]
    backlog: int
    leaving: bool
    now: float
    no_quorum: bool

    @property
    def stuck(self) -> bool:
        """Outside a view, in a view change, or without a quorum: what only time moves on."""
        return self.mode in ("joining", "flushing", "flushed") or self.no_quorum

    @staticmethod
    def of(core: Core) -> "Local":
        blob, fp = freeze(core)
        return Local(blob, fp, getattr(core.mode, "value", core.mode), core.view.members if core.view is not None else frozenset(),
                     frozenset(core.suspected), core.backlog(), core.leaving, core.now, core.no_quorum is not None)

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
    error = ""
    sent = None
    try:
        if kind == "recv":
            core.receive(arg[0], parse_frame(arg[1]))
        elif kind == "send":
            msg = core.broadcast(arg[0])
            sent = (msg.clock, msg.pid) if msg is not None else None
        elif kind == "timeout":
            x, t = arg
            for p in list(core.last_heard):
                if p != x:
                    core.last_heard[p] = t
            core.tick(t)
            t += TIMING.verify_after
            for p in list(core.last_heard):
                if p != x and p not in core.suspected:
                    core.last_heard[p] = t
            core.tick(t)
        elif kind == "tick":
            heard, t = arg
            for p in heard:
                core.last_heard[p] = t
            core.tick(t)
        elif kind == "leave":
            core.leave()
        elif kind == "connected":
            core.connected(arg[0], arg[1])
        elif kind != "start":
            raise ValueError(kind)
    except (FrameError, UsageError) as e:
        error = str(e)
        core = local.core()
    ready = core.ready()
    sends = tuple((tuple(dests), format_frame(frame), frame.view if type(frame) is Heartbeat else None)
                  for dests, frame in ready.sends)
    out = Outcome(Local.of(core), sends, tuple(_log_entry(d) for d in ready.deliveries),
                  tuple(_describe(d) for d in ready.deliveries), str(ready.alarms[0]) if ready.alarms else "",
                  error, sent)
    if len(_cache) >= CACHE_LIMIT:
        _cache.clear()
    _cache[key] = out
    return out


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
    logs: dict[int, tuple[tuple, ...]] = field(default_factory=dict)  # delivered, per peer: see `_log_entry`
    past: dict[tuple[int, str], frozenset] = field(default_factory=dict)  # causal: a message's past
    now: dict[int, float] = field(default_factory=dict)  # each core's abstract time
    announced: dict[tuple[int, int], int] = field(default_factory=dict)  # link -> last view announced
    broken: Violation | None = None  # what the step being taken broke (raised when it is done)
    ticks: dict[int, int] = field(default_factory=dict)  # heartbeat periods each peer saw pass

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
        world = cls(config, {n: Local.of(c) for n, c in cores.items()}, {}, {n: 0 for n in members},
                    logs={n: () for n in members}, now={n: 0.0 for n in config.everyone},
                    announced={} if config.found else {(a, b): 1 for a in members for b in members if a != b})
        events: list[Event] = []
        if config.found:
            for n in members:
                for m in members:
                    if m != n:
                        events.append(world._apply(n, step_core(world.locals[n], "connected", (pid(m), m)),
                                                   f"connected {m}"))
        return world, events

    # -- what may happen -------------------------------------------------------------------------
    def blocked(self, a: int, b: int) -> bool:
        """Whether a's frames cannot reach b now (a cut)."""
        c = self.config
        if not self.cut_on:
            return False
        if c.cut is not None:
            return not any(a in side and b in side for side in c.cut)
        return (a, b) in c.cut_one_way

    def steps(self) -> list[Step]:
        """Every enabled step, in a fixed order (so a search is a function of its inputs)."""
        c = self.config
        out: list[Step] = []
        for (a, b), frames in sorted(self.links.items()):
            if frames and b not in self.crashed and not self.blocked(a, b):
                out.append(Step("deliver", a, b))
        for n in sorted(self.locals):
            if n in self.crashed or n in self.left:
                continue
            if self.sent.get(n, 0) < c.sends(n) and self._can_send(n):
                out.append(Step("send", n))
        for n in c.crash:
            if n not in self.crashed and n in self.locals:
                out.append(Step("crash", n))
        if (c.cut is not None or c.cut_one_way) and not self.cut_done:
            out.append(Step("cut"))
        if self.cut_on:
            out.append(Step("heal"))
        for k in range(1, c.join + 1):
            n = c.peers + k
            if n not in self.started:
                out.append(Step("join", n))
        for n in c.leave:
            if n not in self.left and n not in self.crashed and self._member(n, n):
                out.append(Step("leave", n))
        if c.faults:
            for y in sorted(self.locals):
                if y in self.crashed:
                    continue
                local = self.locals[y]
                for x in sorted(local.members):
                    xn = number(x)
                    if xn == y or x in local.suspected or (xn, y) in self.timed_out:
                        continue
                    if xn in self.crashed or self.blocked(xn, y) or c.false_suspicion:
                        out.append(Step("timeout", xn, y))
            for y in sorted(self.locals):
                if y not in self.crashed and self.locals[y].stuck and self.ticks.get(y, 0) < c.ticks:
                    out.append(Step("tick", y))
        return out

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
        w = World(self.config, dict(self.locals), dict(self.links), dict(self.sent), self.crashed,
                  self.cut_on, self.cut_done, self.started, self.left, self.timed_out, dict(self.logs),
                  self.past, dict(self.now), dict(self.announced), None, dict(self.ticks))
        events: list[Event] = []
        k = step.kind
        if k == "deliver":
            a, b = step.a, step.b
            frames = w.links[(a, b)]
            text, rest = frames[0], frames[1:]
            if rest:
                w.links[(a, b)] = rest
            else:
                del w.links[(a, b)]
            out = step_core(w.locals[b], "recv", (pid(a), text))
            events.append(w._apply(b, out, f"<- {a}: {text}"))
            if out.error:
                w._break(Violation("frame rejected", f"peer {b} rejected {text!r} from member {a}: {out.error}"))
        elif k == "send":
            n = step.a
            text = f"m{n}.{w.sent.get(n, 0) + 1}"
            w.sent[n] = w.sent.get(n, 0) + 1
            out = step_core(w.locals[n], "send", (text,))
            if out.error:
                w._break(Violation("send refused", f"peer {n} refused to send {text!r}: {out.error}"))
            if out.sent is not None and self.config.order == "causal":
                # a message's past: every message its sender delivered before it, each with its view
                before = frozenset((e[1], e[2]) for e in w.logs[n] if e[0] == "m")
                w.past = {**w.past, out.sent: before}
            events.append(w._apply(n, out, f"send {text}"))
        elif k == "crash":
            w.crashed = w.crashed | {step.a}
            for link in [link for link in w.links if step.a in link]:
                del w.links[link]  # what was on its way to it, or from it, dies with it
            events.append(Event(step.a, note="crash"))
        elif k == "cut":
            w.cut_on, w.cut_done = True, True
        elif k == "heal":
            # the links across the cut broke meanwhile and connect again (each side is told, as the
            # shell tells the core of a new connection); their frames go on in order
            pairs = sorted({tuple(sorted(link)) for link in self._cut_pairs()})
            w.cut_on = False
            w.ticks = {}  # a new situation: each peer may see time pass again
            for a, b in pairs:  # a new connection: the first heartbeat on it announces the view again
                w.announced.pop((a, b), None)
                w.announced.pop((b, a), None)
            for a, b in pairs:
                for x, y in ((a, b), (b, a)):
                    if x in w.crashed or y in w.crashed:
                        continue
                    events.append(w._apply(x, step_core(w.locals[x], "connected", (pid(y), y)), f"connected {y}"))
        elif k == "join":
            n = step.a
            w.locals[n] = Local.of(Core.joining(pid(n), n, TIMING, order=self.config.order, now=0.0))
            w.sent.setdefault(n, 0)
            w.logs.setdefault(n, ())
            w.started = w.started | {n}
            for m in sorted(w.locals):
                if m != n and m not in w.crashed:
                    events.append(w._apply(n, step_core(w.locals[n], "connected", (pid(m), m)), f"connected {m}"))
                    events.append(w._apply(m, step_core(w.locals[m], "connected", (pid(n), n)), f"connected {n}"))
        elif k == "leave":
            n = step.a
            w.left = w.left | {n}
            events.append(w._apply(n, step_core(w.locals[n], "leave", ()), "leave"))
        elif k == "tick":
            y = step.a
            w.ticks[y] = w.ticks.get(y, 0) + 1
            t = max(w.now.get(y, 0.0), w.locals[y].now) + TIMING.heartbeat
            w.now[y] = t
            heard = tuple(sorted(pid(p) for p in w.locals if p != y and p not in w.crashed and not w.blocked(p, y)))
            events.append(w._apply(y, step_core(w.locals[y], "tick", (heard, t)), "tick"))
        elif k == "timeout":
            x, y = step.a, step.b
            w.timed_out = w.timed_out | {(x, y)}
            t = max(w.now.get(y, 0.0), w.locals[y].now) + TIMING.suspect_after + TIMING.heartbeat
            w.now[y] = t + TIMING.verify_after
            events.append(w._apply(y, step_core(w.locals[y], "timeout", (pid(x), t)), f"timeout {x}"))
        else:
            raise ValueError(step)
        if w.broken is not None:
            w.broken.events = events
            raise w.broken
        return w, events

    def _break(self, violation: Violation) -> None:
        if self.broken is None:
            self.broken = violation

    def _apply(self, n: int, out: Outcome, what: str) -> Event:
        """Take a step's outcome at ``n``: its core's next state, sends to the links, deliveries to
        the log."""
        self.locals[n] = out.local
        sends = []
        for dests, text, beat in out.sends:
            targets = []
            for d in dests:
                dn = number(d)
                if beat is not None:
                    if self.announced.get((n, dn)) == beat:
                        continue  # a periodic heartbeat: nothing new for the link (module docstring)
                    self.announced[(n, dn)] = beat
                if dn in self.crashed or dn not in self.locals:
                    continue
                self.links[(n, dn)] = self.links.get((n, dn), ()) + (text,)
                targets.append(dn)
            if targets:
                sends.append((tuple(targets), text))
        if out.deliveries:
            self.logs[n] = self.logs.get(n, ()) + out.deliveries
        if out.alarm:
            self._break(Violation("false divergence alarm", f"peer {n}: {out.alarm}"))
        return Event(n, tuple(sends), out.described, what)

    def fingerprint(self) -> bytes:
        parts = (
            tuple(sorted((n, local.fp) for n, local in self.locals.items())),
            tuple(sorted(self.links.items())),
            tuple(sorted(self.sent.items())),
            tuple(sorted(self.crashed)), self.cut_on, self.cut_done, tuple(sorted(self.started)),
            tuple(sorted(self.left)), tuple(sorted(self.timed_out)),
            tuple(sorted(self.logs.items())),
            tuple(sorted(self.announced.items())),
            tuple(sorted(self.ticks.items())),
        )
        return hashlib.blake2b(pickle.dumps(parts, 5), digest_size=16).digest()


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
