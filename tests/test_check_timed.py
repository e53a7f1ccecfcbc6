"""`tom check --delay`: the timed mode and its progress check, on the real core (issue 41).

Founding a group of 3 at a link delay of 3 ticks (1.5 s) is the livelock commit 5220bc9 fixed: the
founder installs only if every promise came back within half the promise's window, and the round
trip (3 s) is longer than half the first window (5 s). Today's window doubles per attempt, so the
second attempt founds, on every schedule; with the window of before (the first one, constant) the
founder proposes for ever, which the progress check finds without a terminal state."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from tom.check import invariants
from tom.check import world as check_world
from tom.check.explore import replay, search, shrink
from tom.check.trace import config_line, parse_config, run_transcript
from tom.check.world import Config, Step, World, pid
from tom.core import founding

pytestmark = pytest.mark.pure  # (tom check walks and pickles the core: interpreted)

FOUNDING = Config("lamport", 3, 0, found=True, ticks=5, delay=3, max_attempts=2)
"""3 peers found a group, every frame 1.5 s; more than 2 attempts without a view is a livelock."""


@pytest.fixture(autouse=True)
def fresh_cache():
    """Local steps are memoised per core state: the window of before must not meet today's results."""
    check_world._cache.clear()
    yield
    check_world._cache.clear()


@pytest.fixture
def window_of_before(monkeypatch):
    """Founding as before 5220bc9: every attempt's window is the first one."""
    monkeypatch.setattr(founding, "window", lambda first, attempt: first)
    check_world._cache.clear()


def terminal_worlds(config: Config) -> list[World]:
    """Every terminal world reachable from the start (depth first, as `search` goes)."""
    root, _ = World.initial(config)
    seen, stack, out = {root.fingerprint()}, [root], []
    while stack:
        world = stack.pop()
        steps = world.steps()
        if not steps:
            out.append(world)
        for step in steps:
            kid, _ = world._successor(step, False)
            invariants.check(kid)
            if kid.fingerprint() not in seen:
                seen.add(kid.fingerprint())
                stack.append(kid)
    return out


def test_todays_founding_forms_view_one_on_every_schedule_at_a_delay_of_1_5_s():
    r = search(FOUNDING)
    assert r.found is None and r.exhaustive, r.found and r.found.violation
    assert r.horizon_cut == 0 and r.terminal > 0  # every schedule ends quiet before the horizon
    ends = terminal_worlds(FOUNDING)
    assert len(ends) == r.terminal
    everyone = tuple(pid(n) for n in (1, 2, 3))
    for world in ends:
        assert world.time < FOUNDING.horizon
        for n in (1, 2, 3):
            assert [e[1:3] for e in world.logs[n] if e[0] == "v"] == [(1, everyone)]
            assert world.locals[n].mode == "normal"


def test_the_founding_of_before_is_found_to_livelock_at_that_delay(window_of_before):
    r = search(FOUNDING, "bfs", time_limit=20)
    assert r.found is not None, f"not found ({r.states} states, {r.bound or 'exhaustive'})"
    assert r.found.violation.name == "livelock"
    assert str(r.found.violation).startswith("livelock: 3 attempts without a decision: peer 1")
    assert r.terminal == 0  # (a livelock never reaches a terminal state: no liveness check saw it)
    ticks = sum(1 for s in r.found.steps if s == Step("tick"))
    assert ticks < 25 and len(r.found.steps) < 80  # a few attempts of 6-7 ticks each
    _, events, _ = replay(FOUNDING, r.found.steps)
    r.found.events = events
    small = shrink(FOUNDING, r.found, budget=5)
    assert small.violation.name == "livelock" and len(small.steps) <= len(r.found.steps)


