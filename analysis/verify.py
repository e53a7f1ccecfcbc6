"""Verify TOM peers' output files with Spark: ``spark-submit analysis/verify.py PATH... [options]``.

Also ``python -m analysis.verify`` and :func:`main` (used by ``tom verify``). The module reads
as the pipeline (docs/design/verifier.md), section by section:

* read: the inputs, and the order their first lines name (:func:`peek_order`, a hint; a class's
  text outputs are the handout's, docs/output-format.md, "Handout output files");
* narrow -> summary -> facts: one scan parses every line into narrow rows with that order's marks
  (TOM's JSON Lines by the JSON reader; a handout run's lines, text outputs and JSON alike, by
  :func:`analysis.schema.parse_handout_lines` and :func:`analysis.schema.parse_lines`), and one
  aggregate makes the run summary (per file split, peer, view and latency bin: counts, order
  marks, message fingerprints), streamed to the driver in the same job and folded into its facts
  (:class:`analysis.facts.SummaryFacts`);
* decision: the one-pass proof settles a healthy run (or unusable input) from the facts;
* the exact checks, only where it cannot decide: every line parsed once into a cached frame, the
  event table built with one shuffle by event key (cached), the order checks with one shuffle by
  peer, in named stages;
* the report: a :class:`analysis.outcome.Report` that each stage fills (each check a ``Check``,
  the verdict, the proof that settled it, the counts and latency), written as report.json by its
  ``as_json``.

Only bounded results reach the driver: counts, the first few violations of each check, per-pair and
per-peer figures, a histogram and the first messages for the picture. Exit status: 0 verified,
1 violations found, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script (spark-submit analysis/verify.py): make `analysis` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.outcome import Check, Counts, Latency, PeerLatency, Proof, Report, Verdict  # noqa: E402

EXIT_VERIFIED, EXIT_VIOLATED, EXIT_UNUSABLE = (v.exit_code for v in Verdict)
FIRST_ROWS = 5          # violations kept per check in the report
DIAGRAM_MESSAGES = 40   # messages drawn in the space-time diagram
HISTOGRAM_BINS = 40
MAX_PEERS = 1000        # a group larger than this is not a TOM group; refuse rather than blow up


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tom verify",
        description="Check that TOM peers delivered the same messages in the order their run used "
                    "(Lamport or sequencer: the same total order; causal: every message after its "
                    "causal predecessors; a class of the course handout's tools: the same messages "
                    "in the handout's order, (clock, from as written)). "
                    "Exit status: 0 verified, 1 violations found, 2 unusable input.")
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="output files, folders (their *.jsonl files and, local only, the "
                             "handout tools' text outputs: files whose lines are "
                             "MESSAGE-<clock>-<from>-<text>) or globs; local paths or any Hadoop "
                             "filesystem URI (hdfs://, s3a://, ...)")
    parser.add_argument("--report-dir", type=Path, default=None,
                        help="where report.json and report.html go "
                             "(default: tom-verify/ next to the first input)")
    parser.add_argument("--master", default=None,
                        help="Spark master URL (default: spark-submit's, else embedded local[*])")
    parser.add_argument("--remote", default=None, metavar="URL",
                        help="Spark Connect server, sc://HOST:PORT (default: $SPARK_REMOTE if set); "
                             "plain paths are then listed here and read by the server, so it must "
                             "see the same files")
    parser.add_argument("--first", type=int, default=FIRST_ROWS, metavar="N",
                        help=f"violations listed per check (default {FIRST_ROWS})")
    return parser.parse_args(argv)


def default_report_dir(first_path: str) -> Path:
    """``tom-verify/`` beside the first input (inside it if it is a folder); cwd for remote inputs."""
    local = first_path[len("file:"):] if first_path.startswith("file:") else first_path
    if "://" in first_path and not first_path.startswith("file:"):
        return Path("tom-verify")
    p = Path(local)
    base = p if p.is_dir() else p.parent
    while any(ch in str(base) for ch in "*?[{") and base != base.parent:
        base = base.parent
    return base / "tom-verify"


def _plain_local(path: str) -> bool:
    """A local path without glob characters (checked at once, before Spark starts; globs and URIs
    are resolved by :func:`analysis.schema.resolve_inputs`)."""
    return "://" not in path and not path.startswith("file:") and not any(ch in path for ch in "*?[{")


def main(argv: list[str] | None = None) -> int:
    """Run the verification for command-line ``argv`` (without program name); return the exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from rich.console import Console

    from analysis import report
    from analysis.session import (CONNECT_MISSING, JAVA_MISSING, connect_available,
                                  connect_reachable, inside_spark_submit, java_available,
                                  remote_url)

    console = Console(highlight=False, soft_wrap=True)
    remote = remote_url(args.remote)
    if remote and args.master:
        console.print("give either --master or a Spark Connect URL (--remote, SPARK_REMOTE), not both",
                      markup=False)
        return EXIT_UNUSABLE
    if remote and not connect_available():
        console.print(CONNECT_MISSING, markup=False)
        return EXIT_UNUSABLE
    if remote and (why := connect_reachable(remote)):
        console.print(why, markup=False)
        return EXIT_UNUSABLE
    if not remote and not inside_spark_submit() and not java_available():
        console.print(JAVA_MISSING, markup=False)
        return EXIT_UNUSABLE
    missing = [p for p in args.paths if _plain_local(p) and not Path(p).exists()]
    if missing:  # say so at once: no JVM to start, no report dir to create
        console.print("UNUSABLE INPUT", style="bold red")
        for p in missing:
            console.print(f"  no such path: {p}", markup=False)
        return EXIT_UNUSABLE
    report_dir = (args.report_dir or default_report_dir(args.paths[0])).resolve()
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        console.print(f"cannot create report dir {report_dir}: {exc.strerror}", markup=False)
        return EXIT_UNUSABLE

    from pyspark.sql import SparkSession

    from analysis.session import build_session

    started = time.monotonic()
    owned = bool(remote) or SparkSession.getActiveSession() is None
    try:
        spark = build_session(args.master, log_dir=report_dir, remote=remote)
    except Exception as exc:  # the JVM did not come up: say so in one line, point at its log
        if remote:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            console.print(f"cannot use Spark Connect at {remote}: {reason}", markup=False)
            return EXIT_UNUSABLE
        console.print(f"Spark did not start ({type(exc).__name__}); see {report_dir / 'spark-driver.log'}"
                      " -- Java 17+ is required (apt-get install openjdk-17-jre-headless)",
                      markup=False)
        return EXIT_UNUSABLE
    try:
        result = verify(spark, args.paths, first=args.first, own_session=owned).as_json()
    finally:
        if owned:
            spark.stop()
    result["timing"]["total_s"] = round(time.monotonic() - started, 3)
    json_path, html_path = report.write(result, report_dir)
    report.print_summary(result, console)
    console.print(f"report: {json_path}", markup=False)
    console.print(f"picture: {html_path}", markup=False)
    return result["exit_code"]


