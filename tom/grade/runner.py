"""Grade a class: each student's build once, then every test × repeat, ``jobs`` at a time.

A build runs ``/bin/sh -c BUILD`` in the student's folder, in its own session, with its own time limit;
its output goes to ``OUT/build/<student>.log`` and ``OUT/build/<student>.json`` says how it went. A
failed build gives that student's runs the verdict *did-not-build* (their result.json only); nobody
else's runs wait for it or lose anything by it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import trio

from . import GRADER_ERROR, GRADER_ERROR_DETAIL
from .config import Submission, fill
from .prompts import tail_lines
from .trial import START_LIMIT, TrialSpec, run_trial

BUILD_LIMIT = 300.0


@dataclass(frozen=True)
class Plan:
    out: Path
    tests: tuple[str, ...]
    repeat: int = 1
    jobs: int = 1
    seed: int = 1
    time_limit: float = 60.0
    build_limit: float = BUILD_LIMIT
    start_limit: float = START_LIMIT


async def build(sub: Submission, out: Path, limit: float) -> dict:
    """Run the student's build; write OUT/build/<student>.log and .json; return the json."""
    folder = out / "build"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{sub.name}.log"
    command = fill(sub.build, dir=sub.folder)
    start = trio.current_time()
    why = ""
    with open(log, "wb") as f:
        f.write(f"$ {command}\n".encode())
        f.flush()
        process = await trio.lowlevel.open_process(["/bin/sh", "-c", command], cwd=str(sub.folder), stdin=subprocess.DEVNULL, stdout=f, stderr=f,
                                                   start_new_session=True)
        try:
            with trio.move_on_after(limit) as scope:
                await process.wait()
            if scope.cancelled_caught:
                why = f"timed out after {limit:.0f} s"
        finally:
            with trio.CancelScope(shield=True):
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                await process.wait()
    code = process.returncode if process.returncode is not None else -9
    ok = not why and code == 0
    if not why and code != 0:
        why = f"exit status {code}" if code > 0 else f"killed by signal {-code}"
    tail = tail_lines(log.read_text("utf-8", errors="replace"))
    result = {"ok": ok, "seconds": round(trio.current_time() - start, 3), "tail": tail, "why": why}
    (folder / f"{sub.name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def did_not_build(sub: Submission, test: str, repeat: int, folder: Path, built: dict) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    result = {"student": sub.name, "test": test, "repeat": repeat, "verdict": "did-not-build",
              "expected": "the build to succeed", "got": built.get("why", "") or "it failed",
              "detail": f"see build/{sub.name}.log", "seconds": 0.0, "tail": built.get("tail", []),
              "tool": {"from": "", "port": 0}, "peers": []}
    (folder / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def engine_failed(spec: TrialSpec, error: Exception, log: Path) -> dict:
    """The result of a run the grader itself failed on: verdict :data:`GRADER_ERROR`, never the tool's.
    An OSError (the run's folder unwritable, a full disk) is its one line in ``got``; any other error is
    a bug of tom grade, its traceback appended to ``log``. result.json is written when the folder
    takes it; the result is returned either way."""
    where = ""
    if not isinstance(error, OSError):
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"--- {spec.submission.name} {spec.test} #{spec.repeat}\n")
                traceback.print_exception(error, file=f)
            where = f"; its traceback is in {log}"
        except OSError:  # nowhere else to keep it
            traceback.print_exception(error)
            where = "; its traceback is on tom grade's stderr"
    result = {"student": spec.submission.name, "test": spec.test, "repeat": spec.repeat, "verdict": GRADER_ERROR,
              "expected": "the grader to run the test", "got": f"{type(error).__name__}: {error}",
              "detail": GRADER_ERROR_DETAIL + where,
              "seconds": 0.0, "tail": [], "tool": {"from": "", "port": 0}, "peers": []}
    try:
        spec.folder.mkdir(parents=True, exist_ok=True)
        (spec.folder / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        result["detail"] += f"; no result.json ({e.strerror or e})"
    return result


async def grade(subs: list[Submission], plan: Plan, progress: Callable[[dict], None] = lambda r: None) -> list[dict]:
    """Every run of the plan; results in (student, test, repeat) order."""
    limiter = trio.CapacityLimiter(plan.jobs)
    results: dict[tuple[str, str, int], dict] = {}

    def folder(sub: Submission, test: str, repeat: int) -> Path:
        return plan.out / "runs" / sub.name / test / str(repeat)

    async def one(sub: Submission, test: str, repeat: int) -> None:
        async with limiter:
            spec = TrialSpec(sub, test, repeat, folder(sub, test, repeat), plan.seed, plan.time_limit, plan.start_limit)
            try:
                result = await run_trial(spec)
            except Exception as e:  # the grader's failure costs this run, not the class's grading
                result = engine_failed(spec, e, plan.out / "grader-errors.log")
        results[(sub.name, test, repeat)] = result
        progress(result)

    async def student(sub: Submission, nursery: trio.Nursery) -> None:
        if sub.build:
            async with limiter:
                built = await build(sub, plan.out, plan.build_limit)
            if not built["ok"]:
                for test in plan.tests:
                    for repeat in range(1, plan.repeat + 1):
                        result = did_not_build(sub, test, repeat, folder(sub, test, repeat), built)
                        results[(sub.name, test, repeat)] = result
                        progress(result)
                return
        for repeat in range(1, plan.repeat + 1):
            for test in plan.tests:
                nursery.start_soon(one, sub, test, repeat)

    async with trio.open_nursery() as nursery:
        for sub in subs:
            nursery.start_soon(student, sub, nursery)
    order = {t: i for i, t in enumerate(plan.tests)}
    return [results[k] for k in sorted(results, key=lambda k: (k[0], order[k[1]], k[2]))]
