"""The output-file check of ``tom grade``: one Spark job over every run of a class.

Contract (docs/grading.md, "The report"): each run ``OUT/runs/<student>/<test>/<repeat>/`` holds the
tool's output file ``tool.out`` and the deliveries of TOM's scripted peers, ``peers/<i>.out``. A run's
tool file is right when, line by line, it holds the messages the TOM peers delivered, in their order,
each once, and -- on a line whose form carries one -- the ACK count ``n`` (the group's size). The
peers' files are the reference: they must agree with each other (one may be a prefix of another: a
peer stopped a little earlier); when they do not, the run's check says ``peers disagree``, which is
a grader bug, not the student's.

The job reads, then transforms (each a pure ``DataFrame -> DataFrame`` function, no action), then
collects one row per run:

  read_outputs -> locate -> numbered_lines -> parse_lines -> by_run -> expected_order -> first_wrong

with exactly one shuffle (the grouping of every line by run key ``(student, test, repeat)``); the
run table (one row per result.json, small) is joined to it. Line forms: the handout's
``<n> ACKs on MESSAGE-<clock>-<from>-<text>`` and the bare ``MESSAGE-<clock>-<from>-<text>``, or per
student a regex with named groups ``clock``, ``sender``, ``text`` (and optionally ``acks``) from
``[output] line_regex`` of the student's tom-grade.toml (:func:`line_form`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

RUN = ("student", "test", "repeat")
TOOL, PEER = "tool", "peer"

HANDOUT_REGEX = r"^(?:(?<acks>[0-9]+) ACKs on )?MESSAGE-(?<clock>[0-9]+)-(?<sender>.+?:[0-9]+)-(?<text>.*)$"
"""The handout's line form, ``MESSAGE-<clock>-<from>-<text>`` maybe after ``<n> ACKs on ``; ``<from>``
ends at the first ``:<digits>-`` after the clock, as in analysis.schema.HANDOUT_LINE."""

NOT_A_MESSAGE = "not a message line"
CLOCK_RANGE = "clock out of range"
MISSING = "missing"
PEERS_DISAGREE = "peers disagree (a grader bug: the TOM peers' files differ)"
PEER_UNREADABLE = "a TOM peer's file has a line that is not a message (a grader bug)"

RUNS_SCHEMA = "student string, test string, repeat int, members int"
"""The run table: one row per result.json; ``members`` is the group's size n (the tool and TOM's
peers), the ACK count each line must show; null to skip that check."""

FILES_SCHEMA = "file string, content string"

_GLOB_SPECIAL = re.compile(r"([\\*?\[\]{}])")


@dataclass(frozen=True)
class LineForm:
    """A line form: a Java regex and the numbers of its groups (``acks`` 0 when it has none)."""

    regex: str
    clock: int
    sender: int
    text: int
    acks: int = 0


def line_form(regex: str) -> LineForm:
    """The :class:`LineForm` of a regex with named groups ``clock``, ``sender``, ``text`` and
    optionally ``acks``, written ``(?P<name>...)`` (Python) or ``(?<name>...)`` (Java); ValueError
    when it does not compile or lacks a group. It must be one that Java's regex engine reads too
    (the match runs in Spark); it is searched in the line, so anchor it with ``^...$``."""
    python = re.sub(r"\(\?<(?=[A-Za-z])", "(?P<", regex)
    try:
        groups = re.compile(python).groupindex
    except re.error as exc:
        raise ValueError(f"line_regex does not compile: {exc}") from None
    lacking = [g for g in ("clock", "sender", "text") if g not in groups]
    if lacking:
        raise ValueError(f"line_regex lacks the named group(s) {', '.join(lacking)}: {regex}")
    return LineForm(regex=python.replace("(?P<", "(?<"), clock=groups["clock"],
                    sender=groups["sender"], text=groups["text"], acks=groups.get("acks", 0))


HANDOUT = line_form(HANDOUT_REGEX)


def glob_escape(path: str) -> str:
    """``path`` with Hadoop's glob characters escaped, so that it matches only itself."""
    return _GLOB_SPECIAL.sub(r"\\\1", path)


# --------------------------------------------------------------------------- read

def output_globs(out: Path) -> list[str]:
    """The globs of every run's files under ``out`` that match at least one file (Spark refuses a
    glob that matches nothing)."""
    runs = out.resolve() / "runs"
    patterns = ("*/*/*/tool.out", "*/*/*/peers/*.out")
    return [f"{glob_escape(str(runs))}/{p}" for p in patterns if next(runs.glob(p), None) is not None]


