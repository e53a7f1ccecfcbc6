"""Handout runs (issue 22): the course tools' text outputs and TOM's ``--wire handout`` JSON Lines,
checked in the handout's order ``(clock, from as written)``."""

from __future__ import annotations

import json

import pytest

from analysis import schema

pytestmark = pytest.mark.spark

FROM_A = "localhost/127.0.0.1:5000"   # InetAddress.toString() with a host name
FROM_B = "/127.0.0.1:5001"            # without one
FROM_C = "127.0.0.1:5002"             # as a neighbors file writes it


@pytest.fixture
def parse_text(spark):
    """The parsed frame of handout text files ``{file: [line, ...]}`` through the real parser."""

    def build(files: dict[str, list[str]]):
        rows = [(line, path, 0, f * 1_000_000 + i)
                for f, (path, lines) in enumerate(sorted(files.items()))
                for i, line in enumerate(lines)]
        raw = spark.createDataFrame(rows, "value string, file string, block_start long, row long")
        return schema.parse_handout_lines(raw)

    return build


@pytest.fixture
def hash_of(spark):
    """Spark's ``text_hash`` of a text (xxhash64, as :func:`analysis.schema.parse_lines` keeps it)."""
    from pyspark.sql import functions as F
    return lambda text: spark.range(1).select(F.xxhash64(F.lit(text))).first()[0]


# --------------------------------------------------------------------------- parsing text lines

@pytest.mark.parametrize(("line", "clock", "origin", "text"), [
    (f"MESSAGE-4-{FROM_A}-hello world", 4, FROM_A, "hello world"),
    (f"3 ACKs on MESSAGE-4-{FROM_A}-hello world", 4, FROM_A, "hello world"),
    (f"MESSAGE-12-{FROM_B}-a-b-c", 12, FROM_B, "a-b-c"),
    (f"MESSAGE-1-{FROM_C}-time: 10:30-11:00", 1, FROM_C, "time: 10:30-11:00"),
    ("MESSAGE-7-my-host.lan/10.0.0.2:5000-x", 7, "my-host.lan/10.0.0.2:5000", "x"),
    (f"MESSAGE-2-{FROM_C}-", 2, FROM_C, ""),
    (f"MESSAGE-2-{FROM_C}-  spaced  ", 2, FROM_C, "  spaced  "),
])
def test_a_frame_line_is_a_message_keyed_by_clock_and_from_as_written(parse_text, hash_of, line,
                                                                        clock, origin, text):
    (row,) = schema.good_records(parse_text({"file:/class/alice.txt": [line]})).collect()
    assert (row.kind, row["index"], row.peer, row.clock, row.pid, row.view, row.claim) == \
        ("message", 1, "alice.txt", clock, origin, 1, "handout")
    assert row.text_hash == hash_of(text)
    assert row.delivered_at is None and row.sent_at is None and row.seq is None and row.vc is None


@pytest.mark.parametrize(("line", "problem"), [
    ("", "blank line"),
    ("   ", "blank line"),
    ("Started to listen on ServerSocket[addr=localhost/127.0.0.1,localport=5003]",
     schema.NOT_A_FRAME),
    ("ACK-4-localhost/127.0.0.1:5001", schema.NOT_A_FRAME),
    ("MESSAGE-x-127.0.0.1:5000-t", schema.NOT_A_FRAME),
    ("MESSAGE-4-localhost/127.0.0.1-no port", schema.NOT_A_FRAME),
    ("MESSAGE-4-localhost/127.0.0.1:50", schema.NOT_A_FRAME),  # a torn last line
    ("MESSAGE-99999999999999999999-127.0.0.1:5000-t", "clock out of range"),
])
def test_a_line_that_is_not_a_frame_is_a_bad_line_with_a_reason(parse_text, line, problem):
    good = f"MESSAGE-1-{FROM_A}-hi"
    parsed = parse_text({"file:/class/alice.txt": [good, line]})
    assert schema.good_records(parsed).count() == 1
    (bad,) = schema.bad_lines(parsed).collect()
    assert (bad.problem, bad.excerpt) == (problem, line[:schema.EXCERPT_CHARS])


