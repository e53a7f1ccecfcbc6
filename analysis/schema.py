"""Schemas v1 and v2 of TOM output files, input resolution and parsing (docs/output-format.md).

Invariants of :func:`parse_lines`:

* every input line yields exactly one row: a good record (``problem`` is null) or a bad line (``problem``
  says why, ``excerpt`` keeps its first 120 characters); nothing is dropped, nothing is fatal;
* parsing uses the explicit :data:`RECORD_SCHEMA` (never inference); ill-typed values become nulls
  (``from_json`` is permissive, ``try_cast`` for the port), so ANSI mode never raises on bad input;
* ``row`` is a monotonically increasing id taken at the scan; together with ``file`` and
  ``block_start`` (the byte offset of the file split) it yields the 1-based line number of any row
  (see :func:`line_number`) without numbering every line through a shuffle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

SCHEMA_VERSIONS = (1, 2)
ORDERS = ("lamport", "sequencer", "causal")
"""The orders a group can run; a v1 record, and a v2 message with neither ``seq`` nor ``vc``,
belong to a Lamport run."""
HANDOUT = "handout"
"""The order of a handout run (docs/output-format.md, "Handout output files"): ``(clock, from as
written)``, ``from`` compared as a string. Named by every line of a course tool's text output and by
every TOM record with ``"wire": "handout"``; no view record names it (the handout's groups are
static)."""

RECORD_SCHEMA = T.StructType([
    T.StructField("v", T.IntegerType()),
    T.StructField("kind", T.StringType()),
    T.StructField("index", T.LongType()),
    T.StructField("peer", T.StringType()),
    T.StructField("clock", T.LongType()),
    T.StructField("pid", T.StringType()),
    T.StructField("delivered_at", T.DoubleType()),
    T.StructField("view", T.LongType()),
    T.StructField("text", T.StringType()),
    T.StructField("sent_at", T.DoubleType()),
    T.StructField("members", T.ArrayType(T.StringType())),
    T.StructField("joined", T.ArrayType(T.StringType())),
    T.StructField("left", T.ArrayType(T.StringType())),
    T.StructField("removed", T.ArrayType(T.StringType())),
    T.StructField("order", T.StringType()),
    T.StructField("seq", T.LongType()),
    T.StructField("vc", T.MapType(T.StringType(), T.LongType())),
    T.StructField("from", T.StringType()),
    T.StructField("wire", T.StringType()),
    T.StructField("durable", T.BooleanType()),
    T.StructField("caught_up", T.BooleanType()),
    T.StructField("after", T.ArrayType(T.LongType())),
    T.StructField("reason", T.StringType()),
])
"""One record of schema v1 or v2; ``text``/``sent_at`` only on messages, ``members``/``joined``/
``left``/``removed``/``order`` only on views; ``seq`` (sequencer runs) and ``vc`` (causal runs' messages)
only in v2; ``from`` and ``wire`` only on a TOM peer's handout-wire messages (which have no
``sent_at``). A durable peer's records (docs/output-format.md, "Durable peers") add ``durable``
(its view records), ``caught_up`` (records it caught up after a restart) and the gap record's
``after`` and ``reason``."""

COMMON_FIELDS = ("v", "kind", "index", "peer", "clock", "pid", "delivered_at", "view")
EVENT_FIELDS = ("clock", "pid")
"""Fields of :data:`COMMON_FIELDS` that a gap record (not an event) does not have."""
GAP = "gap"
"""The kind of a gap record: a durable peer lost the group's events from ``after = [view, n]``
(after message n of that view) up to the record of ``view``, which follows."""
MESSAGE_FIELDS = ("text", "sent_at")
VIEW_FIELDS = ("members",)
EXCERPT_CHARS = 120

RAW_COLUMNS = ("value", "file", "block_start", "row")
"""Columns of the raw line frame that :func:`parse_lines` takes."""


@dataclass(frozen=True, slots=True)
class ResolvedInputs:
    """Input files found for the given paths: ``files`` (JSON Lines), ``texts`` (course tools' text
    outputs, :data:`HANDOUT_LINE`); ``missing`` lists paths that matched nothing, ``skipped`` one
    line per file named (or globbed) that is neither."""

    files: list[str]
    missing: list[str]
    texts: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


GLOB_CHARS = "*?[{"


def is_remote_uri(path: str) -> bool:
    """A URI with a scheme other than ``file:`` (``hdfs://``, ``s3a://``, ...): resolved by Spark."""
    return "://" in path and not path.startswith("file:")


def local_path(path: str) -> str:
    """``file:/x``, ``file:///x`` or ``x`` -> ``x`` (a path of this machine)."""
    if path.startswith("file://"):
        return path[len("file://"):]
    return path[len("file:"):] if path.startswith("file:") else path


def expand_braces(pattern: str) -> list[str]:
    """Hadoop-style ``{a,b}`` alternatives (nestable) expanded into plain glob patterns."""
    depth, open_at = 0, -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                open_at = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                head, body, tail = pattern[:open_at], pattern[open_at + 1:i], pattern[i + 1:]
                parts, level, last = [], 0, 0
                for j, c in enumerate(body):
                    level += (c == "{") - (c == "}")
                    if c == "," and level == 0:
                        parts.append(body[last:j])
                        last = j + 1
                parts.append(body[last:])
                return [x for part in parts for x in expand_braces(head + part + tail)]
    return [pattern]


PEEK_BYTES = 1 << 16
"""How far into a file :func:`first_content_line` looks for a non-blank line."""

_HANDOUT_START = re.compile(r"([0-9]+ ACKs on )?MESSAGE-[0-9]+-.+?:[0-9]+-")


def first_content_line(path: str) -> tuple[int, str] | None:
    """``(line number, line)`` of the first non-blank line in the first :data:`PEEK_BYTES` of a
    local file (decoded as UTF-8, bad bytes replaced); None if there is none."""
    with open(path, "rb") as fh:
        head = fh.read(PEEK_BYTES)
    for number, line in enumerate(head.decode("utf-8", "replace").splitlines(), 1):
        if line.strip():
            return number, line
    return None


TRACE_SUFFIX = ".trace"
"""The name `scripts/launch` and `scripts/demo` give a peer's frame trace (``tom peer --trace``)."""


def is_trace_header(line: str) -> bool:
    """Whether ``line`` is the first line of a frame trace (``{"trace": 1, "peer": ...}``)."""
    return line.lstrip().startswith('{"trace":')


def output_kind(name: str, first: tuple[int, str] | None, named: bool) -> str | None:
    """What an input file is: ``"jsonl"``, ``"handout"`` (a course tool's text output), ``"trace"``
    (a peer's frame trace: never an output, by its name or its first line) or None (no output file:
    skipped).

    ``*.jsonl`` is JSON Lines whatever it holds; any other name is a text output if its first
    non-blank line (``first``, from :func:`first_content_line`) starts as a handout frame. A file
    named on the command line (or matched by a glob) is also taken as JSON Lines, as before there
    were text outputs, when it is empty or its first line starts with ``{`` (torn lines included);
    a folder's other files are not outputs, so logs beside the outputs are never read as peers.
    """
    if name.endswith(TRACE_SUFFIX) or (first is not None and is_trace_header(first[1])):
        return "trace"
    if name.endswith(".jsonl"):
        return "jsonl"
    if first is not None and _HANDOUT_START.match(first[1]):
        return "handout"
    if named and (first is None or first[1].lstrip().startswith("{")):
        return "jsonl"
    return None


def _resolve_local(given: str) -> ResolvedInputs | None:
    """Files of one local path, folder or glob (:func:`output_kind`), as ``file:/abs`` names; None if
    it matches nothing."""
    import glob
    import os

    matches: list[str] = []
    for pattern in expand_braces(local_path(given)):
        if any(ch in pattern for ch in "*?["):
            matches += sorted(glob.glob(pattern, include_hidden=True))
        elif os.path.exists(pattern):
            matches.append(pattern)
    if not matches:
        return None
    candidates: list[tuple[str, bool]] = []  # (path, named)
    for m in matches:
        if os.path.isdir(m):
            candidates += [(os.path.join(m, c), False) for c in sorted(os.listdir(m))
                           if os.path.isfile(os.path.join(m, c))]
        else:
            candidates.append((m, True))
    found = ResolvedInputs([], [])
    for path, named in candidates:
        shown = os.path.abspath(path)
        try:
            first = first_content_line(path)
        except OSError as exc:
            if named:
                found.skipped.append(f"skipped {shown}: cannot read it ({exc.strerror})")
            continue
        kind = output_kind(os.path.basename(path), first, named)
        if kind == "jsonl":
            found.files.append("file:" + shown)
        elif kind == "handout":
            found.texts.append("file:" + shown)
        elif kind == "trace":
            if named:
                found.skipped.append(f"skipped {shown}: a frame trace (tom peer --trace), not an output file")
        elif named:
            number, line = first  # type: ignore[misc]  # None is "jsonl" when named
            found.skipped.append(f"skipped {shown}: line {number} is neither a TOM record nor a "
                                 f"handout frame: {line[:EXCERPT_CHARS]}")
    return found


def _resolve_remote(spark: SparkSession, given: str) -> list[str] | None:
    """Files of one remote URI, listed by Spark itself (``DataFrame.inputFiles``: works on a
    classic and a Connect session alike); None if it matches nothing."""
    from pyspark.errors import AnalysisException

    def listed(path: str) -> list[str] | None:
        try:
            return sorted(spark.read.text(path).inputFiles())
        except AnalysisException:  # PATH_NOT_FOUND (a glob matching nothing included)
            return None

    if any(ch in given for ch in GLOB_CHARS) or given.endswith(".jsonl"):
        return listed(given)
    in_folder = listed(given.rstrip("/") + "/*.jsonl")
    if in_folder:
        return in_folder
    found = listed(given)  # a file named explicitly, or a folder without *.jsonl
    if found is None:
        return None
    name = given.rstrip("/").rsplit("/", 1)[-1]
    return found if len(found) == 1 and found[0].rstrip("/").rsplit("/", 1)[-1] == name else []


def resolve_inputs(spark: SparkSession, paths: list[str]) -> ResolvedInputs:
    """Expand files, folders and globs (``*?[]`` and ``{a,b}``) into output files.

    Local paths (plain or ``file:``) are listed here in Python, and sorted into JSON Lines and
    course tools' text outputs by :func:`output_kind`: a folder's ``*.jsonl`` files and text
    outputs, a named file if it is either (else one ``skipped`` line naming it and its first bad
    line). Remote URIs (``hdfs://``, ...) are listed by Spark's own file listing, through the
    DataFrame API only, so a Spark Connect session resolves them on its server: a folder's
    ``*.jsonl`` files, a named file whatever its extension (all read as JSON Lines). Listing is
    bounded by the number of files, never by their size.
    """
    out = ResolvedInputs([], [])
    for given in paths:
        if is_remote_uri(given):
            remote = _resolve_remote(spark, given)
            found = None if remote is None else ResolvedInputs(remote, [])
        else:
            found = _resolve_local(given)
        if found is None:
            out.missing.append(given)
        else:
            out.files.extend(found.files)
            out.texts.extend(found.texts)
            out.skipped.extend(found.skipped)
    return ResolvedInputs(files=list(dict.fromkeys(out.files)), missing=out.missing,
                          texts=list(dict.fromkeys(out.texts)),
                          skipped=list(dict.fromkeys(out.skipped)))


def read_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """The raw line frame of ``files``: one row per line with :data:`RAW_COLUMNS`."""
    return spark.read.text(files).select(
        "value",
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block_start"),
        F.monotonically_increasing_id().alias("row"),
    )


def pid_port(pid: Column) -> Column:
    """The port of a ``host:port`` pid as an int (null if it is not one)."""
    return F.substring_index(pid, ":", -1).try_cast("int")


def pid_host(pid: Column) -> Column:
    """The host of a ``host:port`` pid (everything before the last colon)."""
    return F.substring(pid, F.lit(1), F.length(pid) - F.length(F.substring_index(pid, ":", -1)) - 1)


def _on_handout_wire() -> Column:
    """True for a record written by a TOM peer on the handout's wire (``"wire": "handout"``)."""
    return F.coalesce(F.col("wire") == HANDOUT, F.lit(False))


def _required_missing() -> tuple[Column, Column]:
    """``(any_missing, missing_names)`` over the record columns: a required field null (absent or
    ill-typed: both readers turn a wrong type into null). A handout-wire message needs ``from`` and
    has no ``sent_at`` (the handout's frames carry no send time); a record naming another wire is
    left to :func:`_handout_wire_problem` to name."""
    kind = F.col("kind")
    handout = _on_handout_wire()
    wired = F.col("wire").isNotNull()
    event = F.coalesce(kind != GAP, F.lit(True))
    missing_items = [F.when(F.col(name).isNull() & (event if name in EVENT_FIELDS else F.lit(True)),
                            F.lit(name)) for name in COMMON_FIELDS]
    missing_items += [F.when((kind == "message") & F.col(name).isNull()
                             & (~wired if name == "sent_at" else F.lit(True)), F.lit(name))
                      for name in MESSAGE_FIELDS]
    missing_items += [F.when((kind == "view") & F.col(name).isNull(), F.lit(name))
                      for name in VIEW_FIELDS]
    missing_items += [F.when(handout & F.col("from").isNull(), F.lit("from"))]
    missing_items += [F.when((kind == GAP) & F.col("after").isNull(), F.lit("after"))]
    any_missing = F.lit(False)
    for name in COMMON_FIELDS:
        any_missing = any_missing | (F.col(name).isNull() & event if name in EVENT_FIELDS
                                     else F.col(name).isNull())
    any_missing = (any_missing
                   | ((kind == GAP) & F.col("after").isNull())
                   | ((kind == "message") & (F.col("text").isNull()
                                             | (F.col("sent_at").isNull() & ~wired)))
                   | ((kind == "view") & F.col("members").isNull())
                   | (handout & F.col("from").isNull()))
    return any_missing, F.array_compact(F.array(*missing_items))


FROM_PATTERN = r"^.+:[0-9]+$"
"""A handout ``from``: ``[NAME]/IP:PORT`` or ``IP:PORT`` as a Java tool writes it (anything ending
in ``:<digits>``)."""


def _handout_wire_problem() -> Column:
    """Why a record with a ``wire`` key is not a valid handout-wire message (null if it is one)."""
    return (F.when(F.col("wire") != HANDOUT, F.concat(F.lit("unknown wire "), F.col("wire")))
            .when(F.col("kind") != "message", F.lit("a handout record is a message (a static group)"))
            .when(~F.col("from").rlike(FROM_PATTERN), F.lit("from is not [NAME/]HOST:PORT"))
            .when(F.col("seq").isNotNull() | F.col("vc").isNotNull(),
                  F.lit("seq or vc on a handout record")))


def record_problem(blank: Column, unparsable: Column) -> Column:
    """Why a parsed row is not a valid record (null if it is one), shared by both readers.

    ``blank``/``unparsable`` say whether the raw line was blank / not JSON at all; they are only
    evaluated for rows with a missing or ill-typed field (``when`` is lazy), so their cost is paid
    by bad lines only.
    """
    any_missing, missing = _required_missing()
    kind = F.col("kind")
    return (
        F.when(any_missing,
               F.when(blank, F.lit("blank line"))
               .when(unparsable, F.lit("not valid JSON (torn or corrupt line)"))
               .otherwise(F.concat(F.lit("missing or ill-typed: "), F.concat_ws(", ", missing))))
        .when(~F.col("v").isin(*SCHEMA_VERSIONS),
              F.concat(F.lit("unsupported schema version v="), F.col("v").cast("string")))
        .when(~kind.isin("message", "view", GAP), F.concat(F.lit("unknown kind "), kind))
        .when((kind == GAP) & (F.col("v") == 1), F.lit("a gap record in schema v1"))
        .when(kind == GAP, _gap_problem())
        .when(pid_port(F.col("pid")).isNull(), F.lit("pid is not host:port"))
        .when(F.col("index") < 1, F.lit("index < 1"))
        .when(F.col("wire").isNotNull(), _handout_wire_problem())
        .when(F.col("v") == 1, F.lit(None))  # v1 knows no order fields: whatever is there is ignored
        .when((kind == "view") & F.col("order").isNull(), F.lit("missing or ill-typed: order"))
        .when((kind == "view") & ~F.col("order").isin(*ORDERS),
              F.concat(F.lit("unknown order "), F.col("order")))
        .when(F.col("seq").isNotNull() & F.col("vc").isNotNull(), F.lit("both seq and vc"))
        .when((kind == "message") & (F.col("seq") < 1), F.lit("seq < 1"))
        .when((kind == "view") & (F.col("seq") != 0), F.lit("a view record's seq is not 0"))
        .when((kind == "view") & F.col("vc").isNotNull(), F.lit("vc on a view record"))
        .when(F.col("vc").isNotNull() & ~(F.coalesce(F.col("vc")[F.col("pid")], F.lit(0)) >= 1),
              F.lit("vc does not count the message at its origin (vc[pid] < 1)"))
        .when(F.col("vc").isNotNull() & F.exists(F.map_values("vc"), lambda c: c.isNull() | (c < 0)),
              F.lit("vc holds a negative count"))
    )


def _gap_problem() -> Column:
    """Why a ``kind = "gap"`` record is not a valid gap record (null if it is one): ``after`` is
    ``[view, n]`` with a view >= 1 below the gap's ``view`` and n >= 0."""
    after = F.col("after")
    return (F.when(F.col("index") < 1, F.lit("index < 1"))
            .when((F.size(after) != 2) | F.exists(after, lambda x: x.isNull()),
                  F.lit("a gap's after is not [view, n]"))
            .when((F.get(after, 0) < 1) | (F.get(after, 1) < 0),
                  F.lit("a gap's after is not [view >= 1, n >= 0]"))
            .when(F.get(after, 0) >= F.col("view"), F.lit("a gap's view is not after its after view")))


def order_claim() -> Column:
    """The order a good record says its run uses: ``order`` of a v2 view record; for a v2 message
    ``sequencer`` if it has ``seq``, ``causal`` if it has ``vc``, else ``lamport``; every v1 record
    ``lamport``; a record with a (valid) ``wire`` key :data:`HANDOUT`; a gap record none (null)."""
    return (F.when(F.col("kind") == GAP, F.lit(None).cast("string"))
            .when(F.col("wire").isNotNull(), F.lit(HANDOUT))
            .when(F.col("v") == 1, F.lit("lamport"))
            .when(F.col("kind") == "view", F.col("order"))
            .when(F.col("seq").isNotNull(), F.lit("sequencer"))
            .when(F.col("vc").isNotNull(), F.lit("causal"))
            .otherwise(F.lit("lamport")))


def order_fields() -> list[Column]:
    """``claim``, ``seq`` (a sequencer view record's is 0) and ``vc`` of a record; ``seq``/``vc``
    null in v1 records (ignored there) and where the record's order does not use them."""
    claim, seq, vc = _order_values()
    return [claim.alias("claim"), seq.alias("seq"), vc.alias("vc")]


def _order_values() -> tuple[Column, Column, Column]:
    """:func:`order_fields`, not named (to use inside other expressions)."""
    v2 = F.col("v") == 2
    seq = F.when(v2 & (order_claim() == "sequencer"),
                 F.when(F.col("kind") == "view", F.lit(0)).otherwise(F.col("seq")))
    return order_claim(), seq.cast("long"), F.when(v2, F.col("vc"))


def removed_of_view() -> Column:
    """``removed`` of a view record, sorted, ``[]`` if absent; null for messages."""
    return F.when(F.col("kind") == "view",
                  F.array_sort(F.coalesce(F.col("removed"), F.array().cast("array<string>"))))


def durable_fields() -> list[Column]:
    """``durable`` (a view record a durable peer wrote), ``caught_up`` (a record a restarted
    durable peer caught up), ``after_view``, ``after_n`` and ``reason`` (a gap record's): the keys of
    a durable peer's records (docs/output-format.md, "Durable peers"), false or null elsewhere."""
    kind = F.col("kind")
    gap = kind == GAP
    return [F.coalesce((kind == "view") & F.col("durable"), F.lit(False)).alias("durable"),
            F.coalesce(~gap & F.col("caught_up"), F.lit(False)).alias("caught_up"),
            F.when(gap, F.get(F.col("after"), 0)).alias("after_view"),
            F.when(gap, F.get(F.col("after"), 1)).alias("after_n"),
            F.when(gap, F.col("reason")).alias("reason")]


def of_durable_run() -> Column:
    """True for a record only a durable peer writes: a view record with ``durable``, a caught-up
    record, a gap record."""
    return F.coalesce(F.col("durable"), F.lit(False)) | of_restart()


def of_restart() -> Column:
    """True for a record only a durable peer that was started again writes: a caught-up record, a
    gap record (the one-pass proof leaves runs with one to the exact checks)."""
    return F.coalesce(F.col("caught_up"), F.lit(False)) | F.coalesce(F.col("kind") == GAP, F.lit(False))


def parse_lines(raw: DataFrame) -> DataFrame:
    """Parse raw lines into records of schema v1 or v2, keeping bad lines with a reason.

    Output columns: ``file, block_start, row, problem, excerpt`` and the record columns
    ``kind, index, peer, clock, pid, view, delivered_at, sent_at, text_hash, members, removed,
    claim, seq, vc`` (see :func:`order_fields`) and ``durable, caught_up, after_view, after_n,
    reason`` (:func:`durable_fields`; a gap record has no ``clock``/``pid``);
    ``text_hash`` is xxhash64 of the text (the text itself is not kept: the checks only compare
    it). ``removed`` of a view record (the members that view took out as failed) is optional: absent
    means none; ``joined``/``left`` are validated by nothing and not kept. A handout-wire record's
    ``pid`` is its ``from`` as written: in a handout run a message is ``(clock, from)``.
    """
    r = F.from_json("value", RECORD_SCHEMA)
    parsed = raw.select("value", "file", "block_start", "row", r.alias("r")).select(
        "value", "file", "block_start", "row", "r.*")
    problem = record_problem(F.trim("value") == "", F.try_parse_json("value").isNull())
    return parsed.select(
        "file", "block_start", "row",
        problem.alias("problem"),
        F.when(problem.isNotNull(), F.substring("value", 1, EXCERPT_CHARS)).alias("excerpt"),
        "kind", "index", "peer", "clock",
        F.when(F.col("wire").isNotNull(), F.col("from")).otherwise(F.col("pid")).alias("pid"),
        "view", "delivered_at", "sent_at",
        F.xxhash64("text").alias("text_hash"),
        "members", removed_of_view().alias("removed"),
        *order_fields(),
        *durable_fields(),
    )


# --------------------------------------------------------------------------- handout text outputs

HANDOUT_LINE = r"^(?:[0-9]+ ACKs on )?MESSAGE-([0-9]+)-(.+?:[0-9]+)-(.*)$"
"""One delivered message in a course tool's text output: ``MESSAGE-<clock>-<from>-<text>``, maybe
after ``N ACKs on ``. ``<from>`` ends at the first ``:<digits>-`` after the clock (a host may hold
``-`` and ``/``); the rest of the line is the text, raw. ASCII digits only, as Java's ``\\d``."""

NOT_A_FRAME = "not a handout frame ([N ACKs on ]MESSAGE-<clock>-<from>-<text>)"


def handout_peer(file: Column) -> Column:
    """A text output's peer: its file name, decoded from Spark's URI form of the path (``%XX``
    escapes; a ``+`` is a plus, not a space)."""
    name = F.regexp_extract(file, "[^/]*$", 0)
    return F.coalesce(F.try_url_decode(F.replace(name, F.lit("+"), F.lit("%2B"))), name)


def parse_handout_lines(raw: DataFrame) -> DataFrame:
    """Parse raw lines of course tools' text outputs into the rows of :func:`parse_lines` (same
    columns and types), keeping every other line as a bad line with a reason.

    A good line is a ``kind = "message"`` record of view 1 with ``peer`` its file's name
    (:func:`handout_peer`), ``pid`` its ``from`` as written, ``claim`` :data:`HANDOUT`, ``index``
    its position among its file's messages (1-based, in line order: the line number when the file
    holds nothing else) and no times (the handout writes none). One window by file numbers the
    messages: a class's files are small.
    """
    frame = "(?s)" + HANDOUT_LINE
    value = F.col("value")
    clock = F.regexp_extract(value, frame, 1).try_cast("long")
    problem = (F.when(F.trim(value) == "", F.lit("blank line"))
               .when(~value.rlike(frame), F.lit(NOT_A_FRAME))
               .when(clock.isNull(), F.lit("clock out of range")))
    judged = raw.select("*", problem.alias("problem"))
    good = F.col("problem").isNull()
    position = F.row_number().over(Window.partitionBy("file", good).orderBy("block_start", "row"))
    none = lambda kind: F.lit(None).cast(kind)  # noqa: E731
    return judged.select(
        "file", "block_start", "row", "problem",
        F.when(~good, F.substring(value, 1, EXCERPT_CHARS)).alias("excerpt"),
        F.when(good, F.lit("message")).alias("kind"),
        F.when(good, position).cast("long").alias("index"),
        F.when(good, handout_peer(F.col("file"))).alias("peer"),
        F.when(good, clock).alias("clock"),
        F.when(good, F.regexp_extract(value, frame, 2)).alias("pid"),
        F.when(good, F.lit(1)).cast("long").alias("view"),
        none("double").alias("delivered_at"), none("double").alias("sent_at"),
        F.when(good, F.xxhash64(F.regexp_extract(value, frame, 3))).alias("text_hash"),
        none("array<string>").alias("members"), none("array<string>").alias("removed"),
        F.when(good, F.lit(HANDOUT)).alias("claim"),
        none("long").alias("seq"), none("map<string,bigint>").alias("vc"),
        F.lit(False).alias("durable"), F.lit(False).alias("caught_up"),
        none("long").alias("after_view"), none("long").alias("after_n"), none("string").alias("reason"),
    )


# --------------------------------------------------------------------------- the fast reader

CORRUPT = "_corrupt"
EARLY_INDEX = 64
JSON_SCHEMA = T.StructType(RECORD_SCHEMA.fields + [T.StructField(CORRUPT, T.StringType())])
""":data:`RECORD_SCHEMA` plus the column where the JSON reader puts a line it could not fully read."""


def read_records(spark: SparkSession, files: list[str]) -> DataFrame:
    """Records of ``files`` through Spark's JSON reader (Jackson streaming, no text column kept).

    Columns of :data:`JSON_SCHEMA` plus ``file, block_start, row``. Permissive: a torn line, bad JSON
    or an ill-typed field keeps the raw line in ``_corrupt`` (ill-typed fields null). Blank lines are
    skipped by the reader: ``row`` then numbers non-blank lines (see :func:`line_number`).
    """
    return (spark.read.schema(JSON_SCHEMA)
            .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
            .json(files)
            .select("*", F.col("_metadata.file_path").alias("file"),
                    F.col("_metadata.file_block_start").alias("block_start"),
                    F.monotonically_increasing_id().alias("row")))


def narrow_records(read: DataFrame) -> DataFrame:
    """The narrow per-row frame of the fast path, from :func:`read_records`.

    Columns: ``file, block_start, row, problem, excerpt, kind, index, peer, clock, pid, view,
    latency, content_hash, content_hash2, members, removed, early, claim, seq, vc, durable_run,
    restart`` (``claim``, ``seq`` and ``vc`` as :func:`order_fields`; ``claim`` null on a bad row;
    ``durable_run``: :func:`of_durable_run`; ``restart``: :func:`of_restart`). ``content_hash``/``content_hash2``
    are xxhash64 and murmur3 of ``(clock, pid, kind, sent_at, text, seq, vc)``: what copies of one
    message must agree on (``seq`` and ``vc`` are null in a Lamport run, and a null leaves these
    hashes unchanged, so a Lamport run's hashes are those of its first five fields).
    ``latency`` is null for views; ``members``/``removed`` only for views; ``early`` (``sent_at, delivered_at``)
    only for the first :data:`EARLY_INDEX` records of a peer, for the picture. The text is hashed,
    never kept.
    """
    corrupt = F.col(CORRUPT)
    problem = record_problem(F.lit(False), corrupt.isNotNull() & F.try_parse_json(corrupt).isNull())
    raw = F.coalesce(corrupt, F.to_json(F.struct(*[f.name for f in RECORD_SCHEMA.fields])))
    claim, seq, vc = _order_values()
    content = [F.col(c) for c in ("clock", "pid", "kind", "sent_at", "text")] + [
        seq, F.array_sort(F.map_entries(vc))]
    is_view = F.col("kind") == "view"
    return read.select(
        "file", "block_start", "row",
        problem.alias("problem"),
        F.when(problem.isNotNull(), F.substring(raw, 1, EXCERPT_CHARS)).alias("excerpt"),
        "kind", "index", "peer", "clock", "pid", "view",
        F.when(~is_view, F.col("delivered_at") - F.col("sent_at")).alias("latency"),
        F.xxhash64(*content).alias("content_hash"),
        F.hash(*content).alias("content_hash2"),
        F.when(is_view, F.col("members")).alias("members"),
        removed_of_view().alias("removed"),
        F.when(F.col("index") <= EARLY_INDEX, F.struct("sent_at", "delivered_at")).alias("early"),
        F.when(problem.isNull(), claim).alias("claim"),
        seq.alias("seq"), vc.alias("vc"),
        of_durable_run().alias("durable_run"), of_restart().alias("restart"),
    )


def narrow_parsed(parsed: DataFrame) -> DataFrame:
    """:func:`narrow_records`' columns from the rows of :func:`parse_lines` and
    :func:`parse_handout_lines` (a handout run's reader: its text outputs are no JSON), with the text
    hash standing for the text in the content hashes. Equal messages hash equal within a run read
    this way; the hashes are not those of :func:`narrow_records`."""
    content = [F.col(c) for c in ("clock", "pid", "kind", "sent_at", "text_hash", "seq")] + [
        F.array_sort(F.map_entries("vc"))]
    is_view = F.col("kind") == "view"
    good = F.col("problem").isNull()
    return parsed.select(
        "file", "block_start", "row", "problem", "excerpt",
        "kind", "index", "peer", "clock", "pid", "view",
        F.when(~is_view, F.col("delivered_at") - F.col("sent_at")).alias("latency"),
        F.xxhash64(*content).alias("content_hash"),
        F.hash(*content).alias("content_hash2"),
        F.when(is_view, F.col("members")).alias("members"), "removed",
        F.when(F.col("index") <= EARLY_INDEX, F.struct("sent_at", "delivered_at")).alias("early"),
        F.when(good, F.col("claim")).alias("claim"), "seq", "vc",
        of_durable_run().alias("durable_run"), of_restart().alias("restart"),
    )


def good_records(parsed: DataFrame) -> DataFrame:
    """Rows of ``parsed`` that are valid records (the input of every check), with ``host``/``port``.
    Gap records are among them (the order check counts their indexes); :func:`analysis.checks.events`
    leaves them out for every other check.

    ``host``/``port`` are derived here rather than cached with the parsed frame: two string
    functions per row are cheaper than caching two more columns.
    """
    return (parsed.filter(F.col("problem").isNull()).drop("problem", "excerpt")
            .withColumn("host", pid_host(F.col("pid")))
            .withColumn("port", pid_port(F.col("pid"))))


def bad_lines(parsed: DataFrame) -> DataFrame:
    """Rows of ``parsed`` that are not valid records: ``file, block_start, row, problem, excerpt``."""
    return parsed.filter(F.col("problem").isNotNull()).select(
        "file", "block_start", "row", "problem", "excerpt")


def block_stats(parsed: DataFrame) -> DataFrame:
    """Per file split: ``file, block_start, first_row, lines, records, last_row, last_bad_row``.

    Small (one row per split), the input of :func:`file_summaries` and :func:`line_number`.
    """
    return parsed.groupBy("file", "block_start").agg(
        F.min("row").alias("first_row"),
        F.count(F.lit(1)).alias("lines"),
        F.count_if(F.col("problem").isNull()).alias("records"),
        F.max("row").alias("last_row"),
        F.max(F.when(F.col("problem").isNotNull(), F.col("row"))).alias("last_bad_row"),
    )


@dataclass(frozen=True, slots=True)
class FileSummary:
    """Line counts of one input file; ``torn_last_line`` is true if its last line is bad."""

    path: str
    lines: int
    records: int
    bad_lines: int
    torn_last_line: bool


def file_summaries(blocks: list[dict], files: list[str]) -> tuple[list[FileSummary], dict]:
    """Fold collected :func:`block_stats` rows into per-file summaries and a line-offset table.

    The offset table maps ``(file, block_start)`` to ``(first_row, lines before this block)``.
    Files without any line (empty files) get a summary with zeros.
    """
    by_file: dict[str, list[dict]] = {}
    for b in blocks:
        by_file.setdefault(b["file"], []).append(b)
    summaries, offsets = [], {}
    for path in list(dict.fromkeys(files + sorted(by_file))):
        parts = sorted(by_file.get(path, []), key=lambda b: b["block_start"])
        before = 0
        for b in parts:
            offsets[(path, b["block_start"])] = (b["first_row"], before)
            before += b["lines"]
        records = sum(b["records"] for b in parts)
        torn = bool(parts) and parts[-1]["last_bad_row"] is not None \
            and parts[-1]["last_bad_row"] == parts[-1]["last_row"]
        summaries.append(FileSummary(path, before, records, before - records, torn))
    return summaries, offsets


def line_number(offsets: dict, file: str, block_start: int, row: int) -> int | None:
    """1-based line of ``row`` in ``file``: rows of one split are consecutive ids in file order."""
    found = offsets.get((file, block_start))
    if found is None:
        return None
    first_row, before = found
    return before + (row - first_row) + 1


def display_path(path: str) -> str:
    """``file:/x/y`` -> ``/x/y``; other URIs unchanged."""
    return path[len("file:"):] if path.startswith("file:") else path
