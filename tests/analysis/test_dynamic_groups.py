"""Dynamic groups: crashed, late-joining and leaving peers owe exactly what the view rules say
(docs/output-format.md, view records), on both the fast path and the exact path."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis import checks, verify
from tests.analysis.conftest import message, view_record
from procs import PeerProcs, free_ports

pytestmark = pytest.mark.spark
A, B, C, D = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"
REPO = Path(__file__).resolve().parents[2]

# view 1 = {A, B, C}; C crashes after delivering (3, C); view 2 = {A, B} removes C.
VIEW_1 = [(2, A), (2, B), (3, C), (4, A), (5, B)]
CRASH_AFTER = 3      # C delivered the first 3 messages of view 1
VIEW_2 = [(7, A), (8, B)]


def renumber(recs: list[dict]) -> list[dict]:
    return [dict(r, index=i + 1) for i, r in enumerate(recs)]


def crash_run(*, skip: dict[str, list[tuple[int, str]]] | None = None,
              c_holds: list[tuple[int, str]] | None = None) -> dict[str, list[dict]]:
    """The run above; ``skip`` drops events at a peer, ``c_holds`` replaces what C delivered."""
    skip = skip or {}
    run = {}
    for peer in (A, B):
        recs = [view_record(peer, 0, 1, A, 1, [A, B, C], joined=[A, B, C])]
        recs += [message(peer, 0, c, p) for c, p in VIEW_1 if (c, p) not in skip.get(peer, [])]
        recs.append(view_record(peer, 0, 6, A, 2, [A, B], removed=[C]))
        recs += [message(peer, 0, c, p, view=2) for c, p in VIEW_2 if (c, p) not in skip.get(peer, [])]
        run[peer] = renumber(recs)
    held = VIEW_1[:CRASH_AFTER] if c_holds is None else c_holds
    run[C] = renumber([view_record(C, 0, 1, A, 1, [A, B, C], joined=[A, B, C])]
                      + [message(C, 0, c, p) for c, p in held])
    return run


def write_run(folder: Path, run: dict[str, list[dict]]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for peer, recs in run.items():
        (folder / f"{peer.replace(':', '_')}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recs))
    return [f"file:{p}" for p in sorted(folder.glob("*.jsonl"))]


def both_paths(spark, tmp_path, run) -> tuple[dict, dict]:
    """The report of ``main`` (fast path first) and the result of the exact path alone: ``main``'s
    own where the fast path handed over to the exact path (the same checks, not run twice)."""
    files = write_run(tmp_path / "run", run)
    code = verify.main([str(tmp_path / "run"), "--report-dir", str(tmp_path / "out")])
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == rep["exit_code"]
    if rep["proof"] == "exact checks":
        return rep, rep
    exact = verify.Report([])
    verify._verify_exact(spark, files, 5, exact, lambda name: None)
    exact = exact.as_json()
    return rep, exact


def agreement_rows(result: dict) -> list[tuple]:
    return [(r["clock"], r["pid"], r["missing"], r["unexpected"])
            for r in result["checks"]["agreement"]["first"]]


def test_crashed_peer_owes_nothing_after_its_crash(spark, tmp_path):
    """(a) C's file stops mid view 1; A and B deliver the rest of view 1: VERIFIED, on the fast path."""
    rep, exact = both_paths(spark, tmp_path, crash_run())
    assert rep["verdict"] == "VERIFIED" and rep["fast_path"] == "conclusive"
    assert exact["verdict"] == "VERIFIED"


def test_survivor_missing_a_message_after_the_crash_is_a_violation(spark, tmp_path):
    """(b) B misses (4, A), delivered by A after C crashed: agreement, missing at B."""
    rep, exact = both_paths(spark, tmp_path, crash_run(skip={B: [(4, A)]}))
    assert rep["verdict"] == "VIOLATED"
    assert agreement_rows(rep) == agreement_rows(exact) == [(4, A, [B], [])]


def test_crashed_peer_must_hold_a_prefix(spark, tmp_path):
    """C delivered (3, C) but not the earlier (2, B): a gap before its crash, not after it."""
    rep, exact = both_paths(spark, tmp_path, crash_run(c_holds=[(2, A), (3, C)]))
    assert rep["verdict"] == "VIOLATED"
    assert agreement_rows(rep) == agreement_rows(exact) == [(2, B, [C], [])]


def test_crashed_peer_may_not_hold_what_survivors_lack(spark, tmp_path):
    """A message only the crashed peer delivered is missing at every survivor."""
    rep, _ = both_paths(spark, tmp_path, crash_run(skip={A: [(3, C)], B: [(3, C)]}))
    assert rep["verdict"] == "VIOLATED"
    assert agreement_rows(rep) == [(3, C, [A, B], [])]


