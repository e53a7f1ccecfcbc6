"""The compiled build (mypyc, `scripts/build-compiled`) against the interpreted one: the same seeded
scenarios — dynamic groups, partitions, founding, link faults, every order — run once on each build
(``TOM_PURE=1`` for the interpreted one), and every frame each core hands out, to whom, and every
delivery must be the same, step by step (a digest per seed, so a difference names its seed).

Also: which build runs is said (`tom.build`), a stale build is never loaded, and on CI, where a C
compiler is, the compiled build is what runs (a missing build fails there, instead of the suite
passing on the interpreted one unnoticed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tom
from tom import build

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import hashlib, sys
sys.path.insert(0, "tests")
import simnet
import tom.build
from tom.codec.frames import format_frame

print(tom.build.describe())
for options in ({}, {"partitions": True}, {"founding": True, "partitions": True}, {"edges": True}):
    for order in ("lamport", "sequencer", "causal"):
        for seed in range(int(sys.argv[1])):
            h = hashlib.blake2b(digest_size=8)

            def on_step(node, ready, h=h):
                h.update(node.pid.encode())
                for dests, frame in ready.sends:
                    h.update(repr((tuple(dests), format_frame(frame))).encode())
                for d in ready.deliveries:
                    h.update(repr((type(d).__name__, sorted(vars(d).items()) if hasattr(d, "__dict__")
                                   else [(k, getattr(d, k)) for k in type(d).__dataclass_fields__])).encode())
                for n in ready.notices:
                    h.update(n.tag.encode())

            net, until = simnet.scenario(seed, order=order, **options)
            net.on_step = on_step
            net.run(until=until)
            print(sorted(options), order, seed, h.hexdigest())
"""


