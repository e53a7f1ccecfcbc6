"""The guarantees of dynamic groups, checked on a finished simulation (`simnet.Network`): what every
order promises of delivery, leaves and liveness (docs/guarantees.md, docs/output-format.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from orders import check_causal, check_same_numbers, check_sequencer_numbers, settled
from simnet import Network, Node
from tom.core import ViewDelivery, has_quorum
from tom.codec.pid import pid_key


def breaks_guarantees(sim: Network) -> bool:
    """Whether the finished simulation ``sim`` fails `check`."""
    try:
        check(sim)
    except AssertionError:
        return True
    return False


def first_seed(seeds: Iterable[int], broken: Callable[[int], bool]) -> int | None:
    """The first of ``seeds`` for which ``broken(seed)`` holds, None if none: a test that the checker
    catches a broken rule needs one seed that fails, and stops there."""
    return next((seed for seed in seeds if broken(seed)), None)


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


def check(sim: Network, liveness: bool = True) -> None:
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


def _check_causal_sets(sim: Network, where: str) -> None:
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


def _check_one_sequence(sim: Network, seqs: dict, where: str) -> None:
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


def _stalled_without_quorum(live: list[Node], expected: frozenset[str] = frozenset(),
                            file: frozenset[str] = frozenset()) -> bool:
    """Whether the live peers may rightly be stuck: the live members of the newest view any of them
    installed are no primary component of it (``has_quorum``) — nor, some missing, of the ``file``
    (the neighbors file, unless last_man_standing) —, so nobody may install the next; or no group was
    ever founded and the live peers are no primary component of the ``expected`` ones."""
    views = [n.core.view for n in live if n.core.view is not None]
    if not views:  # nobody in a group: a peer cut off from its group never founds another (its
        # group may live on elsewhere)
        return (any(n.core.founding.rejoining for n in live)
                or bool(expected) and not has_quorum(expected, {n.pid for n in live}))
    top = max(views, key=lambda v: v.id)
    alive = {n.pid for n in live if n.core.view is not None and n.core.view.id == top.id
             and n.core.mode != "joining"}
    return (not has_quorum(top.members, alive)
            or bool(file) and alive != set(top.members) and not has_quorum(file, alive))


def _check_leaves_and_liveness(sim: Network, seqs: dict, where: str, liveness: bool = True) -> None:
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
        assert not alarms, f"{node.pid}/{node.incarnation}: {node.core.divergence.alarms}; {where}"
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
    file = frozenset() if sim.last_man_standing else expected
    if not liveness or (sim.quorum == "majority" and _stalled_without_quorum(live, expected, file)):
        return
    final = {n.core.view.id if n.core.view else None for n in live}
    assert len(final) == 1 and None not in final, f"live peers end in views {final}; {where}"
    for n in live:
        assert n.core.mode == "normal", f"{n.pid} ends in mode {n.core.mode}; {where}"
        assert len(n.core.order) == 0, f"{n.pid} ends with {len(n.core.order)} pending; {where}"
        assert not n.core.held.texts, f"{n.pid} ends with unsent texts; {where}"
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
