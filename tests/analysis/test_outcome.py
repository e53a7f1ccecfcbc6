"""The typed report and its parts give report.json's keys, and refuse what no report can hold."""

from __future__ import annotations

import pytest

from analysis.outcome import Check, Counts, Latency, PeerLatency, Proof, Report, Verdict, checks_json


def test_a_check_gives_its_keys_and_its_figures():
    assert Check(2, [{"peer": "a"}, {"peer": "b"}]).as_json() == {
        "count": 2, "first": [{"peer": "a"}, {"peer": "b"}]}
    assert Check.settled("implied", pairs=3, compared=0).as_json() == {
        "count": 0, "first": [], "note": "implied", "pairs": 3, "compared": 0}
    assert Check(1, [{}], figures={"missing_deliveries": 4}).noted("why").as_json() == {
        "count": 1, "first": [{}], "missing_deliveries": 4, "note": "why"}


@pytest.mark.parametrize(("count", "first"), [(0, [{"peer": "a"}]), (-1, [])])
def test_a_check_refuses_rows_it_does_not_count(count, first):
    with pytest.raises(ValueError):
        Check(count, first)


def test_the_verdict_is_violated_by_any_finding_and_carries_its_exit_status():
    assert Verdict.of({"order": Check.settled("x"), "agreement": Check(0)}) is Verdict.VERIFIED
    assert Verdict.of({"order": Check.settled("x"), "agreement": Check(1, [{}])}) is Verdict.VIOLATED
    assert [v.exit_code for v in Verdict] == [0, 1, 2]
    assert checks_json({"order": Check(0)}) == {"order": {"count": 0, "first": []}}


def test_counts_and_latency_give_the_report_keys():
    assert Counts(records=8, peers=2, events=4, messages=3, views=1).as_json() == {
        "records": 8, "peers": 2, "events": 4, "messages": 3, "views": 1}
    row = {"peer": "a", "count": 2, "min": 0.1, "mean": 0.15, "p50": 0.1, "p95": 0.2, "p99": 0.2,
           "max": 0.2}
    got = Latency(PeerLatency(**dict(row, peer=None)), [PeerLatency(**row)], 0.0, 0.25,
                  [1, 1, 0]).as_json()
    assert got == {"overall": dict(row, peer=None), "per_peer": [row],
                   "histogram": {"low": 0.0, "high": 0.25, "bins": 2, "counts": [1, 1, 0]}}
    assert Latency(None, [], 0.0, 1.0, [0, 0]).as_json()["overall"] == {}


def test_a_report_is_unusable_until_its_checks_are_in_and_gives_only_what_is_set():
    report = Report(["run/"], files=["run/a.jsonl"])
    assert report.as_json() == {"inputs": ["run/"], "problems": [], "timing": {},
                                "verdict": "UNUSABLE INPUT", "exit_code": 2, "files": ["run/a.jsonl"]}
    report.order, report.proof = "causal", Proof.ONE_PASS
    report.counts = Counts(records=8, peers=2, events=4, messages=4, views=0)
    report.settle({"order": Check.settled("in one pass"), "agreement": Check(1, [{"clock": 3}])})
    got = report.as_json()
    assert (got["verdict"], got["exit_code"], got["order"], got["proof"]) == (
        "VIOLATED", 1, "causal", "one pass")
    assert got["checks"]["agreement"] == {"count": 1, "first": [{"clock": 3}]}
    assert got["counts"]["messages"] == 4 and "latency" not in got and "skipped" not in got
    report.settle({"order": Check(0)})
    assert report.as_json()["verdict"] == "VERIFIED"
