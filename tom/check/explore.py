"""The search: every state reachable from the start, breadth first (bfs), depth first (dfs), or along
random walks (random), deduplicated by fingerprint; replay and shrinking of a counterexample.

A search is *exhaustive* when it ran out of states to expand with no bound hit; otherwise the result
names the bound (depth, states, time). Invariants are checked at every state (`invariants.check`) and
liveness at every terminal one (`invariants.check_terminal`).

No reduction is applied: every interleaving of enabled steps is explored, and only states with equal
fingerprints are merged, which is sound (equal fingerprints: equal cores, links, histories).
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from . import invariants, restart  # noqa: F401 - (restart registers the durable peers' steps)
from .world import Config, Event, Step, Violation, World


@dataclass
class Found:
    """A counterexample: the steps from the start, what broke, and what each step did."""

    steps: list[Step]
    violation: Violation
    events: list[list[Event]] = field(default_factory=list)


@dataclass
class Result:
    config: Config
    strategy: str
    states: int = 0
    transitions: int = 0
    depth: int = 0
    elapsed: float = 0.0
    exhaustive: bool = False
    bound: str = ""  # what stopped a non-exhaustive search
    terminal: int = 0  # terminal states reached (liveness checked there)
    tick_bounded: int = 0  # terminal only because a stuck peer used up its ticks (liveness not judged)
    horizon_cut: int = 0  # timed mode: terminal only because time reached the horizon (liveness not judged)
    found: Found | None = None
    shrunk: Found | None = None

    @property
    def rate(self) -> float:
        return self.states / self.elapsed if self.elapsed > 0 else 0.0


def _at_terminal(result: Result, world: World) -> Violation | None:
    """Count a terminal state and judge its liveness: the violation, or None. In the timed mode a
    terminal state that is not quiet (`World.quiet`) is at the horizon: time would move it on."""
    result.terminal += 1
    if world.config.timed and not world.quiet():
        result.horizon_cut += 1
        return None
    try:
        if not invariants.check_terminal(world):
            result.tick_bounded += 1
    except Violation as v:
        return v
    return None


def _expand(world: World, step: Step) -> World:
    nxt, _ = world._successor(step, False)  # what it did is not written down (replay does that)
    invariants.check(nxt)
    return nxt


def search(config: Config, strategy: str = "bfs", depth: int | None = None, time_limit: float | None = None,
           max_states: int | None = None, seed: int = 1,
           progress: Callable[[Result], None] | None = None, prefix: list[Step] = ()) -> Result:
    """Explore from the start — or from where the steps ``prefix`` lead (`replay`); a counterexample's
    steps then begin with them —; stop at the first violation (returned in ``found``)."""
    result = Result(config, strategy)
    start = time.perf_counter()
    deadline = None if time_limit is None else start + time_limit
    prefix = list(prefix)
    if prefix:
        root, _, broken = replay(config, prefix)
        if broken is not None:
            result.found = Found(prefix, broken)
            return result
    else:
        root, _ = World.initial(config)
    invariants.check(root)
    fp = root.fingerprint()
    parents: dict[bytes, tuple[bytes | None, Step | None]] = {fp: (None, None)}
    result.states = 1
    last_report = start

    def path_to(key: bytes) -> list[Step]:
        steps = []
        while True:
            parent, step = parents[key]
            if parent is None:
                return prefix + steps[::-1]
            steps.append(step)  # type: ignore[arg-type]
            key = parent

    if strategy == "random":
        return _random_walks(config, root, result, start, deadline, depth, seed, progress, prefix)
    frontier: deque[tuple[World, bytes, int]] = deque([(root, fp, 0)])
    pop = frontier.popleft if strategy == "bfs" else frontier.pop
    push = frontier.append
    check = invariants.check
    clock = time.perf_counter
    cut_by_depth = False
    # the counts live in locals while the loop runs (written back for each report and at the end)
    states, transitions, deepest = result.states, result.transitions, result.depth
    try:
        while frontier:
            if deadline is not None and clock() > deadline:
                result.bound = f"time limit {time_limit:g} s"
                break
            if max_states is not None and states >= max_states:
                result.bound = f"{max_states:,} states"
                break
            world, key, d = pop()
            steps = world.steps()
            if not steps:
                broken = _at_terminal(result, world)
                if broken is not None:
                    result.found = Found(path_to(key), broken)
                    break
                continue
            if depth is not None and d >= depth:
                cut_by_depth = True
                continue
            successor = world._successor
            for step in steps:
                transitions += 1
                try:
                    nxt, _ = successor(step, False)
                    check(nxt)
                except Violation as v:
                    result.found = Found(path_to(key) + [step], v)
                    break
                nkey = nxt.fp or nxt.fingerprint()
                if nkey in parents:
                    continue
                parents[nkey] = (key, step)
                states += 1
                if d >= deepest:
                    deepest = d + 1
                push((nxt, nkey, d + 1))
            if result.found:
                break
            if progress is not None and clock() - last_report > 0.5:
                last_report = clock()
                result.states, result.transitions, result.depth = states, transitions, deepest
                result.elapsed = last_report - start
                progress(result)
    except KeyboardInterrupt:  # (Ctrl-C: what was explored so far is the result)
        result.bound = "Ctrl-C"
    result.states, result.transitions, result.depth = states, transitions, deepest
    result.elapsed = time.perf_counter() - start
    if not result.found and not result.bound:
        if cut_by_depth:
            result.bound = f"depth {depth}"
        else:
            result.exhaustive = True
    return result


def _random_walks(config: Config, root: World, result: Result, start: float, deadline: float | None,
                  depth: int | None, seed: int, progress, prefix: list[Step]) -> Result:
    """Random walks from the start until the time limit (or 1,000 walks without one)."""
    rng = random.Random(seed)
    seen: set[bytes] = {root.fingerprint()}
    walks = 0
    limit = depth or 10_000
    interrupted = False
    try:
        while (deadline is None and walks < 1000) or (deadline is not None and time.perf_counter() < deadline):
            walks += 1
            world, steps = root, list(prefix)
            for _ in range(limit):
                options = world.steps()
                if not options:
                    broken = _at_terminal(result, world)
                    if broken is not None:
                        result.found = Found(steps, broken)
                    break
                step = rng.choice(options)
                steps.append(step)
                result.transitions += 1
                try:
                    world = _expand(world, step)
                except Violation as v:
                    result.found = Found(steps, v)
                    break
                key = world.fingerprint()
                if key not in seen:
                    seen.add(key)
                    result.states += 1
                result.depth = max(result.depth, len(steps) - len(prefix))
            if result.found:
                break
            if progress is not None and walks % 20 == 0:
                result.elapsed = time.perf_counter() - start
                progress(result)
    except KeyboardInterrupt:  # (Ctrl-C: the walks so far are the result)
        interrupted = True
    result.elapsed = time.perf_counter() - start
    result.bound = f"{walks:,} random walks" + (", then Ctrl-C" if interrupted else "")
    return result


def replay(config: Config, steps: list[Step]) -> tuple[World, list[list[Event]], Violation | None]:
    """Run ``steps`` from the start: the last world, each step's events, and the violation it ends
    in (None if it ends in none). ValueError if a step is not enabled where it comes."""
    world, _ = World.initial(config)
    trace: list[list[Event]] = []
    for i, step in enumerate(steps):
        enabled = world.steps()
        if step not in enabled:
            raise ValueError(f"step {i + 1} ({step}) is not enabled there")
        try:
            world, events = world.successor(step)
        except Violation as v:
            trace.append(v.events)
            return world, trace, v
        trace.append(events)
        try:
            invariants.check(world)
        except Violation as v:
            return world, trace, v
    if not world.steps() and not (config.timed and not world.quiet()):
        try:
            invariants.check_terminal(world)
        except Violation as v:
            return world, trace, v
    return world, trace, None


def fails(config: Config, steps: list[Step], name: str) -> bool:
    """Whether ``steps`` replay into a violation of the invariant ``name``."""
    try:
        _, _, v = replay(config, steps)
    except ValueError:
        return False
    return v is not None and v.name == name


def shrink(config: Config, found: Found, budget: float = 20.0) -> Found:
    """A shorter counterexample of the same invariant: drop chunks of steps, then single steps, while
    it still fails (delta debugging, greedy); bounded by ``budget`` seconds."""
    steps, name = list(found.steps), found.violation.name
    end = time.perf_counter() + budget
    chunk = max(1, len(steps) // 2)
    while chunk >= 1 and time.perf_counter() < end:
        i, changed = 0, False
        while i < len(steps) and time.perf_counter() < end:
            candidate = steps[:i] + steps[i + chunk:]
            if candidate and fails(config, candidate, name):
                steps, changed = candidate, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    _, events, v = replay(config, steps)
    assert v is not None
    return Found(steps, v, events)