def test_index_counts_a_file_s_messages_in_line_order_skipping_bad_lines(parse_text):
    lines = [f"MESSAGE-1-{FROM_A}-a", "", "junk", f"MESSAGE-2-{FROM_B}-b", f"MESSAGE-3-{FROM_C}-c"]
    parsed = parse_text({"file:/class/alice.txt": lines, "file:/class/bob.txt": lines[3:]})
    got = sorted((r.peer, r["index"], r.clock) for r in schema.good_records(parsed).collect())
    assert got == [("alice.txt", 1, 1), ("alice.txt", 2, 2), ("alice.txt", 3, 3),
                   ("bob.txt", 1, 2), ("bob.txt", 2, 3)]


def test_a_text_file_s_peer_is_its_file_name_decoded_from_spark_s_uri(parse_text):
    """Spark names files URI-encoded (``a%20b``, ``%25`` for ``%``; ``+`` stays ``+``)."""
    parsed = parse_text({"file:/my%20class/p+q%2525%20%C3%A9.txt": [f"MESSAGE-1-{FROM_A}-x"],
                         "file:/c/b%C3%A9.log": [f"MESSAGE-1-{FROM_A}-x"]})
    assert sorted(r.peer for r in schema.good_records(parsed).collect()) == ["bé.log", "p+q%25 é.txt"]


def test_a_text_file_written_on_windows_reads_the_same(spark, tmp_path, hash_of):
    """CRLF line ends (a Java tool's println on Windows) are cut off with the line."""
    path = tmp_path / "alice.txt"
    path.write_bytes(f"MESSAGE-1-{FROM_A}-hi there\r\n3 ACKs on MESSAGE-2-{FROM_B}-x\r\n".encode())
    assert schema.resolve_inputs(None, [str(tmp_path)]).texts == [f"file:{path}"]
    rows = schema.good_records(schema.parse_handout_lines(schema.read_lines(spark, [f"file:{path}"])))
    assert [(r["index"], r.pid, r.text_hash) for r in rows.orderBy("index").collect()] == \
        [(1, FROM_A, hash_of("hi there")), (2, FROM_B, hash_of("x"))]


def test_text_rows_have_the_json_reader_s_columns_and_types(parse_text, parse):
    text = parse_text({"file:/class/alice.txt": [f"MESSAGE-1-{FROM_A}-x"]})
    jsonl = parse({"file:/run/a.jsonl": ["{}"]})
    assert [(f.name, f.dataType) for f in text.schema] == [(f.name, f.dataType) for f in jsonl.schema]


# --------------------------------------------------------------------------- TOM's handout JSON Lines

def handout_record(peer: str, index: int, clock: int, origin: str, text: str, **extra) -> dict:
    """A record of a TOM peer on the handout wire: ``from`` as written, ``wire``, no ``sent_at``."""
    return {"v": 2, "kind": "message", "index": index, "peer": peer, "clock": clock,
            "pid": origin.rpartition("/")[2], "from": origin, "text": text,
            "delivered_at": 1_763_766_000.0 + index, "view": 1, "wire": "handout", **extra}


def test_a_handout_json_record_is_keyed_by_its_from_and_needs_no_sent_at(parse, hash_of):
    line = json.dumps(handout_record("127.0.0.1:5002", 1, 3, FROM_A, "hi"))
    (row,) = schema.good_records(parse({"file:/run/c.jsonl": [line]})).collect()
    assert (row.peer, row.clock, row.pid, row.claim, row.sent_at) == \
        ("127.0.0.1:5002", 3, FROM_A, "handout", None)
    assert row.text_hash == hash_of("hi")