SERIAL_LISTING = {"spark.sql.sources.parallelPartitionDiscovery.threshold": str(2**31 - 1)}
"""Past 32 paths Spark lists files with a Spark job of its own: ~4 s for a class of 20 on 2 cores,
where the driver lists the same local folders in ~0.2 s."""


def read_outputs(spark: SparkSession, globs: list[str]) -> DataFrame:
    """``file, content``: each matching file whole, one row per file (a run's files are small).
    The files are listed when the frame is made, by the driver."""
    if not globs:
        return spark.createDataFrame([], FILES_SCHEMA)
    from analysis.session import sql_settings
    with sql_settings(spark, SERIAL_LISTING):
        return spark.read.text(globs, wholetext=True).select(
            F.col("_metadata.file_path").alias("file"), F.col("value").alias("content"))


def run_table(spark: SparkSession, runs: list[tuple[str, str, int, int | None]]) -> DataFrame:
    """The run table (:data:`RUNS_SCHEMA`) from ``(student, test, repeat, members)`` tuples."""
    return spark.createDataFrame(runs, RUNS_SCHEMA)


# --------------------------------------------------------------------------- transforms

def _decoded(part: Column) -> Column:
    """A path component from Spark's URI form of a path (``%XX`` escapes; ``+`` is a plus)."""
    return F.coalesce(F.try_url_decode(F.replace(part, F.lit("+"), F.lit("%2B"))), part)


_PATH = r"/runs/([^/]+)/([^/]+)/([0-9]+)/(tool\.out|peers/([^/]+)\.out)$"


def locate(files: DataFrame) -> DataFrame:
    """``student, test, repeat, source, peer, content`` from ``file, content``: the run of each file
    read from its path (``.../runs/<student>/<test>/<repeat>/``), ``source`` :data:`TOOL` for
    tool.out and :data:`PEER` for peers/<peer>.out (``peer`` null for the tool). Files elsewhere
    are dropped."""
    part = lambda i: F.regexp_extract("file", _PATH, i)  # noqa: E731
    return (files.filter(F.col("file").rlike(_PATH))
            .select(_decoded(part(1)).alias("student"), _decoded(part(2)).alias("test"),
                    part(3).try_cast("int").alias("repeat"),
                    F.when(part(4) == "tool.out", F.lit(TOOL)).otherwise(F.lit(PEER)).alias("source"),
                    F.when(part(4) != "tool.out", _decoded(part(5))).alias("peer"),
                    "content"))


def numbered_lines(located: DataFrame) -> DataFrame:
    """One row per line: ``student, test, repeat, source, peer, line_no, line`` (``line_no`` from 1,
    blank lines counted, the empty piece after a final newline dropped). Lines end at ``\\n``,
    ``\\r\\n`` or ``\\r``, as Spark's text reader splits them."""
    pieces = F.split(F.col("content"), r"\r\n|\r|\n")
    return (located.select(*RUN, "source", "peer", F.posexplode(pieces).alias("pos", "line"),
                           F.size(pieces).alias("pieces"))
            .filter((F.col("line") != "") | (F.col("pos") < F.col("pieces") - 1))
            .select(*RUN, "source", "peer", (F.col("pos") + 1).alias("line_no"), "line"))


def _fields(form: LineForm) -> dict[str, Column]:
    line = F.col("line")
    extract = lambda i: F.regexp_extract(line, form.regex, i)  # noqa: E731
    return {"matched": line.rlike(form.regex),
            "clock": extract(form.clock).try_cast("long"),
            "sender": extract(form.sender),
            "text": extract(form.text),
            "acks": extract(form.acks).try_cast("int") if form.acks else F.lit(None).cast("int")}


def parse_lines(lines: DataFrame, forms: Mapping[str, LineForm] | None = None) -> DataFrame:
    """Adds ``clock, sender, text, acks, problem`` to :func:`numbered_lines`' rows.

    A TOM peer's line is read in the handout's form; a tool's in its student's form from ``forms``
    (student -> :class:`LineForm`), else the handout's. ``problem``: null for a message line,
    ``"blank"`` for a blank one, :data:`NOT_A_MESSAGE`, or :data:`CLOCK_RANGE`; the fields are null
    unless it is null. ``acks`` is null when the line's form carries no count.
    """
    fields = _fields(HANDOUT)
    for student, form in (forms or {}).items():
        chosen = (F.col("source") == TOOL) & (F.col("student") == student)
        fields = {k: F.when(chosen, v).otherwise(fields[k]) for k, v in _fields(form).items()}
    problem = (F.when(F.trim("line") == "", F.lit("blank"))
               .when(~fields["matched"], F.lit(NOT_A_MESSAGE))
               .when(fields["clock"].isNull(), F.lit(CLOCK_RANGE)))
    good = problem.isNull()
    return lines.select(*RUN, "source", "peer", "line_no", "line",
                        *(F.when(good, fields[k]).alias(k) for k in ("clock", "sender", "text", "acks")),
                        problem.alias("problem"))


