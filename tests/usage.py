"""What each test costs, for finding where the suite's time goes: with ``TOM_TEST_USAGE`` naming a
file, every test process appends one JSON line per test to it -- its node id, the worker, the wall
seconds of its call (setup and teardown included) and when it started, the CPU seconds of the
pytest process itself, of its children (running or ended: peers, `tom verify`, a local Spark's JVM)
and of the suite's Spark JVM meanwhile (tests/suite_spark.py: shared by the workers, so a test's
figure there also holds the others').

Read with ``python tests/usage.py FILE``. Nothing is recorded without the variable."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int, float] | None:
    """``(parent pid, process group, CPU seconds of the process and its reaped children)`` from
    /proc, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    # after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    return int(fields[1]), int(fields[2]), sum(int(f) for f in fields[11:15]) / TICK


def _server_group() -> int | None:
    """The process group of the suite's Spark JVM (its holder), if one runs."""
    folder = os.environ.get("TOM_TEST_CONNECT_DIR")
    pgid = Path(folder, "pgid") if folder else None
    return int(pgid.read_text()) if pgid is not None and pgid.exists() else None


def _sample() -> tuple[float, float, float, float]:
    """``(monotonic time, CPU seconds of this process, of its descendants outside the suite's Spark
    JVM's process group -- running or reaped --, of that group)``: one scan of /proc."""
    procs = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (s := _stat(int(entry.name))) is not None:
            procs[int(entry.name)] = s
    server_group = _server_group()
    server = sum(cpu for _, group, cpu in procs.values() if group == server_group)
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    children, stack = 0.0, list(kids.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        if procs[pid][1] != server_group:
            children += procs[pid][2]
            stack.extend(kids.get(pid, []))
    me, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (time.monotonic(), me.ru_utime + me.ru_stime, children + reaped.ru_utime + reaped.ru_stime,
            server)


class Recorder:
    """The pytest plugin: one line per test to ``path``."""

    def __init__(self, path: str, worker: str):
        self.path, self.worker = path, worker

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):  # noqa: ARG002 -- pytest's signature
        start, before = time.time(), _sample()
        yield
        after = _sample()
        wall, own, children, server = (a - b for a, b in zip(after, before))
        line = {"test": item.nodeid, "worker": self.worker, "start": round(start, 3), "wall": round(wall, 3), "own": round(own, 3),
                "children": round(max(children, 0.0), 3), "server": round(server, 3)}
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")


def summary(path: str, top: int = 40) -> str:
    """The recorded costs by folder and file, and the ``top`` tests by wall time."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    keys = ("wall", "own", "children", "server")
    out = [f"{len(rows)} tests; " + ", ".join(f"{k} {sum(r[k] for r in rows):.0f} s" for k in keys)]
    by: dict[str, dict[str, float]] = {}
    for r in rows:
        f = r["test"].split("::")[0]
        acc = by.setdefault(f, dict.fromkeys(("n", *keys), 0.0))
        acc["n"] += 1
        for k in keys:
            acc[k] += r[k]
    out.append(f"{'wall':>8} {'own':>8} {'children':>8} {'server':>8} {'n':>5}  file")
    for f, acc in sorted(by.items(), key=lambda kv: -kv[1]["wall"]):
        out.append(" ".join(f"{acc[k]:8.1f}" for k in keys) + f" {int(acc['n']):5d}  {f}")
    out.append("")
    for r in sorted(rows, key=lambda r: -r["wall"])[:top]:
        out.append(" ".join(f"{r[k]:8.1f}" for k in keys) + f"  {r['worker']:>4}  {r['test']}")
    return "\n".join(out)


if __name__ == "__main__":
    import sys
    print(summary(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40))
