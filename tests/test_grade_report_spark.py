"""The output-file check of `tom grade` (analysis/grade.py): each transform on tiny inline frames,
silent on a right file and catching the fault it names."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.testing import assertDataFrameEqual  # noqa: E402

from analysis import grade  # noqa: E402 -- this checkout's (tests/analysis/__init__.py)

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("analysis-1")]
"""(Under scripts/test, on the worker of the verifier's first group, whose Spark session is active:
the report's way to start Spark reuses it, and no other JVM starts and warms up for these tests.)"""

A, B, C = "localhost/127.0.0.1:5000", "localhost/127.0.0.1:5001", "localhost/127.0.0.1:5002"
MSGS = [(1, A, "hi"), (1, B, "yo"), (2, C, "a-b: c")]


def acked(msgs, n=3):
    return [f"{n} ACKs on MESSAGE-{c}-{s}-{t}" for c, s, t in msgs]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """The report's own way to start Spark (analysis.session.build_session), on one core with one
    shuffle partition; an already active session (the analysis tests') is reused and left running."""
    import os
    import shutil
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java 17+ is required for the Spark tests")
    from pyspark.sql import SparkSession

    from analysis.session import build_session
    owned = SparkSession.getActiveSession() is None
    session = build_session("local[1]", log_dir=tmp_path_factory.mktemp("spark"), app_name="tom-grade-tests")
    previous = session.conf.get("spark.sql.shuffle.partitions")
    session.conf.set("spark.sql.shuffle.partitions", "1")
    yield session
    session.conf.set("spark.sql.shuffle.partitions", previous)
    if owned:
        session.stop()


def files(spark, runs: dict[tuple[str, str, int], dict[str, list[str]]], root="file:/class/out"):
    """The ``file, content`` frame of ``{(student, test, repeat): {"tool.out" | "peers/0.out": lines}}``."""
    rows = [(f"{root}/runs/{s}/{t}/{r}/{name}", "".join(line + "\n" for line in lines))
            for (s, t, r), named in runs.items() for name, lines in named.items()]
    return spark.createDataFrame(rows, grade.FILES_SCHEMA)


def judged(spark, runs, members=3, forms=None):
    """``{(student, test, repeat): row}`` of :func:`analysis.grade.first_wrong` over ``runs``."""
    lines = grade.numbered_lines(grade.locate(files(spark, runs)))
    expected = grade.expected_order(grade.by_run(grade.parse_lines(lines, forms)))
    table = grade.run_table(spark, [(*k, members) for k in runs])
    return {(r.student, r.test, r.repeat): r for r in grade.first_wrong(table, expected).collect()}


def one_run(tool, peers=(MSGS, MSGS), key=("ann", "tie", 1)):
    named = {"tool.out": tool} if tool is not None else {}
    named.update({f"peers/{i}.out": acked(p) for i, p in enumerate(peers)})
    return {key: named}


# --------------------------------------------------------------------------- locate, lines, parse

def test_locate_reads_student_test_repeat_and_source_from_the_path(spark):
    frame = spark.createDataFrame([
        ("file:/c/out/runs/ann%20lee/tie/2/tool.out", "x"),
        ("file:/c/out/runs/ann/clock/10/peers/1.out", "y"),
        ("file:/c/out/runs/ann/clock/10/terminal.log", "z"),
        ("file:/c/out/runs/ann/clock/x/tool.out", "w"),
        ("file:/c/out/runs/a+b/tie/1/tool.out", "v"),
    ], grade.FILES_SCHEMA)
    assertDataFrameEqual(grade.locate(frame), spark.createDataFrame([
        ("ann lee", "tie", 2, "tool", None, "x"),
        ("ann", "clock", 10, "peer", "1", "y"),
        ("a+b", "tie", 1, "tool", None, "v"),
    ], "student string, test string, repeat int, source string, peer string, content string"))


def test_numbered_lines_count_blank_lines_and_drop_the_final_newline(spark):
    located = spark.createDataFrame([
        ("ann", "tie", 1, "tool", None, "a\n\nb\r\nc"),
        ("ann", "tie", 1, "peer", "0", "p\n"),
        ("ann", "tie", 1, "peer", "1", ""),
    ], "student string, test string, repeat int, source string, peer string, content string")
    assertDataFrameEqual(grade.numbered_lines(located), spark.createDataFrame([
        ("ann", "tie", 1, "tool", None, 1, "a"), ("ann", "tie", 1, "tool", None, 2, ""),
        ("ann", "tie", 1, "tool", None, 3, "b"), ("ann", "tie", 1, "tool", None, 4, "c"),
        ("ann", "tie", 1, "peer", "0", 1, "p"),
    ], "student string, test string, repeat int, source string, peer string, line_no int, line string"))


def lines_frame(spark, rows):
    return spark.createDataFrame(
        [("ann", "tie", 1, source, None if source == "tool" else "0", i + 1, line)
         for i, (source, line) in enumerate(rows)],
        "student string, test string, repeat int, source string, peer string, line_no int, line string")


def test_parse_lines_reads_both_handout_forms_and_names_what_is_not_one(spark):
    parsed = grade.parse_lines(lines_frame(spark, [
        ("tool", f"3 ACKs on MESSAGE-4-{A}-a-b: c"), ("tool", f"MESSAGE-12-{B}-"),
        ("tool", "   "), ("tool", "hello"), ("tool", f"MESSAGE-99999999999999999999-{A}-x"),
    ])).select("clock", "sender", "text", "acks", "problem")
    assertDataFrameEqual(parsed, spark.createDataFrame([
        (4, A, "a-b: c", 3, None), (12, B, "", None, None), (None, None, None, None, "blank"),
        (None, None, None, None, grade.NOT_A_MESSAGE), (None, None, None, None, grade.CLOCK_RANGE),
    ], "clock long, sender string, text string, acks int, problem string"))


def test_a_students_line_form_applies_to_their_tool_only(spark):
    form = grade.line_form(r"^delivered (?P<text>.*) from (?P<sender>\S+) at (?P<clock>\d+)$")
    parsed = grade.parse_lines(lines_frame(spark, [
        ("tool", f"delivered hi there from {A} at 7"), ("peer", f"3 ACKs on MESSAGE-7-{A}-hi there"),
        ("tool", f"3 ACKs on MESSAGE-7-{A}-hi there"),
    ]), {"ann": form}).select("clock", "sender", "text", "acks", "problem")
    assertDataFrameEqual(parsed, spark.createDataFrame([
        (7, A, "hi there", None, None), (7, A, "hi there", 3, None),
        (None, None, None, None, grade.NOT_A_MESSAGE),
    ], "clock long, sender string, text string, acks int, problem string"))


def test_line_form_takes_java_or_python_named_groups_and_refuses_a_missing_one():
    assert grade.line_form(r"(?<clock>\d+) (?<sender>\S+) (?<text>.*)") == \
        grade.line_form(r"(?P<clock>\d+) (?P<sender>\S+) (?P<text>.*)")
    assert grade.line_form(r"(?<=x)(?<clock>\d+) (?<sender>\S+) (?<text>.*)").regex.startswith("(?<=x)")
    with pytest.raises(ValueError, match="sender"):
        grade.line_form(r"(?P<clock>\d+) (?P<text>.*)")
    with pytest.raises(ValueError, match="compile"):
        grade.line_form(r"(?P<clock>\d+")


def test_glob_escape_keeps_hadoop_globs_from_reading_names():
    assert grade.glob_escape("/o/runs/a[1]{x}*?") == r"/o/runs/a\[1\]\{x\}\*\?"


# --------------------------------------------------------------------------- by run, expected

def test_by_run_splits_tool_and_peers_in_file_order_without_blanks(spark):
    rows = grade.by_run(grade.parse_lines(grade.numbered_lines(grade.locate(files(spark, one_run(
        [acked(MSGS)[1], "", acked(MSGS)[0]], peers=(MSGS, MSGS[:2]))))))).collect()
    (row,) = rows
    assert [(t.line_no, t.clock, t.sender) for t in row.tool] == [(1, 1, B), (3, 1, A)]
    assert [[(k.clock, k.sender, k.text) for k in p] for p in row.peers] == [MSGS, MSGS[:2]]
    assert row.peer_problem is False


def test_expected_order_is_the_longest_peer_and_a_prefix_agrees(spark):
    def agree(*peers):
        (row,) = grade.expected_order(grade.by_run(grade.parse_lines(grade.numbered_lines(grade.locate(
            files(spark, one_run(acked(MSGS[:1]), peers=peers))))))).collect()
        return row.peers_agree, [(k.clock, k.sender, k.text) for k in row.expected]

    assert agree(MSGS, MSGS) == (True, MSGS)
    assert agree(MSGS[:1], MSGS) == (True, MSGS)       # a peer stopped a little earlier
    assert agree([MSGS[1], MSGS[0]], MSGS)[0] is False  # two orders: a grader bug
    assert agree() == (True, [])                        # no peer file: nothing expected


# --------------------------------------------------------------------------- the verdict

def test_a_right_file_passes_in_either_form(spark):
    bare = [f"MESSAGE-{c}-{s}-{t}" for c, s, t in MSGS]
    for tool in (acked(MSGS), bare, [acked(MSGS)[0], "", *bare[1:]]):
        row = judged(spark, one_run(tool))[("ann", "tie", 1)]
        assert (row.ok, row.line_no, row.reason, row.tool_messages, row.peer_messages) == (True, None, None, 3, 3)


@pytest.mark.parametrize(("tool", "line_no", "expected", "found", "reason"), [
    (acked([MSGS[1], MSGS[0], MSGS[2]]), 1, acked(MSGS)[0], acked(MSGS)[1], "out of order"),
    (acked(MSGS[:2]), 3, acked(MSGS)[2], grade.MISSING, "missing"),
    (acked([MSGS[0], MSGS[2]]), 2, acked(MSGS)[1], acked(MSGS)[2],
     "missing: the expected message is nowhere in tool.out"),
    (acked([*MSGS, MSGS[1]]), 4, "no line here: the TOM peers delivered 3 messages", acked(MSGS)[1],
     "duplicate"),
    (acked([MSGS[0], MSGS[0], *MSGS[1:]]), 2, acked(MSGS)[1], acked(MSGS)[0], "duplicate"),
    (acked([*MSGS, (9, A, "x")]), 4, "no line here: the TOM peers delivered 3 messages",
     acked([(9, A, "x")])[0], "not delivered by the TOM peers"),
    (acked(MSGS[:2]) + acked(MSGS[2:], n=2), 3, acked(MSGS)[2], acked(MSGS[2:], n=2)[0], "ACK count 2, not 3"),
    ([acked(MSGS)[0], "", "garbage", *acked(MSGS)[1:]], 3, acked(MSGS)[1], "garbage", grade.NOT_A_MESSAGE),
    (None, 1, acked(MSGS)[0], grade.MISSING, "missing"),
    ([f"MESSAGE-{c}-{s}-{t}" for c, s, t in MSGS[:2]], 3, f"MESSAGE-2-{C}-a-b: c", grade.MISSING, "missing"),
])
def test_the_first_wrong_line_is_named_with_its_number(spark, tool, line_no, expected, found, reason):
    row = judged(spark, one_run(tool))[("ann", "tie", 1)]
    assert (row.ok, row.line_no, row.expected, row.found, row.reason) == \
        (False, line_no, expected, found, reason)


def test_peers_that_disagree_fail_the_run_as_a_grader_bug(spark):
    row = judged(spark, one_run(acked(MSGS), peers=(MSGS, [MSGS[1], MSGS[0], MSGS[2]])))[("ann", "tie", 1)]
    assert (row.ok, row.line_no, row.reason) == (False, None, grade.PEERS_DISAGREE)
    runs = one_run(acked(MSGS))
    runs[("ann", "tie", 1)]["peers/1.out"].append("oops")
    row = judged(spark, runs)[("ann", "tie", 1)]
    assert (row.ok, row.line_no, row.reason) == (False, None, grade.PEER_UNREADABLE)


def test_runs_are_judged_apart_and_a_run_without_files_is_one_row(spark):
    runs = {**one_run(acked(MSGS), key=("ann", "tie", 1)),
            **one_run(acked(MSGS[:1]), key=("ann", "tie", 2)),
            **one_run(acked([MSGS[1], MSGS[0], MSGS[2]]), key=("bob", "tie", 1)),
            ("bob", "tie", 2): {}}
    rows = judged(spark, runs)
    assert {k: (r.ok, r.line_no) for k, r in rows.items()} == {
        ("ann", "tie", 1): (True, None), ("ann", "tie", 2): (False, 2),
        ("bob", "tie", 1): (False, 1), ("bob", "tie", 2): (True, None)}


def test_without_members_the_ack_count_is_not_judged(spark):
    row = judged(spark, one_run(acked(MSGS, n=7)), members=None)[("ann", "tie", 1)]
    assert row.ok is True


def test_a_custom_form_is_judged_like_the_handouts(spark):
    form = grade.line_form(r"^(?P<clock>\d+) (?P<sender>\S+) (?P<text>.*)$")
    tool = [f"{c} {s} {t}" for c, s, t in (MSGS[1], MSGS[0], MSGS[2])]
    row = judged(spark, one_run(tool), forms={"ann": form})[("ann", "tie", 1)]
    assert (row.ok, row.line_no, row.expected, row.found, row.reason) == \
        (False, 1, f"MESSAGE-1-{A}-hi", tool[0], "out of order")


def test_judge_reads_a_class_folder_in_one_job(spark, tmp_path):
    for (s, t, r), named in {**one_run(acked(MSGS), key=("ann lee", "tie", 1)),
                             **one_run(acked(MSGS[::-1]), key=("b[o]b", "tie", 1))}.items():
        for name, lines in named.items():
            path = tmp_path / "runs" / s / t / str(r) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in lines))
    checks = grade.judge(spark, tmp_path, [("ann lee", "tie", 1, 3), ("b[o]b", "tie", 1, 3),
                                            ("cy", "tie", 1, 3)])
    assert checks[("ann lee", "tie", 1)].ok
    assert (checks[("b[o]b", "tie", 1)].ok, checks[("b[o]b", "tie", 1)].line_no) == (False, 1)
    assert checks[("cy", "tie", 1)].ok  # no files: the peers delivered nothing, nor did the tool
    assert grade.judge(spark, tmp_path / "empty", [("x", "tie", 1, 3)])[("x", "tie", 1)].ok