# --------------------------------------------------------------------------- the pipeline

SMALL_INPUT_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                    "spark.sql.adaptive.enabled": "false"}
"""The session settings of a verification of a small input (`SMALL_INPUT_BYTES`, local) in a session
of its own (:func:`main`): expressions interpreted, not compiled to Java; plans not planned again
after each stage. On a few thousand records Spark's cost is compiling each plan's Java (Janino) and
re-planning, not computing; the same plans give the same results in both modes (Spark tests its
expressions in both). A larger input keeps code generation and adaptive execution, where they pay."""


def verify(spark, paths: list[str], first: int = FIRST_ROWS, own_session: bool = False) -> Report:
    """Run every check on ``paths``; return the report (``as_json``: report.json, docs/verifier.md).
    With ``own_session`` (a session made for this verification alone) a small local input is
    verified with `SMALL_INPUT_CONF`.

    Everything brought to the driver is bounded: by the number of files and splits, peers, pairs of
    peers, histogram bins, diagram messages or ``first``.
    """
    from analysis import schema

    timing: dict[str, float] = {}
    clock = [time.monotonic()]

    def lap(name: str) -> None:
        now = time.monotonic()
        timing[name] = round(now - clock[0], 3)
        clock[0] = now

    result = Report(inputs=paths, timing=timing)
    resolved = schema.resolve_inputs(spark, paths)
    result.files = [schema.display_path(f) for f in resolved.files + resolved.texts]
    if resolved.missing:
        result.problems = [f"no such path: {p}" for p in resolved.missing]
        return result
    if not resolved.files and not resolved.texts:
        result.problems = resolved.skipped or [
            "no output file (*.jsonl, or a handout tool's text output) in the given folders"]
        return result
    result.skipped = resolved.skipped
    texts = resolved.texts
    if own_session and (size := input_bytes(resolved.files + texts)) is not None and size <= SMALL_INPUT_BYTES:
        for key, value in SMALL_INPUT_CONF.items():
            spark.conf.set(key, value)
        result.spark_settings = dict(SMALL_INPUT_CONF)
    # the one-pass proof of the order the first lines name (Lamport's if they do not agree); a
    # class's text outputs are the handout's
    peeked = schema.HANDOUT if texts else peek_order(resolved.files)
    if _verify_fast(spark, resolved.files, first, result, lap, order=peeked or "lamport", texts=texts):
        result.proof = Proof.ONE_PASS
    else:
        result.fast_path = result.fast_path or "not conclusive: exact checks run"
        result.proof = Proof.EXACT
        _verify_exact(spark, resolved.files, first, result, lap, texts=texts)
    return result


# --------------------------------------------------------------------------- read

PEEK_BYTES = 1 << 16


def peek_order(files: list[str]) -> str | None:
    """The order named by the first line of each local file, if they all name the same one
    (:func:`analysis.schema.order_claim` in Python); None if a file is remote, unreadable or the
    files differ. Only a hint: it picks the order whose one-pass proof runs (its marks, its reader);
    both paths decide the order from every record."""
    from analysis import schema

    seen = set()
    for f in files:
        if schema.is_remote_uri(f):
            return None
        try:
            with open(schema.local_path(f), "rb") as fh:
                line = fh.readline(PEEK_BYTES)
            r = json.loads(line)
        except (OSError, ValueError):
            return None
        if not isinstance(r, dict):
            return None
        if "wire" in r:
            seen.add(schema.HANDOUT)
        elif r.get("v") == 1:
            seen.add("lamport")
        elif r.get("kind") == "view":
            seen.add(r.get("order"))
        else:
            seen.add("sequencer" if "seq" in r else "causal" if "vc" in r else "lamport")
    return seen.pop() if len(seen) == 1 and None not in seen else None


def _given_name(files: list[str]):
    """Spark's name of an input file (``_metadata.file_path``: URI-encoded, ``a%20b``) -> the name
    it was given as (``a b``), so that reports and second reads use the input's own name."""
    from urllib.parse import unquote
    given = {unquote(f): f for f in files}
    return lambda name: given.get(unquote(name), name) if name is not None else None


def input_bytes(files: list[str]) -> int | None:
    """Total size of ``files`` if every one is a local file, else None."""
    import os

    from analysis import schema
    total = 0
    for f in files:
        if schema.is_remote_uri(f):
            return None
        try:
            total += os.path.getsize(schema.local_path(f))
        except OSError:
            return None
    return total


# --------------------------------------------------------------------------- narrow -> summary -> facts

SMALL_INPUT_BYTES = 16 << 20
"""Local inputs of at most this many bytes in all are summarised in one task, one stage: no
exchange, no second stage to plan and start. Spark's cost on such an input is its cold start
(planning, code generation, task launch in a young JVM), not its work."""


