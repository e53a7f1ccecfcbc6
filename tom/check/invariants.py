"""What must hold in every state `tom check` reaches, per order (raise `Violation` when it does not).

At every state:

* **no duplicate** — no peer delivers a message twice;
* **agreement** (lamport, sequencer) — within each view, any two peers' message sequences are
  prefixes of one another; lamport is uniform, so a crashed or removed peer must agree too, while in
  the sequencer order a peer that failed is exempt (docs/output-format.md, *Uniformity*);
* **virtual synchrony** — every peer that delivers view v delivers it with the same members, views
  come in increasing order, and the peers that go on from view v to view v + 1 delivered the same
  messages in view v;
* **causal order** (causal) — a message is delivered after every message its sender had delivered
  in the same view before sending it;
* **clock condition** (lamport) — the order respects happens-before: a message m2 sent by p after p
  received m1 (directly, or through messages that followed m1) comes after m1. At its send, its
  ``(clock, pid)`` must be above m1's (judged as the step runs: `World._receive`, where "received"
  is defined); and every peer that delivers both delivers m1 first. The causal order promises
  this for what a sender had *delivered* (the causal order above), not for what it had only
  received; the sequencer order numbers messages as they reach the sequencer and promises neither;
* **no false divergence alarm** and **no rejected frame** of a member — checked as the step runs
  (`World.successor`).

At a terminal state (no step enabled: nothing in flight that can move, nothing left to send, no fault
or timeout left): **liveness** — no peer that is running is stuck outside a view or in a view change,
every peer still in the group has nothing pending, and every one of them delivered the same messages,
among them every message a peer still in the group sent.
"""

from __future__ import annotations

from .world import Violation, World, number, pid


class LogInfo:
    """What the invariants ask of one delivery log, worked out once per distinct log (logs are
    values shared by many worlds): whether it is fine on its own (views in increasing order, no
    message twice), the members of each view it delivered, the views it installed, the peers the
    views removed, and per view the messages delivered in it, in order."""

    __slots__ = ("alone", "views", "installed", "removed", "seqs", "sets")

    def __init__(self, log: tuple) -> None:
        self.alone = True
        self.views: dict[int, tuple] = {}
        self.removed: set[str] = set()
        self.seqs: dict[int, tuple] = {}
        seqs: dict[int, list] = {}
        seen = set()
        last_view = 0
        for entry in log:
            if entry[0] == "v":
                v = entry[1]
                if v <= last_view:
                    self.alone = False
                last_view = v
                self.views.setdefault(v, entry[2])
                self.removed.update(entry[3])
                continue
            key = entry[1]
            if key in seen:
                self.alone = False
            seen.add(key)
            seqs.setdefault(entry[2], []).append(key)
        self.installed = frozenset(self.views)
        self.seqs = {v: tuple(keys) for v, keys in seqs.items()}
        self.sets = {v: frozenset(keys) for v, keys in seqs.items()}


def _infos(world: World) -> dict[int, LogInfo] | None:
    """Each peer's `LogInfo`, found by its log's id in the world's signature (None without one)."""
    book, sig = world.book, world.sig
    if book is None or sig is None:
        return None
    known = book.infos
    slots = book.log_slot
    out = {}
    for n, log in world.logs.items():
        slot = slots.get(n)
        if slot is None:
            return None
        info = known.get(sig[slot])
        if info is None:
            info = known[sig[slot]] = LogInfo(log)
        out[n] = info
    return out  # type: ignore[return-value]


def _logs_key(world: World) -> tuple | None:
    """What every invariant but causal order is a function of (with the configuration): the logs
    (their ids) and the crashed peers. None in the causal order or without a signature."""
    book, sig = world.book, world.sig
    if book is None or sig is None or book.foreign or world.config.order == "causal":
        return None
    return (world.crashed, book.logs_of(sig))


