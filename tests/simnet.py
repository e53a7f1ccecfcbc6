"""A seeded in-memory network of pure cores: the one network every protocol simulation runs on.

`Network.static` holds a static group (every core a member from the start, no clock); a `Network`
built directly holds dynamic groups: peers start and join, leave, crash and restart, their
connections break, partitions come and heal, and with ``expected`` the first group is founded among
known pids. Time passes in ticks (`TICK`), and every live core is ticked.

Links are FIFO: a frame never overtakes an earlier one on its link (unless ``fifo`` is off, which only
the test that shows the checks catch it uses). While a connection is down a link loses nothing: its
frames wait, and go in order once it is back (the link layer re-sends what was not confirmed); the
last ones may come twice (``resend_rate``). A crash ends a process at once: of its frames in flight
each link keeps a prefix (a crash mid-broadcast), as does a process that exits after it left.

Faults by hand, as etcd raft's test ``network`` has them: `cut` (the connection between two peers is
down until `heal`), `isolate` (every connection between some peers and the rest), `heal`, and `drop`
(a link that loses frames, which no link of TOM does: for the tests that show the checks notice).
`hold` and `release` make one direction of a link slow without breaking it (frames wait, nobody is
told).

Randomness: with a ``rng`` everything is drawn from the seed, so a failing seed replays exactly, and
each kind of run (static, dynamic) keeps the sequence of draws its seeds were found with — a seed a
test names (a regression, a known limit) means the same schedule only as long as the draws come in
the same order. Batching, refusals, partitions, forced stops and exits draw from streams of their own,
so that turning them on leaves the rest of a seed's schedule as it was. Without a ``rng`` nothing is
random: a frame takes its link's fixed latency, and a crash or an exit loses everything in flight
(the scenario transcripts, ``test_transcripts.py``).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from tom.core import Core, Ready, Timing, ViewDelivery
from tom.errors import UsageError
from tom.codec.frames import Frame, format_frame, parse_frame

TICK = 0.25

# event kind -> the method that handles it (its arguments follow the kind in the event)
HANDLERS = {"frame": "deliver_frame", "send": "send", "start": "start", "crash": "crash", "leave": "leave",
            "break": "break_link", "partition": "partition", "heal": "heal", "connect": "connect",
            "reconnect": "reconnect", "drain": "drain"}


def pid_of(i: int) -> str:
    return f"127.0.0.1:{5000 + i}"


def tag(notice) -> str:
    """A notice's name, whether the core hands out strings or typed notices."""
    return getattr(notice, "tag", notice)


@dataclass
class Node:
    """One incarnation of a peer process (a rejoin after a partition starts another `Node` of the
    same core: for the checks, the history before is that of a member removed as failed)."""

    pid: str
    core: Core
    incarnation: int
    alive: bool = True
    gone: str = ""  # "", "crashed", "left", "removed", "cut" (a partition; the peer goes on as a new member)
    delivered: list = field(default_factory=list)
    sent: list = field(default_factory=list)  # texts this incarnation handed to broadcast