def _order_check(spark, files: list[str], order: str, small: bool) -> tuple[object, bool, str]:
    """``(the order marks for the summary or None, whether they are the scan's, what report.json's
    order_check says)``.

    In the scan (no shuffle, :func:`analysis.checks.order_marks_in_scan`) when the JVM function is
    registered and every file is local (its size known); for the Lamport order, a window
    (:func:`analysis.checks.order_marks`, one shuffle) otherwise, and also when a big input
    (not ``small``) has fewer files than cores (whole files per task would leave cores idle; the
    window splits files). The
    sequencer and causal orders are marked in the scan only: without it, None (the exact checks).
    The handout's order (its text outputs are read as lines) is marked by the window.
    """
    from analysis import checks, order_mark

    if order == checks.HANDOUT:
        return (lambda df: checks.order_marks(df, order)), False, "window (the handout's order)"
    sizes = [input_bytes([f]) for f in files]
    cores = spark.sparkContext.defaultParallelism if getattr(spark, "_jvm", None) is not None else 0
    why = order_mark.register(spark)
    if why is None and None in sizes:
        why = "a remote input (file sizes unknown): the order check uses the window"
    if why is None and order == checks.LAMPORT and not small and len(files) < cores:
        why = f"{len(files)} files for {cores} cores: the order check uses the window (it splits files)"
    if why is None:
        return (lambda df: checks.order_marks_in_scan(df, order)), True, "in the scan (no shuffle)"
    if order != checks.LAMPORT:
        return None, False, f"none ({why}; the {order} order's one-pass proof needs the scan)"
    return checks.order_marks, False, f"window ({why})"


def _summary_facts(spark, narrow, files: list[str], first: int, result: Report, order: str,
                   texts: list[str] = ()):
    """The facts (:class:`analysis.facts.SummaryFacts`) of the run summary of ``narrow`` with
    ``order``'s marks (:func:`_order_check`), or None if they cannot be marked here.

    The summary (:func:`analysis.checks.run_summary`) is computed in Spark and streamed to the
    driver row by row in one job, folded as it comes: the driver holds the facts, never the
    summary. The marks in the scan stand only if each peer's records are in one file; else the
    summary is computed again with the window (a Lamport run) or the exact checks decide.
    """
    from analysis import checks, order_mark
    from analysis.facts import SummaryFacts

    size = input_bytes(files + list(texts))
    small = size is not None and size <= SMALL_INPUT_BYTES
    marks, in_scan, how = _order_check(spark, files, order, small)
    if marks is None:
        result.order_check = how
        return None

    def summarise(marks) -> SummaryFacts:
        rows = narrow.coalesce(1) if small else narrow  # one task: no exchange, one stage
        summary = checks.run_summary(rows, marks=marks).coalesce(1)
        facts = SummaryFacts.of((r.asDict(recursive=True) for r in summary.toLocalIterator()),
                                bad_kept=first, rename=_given_name(files + list(texts)))
        if facts.has_bad_rows():  # the same read, so the same row numbers
            for r in checks.first_bad_rows(narrow, first).toLocalIterator():
                facts.add_bad(r.asDict())
        return facts

    if not in_scan:
        result.order_check = how
        return summarise(marks)
    with order_mark.whole_files(spark, max(input_bytes([f]) for f in files)):
        facts = summarise(marks)
    if all(len(held) == 1 for held in facts.files_of_peers().values()):
        result.order_check = how
        return facts
    why = "a peer's records in several files"
    if order != checks.LAMPORT:
        result.order_check = f"none ({why}; the {order} order's one-pass proof needs the scan)"
        return None
    result.order_check = f"window ({why}: the order check ran again as a window)"
    return summarise(checks.order_marks)


# --------------------------------------------------------------------------- decision: the one-pass proof


def _verify_fast(spark, files: list[str], first: int, result: Report, lap, order: str = "lamport",
                 texts: list[str] = ()) -> bool:
    """The one-pass proof that a run of ``order`` is healthy (docs/design/verifier.md): fill ``result`` and
    return True if it settles the outcome, False if the exact checks must run (also when the run
    turns out to use another order). One scan of the input into the run summary, its facts
    streamed to the driver (:func:`_summary_facts`); everything collected is bounded by splits,
    peers, views and latency bins. A handout run (``order`` handout, or text outputs ``texts``)
    is read as lines (:func:`_parsed_inputs`), as the exact checks read it."""
    from analysis import schema

    texts = list(texts)
    if order == schema.HANDOUT:
        narrow = schema.narrow_parsed(_parsed_inputs(spark, files, texts))
    else:
        narrow = schema.narrow_records(schema.read_records(spark, files))
    facts = _summary_facts(spark, narrow, files, first, result, order, texts)
    if facts is None:
        return False
    return _one_pass(spark, facts, files + texts, first, result, lap, order)


