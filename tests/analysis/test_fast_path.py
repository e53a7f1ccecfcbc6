"""The one-pass fast path: silent on a healthy run, and every fault makes it hand over."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from pyspark.sql import DataFrame

from analysis import checks, latency, schema
from analysis.facts import SummaryFacts, diagram
from tests.analysis import fold_oracle
from tests.analysis.conftest import PEERS, message, run_of, view_record

pytestmark = pytest.mark.spark
A, B, C = PEERS
EVENTS = [(1, A), (1, B), (2, A), (2, C), (3, B), (4, A)]


def renumber(recs: list[dict]) -> list[dict]:
    return [dict(r, index=i + 1) for i, r in enumerate(recs)]


def write_case(folder, run: dict[str, list[dict]], tails: dict[str, str] | None = None) -> list[str]:
    """One file per key of ``run`` (a peer, or a peer plus a suffix for a second file; a record
    given as a string is written as it is), each followed by its raw tail if any; the files'
    ``file:`` names."""
    folder.mkdir()
    for key, recs in run.items():
        text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in recs) \
            + (tails or {}).get(key, "")
        (folder / f"{key.replace(':', '_')}.jsonl").write_text(text)
    return [f"file:{p}" for p in sorted(folder.glob("*.jsonl"))]


@dataclass
class Summary:
    """A run's :func:`checks.run_summary` and :func:`checks.first_bad_rows` (of one read)."""

    rows: DataFrame
    bad: DataFrame


@pytest.fixture
def summarize(spark, tmp_path):
    """Write a run keyed by peer (plus optional raw tails) and return its :class:`Summary`
    (``files`` of the last one written are kept in ``build.files``)."""
    counter = iter(range(1_000_000))

    def build(run: dict[str, list[dict]], tails: dict[str, str] | None = None) -> Summary:
        build.files = write_case(tmp_path / f"run{next(counter)}", run, tails)
        narrow = schema.narrow_records(schema.read_records(spark, build.files)).cache()
        return Summary(checks.run_summary(narrow).cache(), checks.first_bad_rows(narrow, 5))

    return build


def facts_of(summary: Summary, bad_kept: int = 5) -> SummaryFacts:
    return SummaryFacts.of((r.asDict(recursive=True) for r in summary.rows.collect()),
                           bad_kept=bad_kept, bad=(r.asDict() for r in summary.bad.collect()))


def verdict(summary, peers=PEERS) -> dict:
    """What the fast path concludes: per-peer order faults and fingerprint mismatches."""
    facts = facts_of(summary)
    rows = {r["peer"]: r for r in facts.peers()}
    mismatches = fingerprint_mismatches(facts, list(peers))
    return {"disorder": {p: r["disorder"] for p, r in rows.items() if r["disorder"]},
            "index_faults": {p: r["index_faults"] for p, r in rows.items() if r["index_faults"]},
            "mismatched_views": [r["view"] for r in mismatches]}


def fingerprint_mismatches(facts, peers: list[str]) -> list[dict]:
    from analysis import facts as module
    return module.fingerprint_mismatches(facts.view_fingerprints(), facts.view_members(), peers)


HEALTHY = {"disorder": {}, "index_faults": {}, "mismatched_views": []}


def test_healthy_run_passes(summarize):
    s = summarize(run_of(EVENTS))
    assert verdict(s) == HEALTHY
    picture = diagram(facts_of(s).early(), 40)
    assert [(m["clock"], m["pid"]) for m in picture] == EVENTS
    assert all(len(m["deliveries"]) == 3 for m in picture)


def test_swap_is_disorder(summarize):
    run = run_of(EVENTS)
    run[C] = renumber([run[C][0], run[C][1], run[C][3], run[C][2]] + run[C][4:])
    assert verdict(summarize(run))["disorder"] == {C: 1}


def test_drop_is_index_fault_and_mismatch(summarize):
    run = run_of(EVENTS)
    del run[A][2]
    got = verdict(summarize(run))
    assert got["index_faults"] == {A: 1} and got["mismatched_views"] == [1]


def test_duplicate_is_disorder(summarize):
    run = run_of(EVENTS)
    run[B] = renumber(run[B][:3] + [run[B][1]] + run[B][3:])
    got = verdict(summarize(run))
    assert got["disorder"] == {B: 1} and got["mismatched_views"] == [1]


def test_reorder_of_one_origin_is_disorder(summarize):
    run = run_of(EVENTS)
    run[B] = renumber([run[B][2], run[B][1], run[B][0]] + run[B][3:])
    assert B in verdict(summarize(run))["disorder"]


def test_tampered_copy_is_a_fingerprint_mismatch(summarize):
    run = run_of(EVENTS)
    run[C][4] = dict(run[C][4], text="tampered")
    assert verdict(summarize(run)) == dict(HEALTHY, mismatched_views=[1])


