"""`tom grade`'s input: one clear line for what is wrong, no traceback; tom-grade.toml read as documented."""

import json

import pytest

from tom.cli import main
from tom.grade import grader_faults
from tom.grade.config import fill, load_class


def run(capsys, *argv):
    code = main(["grade", *argv])
    return code, capsys.readouterr().err


def test_a_missing_folder(capsys, tmp_path):
    code, err = run(capsys, str(tmp_path / "nope"), "--run", "x")
    assert code == 2 and err.count("\n") == 1 and "no such folder" in err


def test_no_submissions(capsys, tmp_path):
    code, err = run(capsys, str(tmp_path), "--run", "x")
    assert code == 2 and "no submissions" in err


def test_no_run_command(capsys, tmp_path):
    (tmp_path / "alice").mkdir()
    code, err = run(capsys, str(tmp_path))
    assert code == 2 and "no run command for alice" in err


@pytest.mark.parametrize("toml, says", [
    ("run = \n", "tom-grade.toml"),
    ("runn = 'x'\n", "unknown key 'runn'"),
    ("[prompts]\n'(' = '1'\n", "[prompts]"),
    ("[output]\nline_regex = '^(?P<clock>\\\\d+)$'\n", "named groups"),
    ("from = '127.0.0.1'\n", "{port}"),
])
def test_a_bad_toml_is_one_line(capsys, tmp_path, toml, says):
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "tom-grade.toml").write_text(toml)
    code, err = run(capsys, str(tmp_path), "--run", "x")
    assert code == 2 and err.count("\n") == 1 and says in err, err


def test_an_unknown_test(capsys, tmp_path):
    (tmp_path / "alice").mkdir()
    code, err = run(capsys, str(tmp_path), "--run", "x", "--tests", "tie,nope")
    assert code == 2 and "unknown test 'nope'" in err


def test_toml_overrides(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "tom-grade.toml").write_text(
        'run = "python3 {dir}/t.py {neighbors} {output} {port}"\nbuild = ""\nfrom = "127.0.0.1:{port}"\n'
        '[prompts]\n"(?i)interface" = "{loopback}"\n[menu]\nsend = "s"\n')
    a, b = load_class(tmp_path, "java -cp {dir} Main", "javac {dir}/*.java")
    assert a.run == "java -cp {dir} Main" and a.build == "javac {dir}/*.java"
    assert b.build == "" and b.run.startswith("python3") and b.origin == "127.0.0.1:{port}"
    assert b.rules[0].pattern == "(?i)interface" and b.keys.send == "s"


def test_fill_quotes_each_value():
    assert fill("java -cp {dir}/bin M {port}", dir="/a b", port=5) == "java -cp '/a b'/bin M 5"


def test_a_run_the_grader_fails_on_is_the_graders_verdict_and_exit_1(capsys, tmp_path):
    """A run whose folder cannot be made (a file where it goes) is the grader's failure: verdict
    grader-error, one line naming the error, the other runs graded, exit 1 saying which tests to grade
    again; no traceback (before, the error of writing its result.json ended tom grade with one)."""
    (tmp_path / "class" / "alice").mkdir(parents=True)
    out = tmp_path / "out"
    (out / "runs" / "alice" / "tie").mkdir(parents=True)
    (out / "runs" / "alice" / "tie" / "1").write_text("in the way\n")
    code = main(["grade", str(tmp_path / "class"), "--run", "true", "--tests", "tie", "--out", str(out),
                 "--no-report"])
    shown = capsys.readouterr()
    assert code == 1, shown
    assert "alice tie #1: grader-error (0.0 s)  NotADirectoryError: " in shown.out, shown.out
    assert shown.err == ("tom grade: 1 run failed in the grader, not in the tools (grader-error), scored as "
                         "not passed: grade again with --tests tie\n")
    assert "Traceback" not in shown.out + shown.err


def test_a_bug_of_the_grader_keeps_its_traceback_in_a_log_and_the_run_its_result(tmp_path):
    from tom.grade.config import Submission
    from tom.grade.runner import engine_failed
    from tom.grade.trial import TrialSpec

    (tmp_path / "alice").mkdir()
    sub = load_class(tmp_path, "true", "")[0]
    assert isinstance(sub, Submission)
    spec = TrialSpec(sub, "tie", 2, tmp_path / "out" / "runs" / "alice" / "tie" / "2", 1, 60.0, 20.0)
    try:
        raise RuntimeError("a bug")
    except RuntimeError as e:
        result = engine_failed(spec, e, tmp_path / "out" / "grader-errors.log")
    assert (result["verdict"], result["got"]) == ("grader-error", "RuntimeError: a bug")
    assert result["detail"].endswith(f"its traceback is in {tmp_path / 'out' / 'grader-errors.log'}")
    assert json.loads((spec.folder / "result.json").read_text()) == result
    log = (tmp_path / "out" / "grader-errors.log").read_text()
    assert log.startswith("--- alice tie #2\nTraceback") and log.endswith("RuntimeError: a bug\n")


def test_the_grader_faults_line_counts_grader_errors_and_disagreeing_peers():
    assert grader_faults([("tie", "pass"), ("tie", "crashed"), ("clock", "fail")]) == ""
    assert grader_faults([("tie", "grader-error"), ("clock", "peers-disagree"), ("tie", "grader-error")]) == (
        "3 runs failed in the grader, not in the tools (grader-error, peers-disagree), scored as not passed: "
        "grade again with --tests tie,clock")