def _one_pass(spark, facts, files: list[str], first: int, result: Report, lap, order: str) -> bool:
    """The decision of the one-pass proof from the summary's ``facts`` (docs/design/verifier.md, "The
    fast path"): True once ``result`` holds the outcome -- unusable input, or VERIFIED when no peer has
    an order mark, no view has two member lists, every view's fingerprints match and every crashed
    member holds a prefix of its last view, and each durable peer, never started again, installed
    every view of its stretch -- and False when the exact checks must decide."""
    from analysis import checks, run_order, schema

    blocks = facts.blocks()
    lap("scan_s")
    summaries, offsets = schema.file_summaries(blocks, files)
    with_bad = [s.path for s in summaries if s.bad_lines]
    if with_bad and order != checks.HANDOUT and not _no_blank_lines(spark, with_bad, blocks):
        return False
    bad = [{"file": schema.display_path(r["file"]),
            "line": schema.line_number(offsets, r["file"], r["block_start"], r["row"]),
            "problem": r["problem"], "excerpt": r["excerpt"]}
           for r in facts.bad_rows()]
    _put_files(result, summaries, bad)
    n_records = sum(s.records for s in summaries)
    if n_records == 0:
        result.problems = ["no readable record in the input"]
        return True
    peer_rows = facts.peers()
    if len(peer_rows) > MAX_PEERS:
        result.problems = [f"more than {MAX_PEERS} distinct peers: not one TOM group"]
        return True
    chosen = run_order.decide(facts.claims())
    if chosen.problem:
        result.problems = [chosen.problem]
        return True
    result.order = chosen.order
    if chosen.order != order:  # the marks are those of another order
        return False
    if any(p["restart_records"] for p in peer_rows):
        result.fast_path = ("not conclusive: a durable peer was started again (caught-up or gap "
                            "records): exact checks run")
        return False
    if facts.broken_stretches():
        result.fast_path = ("not conclusive: a durable peer's file does not hold every view of its "
                            "stretch: exact checks run")
        return False
    lap("lines_s")
    if any(p["disorder"] or p["index_faults"] for p in peer_rows):
        return False
    view_rows = facts.view_members()[:MAX_PEERS]
    if any(v["variants"] > 1 for v in view_rows):
        return False
    peers = sorted(p["peer"] for p in peer_rows)
    messages, mismatched, partial = facts.messages_and_faults(peers)
    if mismatched or (partial and order != checks.LAMPORT):  # a prefix is Lamport's
        return False
    if not _crashed_hold_prefixes(spark, facts, partial):
        return False
    lap("fingerprints_s")
    _proven_report(facts, peer_rows, view_rows, messages, n_records, order, result)
    lap("latency_picture_s")
    return True


def _no_blank_lines(spark, files: list[str], blocks: list[dict]) -> bool:
    """True if every split of ``files`` has as many text lines as JSON rows (the JSON reader skips
    blank lines, which would shift line numbers). A text scan of those files, no parsing."""
    from analysis import schema
    counted = schema.read_lines(spark, files).groupBy("file", "block_start").count().collect()
    rows = {(b["file"], b["block_start"]): b["lines"] for b in blocks}
    rename = _given_name(files)
    return all(rows.get((rename(r.file), r.block_start)) == r["count"] for r in counted)


def _crashed_hold_prefixes(spark, facts, partial: list[dict]) -> bool:
    """True if every crashed member that holds fewer messages of its last view than the view's
    required recipients holds exactly a prefix of them (docs/design/verifier.md, "Crashed peers").

    ``partial``: rows of :func:`analysis.checks.crash_prefixes`. One small job per such (peer,
    view), reading only the files of that peer and of one required recipient: a run without a crash
    reads nothing more.
    """
    from analysis import checks, schema

    if not partial:
        return True
    files_of = facts.files_of_peers()
    for c in partial:
        files = sorted(set(files_of.get(c["peer"], []) + files_of.get(c["ref_peer"], [])))
        narrow = schema.narrow_records(schema.read_records(spark, files))
        got = checks.prefix_fingerprint(narrow, c["view"], c["peer"], c["ref_peer"]).first().asDict()
        if any(got[f] != c[f] for f in checks.FINGERPRINT):
            return False
    return True


def _proven_report(facts, peer_rows: list[dict], view_rows: list[dict], messages: int,
                   n_records: int, order: str, result: Report) -> None:
    """A run the one pass proved, into ``result``: VERIFIED, every check at 0 with how it was
    settled, the counts, latency figures and picture from the summary's facts."""
    from analysis import checks, latency, membership, schema
    from analysis.facts import diagram
    from analysis.schema import HANDOUT

    bins = facts.latency_bins()
    per_peer, overall = latency.latency_stats(peer_rows, bins)
    low, high = latency.histogram_range(overall)
    result.latency = Latency(PeerLatency(**overall), [PeerLatency(**p) for p in per_peer], low, high,
                             latency.histogram(bins, low, high, HISTOGRAM_BINS))
    result.diagram = ([] if order == HANDOUT else  # no send times to draw from
                      diagram(facts.early(), DIAGRAM_MESSAGES))
    peers = sorted(p["peer"] for p in peer_rows)
    if order == HANDOUT:  # every file holds every message: none is incomplete
        result.peer_files = {p: sorted(schema.display_path(f) for f in files)
                             for p, files in sorted(facts.files_of_peers().items())}
        result.incomplete = []
    result.counts = Counts(records=n_records, peers=len(peers), events=messages + len(view_rows),
                           messages=messages, views=len(view_rows))
    result.peers = peers
    result.views = view_rows[:50]
    result.rejoins = membership.rejoins(view_rows)
    found = _proven_checks(order, len(peers))
    durable = [{"peer": d["peer"], "file": schema.display_path(d["file"])} for d in facts.durable_files()]
    if durable:  # as the exact checks report them (_durable_check)
        result.durable, result.gaps = durable[:MAX_PEERS], []
        found["durable"] = Check.settled(
            "checked in one pass: each durable peer, never started again, installed every view from "
            "its first to its last and holds each as its required recipients do"
            if order == checks.LAMPORT else _durable_not_lamport(order))
    result.settle(found)
    result.fast_path = "conclusive"