@dataclass
class Network:
    """``n`` peers (``pid_of(0)``, ...), the events due (a heap by time, then by scheduling order), the
    links' state, and what every incarnation delivered."""

    seed: int
    n: int
    rng: random.Random | None
    max_delay: float = 1.0
    min_delay: float = 0.0005
    resend_rate: float = 0.002  # a frame that comes twice (re-sent after a reconnect)
    timing: Timing = field(default_factory=Timing)
    ticks: bool = True  # a clock, and cores ticked by it (a static group has none)
    connections: bool = True  # cores are told of connections (a static group's links are always up)
    fifo: bool = True
    wire: bool = True  # every frame round-trips through the text codec, as on a real link
    order: str = "lamport"
    quorum: str = "majority"
    # the peers know who may found the first group (`Core.joining(expected=...)`, as `tom peer` does
    # with its neighbors file): with a quorum, peers may then start, and partitions come, while the
    # first group forms — only a primary component of the pids founds one
    expected: bool = False
    # with ``expected``: a group may shrink below a majority of the pids (`Core(last_man_standing=)`)
    last_man_standing: bool = False
    # batching: a core often takes several frames in one step, so its ACKs go out in runs; the rule
    # (from the stream ``batching``): after a frame a peer's step goes on with probability 0.7, or
    # (``steps_end_together``, the static group's rule) every open step ends at once with
    # probability 0.3 after any event
    batching: random.Random | None = None
    steps_end_together: bool = False
    refusals: random.Random | None = None  # if set: a receiver sometimes refuses a frame (a link fault)
    refuse_rate: float = 0.003
    latency: dict = field(default_factory=dict)  # (src, dst) -> seconds, without a rng
    default_latency: float = 0.01
    now: float = 0.0
    nodes: dict[str, Node] = field(default_factory=dict)  # current incarnation per pid
    history: list[Node] = field(default_factory=list)  # every incarnation ever started
    log: list[str] = field(default_factory=list)
    down: set = field(default_factory=set)  # pairs of pids whose connection is cut until `heal`
    held: set = field(default_factory=set)  # (src, dst) links whose frames wait until `release`
    drops: dict = field(default_factory=dict)  # (src, dst) -> (rate, stream) of lost frames
    # groups founded while another group had a live member with a quorum (two primary components)
    rival_groups: list = field(default_factory=list)
    # observers (the transcripts): a core's step ended / a core took a frame
    on_step: Callable[[Node, Ready], None] | None = None
    on_receive: Callable[[str, str, Frame], None] | None = None
    _events: list = field(default_factory=list)
    _seq: int = 0
    _next_tick: float = 0.0
    _link_free: dict = field(default_factory=dict)
    _backlog: dict = field(default_factory=dict)  # (src, dst) -> frames waiting for the link
    _dirty: set = field(default_factory=set)  # peers with an open step (steps_end_together)
    _parsed: dict = field(default_factory=dict)  # wire text -> the frame parsed from it (`over_the_wire`)

    @classmethod
    def static(cls, n: int, seed: int, max_delay: float = 1.0, batching: bool = False,
               order: str = "lamport") -> "Network":
        """``n`` cores of one static group; delays from 0 to ``max_delay``."""
        net = cls(seed, n, random.Random(seed), max_delay, min_delay=0.0, resend_rate=0.0, ticks=False,
                  connections=False, order=order, steps_end_together=True,
                  batching=random.Random(f"batching/{seed}") if batching else None)
        for pid in net.pids:
            node = Node(pid, Core(pid, net.pids, order=order), 0)
            net.nodes[pid] = node
            net.history.append(node)
        return net

    @classmethod
    def fixed(cls, n: int, latency: float = 0.01, **options) -> "Network":
        """Dynamic groups with nothing random: every frame takes its link's latency (``latency``
        unless `latency` says otherwise), and a crash or an exit loses everything in flight."""
        return cls(0, n, None, resend_rate=0.0, default_latency=latency, **options)

    @property
    def pids(self) -> list[str]:
        return [pid_of(i) for i in range(self.n)]

    @property
    def cores(self) -> dict[str, Core]:
        return {pid: node.core for pid, node in self.nodes.items()}

    @property
    def delivered(self) -> dict[str, list]:
        return {pid: node.delivered for pid, node in self.nodes.items()}

    def push(self, at: float, *item) -> None:
        """Schedule an event: a kind of `HANDLERS` and its arguments."""
        self._seq += 1
        heapq.heappush(self._events, (at, self._seq, item))

    def schedule_send(self, at: float, pid: str, text: str) -> None:
        self.push(at, "send", pid, text)

    def _draw(self, lo: float, hi: float, fixed: float) -> float:
        return fixed if self.rng is None else self.rng.uniform(lo, hi)

    # -- peers -----------------------------------------------------------------------------------

    def start(self, pid: str, resume: tuple[int, str] = (0, "")) -> None:
        """A process starts (a restart if one runs: it dies first) and dials every live peer; a durable
        one says where its history ends (``resume``: its last view and group)."""
        if any(pid in pair for pair in self.down) and not self.expected:
            # not during a partition: a peer that meets none of the group founds one of its own
            # (docs/guarantees.md: two groups; no quorum can tell them apart), so it starts once it heals
            self.push(self.now + 1.0, "start", pid, resume)
            return
        old = self.nodes.get(pid)
        if old is not None and old.alive:
            self.crash(pid)
        inc = len(self.history) + 1
        node = Node(pid, Core.joining(pid, inc, self.timing, now=self.now, order=self.order,
                                      quorum=self.quorum, expected=self.pids if self.expected else (),
                                      last_man_standing=self.last_man_standing, resume=resume), inc)
        self.nodes[pid] = node
        self.history.append(node)
        self.log.append(f"{self.now:.2f} start {pid}/{inc}")
        for other in self.nodes.values():
            if other is not node and other.alive:
                at = self.now + self._draw(0.001, 0.05, self.default_latency)
                self.push(at, "connect", pid, other.pid, inc, other.incarnation)

    def crash(self, pid: str) -> None:
        node = self.nodes.get(pid)
        if not node or not node.alive:
            return
        node.alive, node.gone = False, "crashed"
        self.log.append(f"{self.now:.2f} crash {pid}")
        self.lose_in_flight(node)
        for other in self.nodes.values():
            if other.alive:
                other.core.disconnected(pid)

    def lose_in_flight(self, node: Node, rng: random.Random | None = None) -> None:
        """The process is gone: of its frames in flight, each link keeps a random prefix — with ``rng``
        possibly none of them; without, at least the first (the crash model the regression seeds
        were found with, drawn from the network's own stream); with no randomness at all, none."""
        cut: dict[str, float] = {}
        kept = []
        for at, seq, item in sorted(self._events):
            if item[0] == "frame" and item[1] == node.pid and item[4] == node.incarnation:
                dst = item[2]
                if dst not in cut:
                    if rng is not None:
                        cut[dst] = rng.choice([float("-inf"), at, float("inf")])
                    elif self.rng is not None:
                        cut[dst] = at if self.rng.random() < 0.5 else float("inf")
                    else:
                        cut[dst] = float("-inf")
                if at > cut[dst]:
                    continue
            kept.append((at, seq, item))
        self._events = kept
        heapq.heapify(self._events)

    def leave(self, pid: str) -> None:
        node = self.nodes.get(pid)
        if node and node.alive:
            self.log.append(f"{self.now:.2f} leave {pid}")
            node.core.leave()
            self.flush(node)

    def send(self, pid: str, text: str) -> None:
        node = self.nodes.get(pid)
        if not node or not node.alive:
            return
        try:
            node.core.broadcast(text, sent_at=self.now)
        except UsageError:
            return
        node.sent.append(text)
        self._end_step(node, by_frame=False)

    # -- connections and faults ------------------------------------------------------------------

    def connect(self, a: str, b: str, inc_a: int, inc_b: int) -> None:
        na, nb = self.nodes.get(a), self.nodes.get(b)
        if not (na and nb and na.alive and nb.alive and na.incarnation == inc_a and nb.incarnation == inc_b):
            return
        if frozenset((a, b)) in self.down:
            return  # they connect when it heals
        na.core.connected(b, inc_b)
        nb.core.connected(a, inc_a)
        self.flush(na)
        self.flush(nb)
        self.push(self.now, "drain", a, b)
        self.push(self.now, "drain", b, a)

    def reconnect(self, a: str, b: str, inc_a: int, inc_b: int) -> None:
        self.connect(a, b, inc_a, inc_b)

    def drain(self, src: str, dst: str) -> None:
        """Deliver, in order, the frames that waited for the link src->dst."""
        for frame, inc in self._backlog.pop((src, dst), []):
            self.deliver_frame(src, dst, frame, inc)

    def break_link(self, a: str, b: str, rng: random.Random | None = None) -> None:
        """The connection a<->b drops and comes back: frames wait, the last ones may come twice."""
        na, nb = self.nodes.get(a), self.nodes.get(b)
        if not (na and nb and na.alive and nb.alive) or frozenset((a, b)) in self.down:
            return
        self.log.append(f"{self.now:.2f} break {a}<->{b}")
        na.core.disconnected(b)
        nb.core.disconnected(a)
        pause = (rng or self.rng).uniform(0.1, 3.0) if (rng or self.rng) else 1.0
        for x, y in ((a, b), (b, a)):
            self._link_free[(x, y)] = max(self._link_free.get((x, y), 0.0), self.now) + pause
        self.push(self.now + pause, "reconnect", a, b, na.incarnation, nb.incarnation)

    def _cut(self, a: str, b: str) -> None:
        self.down.add(frozenset((a, b)))
        na, nb = self.nodes.get(a), self.nodes.get(b)
        if self.connections and na and nb and na.alive and nb.alive:
            na.core.disconnected(b)
            nb.core.disconnected(a)

    def _cut_off(self, side: frozenset[str]) -> None:
        for a in sorted(side):
            for b in self.pids:
                if b not in side:
                    self._cut(a, b)

    def cut(self, a: str, b: str) -> None:
        """The connection a<->b is down until `heal` (its frames wait; both cores are told)."""
        self.log.append(f"{self.now:.2f} cut {a}<->{b}")
        self._cut(a, b)

    def isolate(self, *side: str) -> None:
        """Every connection between the peers ``side`` and the rest is down until `heal`."""
        self.log.append(f"{self.now:.2f} isolate {sorted(side)}")
        self._cut_off(frozenset(side))

    def partition(self, side: frozenset[str], lasts: float) -> None:
        """Every connection between ``side`` and the rest breaks, and stays down until the `heal`
        ``lasts`` seconds later. (Without ``expected``, not while a peer is still being admitted:
        see `start`.)"""
        if not self.expected and any(n.alive and n.core.mode == "joining" for n in self.nodes.values()):
            self.push(self.now + 0.5, "partition", side, lasts)
            return
        self.push(self.now + lasts, "heal")
        self.log.append(f"{self.now:.2f} partition {sorted(side)} | the rest")
        self._cut_off(side)

    def heal(self) -> None:
        """Every cut connection comes back (and its waiting frames go)."""
        self.log.append(f"{self.now:.2f} heal")
        pairs, self.down = self.down, set()
        for pair in sorted(pairs, key=sorted):
            a, b = sorted(pair)
            if not self.connections:
                self.push(self.now, "drain", a, b)
                self.push(self.now, "drain", b, a)
                continue
            na, nb = self.nodes.get(a), self.nodes.get(b)
            if na and nb and na.alive and nb.alive and b not in na.core.peers.links:
                at = self.now + self._draw(0.001, 0.5, self.default_latency)
                self.push(at, "reconnect", a, b, na.incarnation, nb.incarnation)

    def drop(self, src: str, dst: str, rate: float = 1.0, rng: random.Random | None = None) -> None:
        """The link src->dst loses each frame it would hand over with probability ``rate`` (drawn from
        ``rng``, by default a stream of its own); rate 0 mends it."""
        if rate <= 0:
            self.drops.pop((src, dst), None)
            return
        self.drops[(src, dst)] = (rate, rng or random.Random(f"drops/{self.seed}/{src}/{dst}"))

    def hold(self, src: str, dst: str) -> None:
        """Frames on src->dst wait (a slow link; the connection stays up) until `release`."""
        self.held.add((src, dst))

    def release(self, src: str, dst: str) -> None:
        self.held.discard((src, dst))
        self.drain(src, dst)

    def _link_up(self, src: str, dst: Node) -> bool:
        if (src, dst.pid) in self.held:
            return False
        if self.connections:
            return src in dst.core.peers.links
        return frozenset((src, dst.pid)) not in self.down

    # -- traffic ---------------------------------------------------------------------------------

    def transmit(self, node: Node, dst: str, frame: Frame) -> None:
        key = (node.pid, dst)
        at = self.now + self._draw(self.min_delay, self.max_delay, self.latency.get(key, self.default_latency))
        if self.fifo:
            at = max(at, self._link_free.get(key, 0.0))
            self._link_free[key] = at
        self.push(at, "frame", node.pid, dst, frame, node.incarnation)
        if self.resend_rate and self.rng.random() < self.resend_rate:
            self.push(at + 0.001, "frame", node.pid, dst, frame, node.incarnation)

    def deliver_frame(self, src: str, dst: str, frame: Frame, inc_src: int) -> None:
        ns, nd = self.nodes.get(src), self.nodes.get(dst)
        if not nd or not nd.alive:
            return
        lossy = self.drops.get((src, dst))
        if (lossy and self._link_up(src, nd) and not self._backlog.get((src, dst))
                and lossy[1].random() < lossy[0]):
            return  # lost, and the link goes on
        if not ns or ns.incarnation != inc_src:
            return  # the connection of an old incarnation is gone
        if not self._link_up(src, nd) or self._backlog.get((src, dst)):
            # not (yet / any more) connected: it waits, in order, until the link is back
            self._backlog.setdefault((src, dst), []).append((frame, inc_src))
            return
        if self.refusals is not None and self.now >= 6.0 and self.refusals.random() < self.refuse_rate:
            # (not while the first group forms: a partition then may leave two groups, see docs/guarantees.md)
            # the receiver cannot take this frame (say, garbled in transit): a link fault — the
            # connection closes, and the frame and everything after it come again on the next one
            self._backlog[(src, dst)] = [(frame, inc_src)]
            self.log.append(f"{self.now:.2f} {dst} refuses a frame of {src}")
            self.break_link(src, dst, self.refusals)
            return
        if self.wire:
            frame = self.over_the_wire(frame)
        if self.on_receive is not None:
            self.on_receive(src, dst, frame)
        nd.core.receive(src, frame)
        self._end_step(nd, by_frame=True)

    def over_the_wire(self, frame: Frame) -> Frame:
        """``frame`` as its receiver takes it off a link: formatted, then parsed from that text. A text
        is parsed once per network (a broadcast reaches every member as one text, an idle peer's
        heartbeats repeat): parsing is a function of the text, and frames are immutable values."""
        text = format_frame(frame)
        parsed = self._parsed.get(text)
        if parsed is None:
            if len(self._parsed) >= 4096:
                self._parsed.clear()
            parsed = self._parsed[text] = parse_frame(text)
        return parsed

    def _end_step(self, node: Node, by_frame: bool) -> None:
        """A core handled an event: its step ends now (its sends go out), or, batching, maybe later."""
        if self.batching is None:
            self.flush(node)
        elif self.steps_end_together:
            self._dirty.add(node.pid)
            if self.batching.random() < 0.3 or not self._events:
                for pid in sorted(self._dirty):
                    self.flush(self.nodes[pid])
                self._dirty.clear()
        elif not (by_frame and self.batching.random() < 0.7):
            self.flush(node)  # (otherwise its step goes on: what it sends leaves with its next frame or tick)

    def flush(self, node: Node) -> None:
        """End the core's step: take its `Ready`, record what it delivered, act on its notices, send."""
        ready = node.core.ready()
        node.delivered.extend(ready.deliveries)
        if self.on_step is not None:
            self.on_step(node, ready)
        view = node.core.view
        if view is not None and view.id == 1 and any(type(d) is ViewDelivery and d.view == 1
                                                     for d in ready.deliveries):
            rivals = sorted({n.core.view.group for n in self.nodes.values()
                             if n.alive and n.core.view is not None and n.core.view.group != view.group
                             and n.core.mode != "joining" and n.core.no_quorum is None})
            if rivals:
                self.rival_groups.append(f"{self.now:.2f} {node.pid} founded {view.group} beside {rivals}")
        for notice in map(tag, ready.notices):
            if notice in ("left", "removed"):
                node.alive, node.gone = False, notice
                self.log.append(f"{self.now:.2f} {node.pid} {notice}")
            elif notice == "rejoining":
                # the process goes on, as a new member: for the checks, what it delivered so far is
                # the history of a member removed as failed, and its continuation another member
                # (everything of this step came before: a rejoin waits for an INSTALL)
                self.log.append(f"{self.now:.2f} {node.pid} rejoining")
                node.alive, node.gone = False, "cut"
                again = Node(node.pid, node.core, node.incarnation, sent=node.sent)
                self.nodes[node.pid] = again
                self.history.append(again)
                node = again
        for dests, frame in ready.sends:
            for dst in dests:
                self.transmit(node, dst, frame)
        if node.gone in ("left", "removed"):
            # the process exits: what it had not yet written may never leave (as after a crash);
            # drawn from a stream of its own, so that the scenario of a seed stays what it was
            exits = None if self.rng is None else random.Random(f"{self.seed}/{node.pid}/{node.incarnation}")
            self.lose_in_flight(node, exits)
            for other in self.nodes.values():
                if other.alive:
                    other.core.disconnected(node.pid)

    def tick(self) -> None:
        """The next tick of the clock: every live core learns the time, and its step ends."""
        self.now = self._next_tick
        for node in list(self.nodes.values()):
            if node.alive:
                node.core.tick(self.now)
                self.flush(node)
        self._next_tick += TICK

    def run(self, until: float | None = None, exact: bool = False, max_events: int = 2_000_000) -> None:
        """Handle events in time order, ticking the clock between them, up to the last tick at or
        before ``until`` and the events due by the next (without a clock: until no event is left).
        ``exact``: nothing after ``until``, and the time is then ``until``."""
        for _ in range(max_events):
            due = self._next_tick if self.ticks else float("inf")
            if exact:
                due = min(due, until)
            if self._events and self._events[0][0] <= due:
                self.now, _, item = heapq.heappop(self._events)
                if item[0] == "stop":
                    return
                getattr(self, HANDLERS[item[0]])(*item[1:])
                continue
            if self.ticks and until is not None and self._next_tick <= until:
                self.tick()
                continue
            if exact:
                self.now = max(self.now, until)
            return
        raise AssertionError(f"seed {self.seed}: simulation did not finish")


