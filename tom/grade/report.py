"""The class report of ``tom grade``: verdicts merged, points scored, grades and pages written.

Contract (docs/grading.md, "The report"; /work/contract: ``build(out, points) -> int``):

* input: ``OUT/runs/<student>/<test>/<repeat>/result.json`` (the ENGINE's verdict of each run, with its
  tool.out, peers/*.out and frames.jsonl beside it) and ``OUT/build/<student>.json``;
* the output-file check of every run is one Spark job (:func:`analysis.grade.judge`), one JVM for
  the class; a run's final verdict is the ENGINE's when it is not ``pass``, else the file check's;
* a test scores ``points x pass rate`` (passes over the class's number of repeats of that test; a
  missing run counts as not passed); a student whose build failed scores 0 on every test, verdict
  ``did-not-build``; the total is the sum; a run the grader failed on (``grader-error``,
  ``peers-disagree``) scores as not passed, is named in a warning, and makes :func:`build` return 1;
* output: ``grades.csv``, ``grades.json``, ``index.html``, ``students/<student>.html`` in ``OUT``.

Everything but :func:`build`'s Spark call is plain Python over dicts: :func:`grade` is pure.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
import tomllib
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tom.grade import PEERS_DISAGREE, diagram, grader_faults

DEFAULT_POINTS = Path(__file__).with_name("points.toml")
PASS, FAIL, DID_NOT_BUILD = "pass", "fail", "did-not-build"
NO_RESULT = "no-result"
"""A run the class has for this test (repeat k) but this student lacks: scored as not passed."""
MAX_DIAGRAMS_PER_TEST = 5

Run = dict[str, Any]


# --------------------------------------------------------------------------- reading OUT

def load_points(path: Path | None = None) -> dict[str, float]:
    """The points table: ``[points]`` of ``path`` (default: :data:`DEFAULT_POINTS`), in file order."""
    with open(path or DEFAULT_POINTS, "rb") as f:
        table = tomllib.load(f).get("points", {})
    bad = [k for k, v in table.items() if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0]
    if bad:
        raise ValueError(f"{path}: points must be numbers >= 0: {', '.join(bad)}")
    return {k: float(v) for k, v in table.items()}


def read_results(out: Path) -> list[Run]:
    """Every ``runs/*/*/*/result.json`` of ``out``, each with ``dir`` (its run folder) added; a folder's
    names are the truth for student, test and repeat."""
    results = []
    for path in sorted((out / "runs").glob("*/*/*/result.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"tom grade: skipping unreadable {path}: {exc}", file=sys.stderr)
            continue
        run_dir = path.parent
        if not run_dir.name.isdigit():
            continue
        result.update(student=run_dir.parent.parent.name, test=run_dir.parent.name,
                      repeat=int(run_dir.name), dir=run_dir)
        results.append(result)
    return results


def read_builds(out: Path) -> dict[str, dict]:
    """``build/<student>.json`` of each student: ``{"ok", "seconds", "tail"}``."""
    builds = {}
    for path in sorted((out / "build").glob("*.json")):
        try:
            builds[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            builds[path.stem] = {"ok": False, "seconds": 0.0, "tail": [f"unreadable {path.name}"]}
    return builds


def read_frames(run_dir: Path) -> list[dict]:
    """frames.jsonl of a run (records that do not parse are skipped)."""
    frames: list[dict] = []
    try:
        text = (run_dir / "frames.jsonl").read_text(errors="replace")
    except OSError:
        return frames
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            frames.append(record)
    return frames


# --------------------------------------------------------------------------- the Spark job

def file_checks(out: Path, results: list[Run], line_regex: Mapping[str, str]) -> tuple[dict, dict]:
    """The file check of every run (``{(student, test, repeat): FileCheck}``) and what it cost:
    ``{"spark_seconds", "spark_job_seconds", "file_check", "warnings"}``. ``file_check`` is ``"ran"``
    or why it did not."""
    info: dict[str, Any] = {"spark_seconds": 0.0, "spark_job_seconds": 0.0, "file_check": "ran",
                            "warnings": []}
    runs = [(r["student"], r["test"], r["repeat"],
             len(r["peers"]) + 1 if isinstance(r.get("peers"), list) and r["peers"] else None)
            for r in results]
    if not runs:
        info["file_check"] = "not run: no runs"
        return {}, info
    from tom.extras import verifier_missing
    if why := verifier_missing():
        info["file_check"] = f"not run: {why}"
        return {}, info
    from analysis.session import (CONNECT_MISSING, JAVA_MISSING, connect_available, connect_reachable,
                                  inside_spark_submit, java_available)
    remote = os.environ.get("SPARK_REMOTE") or None  # a Spark Connect server runs the job: no JVM here
    if remote is not None and not connect_available():
        info["file_check"] = f"not run: {CONNECT_MISSING}"
        return {}, info
    if remote is not None and (why := connect_reachable(remote)):  # (its client retries for minutes)
        info["file_check"] = f"not run: {why}"
        return {}, info
    if remote is None and not inside_spark_submit() and not java_available():
        info["file_check"] = f"not run: {JAVA_MISSING}"
        return {}, info
    from pyspark.sql import SparkSession

    from analysis import grade
    from analysis.session import build_session

    forms = {}
    for student, regex in line_regex.items():
        try:
            forms[student] = grade.line_form(regex)
        except ValueError as exc:
            info["warnings"].append(f"{student}: {exc}; read in the handout's form instead")
    started = time.monotonic()
    owned = SparkSession.getActiveSession() is None
    try:
        spark = build_session(log_dir=out / "spark", app_name="tom-grade", remote=remote)
    except Exception as exc:  # the JVM did not come up, or the server cannot be reached
        info["file_check"] = (f"not run: the Spark Connect server {remote} cannot be reached ({type(exc).__name__})"
                              if remote else f"not run: Spark did not start ({type(exc).__name__}); "
                              f"see {out / 'spark' / 'spark-driver.log'}")
        return {}, info
    try:
        job_started = time.monotonic()
        checks = grade.judge(spark, out, runs, forms)
        info["spark_job_seconds"] = round(time.monotonic() - job_started, 3)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        info["file_check"] = f"not run: the Spark job failed: {first}"
        checks = {}
    finally:
        if owned:
            spark.stop()
    info["spark_seconds"] = round(time.monotonic() - started, 3)
    return checks, info


# --------------------------------------------------------------------------- verdicts and points

def merge(result: Run, check: Any | None) -> Run:
    """One run's record for the report: the ENGINE's verdict unless it is ``pass``, else the file
    check's (``check``: an :class:`analysis.grade.FileCheck`, or None when it did not run)."""
    run = {"repeat": result["repeat"], "verdict": result.get("verdict", FAIL),
           "engine_verdict": result.get("verdict", FAIL),
           "expected": result.get("expected", ""), "got": result.get("got", ""),
           "detail": result.get("detail", ""), "seconds": result.get("seconds", 0.0),
           "tail": list(result.get("tail", [])), "tool": result.get("tool"),
           "peers": result.get("peers", []), "file_check": None}
    if check is not None:
        run["file_check"] = {"ok": check.ok, "line": check.line_no, "expected": check.expected,
                             "found": check.found, "reason": check.reason,
                             "tool_messages": check.tool_messages, "peer_messages": check.peer_messages}
    if run["verdict"] != PASS or check is None or check.ok:
        return run
    if check.line_no is None:  # the peers' files disagree: TOM's fault
        run.update(verdict=PEERS_DISAGREE, expected="the TOM peers' output files agree",
                   got=check.reason or "they do not",
                   detail="a grader bug, not the student's: grade this test again")
        return run
    run.update(verdict=FAIL,
               expected=f"tool.out line {check.line_no}: {check.expected}",
               got=f"tool.out line {check.line_no}: {check.found}",
               detail=(f"{check.reason} (tool.out holds {check.tool_messages} message lines, "
                       f"the TOM peers delivered {check.peer_messages})"))
    return run


