"""Durable peers (``tom peer --data``, issue 42): a restarted peer's caught-up records, its gap
records, and the check that its one file holds the group's order from its first record to its
last, once each, but across a recorded gap (docs/design/verifier.md, "Durable files")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import checks, report, verify
from tests.analysis.conftest import message, view_record

pytestmark = pytest.mark.spark
A, B, C = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"

# view 1 = {A, B, C}; C is killed after its first 3 messages of view 1; view 2 = {A, B} removes it;
# C restarts on its data folder, catches up the rest of view 1 and all of view 2, and view 3
# admits it again.
VIEW_1 = [(2, A), (2, B), (3, C), (4, A), (5, B)]
KILLED_AFTER = 3
VIEW_2 = [(7, A), (8, B)]
VIEW_3 = [(10, A), (11, C)]
GAP_REASON = "no member still holds them"


def msg(peer: str, clock: int, pid: str, view: int, **extra) -> dict:
    return {**message(peer, 0, clock, pid, view=view), "v": 2, **extra}


def view(peer: str, clock: int, number: int, members: list[str], **extra) -> dict:
    rec = view_record(peer, 0, clock, A, number, members, joined=extra.pop("joined", ()),
                      removed=extra.pop("removed", ()))
    return {**rec, "v": 2, "order": "lamport", **extra}


def gap(peer: str, after: tuple[int, int], upto: int, reason: str = GAP_REASON) -> dict:
    return {"v": 2, "kind": "gap", "index": 0, "peer": peer, "delivered_at": 1_763_766_100.0,
            "view": upto, "after": list(after), "reason": reason}


def renumber(recs: list[dict]) -> list[dict]:
    return [dict(r, index=i + 1) for i, r in enumerate(recs)]


def group_records(peer: str, *, durable: bool = False, caught_up: bool = False) -> dict[int, list[dict]]:
    """The group's order as ``peer`` writes it, per view (its records of views 1 to 3)."""
    mark = {"durable": True} if durable else {}
    late = {"caught_up": True} if caught_up else {}
    return {
        1: [view(peer, 1, 1, [A, B, C], joined=[A, B, C], **mark)]
           + [msg(peer, c, p, 1) for c, p in VIEW_1],
        2: [view(peer, 6, 2, [A, B], removed=[C], **mark, **late)]
           + [msg(peer, c, p, 2, **late) for c, p in VIEW_2],
        3: [view(peer, 9, 3, [A, B, C], joined=[C], **mark)]
           + [msg(peer, c, p, 3) for c, p in VIEW_3],
    }


def restarted_c() -> list[dict]:
    """C's whole file: before its kill, what it caught up on restart, after its return."""
    own = group_records(C, durable=True)
    late = {"caught_up": True}
    before = own[1][:1 + KILLED_AFTER]
    caught_up = ([dict(r, **late) for r in own[1][1 + KILLED_AFTER:]]
                 + [dict(r, **late) for r in own[2]])
    return renumber(before + caught_up + own[3])


def durable_run(c_file: list[dict] | None = None) -> dict[str, list[dict]]:
    run = {p: renumber([r for recs in group_records(p).values() for r in recs]) for p in (A, B)}
    run[C] = restarted_c() if c_file is None else c_file
    return run


def without(recs: list[dict], clock: int, pid: str) -> list[dict]:
    return renumber([r for r in recs if (r.get("clock"), r.get("pid")) != (clock, pid)])


def with_gap(after: tuple[int, int]) -> list[dict]:
    """C's file with a recorded gap in place of everything it could not catch up."""
    own = group_records(C, durable=True)
    return renumber(own[1][:1 + KILLED_AFTER] + [gap(C, after, 3)] + own[3])


def at(recs: list[dict], clock: int, pid: str) -> int:
    (index,) = [r["index"] for r in recs if (r.get("clock"), r.get("pid")) == (clock, pid)]
    return index


# --------------------------------------------------------------------------- reading the records


