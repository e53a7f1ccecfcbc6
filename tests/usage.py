"""What each test costs, for finding where the suite's time goes: with ``TOM_TEST_USAGE`` naming a
file, every test process appends one JSON line per test to it -- its node id, the worker, the wall
seconds of its call (setup and teardown included) and when it started, the CPU seconds of the pytest process itself, of
its children (running or ended: peers, `tom verify`, a local Spark's JVM) and of the suite's Spark
Connect server meanwhile (shared by the workers, so a test's figure there also holds the other's).

Read with ``scripts/test-usage FILE``. Nothing is recorded without the variable."""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """``(parent pid, CPU seconds of the process and its reaped children)`` from /proc, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    # after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / TICK


def _processes() -> dict[int, tuple[int, float]]:
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            s = _stat(int(entry.name))
            if s is not None:
                out[int(entry.name)] = s
    return out


def _children_cpu(exclude: set[int]) -> float:
    """CPU seconds of this process's running descendants (their own reaped children included),
    outside the trees rooted at ``exclude``, plus those of its reaped children."""
    procs = _processes()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    total, stack = 0.0, list(kids.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        if pid in exclude:
            continue
        total += procs[pid][1]
        stack.extend(kids.get(pid, []))
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + r.ru_utime + r.ru_stime


def _server_cpu() -> tuple[set[int], float]:
    """The pids and CPU seconds of the suite's Spark Connect server's process group, if one runs."""
    folder = os.environ.get("TOM_TEST_CONNECT_DIR")
    if not folder or not Path(folder, "pgid").exists():
        return set(), 0.0
    pgid = int(Path(folder, "pgid").read_text())
    pids, total = set(), 0.0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    s = _stat(int(entry.name))
                    if s is not None:
                        pids.add(int(entry.name))
                        total += s[1]
            except OSError:
                pass
    return pids, total


def _sample() -> tuple[float, float, float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    server_pids, server = _server_cpu()
    return time.monotonic(), me.ru_utime + me.ru_stime, _children_cpu(server_pids), server


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