def test_torn_last_line_is_kept_and_harmless(summarize):
    s = summarize(run_of(EVENTS), tails={C: '{"v":1,"kind":"mess'})
    assert verdict(s) == HEALTHY
    facts = facts_of(s)
    (bad,) = facts.bad_rows()
    assert bad["problem"] == "not valid JSON (torn or corrupt line)" and bad["file"].endswith("5002.jsonl")
    summaries, offsets = schema.file_summaries(facts.blocks(), [])
    assert [f.torn_last_line for f in summaries] == [False, False, True]
    assert schema.line_number(offsets, bad["file"], bad["block_start"], bad["row"]) == len(EVENTS) + 1


def test_wrong_typed_field_is_a_bad_line(summarize):
    run = run_of(EVENTS)
    wrong = json.dumps(dict(run[A][-1], index=len(EVENTS) + 1, clock="7"))
    s = summarize(run, tails={A: wrong + "\n"})
    (bad,) = facts_of(s).bad_rows()
    assert bad["problem"] == "missing or ill-typed: clock" and '"clock": "7"' in bad["excerpt"]


def test_dynamic_group_checks_view_members_only(summarize):
    """C joins in view 2: it need not hold view-1 messages; view 2 must be held by A, B and C."""
    run = {}
    for peer in (A, B):
        run[peer] = renumber([view_record(peer, 0, 0, A, 1, [A, B]), message(peer, 0, 1, A, view=1),
                              view_record(peer, 0, 2, B, 2, [A, B, C]), message(peer, 0, 3, B, view=2)])
    run[C] = [view_record(C, 1, 2, B, 2, [A, B, C]), message(C, 2, 3, B, view=2)]
    s = summarize(run)
    assert verdict(s)["mismatched_views"] == []
    run[C] = run[C][:1]
    assert verdict(summarize(run))["mismatched_views"] == [2]


def test_quantiles_from_bins():
    assert latency.quantiles([(1.0, 50), (2.0, 45), (3.0, 5)], (0.5, 0.95, 0.99)) == [1.0, 2.0, 3.0]
    assert latency.quantiles([], (0.5,)) == [None]
    assert checks.bin_value(0) == 0.0
    for x in (0.0031, 2.5, -0.004):
        assert checks.bin_value(checks.latency_bin_py(x)) == pytest.approx(x, rel=0.006)


# --------------------------------------------------------------------------- the pipeline == the oracle

def _cases() -> dict[str, tuple[dict, dict | None]]:
    from tests.analysis.test_dynamic_groups import CRASH_AFTER, VIEW_1, crash_run
    from tests.analysis.test_handout import CLASS, handout_record

    swap, drop, dup, tampered = (run_of(EVENTS) for _ in range(4))
    swap[C] = renumber([swap[C][0], swap[C][1], swap[C][3], swap[C][2]] + swap[C][4:])
    del drop[A][2]
    dup[B] = renumber(dup[B][:3] + [dup[B][1]] + dup[B][3:])
    tampered[C][4] = dict(tampered[C][4], text="tampered")
    join = {}
    for peer in (A, B):
        join[peer] = renumber([view_record(peer, 0, 0, A, 1, [A, B]), message(peer, 0, 1, A, view=1),
                               view_record(peer, 0, 2, B, 2, [A, B, C]), message(peer, 0, 3, B, view=2)])
    join[C] = [view_record(C, 1, 2, B, 2, [A, B, C]), message(C, 2, 3, B, view=2)]
    conflict = {p: list(r) for p, r in join.items()}
    conflict[C] = [view_record(C, 1, 2, B, 2, [A, C]), message(C, 2, 3, B, view=2)]
    split = run_of(EVENTS)  # A's records in two files: its order runs across them
    split[A + "-part2"] = split[A][3:]
    split[A] = split[A][:3]
    gap = run_of(EVENTS)  # the same messages everywhere, one index skipped: only an index fault
    gap[B] = [dict(r, index=r["index"] + (r["index"] > 2)) for r in gap[B]]
    hosts = [(1, "127.0.0.1:6000"), (1, "127.0.0.2:5000"), (1, "127.0.0.2:5001"), (2, "10.0.0.9:1")]
    by_host = run_of(hosts)  # equal clocks ordered by host byte-wise, then by port as a number
    host_swap = run_of(hosts)
    host_swap[C] = renumber([host_swap[C][1], host_swap[C][0]] + host_swap[C][2:])
    bad_inside = run_of(EVENTS)  # a bad line between two good records of B
    bad_inside[B] = bad_inside[B][:2] + ['{"v": 1, "kind": "message", "index": "x"}'] + bad_inside[B][2:]
    return {
        "healthy": (run_of(EVENTS), None), "swap": (swap, None), "drop": (drop, None),
        "duplicate": (dup, None), "tampered": (tampered, None),
        "torn": (run_of(EVENTS), {C: '{"v":1,"kind":"mess', A: "not json\n\n"}),
        "join": (join, None), "view_conflict": (conflict, None),
        "crash": (crash_run(), None),
        "crash_not_prefix": (crash_run(c_holds=[VIEW_1[0], VIEW_1[2]]), None),
        "crash_extra": (crash_run(c_holds=VIEW_1[:CRASH_AFTER - 1] + [(9, C)]), None),
        "mixed_orders": (dict(run_of(EVENTS), **{C: [dict(r, v=2, seq=r["index"])
                                                    for r in run_of(EVENTS)[C]]}), None),
        "split_files": (split, None), "index_gap": (gap, None),
        "equal_clocks": (by_host, None), "equal_clocks_swapped": (host_swap, None),
        "bad_line_inside": (bad_inside, None),
        "handout_wire": ({p: [handout_record(p, i + 1, c, o, t) for i, (c, o, t) in enumerate(CLASS)]
                          for p in PEERS}, None),  # no sent_at: messages without a latency
    }