def test_a_gap_record_is_a_good_record_without_a_key(parse):
    from tests.analysis.conftest import lines_of
    parsed = parse(lines_of({C: renumber([view(C, 1, 1, [C], durable=True), gap(C, (1, 0), 3)])}))
    rows = {r["index"]: r for r in parsed.collect()}
    assert rows[1].problem is None and rows[1].durable is True
    g = rows[2]
    assert g.problem is None and g.kind == "gap" and g.clock is None and g.claim is None
    assert (g.after_view, g.after_n, g.view, g.reason) == (1, 0, 3, GAP_REASON)


@pytest.mark.parametrize("after, problem", [
    (None, "missing or ill-typed: after"),
    ([1], "a gap's after is not [view, n]"),
    ([1, -1], "a gap's after is not [view >= 1, n >= 0]"),
    ([3, 0], "a gap's view is not after its after view"),
])
def test_a_malformed_gap_record_is_a_bad_line(parse, after, problem):
    rec = dict(gap(C, (1, 0), 3), index=1)
    if after is None:
        del rec["after"]
    else:
        rec["after"] = after
    (row,) = parse({"file:/run/c.jsonl": [json.dumps(rec)]}).collect()
    assert row.problem == problem


# --------------------------------------------------------------------------- the transforms


def test_durable_files_are_those_with_a_durable_view_record(records):
    got = checks.durable_files(records(durable_run()))
    assert [(r.peer, r.file) for r in got.collect()] == [(C, "file:/run/127.0.0.1_5002.jsonl")]


def test_group_order_puts_each_view_record_before_its_messages(records):
    got = checks.group_order(checks.event_table(checks.events(records(durable_run()))))
    rows = sorted((r.position, r.view, r.kind, r.nth, r.clock, r.pid) for r in got.collect())
    expected_events = ([(1, "view", 1, A)] + [(1, "message", c, p) for c, p in VIEW_1]
                       + [(2, "view", 6, A)] + [(2, "message", c, p) for c, p in VIEW_2]
                       + [(3, "view", 9, A)] + [(3, "message", c, p) for c, p in VIEW_3])
    assert [(v, k, c, p) for _, v, k, _, c, p in rows] == expected_events
    assert [pos for pos, *_ in rows] == list(range(1, len(expected_events) + 1))
    assert [n for _, v, _, n, _, _ in rows if v == 1] == [0, 1, 2, 3, 4, 5]


GROUP = "clock long, pid string, kind string, view long, position long, nth long"
PLACED = "file string, peer string, index long, clock long, pid string, position long"
GAPS = "file string, peer string, index long, after_view long, after_n long, view long, reason string"
HOLES = "file string, peer string, index long, clock long, pid string, kind string, view long, events long"


def _group(spark):
    """A run of 2 views: view 1's record and 3 messages, view 2's record and 2 messages."""
    return spark.createDataFrame([
        (1, A, "view", 1, 1, 0), (2, A, "message", 1, 2, 1), (2, B, "message", 1, 3, 2),
        (3, A, "message", 1, 4, 3), (4, A, "view", 2, 5, 0), (5, B, "message", 2, 6, 1),
        (6, A, "message", 2, 7, 2)], GROUP)


def _placed(spark, positions: list[int], file: str = "f") -> object:
    group = {r.position: r for r in _group(spark).collect()}
    return spark.createDataFrame(
        [(file, C, i + 1, group[p].clock, group[p].pid, p) for i, p in enumerate(positions)], PLACED)


def test_durable_holes_names_each_missing_run_by_the_index_it_precedes(spark):
    placed = _placed(spark, [1, 2, 5, 7])  # (2, B), (3, A) and (5, B) missing
    got = checks.durable_holes(_group(spark), placed, spark.createDataFrame([], GAPS))
    expected = spark.createDataFrame([("f", C, 3, 2, B, "message", 1, 2),
                                      ("f", C, 4, 5, B, "message", 2, 1)], HOLES)
    assertDataFrameEqual(got, expected)