@pytest.mark.parametrize(("change", "problem"), [
    ({"from": None}, "missing or ill-typed: from"),
    ({"from": "localhost/127.0.0.1"}, "from is not [NAME/]HOST:PORT"),
    ({"wire": "carrier-pigeon"}, "unknown wire carrier-pigeon"),
    ({"kind": "view", "members": [FROM_C], "order": "lamport"},
     "a handout record is a message (a static group)"),
    ({"seq": 3}, "seq or vc on a handout record"),
    ({"text": None}, "missing or ill-typed: text"),
])
def test_a_bad_handout_json_record_is_a_bad_line(parse, change, problem):
    rec = {k: v for k, v in {**handout_record("127.0.0.1:5002", 1, 3, FROM_A, "hi"), **change}.items()
           if v is not None}
    parsed = parse({"file:/run/c.jsonl": [json.dumps(rec)]})
    assert [b.problem for b in schema.bad_lines(parsed).collect()] == [problem]


def test_a_tom_record_still_needs_its_sent_at(parse):
    rec = {"v": 2, "kind": "message", "index": 1, "peer": FROM_C, "clock": 1, "pid": FROM_C,
           "text": "t", "delivered_at": 1.0, "view": 1}
    parsed = parse({"file:/run/c.jsonl": [json.dumps(rec)]})
    assert [b.problem for b in schema.bad_lines(parsed).collect()] == ["missing or ill-typed: sent_at"]


# --------------------------------------------------------------------------- which files are outputs

@pytest.mark.parametrize(("name", "first", "named", "kind"), [
    ("p.jsonl", (1, "garbage"), False, "jsonl"),                       # by name, whatever it holds
    ("alice.txt", (1, f"MESSAGE-1-{FROM_A}-hi"), False, "handout"),
    ("bob", (3, f"2 ACKs on MESSAGE-1-{FROM_B}-hi"), False, "handout"),  # after blank lines
    ("peer.log", (1, "Started to listen on ServerSocket[addr=/0.0.0.0]"), False, None),
    ("peer.log", (1, "Started to listen on ServerSocket[addr=/0.0.0.0]"), True, None),
    ("out.json", (1, '{"v":2,"kind":"mess'), True, "jsonl"),            # named: JSON Lines as before
    ("out.json", (1, '{"v":2,"kind":"mess'), False, None),              # in a folder: *.jsonl only
    ("empty.txt", None, True, "jsonl"),
    ("empty.txt", None, False, None),
    ("x.txt", (1, "MESSAGE-1-no port-hi"), True, None),
    ("x.txt", (1, "MESSAGE-١-127.0.0.1:5000-hi"), True, None),         # Java's \d is ASCII
])
def test_output_files_are_recognised_by_name_and_first_line(name, first, named, kind):
    assert schema.output_kind(name, first, named) == kind


def test_a_folder_holds_jsonl_and_handout_text_outputs_and_ignores_logs(tmp_path):
    (tmp_path / "p.jsonl").write_text("{}\n")
    (tmp_path / "alice.txt").write_text(f"\n\nMESSAGE-1-{FROM_A}-hi\n")
    (tmp_path / "bob").write_text(f"1 ACKs on MESSAGE-1-{FROM_A}-hi\n")
    (tmp_path / "peer.log").write_text("Loaded 4 neighbors\nMESSAGE-1-x:1-y\n")
    (tmp_path / "notes.json").write_text("{}\n")
    found = schema.resolve_inputs(None, [str(tmp_path)])
    assert found.files == [f"file:{tmp_path}/p.jsonl"]
    assert found.texts == [f"file:{tmp_path}/alice.txt", f"file:{tmp_path}/bob"]
    assert found.skipped == [] and found.missing == []


