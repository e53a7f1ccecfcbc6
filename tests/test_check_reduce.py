"""`tom check --reduce`: the persistent sets it expands keep every terminal state of the full
search (compared state for state on small partitions), and expand one side of a cut at a time."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tom.check.explore import search
from tom.check.reduce import closed_sets, owner, persistent
from tom.check.world import Config, Step, World

CUT_1_23 = (frozenset({1}), frozenset({2, 3}))


def _canon(w: World) -> tuple:
    """A world as values (fingerprints are numbered per search, so two searches' differ)."""
    return (tuple(sorted((n, local.fp) for n, local in w.locals.items())), tuple(sorted(w.links.items())),
            tuple(sorted(w.logs.items())), tuple(sorted(w.sent.items())), w.crashed, w.cut_on, w.cut_done,
            tuple(sorted(w.ticks.items())), w.timed_out, tuple(sorted(w.now.items())),
            tuple(sorted(w.announced.items())), w.left)


def _terminals(config: Config, reduce: bool):
    seen: set[tuple] = set()
    r = search(config, "dfs", reduce=reduce, time_limit=120, on_terminal=lambda w: seen.add(_canon(w)))
    assert r.exhaustive and r.found is None, (r.bound, r.found)
    return r, seen


@pytest.mark.parametrize("config", [
    Config("lamport", 3, 0, leave=(3,), cut=CUT_1_23, heal_late=True, ticks=0),
    Config("lamport", 2, 1, cut=(frozenset({1}), frozenset({2})), heal_late=True, ticks=1),
    Config("causal", 2, 1, cut=(frozenset({1}), frozenset({2})), heal_late=True, ticks=1),
    Config("lamport", 3, 1, senders=(1,), cut=CUT_1_23, heal_late=True, ticks=0),
], ids=lambda c: c.describe())
def test_the_reduced_search_reaches_exactly_the_terminal_states_of_the_full_one(config):
    full, everything = _terminals(config, False)
    reduced, kept = _terminals(config, True)
    assert kept == everything and reduced.terminal == full.terminal
    assert reduced.states < full.states and reduced.transitions < full.transitions


def _cut_world() -> World:
    """Three peers, C asked to leave, then the cut 1/2,3 (heal late): both sides have work to do."""
    config = Config("lamport", 3, 0, leave=(3,), cut=CUT_1_23, heal_late=True, ticks=1)
    world, _ = World.initial(config)
    for step in (Step("leave", 3), Step("cut")):
        world, _ = world.successor(step)
    return world


def test_while_a_cut_keeps_the_sides_apart_one_sides_steps_are_expanded():
    world = _cut_world()
    assert sorted(map(sorted, set(closed_sets(world)))) == [[1], [2, 3]]
    steps = world.steps()
    kept = persistent(world, steps)
    sides = {frozenset({1}) if owner(s) == 1 else frozenset({2, 3}) for s in kept}
    assert len(sides) == 1 and 0 < len(kept) < len(steps), (steps, kept)
    assert any(s.kind != "tick" for s in kept)  # (so the late heal stays disabled meanwhile)


def test_nothing_is_reduced_where_a_fault_can_still_come_or_in_the_sequencer_order():
    world = _cut_world()
    heal_any_time = Config("lamport", 3, 0, leave=(3,), cut=CUT_1_23, ticks=1)
    w, _ = World.initial(heal_any_time)
    for step in (Step("leave", 3), Step("cut")):
        w, _ = w.successor(step)
    assert persistent(w, w.steps()) == w.steps()  # the heal is enabled: it touches both sides
    before, _ = World.initial(world.config)
    assert persistent(before, before.steps()) == before.steps()  # the cut is still to come
    seq = Config("sequencer", 3, 0, leave=(3,), cut=CUT_1_23, heal_late=True, ticks=1)
    w, _ = World.initial(seq)
    for step in (Step("leave", 3), Step("cut")):
        w, _ = w.successor(step)
    assert persistent(w, w.steps()) == w.steps()


def test_reduce_on_the_command_line():
    done = subprocess.run([sys.executable, "-m", "tom", "check", "--peers", "2", "--messages", "1", "--cut", "1/2",
                           "--heal-late", "--ticks", "1", "--reduce"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "partial-order reduction" in done.stdout and "exhaustive" in done.stdout, done.stdout
    bad = subprocess.run([sys.executable, "-m", "tom", "check", "--reduce", "--strategy", "random"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and len(bad.stdout.strip().splitlines()) == 1 and "--reduce" in bad.stdout, bad.stdout
