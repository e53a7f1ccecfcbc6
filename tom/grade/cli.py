"""``tom grade SUBMISSIONS/ --run '...'``: grade a class's handout tools (docs/grading.md)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..errors import ConfigError
from . import EXTRAS, TESTS, grader_faults


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tom grade",
        description="Grade a class's handout tools: each student's tool (a folder per student in "
                    "SUBMISSIONS) runs beside TOM's scripted handout peers, one test per rule of the handout, "
                    "each situation made on purpose; a verdict per run in OUT/runs/, then the class report.")
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS", help="a folder with one folder per student")
    p.add_argument("--run", metavar="COMMAND",
                   help="how to start a tool, with {dir} {neighbors} {output} {port}, e.g. "
                        "'java -cp {dir}/bin Main {neighbors} {output} {port}' (a student's tom-grade.toml "
                        "may replace it)")
    p.add_argument("--build", metavar="COMMAND", default="",
                   help="run once in each student's folder first, e.g. 'javac -d {dir}/bin {dir}/*.java'")
    p.add_argument("--out", type=Path, metavar="DIR", help="where the runs and the report go (default: grades/ "
                                                          "beside SUBMISSIONS)")
    p.add_argument("--repeat", type=int, default=1, metavar="K", help="run each test K times (default 1)")
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2), metavar="N",
                   help="runs side by side (default: half the CPUs)")
    p.add_argument("--tests", metavar="A,B", help=f"only these tests (of: {', '.join(TESTS + EXTRAS)})")
    p.add_argument("--seed", type=int, default=1, help="seed of every random choice (default 1)")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="SECS", help="per test run (default 60)")
    p.add_argument("--build-limit", type=float, default=300.0, metavar="SECS", help="per build (default 300)")
    p.add_argument("--start-limit", type=float, default=20.0, metavar="SECS",
                   help="for a tool to show its menu and listen (default 20)")
    p.add_argument("--points", type=Path, metavar="FILE", help="points per test (default tom/grade/points.toml)")
    p.add_argument("--extras", action="store_true", help=f"add the optional tests ({', '.join(EXTRAS)})")
    p.add_argument("--no-report", action="store_true", help="only the run folders, no class report")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per run")
    return p


def _tests(args: argparse.Namespace) -> tuple[str, ...]:
    known = TESTS + EXTRAS
    if args.tests:
        chosen = tuple(t.strip() for t in args.tests.split(",") if t.strip())
        unknown = [t for t in chosen if t not in known]
        if unknown:
            raise ConfigError(f"unknown test {unknown[0]!r} (known: {', '.join(known)})")
        return chosen
    return TESTS + (EXTRAS if args.extras else ())


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return grade(args)
    except ConfigError as e:
        print(f"tom grade: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def grade(args: argparse.Namespace) -> int:
    import trio

    from .config import load_class
    from .runner import Plan, grade as grade_class
    from .toolfile import DEFAULT_LINE

    if args.repeat < 1 or args.jobs < 1 or min(args.time_limit, args.build_limit, args.start_limit) <= 0:
        raise ConfigError("--repeat and --jobs take a whole number >= 1; --time-limit, --build-limit and "
                          "--start-limit seconds > 0")
    if args.points is not None and not args.points.is_file():
        raise ConfigError(f"{args.points}: no such points file")
    tests = _tests(args)
    subs = load_class(args.submissions, args.run, args.build)
    out = args.out if args.out is not None else args.submissions.resolve().parent / "grades"
    try:
        (out / "runs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot write {out}: {e.strerror or e}") from None
    plan = Plan(out, tests, args.repeat, args.jobs, args.seed, args.time_limit, args.build_limit, args.start_limit)
    total = len(subs) * len(tests) * args.repeat
    print(f"tom grade: {len(subs)} students x {len(tests)} tests x {args.repeat} = {total} runs, "
          f"{args.jobs} at a time; runs in {out / 'runs'}", flush=True)
    done = 0
    start = time.monotonic()

    def progress(r: dict) -> None:
        nonlocal done
        done += 1
        if args.quiet:
            return
        why = f"  {r['got']}" if r["verdict"] != "pass" else ""
        print(f"[{done}/{total}] {r['student']} {r['test']} #{r['repeat']}: {r['verdict']} "
              f"({r['seconds']:.1f} s){why}", flush=True)

    results = trio.run(grade_class, subs, plan, progress)
    passed = sum(r["verdict"] == "pass" for r in results)
    print(f"tom grade: {passed} of {len(results)} runs passed the engine's checks in "
          f"{time.monotonic() - start:.0f} s", flush=True)
    faults = grader_faults((r["test"], r["verdict"]) for r in results)
    if faults:
        print(f"tom grade: {faults}", file=sys.stderr, flush=True)
    forms = {s.name: s.line_regex for s in subs if s.line_regex != DEFAULT_LINE}
    code = 0 if args.no_report else report(out, args.points, forms)
    return code or (1 if faults else 0)


def report(out: Path, points: Path | None, line_regex: dict[str, str] | None = None) -> int:
    """The class report (tom.grade.report), or one line saying why there is none. ``line_regex``:
    student -> their tom-grade.toml's ``[output] line_regex``, for the output-file check."""
    try:
        from .report import build
    except ImportError as e:
        print(f"tom grade: no report ({e}); the run folders are in {out / 'runs'}", file=sys.stderr)
        return 0
    return build(out, points, line_regex=line_regex or {})