def test_order(points: Mapping[str, float], ran: set[str]) -> list[str]:
    """The tests that ran, in the points table's order, then the others by name."""
    return [t for t in points if t in ran] + sorted(ran - set(points))


def grade(students: list[str], runs: Mapping[tuple[str, str], list[Run]], builds: Mapping[str, dict],
          points: Mapping[str, float], tests: list[str]) -> dict[str, dict]:
    """Per student: ``{"build", "total", "tests": {test: {"points", "score", "pass_rate", "passed",
    "repeats", "runs"}}}``. Pure. The repeats of a test are the class's greatest repeat number for
    it; a run a student lacks is :data:`NO_RESULT`; a student whose build failed gets
    :data:`DID_NOT_BUILD` for every repeat of every test (with the build's tail)."""
    repeats = {t: max([r["repeat"] for (s, tt), rs in runs.items() if tt == t for r in rs] or [1])
               for t in tests}
    graded = {}
    for student in students:
        build = builds.get(student) or {}
        failed_build = bool(build) and not build.get("ok", False)
        per_test = {}
        for test in tests:
            k = repeats[test]
            if failed_build:
                tail = list(build.get("tail", []))
                mine = [{"repeat": i, "verdict": DID_NOT_BUILD, "engine_verdict": DID_NOT_BUILD,
                         "expected": "the submission builds", "got": "the build failed",
                         "detail": "see build/" + student + ".log", "seconds": 0.0, "tail": tail,
                         "tool": None, "peers": [], "file_check": None} for i in range(1, k + 1)]
            else:
                have = {r["repeat"]: r for r in runs.get((student, test), [])}
                mine = [have.get(i) or {"repeat": i, "verdict": NO_RESULT, "engine_verdict": NO_RESULT,
                                        "expected": "a result of this run", "got": "none",
                                        "detail": "the run left no result.json", "seconds": 0.0,
                                        "tail": [], "tool": None, "peers": [], "file_check": None}
                        for i in range(1, k + 1)]
            passed = sum(r["verdict"] == PASS for r in mine)
            worth = points.get(test, 0.0)
            per_test[test] = {"points": worth, "score": round(worth * passed / k, 2),
                              "pass_rate": round(passed / k, 4), "passed": passed, "repeats": k,
                              "runs": mine}
        graded[student] = {"build": build or None, "did_not_build": failed_build,
                           "total": round(sum(t["score"] for t in per_test.values()), 2),
                           "tests": per_test}
    return graded