def test_durable_holes_owes_nothing_outside_the_file_s_stretch(spark):
    placed = _placed(spark, [3, 4, 5])  # joined late, killed before view 2's messages
    got = checks.durable_holes(_group(spark), placed, spark.createDataFrame([], GAPS))
    assert got.count() == 0


def test_a_gap_record_excuses_exactly_what_it_says(spark):
    placed = _placed(spark, [1, 2, 5, 6, 7])
    excused = spark.createDataFrame([("f", C, 4, 1, 1, 2, GAP_REASON)], GAPS)
    assert checks.durable_holes(_group(spark), placed, excused).count() == 0
    # the gap says the file holds view 1's first message, which it does not: nothing excuses it
    placed = _placed(spark, [1, 5, 6, 7])
    excused = spark.createDataFrame([("f", C, 2, 1, 1, 2, GAP_REASON)], GAPS)
    got = checks.durable_holes(_group(spark), placed, excused)
    assertDataFrameEqual(got, spark.createDataFrame([("f", C, 2, 2, A, "message", 1, 1)], HOLES))
    # a gap of another file excuses nothing here
    excused = spark.createDataFrame([("g", C, 4, 1, 0, 2, GAP_REASON)], GAPS)
    assert checks.durable_holes(_group(spark), _placed(spark, [1, 5]), excused).count() == 1


def test_durable_repeats_names_the_repeat_and_the_first_copy(spark):
    placed = _placed(spark, [1, 2, 3, 3, 4])
    got = checks.durable_repeats(placed)
    expected = spark.createDataFrame([("f", C, 4, 2, B, 3)],
                                     "file string, peer string, index long, clock long, pid string, "
                                     "first_index long")
    assertDataFrameEqual(got, expected)


def test_a_gap_record_must_be_followed_by_its_view_s_record(records):
    assert checks.misplaced_gaps(records({C: with_gap((1, KILLED_AFTER))})).count() == 0
    c_file = with_gap((1, KILLED_AFTER))
    c_file = renumber(c_file[:1 + KILLED_AFTER + 1] + c_file[1 + KILLED_AFTER + 2:])  # view 3's record gone
    got = [(r["index"], r.view, r.clock, r.pid) for r in checks.misplaced_gaps(records({C: c_file})).collect()]
    assert got == [(1 + KILLED_AFTER + 1, 3, 10, A)]
    last = renumber(with_gap((1, KILLED_AFTER))[:1 + KILLED_AFTER + 1])  # the file ends at the gap
    got = [(r["index"], r.clock) for r in checks.misplaced_gaps(records({C: last})).collect()]
    assert got == [(1 + KILLED_AFTER + 1, None)]


def test_caught_up_copies_count_for_agreement_and_are_never_unexpected(records):
    recs = records(durable_run())
    messages = checks.event_table(checks.events(recs))
    views = checks.view_members(checks.events(recs))
    agree = checks.agreement(checks.expected_recipients(messages, views, [A, B, C]))
    assert agree.count() == 0
    caught = {(r.clock, r.pid): r.caught_up_by for r in messages.collect()}
    assert caught[(7, A)] == [C] and caught[(4, A)] == [C] and caught[(2, A)] == []
    # the same records without the caught_up key: C delivering in view 2 is unexpected
    plain = {C: [{k: v for k, v in r.items() if k != "caught_up"} for r in restarted_c()]}
    recs = records({**durable_run(), **plain})
    messages = checks.event_table(checks.events(recs))
    agree = checks.agreement(checks.expected_recipients(messages, checks.view_members(recs), [A, B, C]))
    assert sorted((r.clock, r.unexpected) for r in agree.collect()) == [(7, [C]), (8, [C])]


def test_caught_up_deliveries_have_no_latency(records):
    lat = checks.latencies(records(durable_run()))
    counts = {r.peer: r["count"] for r in lat.groupBy("peer").count().collect()}
    n = len(VIEW_1) + len(VIEW_2) + len(VIEW_3)
    assert counts == {A: n, B: n, C: KILLED_AFTER + len(VIEW_3)}