def test_crashed_peer_may_not_deliver_in_a_later_view(spark, tmp_path):
    run = crash_run(c_holds=VIEW_1)
    run[C] = renumber(run[C] + [message(C, 0, 7, A, view=2)])
    rep, _ = both_paths(spark, tmp_path, run)
    assert rep["verdict"] == "VIOLATED"
    assert agreement_rows(rep) == [(7, A, [], [C])]


def test_late_joiner_starts_at_its_view(spark, tmp_path):
    """(c) D joins in view 2: its file starts with that view's record; it owes views 2 on only."""
    run = crash_run()
    for peer in (A, B):
        run[peer] = [dict(r, members=[A, B, D], joined=[D]) if r["kind"] == "view" and r["view"] == 2
                     else r for r in run[peer]]
    run[D] = renumber([view_record(D, 0, 6, A, 2, [A, B, D], joined=[D], removed=[C])]
                      + [message(D, 0, c, p, view=2) for c, p in VIEW_2])
    rep, exact = both_paths(spark, tmp_path, run)
    assert rep["verdict"] == exact["verdict"] == "VERIFIED"
    run[D] = run[D][:-1]
    rep, _ = both_paths(spark, tmp_path / "missing", run)
    assert rep["verdict"] == "VIOLATED" and agreement_rows(rep) == [(8, B, [D], [])]


def rejoin_run(*, c_also: list[tuple[int, str, int]] = ()) -> dict[str, list[dict]]:
    """C is cut off in view 1 after 3 messages (a partition), removed by view 2 = {A, B}, admitted
    again in view 3 = {A, B, C}; its one file goes on (``c_also``: more messages C delivered,
    ``(clock, pid, view)``)."""
    run = crash_run()
    view_3 = [(10, A), (11, C)]
    for peer in (A, B):
        run[peer] = renumber(run[peer] + [view_record(peer, 0, 9, A, 3, [A, B, C], joined=[C])]
                             + [message(peer, 0, c, p, view=3) for c, p in view_3])
    run[C] = renumber(run[C] + [message(C, 0, c, p, view=v) for c, p, v in c_also]
                      + [view_record(C, 0, 9, A, 3, [A, B, C], joined=[C])]
                      + [message(C, 0, c, p, view=3) for c, p in view_3])
    return run


def test_a_cut_off_peer_owes_its_prefix_and_everything_after_its_rejoin(spark, tmp_path):
    """The partition rule (docs/output-format.md): the prefix of the view it was cut off in, nothing
    of the views it was not in, everything from its rejoin; the report names it, on both paths."""
    rep, exact = both_paths(spark, tmp_path, rejoin_run())
    assert rep["verdict"] == exact["verdict"] == "VERIFIED" and rep["fast_path"] == "conclusive"
    assert rep["rejoins"] == exact["rejoins"] == [
        {"peer": C, "last_view": 1, "removed_by": 2, "admitted_in": 3}]
    assert f"{C}: member until view 1 (removed by view 2), admitted again in view 3" in \
        (tmp_path / "out" / "report.html").read_text()
    # delivering a message of view 2, which it was not in while cut off: not allowed
    rep, exact = both_paths(spark, tmp_path / "between", rejoin_run(c_also=[(7, A, 2)]))
    assert rep["verdict"] == exact["verdict"] == "VIOLATED"
    assert agreement_rows(rep) == agreement_rows(exact) == [(7, A, [], [C])]


def leave_run(drop: tuple[int, str] | None = None) -> dict[str, list[dict]]:
    """View 1 = {A, B, C}; C leaves: view 2 = {A, B} lists it in ``left``; C's last record is view 2."""
    run = {}
    for peer in (A, B, C):
        recs = [view_record(peer, 0, 1, A, 1, [A, B, C], joined=[A, B, C])]
        recs += [message(peer, 0, c, p) for c, p in VIEW_1 if not (peer == C and (c, p) == drop)]
        recs.append(view_record(peer, 0, 6, A, 2, [A, B], left=[C]))
        if peer != C:
            recs += [message(peer, 0, c, p, view=2) for c, p in VIEW_2]
        run[peer] = renumber(recs)
    return run


def test_leaver_owes_all_of_its_last_view(spark, tmp_path):
    """(d) C left at view 2: it must hold all of view 1."""
    rep, exact = both_paths(spark, tmp_path, leave_run())
    assert rep["verdict"] == exact["verdict"] == "VERIFIED"
    rep, exact = both_paths(spark, tmp_path / "missing", leave_run(drop=(4, A)))
    assert rep["verdict"] == "VIOLATED"
    assert agreement_rows(rep) == agreement_rows(exact) == [(4, A, [C], [])]