def by_run(parsed: DataFrame) -> DataFrame:
    """One row per run with its lines, blank ones left out: ``student, test, repeat, tool, peers,
    peer_problem``. ``tool``: the tool's lines in file order, ``array<struct<line_no, line, clock,
    sender, text, acks, problem>>``; ``peers``: per TOM peer (by name) the keys it delivered in
    order, ``array<array<struct<clock, sender, text>>>``; ``peer_problem``: some peer line is not a
    message. The job's one shuffle."""
    kept = parsed.filter(F.coalesce(F.col("problem"), F.lit("")) != "blank")
    grouped = kept.groupBy(*RUN).agg(F.sort_array(F.collect_list(F.struct(
        "source", F.coalesce("peer", F.lit("")).alias("peer"), "line_no", "line", "clock", "sender",
        "text", "acks", "problem"))).alias("all"))
    lines = F.col("all")
    of_peers = F.filter(lines, lambda x: x["source"] == PEER)
    names = F.array_distinct(F.transform(of_peers, lambda x: x["peer"]))
    return grouped.select(
        *RUN,
        F.transform(F.filter(lines, lambda x: x["source"] == TOOL),
                    lambda x: F.struct(*(x[k].alias(k) for k in
                                         ("line_no", "line", "clock", "sender", "text", "acks",
                                          "problem")))).alias("tool"),
        F.transform(names, lambda p: F.transform(
            F.filter(of_peers, lambda x: x["peer"] == p),
            lambda x: F.struct(x["clock"].alias("clock"), x["sender"].alias("sender"),
                               x["text"].alias("text")))).alias("peers"),
        F.exists(of_peers, lambda x: x["problem"].isNotNull()).alias("peer_problem"))


def expected_order(runs: DataFrame) -> DataFrame:
    """Adds ``expected`` (the longest TOM peer's keys in order) and ``peers_agree`` (every peer's
    keys are a prefix of ``expected``) to :func:`by_run`'s rows."""
    peers = F.col("peers")
    empty = F.flatten(F.filter(peers, lambda p: F.lit(False)))
    longest = F.aggregate(peers, empty,
                          lambda acc, p: F.when(F.size(p) > F.size(acc), p).otherwise(acc))
    return (runs.withColumn("expected", longest)
            .withColumn("peers_agree", F.forall(
                peers, lambda p: F.slice(F.col("expected"), 1, F.size(p)) == p)))


def _key(x: Column) -> Column:
    return F.struct(x["clock"].alias("clock"), x["sender"].alias("sender"), x["text"].alias("text"))


