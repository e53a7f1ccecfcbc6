"""Schema v2 and the three orders: which order a run used, and each order's checks on tiny runs
(silent on a correct run, catching the fault they name), then the job end to end on hand-written
v2 runs, tampered and not."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from analysis import causal, checks, run_order, verify
from tests.analysis.conftest import PEERS, message, view_record

pytestmark = pytest.mark.spark
A, B, C = PEERS


def renumber(recs: list[dict]) -> list[dict]:
    return [dict(r, index=i + 1) for i, r in enumerate(recs)]


def v2(rec: dict, **fields) -> dict:
    return dict(rec, v=2, **fields)


# --------------------------------------------------------------------------- a causal run
#
# a1 = A's first message; B delivers it, then sends b1 (so a1 -> b1); C sends c1 concurrently;
# A delivers b1, then sends a2 (so b1 -> a2). Peers deliver the concurrent c1 at different places.
CAUSAL = {  # key -> vector timestamp
    (1, A): {A: 1},
    (2, B): {A: 1, B: 1},
    (1, C): {C: 1},
    (3, A): {A: 2, B: 1},
}
CAUSAL_ORDERS = {
    A: [(1, A), (1, C), (2, B), (3, A)],
    B: [(1, A), (2, B), (1, C), (3, A)],
    C: [(1, C), (1, A), (2, B), (3, A)],
}


def causal_run(orders=CAUSAL_ORDERS, *, views: bool = False) -> dict[str, list[dict]]:
    """The causal run above, static (no view record) or as view 1 of a dynamic group."""
    run = {}
    for peer, keys in orders.items():
        recs = [v2(view_record(peer, 0, 0, A, 1, list(PEERS), joined=list(PEERS)), order="causal")] \
            if views else []
        recs += [v2(message(peer, 0, c, p), vc=CAUSAL[(c, p)]) for c, p in keys]
        run[peer] = renumber(recs)
    return run


# --------------------------------------------------------------------------- a sequencer run
#
# View 1 = {A, B, C}: seq 1..4 (not in clock order: (2, B) before (2, A)), C crashes having
# delivered all four and (5, C), its own message, sequenced 5 but held by no survivor.
# View 2 = {A, B} removes C: seq 1..2.
SEQ_VIEW_1 = [((2, B), 1), ((2, A), 2), ((3, C), 3), ((4, A), 4)]
SEQ_EXTRA = ((5, C), 5)
SEQ_VIEW_2 = [((7, A), 1), ((8, B), 2)]


def seq_run(*, c_holds=None, edit=None) -> dict[str, list[dict]]:
    """The sequencer run above; ``c_holds`` replaces C's messages of view 1; ``edit(peer, recs)``
    may change a survivor's records."""
    def view(peer, view_id, members, **kw):
        return v2(view_record(peer, 0, 1 if view_id == 1 else 6, A, view_id, members, **kw),
                  order="sequencer", seq=0)

    def msg(peer, key, seq, view_id=1):
        return v2(message(peer, 0, *key, view=view_id), seq=seq)

    run = {}
    for peer in (A, B):
        recs = [view(peer, 1, [A, B, C], joined=[A, B, C])]
        recs += [msg(peer, k, s) for k, s in SEQ_VIEW_1]
        recs += [view(peer, 2, [A, B], removed=[C])]
        recs += [msg(peer, k, s, 2) for k, s in SEQ_VIEW_2]
        run[peer] = renumber(edit(peer, recs) if edit else recs)
    held = SEQ_VIEW_1 + [SEQ_EXTRA] if c_holds is None else c_holds
    run[C] = renumber([view(C, 1, [A, B, C], joined=[A, B, C])] + [msg(C, k, s) for k, s in held])
    return run


# --------------------------------------------------------------------------- which order

def test_decide_names_the_one_order_or_the_disagreement():
    assert run_order.decide({}) == run_order.RunOrder("lamport")
    assert run_order.decide({"file:/r/a.jsonl": ["causal"], "file:/r/b.jsonl": ["causal"]}).order \
        == "causal"
    got = run_order.decide({"file:/r/a.jsonl": ["lamport"], "file:/r/b.jsonl": ["sequencer"],
                            "file:/r/c.jsonl": ["sequencer"]})
    assert got.order is None
    assert got.problem == ("the files disagree about the order: lamport in /r/a.jsonl; "
                           "sequencer in /r/b.jsonl, /r/c.jsonl")