def _proven_checks(order: str, n_peers: int) -> dict[str, Check]:
    """The checks of a run of ``order`` the one-pass proof settled, each at 0 with how."""
    from analysis import checks

    implied = "implied: every peer's keys strictly increase and every view's recipients " \
              "hold the same messages (fingerprints)"
    in_one_pass = {checks.LAMPORT: "index 1..n, keys strictly increasing",
                   checks.SEQUENCER: "index 1..n, (view, seq) strictly increasing, each origin's "
                                     "clocks increasing",
                   checks.CAUSAL: "index 1..n, views in order, each origin's clocks increasing",
                   checks.HANDOUT: "index 1..n, (clock, from as written) strictly increasing"}
    found = {name: Check.settled(implied) for name in
             ("order", "duplicates", "fifo_reorders", "fifo_gaps", "agreement",
              "conflicting_copies", "view_conflicts")}
    found["order"] = Check.settled(f"checked in one pass ({in_one_pass[order]})")
    found["agreement"] = Check.settled(
        "checked by per-view fingerprints of the expected recipients " + (
            "(crashed members: a prefix of their last view)" if order == checks.LAMPORT else
            "(crashed members: all of their last view)"))
    found["divergence"] = Check.settled(implied, pairs=n_peers * (n_peers - 1) // 2, compared=0,
                                        ranked_exactly=0)
    found.update(_not_in_order(order))
    if order == checks.LAMPORT:
        found["clock"] = Check.settled(
            "implied by the order check: keys strictly increase with the index, and a message a peer "
            "sent after delivering m1 is delivered there after m1 (each file is written in delivery "
            "order, each delivery stamped once it is made, an own message after its send)")
    if order in (checks.SEQUENCER, checks.CAUSAL):
        found["numbering"] = Check.settled(implied)
    if order == checks.CAUSAL:
        found["causal"] = Check.settled("checked in one pass (per view, each message after its vc's "
                                        "counts of every member's messages)")
        found["fifo_reorders"] = Check.settled(CAUSAL_FIFO)
        found["divergence"] = found["divergence"].noted(CAUSAL_DIVERGENCE)
    if order == checks.HANDOUT:
        found["common_order"] = Check.settled(
            "every file holds every message in strictly increasing (clock, from as written): each "
            "is the common order")
    return found


CAUSAL_FIFO = "causal: an origin's messages out of order are caught by the causal check (its own vc count)"
CAUSAL_DIVERGENCE = "causal: no total order to compare; see the causal check"


def _not_in_order(order: str) -> dict[str, Check]:
    """The checks an order does not use, reported as 0 with the reason."""
    from analysis.schema import HANDOUT

    out = {}
    if order == "lamport":
        out["numbering"] = Check.settled("the Lamport order numbers nothing")
    if order == HANDOUT:
        out["numbering"] = Check.settled("the handout's order numbers nothing")
    if order != "causal":
        out["causal"] = Check.settled(f"a {order} run: no vector timestamps")
    if order != "lamport":
        out["clock"] = Check.settled(CLOCK_ORDERS.get(order, f"a {order} run: not checked"))
    return out


# --------------------------------------------------------------------------- the exact checks


def _verify_exact(spark, files: list[str], first: int, result: Report, lap,
                  texts: list[str] = ()) -> None:
    """Every check computed exactly (event table, order, pairwise divergences): fills ``result``.

    Run when the fast path could not prove the run healthy (or for handout text outputs
    ``texts``, which only this path reads); reads the input again as text. The stages: parse
    (cached), the lines' report, the run's order and peers, the event table (cached), the checks
    on it, the order checks per peer, the pairwise order, the latency and picture.
    """
    from pyspark import StorageLevel

    from analysis import checks, latency, membership, schema

    texts = list(texts)
    parsed = _parsed_inputs(spark, files, texts).persist(StorageLevel.MEMORY_AND_DISK)
    messages = None
    try:
        rename = _given_name(files + texts)
        offsets, n_records = _exact_lines(parsed, files + texts, first, rename, result)
        lap("parse_s")
        if n_records == 0:
            result.problems = ["no readable record in the input"]
            return
        with_gaps = schema.good_records(parsed)
        records = checks.events(with_gaps)
        run = _exact_run(records, rename, result)
        if run is None:
            return
        order, peers, per_peer, overall, lat = run
        lap("peer_stats_s")

        views = checks.view_members(records)
        compared, unsettled = _compared_records(records, views, order)
        messages = checks.event_table(compared).persist(StorageLevel.MEMORY_AND_DISK)
        totals = _event_totals(messages)
        lap("event_table_s")

        found: dict[str, Check] = {}
        view_rows = [r.asDict(recursive=True) for r in views.orderBy("view").limit(MAX_PEERS).collect()]
        _exact_event_checks(spark, records, messages, views, view_rows, peers, order, unsettled,
                            files, first, found, lap)
        if order == checks.HANDOUT:
            _common_order(records, messages, totals, rename, offsets, first, found, result)
            lap("common_order_s")
        disordered, index_dirty = _exact_order_checks(with_gaps, order, first, found, lap)
        _divergence_check(messages, peers, order, disordered, index_dirty, first, found)
        lap("divergence_s")
        _durable_check(with_gaps, messages, order, rename, first, found, result)
        lap("durable_s")
        _clock_check(records, order, rename, first, found)
        lap("clock_s")

        low, high = latency.histogram_range(overall)
        hist = {r.bin: r["count"] for r in
                checks.latency_histogram(lat, low, high, HISTOGRAM_BINS).collect()}
        diagram = ([] if order == checks.HANDOUT else  # no send times to draw from
                   _rows(checks.first_events(messages, DIAGRAM_MESSAGES), DIAGRAM_MESSAGES))
        lap("latency_picture_s")

        result.counts = Counts(records=n_records, peers=len(peers), **totals)
        result.peers = peers
        result.views = view_rows[:50]
        result.rejoins = membership.rejoins(view_rows)
        result.latency = Latency(
            PeerLatency(**overall) if overall else None, [PeerLatency(**p) for p in per_peer], low, high,
            [hist.get(i, 0) for i in range(HISTOGRAM_BINS + 1)])
        result.diagram = diagram
        result.settle(found)
    finally:
        if messages is not None:
            messages.unpersist()
        parsed.unpersist()


def _parsed_inputs(spark, files: list[str], texts: list[str]):
    """The parsed rows (:func:`analysis.schema.parse_lines`' columns) of JSON Lines ``files`` and
    handout text outputs ``texts``: one frame, a union of the two readers' rows."""
    from analysis import schema

    parts = []
    if files:
        parts.append(schema.parse_lines(schema.read_lines(spark, files)))
    if texts:
        parts.append(schema.parse_handout_lines(schema.read_lines(spark, texts)))
    parsed = parts[0]
    for more in parts[1:]:
        parsed = parsed.unionByName(more)
    return parsed