def test_the_order_check_counts_a_gap_record_s_index_and_skips_its_key(records):
    assert checks.order_violations(records(durable_run(with_gap((1, KILLED_AFTER))))).count() == 0
    swapped = with_gap((1, KILLED_AFTER))
    swapped[3], swapped[5] = dict(swapped[5], index=4), dict(swapped[3], index=6)  # around the gap
    got = [(r["index"], r.prev_clock, r.problem)
           for r in checks.order_violations(records({C: swapped})).collect()]
    assert got == [(6, 9, "not after previous (clock, pid)")]  # compared with the event before the gap


def test_durable_violations_on_a_healthy_restart_are_none(records):
    recs = records(durable_run())
    assert checks.durable_violations(recs, checks.event_table(checks.events(recs))).count() == 0


# --------------------------------------------------------------------------- end to end


def write_run(folder: Path, run: dict[str, list[dict]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for peer, recs in run.items():
        (folder / f"{peer.replace(':', '_')}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recs))


def verified(tmp_path, run, capsys) -> tuple[int, dict, str]:
    write_run(tmp_path / "run", run)
    code = verify.main([str(tmp_path / "run"), "--report-dir", str(tmp_path / "out")])
    out = capsys.readouterr().out
    return code, json.loads((tmp_path / "out" / "report.json").read_text()), out


C_FILE = "127.0.0.1_5002.jsonl"


def test_a_restarted_durable_peer_that_caught_up_verifies(spark, tmp_path, capsys):
    code, rep, out = verified(tmp_path, durable_run(), capsys)
    assert code == 0 and rep["verdict"] == "VERIFIED", out
    assert rep["fast_path"].startswith("not conclusive: a durable peer was started again")
    assert rep["checks"]["durable"]["count"] == 0
    assert [d["peer"] for d in rep["durable"]] == [C] and rep["gaps"] == []
    assert rep["rejoins"] == [{"peer": C, "last_view": 1, "removed_by": 2, "admitted_in": 3}]
    n = len(VIEW_1) + len(VIEW_2) + len(VIEW_3)
    assert rep["latency"]["overall"]["count"] == 2 * n + KILLED_AFTER + len(VIEW_3)
    assert "durable peers (tom peer --data): 1" in out


def test_a_caught_up_message_deleted_is_a_violation_naming_file_and_index(spark, tmp_path, capsys):
    c_file = without(restarted_c(), 7, A)
    code, rep, out = verified(tmp_path, durable_run(c_file), capsys)
    assert code == 1 and rep["verdict"] == "VIOLATED"
    (row,) = rep["checks"]["durable"]["first"]
    assert row["file"].endswith(C_FILE) and row["problem"] == "missing"
    assert (row["index"], row["clock"], row["pid"], row["view"]) == (at(c_file, 8, B), 7, A, 2)
    # no other check sees it: C was not a member of view 2
    assert [k for k, c in rep["checks"].items() if c["count"]] == ["durable"]
    assert f"{C_FILE} ({C}): before index {at(c_file, 8, B)}, missing (7, {A}) of view 2" in out


def test_a_message_caught_up_twice_is_a_violation_naming_file_and_index(spark, tmp_path, capsys):
    c_file = restarted_c()
    again = dict(c_file[KILLED_AFTER], caught_up=True)  # (3, C), delivered before the kill
    c_file = renumber(c_file[:1 + KILLED_AFTER] + [again] + c_file[1 + KILLED_AFTER:])
    code, rep, out = verified(tmp_path, durable_run(c_file), capsys)
    assert code == 1
    (row,) = rep["checks"]["durable"]["first"]
    assert row["file"].endswith(C_FILE) and row["problem"] == "repeated"
    assert (row["index"], row["first_index"], row["clock"], row["pid"]) == (5, 4, 3, C)
    assert rep["checks"]["duplicates"]["count"] == 1
    assert f"{C_FILE} ({C}): index 5 repeats (3, {C}) of view 1, first at index 4" in out


def test_a_recorded_gap_verifies_and_is_reported(spark, tmp_path, capsys):
    code, rep, out = verified(tmp_path, durable_run(with_gap((1, KILLED_AFTER))), capsys)
    assert code == 0 and rep["verdict"] == "VERIFIED", out
    (g,) = rep["gaps"]
    assert (g["peer"], g["after_view"], g["after_n"], g["view"], g["reason"], g["index"]) == \
        (C, 1, KILLED_AFTER, 3, GAP_REASON, 1 + KILLED_AFTER + 1)
    assert f"peer {C}: a recorded gap of view 1 message {KILLED_AFTER} .. view 3: {GAP_REASON}" in out
    assert report.describe_gap(g) in (tmp_path / "out" / "report.html").read_text().replace("&#x27;", "'")


def test_a_gap_record_claiming_too_much_leaves_the_skipped_message_missing(spark, tmp_path, capsys):
    c_file = with_gap((1, KILLED_AFTER))
    c_file = without(c_file, 3, C)  # delivered 2 messages of view 1, but the gap says 3
    c_file = [dict(r, after=[1, KILLED_AFTER]) if r["kind"] == "gap" else r for r in c_file]
    code, rep, _ = verified(tmp_path, durable_run(c_file), capsys)
    assert code == 1
    (row,) = rep["checks"]["durable"]["first"]
    assert (row["problem"], row["clock"], row["pid"]) == ("missing", 3, C)


def never_restarted() -> dict[str, list[dict]]:
    """A durable run without a restart: C crashed after its third delivery of view 1 and was not
    started again; A and B went on in view 2."""
    run = {p: renumber([r for v in (1, 2) for r in group_records(p, durable=True)[v]]) for p in (A, B)}
    run[C] = renumber(group_records(C, durable=True)[1][:1 + KILLED_AFTER])
    return run


def exact_report(spark, folder: Path) -> dict:
    files = sorted(str(f) for f in folder.glob("*.jsonl"))
    exact = verify.Report([])
    verify._verify_exact(spark, files, verify.FIRST_ROWS, exact, lambda name: None)
    return exact.as_json()


def test_a_durable_run_never_restarted_is_proven_in_one_pass_as_the_exact_checks_find_it(
        spark, tmp_path, capsys):
    code, rep, out = verified(tmp_path, never_restarted(), capsys)
    assert code == 0 and rep["verdict"] == "VERIFIED" and rep["fast_path"] == "conclusive", out
    exact = exact_report(spark, tmp_path / "run")
    assert exact["verdict"] == "VERIFIED" and exact["checks"]["durable"]["count"] == 0
    assert rep["durable"] == exact["durable"] and [d["peer"] for d in rep["durable"]] == [A, B, C]
    assert rep["gaps"] == exact["gaps"] == []
    assert rep["checks"]["durable"]["count"] == 0
    assert rep["counts"] == exact["counts"]
    assert "durable peers (tom peer --data): 3" in out


def test_a_durable_file_missing_a_view_of_its_stretch_is_left_to_the_exact_checks(spark, tmp_path, capsys):
    # C holds views 1 and 3 but not view 2, with no caught-up or gap record: as a crash-stop peer it
    # would be fine (removed by view 2, admitted again by view 3); as a durable one it lost view 2
    c_file = renumber(group_records(C, durable=True)[1] + group_records(C, durable=True)[3])
    run = {p: renumber([r for recs in group_records(p, durable=True).values() for r in recs]) for p in (A, B)}
    code, rep, out = verified(tmp_path, {**run, C: c_file}, capsys)
    assert rep["fast_path"].startswith("not conclusive: a durable peer's file does not hold every view"), out
    assert code == 1 and rep["verdict"] == "VIOLATED"
    assert [k for k, c in rep["checks"].items() if c["count"]] == ["durable"]
    (row,) = rep["checks"]["durable"]["first"]
    assert row["file"].endswith(C_FILE) and row["problem"] == "missing" and row["view"] == 2