def test_claims_come_from_views_messages_and_the_version(spark, records):
    run = {A: [message(A, 1, 1, A)],                                   # v1: lamport
           B: [v2(message(B, 1, 1, A))],                               # v2, no seq/vc: lamport
           C: seq_run()[C][:2]}                                        # view order + seq
    got = run_order.claims_by_file(records(run))
    expected = spark.createDataFrame(
        [(f"file:/run/{p.replace(':', '_')}.jsonl", c) for p, c in
         ((A, ["lamport"]), (B, ["lamport"]), (C, ["sequencer"]))], "file string, claims array<string>")
    assertDataFrameEqual(got, expected)
    causal_claims = run_order.claims_by_file(records(causal_run(views=True))).collect()
    assert {tuple(r.claims) for r in causal_claims} == {("causal",)}


@pytest.mark.parametrize(("fields", "problem"), [
    ({"kind": "view", "members": [A], "order": None}, "missing or ill-typed: order"),
    ({"kind": "view", "members": [A], "order": "fifo"}, "unknown order fifo"),
    ({"seq": 1, "vc": {A: 1}}, "both seq and vc"),
    ({"seq": 0}, "seq < 1"),
    ({"vc": {B: 1}}, "vc does not count the message at its origin (vc[pid] < 1)"),
    ({"vc": {A: 1, B: -1}}, "vc holds a negative count"),
])
def test_bad_v2_records_are_kept_with_a_reason(parse, fields, problem):
    from analysis import schema
    bad = {k: v for k, v in v2(message(A, 2, 2, A), **fields).items() if v is not None}
    parsed = parse({"f": [json.dumps(v2(message(A, 1, 1, A))), json.dumps(bad)]})
    assert [b.problem for b in schema.bad_lines(parsed).collect()] == [problem]


# --------------------------------------------------------------------------- sequencer checks

def test_sequencer_run_has_no_violation_and_crashed_extras_are_allowed(records):
    recs = records(seq_run())
    msgs = checks.event_table(recs)
    views = checks.view_members(recs)
    expected = checks.expected_recipients(msgs, views, list(PEERS), checks.SEQUENCER)
    for frame in (checks.order_violations(recs, checks.SEQUENCER), checks.conflicting_copies(msgs),
                  checks.number_conflicts(msgs, checks.SEQUENCER), checks.agreement(expected)):
        assert frame.count() == 0
    assert checks.order_violations(recs).count() == 3  # (2, B) before (2, A): not the clock order
    # the same files read as a Lamport run: C's extra is missing at the survivors
    lamport = checks.agreement(checks.expected_recipients(msgs, views, list(PEERS)))
    assert [(r.clock, r.pid, r.missing) for r in lamport.collect()] == [(5, C, [A, B])]


def test_sequencer_order_is_view_then_seq_not_clock(spark, records):
    # B delivers seq 2 before seq 1: in clock order, (2, A) before (2, B), which Lamport would accept
    def swap(peer, recs):
        if peer == B:
            recs[1], recs[2] = recs[2], recs[1]
        return recs
    got = checks.order_violations(records(seq_run(edit=swap)), checks.SEQUENCER)
    expected = spark.createDataFrame(
        [(B, 3, 2, B, 2, 2, A, "not after previous (view, seq)")],
        "peer string, index long, clock long, pid string, prev_index long, prev_clock long, "
        "prev_pid string, problem string")
    assertDataFrameEqual(got, expected)


def test_seq_disagreement_is_a_copy_conflict_and_a_number_conflict(spark, records):
    def reseq(peer, recs):  # B numbers (2, A) as 3, like (3, C)
        return [dict(r, seq=3) if peer == B and (r["clock"], r["pid"]) == (2, A) else r for r in recs]
    msgs = checks.event_table(records(seq_run(edit=reseq)))
    assert [(r.clock, r.pid, r.differs) for r in checks.conflicting_copies(msgs).collect()] \
        == [(2, A, ["seq"])]
    got = checks.number_conflicts(msgs, checks.SEQUENCER).select("view", "number", "keys")
    expected = spark.createDataFrame([(1, 3, [(2, A), (3, C)])],
                                     "view long, number long, keys array<struct<clock:long,pid:string>>")
    assertDataFrameEqual(got, expected)


