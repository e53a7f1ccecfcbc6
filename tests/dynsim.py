"""A seeded simulation of dynamic groups: joins, leaves, crashes, restarts, broken connections.

Everything — start times, delays, faults, workload — is drawn from one seed, so a failing seed replays
exactly. Links are FIFO while connected; a connection that breaks loses nothing (the link layer
re-sends what was not confirmed) but may deliver the last frames twice. A crash ends a peer at once;
of the frames it had in flight, each link keeps only a prefix (a crash mid-broadcast). A partition
breaks every connection between two sides until it heals (then they reconnect and re-send).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from orders import check_causal, check_same_numbers, check_sequencer_numbers, settled
from tom.core import Core, Timing, ViewDelivery, has_quorum
from tom.errors import UsageError
from tom.codec.frames import Frame, format_frame, parse_frame
from tom.codec.pid import pid_key

TICK = 0.25


@dataclass
class Node:
    pid: str
    core: Core
    incarnation: int
    alive: bool = True
    gone: str = ""  # "", "crashed", "left", "removed", "cut" (a partition; the peer goes on as a new member)
    delivered: list = field(default_factory=list)
    sent: list = field(default_factory=list)  # texts this incarnation handed to broadcast


@dataclass
class Sim:
    seed: int
    n: int
    rng: random.Random
    max_delay: float
    timing: Timing = field(default_factory=Timing)
    now: float = 0.0
    nodes: dict[str, Node] = field(default_factory=dict)  # current incarnation per pid
    history: list[Node] = field(default_factory=list)  # every incarnation ever started
    _events: list = field(default_factory=list)
    _seq: int = 0
    _link_free: dict = field(default_factory=dict)
    _backlog: dict = field(default_factory=dict)  # (src, dst) -> frames waiting for the connection
    log: list[str] = field(default_factory=list)
    batching: random.Random | None = None  # if set: a peer often takes several frames per step
    refusals: random.Random | None = None  # if set: a receiver sometimes refuses a frame (a link fault)
    refuse_rate: float = 0.003
    order: str = "lamport"
    quorum: str = "majority"
    cut: set = field(default_factory=set)  # pairs of pids a partition separates
    # the peers know who may found the first group (`Core.joining(expected=...)`, as `tom peer` does
    # with its neighbors file): with a quorum, peers may then start, and partitions come, while the
    # first group forms — only a primary component of the pids founds one
    expected: bool = False
    # groups founded while another group had a live member with a quorum (two primary components)
    rival_groups: list = field(default_factory=list)

    @property
    def pids(self) -> list[str]:
        return [f"127.0.0.1:{5000 + i}" for i in range(self.n)]

    def push(self, at: float, *item) -> None:
        self._seq += 1
        heapq.heappush(self._events, (at, self._seq, item))

    # -- topology --------------------------------------------------------------------------------

    def start(self, pid: str) -> None:
        if any(pid in pair for pair in self.cut) and not self.expected:
            # not during a partition: a peer that meets none of the group founds one of its own
            # (docs/guarantees.md: two groups; no quorum can tell them apart), so it starts once it heals
            self.push(self.now + 1.0, "start", pid)
            return
        old = self.nodes.get(pid)
        if old is not None and old.alive:
            self.crash(pid)  # a restart: the old incarnation dies first
        inc = len(self.history) + 1
        node = Node(pid, Core.joining(pid, inc, self.timing, now=self.now, order=self.order,
                                      quorum=self.quorum, expected=self.pids if self.expected else ()), inc)
        self.nodes[pid] = node
        self.history.append(node)
        self.log.append(f"{self.now:.2f} start {pid}/{inc}")
        for other in self.nodes.values():
            if other is not node and other.alive:
                self.push(self.now + self.rng.uniform(0.001, 0.05), "connect", pid, other.pid, inc, other.incarnation)

    def connect(self, a: str, b: str, inc_a: int, inc_b: int) -> None:
        na, nb = self.nodes.get(a), self.nodes.get(b)
        if not (na and nb and na.alive and nb.alive and na.incarnation == inc_a and nb.incarnation == inc_b):
            return
        if frozenset((a, b)) in self.cut:
            return  # partitioned: they connect when it heals
        na.core.connected(b, inc_b)
        nb.core.connected(a, inc_a)
        self.flush(na)
        self.flush(nb)
        self.push(self.now, "drain", a, b)
        self.push(self.now, "drain", b, a)

    def drain(self, src: str, dst: str) -> None:
        """Deliver, in order, the frames that waited for the connection src->dst."""
        backlog = self._backlog.pop((src, dst), [])
        for frame, inc in backlog:
            self.deliver_frame(src, dst, frame, inc)

    def crash(self, pid: str) -> None:
        node = self.nodes.get(pid)
        if not node or not node.alive:
            return
        node.alive, node.gone = False, "crashed"
        self.log.append(f"{self.now:.2f} crash {pid}")
        self.cut_in_flight(node)
        for other in self.nodes.values():
            if other.alive:
                other.core.disconnected(pid)

    def cut_in_flight(self, node: Node, rng: random.Random | None = None) -> None:
        """The process is gone: of its frames in flight, each link keeps a random prefix — with ``rng``
        possibly none of them; without, at least the first (the crash model the regression seeds
        were found with, drawn from the simulation's own stream)."""
        pid = node.pid
        cut: dict[str, float] = {}
        kept = []
        for at, seq, item in sorted(self._events):
            if item[0] == "frame" and item[1] == pid and item[5] == node.incarnation:
                dst = item[2]
                if dst not in cut:
                    if rng is None:
                        cut[dst] = at if self.rng.random() < 0.5 else float("inf")
                    else:
                        cut[dst] = rng.choice([float("-inf"), at, float("inf")])
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

    def break_link(self, a: str, b: str, rng: random.Random | None = None) -> None:
        """The connection a<->b drops and comes back: frames wait, the last ones may come twice."""
        na, nb = self.nodes.get(a), self.nodes.get(b)
        if not (na and nb and na.alive and nb.alive) or frozenset((a, b)) in self.cut:
            return
        self.log.append(f"{self.now:.2f} break {a}<->{b}")
        na.core.disconnected(b)
        nb.core.disconnected(a)
        pause = (rng or self.rng).uniform(0.1, 3.0)
        for x, y in ((a, b), (b, a)):
            self._link_free[(x, y)] = max(self._link_free.get((x, y), 0.0), self.now) + pause
        self.push(self.now + pause, "reconnect", a, b, na.incarnation, nb.incarnation)

    def partition(self, side: frozenset[str], lasts: float) -> None:
        """Every connection between ``side`` and the rest breaks, and stays down until `heal`. (Not
        while a peer is still being admitted: see `start`.)"""
        if not self.expected and any(n.alive and n.core.mode == "joining" for n in self.nodes.values()):
            self.push(self.now + 0.5, "partition", side, lasts)
            return
        self.push(self.now + lasts, "heal")
        self.log.append(f"{self.now:.2f} partition {sorted(side)} | the rest")
        for a in sorted(side):
            for b in self.pids:
                if b not in side:
                    self.cut.add(frozenset((a, b)))
                    na, nb = self.nodes.get(a), self.nodes.get(b)
                    if na and nb and na.alive and nb.alive:
                        na.core.disconnected(b)
                        nb.core.disconnected(a)

    def heal(self) -> None:
        self.log.append(f"{self.now:.2f} heal")
        pairs, self.cut = self.cut, set()
        for pair in sorted(pairs, key=sorted):
            a, b = sorted(pair)
            na, nb = self.nodes.get(a), self.nodes.get(b)
            if na and nb and na.alive and nb.alive and b not in na.core.links:
                self.push(self.now + self.rng.uniform(0.001, 0.5), "reconnect", a, b, na.incarnation, nb.incarnation)

    def reconnect(self, a: str, b: str, inc_a: int, inc_b: int) -> None:
        na, nb = self.nodes.get(a), self.nodes.get(b)
        if not (na and nb and na.alive and nb.alive and na.incarnation == inc_a and nb.incarnation == inc_b):
            return
        self.connect(a, b, inc_a, inc_b)

    # -- traffic -----------------------------------------------------------------------------------

    def flush(self, node: Node) -> None:
        ready = node.core.ready()
        node.delivered.extend(ready.deliveries)
        view = node.core.view
        if view is not None and view.id == 1 and any(type(d) is ViewDelivery and d.view == 1
                                                     for d in ready.deliveries):
            rivals = sorted({n.core.view.group for n in self.nodes.values()
                             if n.alive and n.core.view is not None and n.core.view.group != view.group
                             and n.core.mode != "joining" and n.core.no_quorum is None})
            if rivals:
                self.rival_groups.append(f"{self.now:.2f} {node.pid} founded {view.group} beside {rivals}")
        for notice in (n.tag for n in ready.notices):
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
            self.cut_in_flight(node, random.Random(f"{self.seed}/{node.pid}/{node.incarnation}"))
            for other in self.nodes.values():
                if other.alive:
                    other.core.disconnected(node.pid)

    def transmit(self, node: Node, dst: str, frame: Frame) -> None:
        key = (node.pid, dst)
        at = max(self.now + self.rng.uniform(0.0005, self.max_delay), self._link_free.get(key, 0.0))
        self._link_free[key] = at
        self.push(at, "frame", node.pid, dst, frame, 0, node.incarnation)
        if self.rng.random() < 0.002:  # a re-send after a reconnect: the same frame again, later
            self.push(at + 0.001, "frame", node.pid, dst, frame, 0, node.incarnation)

    def deliver_frame(self, src: str, dst: str, frame: Frame, inc_src: int) -> None:
        ns, nd = self.nodes.get(src), self.nodes.get(dst)
        if not nd or not nd.alive:
            return
        if not ns or ns.incarnation != inc_src:
            return  # the connection of an old incarnation is gone
        backlog = self._backlog.get((src, dst))
        if src not in nd.core.links or backlog:
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
        frame = parse_frame(format_frame(frame))
        nd.core.receive(src, frame)
        if self.batching is not None and self.batching.random() < 0.7:
            return  # its step goes on: what it sends leaves with its next frame or tick (ACK runs)
        self.flush(nd)

    def send(self, pid: str, text: str) -> None:
        node = self.nodes.get(pid)
        if not node or not node.alive:
            return
        try:
            node.core.broadcast(text, sent_at=self.now)
        except UsageError:
            return
        node.sent.append(text)
        self.flush(node)

    def run(self, until: float, max_events: int = 2_000_000) -> None:
        next_tick = 0.0
        for _ in range(max_events):
            if self._events and self._events[0][0] <= next_tick:
                self.now, _, item = heapq.heappop(self._events)
                kind = item[0]
                if kind == "frame":
                    self.deliver_frame(item[1], item[2], item[3], item[5])
                elif kind == "connect":
                    self.connect(*item[1:])
                elif kind == "reconnect":
                    self.reconnect(*item[1:])
                elif kind == "drain":
                    self.drain(item[1], item[2])
                elif kind == "send":
                    self.send(item[1], item[2])
                elif kind == "start":
                    self.start(item[1])
                elif kind == "crash":
                    self.crash(item[1])
                elif kind == "leave":
                    self.leave(item[1])
                elif kind == "break":
                    self.break_link(item[1], item[2])
                elif kind == "partition":
                    self.partition(item[1], item[2])
                elif kind == "heal":
                    self.heal()
                elif kind == "stop":
                    return
                continue
            if next_tick > until:
                return
            self.now = next_tick
            for node in list(self.nodes.values()):
                if node.alive:
                    node.core.tick(self.now)
                    self.flush(node)
            next_tick += TICK
        raise AssertionError(f"seed {self.seed}: simulation did not finish")


def random_scenario(seed: int, *, faults: bool = True, batching: bool | None = None,
                    edges: bool = False, order: str = "lamport", quorum: str = "majority",
                    partitions: bool = False, founding: bool = False) -> Sim:
    """Build and run one random scenario; return the finished simulation. ``batching`` (default: odd
    seeds) lets a peer handle several frames per step, from a random stream of its own. ``edges`` adds,
    from streams of their own (so a seed's other events stay what they were): receivers that refuse
    frames (link faults), and leavers force-stopped before their leave is delivered. ``order``: the
    group's order; a seed draws the same scenario in every order. ``partitions``: one or two
    partitions into random sides, from a stream of their own, each healing after 1 to 15 s.
    ``founding``: the peers know the expected pids (`Sim.expected`) and the first partition comes
    while the first group forms (0-2 s), before the late starters start."""
    rng = random.Random(seed)
    n = rng.randint(3, 6)
    sim = Sim(seed, n, rng, max_delay=rng.choice([0.005, 0.05, 0.5]), order=order, quorum=quorum,
              expected=founding)
    if seed % 2 == 1 if batching is None else batching:
        sim.batching = random.Random(f"batching/{seed}")
    forced = random.Random(f"forced/{seed}") if edges else None
    if edges:
        sim.refusals = random.Random(f"refusals/{seed}")
    pids = sim.pids
    late = set(rng.sample(pids, rng.randint(0, 2))) if faults else set()
    for pid in pids:
        at = rng.uniform(8, 25) if pid in late else rng.uniform(0, 0.5)
        sim.push(at, "start", pid)
    horizon = 40.0
    for k in range(rng.randint(5, 60)):
        sim.push(rng.uniform(3, horizon), "send", rng.choice(pids), f"m{k}")
    if faults:
        victims = rng.sample(pids, rng.randint(0, max(0, n - 2)))
        for pid in victims:
            what = rng.choice(["crash", "crash", "leave", "restart"])
            at = rng.uniform(5, horizon)
            if what == "restart":
                sim.push(at, "crash", pid)
                sim.push(at + rng.uniform(0.5, 10), "start", pid)
            else:
                sim.push(at, what, pid)
                if what == "leave" and forced is not None and forced.random() < 0.5:
                    # a second signal (or the leave timeout): the process stops at once, wherever its
                    # leave is; like a crash, it must never have delivered outside the rule
                    sim.push(at + forced.uniform(0.0, 2.0), "crash", pid)
        for _ in range(rng.randint(0, 3)):
            # not while the first group forms: a partition then may leave two groups (see docs/guarantees.md)
            a, b = rng.sample(pids, 2)
            sim.push(rng.uniform(6, horizon), "break", a, b)
    if partitions:
        cuts = random.Random(f"partitions/{seed}")
        at = cuts.uniform(0, 2) if founding else cuts.uniform(6, 15)
        for _ in range(cuts.randint(1, 2)):
            side = frozenset(cuts.sample(pids, cuts.randint(1, n - 1)))
            lasts = cuts.uniform(1, 15)
            sim.push(at, "partition", side, lasts)
            at += lasts + cuts.uniform(1, 8)
    sim.run(until=max(horizon, at if partitions else 0) + 45)
    return sim


# -- the guarantees ------------------------------------------------------------------------------

def event_id(d) -> tuple:
    if isinstance(d, ViewDelivery):  # every field: two peers must deliver the very same view change
        return ("view", d.view, d.clock, d.pid, d.members, d.joined, d.left, d.removed)
    return ("msg", d.clock, d.pid, d.text)


def by_view(node: Node) -> list[tuple]:
    """A peer's deliveries as (view event, set of the messages of the view it opens) pairs: what the
    causal order promises to agree on."""
    out: list[tuple] = []
    for d in node.delivered:
        if isinstance(d, ViewDelivery):
            out.append((event_id(d), set()))
        elif out:
            out[-1][1].add(event_id(d))
    return [(v, frozenset(m)) for v, m in out]


def check(sim: Sim, liveness: bool = True) -> None:
    """Assert the guarantees of dynamic groups on a finished simulation (message names order and seed).

    Lamport: every peer, crashed or not, delivers a prefix-consistent part of one sequence (uniform).
    Sequencer: one sequence among the peers that did not crash; a peer that crashed may have delivered,
    in its last view, messages nobody else holds (not uniform), but in the same numbering.
    Causal: per view, the same set at every member that stays for the next view, in causal order."""
    order = sim.order
    where = f"{order} seed {sim.seed}\n" + "\n".join(sim.log[-40:])
    seqs = {id(n): [event_id(d) for d in n.delivered] for n in sim.history}
    msg_view: dict[tuple, int] = {}
    for node in sim.history:
        seq = seqs[id(node)]
        assert len(set(seq)) == len(seq), f"{node.pid}/{node.incarnation} delivered twice; {where}"
        if order == "lamport":
            ks = [(d.clock, pid_key(d.pid)) for d in node.delivered]
            assert ks == sorted(ks) and len(set(ks)) == len(ks), f"{node.pid} keys not increasing; {where}"
        elif order == "sequencer":
            check_sequencer_numbers(node.delivered, f"{node.pid}/{node.incarnation}: {where}")
        else:
            check_causal(node.delivered, f"{node.pid}/{node.incarnation}: {where}")
        first = node.delivered[0].index if node.delivered else 1  # (a rejoined peer's part goes on counting)
        assert [d.index for d in node.delivered] == list(range(first, first + len(seq))), where
        for d in node.delivered:
            if not isinstance(d, ViewDelivery):
                mid = event_id(d)
                assert msg_view.setdefault(mid, d.view) == d.view, f"{mid} in two views; {where}"
    if order == "sequencer":
        check_same_numbers({f"{n.pid}/{n.incarnation}": settled(n.delivered) if n.gone in ("crashed", "removed", "cut")
                            else n.delivered for n in sim.history}, where)
    if order == "causal":
        _check_causal_sets(sim, where)
    else:
        _check_one_sequence(sim, seqs, where)
    _check_leaves_and_liveness(sim, seqs, where, liveness)


def _check_causal_sets(sim: Sim, where: str) -> None:
    """Any two peers that both delivered view k and view k + 1 delivered the same messages in view k."""
    sets: dict[tuple, dict[str, frozenset]] = {}
    for node in sim.history:
        views = by_view(node)
        for (v, msgs), (nxt, _) in zip(views, views[1:]):
            sets.setdefault((v, nxt), {})[f"{node.pid}/{node.incarnation}"] = msgs
    for (v, _), per_peer in sets.items():
        first = next(iter(per_peer.values()))
        for peer, msgs in per_peer.items():
            assert msgs == first, f"{peer} delivered another set of messages in view {v[1]}; {where}"


def _check_one_sequence(sim: Sim, seqs: dict, where: str) -> None:
    # every pair agrees on the order of what both delivered, and on what lies between (in the
    # orders that are not uniform, a peer removed as failed — crashed, or cut off by a partition —
    # agrees only up to its last view; in the Lamport order every peer agrees on all of it: a flush's
    # last step takes effect only at the INSTALL of its attempt)
    uniform = sim.order == "lamport"

    def shared(node: Node) -> set:
        """What a peer delivered before its last view started, if it was removed as failed (all of
        it otherwise)."""
        if uniform or node.gone not in ("crashed", "removed", "cut"):
            return set(seqs[id(node)])
        return {event_id(d) for d in settled(node.delivered)}

    nodes = [n for n in sim.history if seqs[id(n)]]
    for i, a in enumerate(nodes):
        pos_a = {e: k for k, e in enumerate(seqs[id(a)])}
        for b in nodes[i + 1:]:
            sb = seqs[id(b)]
            common = [e for e in sb if e in pos_a]
            if not uniform:  # a peer removed as failed agrees up to its last view
                done_a, done_b = shared(a), shared(b)
                common = [e for e in common if e in done_a and e in done_b]
            if not common:
                continue
            assert [pos_a[e] for e in common] == sorted(pos_a[e] for e in common), \
                f"{a.pid}/{a.incarnation} and {b.pid}/{b.incarnation} disagree on the order; {where}"
            lo, hi = pos_a[common[0]], pos_a[common[-1]]
            ia, ib = sb.index(common[0]), sb.index(common[-1])
            assert seqs[id(a)][lo:hi + 1] == sb[ia:ib + 1], \
                f"{a.pid}/{a.incarnation} and {b.pid}/{b.incarnation} delivered different sets; {where}"


def _stalled_without_quorum(live: list[Node], expected: frozenset[str] = frozenset()) -> bool:
    """Whether the live peers may rightly be stuck: the live members of the newest view any of them
    installed are no primary component of it (``has_quorum``), so nobody may install the next; or
    no group was ever founded and the live peers are no primary component of the ``expected`` ones."""
    views = [n.core.view for n in live if n.core.view is not None]
    if not views:  # nobody in a group: a peer cut off from its group never founds another (its
        # group may live on elsewhere)
        return (any(n.core._rejoining for n in live)
                or bool(expected) and not has_quorum(expected, {n.pid for n in live}))
    top = max(views, key=lambda v: v.id)
    alive = {n.pid for n in live if n.core.view is not None and n.core.view.id == top.id
             and n.core.mode != "joining"}
    return not has_quorum(top.members, alive)


def _check_leaves_and_liveness(sim: Sim, seqs: dict, where: str, liveness: bool = True) -> None:
    # a peer that left is no crashed peer: the view it left in is the survivors' view too (unless its
    # coordinator crashed before telling anyone)
    crashed = {n.pid for n in sim.history if n.gone == "crashed"}
    for node in sim.history:
        views = [d for d in node.delivered if isinstance(d, ViewDelivery)]
        if node.gone != "left" or len(views) < 2 or views[-1].pid in crashed:
            continue
        last, before = event_id(views[-1]), event_id(views[-2])
        for n in sim.nodes.values():
            # (a member that view removed — cut off by a partition — owes only the view before)
            if n.alive and before in seqs[id(n)] and n.pid not in views[-1].removed:
                assert last in seqs[id(n)], \
                    f"{node.pid} left in a view {n.pid} never delivered: {last}; {where}"
    # no divergence alarm where nothing diverged (what the checks above hold)
    for node in sim.history:
        alarms = node.core.stats["divergence_alarms"]
        assert not alarms, f"{node.pid}/{node.incarnation}: {node.core.alarms}; {where}"
    # liveness: the live members end in one view, with nothing pending, and got every survivor's message
    live = [n for n in sim.nodes.values() if n.alive]
    assert live, f"nobody left alive; {where}"
    if sim.expected and sim.quorum == "majority":
        # one group at a time: none founded while another had a live member with a quorum (a new
        # one only once every member of the last is gone)
        assert not sim.rival_groups, f"two groups at once: {sim.rival_groups}; {where}"
    # exactly once: a text (each is entered once) is delivered under one key only, even when its
    # origin, cut off by a partition, sends it again after it rejoined
    # (in the orders that are not uniform, a peer removed as failed may have delivered, in its last
    # view, what the group then delivered as sent again: only what it shares with the group counts)
    keys_of: dict[str, set] = {}
    for node in sim.history:
        shared = node.delivered if sim.order == "lamport" or node.gone not in ("crashed", "removed", "cut") \
            else settled(node.delivered)
        for d in shared:
            if not isinstance(d, ViewDelivery):
                keys_of.setdefault(d.text, set()).add((d.clock, d.pid))
    for text, keys in keys_of.items():
        assert len(keys) == 1, f"{text!r} delivered as {sorted(keys)}; {where}"
    expected = frozenset(sim.pids) if sim.expected else frozenset()
    if not liveness or (sim.quorum == "majority" and _stalled_without_quorum(live, expected)):
        return
    final = {n.core.view.id if n.core.view else None for n in live}
    assert len(final) == 1 and None not in final, f"live peers end in views {final}; {where}"
    for n in live:
        assert n.core.mode == "normal", f"{n.pid} ends in mode {n.core.mode}; {where}"
        assert len(n.core.order) == 0, f"{n.pid} ends with {len(n.core.order)} pending; {where}"
        assert not n.core._held_texts, f"{n.pid} ends with unsent texts; {where}"
    for n in live:
        # (a peer that rejoined after a partition delivers from its new join on: what it entered
        # before may have been delivered by the others only)
        rejoined = sum(1 for m in sim.history if m.core is n.core) > 1
        mine = {e[3] for m in (sim.history if rejoined else [n]) for e in seqs[id(m)]
                if e[0] == "msg" and e[2] == n.pid}
        missing = [t for t in n.sent if t not in mine]
        assert not missing, f"{n.pid} never delivered its own {missing[:3]}; {where}"
    starts = [seqs[id(n)][0] for n in live]
    for n in live:
        tails = []
        for m in live:
            seq = seqs[id(m)]
            last_start = max((seq.index(s) for s in starts if s in seq), default=None)
            assert last_start is not None, f"{m.pid} missed the join of another survivor; {where}"
            tail = seq[last_start:]
            if sim.order == "causal":  # the same views, each with the same set
                views = [k for k, e in enumerate(tail) if e[0] == "view"] + [len(tail)]
                tail = [(tail[a], frozenset(tail[a + 1:b])) for a, b in zip(views, views[1:])]
            tails.append(tail)
        assert all(t == tails[0] for t in tails), f"survivors end with different deliveries; {where}"
