"""Parsing: every line becomes a record or a counted, located bad line."""

from __future__ import annotations

import json

import pytest

from analysis import schema
from tests.analysis.conftest import PEERS, message

pytestmark = pytest.mark.spark
A, B = PEERS[0], PEERS[1]


def test_good_lines_parse_with_pid_split(parse):
    line = json.dumps(message(A, 1, 3, "10.0.0.1:10000"))
    row = schema.good_records(parse({"f": [line]})).first()
    assert (row.peer, row["index"], row.clock, row.host, row.port) == (A, 1, 3, "10.0.0.1", 10000)


@pytest.mark.parametrize(("line", "problem"), [
    ('{"v":1,"kind":"message","index":2,"peer":"a:1","clo', "not valid JSON (torn or corrupt line)"),
    ("", "blank line"),
    ('{"v":1,"kind":"message","index":"x","peer":"a:1","clock":1,"pid":"b:2","text":"t",'
     '"sent_at":1.0,"delivered_at":1.1,"view":1}', "missing or ill-typed: index"),
    ('{"v":3,"kind":"message","index":1,"peer":"a:1","clock":1,"pid":"b:2","text":"t",'
     '"sent_at":1.0,"delivered_at":1.1,"view":1}', "unsupported schema version v=3"),
    ('{"v":1,"kind":"message","index":1,"peer":"a:1","clock":1,"pid":"b","text":"t",'
     '"sent_at":1.0,"delivered_at":1.1,"view":1}', "pid is not host:port"),
    ('{"v":1,"kind":"view","index":1,"peer":"a:1","clock":1,"pid":"b:2",'
     '"delivered_at":1.1,"view":1}', "missing or ill-typed: members"),
])
def test_bad_lines_are_kept_with_a_reason(parse, line, problem):
    good = json.dumps(message(A, 1, 1, A))
    parsed = parse({"f": [good, line]})
    assert schema.good_records(parsed).count() == 1
    bad = schema.bad_lines(parsed).collect()
    assert [b.problem for b in bad] == [problem]


def test_torn_last_line_is_counted_and_located(spark, tmp_path):
    lines = [json.dumps(message(A, i, i, A)) for i in range(1, 4)]
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines) + "\n" + lines[0][:25])
    parsed = schema.parse_lines(schema.read_lines(spark, [f"file:{path}"])).cache()
    blocks = [r.asDict() for r in schema.block_stats(parsed).collect()]
    (summary,), offsets = schema.file_summaries(blocks, [f"file:{path}"])
    assert (summary.lines, summary.records, summary.bad_lines, summary.torn_last_line) == (4, 3, 1, True)
    bad = schema.bad_lines(parsed).first()
    assert schema.line_number(offsets, bad.file, bad.block_start, bad.row) == 4
    parsed.unpersist()


def test_line_numbers_survive_file_splits(spark, tmp_path):
    """A corrupt line deep in a file split into many blocks still gets its true line number."""
    lines = [json.dumps(message(A, i, i, A)) for i in range(1, 201)]
    lines[150] = "garbage"
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")
    try:
        parsed = schema.parse_lines(schema.read_lines(spark, [f"file:{path}"])).cache()
        blocks = [r.asDict() for r in schema.block_stats(parsed).collect()]
        assert len(blocks) > 3
        (summary,), offsets = schema.file_summaries(blocks, [f"file:{path}"])
        bad = schema.bad_lines(parsed).first()
        assert summary.lines == 200 and not summary.torn_last_line
        assert schema.line_number(offsets, bad.file, bad.block_start, bad.row) == 151
        parsed.unpersist()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


def test_resolve_inputs_expands_folders_and_globs(spark, tmp_path):
    (tmp_path / "a.jsonl").write_text("x\n")
    (tmp_path / "b.jsonl").write_text("x\n")
    (tmp_path / "notes.txt").write_text("x\n")
    found = schema.resolve_inputs(spark, [str(tmp_path), str(tmp_path / "a*"), str(tmp_path / "nope")])
    assert [f.rsplit("/", 1)[1] for f in found.files] == ["a.jsonl", "b.jsonl"]
    assert found.missing == [str(tmp_path / "nope")]


def test_braces_expand_as_hadoop_globs():
    assert schema.expand_braces("r/{a,b{1,2}}/*.jsonl") == ["r/a/*.jsonl", "r/b1/*.jsonl", "r/b2/*.jsonl"]
    assert schema.expand_braces("plain.jsonl") == ["plain.jsonl"]


def test_local_inputs_are_listed_without_the_jvm(tmp_path):
    """No session at all: local paths, ``file:`` paths and braces are listed in Python."""
    for name in ("a.jsonl", "b.jsonl", "notes.txt"):
        (tmp_path / name).write_text("{}\n")
    found = schema.resolve_inputs(None, [f"file:{tmp_path}", str(tmp_path / "{a,nope}.jsonl"),
                                         str(tmp_path / "notes.txt"), str(tmp_path / "x*")])
    assert found.files == [f"file:{tmp_path}/a.jsonl", f"file:{tmp_path}/b.jsonl",
                           f"file:{tmp_path}/notes.txt"]
    assert found.missing == [str(tmp_path / "x*")]


def test_remote_uris_are_listed_by_spark(spark, tmp_path):
    """The URI route (``DataFrame.inputFiles``, also on Spark Connect), driven with file:// URIs."""
    (tmp_path / "run").mkdir()
    for name in ("a.jsonl", "b.jsonl", "notes.txt"):
        (tmp_path / "run" / name).write_text("{}\n")
    uri = f"file://{tmp_path}/run"
    assert [f.rsplit("/", 1)[1] for f in schema._resolve_remote(spark, uri)] == ["a.jsonl", "b.jsonl"]
    assert [f.rsplit("/", 1)[1] for f in schema._resolve_remote(spark, uri + "/notes.txt")] == ["notes.txt"]
    assert schema._resolve_remote(spark, uri + "/nope") is None
    assert schema._resolve_remote(spark, uri + "/*.csv") is None


def test_frame_traces_beside_the_outputs_are_never_read_as_peers(tmp_path):
    """A run folder of scripts/launch holds each peer's output and its frame trace (``tom peer --trace``):
    a folder lists the outputs only, a trace being known by its name or, whatever its name, by its
    first line; a trace named on the command line is skipped with one line saying what it is."""
    (tmp_path / "7001.jsonl").write_text('{"event":"deliver"}\n')
    header = '{"trace":1,"peer":"127.0.0.1:7001","incarnation":1,"order":"lamport","t":1.0}\n'
    (tmp_path / "7001.trace").write_text(header)
    (tmp_path / "7002.trace").write_text("")  # (not begun yet: known by its name)
    (tmp_path / "renamed.jsonl").write_text(header)
    found = schema.resolve_inputs(None, [str(tmp_path)])
    assert found.files == [f"file:{tmp_path / '7001.jsonl'}"] and found.skipped == []
    assert schema.resolve_inputs(None, [str(tmp_path / "7002.trace")]).files == []
    named = schema.resolve_inputs(None, [str(tmp_path / "renamed.jsonl")])
    assert named.files == [] and named.skipped == [
        f"skipped {tmp_path / 'renamed.jsonl'}: a frame trace (tom peer --trace), not an output file"]