def test_a_named_file_that_is_no_output_is_skipped_with_its_first_bad_line(tmp_path):
    (tmp_path / "alice.txt").write_text(f"MESSAGE-1-{FROM_A}-hi\n")
    (tmp_path / "peer.log").write_text("\nLoaded 4 neighbors\n")
    found = schema.resolve_inputs(None, [str(tmp_path / "alice.txt"), str(tmp_path / "peer.log")])
    assert found.files == [] and found.texts == [f"file:{tmp_path}/alice.txt"]
    assert found.skipped == [f"skipped {tmp_path}/peer.log: line 2 is neither a TOM record nor a "
                             f"handout frame: Loaded 4 neighbors"]


# --------------------------------------------------------------------------- the handout's order

def frames(*keys: tuple[int, str]) -> list[str]:
    return [f"MESSAGE-{c}-{o}-m{c}@{o}" for c, o in keys]


def test_the_handout_order_compares_from_as_a_string(parse_text):
    """``(3, "127.0.0.1:10000")`` comes first as a string ("1" < "5"), second in TOM's pid order."""
    from analysis import checks
    low, high = (3, "127.0.0.1:10000"), (3, "127.0.0.1:5001")
    records = schema.good_records(parse_text({
        "file:/c/alice.txt": frames((1, FROM_A), (1, FROM_B), low, high),
        "file:/c/bob.txt": frames((1, FROM_B), (1, FROM_A), high, low)}))
    # "/127.0.0.1:5001" < "localhost/127.0.0.1:5000" ("/" is 0x2F, "l" 0x6C): bob is in order there
    wrong = {(r.peer, r["index"], r.problem) for r in
             checks.order_violations(records, checks.HANDOUT).collect()}
    assert wrong == {("alice.txt", 2, checks.NOT_AFTER[checks.HANDOUT]),
                     ("bob.txt", 4, checks.NOT_AFTER[checks.HANDOUT])}
    lamport = {(r.peer, r["index"]) for r in checks.order_violations(records, checks.LAMPORT).collect()}
    assert ("alice.txt", 4) in lamport and ("bob.txt", 4) not in lamport


def test_a_file_cut_short_owes_nothing_after_its_last_message_but_a_gap_is_missing(parse_text):
    from analysis import checks
    keys = [(1, FROM_A), (1, FROM_B), (2, FROM_C), (3, FROM_A)]
    records = schema.good_records(parse_text({
        "file:/c/alice.txt": frames(*keys),
        "file:/c/bob.txt": frames(*keys[:2]),                 # cut short: 2 of 4
        "file:/c/carol.txt": frames(keys[0], *keys[2:])}))    # a gap: (1, FROM_B) missing
    messages = checks.event_table(records)
    views = checks.view_members(records)
    peers = ["alice.txt", "bob.txt", "carol.txt"]
    expected = checks.expected_recipients(messages, views, peers, checks.HANDOUT)
    got = [(r.clock, r.pid, r.missing, r.unexpected) for r in checks.agreement(expected).collect()]
    assert got == [(1, FROM_B, ["carol.txt"], [])]
    counts = {r.peer: r.messages for r in checks.messages_per_peer(messages).collect()}
    assert counts == {"alice.txt": 4, "bob.txt": 2, "carol.txt": 3}


def test_each_file_s_first_departure_from_the_common_order_is_named(parse_text):
    """The common order is every message sorted by ``(clock, from)``; a file is fine iff it is a
    prefix of it. Otherwise its first departure: the index, what it has there, what belongs there
    and which files have that there."""
    from analysis import checks
    m = [(1, FROM_B), (1, FROM_C), (1, FROM_A), (2, FROM_A)]  # in the common order
    records = schema.good_records(parse_text({
        "file:/c/alice.txt": frames(*m),
        "file:/c/bob.txt": frames(*m[:2]),                      # cut short: fine
        "file:/c/carol.txt": frames(m[0], m[2], m[3]),          # a gap at 2
        "file:/c/dave.txt": frames(m[0], m[2], m[1], m[3]),     # a swap at 2
        "file:/c/erin.txt": frames(m[0], m[1], m[1], m[2], m[3])}))  # a duplicate at 3
    got = {r.peer: (r["index"], (r.clock, r.pid), (r.expected_clock, r.expected_pid), r.as_in)
           for r in checks.departures(records, checks.event_table(records)).collect()}
    holders = ["alice.txt", "bob.txt", "erin.txt"]
    assert got == {"carol.txt": (2, m[2], m[1], holders), "dave.txt": (2, m[2], m[1], holders),
                   "erin.txt": (3, m[1], m[2], ["alice.txt"])}