def _fine(world: World, grew: list[tuple[int, int]]) -> bool:
    """Whether every invariant still holds, given that they held in the world this one came from
    and that this step only appended to the logs in ``grew`` (peer, length before): only what
    involves those entries can have changed (the set of failed peers only grows, and only exempts).
    True is exact; False means "maybe not" (`check` then judges the whole world)."""
    config = world.config
    order = config.order
    infos = _infos(world)
    if infos is None:
        return False
    failed: set[int] | None = None
    for n, start in grew:
        mine = infos[n]
        if not mine.alone:
            return False
        log = world.logs[n]
        views: set[int] = set()
        stays: set[int] = set()
        for entry in log[start:]:
            if entry[0] == "v":
                v, members = entry[1], entry[2]
                for q, info in infos.items():
                    if q != n and info.views.get(v, members) != members:
                        return False
                stays.add(v - 1)
                continue
            key, view = entry[1], entry[2]
            views.add(view)
            stays.add(view)
            if order == "causal":
                past = world.past.get(key)
                if past:
                    before = None
                    for pkey, pview in past:
                        if pview == view:
                            if before is None:
                                before = _delivered_before(log, key)
                            if pkey not in before:
                                return False
        # virtual synchrony: n against the other peers that went on from view v to v + 1
        for v in stays:
            if v + 1 in mine.installed and _was_in(config, n, v, mine):
                got = mine.sets.get(v, frozenset())
                for q, info in infos.items():
                    if q != n and v + 1 in info.installed and _was_in(config, q, v, info):
                        if info.sets.get(v, frozenset()) != got:
                            return False
        if order in ("lamport", "sequencer"):
            if order == "sequencer":
                if failed is None:
                    failed = set(world.crashed)
                    for info in infos.values():
                        failed |= {number(p) for p in info.removed}
                if n in failed:
                    continue
            for v in views:
                a = mine.seqs[v]
                for q, info in infos.items():
                    b = info.seqs.get(v)
                    if q == n or b is None or (failed is not None and q in failed):
                        continue
                    k = min(len(a), len(b))
                    if a[:k] != b[:k]:
                        return False
    return True


def _was_in(config, n: int, v: int, info: LogInfo) -> bool:
    return v in info.installed or (v == 1 and not config.found and 1 <= n <= config.peers)


def _failed(world: World) -> set[int]:
    """Peers that crashed, or that a delivered view removed."""
    out = set(world.crashed)
    for log in world.logs.values():
        for entry in log:
            if entry[0] == "v":
                out |= {number(p) for p in entry[3]}
    return out


def _clock_condition(world: World, n: int, start: int) -> None:
    """The clock condition's delivery side at peer ``n``, for the messages its log holds from
    ``start`` on: none is delivered after a message whose sender had received it before sending
    (`World.heard`)."""
    heard = world.heard
    if not heard:
        return
    log = world.logs[n]
    for i in range(start, len(log)):
        entry = log[i]
        if entry[0] != "m":
            continue
        key = entry[1]
        for earlier in log[:i]:
            if earlier[0] == "m" and key in heard.get(earlier[1], ()):
                k = earlier[1]
                raise Violation("clock condition",
                                f"peer {n} delivered ({k[0]}, {number(k[1])}) {earlier[3]} before ({key[0]}, "
                                f"{number(key[1])}) {entry[3]}, which peer {number(k[1])} had received before it sent the first")


def check(world: World) -> None:
    """Raise the Violation of the first invariant (in the order `check_all` judges them) that does
    not hold. A world that came by one step from a world that passed is judged on what the step
    appended to the logs (`_fine`), and as a whole only when that finds something. The clock
    condition's delivery side is judged on what the step appended in any case: it depends on the
    messages' pasts, which the memo of verdicts (`_logs_key`) does not cover."""
    if world.config.restart:  # (what durable peers that restart add: `tom.check.restart`)
        from . import restart

        restart.check(world)
    grew = world.grew
    world.grew = None  # judged once: the world keeps no more than it needs
    if world.parent_checked and grew is not None:
        if grew and world.heard:
            for n, start in grew:
                _clock_condition(world, n, start)
        if not grew:
            world.checked = True
            return
        key = _logs_key(world)
        fine = world.book.fine  # type: ignore[union-attr]
        if key is not None and key in fine:
            world.checked = True
            return
        if _fine(world, grew):
            if key is not None:
                fine.add(key)
            world.checked = True
            return
    check_all(world)
    world.checked = True
    key = _logs_key(world)
    if key is not None:
        world.book.fine.add(key)  # type: ignore[union-attr]