# --------------------------------------------------------------------------- writing

def _num(x: float) -> str:
    return f"{x:g}"


def write_csv(path: Path, graded: Mapping[str, dict], tests: list[str]) -> None:
    """A row per student: the score of each test, then the total."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", *tests, "total"])
        for student, g in graded.items():
            w.writerow([student, *(_num(g["tests"][t]["score"]) for t in tests), _num(g["total"])])


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
td.num,th.num{text-align:right}
.pass{background:#e3f4e3}.partial{background:#fff3cd}.fail{background:#f8dcdc}
.note{color:#a33}.muted{color:#777}
pre{background:#f6f6f6;padding:.5em;overflow:auto;max-height:24em}
.diagram{overflow:auto;border:1px solid #ddd;margin:.5em 0}
"""


def _page(title: str, body: list[str]) -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _rate_class(rate: float) -> str:
    return "pass" if rate >= 1 else ("fail" if rate <= 0 else "partial")


def student_href(student: str) -> str:
    """The link from index.html to the student's page."""
    return "students/" + quote(student, safe="") + ".html"


def index_html(graded: Mapping[str, dict], tests: list[str], points: Mapping[str, float],
               meta: Mapping[str, Any]) -> str:
    """The class page: a row per student, a cell per test (score, pass rate in its title), the total."""
    top = sum(points.get(t, 0.0) for t in tests)
    body = ["<h1>tom grade: the class</h1>",
            f"<p>{len(graded)} students, {len(tests)} tests, at most {_num(top)} points. "
            f"Output-file check: {escape(meta['file_check'])}"
            + (f" (Spark {meta['spark_seconds']:.1f} s, its job {meta['spark_job_seconds']:.1f} s)"
               if meta["file_check"] == "ran" else "") + ".</p>"]
    body += [f'<p class="note">{escape(w)}</p>' for w in meta.get("warnings", [])]
    head = "".join(f'<th class="num" title="{escape(t)}">{escape(t)}<br>'
                   f'<span class="muted">{_num(points.get(t, 0.0))}</span></th>' for t in tests)
    body.append(f"<table><tr><th>student</th>{head}<th class=\"num\">total<br>"
                f"<span class=\"muted\">{_num(top)}</span></th></tr>")
    for student, g in graded.items():
        cells = []
        for t in tests:
            s = g["tests"][t]
            verdicts = ", ".join(r["verdict"] for r in s["runs"])
            cells.append(f'<td class="num {_rate_class(s["pass_rate"])}" '
                         f'title="passed {s["passed"]}/{s["repeats"]}: {escape(verdicts)}">'
                         f'<a href="{student_href(student)}#{quote(t)}">{_num(s["score"])}</a></td>')
        flag = ' <span class="note">(did not build)</span>' if g["did_not_build"] else ""
        body.append(f'<tr><td><a href="{student_href(student)}">{escape(student)}</a>{flag}</td>'
                    f'{"".join(cells)}<td class="num"><b>{_num(g["total"])}</b></td></tr>')
    body.append("</table>")
    body.append('<p class="muted">Files: <a href="grades.csv">grades.csv</a>, '
                '<a href="grades.json">grades.json</a>. A cell is points &times; pass rate; '
                "hover for the verdict of each repeat.</p>")
    return _page("tom grade: the class", body)