def _canon(rows: list[dict]) -> list[dict]:
    """Rows in a fixed order, float sums rounded (Spark adds them in another order)."""
    def fix(v):
        return round(v, 9) if isinstance(v, float) else v
    return sorted(({k: fix(v) for k, v in r.items()} for r in rows), key=lambda r: repr(sorted(r.items())))


@pytest.mark.parametrize("case", list(_cases()))
def test_the_summary_and_its_facts_equal_the_oracles(spark, summarize, case):
    """Every fact the pipeline folds from the run summary computed in Spark (and its first bad rows)
    equals the oracle's, folded from its own summary computed in Python from the narrow rows
    (tests/analysis/fold_oracle.py)."""
    run, tails = _cases()[case]
    s = summarize(run, tails)
    narrow = schema.narrow_records(schema.read_records(spark, summarize.files))
    oracle = fold_oracle.SummaryFold(fold_oracle.run_summary(fold_oracle.narrow_rows(narrow), bad_kept=5))
    facts = facts_of(s, bad_kept=3)
    peers = sorted(p["peer"] for p in oracle.peers())
    assert _canon(facts.blocks()) == _canon(oracle.blocks())
    assert facts.bad_rows() == oracle.bad_rows(3)
    assert _canon(facts.peers()) == _canon(oracle.peers())
    assert _canon(facts.latency_bins()) == _canon(oracle.latency_bins())
    assert facts.view_members() == oracle.view_members()
    assert _canon(facts.early()) == _canon(oracle.early())
    assert facts.claims() == oracle.claims()
    assert {p: sorted(f) for p, f in facts.files_of_peers().items()} == \
        {p: sorted(f) for p, f in oracle.files_of_peers().items()}
    got, want = facts.messages_and_faults(peers), oracle.messages_and_faults(peers)
    assert got[:2] == want[:2] and _canon(got[2]) == _canon(want[2])


def _rounded(value):
    """A result with its floats rounded: sums of latencies are added in another order by Spark."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("case", ["torn", "crash", "crash_not_prefix", "split_files", "bad_line_inside"])
def test_the_one_pass_in_one_task_equals_the_one_pass_in_stages(spark, tmp_path, monkeypatch, case):
    """A small input's summary runs in one task (no exchange); a larger one's in stages: the one
    pass's outcome and result are the same either way, and its verdict is the exact path's."""
    from analysis import verify

    run, tails = _cases()[case]
    files = write_case(tmp_path / "run", run, tails)

    def fast(**settings) -> tuple[bool, dict]:
        with monkeypatch.context() as patched:
            for name, value in settings.items():
                patched.setattr(verify, name, value)
            result = verify.Report([])
            settled = verify._verify_fast(spark, files, verify.FIRST_ROWS, result, lambda name: None)
            return settled, result.as_json()

    small = fast()
    staged = fast(SMALL_INPUT_BYTES=-1)
    assert _rounded(small) == _rounded(staged)
    assert small[1].pop("order_check").startswith(
        "window (a peer's records in several" if case == "split_files" else "in the scan")
    exact = verify.Report([])
    verify._verify_exact(spark, files, verify.FIRST_ROWS, exact, lambda name: None)
    exact = exact.as_json()
    settled, result = small
    assert (result if settled else exact)["verdict"] == exact["verdict"]  # what verify() answers


def test_no_input_row_meets_an_object_aggregate_and_each_lag_is_computed_once(summarize):
    """The summary's plan (what a 10M-row run pays per row): the rows coming out of the order
    window are aggregated by generated code (a plain ``HashAggregate``), and by nothing else (no
    object aggregate, no second exchange); the window computes three ``lag``s."""
    s = summarize(run_of(EVENTS), {A: '{"torn'})
    plan = s.rows._jdf.queryExecution().executedPlan().toString()
    lines = plan.splitlines()
    window = next(i for i, line in enumerate(lines) if "Window [" in line)
    above = [line.strip(" +-:") for line in lines[:window]]
    nearest_aggregate = next(line for line in reversed(above) if "Aggregate(" in line)
    assert nearest_aggregate.startswith("HashAggregate("), nearest_aggregate
    assert "ObjectHashAggregate" not in plan and plan.count("Exchange") == 2, plan  # window, aggregate
    assert lines[window].count("lag(") == 3
