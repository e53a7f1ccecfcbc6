"""The clock condition in real runs: three `tom peer` processes whose Lamport clock ignores what it
receives (issue 43's mutant: `LamportClock.observe` still ticks on a receipt but takes no remote clock),
and `tom verify` on their files says VIOLATED, naming the message a peer sent after delivering one it
does not follow; the same run with the real clock is VERIFIED.

How the mutant gets into real processes: the peers run interpreted (``TOM_PURE=1``) with a folder on
their ``PYTHONPATH`` holding a ``sitecustomize.py`` that replaces the method before `tom peer` starts;
nothing in the shipped code knows of it.

Why it shows deterministically: with the mutant a clock counts its peer's own events (each send, each
frame whose clock it takes). A sends one message at a time, each once every peer delivered the one
before: per message A ticks for its send and for B's and C's ACKs, B only for A's message and C's ACK.
After ten, A's clock is about 28 and B's about 20, so B's message, sent once it delivered A's tenth,
comes under it in the (clock, pid) order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from procs import PeerProcs
from tests.spark_java import spark_java

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 10
DEADLINE = 30.0

MUTANT = textwrap.dedent('''\
    """Issue 43's mutant clock, planted in a test's peer processes before `tom peer` starts."""
    import os

    from tom import build
    from tom.core.clock import LamportClock

    assert os.environ.get("TOM_PURE") == "1" and not build.compiled(), "the mutant needs the interpreted core"


    def observe(self, remote):
        self.time += 1
        return self.time


    LamportClock.observe = observe
''')


def _run(tmp: Path, mutant: bool) -> list[Path]:
    """A sends ROUNDS messages one at a time, then B one; the three files once B delivered its own."""
    tmp.mkdir()
    env = dict(os.environ, TOM_PURE="1")
    path = [str(ROOT), env.get("PYTHONPATH", "")]
    if mutant:
        plant = tmp / "mutant"
        plant.mkdir()
        (plant / "sitecustomize.py").write_text(MUTANT)
        path.insert(0, str(plant))
    env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    procs = PeerProcs(tmp, 3, secure=False)
    for proc in procs.procs:
        proc.env = env
    a, b = 0, 1
    with procs:
        for k in range(1, ROUNDS + 1):
            procs.send(a, [f"a{k}"])
            procs.wait_delivered(k, DEADLINE)
        procs.send(b, ["b1"])
        end = time.monotonic() + DEADLINE
        while not any(m["text"] == "b1" for m in procs.messages(b)):
            assert time.monotonic() < end, f"B did not deliver its own message: {procs.log_text()}"
            time.sleep(0.1)
    return procs.outputs


def _verify(tmp: Path, files: list[Path]) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp / "report"
    run = subprocess.run([sys.executable, "-m", "analysis.verify", *map(str, files), "--report-dir", str(report)],
                         capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL, cwd=ROOT)
    return run, json.loads((report / "report.json").read_text())


@pytest.mark.e2e
@pytest.mark.spark
@pytest.mark.skipif(not spark_java(), reason="Spark needs Java 17+")
def test_a_clock_that_ignores_what_it_receives_is_violated_and_the_real_clock_verified(tmp_path, spark_remote):
    files = _run(tmp_path / "mutant-run", mutant=True)
    b = files[1]
    recs = [json.loads(line) for line in b.read_text().splitlines() if line.strip()]
    last_a = max((r for r in recs if r["kind"] == "message" and r["text"] == f"a{ROUNDS}"), key=lambda r: r["index"])
    own = next(r for r in recs if r["kind"] == "message" and r["text"] == "b1")
    assert own["clock"] < last_a["clock"] and own["sent_at"] > last_a["delivered_at"], (own, last_a)

    run, report = _verify(tmp_path / "mutant-run", files)
    out = run.stdout + run.stderr
    assert run.returncode == 1 and out.splitlines()[0] == "VIOLATED (lamport order)", out
    clock = report["checks"]["clock"]
    named = [(v["file"], v["peer"], v["clock"], v["pid"], v["after_clock"], v["after_pid"]) for v in clock["first"]]
    assert (str(b), own["peer"], own["clock"], own["pid"], last_a["clock"], last_a["pid"]) in named, named
    assert f"{b} ({own['peer']}): its ({own['clock']}, {own['pid']}) at index {own['index']}" in out, out

    files = _run(tmp_path / "real-run", mutant=False)
    run, report = _verify(tmp_path / "real-run", files)
    out = run.stdout + run.stderr
    assert run.returncode == 0 and out.splitlines()[0] == "VERIFIED (lamport order)", out
    assert report["checks"]["clock"]["count"] == 0
