"""scripts/core-diff's paired core (tom/check/differential.py) on tiny configurations: the working tree's
core paired with a copy of itself explores as the core alone does and never differs; a planted change
of behaviour (a delivery order, an exception) is reported as a mismatch with a readable diff."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tom.check import differential, world
from tom.check.differential import CoreMismatch, PairedCore
from tom.check.explore import search
from tom.check.world import Config
from tom.codec.frames import Message
from tom.core import Core, lamport
from tom.errors import FrameError

pytestmark = pytest.mark.pure  # (tom check walks and pickles the core: interpreted)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def old_core():
    """The "old" core: this tree's own tom/, copied and imported as tom_old (so old == new)."""
    return differential.load_old(str(ROOT))


@pytest.fixture
def paired_world(monkeypatch):
    world._cache.clear()
    monkeypatch.setattr(world, "Core", PairedCore)
    monkeypatch.setattr(PairedCore, "steps", 0)
    yield
    world._cache.clear()


@pytest.mark.parametrize("config", [Config("lamport", 2, 1), Config("sequencer", 2, 2), Config("causal", 2, 1),
                                    Config("lamport", 3, 1, crash=(3,))])
def test_paired_cores_explore_as_the_core_alone(config):
    bound = dict(max_states=1500)
    world._cache.clear()
    alone = search(config, "dfs", **bound)
    world._cache.clear()
    original = world.Core
    world.Core = PairedCore
    PairedCore.steps = 0
    try:
        paired = search(config, "dfs", **bound)
    finally:
        world.Core = original
        world._cache.clear()
    assert PairedCore.steps > 0
    assert (paired.states, paired.transitions, paired.terminal, paired.found) == \
        (alone.states, alone.transitions, alone.terminal, None)


def test_a_flipped_tie_break_is_a_mismatch_with_a_diff(paired_world, monkeypatch):
    original = lamport.LamportOrder.release

    def flipped(self, required, final):
        out = original(self, required, final)
        if len(out) > 1 and out[0].clock == out[1].clock:
            out[0], out[1] = out[1], out[0]
        return out

    monkeypatch.setattr(lamport.LamportOrder, "release", flipped)  # the new core only: tom_old has its own
    with pytest.raises(CoreMismatch) as caught:
        search(Config("lamport", 2, 1), "dfs")
    text = str(caught.value)
    assert "ready() handed out something else" in text and "inputs since the last ready():" in text
    assert "deliveries:" in text and "--- old" in text and "+++ new" in text
    assert "-Delivery(index=1, clock=1, pid='127.0.0.1:5000'" in text
    assert "+Delivery(index=1, clock=1, pid='127.0.0.1:5001'" in text


def test_exceptions_are_compared_and_the_new_core_s_is_raised(monkeypatch):
    pids = ["127.0.0.1:5000", "127.0.0.1:5001"]
    core = PairedCore(pids[0], pids)
    with pytest.raises(FrameError):  # both refuse a frame from their own pid: no mismatch
        core.receive(pids[0], Message(1, pids[1], "x", None))
    monkeypatch.setattr(Core, "backlog", lambda self: 1 // 0)
    with pytest.raises(CoreMismatch, match="raised differently"):
        core.backlog()


def test_a_paired_core_pickles_as_both_cores_and_goes_on():
    pids = ["127.0.0.1:5000", "127.0.0.1:5001"]
    a, b = PairedCore(pids[0], pids), PairedCore(pids[1], pids)
    a.broadcast("hello")
    sends = a.ready().sends
    b = pickle.loads(pickle.dumps(b))
    for _, frame in sends:
        b.receive(pids[0], frame)
    assert [d.text for d in b.ready().deliveries] == ["hello"]
    assert b.old.delivered == b.new.delivered == 1 and type(b.old).__module__.startswith(differential.OLD + ".")