def _run_row(run: Run) -> str:
    cls = "pass" if run["verdict"] == PASS else "fail"
    return (f'<tr class="{cls}"><td class="num">{run["repeat"]}</td><td>{escape(run["verdict"])}</td>'
            f'<td class="num">{float(run.get("seconds") or 0):.1f}</td>'
            f'<td>{escape(run.get("expected") or "")}</td><td>{escape(run.get("got") or "")}</td></tr>')


def student_html(student: str, g: Mapping[str, Any], tests: list[str], run_dirs: Mapping[tuple, Path]) -> str:
    """A student's page: per test its score and pass rate, per repeat the verdict, expected and got;
    for each run that did not pass, the detail, the tool's last lines and the space-time diagram of
    its frames."""
    top = sum(g["tests"][t]["points"] for t in tests)
    body = ['<p><a href="../index.html">&larr; the class</a></p>',
            f"<h1>{escape(student)}: {_num(g['total'])} / {_num(top)}</h1>"]
    build = g.get("build") or {}
    if g["did_not_build"]:
        body.append('<p class="note">The build failed: every test scores 0 (did-not-build).</p>')
        body.append("<pre>" + escape("\n".join(build.get("tail", []))) + "</pre>")
    elif build:
        body.append(f'<p class="muted">Built in {float(build.get("seconds") or 0):.1f} s.</p>')
    body.append("<ul>" + "".join(
        f'<li><a href="#{quote(t)}">{escape(t)}</a>: {_num(g["tests"][t]["score"])} / '
        f'{_num(g["tests"][t]["points"])}</li>' for t in tests) + "</ul>")
    for t in tests:
        s = g["tests"][t]
        cls = _rate_class(s["pass_rate"])
        body.append(f'<h2 id="{escape(quote(t))}" class="{cls}">{escape(t)}: {_num(s["score"])} / '
                    f'{_num(s["points"])} <span class="muted">(passed {s["passed"]} of {s["repeats"]})'
                    "</span></h2>")
        body.append("<table><tr><th>repeat</th><th>verdict</th><th>seconds</th><th>expected</th>"
                    "<th>got</th></tr>" + "".join(_run_row(r) for r in s["runs"]) + "</table>")
        drawn = 0
        for run in s["runs"]:
            if run["verdict"] == PASS or g["did_not_build"]:
                continue
            body.append(f"<h3>{escape(t)}, repeat {run['repeat']}: {escape(run['verdict'])}</h3>")
            if run.get("detail"):
                body.append(f"<p>{escape(run['detail'])}</p>")
            if run.get("tail"):
                body.append("<p class=\"muted\">The tool's last lines:</p><pre>"
                            + escape("\n".join(run["tail"])) + "</pre>")
            run_dir = run_dirs.get((student, t, run["repeat"]))
            if run_dir is None or drawn >= MAX_DIAGRAMS_PER_TEST:
                continue
            frames = read_frames(run_dir)
            tool = (run.get("tool") or {}).get("from", "tool")
            peers = [p.get("from", "") for p in run.get("peers") or []]
            if frames:
                drawn += 1
                body.append('<div class="diagram">'
                            + diagram.svg(frames, tool, peers, ident=f"d-{quote(t)}-{run['repeat']}")
                            + "</div>")
            else:
                body.append('<p class="muted">No frames recorded for this run.</p>')
    return _page(f"tom grade: {student}", body)


def summary_line(student: str, g: Mapping[str, Any], top: float) -> str:
    """One line per student for the terminal: total, and what did not pass."""
    if g["did_not_build"]:
        return f"{student}: {_num(g['total'])}/{_num(top)}  did not build"
    lost = []
    for t, s in g["tests"].items():
        if s["passed"] < s["repeats"]:
            verdicts = sorted({r["verdict"] for r in s["runs"] if r["verdict"] != PASS})
            lost.append(f"{t} {s['passed']}/{s['repeats']} ({', '.join(verdicts)})")
    return f"{student}: {_num(g['total'])}/{_num(top)}" + ("  " + "; ".join(lost) if lost else "  all passed")