def _run(pure: bool, seeds: int) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "TOM_PURE"}
    if pure:
        env["TOM_PURE"] = "1"
    done = subprocess.run([sys.executable, "-c", WORKER, str(seeds)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def _needs_compiled() -> None:
    if not build.compiled():
        pytest.skip(f"the compiled build does not run here: {build.describe()}")


def test_the_compiled_core_hands_out_the_same_frames_and_deliveries_as_the_interpreted_one():
    _needs_compiled()
    compiled, interpreted = _run(False, 12), _run(True, 12)
    assert compiled[0] == "compiled (mypyc)" and interpreted[0] == "interpreted (TOM_PURE is set)"
    assert len(compiled) == len(interpreted) == 1 + 4 * 3 * 12
    differ = [f"{a}  !=  {b}" for a, b in zip(compiled[1:], interpreted[1:]) if a != b]
    assert not differ, "\n".join(differ[:10])


def test_on_ci_with_a_c_compiler_the_compiled_build_runs():
    if not os.environ.get("CI") or os.environ.get("TOM_PURE"):
        pytest.skip("only on CI (CI set), where a C compiler is: there the compiled build must run")
    if not (shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")):
        pytest.fail("CI has no C compiler: the compiled build cannot be made")
    assert build.compiled(), build.describe()


def test_the_build_says_which_it_is_and_a_stale_build_is_not_loaded(tmp_path):
    """A copy of the package whose compiled modules are older than one source runs interpreted and
    says why; TOM_PURE=1 does too; the phrase is what ``tom peer -v``, status and /metrics show."""
    _needs_compiled()
    copy = tmp_path / "tree"
    shutil.copytree(ROOT / "tom", copy / "tom", ignore=shutil.ignore_patterns("__pycache__"))
    for lib in ROOT.glob("tom_mypyc__mypyc*"):
        shutil.copy2(lib, copy / lib.name)
    probe = [sys.executable, "-c", "import tom.build, tom.core; print(tom.build.describe()); print(tom.core.__file__)"]
    env = {k: v for k, v in os.environ.items() if k != "TOM_PURE"} | {"PYTHONPATH": str(copy)}
    fresh = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert fresh.stdout.splitlines()[0] == "compiled (mypyc)", fresh.stdout + fresh.stderr
    os.utime(copy / "tom" / "core" / "queue.py")  # a source edited after the build
    stale = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    said, where = stale.stdout.splitlines()
    assert said.startswith("interpreted (the compiled build is older than 1 source file") and where.endswith(".py")
    os.utime(copy / "tom" / "core" / "queue.py", (1, 1))  # fresh again; but a compiled module gone:
    for lib in (copy / "tom" / "peer").glob("lines.*.so"):
        lib.unlink()
    lacking = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert lacking.stdout.splitlines()[0] == ("interpreted (the compiled build lacks 1 module(s): "
                                              "scripts/setup-venv rebuilds it)"), lacking.stdout + lacking.stderr
    pure = subprocess.run(probe, cwd=tmp_path, env=env | {"TOM_PURE": "1"}, capture_output=True, text=True, timeout=60)
    assert pure.stdout.splitlines()[0] == "interpreted (TOM_PURE is set)"
    assert tom.PURE_WHY == "" or not build.compiled()


def test_the_hot_path_records_are_constructed_natively():
    """A pending entry and a delivery are made once per message: their constructors are compiled
    (a dataclass's generated ``__init__`` is interpreted Python, called through the type's slot)."""
    _needs_compiled()
    import inspect

    from tom.core.queue import Entry
    from tom.core.records import Delivery

    slow = [cls.__name__ for cls in (Entry, Delivery) if inspect.isfunction(cls.__init__)]
    assert not slow, f"constructed by an interpreted __init__: {slow}"
    e, d = Entry(3, "a:1"), Delivery(1, 3, "a:1", "hi", None, 0)
    assert (e.text, e.sent_at, e.acks, e.seq, e.vc) == (None, None, set(), None, None)
    assert e.acks is not Entry(3, "a:1").acks  # each entry its own set
    assert (d.seq, d.vc) == (None, None) and d == Delivery(1, 3, "a:1", "hi", None, 0)


def test_the_per_frame_loops_run_compiled():
    """A link's lines are decoded, a batch of sends encoded and a batch of frames received by compiled
    loops: the interpreted shell calls each once per batch, not once per frame."""
    _needs_compiled()
    import inspect

    from tom.codec import frames
    from tom.core import group

    slow = [f.__name__ for f in (frames.decode_lines, frames.encode_sends, group.receive_all)
            if inspect.isfunction(f)]
    assert not slow, f"interpreted: {slow}"


@pytest.mark.parametrize("order", ["lamport", "sequencer", "causal"])
def test_a_flush_works_out_its_last_step_on_a_copy_of_the_order_on_either_build(order):
    """`ViewChange.settle` deep-copies the order (sharing its counters) and releases on the copy. The
    core's classes are native classes in the compiled build (their methods call each other directly),
    whose copy is constructed before its fields are set: each takes no arguments for that."""
    import copy

    from tom.codec.frames import Message
    from tom.core.order import ORDER_CLASSES

    a, b = "127.0.0.1:5000", "127.0.0.1:5001"
    stats = {"premature_acks": 0}
    original = ORDER_CLASSES[order](a, stats)
    original.install((a, b), 1, a)
    original.own(2, "mine", 1.5)
    vc = (0, 1) if order == "causal" else None
    original.message(b, Message(3, b, "theirs", 2.5, vc))
    trial = copy.deepcopy(original, {id(stats): stats})
    assert trial.stats is stats and type(trial) is type(original) and len(trial) == len(original)
    released = trial.release(frozenset((a, b)), True)
    assert [(e.clock, e.pid, e.text) for e in released] == sorted(
        [(e.clock, e.pid, e.text) for e in original], key=lambda k: k[:2])[:len(released)]
    assert len(original) == 2 and not any(e is f for e in released for f in original)


def test_a_trusted_message_is_the_message_its_fields_make_and_stays_frozen():
    """The hot path builds a message from fields it has checked (`trusted_message`; compiled: stored
    directly): the same frame as the checked constructor's, equal, with the same hash, and frozen."""
    import dataclasses

    from tom.codec.frames import Message, trusted_message

    fast = trusted_message(7, "127.0.0.1:5000", "hi", 1.5, None, (1, 2))
    checked = Message(7, "127.0.0.1:5000", "hi", 1.5, None, (1, 2))
    assert type(fast) is Message and fast == checked and hash(fast) == hash(checked)
    assert [getattr(fast, f.name) for f in dataclasses.fields(Message)] == [7, "127.0.0.1:5000", "hi", 1.5, None,
                                                                              (1, 2)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.clock = 8  # type: ignore[misc]
