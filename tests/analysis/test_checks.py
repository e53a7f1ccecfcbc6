"""Each check on tiny inline runs: silent on a correct run, and catching the fault it names."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import checks
from tests.analysis.conftest import PEERS, message, run_of, view_record

pytestmark = pytest.mark.spark
A, B, C = PEERS
EVENTS = [(1, A), (1, B), (2, A), (2, C), (3, B), (4, A)]


def renumber(recs: list[dict]) -> list[dict]:
    return [dict(r, index=i + 1) for i, r in enumerate(recs)]


def swapped(recs: list[dict], i: int, j: int) -> list[dict]:
    out = list(recs)
    out[i], out[j] = out[j], out[i]
    return renumber(out)


def test_pid_order_compares_ports_as_integers(records):
    """(3, host:5001) < (3, host:10000): a peer delivering them in that order is in order."""
    hi = "127.0.0.1:10000"
    run = {A: [message(A, 1, 3, "127.0.0.1:5001"), message(A, 2, 3, hi)]}
    assert checks.order_violations(records(run)).count() == 0
    run = {A: [message(A, 1, 3, hi), message(A, 2, 3, "127.0.0.1:5001")]}
    assert checks.order_violations(records(run)).count() == 1


def test_correct_run_has_no_violation(records):
    recs = records(run_of(EVENTS))
    msgs = checks.event_table(recs)
    expected = checks.expected_recipients(msgs, checks.view_members(recs), list(PEERS))
    for frame in (checks.duplicates(msgs), checks.conflicting_copies(msgs),
                  checks.order_violations(recs), checks.fifo_reorders(recs),
                  checks.agreement(expected), checks.divergences_by_rank(msgs),
                  checks.divergences_by_index(msgs)):
        assert frame.count() == 0


def test_duplicate_is_caught(spark, records):
    run = run_of(EVENTS)
    run[B] = renumber(run[B][:3] + [run[B][1]] + run[B][3:])
    msgs = checks.event_table(records(run))
    expected = spark.createDataFrame([(B, 1, B, 2, 4)],
                                     "peer string, clock long, pid string, index long, again_index long")
    assertDataFrameEqual(checks.duplicates(msgs), expected)


def test_swap_is_caught_by_order_check(spark, records):
    run = run_of(EVENTS)
    run[C] = swapped(run[C], 2, 3)
    got = checks.order_violations(records(run))
    expected = spark.createDataFrame(
        [(C, 4, 2, A, 3, 2, C, "not after previous (clock, pid)")],
        "peer string, index long, clock long, pid string, prev_index long, prev_clock long, "
        "prev_pid string, problem string")
    assertDataFrameEqual(got, expected)


def test_dropped_record_is_caught_as_index_gap_and_missing(records):
    run = run_of(EVENTS)
    del run[A][2]  # keeps the original indexes: 1, 2, 4, ...
    recs = records(run)
    assert [r.problem for r in checks.order_violations(recs).collect()] == ["index gap"]
    msgs = checks.event_table(recs)
    agree = checks.agreement(checks.expected_recipients(msgs, checks.view_members(recs), list(PEERS)))
    rows = agree.collect()
    assert [(r.clock, r.pid, r.missing, r.unexpected) for r in rows] == [(2, A, [A], [])]


def test_fifo_reorder_of_one_origin_is_caught(spark, records):
    run = run_of(EVENTS)
    run[B] = swapped(run[B], 0, 2)  # A's clock 2 before A's clock 1 at B
    got = checks.fifo_reorders(records(run))
    expected = spark.createDataFrame([(B, A, 3, 1, 1, 2)],
                                     "peer string, origin string, index long, clock long, "
                                     "prev_index long, prev_clock long")
    assertDataFrameEqual(got, expected)


def test_fifo_gap_is_named(spark, records):
    events = [(1, A), (2, A), (3, A), (4, A), (5, B)]
    run = run_of(events)
    run[C] = renumber([r for r in run[C] if (r["clock"], r["pid"]) not in {(2, A), (3, A)}])
    recs = records(run)
    msgs = checks.event_table(recs)
    agree = checks.agreement(checks.expected_recipients(msgs, checks.view_members(recs), list(PEERS)))
    got = checks.fifo_gaps(recs, checks.missing_deliveries(agree))
    expected = spark.createDataFrame(
        [(C, A, 1, 4, 2, [2, 3])],
        "peer string, origin string, after_clock long, before_clock long, missing long, "
        "missing_clocks array<long>")
    assertDataFrameEqual(got, expected)


def test_missing_at_the_end_is_not_a_gap(records):
    run = run_of(EVENTS)
    run[C] = run[C][:-1]
    recs = records(run)
    msgs = checks.event_table(recs)
    agree = checks.agreement(checks.expected_recipients(msgs, checks.view_members(recs), list(PEERS)))
    assert agree.count() == 1
    assert checks.fifo_gaps(recs, checks.missing_deliveries(agree)).count() == 0


def test_dynamic_group_expects_view_members_only(records):
    """C joins in view 2: it need not deliver view-1 messages, but must deliver view-2 ones."""
    run = {}
    for peer in (A, B):
        run[peer] = renumber([view_record(peer, 0, 0, A, 1, [A, B]),
                              message(peer, 0, 1, A, view=1),
                              view_record(peer, 0, 2, B, 2, [A, B, C]),
                              message(peer, 0, 3, B, view=2), message(peer, 0, 4, A, view=2)])
    run[C] = [view_record(C, 1, 2, B, 2, [A, B, C]), message(C, 2, 3, B, view=2)]
    recs = records(run)
    msgs = checks.event_table(recs)
    views = checks.view_members(recs)
    agree = checks.agreement(checks.expected_recipients(msgs, views, [A, B, C]))
    assert [(r.clock, r.pid, r.missing) for r in agree.collect()] == [(4, A, [C])]


def test_view_conflict_is_seen(records):
    run = {A: [view_record(A, 1, 1, A, 2, [A, B])], B: [view_record(B, 1, 1, A, 2, [A, B, C])]}
    assert [r.variants for r in checks.view_members(records(run)).collect()] == [2]


def test_conflicting_copies_are_caught(records):
    run = run_of(EVENTS)
    run[C][4] = dict(run[C][4], text="tampered")
    got = checks.conflicting_copies(checks.event_table(records(run))).collect()
    assert [(r.clock, r.pid, r.differs) for r in got] == [(3, B, ["text"])]


def first_divergence(seq_a: list, seq_b: list) -> tuple[int, object, object] | None:
    """Reference: first (1-based) position where the common subsequences differ."""
    common = set(seq_a) & set(seq_b)
    ca, cb = [x for x in seq_a if x in common], [x for x in seq_b if x in common]
    return next(((i + 1, x, y) for i, (x, y) in enumerate(zip(ca, cb)) if x != y), None)


def test_first_divergence_after_a_swap(records):
    run = run_of(EVENTS)
    run[C] = swapped(run[C], 3, 4)
    msgs = checks.event_table(records(run))
    for frame in (checks.divergences_by_index(msgs), checks.divergences_by_rank(msgs)):
        rows = sorted(frame.collect(), key=lambda r: (r.peer_a, r.peer_b))
        assert [(r.peer_a, r.peer_b, r.position) for r in rows] == [(A, C, 4), (B, C, 4)]
        r = rows[0]
        assert (r.at_a.clock, r.at_a.pid, r.at_a["index"]) == (2, C, 4)
        assert (r.at_b.clock, r.at_b.pid, r.at_b["index"]) == (3, B, 4)


def test_divergence_ranks_among_common_messages_only(records):
    """A lacks (1, B) so indexes are shifted; only the genuine swap at C is a divergence."""
    run = run_of(EVENTS)
    run[A] = renumber([r for r in run[A] if (r["clock"], r["pid"]) != (1, B)])
    run[C] = swapped(run[C], 4, 5)
    rows = sorted(checks.divergences_by_rank(checks.event_table(records(run))).collect(),
                  key=lambda r: (r.peer_a, r.peer_b))
    got = [(r.peer_a, r.peer_b, r.position, r.at_a["index"], r.at_b["index"]) for r in rows]
    assert got == [(A, C, 4, 4, 5), (B, C, 5, 5, 5)]
    seq = {p: [(r["clock"], r["pid"]) for r in run[p]] for p in PEERS}
    assert first_divergence(seq[A], seq[C])[0] == 4


def test_latency_summary_per_peer_and_overall(records):
    run = {A: [message(A, 1, 1, A, delay=0.001), message(A, 2, 2, A, delay=0.003)],
           B: [message(B, 1, 1, A, delay=0.010), message(B, 2, 2, A, delay=0.010)]}
    rows = {r.peer: r for r in checks.latency_summary(checks.latencies(records(run))).collect()}
    assert rows[A]["count"] == 2 and rows[A]["max"] == pytest.approx(0.003, abs=1e-6)
    assert rows[None]["count"] == 4 and rows[None]["max"] == pytest.approx(0.010, abs=1e-6)
    hist = checks.latency_histogram(checks.latencies(records(run)), 0.0, 0.008, 4).collect()
    assert sorted((r.bin, r["count"]) for r in hist) == [(0, 1), (1, 1), (4, 2)]