def test_the_latency_histogram_leaves_out_messages_without_times(spark):
    from analysis import checks
    lat = spark.createDataFrame([("a", 0.01), ("a", None), ("b", None)], "peer string, latency double")
    got = {r.bin: r["count"] for r in checks.latency_histogram(lat, 0.0, 0.02, 4).collect()}
    assert got == {2: 1}


# --------------------------------------------------------------------------- tom verify, end to end

FROM_D = "127.0.0.1:10000"  # before FROM_C as a string ("1" < "5"), after it in TOM's pid order
CLASS = sorted([(1, FROM_A, "hello-world"), (1, FROM_B, "time: 10:30-11:00"), (1, FROM_D, "a:1-b"),
                (1, FROM_C, "x-y"), (2, FROM_A, "again"), (3, FROM_C, "bye: 5001-")],
               key=lambda m: (m[0], m[1]))
TOM_PEER = "127.0.0.1:5002"


def text_output(msgs, acks: bool = False, tail: str = "") -> str:
    return "".join(f"{'3 ACKs on ' if acks else ''}MESSAGE-{c}-{o}-{t}\n" for c, o, t in msgs) + tail


def write_class(folder, alice=CLASS, bob=CLASS, tom=CLASS, bob_tail: str = ""):
    """A class run: two course tools' text outputs, a TOM peer's handout JSON Lines, a log."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "alice.txt").write_text(text_output(alice, acks=True))
    (folder / "bob.txt").write_text(text_output(bob, tail=bob_tail))
    (folder / "p2.jsonl").write_text("".join(
        json.dumps(handout_record(TOM_PEER, i + 1, c, o, t)) + "\n" for i, (c, o, t) in enumerate(tom)))
    (folder / "peer.log").write_text("Loaded 4 neighbors\nChoose what to do:\n")
    return folder


def run_verify(*argv) -> tuple[int, str, dict]:
    import contextlib
    import io

    from analysis import verify
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = verify.main([*map(str, argv)])
    report_dir = argv[argv.index("--report-dir") + 1]
    return code, out.getvalue(), json.loads((report_dir / "report.json").read_text())


def test_a_healthy_class_is_verified_in_the_handout_s_order(spark, tmp_path):
    folder = write_class(tmp_path / "class")
    code, out, rep = run_verify(folder, "--report-dir", tmp_path / "out")
    assert code == 0, out
    assert out.splitlines()[0] == "VERIFIED (handout order)"
    assert "(clock, from as written)" in out
    assert rep["order"] == "handout" and rep["incomplete"] == []
    assert rep["peers"] == sorted([TOM_PEER, "alice.txt", "bob.txt"])
    assert rep["counts"]["messages"] == len(CLASS) and rep["counts"]["records"] == 3 * len(CLASS)
    assert sorted(f["path"].rsplit("/", 1)[1] for f in rep["file_summaries"]) == \
        ["alice.txt", "bob.txt", "p2.jsonl"]  # peer.log is not a peer
    assert all(c["count"] == 0 for c in rep["checks"].values())
    assert rep["peer_files"][TOM_PEER] == [str(folder / "p2.jsonl")]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "VERIFIED (handout order)" in html and "from as written" in html


def test_two_adjacent_lines_swapped_are_a_violation_naming_the_file_and_position(spark, tmp_path):
    bob = list(CLASS)
    bob[2], bob[3] = bob[3], bob[2]
    code, out, rep = run_verify(write_class(tmp_path / "class", bob=bob), "--report-dir", tmp_path / "out")
    assert code == 1
    assert out.splitlines()[0] == "VIOLATED (handout order)"
    (wrong,) = rep["checks"]["order"]["first"]
    assert (wrong["peer"], wrong["index"], wrong["problem"]) == \
        ("bob.txt", 4, "not after previous (clock, from)")
    firsts = {(d["peer_a"], d["peer_b"], d["position"]) for d in rep["checks"]["divergence"]["first"]}
    assert firsts == {(TOM_PEER, "bob.txt", 3), ("alice.txt", "bob.txt", 3)}
    (off,) = rep["checks"]["common_order"]["first"]
    assert (off["peer"], off["line"], off["has"]["from"], off["expected"]["from"]) == \
        ("bob.txt", 3, CLASS[3][1], CLASS[2][1])
    assert "bob.txt departs from the common order at line 3" in out


def test_a_file_cut_short_is_named_incomplete_and_the_run_verified(spark, tmp_path):
    folder = write_class(tmp_path / "class", bob=CLASS[:4], bob_tail="MESSAGE-2-localhost/127.0")
    code, out, rep = run_verify(folder, "--report-dir", tmp_path / "out")
    assert code == 0, out
    assert rep["incomplete"] == [{"peer": "bob.txt", "files": [str(folder / "bob.txt")],
                                  "messages": 4, "of": len(CLASS)}]
    assert "bob.txt: 4 of 6 messages" in out
    assert rep["checks"]["common_order"]["count"] == 0
    (bad,) = rep["bad_lines"]["first"]
    assert (bad["file"], bad["line"], bad["problem"]) == (str(folder / "bob.txt"), 5, schema.NOT_A_FRAME)


def test_a_message_missing_in_the_middle_is_a_violation(spark, tmp_path):
    bob = CLASS[:2] + CLASS[3:]
    folder = write_class(tmp_path / "class", bob=bob)
    code, out, rep = run_verify(folder, "--report-dir", tmp_path / "out")
    assert code == 1
    (gap,) = rep["checks"]["agreement"]["first"]
    assert (gap["clock"], gap["pid"], gap["missing"]) == (CLASS[2][0], CLASS[2][1], ["bob.txt"])
    assert rep["incomplete"] == []
    (off,) = rep["checks"]["common_order"]["first"]
    assert off == {"peer": "bob.txt", "file": str(folder / "bob.txt"), "line": 3, "index": 3,
                   "has": {"clock": CLASS[3][0], "from": CLASS[3][1]},
                   "expected": {"clock": CLASS[2][0], "from": CLASS[2][1]},
                   "as_in": [TOM_PEER, "alice.txt"]}
    assert (f"bob.txt departs from the common order at line 3 ({folder}/bob.txt): has "
            f"({CLASS[3][0]}, {CLASS[3][1]}) where ({CLASS[2][0]}, {CLASS[2][1]}) belongs, as in "
            f"{TOM_PEER}, alice.txt") in out


def test_a_named_file_that_is_no_output_is_one_line(spark, tmp_path):
    folder = write_class(tmp_path / "class")
    code, out, rep = run_verify(folder / "alice.txt", folder / "peer.log", "--report-dir", tmp_path / "out")
    line = (f"skipped {folder}/peer.log: line 1 is neither a TOM record nor a handout frame: "
            "Loaded 4 neighbors")
    assert code == 0 and rep["skipped"] == [line] and line in out.splitlines()
    code, out, rep = run_verify(folder / "peer.log", "--report-dir", tmp_path / "out2")
    assert code == 2
    assert out.splitlines()[:2] == ["UNUSABLE INPUT", f"  {line}"]


def test_a_handout_class_beside_a_tom_lamport_run_is_unusable(spark, tmp_path):
    from tests.analysis.conftest import message
    folder = write_class(tmp_path / "class")
    (folder / "lamport.jsonl").write_text(json.dumps(message("127.0.0.1:6000", 1, 1, "127.0.0.1:6000")))
    code, out, _ = run_verify(folder, "--report-dir", tmp_path / "out")
    assert code == 2
    assert out.splitlines()[1] == (f"  the files disagree about the order: lamport in {folder}/lamport.jsonl; "
                                   f"handout in {folder}/alice.txt, {folder}/bob.txt, {folder}/p2.jsonl")


def test_tom_s_handout_json_lines_alone_take_the_one_pass(spark, tmp_path):
    folder = tmp_path / "tom"
    folder.mkdir()
    for peer in (TOM_PEER, "127.0.0.1:5003"):
        (folder / f"{peer[-4:]}.jsonl").write_text("".join(
            json.dumps(handout_record(peer, i + 1, c, o, t)) + "\n" for i, (c, o, t) in enumerate(CLASS)))
    code, out, rep = run_verify(folder, "--report-dir", tmp_path / "out")
    assert code == 0, out
    assert rep["order"] == "handout" and (rep["proof"], rep["fast_path"]) == ("one pass", "conclusive")


def _without_notes(rep: dict) -> dict:
    """A report without what says how it was settled (proof, timing, each check's note and
    figures): each check's count and first rows, and everything else."""
    out = {k: v for k, v in rep.items() if k not in ("timing", "proof", "fast_path", "order_check")}
    out["checks"] = {name: (c["count"], c["first"]) for name, c in rep["checks"].items()}
    return out