def test_a_timed_counterexample_replays_from_its_transcript(window_of_before, tmp_path):
    from rich.console import Console

    from tom.check.cli import replay_file, write_counterexample

    r = search(FOUNDING, "bfs", time_limit=20)
    _, events, _ = replay(FOUNDING, r.found.steps)
    r.found.events = events
    text_path = write_counterexample(FOUNDING, r.found, tmp_path)[0]
    text = text_path.read_text()
    assert "delay=3 jitter=0 horizon=60 attempts=2" in text and "\ntick\n----\nt=1 (0.5 s)\n" in text
    rows = run_transcript(text)
    assert all(got == want for cmd, want, got in rows if cmd != "check")
    assert rows[-1][2][0].startswith("livelock: 3 attempts without a decision")
    assert replay_file(text_path, Console(file=open(tmp_path / "out.txt", "w"), width=200)) == 1


def test_a_timed_configuration_line_reads_back_as_written():
    for c in (FOUNDING, Config("causal", 2, 1, crash=(2,), delay=2, jitter=1, horizon=30, max_attempts=4),
              Config("lamport", 2, 1, delay=0), Config("lamport", 3, 1, crash=(3,), max_attempts=3)):
        # ("group": views and failure detection, which any fault implies)
        assert parse_config(config_line(c)) == replace(c, dynamic=c.dynamic or c.faults), config_line(c)


def test_the_horizon_cuts_off_what_it_stops_and_says_so():
    r = search(Config("lamport", 3, 0, found=True, delay=3, horizon=10, max_attempts=2))
    assert r.found is None and r.exhaustive  # (exhaustive up to the horizon)
    assert r.terminal > 0 and r.horizon_cut == r.terminal  # nobody has a view at 5 s: none judged


def test_frames_are_urgent_and_time_waits_for_the_due():
    world, _ = World.initial(Config("lamport", 2, 1, delay=2, max_attempts=2))
    assert world.steps() == [Step("send", 1), Step("send", 2)]  # static group: quiet, time stands
    world, _ = world.successor(Step("send", 1))
    assert Step("tick") in world.steps() and not any(s.kind == "deliver" for s in world.steps())
    world, _ = world.successor(Step("tick"))
    world, _ = world.successor(Step("tick"))
    assert Step("deliver", 1, 2) in world.steps() and Step("tick") not in world.steps()  # due now: urgent


def test_a_jittered_frame_may_wait_until_its_latest_tick():
    world, _ = World.initial(Config("lamport", 2, 1, delay=1, jitter=1, max_attempts=2))
    world, _ = world.successor(Step("send", 1))
    world, _ = world.successor(Step("tick"))
    assert {Step("deliver", 1, 2), Step("tick")} <= set(world.steps())  # due, not yet late
    world, _ = world.successor(Step("tick"))
    assert Step("tick") not in world.steps()  # late: it goes before time does


@pytest.mark.parametrize("order", ["lamport", "sequencer", "causal"])
def test_two_peers_two_messages_under_a_delay_and_jitter_are_clean(order):
    r = search(Config(order, 2, 2, delay=1, jitter=1, max_attempts=2))
    assert r.found is None and r.exhaustive and r.terminal > 0 and r.horizon_cut == 0


def test_tom_check_delay_on_the_command_line():
    done = subprocess.run([sys.executable, "-m", "tom", "check", "--found", "--peers", "3", "--messages", "0",
                           "--delay", "3"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 of them cut off by the horizon" in done.stdout and "NO VIOLATION (exhaustive)" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "tom", "check", "--jitter", "1"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "give --delay too" in bad.stdout + bad.stderr


def test_a_joiner_under_a_delay_starts_at_the_time_it_joins_and_is_admitted():
    r = search(Config("lamport", 2, 0, join=1, delay=2, max_attempts=6))
    assert r.found is None and r.exhaustive and r.terminal > 0 and r.horizon_cut == 0
    world, _ = World.initial(Config("lamport", 3, 0, crash=(3,), join=1, delay=2, max_attempts=6))
    assert Step("tick") not in world.steps()  # quiet: time waits for a fault
    world, _ = world.successor(Step("crash", 3))  # (A and B no longer hear C: time passes)
    world, _ = world.successor(Step("tick"))
    world, _ = world.successor(Step("join", 4))
    assert world.time == 1 and world.locals[4].core().started_at == 0.5