def check_all(world: World) -> None:
    """Every invariant, judged on the whole world."""
    order = world.config.order
    failed = _failed(world)
    per_view: dict[int, dict[int, list]] = {}
    views: dict[int, tuple] = {}
    for n, log in world.logs.items():
        seen = set()
        last_view = 0
        current = 1
        for entry in log:
            if entry[0] == "v":
                _, v, members, _ = entry
                if v <= last_view:
                    raise Violation("virtual synchrony", f"peer {n} delivered view {v} after view {last_view}")
                last_view = current = v
                known = views.setdefault(v, members)
                if known != members:
                    raise Violation("virtual synchrony",
                                    f"view {v} has members {_names(known)} at one peer, {_names(members)} at peer {n}")
                continue
            _, key, view, text, _seq = entry
            if key in seen:
                raise Violation("no duplicate", f"peer {n} delivered ({key[0]}, {number(key[1])}) {text} twice")
            seen.add(key)
            per_view.setdefault(view, {}).setdefault(n, []).append(key)
            if order == "causal":
                _check_causal(world, n, log, key, view)
    for n in world.logs:
        _clock_condition(world, n, 0)
    # virtual synchrony: the peers that install view v + 1 after view v delivered the same messages in v
    installed: dict[int, set[int]] = {}
    for n, log in world.logs.items():
        for entry in log:
            if entry[0] == "v":
                installed.setdefault(entry[1], set()).add(n)
    founders = set() if world.config.found else set(range(1, world.config.peers + 1))  # in view 1 from the start

    def was_in(n: int, v: int) -> bool:
        return n in installed.get(v, ()) or (v == 1 and n in founders)

    for v, seqs in per_view.items():
        stayed = sorted(n for n in installed.get(v + 1, ()) if was_in(n, v))
        sets = {n: set(seqs.get(n, ())) for n in stayed}
        for n in stayed[1:]:
            if sets[n] != sets[stayed[0]]:
                key = sorted(sets[n] ^ sets[stayed[0]])[0]
                raise Violation("virtual synchrony",
                                f"peers {stayed[0]} and {n} both installed view {v + 1}, but only one of them "
                                f"delivered ({key[0]}, {number(key[1])}) in view {v}")
    if order in ("lamport", "sequencer"):
        for v, seqs in per_view.items():
            peers = sorted(seqs)
            if order != "lamport":
                peers = [p for p in peers if p not in failed]
            for i, p in enumerate(peers):
                for q in peers[i + 1:]:
                    a, b = seqs[p], seqs[q]
                    for k in range(min(len(a), len(b))):
                        if a[k] != b[k]:
                            raise Violation(
                                "total order",
                                f"in view {v}, message {k + 1} is ({a[k][0]}, {number(a[k][1])}) at peer {p} but "
                                f"({b[k][0]}, {number(b[k][1])}) at peer {q}")


def _delivered_before(log: tuple, key: tuple) -> set[tuple]:
    """The keys of the messages a peer's ``log`` delivered before message ``key`` (all, if not there)."""
    before = set()
    for entry in log:
        if entry[0] == "m":
            if entry[1] == key:
                break
            before.add(entry[1])
    return before


def _check_causal(world: World, n: int, log: tuple, key: tuple, view: int) -> None:
    past = world.past.get(key)
    if past is None:
        return
    before = _delivered_before(log, key)
    for pkey, pview in sorted(past):
        if pview == view and pkey not in before:
            raise Violation("causal order", f"peer {n} delivered ({key[0]}, {number(key[1])}) before its cause "
                                            f"({pkey[0]}, {number(pkey[1])})")


def check_terminal(world: World) -> bool:
    """Liveness of the small run (see the module docstring). False, and nothing checked, when the
    state is terminal only because a stuck peer used up its ticks (`Config.ticks`): time would move
    it on, so it is a bound of the search, not a deadlock."""
    limit = world.config.ticks
    if not world.config.timed and any(local.stuck and world.ticks.get(n, 0) >= limit for n, local in world.locals.items()
           if n not in world.crashed and n not in world.left):
        return False
    failed = _failed(world)
    for n, local in sorted(world.locals.items()):
        if n not in world.crashed and n not in world.left and local.mode not in ("normal", "removed"):
            raise Violation("liveness", f"peer {n} is stuck {local.mode} at a state where nothing more can happen")
    if world.config.restart:
        from . import restart

        restart.check_terminal(world)
    live = [n for n, local in world.locals.items()
            if n not in failed and n not in world.left and local.mode == "normal"]
    for n in live:
        if world.locals[n].backlog:
            raise Violation("liveness", f"peer {n} still has {world.locals[n].backlog} message(s) pending at a "
                                        f"state where nothing more can happen")
    if not live:
        return True
    # two peers owe each other the messages of the views both were in (a joiner starts at its view)
    since = {n: next((e[1] for e in world.logs[n] if e[0] == "v"), 1) if n > world.config.peers else 1
             for n in live}
    first = live[0]
    for n in live[1:]:
        start = max(since[n], since[first])
        a = {e[1] for e in world.logs[first] if e[0] == "m" and e[2] >= start}
        b = {e[1] for e in world.logs[n] if e[0] == "m" and e[2] >= start}
        if a != b:
            diff = sorted(a ^ b)[0]
            raise Violation("liveness", f"peers {first} and {n} delivered different messages of the views both "
                                        f"were in: ({diff[0]}, {number(diff[1])}) is delivered by only one of them")
    sets = {n: {e[1] for e in world.logs[n] if e[0] == "m"} for n in live}
    senders = [n for n in live if world.sent.get(n, 0)]
    for n in senders:
        mine = {k for k in sets[first] if k[1] == pid(n)}
        if len(mine) < world.sent[n] and n in world.started | set(range(1, world.config.peers + 1)):
            raise Violation("liveness", f"peer {n} sent {world.sent[n]} message(s), {len(mine)} delivered at the end")
    return True


def _names(members: tuple) -> str:
    return ",".join(str(number(m)) for m in members)