def first_wrong(runs: DataFrame, expected: DataFrame) -> DataFrame:
    """One row per run of the run table ``runs`` (:data:`RUNS_SCHEMA`) judged against
    :func:`expected_order`'s rows: ``student, test, repeat, ok, line_no, expected, found, reason,
    tool_messages, peer_messages``.

    Position by position, the k-th message line of the tool's file must be the k-th message the TOM
    peers delivered (same clock, sender and text) and show ``members`` ACKs where its form has a
    count. The first position where it does not is the verdict: ``line_no`` (its line in tool.out,
    or the line after the last when the file ends early), the ``expected`` line (rendered in the
    handout's form), the line ``found`` (or :data:`MISSING`) and the ``reason``: ``missing``,
    ``duplicate``, ``out of order``, ``not delivered by the TOM peers``, ``ACK count``, or the
    line's parse problem. A run with no files has empty sequences (ok if the peers delivered
    nothing). ``peers disagree`` (or an unreadable peer line) fails the run with no line.
    """
    joined = runs.join(expected, list(RUN), "left")
    tool = F.coalesce(F.col("tool"), F.array().cast(expected.schema["tool"].dataType))
    want = F.coalesce(F.col("expected"), F.array().cast(expected.schema["expected"].dataType))
    n = F.col("members")
    last = F.greatest(F.size(tool), F.size(want))
    positions = F.when(last > 0, F.sequence(F.lit(1), last)).otherwise(F.array().cast("array<int>"))

    def at(arr: Column, i: Column) -> Column:
        return F.get(arr, i - 1)

    def wrong(i: Column) -> Column:
        t, x = at(tool, i), at(want, i)
        return (t.isNull() | x.isNull() | t["problem"].isNotNull() | (_key(t) != _key(x))
                | F.coalesce(t["acks"] != n, F.lit(False)))

    first = F.get(F.filter(positions, wrong), 0)
    step = joined.select(*RUN, "members", tool.alias("tool"), want.alias("want"),
                         F.coalesce("peers_agree", F.lit(True)).alias("peers_agree"),
                         F.coalesce("peer_problem", F.lit(False)).alias("peer_problem"),
                         first.alias("at"))
    tool, want, i = F.col("tool"), F.col("want"), F.col("at")
    t, x = at(tool, i), at(want, i)
    in_tool_before = F.exists(F.slice(tool, 1, F.greatest(i - 1, F.lit(0))),
                              lambda y: _key(y) == _key(t))
    in_want = F.exists(want, lambda y: _key(y) == _key(t))
    x_in_tool = F.exists(tool, lambda y: _key(y) == _key(x))
    reason = (F.when(t.isNull(), F.lit(MISSING))
              .when(t["problem"].isNotNull(), t["problem"])
              .when(in_tool_before, F.lit("duplicate"))
              .when(x.isNull() | ~in_want, F.lit("not delivered by the TOM peers"))
              .when(_key(t) == _key(x), F.concat(F.lit("ACK count "), t["acks"].cast("string"),
                                                   F.lit(", not "), n.cast("string")))
              .when(~x_in_tool, F.lit("missing: the expected message is nowhere in tool.out"))
              .otherwise(F.lit("out of order")))
    counted = F.exists(tool, lambda y: y["acks"].isNotNull()) | (F.size(tool) == 0)
    bare = F.concat(F.lit("MESSAGE-"), x["clock"].cast("string"), F.lit("-"), x["sender"], F.lit("-"),
                    x["text"])
    # the expected line in the form the file uses: with the count if any of its lines has one
    shows_acks = F.coalesce(t["acks"].isNotNull(), F.lit(False)) | counted
    rendered = (F.when(n.isNotNull() & shows_acks,
                       F.concat(n.cast("string"), F.lit(" ACKs on "), bare))
                .otherwise(bare))
    expected_line = F.when(x.isNull(), F.concat(F.lit("no line here: the TOM peers delivered "),
                                                F.size(want).cast("string"), F.lit(" messages")))
    expected_line = expected_line.otherwise(rendered)
    last_line = F.coalesce(F.array_max(F.transform(tool, lambda y: y["line_no"])), F.lit(0))
    grader_bug = ~F.col("peers_agree") | F.col("peer_problem")
    judged = i.isNotNull() & ~grader_bug
    return step.select(
        *RUN,
        (~grader_bug & i.isNull()).alias("ok"),
        F.when(judged, F.coalesce(t["line_no"], last_line + 1)).alias("line_no"),
        F.when(judged, expected_line).alias("expected"),
        F.when(judged, F.coalesce(t["line"], F.lit(MISSING))).alias("found"),
        F.when(F.col("peer_problem"), F.lit(PEER_UNREADABLE))
        .when(~F.col("peers_agree"), F.lit(PEERS_DISAGREE))
        .when(judged, reason).alias("reason"),
        F.size(tool).alias("tool_messages"), F.size(want).alias("peer_messages"))


# --------------------------------------------------------------------------- the job

@dataclass(frozen=True)
class FileCheck:
    """The check of one run's tool.out (see :func:`first_wrong`)."""

    ok: bool
    line_no: int | None
    expected: str | None
    found: str | None
    reason: str | None
    tool_messages: int
    peer_messages: int


def judge(spark: SparkSession, out: Path, runs: list[tuple[str, str, int, int | None]],
          forms: Mapping[str, LineForm] | None = None) -> dict[tuple[str, str, int], FileCheck]:
    """The file check of every run in ``runs`` (``(student, test, repeat, members)``) of the class
    folder ``out``: one Spark job, one row per run brought back."""
    lines = numbered_lines(locate(read_outputs(spark, output_globs(out))))
    grouped = expected_order(by_run(parse_lines(lines, forms)))
    rows = first_wrong(run_table(spark, runs), grouped).collect()
    return {(r.student, r.test, r.repeat): FileCheck(r.ok, r.line_no, r.expected, r.found, r.reason,
                                                     r.tool_messages, r.peer_messages)
            for r in rows}


__all__ = ["HANDOUT", "HANDOUT_REGEX", "FileCheck", "LineForm", "by_run", "expected_order",
           "first_wrong", "glob_escape", "judge", "line_form", "locate", "numbered_lines",
           "output_globs", "parse_lines", "read_outputs", "run_table"]