def test_expected_recipients_of_a_crash(records):
    """The exact rule on the event table: C owes view 1 up to its last delivery, (3, C)."""
    recs = records(crash_run())
    msgs = checks.event_table(recs)
    got = {(r.clock, r.pid): (r.expected, r.allowed) for r in
           checks.expected_recipients(msgs, checks.view_members(recs), [A, B, C]).collect()
           if r.kind == "message"}
    assert got[(2, B)] == ([A, B, C], [A, B, C]) and got[(3, C)] == ([A, B, C], [A, B, C])
    assert got[(4, A)] == ([A, B], [A, B, C]) and got[(7, A)] == ([A, B], [A, B])
    (point,) = checks.crash_points(msgs, checks.view_members(recs)).collect()
    assert (point.view, point.peer, tuple(point["last"])) == (1, C, (3, "127.0.0.1", 5002))


def test_static_group_expects_everyone(records):
    """No view record at all: every peer that wrote a file must deliver every message."""
    run = {p: [message(p, i + 1, c, q) for i, (c, q) in enumerate(VIEW_1)] for p in (A, B, C)}
    run[C] = run[C][:CRASH_AFTER]
    recs = records(run)
    msgs = checks.event_table(recs)
    agree = checks.agreement(checks.expected_recipients(msgs, checks.view_members(recs), [A, B, C]))
    assert sorted((r.clock, r.pid, r.missing) for r in agree.collect()) == [(4, A, [C]), (5, B, [C])]


# --------------------------------------------------------------------------- real peers

@pytest.mark.e2e
def test_chaos_run_of_real_peers_verifies(spark, tmp_path):
    """Real peers under the launch script's chaos mode: one killed (removed), one late joiner, one
    leaver. The verifier must accept the files as they are, on both paths."""
    ports = free_ports(5)
    nb = tmp_path / "nb.txt"
    nb.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
    cmd = [sys.executable, "-m", "tom.tools.launch", str(nb), "--messages", "150", "--rate", "40",
           "--delay", "0.01", "--runs", str(tmp_path / "runs"), "--deadline", "90",
           "--kill", str(ports[2]), "--join-late", str(ports[4]), "--leave", str(ports[3]), "--no-verify"]
    launched = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=REPO,
                              stdin=subprocess.DEVNULL)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]  # and runs/latest
    files = sorted(str(p) for p in run_dir.glob("out-*.jsonl"))
    assert len(files) == 5
    views = [json.loads(line) for f in files for line in Path(f).read_text().splitlines()
             if '"kind":"view"' in line]
    assert any(f"127.0.0.1:{ports[2]}" in v["removed"] for v in views)  # the crash rule is exercised

    code = verify.main([*files, "--report-dir", str(tmp_path / "out")])
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (code, rep["verdict"]) == (0, "VERIFIED"), rep["checks"]
    exact = verify.Report([])
    verify._verify_exact(spark, [f"file:{f}" for f in files], 5, exact, lambda name: None)
    exact = exact.as_json()
    assert exact["verdict"] == "VERIFIED", exact["checks"]["agreement"]


@pytest.mark.e2e
def test_a_peer_restarted_on_its_output_file_verifies(spark, tmp_path):
    """A real peer SIGKILLed and started again on the same port and output file (a new incarnation):
    its file goes on after the old records, and the run verifies, the peer named as removed and
    admitted again."""
    with PeerProcs(tmp_path, 3, secure=False) as group:
        group.send(0, [f"a{i}" for i in range(10)])
        group.wait_delivered(10)
        group.restart(2)
        restarted = f"127.0.0.1:{group.ports[2]}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # admitted again: a view with it that removed its old self
            views = [r for r in group.records(0) if r["kind"] == "view"]
            if any(restarted in v["removed"] for v in views) and restarted in views[-1]["members"]:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(group.log_text())
        group.send(2, [f"c{i}" for i in range(5)])
        group.send(1, [f"b{i}" for i in range(5)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                {"c4", "b4"} <= {r.get("text") for r in group.records(i)} for i in range(3)):
            time.sleep(0.2)
        assert group.terminate() == [0, 0, 0], group.log_text()
    assert "going on after record" in group.logs[2].read_text()
    recs = group.records(2)
    assert [r["index"] for r in recs] == list(range(1, len(recs) + 1))
    files = [str(f) for f in group.outputs]
    code = verify.main([*files, "--report-dir", str(tmp_path / "out")])
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (code, rep["verdict"]) == (0, "VERIFIED"), rep.get("checks")
    assert restarted in {r["peer"] for r in rep["rejoins"]}, rep["rejoins"]

