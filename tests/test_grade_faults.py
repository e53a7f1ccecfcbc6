"""A run the grader itself fails on (its folder unwritable, a scripted peer's port taken, a bug of
tom grade) gets the verdict grader-error, never one of the tool's; tom grade goes on with the other runs,
then exits 1 naming the tests to grade again."""

import json
import socket

from tom.cli import main
from tom.grade import grader_faults
from tom.grade.config import load_class
from tom.grade.trial import TrialSpec, run_trial


def test_a_run_the_grader_fails_on_is_the_graders_verdict_and_exit_1(capsys, tmp_path):
    """A run whose folder cannot be made (a file where it goes) is the grader's failure: verdict
    grader-error, one line naming the error, the other runs graded, exit 1 saying which tests to grade
    again; no traceback (before, the error of writing its result.json ended tom grade with one)."""
    for student in ("alice", "bob"):
        (tmp_path / "class" / student).mkdir(parents=True)
    out = tmp_path / "out"
    (out / "runs" / "alice" / "tie").mkdir(parents=True)
    (out / "runs" / "alice" / "tie" / "1").write_text("in the way\n")
    code = main(["grade", str(tmp_path / "class"), "--run", "true", "--tests", "tie", "--out", str(out),
                 "--start-limit", "5", "--no-report"])
    shown = capsys.readouterr()
    assert code == 1, shown
    assert "alice tie #1: grader-error (0.0 s)  NotADirectoryError: " in shown.out, shown.out
    bob = json.loads((out / "runs" / "bob" / "tie" / "1" / "result.json").read_text())
    assert bob["verdict"] == "crashed", (bob["got"], bob["detail"])  # `true` ends before its menu: the tool's own verdict
    assert shown.err == ("tom grade: 1 run failed in the grader, not in the tools (grader-error), scored as "
                         "not passed: grade again with --tests tie\n")
    assert "Traceback" not in shown.out + shown.err


def test_a_bug_of_the_grader_keeps_its_traceback_in_a_log_and_the_run_its_result(tmp_path):
    from tom.grade.runner import engine_failed

    (tmp_path / "alice").mkdir()
    sub = load_class(tmp_path, "true", "")[0]
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


async def test_a_scripted_peers_port_taken_after_its_choice_is_chosen_again(tmp_path, monkeypatch):
    """The ports are chosen free, then bound: another program can take one in between (met once under
    coverage: the tool was graded did-not-start). The set-up chooses again; a port taken at every one
    of its SETUP_TRIES choices makes the run the grader's failure, never the tool's."""
    from tom.grade import ports, trial

    (tmp_path / "alice").mkdir()
    sub = load_class(tmp_path, "true", "")[0]
    real = ports.allocate
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        chosen: list[list[int]] = []

        def first_taken(n):  # the allocator's first choice, taken by the time the stage binds it
            chosen.append([port, port + 1, port + 2] if not chosen else real(n))
            return chosen[-1]

        monkeypatch.setattr(ports, "allocate", first_taken)
        result = await run_trial(TrialSpec(sub, "tie", 1, tmp_path / "again", 1, 60.0, 5.0))
        assert len(chosen) == 2 and result["tool"]["port"] == chosen[1][1]
        assert result["verdict"] == "crashed", result  # `true` ends before its menu: the tool's own verdict

        chosen.clear()
        monkeypatch.setattr(ports, "allocate", lambda n: chosen.append([port, port + 1, port + 2]) or chosen[-1])
        result = await run_trial(TrialSpec(sub, "tie", 1, tmp_path / "run", 1, 60.0, 20.0))
    assert len(chosen) == trial.SETUP_TRIES == 3
    assert (result["verdict"], result["expected"]) == ("grader-error", "the grader to set the test up")
    assert result["got"].startswith("OSError: ") and "address already in use" in result["got"].lower()
    assert "not the tool" in result["detail"]
    assert json.loads((tmp_path / "run" / "result.json").read_text()) == result