def _exact_lines(parsed, files: list[str], first: int, rename, result: Report) -> tuple[dict, int]:
    """The lines' part of the report (per-file counts, the first bad lines) into ``result``;
    ``(line offsets per split, number of good records)``. One row per split and ``first`` bad rows
    are collected."""
    from analysis import schema

    blocks = [dict(r.asDict(), file=rename(r.file)) for r in schema.block_stats(parsed).collect()]
    summaries, offsets = schema.file_summaries(blocks, files)
    bad = [{"file": schema.display_path(rename(r.file)),
            "line": schema.line_number(offsets, rename(r.file), r.block_start, r.row),
            "problem": r.problem, "excerpt": r.excerpt}
           for r in schema.bad_lines(parsed).orderBy("file", "row").limit(first).collect()]
    _put_files(result, summaries, bad)
    return offsets, sum(s.records for s in summaries)


def _exact_run(records, rename, result: Report):
    """The run's order (from every record's claim) and peers with their latency figures:
    ``(order, peers, per_peer, overall, latencies frame)``; None (with ``result.problems``) if
    the files disagree about the order or there are more than :data:`MAX_PEERS` peers."""
    from analysis import checks, run_order

    claims = {rename(r.file): r.claims for r in run_order.claims_by_file(records).collect()}
    chosen = run_order.decide(claims)
    if chosen.problem:
        result.problems = [chosen.problem]
        result.order = None  # the first lines' hint, if any, was wrong
        return None
    order = result.order = chosen.order
    lat = checks.latencies(records)
    stats = checks.latency_summary(lat).collect()  # peers + 1 rows
    per_peer = sorted((r.asDict() for r in stats if r.peer is not None), key=lambda r: r["peer"])
    if len(per_peer) > MAX_PEERS:
        result.problems = [f"more than {MAX_PEERS} distinct peers: not one TOM group"]
        return None
    overall = next((r.asDict() for r in stats if r.peer is None), {})
    return order, [r["peer"] for r in per_peer], per_peer, overall, lat


def _compared_records(records, views, order: str):
    """``(records the event table is built from, unsettled (view, peer) rows)``: in a sequencer run,
    a failed member's messages of a view whose sequencer failed too are left out
    (:func:`analysis.checks.unsettled_views`); everything otherwise."""
    from pyspark.sql import functions as F

    from analysis import checks

    if order != checks.SEQUENCER:
        return records, []
    unsettled = [r.asDict() for r in checks.unsettled_views(views).limit(MAX_PEERS).collect()]
    if not unsettled:
        return records, []
    mark = F.broadcast(checks.unsettled_views(views).withColumn("_unsettled", F.lit(True)))
    compared = (records.join(mark, ["view", "peer"], "left")
                .filter(~(F.coalesce("_unsettled", F.lit(False)) & (F.col("kind") == "message")))
                .drop("_unsettled"))
    return compared, unsettled


def _event_totals(messages) -> dict:
    """``events, messages, views`` of the event table (one job)."""
    from pyspark.sql import functions as F

    return messages.agg(
        F.count(F.lit(1)).alias("events"),
        F.count_if(F.col("kind") == "message").alias("messages"),
        F.count_if(F.col("kind") == "view").alias("views"),
    ).first().asDict()