def test_a_healthy_class_is_settled_by_the_one_pass_with_the_exact_checks_report(spark, tmp_path):
    """A class's text outputs go through the same summary as TOM's runs: a healthy class is proven
    in one pass, with the report the exact checks give (all but how each check was settled)."""
    from analysis import verify

    folder = write_class(tmp_path / "class")
    inputs = schema.resolve_inputs(spark, [str(folder)])
    files, texts = inputs.files, inputs.texts
    rep = verify.verify(spark, [str(folder)]).as_json()
    assert (rep["verdict"], rep["proof"], rep["order_check"]) == (
        "VERIFIED", "one pass", "window (the handout's order)")
    exact = verify.Report(rep["inputs"], files=rep["files"])
    verify._verify_exact(spark, files, verify.FIRST_ROWS, exact, lambda name: None, texts=texts)
    exact = exact.as_json()
    assert exact["verdict"] == "VERIFIED"
    assert _without_notes(rep) == _without_notes(exact)


@pytest.mark.parametrize("fault", ["swap", "cut_short", "missing", "tampered"])
def test_every_fault_of_a_class_hands_over_to_the_exact_checks(spark, tmp_path, fault):
    """A swap is an order mark, a file cut short or missing a message and a changed text a
    fingerprint mismatch: the one pass does not settle, and the exact checks decide as before."""
    from analysis import verify

    bob = {"swap": CLASS[:2] + [CLASS[3], CLASS[2]] + CLASS[4:], "cut_short": CLASS[:4],
           "missing": CLASS[:2] + CLASS[3:],
           "tampered": CLASS[:1] + [(CLASS[1][0], CLASS[1][1], "tampered")] + CLASS[2:]}[fault]
    folder = write_class(tmp_path / "class", bob=bob)
    inputs = schema.resolve_inputs(spark, [str(folder)])
    files, texts = inputs.files, inputs.texts
    result = verify.Report([])
    assert not verify._verify_fast(spark, files, verify.FIRST_ROWS, result, lambda name: None,
                                   order="handout", texts=texts)
    rep = verify.verify(spark, [str(folder)]).as_json()
    assert (rep["proof"], rep["fast_path"]) == ("exact checks", "not conclusive: exact checks run")
    assert rep["verdict"] == ("VERIFIED" if fault == "cut_short" else "VIOLATED")