def test_crashed_sequencer_member_owes_what_comes_before_its_last_delivery(records):
    # C delivered seq 1, 2 and 4 of view 1: it skipped seq 3, which the survivors delivered
    recs = records(seq_run(c_holds=[SEQ_VIEW_1[0], SEQ_VIEW_1[1], SEQ_VIEW_1[3]]))
    msgs = checks.event_table(recs)
    expected = checks.expected_recipients(msgs, checks.view_members(recs), list(PEERS),
                                          checks.SEQUENCER)
    assert [(r.clock, r.pid, r.missing) for r in checks.agreement(expected).collect()] \
        == [(3, C, [C])]


# --------------------------------------------------------------------------- causal checks

def test_causal_run_has_no_violation_though_peers_differ_in_order(records):
    recs = records(causal_run(views=True))
    msgs = checks.event_table(recs)
    expected = checks.expected_recipients(msgs, checks.view_members(recs), list(PEERS), checks.CAUSAL)
    for frame in (causal.causal_violations(recs), checks.order_violations(recs, checks.CAUSAL),
                  checks.number_conflicts(msgs, checks.CAUSAL), checks.agreement(expected),
                  checks.conflicting_copies(msgs)):
        assert frame.count() == 0
    # ... which the Lamport order check would call a violation
    assert checks.order_violations(recs).count() > 0


def test_running_counts_of_the_requirements(spark, records):
    """At B (order a1, b1, c1, a2): every need row sees how many of its member's messages came
    before; every delivery row its own position among its origin's messages."""
    frame = causal.requirements(records({B: causal_run()[B]}))
    got = frame.select("origin", "index", "is_need", "needed",
                       causal.delivered_before(frame).alias("delivered"))
    expected = spark.createDataFrame([
        (A, 1, False, None, 1),                    # a1 delivered: A's 1st (vc[A] - 1 = 0: no need)
        (A, 2, True, 1, 1), (B, 2, False, None, 1),  # b1 needs A's 1st: 1 delivered before
        (C, 3, False, None, 1),                    # c1
        (A, 4, True, 1, 1), (B, 4, True, 1, 1), (A, 4, False, None, 2),  # a2 needs A's 1st, B's 1st
    ], "origin string, index long, is_need boolean, needed long, delivered long")
    assertDataFrameEqual(got, expected)


def test_message_before_its_causal_predecessor_is_named(spark, records):
    orders = dict(CAUSAL_ORDERS)
    orders[C] = [(1, C), (2, B), (1, A), (3, A)]  # C delivers b1 before a1
    got = causal.causal_violations(records(causal_run(orders)))
    expected = spark.createDataFrame(
        [(C, 1, 2, 2, B, A, 1, 0)],
        "peer string, view long, index long, clock long, pid string, member string, needed long, "
        "delivered long")
    assertDataFrameEqual(got, expected)


def test_origin_out_of_order_is_a_causal_violation(records):
    orders = dict(CAUSAL_ORDERS)
    orders[A] = [(1, C), (2, B), (3, A), (1, A)]  # impossible at A, but a tampered file could say so
    rows = causal.causal_violations(records(causal_run(orders))).collect()
    assert sorted((r.peer, r.clock, r.pid, r.member, r.needed, r.delivered) for r in rows) \
        == [(A, 2, B, A, 1, 0), (A, 3, A, A, 1, 0)]


def test_causal_agreement_is_on_sets_and_crashed_extras_are_allowed(records):
    run = causal_run(views=True)
    for peer in (A, B):  # view 2 = {A, B} removes C
        run[peer] = renumber(run[peer] + [v2(view_record(peer, 0, 9, A, 2, [A, B], removed=[C]),
                                             order="causal")])
    run[C] = renumber(run[C] + [v2(message(C, 0, 4, C), vc={A: 2, B: 1, C: 2})])  # C's extra
    recs = records(run)
    msgs = checks.event_table(recs)
    expected = checks.expected_recipients(msgs, checks.view_members(recs), list(PEERS), checks.CAUSAL)
    assert checks.agreement(expected).count() == 0
    run[B] = renumber([r for r in run[B] if (r.get("clock"), r.get("pid")) != (1, C)])  # B lacks c1
    recs = records(run)
    msgs = checks.event_table(recs)
    expected = checks.expected_recipients(msgs, checks.view_members(recs), list(PEERS), checks.CAUSAL)
    assert [(r.clock, r.pid, r.missing) for r in checks.agreement(expected).collect()] \
        == [(1, C, [B])]


