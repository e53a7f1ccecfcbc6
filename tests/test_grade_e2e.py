"""`tom grade` end to end: the handout's reference tool (tests/handout_peer/HandoutPeer.java, built by the
engine's --build) passes every rule test; two mutants made here fail the test of their rule; broken tools
get their verdict within the limits, and no process of theirs is left behind.

The full set of mutants and a second tool are tests/grade_class/'s; these few prove the engine's tests can
fail.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from tom.grade import TESTS
from tom.grade.config import load_class
from tom.grade.runner import Plan, grade

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "handout_peer" / "HandoutPeer.java"
RUN = "java -cp {dir}/bin HandoutPeer {neighbors} {output} {port}"
BUILD = "javac -d {dir}/bin {dir}/HandoutPeer.java"

# Each mutant edits the reference source once (old -> new): the fault the rule test must catch.
MUTANTS = {
    # drops an ACK that comes before its MESSAGE, as a published student solution does
    "no-premature": ("""            if (e == null) { // premature ACK: reserve the entry until the MESSAGE arrives
                e = new Entry(msgClock, msgFrom);
                pending.put(key, e);
            }""", """            if (e == null) { System.err.println("Got an ACK without a message"); return; }"""),
    # releases one ready message per frame instead of the cascade
    "no-cascade": ('say("Delivered: " + head.message());', 'say("Delivered: " + head.message()); return;'),
}


def needs_jdk():
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac not found: grading the handout's reference tool needs a JDK 17+ on PATH")


def student(root: Path, name: str, source: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "HandoutPeer.java").write_text(source, encoding="utf-8")


def mutant(name: str) -> str:
    old, new = MUTANTS[name]
    source = SOURCE.read_text(encoding="utf-8")
    assert source.count(old) == 1, f"the mutant {name} no longer applies to HandoutPeer.java"
    return source.replace(old, new)


async def grade_class(root: Path, out: Path, tests, **plan) -> dict:
    subs = load_class(root, RUN, BUILD)
    with trio.fail_after(400):
        results = await grade(subs, Plan(out, tuple(tests), jobs=2, **plan))
    return {(r["student"], r["test"]): r for r in results}


def brief(r: dict) -> str:
    return f"{r['student']} {r['test']}: {r['verdict']} expected {r['expected']!r} got {r['got']!r} {r['detail']!r}"


async def test_the_reference_tool_passes_every_rule(tmp_path):
    needs_jdk()
    student(tmp_path / "class", "reference", SOURCE.read_text(encoding="utf-8"))
    results = await grade_class(tmp_path / "class", tmp_path / "out", TESTS)
    for test in TESTS:
        r = results[("reference", test)]
        assert r["verdict"] == "pass", brief(r)
        assert r["seconds"] < 30, brief(r)
    built = json.loads((tmp_path / "out" / "build" / "reference.json").read_text())
    assert built["ok"] is True
    # the run folder as the contract has it
    run = tmp_path / "out" / "runs" / "reference" / "cascade" / "1"
    assert {p.name for p in run.iterdir()} >= {"result.json", "tool.out", "peers", "frames.jsonl", "terminal.log"}
    result = json.loads((run / "result.json").read_text())
    assert set(result) >= {"student", "test", "repeat", "verdict", "expected", "got", "detail", "seconds", "tail",
                           "tool", "peers"}
    assert result["tool"]["from"] == f"localhost/127.0.0.1:{result['tool']['port']}"
    assert [p["from"] for p in result["peers"]] == [f"localhost/127.0.0.1:{p['port']}" for p in result["peers"]]
    assert len({len(str(p)) for p in [result["tool"]["port"], *(p["port"] for p in result["peers"])]}) == 1
    frames = [json.loads(line) for line in (run / "frames.jsonl").read_text().splitlines()]
    assert frames and set(frames[0]) == {"t", "dir", "peer", "other", "line"}
    tool_lines = (run / "tool.out").read_text().splitlines()
    assert tool_lines == (run / "peers" / "1.out").read_text().splitlines() == \
        (run / "peers" / "2.out").read_text().splitlines()
    assert len(tool_lines) == 4 and all(line.startswith("3 ACKs on MESSAGE-") for line in tool_lines)
    assert "Choose what to do:" in (run / "terminal.log").read_text()


async def test_mutants_fail_the_test_of_their_rule(tmp_path):
    needs_jdk()
    for name in MUTANTS:
        student(tmp_path / "class", name, mutant(name))
    results = await grade_class(tmp_path / "class", tmp_path / "out", ["premature-ack", "cascade", "head"])
    premature = results[("no-premature", "premature-ack")]
    assert premature["verdict"] == "fail" and premature["got"].startswith("nothing after"), brief(premature)
    cascade = results[("no-cascade", "cascade")]
    assert cascade["verdict"] == "fail" and "still undelivered" in cascade["got"], brief(cascade)
    for key in [("no-premature", "cascade"), ("no-premature", "head"), ("no-cascade", "premature-ack"),
                ("no-cascade", "head")]:
        assert results[key]["verdict"] == "pass", brief(results[key])


HANGS = """import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(600)
"""

DIES_ON_A_FRAME = """import os, socket, sys
port = int(sys.argv[3])
open(sys.argv[4], "w").write(str(os.getpid()))
server = socket.create_server(("127.0.0.1", port))
print("Choose what to do:\\n1. Send a new message:\\n2. Print status\\n3. Quit", flush=True)
conn, _ = server.accept()
line = conn.makefile().readline()
raise RuntimeError("cannot handle " + line.strip())
"""


def python_student(root: Path, name: str, code: str, args: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "tool.py").write_text(code)
    (root / name / "tom-grade.toml").write_text(f'run = "{sys.executable} {{dir}}/tool.py {args}"\nbuild = ""\n')


def test_broken_tools_get_their_verdicts_through_the_cli(tmp_path):
    root = tmp_path / "class"
    python_student(root, "hangs", HANGS, f"{tmp_path}/hangs.pid")
    python_student(root, "exits", "print('bye')\n", "")
    python_student(root, "traceback", "import sys\nprint('Loaded 3 neighbors')\nraise ValueError('boom')\n", "")
    python_student(root, "dies", DIES_ON_A_FRAME, f"{{neighbors}} {{output}} {{port}} {tmp_path}/dies.pid")
    (root / "nobuild").mkdir()
    (root / "nobuild" / "Broken.java").write_text("class Broken { int x = ; }\n")
    (root / "nobuild" / "tom-grade.toml").write_text('run = "true"\nbuild = "javac -d {dir}/bin {dir}/Broken.java"\n')
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "tom", "grade", str(root), "--out", str(out), "--tests",
                           "sends-acks", "--start-limit", "4", "--jobs", "2", "--no-report"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    # 1 when a run failed in the grader (runs 57 and 59): its traceback is in grader-errors.log
    log = out / "grader-errors.log"
    assert done.returncode == 0, done.stderr[-6000:] + (log.read_text()[-6000:] if log.exists() else "")

    def result(name):
        return json.loads((out / "runs" / name / "sends-acks" / "1" / "result.json").read_text())

    assert result("hangs")["verdict"] == "did-not-start"
    assert result("exits")["verdict"] == "crashed" and "bye" in result("exits")["tail"]
    tb = result("traceback")
    assert tb["verdict"] == "crashed" and tb["tail"][-1] == "ValueError: boom", tb
    dies = result("dies")
    assert dies["verdict"] == "crashed" and "it ended during the test" in dies["got"], dies
    assert any("RuntimeError: cannot handle" in line for line in dies["tail"]), dies
    nobuild = result("nobuild")
    assert nobuild["verdict"] == "did-not-build" and any("error" in line for line in nobuild["tail"])
    for pidfile in ("hangs.pid", "dies.pid"):
        pid = int((tmp_path / pidfile).read_text())
        assert stopped(pid), f"{pidfile}: pid {pid} still runs"


def stopped(pid: int) -> bool:
    """The process is gone or a zombie (whoever reaps orphans here may take a moment)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return True
        if "\nState:\tZ" in status:
            return True
        time.sleep(0.1)
    return False
