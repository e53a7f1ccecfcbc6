"""The job end to end through ``main(argv)``: exit status and report contents."""

from __future__ import annotations

import json

import pytest

from analysis import verify
from tests.analysis.conftest import PEERS, run_of

pytestmark = pytest.mark.spark
A, B, C = PEERS
EVENTS = [(1, A), (1, B), (2, A), (2, C), (3, B), (4, A), (5, C)]


def write_run(folder, run: dict[str, list[dict]], torn: dict[str, str] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for peer, recs in run.items():
        text = "".join(json.dumps(r) + "\n" for r in recs) + (torn or {}).get(peer, "")
        (folder / f"{peer.replace(':', '_')}.jsonl").write_text(text)


def report(folder) -> dict:
    return json.loads((folder / "report.json").read_text())


def test_correct_run_verifies(spark, tmp_path, capsys):
    write_run(tmp_path / "run", run_of(EVENTS))
    code = verify.main([str(tmp_path / "run"), "--report-dir", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0] == "VERIFIED (lamport order)"
    rep = report(tmp_path / "out")
    assert rep["verdict"] == "VERIFIED" and rep["counts"]["messages"] == len(EVENTS)
    assert all(c["count"] == 0 for c in rep["checks"].values())
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<svg" in html and "VERIFIED" in html


def test_swapped_records_are_a_violation_with_first_divergence(spark, tmp_path):
    run = run_of(EVENTS)
    recs = list(run[B])
    recs[2], recs[3] = recs[3], recs[2]
    run[B] = [dict(r, index=i + 1) for i, r in enumerate(recs)]
    write_run(tmp_path / "run", run)
    code = verify.main([str(tmp_path / "run" / "*.jsonl"), "--report-dir", str(tmp_path / "out")])
    assert code == 1
    rep = report(tmp_path / "out")
    assert rep["verdict"] == "VIOLATED"
    div = rep["checks"]["divergence"]
    assert div["count"] == 2
    first = div["first"][0]
    assert (first["peer_a"], first["peer_b"], first["position"]) == (A, B, 3)
    assert (first["at_a"]["clock"], first["at_a"]["pid"], first["at_b"]["clock"]) == (2, A, 2)
    assert rep["checks"]["order"]["count"] == 1
    html = (tmp_path / "out" / "report.html").read_text()  # the picture rings the two deliveries that differ
    assert html.count('class="divergence"') == 2 and "first divergence, position 3" in html


def test_torn_last_line_is_reported_not_fatal(spark, tmp_path):
    write_run(tmp_path / "run", run_of(EVENTS), torn={C: '{"v":1,"kind":"mess'})
    code = verify.main([str(tmp_path / "run"), "--report-dir", str(tmp_path / "out")])
    rep = report(tmp_path / "out")
    assert code == 0
    assert rep["bad_lines"]["count"] == 1
    (bad,) = rep["bad_lines"]["first"]
    assert bad["file"].endswith("127.0.0.1_5002.jsonl") and bad["line"] == len(EVENTS) + 1
    torn = [f for f in rep["file_summaries"] if f["torn_last_line"]]
    assert len(torn) == 1


def test_dropped_message_is_a_violation(spark, tmp_path):
    run = run_of(EVENTS)
    run[B] = [r for r in run[B] if r["index"] != 3]  # (2, A), between A's clocks 1 and 4
    write_run(tmp_path / "run", run)
    assert verify.main([str(tmp_path / "run"), "--report-dir", str(tmp_path / "out")]) == 1
    rep = report(tmp_path / "out")
    assert rep["checks"]["agreement"]["first"][0]["missing"] == [B]
    (gap,) = rep["checks"]["fifo_gaps"]["first"]
    assert (gap["peer"], gap["origin"], gap["after_clock"], gap["before_clock"]) == (B, A, 1, 4)
    assert rep["checks"]["order"]["first"][0]["problem"] == "index gap"


@pytest.mark.parametrize("content", [None, "", "not json\n"])
def test_unusable_input_exits_2(spark, tmp_path, content):
    target = tmp_path / "run" / "a.jsonl"
    if content is not None:
        target.parent.mkdir()
        target.write_text(content)
    code = verify.main([str(target), "--report-dir", str(tmp_path / "out")])
    assert code == 2
    if content is None:  # a missing local path is refused before Spark starts: no report is written
        assert not (tmp_path / "out").exists()
    else:
        assert report(tmp_path / "out")["verdict"] == "UNUSABLE INPUT"


def test_missing_java_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("analysis.session.java_available", lambda: False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    code = verify.main([str(tmp_path), "--report-dir", str(tmp_path / "out")])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 2
    assert len(out) == 1 and "Java 17+" in out[0] and "'.[verify]'" in out[0]


def test_default_report_dir_is_next_to_inputs(tmp_path):
    (tmp_path / "run").mkdir()
    assert verify.default_report_dir(str(tmp_path / "run")) == tmp_path / "run" / "tom-verify"
    assert verify.default_report_dir(str(tmp_path / "run" / "*.jsonl")) == tmp_path / "run" / "tom-verify"
    assert verify.default_report_dir("hdfs://nn/x/*.jsonl").name == "tom-verify"


@pytest.mark.parametrize("fault", ["duplicate", "fifo_reorder", "tampered"])
def test_fast_path_hands_faults_to_the_exact_checks(spark, tmp_path, fault):
    run = run_of(EVENTS)
    recs = list(run[C])
    if fault == "duplicate":
        recs = recs[:3] + [recs[1]] + recs[3:]
    elif fault == "fifo_reorder":
        recs[0], recs[2] = recs[2], recs[0]  # A's clock 2 before A's clock 1
    else:
        recs[4] = dict(recs[4], text="tampered")
    run[C] = [dict(r, index=i + 1) for i, r in enumerate(recs)]
    write_run(tmp_path / "run", run)
    assert verify.main([str(tmp_path / "run"), "--report-dir", str(tmp_path / "out")]) == 1
    rep = report(tmp_path / "out")
    assert rep["fast_path"].startswith("not conclusive")
    name = {"duplicate": "duplicates", "fifo_reorder": "fifo_reorders", "tampered": "conflicting_copies"}
    assert rep["checks"][name[fault]]["count"] >= 1


def test_healthy_run_is_settled_by_the_fast_path(spark, tmp_path):
    write_run(tmp_path / "run", run_of(EVENTS), torn={A: '{"v":1,"ki'})
    assert verify.main([str(tmp_path / "run"), "--report-dir", str(tmp_path / "out")]) == 0
    rep = report(tmp_path / "out")
    assert rep["fast_path"] == "conclusive" and rep["counts"]["messages"] == len(EVENTS)
    assert rep["latency"]["overall"]["count"] == 3 * len(EVENTS)
    assert [(m["clock"], m["pid"]) for m in rep["diagram"]] == EVENTS


def test_a_folder_with_a_space_is_reported_by_its_own_name(spark, tmp_path):
    """Spark names input files URI-encoded (``a%20b``): the report uses the names the input has."""
    folder = tmp_path / "my run"
    write_run(folder, run_of(EVENTS), torn={C: '{"v":1,"kind":"mess'})
    assert verify.main([str(folder), "--report-dir", str(tmp_path / "out")]) == 0
    rep = report(tmp_path / "out")
    assert sorted(f["path"] for f in rep["file_summaries"]) == sorted(
        str(p) for p in folder.glob("*.jsonl"))
    assert all(f["lines"] > 0 for f in rep["file_summaries"])
    assert rep["bad_lines"]["first"][0]["file"].startswith(str(folder) + "/")


def test_a_column_costs_a_few_jvm_round_trips(spark):
    """With PySpark's DataFrame debugging on (its default), every column function sends its Python
    call site to the JVM: ~13 py4j round trips for one ``F.col`` instead of 3-4. The verifier's sessions turn it off
    (:data:`analysis.session.NO_CALL_SITES`); its plans are built of hundreds of columns. (py4j's
    releases of collected proxies are not counted: fresh run 66 counted 76, a collector's pass.)"""
    from py4j_calls import round_trips
    from pyspark.sql import functions as F

    with round_trips(spark.sparkContext._jvm) as sent:
        F.when(F.col("a") == 1, F.lit(2))
    assert len(sent) <= 20, f"{len(sent)} round trips for one when(col == 1, lit)"