# --------------------------------------------------------------------------- end to end

def write_run(folder, run: dict[str, list[dict]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for peer, recs in run.items():
        (folder / f"{peer.replace(':', '_')}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recs))


def run_main(tmp_path, run, capsys) -> tuple[int, dict, str]:
    write_run(tmp_path / "run", run)
    code = verify.main([str(tmp_path / "run"), "--report-dir", str(tmp_path / "out")])
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == rep["exit_code"]
    return code, rep, capsys.readouterr().out


def test_causal_runs_verify_and_a_tampered_one_names_both_messages(spark, tmp_path, capsys):
    code, rep, out = run_main(tmp_path / "ok", causal_run(views=True), capsys)
    assert (code, rep["order"]) == (0, "causal"), rep["checks"]
    assert out.splitlines()[0] == "VERIFIED (causal order)"

    orders = dict(CAUSAL_ORDERS)
    orders[C] = [(1, C), (2, B), (1, A), (3, A)]
    code, rep, out = run_main(tmp_path / "bad", causal_run(orders, views=True), capsys)
    assert (code, rep["verdict"]) == (1, "VIOLATED")
    assert out.splitlines()[0] == "VIOLATED (causal order)"
    (row,) = rep["checks"]["causal"]["first"]
    assert row["peer"] == C and row["index"] == 3
    assert row["message"] == {"clock": 2, "pid": B, "text": f"m2@{B}"}
    assert row["overtook"] == {"clock": 1, "pid": A, "text": f"m1@{A}"}
    assert f"{C} delivered (2, {B}) \"m2@{B}\" at index 3 before its causal predecessor (1, {A})" in out


def test_sequencer_runs_verify_and_disagreements_are_violations(spark, tmp_path, capsys):
    code, rep, out = run_main(tmp_path / "ok", seq_run(), capsys)
    assert (code, rep["order"]) == (0, "sequencer"), rep["checks"]
    assert out.splitlines()[0] == "VERIFIED (sequencer order)"

    def swap(peer, recs):  # B delivers seq 2 and 3 the other way round, seqs left as they are
        if peer == B:
            recs[2], recs[3] = recs[3], recs[2]
        return recs
    code, rep, _ = run_main(tmp_path / "order", seq_run(edit=swap), capsys)
    assert (code, rep["verdict"]) == (1, "VIOLATED")
    assert [r["problem"] for r in rep["checks"]["order"]["first"]] == ["not after previous (view, seq)"]
    first = rep["checks"]["divergence"]["first"][0]
    assert (first["peer_a"], first["peer_b"], first["position"]) == (A, B, 3)

    def renumbered(peer, recs):  # B delivers in the same order but disagrees on two seqs
        if peer == B:
            recs[2], recs[3] = dict(recs[2], seq=3), dict(recs[3], seq=2)
            recs[2], recs[3] = recs[3], recs[2]
        return recs
    code, rep, _ = run_main(tmp_path / "seq", seq_run(edit=renumbered), capsys)
    assert (code, rep["verdict"]) == (1, "VIOLATED")
    assert rep["checks"]["order"]["count"] == 0  # each file is in its own seq order ...
    assert {r["differs"][0] for r in rep["checks"]["conflicting_copies"]["first"]} == {"seq"}
    assert rep["checks"]["divergence"]["count"] >= 1  # ... but A and B's sequences differ


def test_v1_run_verifies_and_files_disagreeing_on_the_order_are_unusable(spark, tmp_path, capsys):
    events = [(1, A), (1, B), (2, C)]
    v1 = {p: renumber([message(p, 0, c, q) for c, q in events]) for p in PEERS}
    code, rep, out = run_main(tmp_path / "v1", v1, capsys)
    assert (code, rep["order"], rep["fast_path"]) == (0, "lamport", "conclusive")
    assert out.splitlines()[0] == "VERIFIED (lamport order)"

    mixed = dict(v1, **{C: [v2(r, seq=r["index"]) for r in v1[C]]})
    code, rep, out = run_main(tmp_path / "mixed", mixed, capsys)
    assert (code, rep["verdict"]) == (2, "UNUSABLE INPUT")
    line = (f"the files disagree about the order: lamport in {tmp_path}/mixed/run/127.0.0.1_5000.jsonl, "
            f"{tmp_path}/mixed/run/127.0.0.1_5001.jsonl; sequencer in {tmp_path}/mixed/run/127.0.0.1_5002.jsonl")
    assert rep["problems"] == [line]
    assert out.splitlines()[:2] == ["UNUSABLE INPUT", f"  {line}"]


def test_a_failed_peer_whose_sequencer_failed_too_is_not_compared_in_that_view(spark, tmp_path):
    """View 1 = {A, B, C, D}, sequencer A. A and D fail; the survivors B, C settle the numbers:
    D's view 1 (other numbers from seq 3 on) is held only to its own order. If A survives (only
    D fails), D's numbers must agree."""
    D = "127.0.0.1:5003"

    def run(failed: list[str]) -> dict[str, list[dict]]:
        members, survivors = [A, B, C, D], [p for p in (A, B, C, D) if p not in failed]

        def view(peer, view_id, ms, **kw):
            return v2(view_record(peer, 0, 1 if view_id == 1 else 9, survivors[0], view_id, ms, **kw),
                      order="sequencer", seq=0)
        settled = [((2, A), 1), ((2, B), 2), ((3, C), 3), ((4, B), 4)]
        d_saw = [((2, A), 1), ((2, B), 2), ((4, A), 3), ((3, C), 4)]  # numbers A gave before dying
        out = {}
        for peer in survivors:
            out[peer] = renumber([view(peer, 1, members, joined=members)]
                                 + [v2(message(peer, 0, *k), seq=s) for k, s in settled]
                                 + [view(peer, 2, survivors, removed=failed)])
        out[D] = renumber([view(D, 1, members, joined=members)]
                          + [v2(message(D, 0, *k), seq=s) for k, s in d_saw])
        return out

    views = checks.view_members(spark.createDataFrame(
        [(1, [A, B, C, D], []), (2, [B, C], [A, D])], "view long, members array<string>, "
        "removed array<string>").withColumn("kind", F.lit("view")))
    assertDataFrameEqual(checks.unsettled_views(views),
                         spark.createDataFrame([(1, A), (1, D)], "view long, peer string"))

    files = {}
    for name, failed in (("both", [A, D]), ("d_only", [D])):
        write_run(tmp_path / name, run(failed))
        files[name] = [f"file:{p}" for p in sorted((tmp_path / name).glob("*.jsonl"))]
    rep = verify.verify(spark, files["both"]).as_json()
    assert (rep["verdict"], rep["order"]) == ("VERIFIED", "sequencer"), rep["checks"]
    assert rep["checks"]["agreement"]["note"].endswith(f"{A} in view 1, {D} in view 1")
    rep = verify.verify(spark, files["d_only"]).as_json()
    assert rep["verdict"] == "VIOLATED"
    assert {r["clock"] for r in rep["checks"]["conflicting_copies"]["first"]} == {3}
    assert rep["checks"]["numbering"]["count"] >= 1


def test_a_disagreement_after_the_first_lines_is_found_by_the_exact_path(spark, tmp_path):
    """Every file starts as a causal run (the peek's hint), one message further down has no vc."""
    run = causal_run(views=True)
    run[B][3] = {k: v for k, v in run[B][3].items() if k != "vc"}
    write_run(tmp_path, run)
    rep = verify.verify(spark, [f"file:{p}" for p in sorted(tmp_path.glob("*.jsonl"))]).as_json()
    assert (rep["verdict"], "order" in rep) == ("UNUSABLE INPUT", False)
    assert rep["problems"][0].startswith("the files disagree about the order: lamport in ")


def test_a_predecessor_nobody_delivered_is_said_so():
    """:func:`causal.describe` (driver side): the overtaken message is looked up by (view, member,
    number); when no peer's copy exists, the row says so instead of naming one."""
    row = {"peer": C, "view": 1, "index": 2, "clock": 2, "pid": B, "member": A, "needed": 1,
           "delivered": 0}
    got = causal.describe([row], [{"view": 1, "clock": 2, "pid": B, "number": 1, "text": "b1"}])
    assert got[0]["message"] == {"clock": 2, "pid": B, "text": "b1"}
    assert (got[0]["overtook"], got[0]["overtook_note"]) == (
        None, f"message 1 of {A} in view 1: delivered by no peer")
    named = causal.describe([row], [{"view": 1, "clock": 1, "pid": A, "number": 1, "text": "a1"}])
    assert named[0]["overtook"] == {"clock": 1, "pid": A, "text": "a1"}
