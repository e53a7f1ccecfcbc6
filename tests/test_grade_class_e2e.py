"""`tom grade` on the grading subjects (tests/grade_class/), as a teacher runs it.

* A class of three (``make_class.py --size 3``: both unmutated tools and the Python premature-ACK
  mutant) and a fourth student, the Python tool writing another line form with its ``[output]
  line_regex``, graded end to end by the command with the Spark report: every per-test verdict, and
  grades.csv.
* Each of the 12 mutants once, on the test of its rule (it fails) and one other rule test (it passes).

The 5 repeats and the classes of 18 and 20 are too long for the suite: docs/grading.md says how to run
them.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tom.grade import TESTS
from tom.grade.config import load_class
from tom.grade.runner import Plan, grade

REPO = Path(__file__).resolve().parent.parent
CLASS = REPO / "tests" / "grade_class"
sys.path.insert(0, str(CLASS))

import make_class  # noqa: E402
import mutants  # noqa: E402

pytestmark = pytest.mark.e2e

OTHER_LINES = "python-other-lines"
"""The Python reference writing ``<clock> <from> <text>`` (no ACK count), with its line_regex."""
OTHER_REGEX = r"^(?P<clock>\d+) (?P<sender>\S+) (?P<text>\S+)$"

# For each rule, another rule test its mutants must pass (one that the situation of its own rule is
# close to, where a grader that blamed the wrong rule would show).
OTHER_TEST = {"premature-ack": "sends-acks", "cascade": "head", "tie": "one-each-way", "clock": "tie",
              "all-acks": "head", "head": "all-acks"}


def needs_jdk() -> None:
    if shutil.which("javac") is None or shutil.which("java") is None:
        reason = "javac not found: grading the Java handout tools needs a JDK 17+ on PATH"
        print(reason)
        pytest.skip(reason)


def other_lines_student(root: Path) -> None:
    """The Python reference with its output line changed, and the line_regex saying so."""
    folder = root / OTHER_LINES
    folder.mkdir()
    source = mutants.original("python")
    old = 'return f"{self.acks} ACKs on MESSAGE-{self.clock}-{self.sender}-{self.text}"'
    assert source.count(old) == 1, "the Python tool's output line moved: update this test"
    (folder / "tool.py").write_text(source.replace(old, 'return f"{self.clock} {self.sender} {self.text}"'))
    toml = (CLASS / "python_tool" / "tom-grade.toml").read_text()
    (folder / "tom-grade.toml").write_text(toml + f"\n[output]\nline_regex = '{OTHER_REGEX}'\n")


@pytest.mark.spark
def test_a_class_of_three_graded_end_to_end_with_the_report(tmp_path, spark_remote):
    # (the file check on the test process's Spark Connect server, SPARK_REMOTE; tests/test_grade_report_spark.py
    # runs it on a local Spark)
    needs_jdk()
    root, out = tmp_path / "class", tmp_path / "out"
    made = subprocess.run([sys.executable, str(CLASS / "make_class.py"), str(root), "--size", "3", "--expected"],
                          capture_output=True, text=True, timeout=60, check=True)
    expected = json.loads(made.stdout)
    other_lines_student(root)
    expected[OTHER_LINES] = {"kind": "reference", "fails": None}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "tom", "grade", str(root), "--out", str(out), "--jobs", "2"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    document = json.loads((out / "grades.json").read_text())
    assert document["file_check"] == "ran", document["file_check"]
    assert document["warnings"] == []
    points = {t["name"]: t["points"] for t in document["tests"]}
    assert list(points) == list(TESTS)
    wrong = []
    for student, about in expected.items():
        for test in TESTS:
            run = document["students"][student]["tests"][test]["runs"][0]
            want = "fail" if test == about["fails"] else "pass"
            if run["verdict"] != want:
                wrong.append(f"{student} {test}: {run['verdict']} (want {want}): expected {run['expected']!r} "
                             f"got {run['got']!r} {run['detail']!r}")
    assert not wrong, "\n".join(wrong)
    # the other line form was read with its regex: the file check looked at every line of the tool's file
    check = document["students"][OTHER_LINES]["tests"]["load"]["runs"][0]["file_check"]
    assert check["ok"] and check["tool_messages"] == check["peer_messages"] >= 300, check
    # TOM's peers write the tool's from form: the Java tool's host/address:port, the Python tool's address:port
    for student, form in (("java-ref", "localhost/127.0.0.1:{}"), ("python-ref", "127.0.0.1:{}")):
        run = document["students"][student]["tests"]["one-each-way"]["runs"][0]
        members = [run["tool"], *run["peers"]]
        assert [m["from"] for m in members] == [form.format(m["port"]) for m in members], run
    failed = document["students"]["python-premature-ack"]["tests"]["premature-ack"]["runs"][0]
    assert failed["got"].startswith("nothing after"), failed

    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", *TESTS, "total"]
    full = sum(points.values())
    table = {row[0]: row[1:] for row in rows[1:]}
    assert set(table) == set(expected)
    for student, about in expected.items():
        scores = [float(x) for x in table[student]]
        want = [0.0 if t == about["fails"] else points[t] for t in TESTS]
        assert scores == [*want, sum(want)], (student, scores)
    assert float(table["java-ref"][-1]) == full
    page = (out / "students" / "python-premature-ack.html").read_text()
    assert "<svg" in page  # the failing run's space-time diagram
    assert (out / "index.html").is_file()


def test_each_mutant_fails_the_test_of_its_rule_and_passes_another(tmp_path):
    needs_jdk()
    root = tmp_path / "class"
    names = [f"{tool}-{make_class.MUTANT_NAMES[rule]}" for rule in mutants.RULES for tool in ("java", "python")]
    make_class.write_class(root, "full")
    for folder in root.iterdir():
        if folder.name not in names:
            shutil.rmtree(folder)
    subs = {s.name: s for s in load_class(root, None, None)}

    async def main() -> list[dict]:
        results: list[dict] = []
        with trio.fail_after(600):
            for rule in mutants.RULES:  # the two mutants of a rule side by side, on their two tests
                pair = [subs[f"{tool}-{make_class.MUTANT_NAMES[rule]}"] for tool in ("java", "python")]
                results += await grade(pair, Plan(tmp_path / "out", (rule, OTHER_TEST[rule]), jobs=2))
        return results

    results = trio.run(main)
    assert len(results) == 24
    wrong = []
    for r in results:
        rule = make_class.describe(r["student"])["fails"]
        want = "fail" if r["test"] == rule else "pass"
        if r["verdict"] != want:
            wrong.append(f"{r['student']} {r['test']}: {r['verdict']} (want {want}): expected {r['expected']!r} "
                         f"got {r['got']!r} {r['detail']!r}")
    assert not wrong, "\n".join(wrong)