# --------------------------------------------------------------------------- the whole report

def build(out: Path, points: Path | None = None, *,
          line_regex: Mapping[str, str] | None = None) -> int:
    """Write the class report of ``out`` (grades.csv, grades.json, index.html, students/*.html) and
    print a line per student and the path of index.html. ``points``: the points table (default
    :data:`DEFAULT_POINTS`). ``line_regex``: student -> the regex of their output lines (their
    tom-grade.toml's ``[output] line_regex``), also read from a ``line_regex`` key of a run's
    result.json. Returns 0, or 1 when the output-file check could not run (the grades then rest on
    the ENGINE's verdicts alone, and every page says so) or when a run failed in the grader
    (:func:`tom.grade.grader_faults`)."""
    out = Path(out)
    table = load_points(points)
    results = read_results(out)
    builds = read_builds(out)
    forms = {r["student"]: r["line_regex"] for r in results if isinstance(r.get("line_regex"), str)}
    forms.update(line_regex or {})
    checks, meta = file_checks(out, results, forms)
    runs: dict[tuple[str, str], list[Run]] = {}
    run_dirs: dict[tuple, Path] = {}
    for r in results:
        runs.setdefault((r["student"], r["test"]), []).append(
            merge(r, checks.get((r["student"], r["test"], r["repeat"]))))
        run_dirs[(r["student"], r["test"], r["repeat"])] = r["dir"]
    students = sorted({r["student"] for r in results} | set(builds))
    ran = {r["test"] for r in results}
    tests = test_order(table, ran)
    unpointed = [t for t in tests if t not in table]
    if unpointed:
        meta["warnings"].append(f"not in the points table, worth 0: {', '.join(unpointed)}")
    graded = grade(students, runs, builds, table, tests)
    faults = grader_faults((t, r["verdict"]) for g in graded.values() for t, s in g["tests"].items()
                           for r in s["runs"])
    if faults:
        meta["warnings"].append(faults)
    top = sum(table.get(t, 0.0) for t in tests)

    write_csv(out / "grades.csv", graded, tests)
    document = {"spark_seconds": meta["spark_seconds"], "spark_job_seconds": meta["spark_job_seconds"],
                "file_check": meta["file_check"], "warnings": meta["warnings"],
                "tests": [{"name": t, "points": table.get(t, 0.0)} for t in tests], "max_total": top,
                "students": graded}
    (out / "grades.json").write_text(json.dumps(document, indent=1, default=str) + "\n")
    pages = out / "students"
    pages.mkdir(exist_ok=True)
    for student, g in graded.items():
        (pages / f"{student}.html").write_text(student_html(student, g, tests, run_dirs))
    index = out / "index.html"
    index.write_text(index_html(graded, tests, table, meta))

    for student, g in graded.items():
        print(summary_line(student, g, top))
    for w in meta["warnings"]:
        print(f"warning: {w}")
    if meta["file_check"] != "ran":
        print(f"output-file check {meta['file_check']}")
    else:
        print(f"output-file check: Spark {meta['spark_seconds']:.1f} s (its job {meta['spark_job_seconds']:.1f} s)")
    print(f"report: {index}")
    return 0 if meta["file_check"] in ("ran", "not run: no runs") and not faults else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m tom.grade.report OUT [--points FILE]``: write the report of a graded class folder
    again (other points, say) without running any test."""
    import argparse
    parser = argparse.ArgumentParser(
        prog="python -m tom.grade.report",
        description="Write the class report (grades.csv, grades.json, index.html, students/) of a "
                    "folder that `tom grade` filled, from its runs, without running any test again.")
    parser.add_argument("out", type=Path, metavar="OUT", help="the folder `tom grade` wrote (runs/, build/)")
    parser.add_argument("--points", type=Path, default=None,
                        help="a points table (TOML, [points] test = points); default: tom/grade/points.toml")
    args = parser.parse_args(argv)
    if not (args.out / "runs").is_dir() and not (args.out / "build").is_dir():
        print(f"{args.out}: no runs/ or build/ here: not a folder that `tom grade` filled", file=sys.stderr)
        return 2
    try:
        return build(args.out, args.points)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"tom grade: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