# -- seeded workloads ----------------------------------------------------------------------------

def random_workload(net: Network, messages: int, span: float) -> list[tuple[str, str]]:
    """Schedule ``messages`` sends at random peers and times in [0, span); return (pid, text) sent."""
    pids = sorted(net.nodes)
    sent = []
    for i in range(messages):
        pid = net.rng.choice(pids)
        text = f"m{i} from {pid}"
        net.schedule_send(net.rng.uniform(0, span), pid, text)
        sent.append((pid, text))
    return sent


def scenario(seed: int, *, faults: bool = True, batching: bool | None = None, edges: bool = False,
             order: str = "lamport", quorum: str = "majority", partitions: bool = False,
             founding: bool = False, slow: tuple[float, float] | None = None) -> tuple[Network, float]:
    """Plan one random scenario of dynamic groups; return the network, not yet run, and when it ends.
    ``batching`` (default: odd seeds) lets a peer handle several frames per step, from a random stream
    of its own. ``edges`` adds, from streams of their own (so a seed's other events stay what they
    were): receivers that refuse frames (link faults), and leavers force-stopped before their leave is
    delivered. ``order``: the group's order; a seed draws the same scenario in every order.
    ``partitions``: one or two partitions into random sides, from a stream of their own, each healing
    after 1 to 15 s. ``founding``: the peers know the expected pids (`Network.expected`) and the first
    partition comes while the first group forms (0-2 s), before the late starters start. ``slow``: every
    frame takes from ``slow[0]`` to ``slow[1]`` seconds (slow links with jitter; the seed's other draws
    are as without it), and the scenario runs that much longer."""
    rng = random.Random(seed)
    n = rng.randint(3, 6)
    max_delay = rng.choice([0.005, 0.05, 0.5])
    net = Network(seed, n, rng, max_delay=max_delay if slow is None else slow[1], order=order, quorum=quorum,
                  expected=founding)
    if slow is not None:
        net.min_delay = slow[0]
    if seed % 2 == 1 if batching is None else batching:
        net.batching = random.Random(f"batching/{seed}")
    forced = random.Random(f"forced/{seed}") if edges else None
    if edges:
        net.refusals = random.Random(f"refusals/{seed}")
    pids = net.pids
    late = set(rng.sample(pids, rng.randint(0, 2))) if faults else set()
    for pid in pids:
        at = rng.uniform(8, 25) if pid in late else rng.uniform(0, 0.5)
        net.push(at, "start", pid)
    horizon = 40.0
    for k in range(rng.randint(5, 60)):
        net.push(rng.uniform(3, horizon), "send", rng.choice(pids), f"m{k}")
    if faults:
        victims = rng.sample(pids, rng.randint(0, max(0, n - 2)))
        for pid in victims:
            what = rng.choice(["crash", "crash", "leave", "restart"])
            at = rng.uniform(5, horizon)
            if what == "restart":
                net.push(at, "crash", pid)
                net.push(at + rng.uniform(0.5, 10), "start", pid)
            else:
                net.push(at, what, pid)
                if what == "leave" and forced is not None and forced.random() < 0.5:
                    # a second signal (or the leave timeout): the process stops at once, wherever its
                    # leave is; like a crash, it must never have delivered outside the rule
                    net.push(at + forced.uniform(0.0, 2.0), "crash", pid)
        for _ in range(rng.randint(0, 3)):
            # not while the first group forms: a partition then may leave two groups (see docs/guarantees.md)
            a, b = rng.sample(pids, 2)
            net.push(rng.uniform(6, horizon), "break", a, b)
    if partitions:
        cuts = random.Random(f"partitions/{seed}")
        at = cuts.uniform(0, 2) if founding else cuts.uniform(6, 15)
        for _ in range(cuts.randint(1, 2)):
            side = frozenset(cuts.sample(pids, cuts.randint(1, n - 1)))
            lasts = cuts.uniform(1, 15)
            net.push(at, "partition", side, lasts)
            at += lasts + cuts.uniform(1, 8)
    return net, max(horizon, at if partitions else 0) + 45 + (60 * slow[1] if slow is not None else 0)


def random_scenario(seed: int, **options) -> Network:
    """Plan (`scenario`) and run one random scenario; return the finished network."""
    net, until = scenario(seed, **options)
    net.run(until=until)
    return net