def _exact_event_checks(spark, records, messages, views, view_rows: list[dict], peers: list[str],
                        order: str, unsettled: list[dict], files: list[str], first: int,
                        found: dict, lap) -> None:
    """The checks on the event table into ``found``: duplicates, conflicting copies, view
    conflicts, agreement and FIFO gaps, numbering and the causal check (the orders that use them)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from analysis import checks

    found["duplicates"] = Check(*_count_and_first(checks.duplicates(messages), ["peer", "index"], first))
    found["conflicting_copies"] = Check(*_count_and_first(
        checks.conflicting_copies(messages), list(checks.ORDER_KEY[:1]) + ["pid"], first))
    view_conflicts = [v for v in view_rows if v["variants"] > 1]
    found["view_conflicts"] = Check(len(view_conflicts), view_conflicts[:first])
    agree = checks.agreement(checks.expected_recipients(messages, views, peers, order))
    small = _small(agree)
    if not small:
        agree = agree.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if small:  # the first rows (one job where a run is clean), counted again only if need be
            shown, whole = _first_rows(agree, ["clock", "pid"], first)
            n_agree = len(shown) if whole else agree.count()
            missing_total = sum(len(r["missing"]) for r in shown) if whole else \
                agree.agg(F.sum(F.size("missing"))).first()[0] or 0
        else:
            n_agree = agree.count()
            missing_total = agree.agg(F.sum(F.size("missing"))).first()[0] or 0 if n_agree else 0
            shown = _rows(agree.orderBy("clock", "pid"), first) if n_agree else []
        found["agreement"] = Check(
            n_agree, shown,
            note=("not compared (their view's sequencer failed too, so its numbers were settled "
                  "without them): " + ", ".join(f"{u['peer']} in view {u['view']}"
                                                for u in unsettled[:10])) if unsettled else None,
            figures={"missing_deliveries": missing_total})
        lap("agreement_s")
        if missing_total:
            gaps = checks.fifo_gaps(records, checks.missing_deliveries(agree))
            found["fifo_gaps"] = Check(*_count_and_first(gaps, ["peer", "origin", "after_clock"], first))
        else:
            found["fifo_gaps"] = Check.settled("nothing missing, so no gap")
        if order == checks.HANDOUT:
            found["agreement"] = found["agreement"].noted(
                "a file cut short owes nothing after its last message (listed as incomplete)")
    finally:
        if not small:
            agree.unpersist()
    found.update(_not_in_order(order))
    if order in (checks.SEQUENCER, checks.CAUSAL):
        found["numbering"] = Check(*_count_and_first(checks.number_conflicts(messages, order),
                                                      ["view", "origin", "number"], first))
    if order == checks.CAUSAL:
        _causal_check(spark, records, files, first, found)
        lap("causal_s")


def _causal_check(spark, records, files: list[str], first: int, found: dict) -> None:
    """The causal check (analysis/causal.py) into ``found["causal"]``: its count, and its first
    violations with the message and the predecessor it overtook named by ``(clock, pid)`` and text,
    read back from the input (one more scan, only when something is wrong)."""
    from analysis import causal, schema

    count, rows = _count_and_first(causal.causal_violations(records),
                                   ["peer", "index", "member"], first)
    if rows:
        named = [r.asDict() for r in causal.named_messages(schema.read_records(spark, files), rows)
                 .collect()]  # at most 2 x first rows
        rows = causal.describe(rows, named)
    found["causal"] = Check(count, rows)


def _durable_not_lamport(order: str) -> str:
    """The durable check's note in a run of another order than Lamport's (the one pass's and the exact
    checks' alike)."""
    return (f"a {order} run: a durable file is judged by the other checks only (its stretch of the "
            "group's order is compared in Lamport runs)")


def _durable_check(records, messages, order: str, rename, first: int, found: dict,
                   result: Report) -> None:
    """The durable peers' files (docs/design/verifier.md, "Durable files") into ``found["durable"]``, and
    the durable files and recorded gaps into ``result``. Nothing when no file is durable and none
    records a gap: such a run's report is what it was before durable peers existed."""
    from analysis import checks, schema

    def shown(file: str) -> str:
        return schema.display_path(rename(file))

    durable = [{"peer": r.peer, "file": shown(r.file)}
               for r in checks.durable_files(records).limit(MAX_PEERS).collect()]
    recorded = [dict(r.asDict(), file=shown(r.file)) for r in
                checks.gaps(records).orderBy("file", "index").limit(MAX_PEERS).collect()]
    if not durable and not recorded:
        return
    result.durable = sorted(durable, key=lambda d: (d["peer"], d["file"]))
    result.gaps = recorded
    if order != checks.LAMPORT:
        found["durable"] = Check.settled(_durable_not_lamport(order))
        return
    count, rows = _count_and_first(checks.durable_violations(records, messages),
                                   ["file", "index", "problem"], first)
    found["durable"] = Check(count, [dict(r, file=shown(r["file"])) for r in rows],
                             note="each durable file holds the group's order from its first record "
                                  "to its last, once each, but across a recorded gap")


CLOCK_NOTE = ("per file, each of the peer's own messages against what it delivered live before sending "
              "it (sent_at strictly after delivered_at, both that peer's clock; caught-up records are "
              "no cause)")


def _clock_check(records, order: str, rename, first: int, found: dict) -> None:
    """The clock condition a file can decide (docs/design/verifier.md, "The clock condition") into
    ``found["clock"]``: Lamport runs only, the order that promises it."""
    from analysis import checks, schema

    if order != checks.LAMPORT:
        found["clock"] = Check.settled(CLOCK_ORDERS.get(order, f"a {order} run: not checked"))
        return
    count, rows = _count_and_first(checks.clock_condition(checks.clock_timeline(records)),
                                   ["file", "index"], first)
    found["clock"] = Check(count, [dict(r, file=schema.display_path(rename(r["file"]))) for r in rows],
                           note=CLOCK_NOTE)


CLOCK_ORDERS = {
    "sequencer": "a sequencer run: the clock orders nothing (the sequencer's numbers do), so the "
                 "clock condition, the Lamport order's promise, is not checked",
    "causal": "a causal run: the vector timestamps order it (see the causal check); the clock "
              "condition, the Lamport order's promise, is not checked",
    "handout": "a handout run: no send times",
}
"""Why the clock condition is not checked in a run of another order than Lamport's."""


def _common_order(records, messages, totals: dict, rename, offsets, first: int, found: dict,
                  result: Report) -> None:
    """A handout run's common order check (each file a prefix of every message sorted by
    ``(clock, from)``) into ``found``, and its peers' files and incomplete files into ``result``."""
    from analysis import checks

    departed = [r.asDict() for r in checks.departures(records, messages)
                .orderBy("index", "peer").limit(MAX_PEERS).collect()]
    found["common_order"] = Check(
        len(departed), [_departure(r, rename, offsets) for r in departed[:first]],
        note="every message sorted by (clock, from as written); each file must be a prefix of it")
    result.peer_files, result.incomplete = _handout_facts(
        records, messages, {r["peer"] for r in departed}, totals["messages"], rename)


def _handout_facts(records, messages, departed: set[str], n_messages: int,
                   rename) -> tuple[dict[str, list[str]], list[dict]]:
    """``(peer_files, incomplete)``: each peer's files, and the peers whose files are a strict
    prefix of the common order: fewer messages than the run, no departure) of a handout run.
    Small: a row per peer, or per (peer, file)."""
    from analysis import checks, schema

    peer_files: dict[str, list[str]] = {}
    for r in records.select("peer", "file").distinct().limit(MAX_PEERS * 4).collect():
        peer_files.setdefault(r.peer, []).append(schema.display_path(rename(r.file)))
    held = {r.peer: r.messages for r in checks.messages_per_peer(messages).collect()}
    incomplete = [{"peer": p, "files": sorted(peer_files.get(p, [])), "messages": k, "of": n_messages}
                  for p, k in sorted(held.items()) if k < n_messages and p not in departed]
    return {p: sorted(f) for p, f in sorted(peer_files.items())}, incomplete


def _departure(row: dict, rename, offsets) -> dict:
    """A row of :func:`analysis.checks.departures` as the report shows it: the file and its line."""
    from analysis import schema

    file = rename(row["file"])
    return {"peer": row["peer"], "file": schema.display_path(file),
            "line": schema.line_number(offsets, file, row["block_start"], row["row"]),
            "index": row["index"], "has": {"clock": row["clock"], "from": row["pid"]},
            "expected": (None if row["expected_clock"] is None else
                         {"clock": row["expected_clock"], "from": row["expected_pid"]}),
            "as_in": row["as_in"]}


def _exact_order_checks(records, order: str, first: int, found: dict, lap) -> tuple[list, list]:
    """The order per peer and FIFO order into ``found``; ``(disordered peers, peers with an index
    fault)``. FIFO order holds at every peer whose total order holds, so only the others are
    checked for it."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from analysis import checks

    ordered = checks.order_violations(records, order).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        n_order = ordered.count()
        found["order"] = Check(n_order, _rows(ordered.orderBy("peer", "index"), first) if n_order else [])
        disordered = [r.peer for r in ordered.filter(F.col("problem").contains("not after"))
                      .select("peer").distinct().limit(MAX_PEERS).collect()] if n_order else []
        index_dirty = [r.peer for r in ordered.filter(F.col("problem").contains("index"))
                       .select("peer").distinct().limit(MAX_PEERS).collect()] if n_order else []
    finally:
        ordered.unpersist()
    lap("order_s")
    if order == checks.CAUSAL:
        found["fifo_reorders"] = Check.settled(CAUSAL_FIFO)
    elif disordered:
        reorders = checks.fifo_reorders(records.filter(F.col("peer").isin(disordered)))
        found["fifo_reorders"] = Check(*_count_and_first(reorders, ["peer", "index"], first))
    else:
        found["fifo_reorders"] = Check.settled("implied by the order check")
    lap("fifo_s")
    return disordered, index_dirty


def _divergence_check(messages, peers: list[str], order: str, disordered: list[str],
                      index_dirty: list[str], first: int, found: dict) -> None:
    """Each pair of peers' first divergence into ``found["divergence"]``.

    Two peers whose records both strictly increase by the order's key list their common events in
    the same order, so only pairs with a disordered peer can diverge -- as long as the key is the
    same in every copy, which for a sequencer's seq is a check of its own. Pairs with a dirty peer
    (index faults, duplicates) or unequal sets are ranked exactly; the others by index."""
    from analysis import checks

    seq_conflicts = order == checks.SEQUENCER and found["conflicting_copies"].count > 0
    all_pairs = [(a, b) for i, a in enumerate(peers) for b in peers[i + 1:]]
    suspect = [] if order == checks.CAUSAL else [
        (a, b) for a, b in all_pairs if a in disordered or b in disordered or seq_conflicts]
    divergences: list[dict] = []
    exact: list[tuple[str, str]] = []
    if suspect:
        diffs = [r.asDict() for r in checks.set_differences(messages, peers).collect()]  # <= P^2
        dirty = set(index_dirty)
        if found["duplicates"].count:
            dirty |= {r.peer for r in checks.duplicates(messages).select("peer").distinct()
                      .limit(MAX_PEERS).collect()}
        unequal = {tuple(sorted((d["peer_a"], d["peer_b"]))) for d in diffs}
        exact = [(a, b) for a, b in suspect if a in dirty or b in dirty or (a, b) in unequal]
        fast_skip = [p for p in all_pairs if p not in suspect or p in exact]
        found_rows = checks.divergences_by_index(messages, fast_skip).collect()
        if exact:
            found_rows += checks.divergences_by_rank(messages, exact).collect()
        divergences = sorted((r.asDict(recursive=True) for r in found_rows),
                             key=lambda d: (d["position"], d["peer_a"], d["peer_b"]))
    found["divergence"] = Check(
        len(divergences), divergences[:max(first, 10)],
        note=CAUSAL_DIVERGENCE if order == checks.CAUSAL else None,
        figures={"pairs": len(peers) * (len(peers) - 1) // 2, "compared": len(suspect),
                 "ranked_exactly": len(exact)})


# --------------------------------------------------------------------------- report parts


def _small(df) -> bool:
    """Whether ``df``'s session runs `SMALL_INPUT_CONF` (:func:`main` on a small input): then a frame
    costs less computed again than cached (a cache is a plan compared with every cached plan, a job
    filling it and a call emptying it, for a few rows)."""
    key, value = next(iter(SMALL_INPUT_CONF.items()))
    return df.sparkSession.conf.get(key, None) == value


def _count_and_first(df, order: list[str], n: int) -> tuple[int, list[dict]]:
    """Count a violation frame and take its first ``n`` rows by ``order``: on a small input the rows
    first, counted again only if there are more than ``n`` (one job where a run is clean); else
    computing the frame once, cached."""
    from pyspark import StorageLevel
    if _small(df):
        shown, whole = _first_rows(df, order, n)
        return (len(shown) if whole else df.count()), shown
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        count = df.count()
        first = _rows(df.orderBy(*order), n) if count else []
    finally:
        df.unpersist()
    return count, first


def _first_rows(df, order: list[str], n: int) -> tuple[list[dict], bool]:
    """The first ``n`` rows of ``df`` by ``order``, and whether they are all of it (one job: ``n + 1``
    rows taken)."""
    shown = _rows(df.orderBy(*order), n + 1)
    return shown[:n], len(shown) <= n


def _rows(df, n: int) -> list[dict]:
    return [r.asDict(recursive=True) for r in df.limit(n).collect()]


def _put_files(result: Report, summaries, bad: list[dict]) -> None:
    from analysis import schema
    result.file_summaries = [
        {"path": schema.display_path(s.path), "lines": s.lines, "records": s.records,
         "bad_lines": s.bad_lines, "torn_last_line": s.torn_last_line} for s in summaries]
    result.bad_lines = {"count": sum(s.bad_lines for s in summaries), "first": bad}


if __name__ == "__main__":
    sys.exit(main())
