"""The subjects of `tom grade` (tests/grade_class/): the second handout tool, the mutants, the class folder.

What is proved here: the mutant table fails loudly when a replacement does not apply exactly once;
make_class writes the students it says, deterministically; each Python mutant breaks its rule in a
small targeted case (the pending queue or the clock, no sockets) while the unmutated tool keeps it; the
Java mutants compile and the broken Java does not; the broken Python submissions fail as they say; and
the Python tool and the Java reference agree on one total order in a group on 127.0.0.1.
That each mutant fails exactly the test of its rule is `tom grade`'s proof, not this file's.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handout_java import LINE, java_peer_classes, wait_for
from procs import free_ports

GRADE_CLASS = Path(__file__).parent / "grade_class"
sys.path.insert(0, str(GRADE_CLASS))

import make_class  # noqa: E402
import mutants  # noqa: E402

TOOL = GRADE_CLASS / "python_tool" / "tool.py"


# ---- the mutant table ----

def test_every_mutant_applies_and_differs_from_its_original():
    assert mutants.check_all() == 2 * len(mutants.RULES) + 1
    for tool in mutants.MUTANTS:
        made = {rule: mutants.mutant_source(tool, rule) for rule in mutants.RULES}
        assert mutants.original(tool) not in made.values()
        assert len(set(made.values())) == len(mutants.RULES)  # no two mutants alike
    assert mutants.does_not_compile_source() != mutants.original("java")


@pytest.mark.parametrize("source, why", [
    ("nothing to replace here\n", "found 0"),
    ("x = 1\nx = 1\n", "found 2"),
])
def test_a_replacement_not_found_exactly_once_fails_loudly(source, why):
    with pytest.raises(mutants.MutantError, match=why):
        mutants.apply(source, [("x = 1\n", "x = 2\n")])


def test_a_replacement_that_changes_nothing_or_an_empty_table_fails():
    with pytest.raises(mutants.MutantError, match="changes nothing"):
        mutants.apply("x = 1\n", [("x = 1\n", "x = 1\n")])
    with pytest.raises(mutants.MutantError, match="no replacements"):
        mutants.apply("x = 1\n", [])


def test_a_moved_line_in_the_original_breaks_the_mutant_not_silently(monkeypatch, tmp_path):
    edited = tmp_path / "tool.py"
    edited.write_text(TOOL.read_text("utf-8").replace("return a[1] < b[1]", "return b[1] > a[1]"), "utf-8")
    monkeypatch.setitem(mutants.SOURCES, "python", edited)
    with pytest.raises(mutants.MutantError, match="python tie"):
        mutants.mutant_source("python", "tie")
    assert make_class.main([str(tmp_path / "class"), "--size", "full"]) == 1
    assert not (tmp_path / "class").exists()  # nothing half written


# ---- the class folder ----

def test_make_class_writes_the_students_it_says(tmp_path):
    assert make_class.main([str(tmp_path / "three"), "--size", "3"]) == 0
    assert sorted(p.name for p in (tmp_path / "three").iterdir()) == \
        ["java-ref", "python-premature-ack", "python-ref"]

    full = make_class.write_class(tmp_path / "full", "full")
    assert len(full) == 18 == len(set(full))
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == sorted(full)
    kinds = [make_class.describe(s)["kind"] for s in full]
    assert (kinds.count("reference"), kinds.count("mutant"), kinds.count("broken")) == (2, 12, 4)
    for tool in ("java", "python"):
        assert {make_class.describe(s)["fails"] for s in full if s.startswith(tool + "-")} == \
            {None, *mutants.RULES}
    assert {"java-no-cascade", "python-premature-ack", "broken-hangs", "broken-exits",
            "broken-traceback", "broken-no-compile"} <= set(full)

    twenty = make_class.write_class(tmp_path / "twenty", "20")
    assert len(twenty) == 20 and twenty[:18] == full
    for student in twenty:
        folder = tmp_path / "twenty" / student
        toml = (folder / "tom-grade.toml").read_text("utf-8")
        if make_class.describe(student)["tool"] == "java":
            assert (folder / "HandoutPeer.java").is_file()
            assert 'build = "javac -d {dir}/bin {dir}/*.java"' in toml
            assert 'run = "java -cp {dir}/bin HandoutPeer {neighbors} {output} {port}"' in toml
        else:
            assert (folder / "tool.py").is_file()
            assert 'run = "python3 {dir}/tool.py {neighbors} {output} {port}"' in toml
            assert 'build = ""' in toml
    assert (tmp_path / "twenty" / "java-ref-2" / "HandoutPeer.java").read_text("utf-8") == \
        mutants.original("java")
    assert (tmp_path / "twenty" / "python-no-head" / "tool.py").read_text("utf-8") == \
        mutants.mutant_source("python", "head")


def test_make_class_is_deterministic_and_replaces_only_students(tmp_path):
    out = tmp_path / "class"
    make_class.write_class(out, "full")
    first = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    (out / "java-ref" / "stale.txt").write_text("left by an earlier run")
    (out / "notes.txt").write_text("the teacher's")
    make_class.write_class(out, "full")
    again = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert again.pop(Path("notes.txt")) == b"the teacher's"
    assert again == first


# ---- each Python mutant breaks its rule (pure: the queue and the clock, no sockets) ----

def load_tool(source: str, tmp_path: Path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source, "utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


A, B, C = "127.0.0.1:47001", "127.0.0.1:47002", "127.0.0.1:47003"


def delivered(entries):
    return [(e.clock, e.sender, e.text, e.acks) for e in entries]


def premature_ack(tool):
    q = tool.PendingQueue(3)
    out = delivered(q.on_ack(1, B))  # before its MESSAGE
    out += delivered(q.on_message(1, B, "early-acked"))
    out += delivered(q.on_ack(1, B))
    out += delivered(q.on_ack(1, B))
    return out


def cascade(tool):
    q = tool.PendingQueue(3)
    out = delivered(q.on_message(1, A, "head") + q.on_message(2, B, "second") + q.on_message(3, C, "third"))
    for clock, sender in ((2, B), (3, C)) * 3 + ((1, A),) * 2:
        out += delivered(q.on_ack(clock, sender))  # nothing: the head waits for its ACKs
    out.append("head's last ACK")
    return out + delivered(q.on_ack(1, A))  # everything behind it comes out at once


def tie(tool):
    q = tool.PendingQueue(2)
    out = delivered(q.on_message(5, B, "larger from") + q.on_message(5, A, "smaller from"))
    return out + delivered(q.on_ack(5, A) + q.on_ack(5, A)) + ["then"] + delivered(q.on_ack(5, B) + q.on_ack(5, B))


def all_acks(tool):
    q = tool.PendingQueue(3)
    out = delivered(q.on_message(1, A, "x") + q.on_ack(1, A) + q.on_ack(1, A))  # n - 1
    out.append("n-th ACK")
    out += delivered(q.on_ack(1, A))
    out += delivered(q.on_message(2, B, "y") + q.on_ack(2, B) + q.on_ack(2, B) + q.on_ack(2, B))
    return out


def head(tool):
    q = tool.PendingQueue(3)
    out = delivered(q.on_message(1, A, "unacknowledged head"))
    return out + delivered(q.on_message(2, B, "ready") + q.on_ack(2, B) + q.on_ack(2, B) + q.on_ack(2, B))


def clock(tool, tmp_path):
    t = tool.Tool([("127.0.0.1", 47001)], str(tmp_path / "clock.out"), 47001)
    try:
        t.on_message(10, B, "from far ahead")
        ack = t.outgoing.get_nowait()
        return t.clock, ack
    finally:
        t.output.close()


SCENARIOS = {
    "premature-ack": (premature_ack, [(1, B, "early-acked", 3)]),
    "cascade": (cascade, ["head's last ACK", (1, A, "head", 3), (2, B, "second", 3), (3, C, "third", 3)]),
    "tie": (tie, [(5, A, "smaller from", 2), "then", (5, B, "larger from", 2)]),
    "all-acks": (all_acks, ["n-th ACK", (1, A, "x", 3), (2, B, "y", 3)]),
    "head": (head, []),
}


@pytest.mark.parametrize("rule", mutants.RULES)
def test_each_python_mutant_breaks_its_rule_where_the_tool_keeps_it(rule, tmp_path):
    reference = load_tool(mutants.original("python"), tmp_path, "reference")
    mutant = load_tool(mutants.mutant_source("python", rule), tmp_path, f"mutant_{rule.replace('-', '_')}")
    assert clock(reference, tmp_path) == (11, f"ACK-10-{B}")
    if rule == "clock":
        got = clock(mutant, tmp_path)
        assert got[0] <= 10, got  # its next MESSAGE would not carry more than 10
    else:
        assert clock(mutant, tmp_path) == (11, f"ACK-10-{B}")
        scenario, expected = SCENARIOS[rule]
        assert scenario(reference) == expected
        assert scenario(mutant) != expected
    # In the other rules' scenarios it outputs the same messages in the same order (the all-acks mutant
    # sooner and with fewer ACKs counted: that is its own rule's business). The head mutant's exception
    # is the cascade's scenario, which is a head blocked with ready messages behind it: its own rule.
    for other, (other_scenario, other_expected) in SCENARIOS.items():
        if other != rule and not (rule == "head" and other == "cascade"):
            assert lines(other_scenario(mutant)) == lines(other_expected), (rule, other)


def lines(outcome):
    return [item[:3] for item in outcome if not isinstance(item, str)]


def test_the_all_acks_mutant_still_writes_n_acks(tmp_path):
    """Its lines look healthy: only when it delivers gives it away."""
    mutant = load_tool(mutants.mutant_source("python", "all-acks"), tmp_path, "mutant_all_acks_lines")
    t = mutant.Tool([("127.0.0.1", 47001)] * 3, str(tmp_path / "out.txt"), 47001)
    t.on_message(1, A, "x")
    t.on_ack(1, A)
    t.on_ack(1, A)
    t.on_ack(1, A)  # the late last one: ignored, not a new reserved entry
    t.output.close()
    assert (tmp_path / "out.txt").read_text("utf-8") == f"3 ACKs on MESSAGE-1-{A}-x\n"
    assert t.pending.order == []


# ---- Java: the mutants compile, the broken one does not ----

@pytest.mark.e2e
def test_the_java_mutants_compile_and_the_broken_one_does_not(tmp_path):
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("javac not found: compiling the Java mutants needs a JDK 17+ on PATH")
    make_class.write_class(tmp_path, "full")
    for student in make_class.students("full"):
        about = make_class.describe(student)
        if about["tool"] != "java":
            continue
        folder = tmp_path / student
        # the grader's default build, as a shell would expand it
        done = subprocess.run([javac, "-d", str(folder / "bin"), *map(str, folder.glob("*.java"))],
                              capture_output=True, text=True, timeout=120)
        if student == "broken-no-compile":
            assert done.returncode != 0 and "error" in done.stderr
        else:
            assert done.returncode == 0, (student, done.stderr)
            assert (folder / "bin" / "HandoutPeer.class").is_file()


# ---- the broken Python submissions ----

def test_the_broken_python_submissions_fail_as_they_say(tmp_path):
    neighbors = tmp_path / "neighbors.txt"
    (port,) = free_ports(1)
    neighbors.write_text(f"127.0.0.1:{port}\n")
    args = [str(neighbors), str(tmp_path / "out.txt"), str(port)]
    broken = GRADE_CLASS / "broken"

    done = subprocess.run([sys.executable, str(broken / "exits" / "tool.py"), *args],
                          input="", capture_output=True, text=True, timeout=20)
    assert done.returncode == 1 and done.stdout == ""

    done = subprocess.run([sys.executable, str(broken / "traceback" / "tool.py"), *args],
                          input="127.0.0.1\n", capture_output=True, text=True, timeout=20)
    assert done.returncode == 1
    assert "Choose an IP address to listen on :" in done.stdout
    assert "Traceback (most recent call last)" in done.stderr and "TypeError" in done.stderr

    proc = subprocess.Popen([sys.executable, str(broken / "hangs" / "tool.py"), *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        proc.stdin.write("127.0.0.1\n3\n")
        proc.stdin.close()  # neither 3 nor the end of stdin ends it
        assert proc.stdout.readline() == "Loaded 1 neighbors\n"
        proc.terminate()  # nor SIGTERM
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.5)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()


# ---- the Python tool and the Java reference in one group ----

class Member:
    """One handout tool process, its menu on a stdin pipe, stdout and stderr in files."""

    def __init__(self, cmd, workdir: Path, name: str, port: int, output: Path):
        self.name, self.port, self.output = name, port, output
        self.stdout_path = workdir / f"{name}.stdout"
        self.stderr_path = workdir / f"{name}.stderr"
        self._files = [open(self.stdout_path, "wb"), open(self.stderr_path, "wb")]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self._files[0], stderr=self._files[1])

    def type(self, *lines: str) -> None:
        self.proc.stdin.write("".join(line + "\n" for line in lines).encode("utf-8"))
        self.proc.stdin.flush()

    def stdout(self) -> str:
        return self.stdout_path.read_text("utf-8", errors="replace")

    def delivered(self) -> list[str]:
        return self.output.read_text("utf-8").splitlines() if self.output.exists() else []

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
        finally:
            for f in (self.proc.stdin, *self._files):
                try:
                    f.close()
                except OSError:
                    pass


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory):
    return java_peer_classes(tmp_path_factory)


@pytest.mark.e2e
def test_the_python_tool_and_the_java_reference_agree(java_classes, tmp_path):
    java, classes = java_classes
    ports = free_ports(3)
    neighbors = tmp_path / "neighbors.txt"
    neighbors.write_text("# the whole group, each member once\n" + "".join(f"127.0.0.1:{p}\n" for p in ports))
    kinds = ["python", "java", "python"]
    members = []
    try:
        for i, (kind, port) in enumerate(zip(kinds, ports)):
            output = tmp_path / f"m{i}.out"
            args = [str(neighbors), str(output), str(port)]
            cmd = ([sys.executable, str(TOOL), *args] if kind == "python"
                   else [java, "-cp", str(classes), "HandoutPeer", *args])
            members.append(Member(cmd, tmp_path, f"m{i}-{kind}", port, output))
        for m in members:
            m.type("127.0.0.1")
        for m in members:
            wait_for(lambda: "Started outgoing messages processor." in m.stdout(), f"{m.name} to start")
        froms = [f"127.0.0.1:{p}" if k == "python" else f"localhost/127.0.0.1:{p}" for k, p in zip(kinds, ports)]
        for m, frm in zip(members, froms):
            assert f"Sending messages from: {frm}" in m.stdout()

        expected = []
        for round_ in range(3):
            for i, m in enumerate(members):  # the same moment from everyone: ties on the clock
                text = f"round {round_} from m{i}-with-dashes: 1-2"
                m.type("1", text)
                expected.append((froms[i], text))
            time.sleep(0.2)
        wait_for(lambda: all(len(m.delivered()) >= len(expected) for m in members),
                 "every message in every output file", timeout=40)
        for m in members:
            m.type("3")
        for m in members:
            assert m.proc.wait(timeout=20) == 0, m.name

        files = [m.output.read_text("utf-8") for m in members]
        assert files[0] == files[1] == files[2], "the output files differ"
        keys = []
        for line in files[0].splitlines():
            match = LINE.match(line)
            assert match, line
            assert int(match.group(1)) == 3, line  # n ACKs
            keys.append((int(match.group(2)), match.group(3), match.group(4)))
        assert keys == sorted(keys)  # (clock, from) order, from compared as strings
        assert sorted((f, t) for _, f, t in keys) == sorted(expected)  # each once, all there
        for m in members:
            assert "ignored bad line" not in m.stderr_path.read_text("utf-8")
    finally:
        for m in members:
            m.stop()
