"""Benchmark TOM peers as real processes on loopback.

For each group size (default 3 and 5 peers), each mode (plain TCP, and a secured group: ``--keys``,
mutual TLS 1.3) and each order asked for (``--order``: lamport by default, ``all`` for the three side by
side) two scenarios run, each on a fresh group:

* throughput: every peer gets N messages on its stdin as fast as the pipe takes them (or, with
  ``--window W``, at most W messages per peer in flight in the group). Figures: multicasts delivered
  at every peer per second, ``total / (max delivered_at - min sent_at)``, and the send->deliver
  latency (``delivered_at - sent_at`` of every record at every peer) under that load;
* light load: one message at a time, round-robin over the peers, the next one sent only once the
  previous one is delivered at every peer. Figures: send->deliver latency p50/p99. When several modes
  or orders run, their groups run side by side and take turns, one message each, so that all see the
  same machine load.

Frames and bytes per multicast, under load and under light load: what every peer wrote on its links
over its whole run (each peer logs it when it stops), divided by the multicasts of the run. Forming
the group, heartbeats, the warm-up and the leave are included: a few per mille of a throughput run,
some 0.1-0.3 frames per multicast of a light run of 300. Under load, ACKs (and sequence numbers) of a
run of messages share one frame, so the figures there are lower than one message at a time.

Each run first checks what every peer delivered, with no loss and no duplicate, in its order: the same
``(clock, pid)`` sequence everywhere, ``(clock, pid)`` increasing (lamport) or ``(view, seq)``
increasing (sequencer); the same set everywhere and every message after the ones its vector timestamp
names (causal). A run that fails this prints MISMATCH and the figures are void.

Every loop is bounded in count and in time (``--deadline`` seconds per scenario); every process the
benchmark starts is stopped (SIGTERM, then SIGKILL) on any exit, error or Ctrl-C included; everything
lives in a temporary directory and on 127.0.0.1.

``--profile`` records a py-spy profile (raw collapsed stacks) of one peer during the throughput run
and prints the functions that cost the most (self and inclusive share of the samples).

The closing lines compare secured with plain: throughput ratio and light-load p50 difference.

``--http`` starts every peer with ``--http`` (served, nobody watching): run with and without it to
see what serving the API costs.

``--src TREE`` runs the peers from another source tree (a git worktree of another commit); given more
than once, every scenario runs once per tree, one after the other on the same machine load, and the
light-load groups of all trees take turns, so builds compare side by side in one run (e.g. the previous
``main`` and this one: ``--src ../main --src .``).

``--peers-compare`` adds two reference rows: PySyncObj, a Python Raft library (`benchmarks.raft_compare`:
installed into a venv of its own, 3 nodes, the highest request rate of which 90 % commit), and one
Redis Stream as the total order (`benchmarks.redis_compare`: Debian's redis-server, installed by apt-get
when missing and we are root, and the ``redis`` client in a venv of its own; 3 members each append as
many entries as a TOM peer of 3 multicasts, pipelined 100 at a time, and read the whole stream: entries
read at every member per second; and the light-load round trip, XADD then XREAD at another member).
Each reference that cannot run here is one line saying why, and the bench goes on.

``--durable`` runs every scenario for in-memory peers (no ``--data``, the baseline) and for durable
peers with each ``--fsync`` policy (``always``, ``batch``, ``never``; a data folder per peer), plain
groups unless ``--security`` says otherwise; the light-load groups of all four take turns. The run's
temporary folder (outputs and data folders of every row alike) goes under ``--data-root`` (``/var/tmp``
by default), which must not be held in memory (tmpfs, ramfs: an fsync there costs nothing); the
header names its filesystem and device. A table then gives, per policy and group size, multicasts/s
and its ratio to the in-memory rate, light-load p50/p99 and the p50's difference, and the bytes on
disk per message after the throughput run (``history.log`` and ``accepted.log`` over the messages
each peer delivered, averaged over the peers), with the issue's goals for the default, ``batch`` (>= 0.6x the
in-memory rate, <= +0.3 ms light-load p50). With ``--peers-compare`` the references get durable
variants in the same run, with the same burst and their files on the same disk: the Redis Stream
with an append-only file, ``appendfsync always`` (beside TOM's ``always``) and ``everysec`` (beside
``batch``), and PySyncObj with a journal and a dump file per node (its journal is not fsynced while
it runs: beside ``never``).

Run: ``scripts/bench [--peers 3,5] [--order lamport|sequencer|causal|all] [--messages N] [--window W]
[--light N] [--security both|plain|secured] [--profile] [--http] [--src TREE ...] [--peers-compare]
[--durable [--data-root DIR]]``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import statistics
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from collections.abc import Sequence
from typing import Callable

from benchmarks.peergroup import (HOST, Group, GroupError, Mount, NotADisk, OutputCounter, Peer, busy_cpus,
                                  fsync_seconds, loadavg, real_disk, source_tree, stop_on_sigterm)
from tom.durable.log import FSYNC

DEFAULT_MESSAGES = {3: 20000, 5: 10000}
DEFAULT_OTHER = 10000
POLL = 0.0002  # seconds between polls of the output files (light load)
ORDERS = ("lamport", "sequencer", "causal")
FLOOR = "floor"  # the light-load floor's pseudo-order (--floor: `benchmarks.floor_mesh`)
TRAFFIC = re.compile(r"sent on the links: (\d+) frames, (\d+) bytes")


class BenchError(GroupError):
    pass


# -- processes -------------------------------------------------------------------------------------


class Tail(OutputCounter):
    """Counts the message records (view records are not counted) of a growing file."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.lines = 0

    def poll(self) -> int:
        data = self.read()
        if data:
            self.lines += data.count(b"\n") - data.count(b'"kind":"view"')
        return self.lines


class BenchGroup(Group):
    """The peers of one scenario: SIGKILL 5 s after SIGTERM, deliveries counted by ``Tail``."""

    counter_type = Tail
    error = BenchError

    def counts(self) -> list[int]:
        return [p.counter.poll() for p in self.peers]

    def wait_delivered(self, expected: int, deadline: float, sleep: float = POLL) -> None:
        """Wait until every peer's output holds ``expected`` lines, or fail at ``deadline``."""
        polls = 0
        while True:
            counts = self.counts()
            if min(counts) >= expected:
                return
            if time.monotonic() > deadline:
                raise BenchError(f"{self.workdir.name}: timed out waiting for {expected} deliveries at every peer; "
                                 f"have {counts}; the peers' logs' last lines:\n"
                                 + "\n".join(f"{p.pid}: {p.proc.log_tail(3)}" for p in self.peers))
            polls += 1
            if polls % 256 == 0:
                self.check_alive()
            time.sleep(sleep)

    def warm_up(self, deadline: float) -> None:
        """One message from every peer, delivered everywhere: all links of the mesh are up."""
        for i, p in enumerate(self.peers):
            p.send([f"warmup {i}"])
        self.wait_delivered(self.n, deadline, sleep=0.005)


class FloorGroup(BenchGroup):
    """Bare trio peers making the two hops of a message and nothing else (`benchmarks.floor_mesh`): the
    floor under TOM's light-load latency on this machine. Only one message at a time (no order rule)."""

    def peer_argv(self, neighbors: Path, out: Path, port: int, keys: Path) -> list[str]:
        return [sys.executable, "-m", "benchmarks.floor_mesh", str(neighbors), str(out), str(port)]

    def warm_up(self, deadline: float) -> None:
        for i, p in enumerate(self.peers):  # one at a time: the floor has no order rule
            p.send([f"warmup {i}"])
            self.wait_delivered(i + 1, deadline, sleep=0.005)


def light_group(n: int, workdir: Path, secure: bool, order: str, src: Path | None,
                fsync: str | None = None) -> BenchGroup:
    """A light-load group: TOM peers in ``order`` (durable with ``fsync``), or floor peers for the order
    ``floor``."""
    if order == FLOOR:
        return FloorGroup(n, workdir, src=Path(__file__).resolve().parent.parent)
    return BenchGroup(n, workdir, src=src, secure=secure, order=order, fsync=fsync)


# -- records and checks ----------------------------------------------------------------------------


def pid_key(pid: str) -> tuple[str, int]:
    host, _, port = pid.rpartition(":")
    return host, int(port)


def read_records(path: Path) -> list[dict]:
    records = []
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            try:
                records.append(json.loads(line))
            except ValueError:
                raise BenchError(f"{path.name}: line {n} is not JSON: {line[:80]!r}") from None
    return records


def verify(group: BenchGroup, expected: int, order: str = "lamport") -> tuple[bool, str, list[list[dict]]]:
    """``expected`` messages at every peer, none twice, in ``order`` (see the module docstring)."""
    per_peer = [[r for r in read_records(p.output) if r.get("kind") == "message"] for p in group.peers]
    problems = []
    seqs = [[(r["clock"], r["pid"]) for r in recs] for recs in per_peer]
    first = seqs[0]
    for p, seq, recs in zip(group.peers, seqs, per_peer):
        if len(seq) != expected:
            problems.append(f"{p.pid} delivered {len(seq)} messages, expected {expected}")
        if len(set(seq)) != len(seq):
            problems.append(f"{p.pid} delivered a message twice")
        if order == "causal":
            if set(seq) != set(first):
                problems.append(f"{p.pid} delivered other messages than {group.peers[0].pid}")
            overtook = causal_violation(recs)
            if overtook:
                problems.append(f"{p.pid}: {overtook}")
            continue
        if seq != first:
            i = next((i for i, (a, b) in enumerate(zip(first, seq)) if a != b), min(len(first), len(seq)))
            problems.append(f"{p.pid} differs from {group.peers[0].pid} at position {i}")
        if order == "sequencer":
            keys = [(r["view"], r.get("seq", -1)) for r in recs]
            what = "(view, seq)"
        else:
            keys = [(c, pid_key(q)) for c, q in seq]
            what = "(clock, pid)"
        if any(a >= b for a, b in zip(keys, keys[1:])):
            problems.append(f"{p.pid}: {what} not strictly increasing")
    texts = collections.Counter(r["text"] for r in per_peer[0])
    dups = [t for t, c in texts.items() if c > 1]
    if dups:
        problems.append(f"{len(dups)} texts delivered more than once, e.g. {dups[0]!r}")
    return (not problems), "; ".join(problems[:4]), per_peer


def causal_violation(recs: list[dict]) -> str | None:
    """The first message of one peer's records delivered before a message its ``vc`` says it follows:
    for every member q, at least ``vc[q]`` of q's messages of the view (``vc[q] - 1`` for its origin)
    must be delivered before it. None when there is none."""
    delivered: dict[tuple[int, str], int] = {}
    for r in recs:
        vc = r.get("vc")
        if not isinstance(vc, dict):
            return f"message ({r['clock']}, {r['pid']}) has no vector timestamp"
        for q, count in vc.items():
            need = count - 1 if q == r["pid"] else count
            if delivered.get((r["view"], q), 0) < need:
                return (f"message ({r['clock']}, {r['pid']}) delivered after {delivered.get((r['view'], q), 0)} "
                        f"messages of {q}, its vc says {need}")
        delivered[(r["view"], r["pid"])] = delivered.get((r["view"], r["pid"]), 0) + 1
    return None


def link_traffic(group: BenchGroup) -> tuple[int, int] | None:
    """Frames and bytes every peer of a stopped group wrote on its links (from its last log line);
    None if a peer did not say (it was killed)."""
    frames = size = 0
    for p in group.peers:
        found = TRAFFIC.findall(p.log.read_text(errors="replace"))
        if not found:
            return None
        frames += int(found[-1][0])
        size += int(found[-1][1])
    return frames, size


def traffic_figures(group: BenchGroup, multicasts: int) -> dict:
    traffic = link_traffic(group)
    if traffic is None:
        return {"frames_mc": None, "bytes_mc": None}
    return {"frames_mc": traffic[0] / multicasts, "bytes_mc": traffic[1] / multicasts}


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(round(q / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def latencies(per_peer: list[list[dict]], prefix: str) -> tuple[list[float], list[float]]:
    """Per delivery (every record at every peer) and per message (slowest peer), sorted, seconds."""
    every, worst = [], {}
    for recs in per_peer:
        for r in recs:
            if r["text"].startswith(prefix):
                lat = r["delivered_at"] - r["sent_at"]
                every.append(lat)
                key = (r["clock"], r["pid"])
                worst[key] = max(worst.get(key, lat), lat)
    return sorted(every), sorted(worst.values())


# -- profiling -------------------------------------------------------------------------------------


NATIVE = False  # --native: py-spy records C frames too


def start_profiler(pid: int, out: Path, rate: int) -> subprocess.Popen | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print("  (py-spy not found: pip install py-spy into the venv; no profile)")
        return None
    cmd = [spy, "record", "--pid", str(pid), "--format", "raw", "--output", str(out), "--rate", str(rate),
           "--native" if NATIVE else "--nonblocking", "--idle", "--threads"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(0.5)  # let it attach
    if proc.poll() is not None:
        print(f"  (py-spy failed: {proc.stderr.read().decode(errors='replace').strip()[:300]})")
        return None
    return proc


def stop_profiler(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


IDLE_FRAMES = ("epoll", "select (selectors.py", "get_events", "_read_chunk_from", "wait (threading.py",
               "_thread_fn", "worker_thread_fn", "read (<frozen", "_work (", "_handle_job")


def summarize_profile(raw: Path, top: int = 25) -> None:
    """Print self and inclusive shares of the main thread's busy samples from py-spy raw output."""
    if not raw.exists():
        print("  (no profile written)")
        return
    stacks: list[tuple[list[str], int]] = []
    for line in raw.read_text(errors="replace").splitlines():
        body, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = body.split(";")
        stacks.append((frames, int(count)))
    if not stacks:
        print("  (empty profile)")
        return
    # the main thread is the one whose stacks hold trio's run loop
    main_threads = {s[0] for s, _ in stacks if any("unrolled_run" in f for f in s)}
    main = [(f, c) for f, c in stacks if f[0] in main_threads]
    total_main = sum(c for _, c in main)
    idle = sum(c for f, c in main if "get_events" in f[-1] or "epoll" in f[-1] or "get_events" in ";".join(f[-3:]))
    busy = [(f, c) for f, c in main if not ("get_events" in ";".join(f[-3:]) or "epoll" in f[-1])]
    total_busy = sum(c for _, c in busy)
    others = sum(c for f, c in stacks if f[0] not in main_threads)
    print(f"  profile: {raw}")
    print(f"  main thread samples: {total_main} (waiting in epoll: {idle} = {100 * idle / max(1, total_main):.0f}%), "
          f"busy: {total_busy}; other threads' samples (incl. idle): {others}")

    def name(frame: str) -> str:
        # "func (path/to/file.py:123)" -> "func (file.py)"
        fn, _, loc = frame.partition(" (")
        loc = loc.rstrip(")")
        file = loc.rsplit("/", 1)[-1].split(":")[0]
        return f"{fn} ({file})"

    self_c: collections.Counter[str] = collections.Counter()
    incl_c: collections.Counter[str] = collections.Counter()
    for frames, c in busy:
        names = [name(f) for f in frames[1:]]  # frames[0] is the thread
        if names:
            self_c[names[-1]] += c
        for n in set(names):
            incl_c[n] += c
    print(f"  {'self %':>7} {'incl %':>7}  function (of busy main-thread samples)")
    shown = set()
    for n, c in self_c.most_common(top):
        shown.add(n)
        print(f"  {100 * c / total_busy:7.1f} {100 * incl_c[n] / total_busy:7.1f}  {n}")
    print("  -- top inclusive --")
    for n, c in incl_c.most_common(top + 15):
        if 100 * c / total_busy >= 2.0:
            print(f"  {100 * self_c[n] / total_busy:7.1f} {100 * c / total_busy:7.1f}  {n}")


# -- scenarios -------------------------------------------------------------------------------------


def watch_frames(group: BenchGroup, stop: threading.Event, deadline: float) -> list[threading.Thread]:
    """What an open dashboard costs: one reader of ``/api/events?frames=1`` per peer (every MESSAGE and
    ACK, every delivery), each in a thread that drops what it reads, until ``stop``."""
    import httpx

    def read(url: str) -> None:
        try:
            with httpx.stream("GET", url + "api/events?frames=1", timeout=10) as r:
                for _ in r.iter_raw():
                    if stop.is_set():
                        return
        except httpx.HTTPError:
            pass  # the peer stopped

    threads = []
    for p in group.peers:
        url = None
        while url is None and time.monotonic() < deadline:
            m = re.search(r"Dashboard and API on (http://\S+)", p.log.read_text(errors="replace"))
            url = m.group(1) if m else time.sleep(0.05)
        if url is None:
            raise BenchError(f"peer {p.pid} never said where it serves --http")
        threads.append(threading.Thread(target=read, args=(url,), daemon=True))
        threads[-1].start()
    return threads


def throughput(n: int, per_peer: int, window: int, workdir: Path, deadline_s: float,
               profile: Path | None, rate: int, src: Path | None = None, secure: bool = False,
               http: bool = False, watch: bool = False, order: str = "lamport", ring: int | None = None,
               frame_trace: bool = False, fsync: str | None = None) -> dict:
    deadline = time.monotonic() + deadline_s
    with BenchGroup(n, workdir, src=src, secure=secure, http=http or watch, order=order, ring=ring,
                    frame_trace=frame_trace, fsync=fsync) as group:
        group.warm_up(deadline)
        watching = threading.Event()
        watchers = watch_frames(group, watching, deadline) if watch else []
        base = n  # warm-up deliveries
        total = n * per_peer
        blobs = [("".join(f"t{i}.{k}\n" for k in range(per_peer))).encode() for i in range(n)]
        spy = start_profiler(group.peers[0].proc.pid, profile, rate) if profile else None
        progress = {"min": base}
        stop = threading.Event()
        errors: list[str] = []

        def feed(peer: Peer, blob: bytes) -> None:
            try:
                if window <= 0:
                    peer.proc.write(blob)
                    return
                lines = blob.splitlines(keepends=True)
                chunk = max(1, min(256, window // 2 or 1))
                sent = 0
                while sent < len(lines) and not stop.is_set():
                    # group-wide: messages sent minus messages delivered at the slowest peer
                    in_flight = (sent * n) - (progress["min"] - base)
                    if in_flight + chunk * n > window * n:
                        time.sleep(0.0005)
                        continue
                    peer.proc.write(b"".join(lines[sent:sent + chunk]))
                    sent += chunk
            except BrokenPipeError:  # reported by the main thread
                errors.append(peer.exited(wait=5.0))
            except BaseException as e:
                errors.append(repr(e))

        cpu0 = [p.cpu_seconds() for p in group.peers]
        t0 = time.monotonic()
        threads = [threading.Thread(target=feed, args=(p, b), daemon=True) for p, b in zip(group.peers, blobs)]
        try:
            for t in threads:
                t.start()
            polls = 0
            while True:
                counts = group.counts()
                progress["min"] = min(counts)
                if progress["min"] >= base + total:
                    break
                if errors:
                    raise BenchError(f"feeding stdin failed: {errors[0]}")
                if time.monotonic() > deadline:
                    raise BenchError(f"throughput: timed out; deliveries per peer {[c - base for c in counts]} "
                                     f"of {total}")
                polls += 1
                if polls % 20 == 0:
                    group.check_alive()
                time.sleep(0.005)
            wall = time.monotonic() - t0
            cpu1 = [p.cpu_seconds() for p in group.peers]
        finally:
            stop.set()
            watching.set()
            stop_profiler(spy)
        for t in threads + watchers:
            t.join(timeout=1.0)
        ok, why, recs = verify(group, n + total, order)
    traffic = traffic_figures(group, n + total)  # the peers have stopped: their last lines are written
    disk = disk_figures(group, n + total) if fsync else {}
    sent_at = [r["sent_at"] for r in recs[0] if r["text"].startswith("t")]
    last = max(r["delivered_at"] for peer in recs for r in peer if r["text"].startswith("t"))
    elapsed = last - min(sent_at)
    every, _ = latencies(recs, "t")
    return {
        "ok": ok, "why": why, "total": total, "elapsed": elapsed, "rate": total / elapsed,
        "p50": percentile(every, 50), "p99": percentile(every, 99), "max": every[-1],
        "cpu": [(b - a) / wall for a, b in zip(cpu0, cpu1)],
        "cpu_us": 1e6 * sum(b - a for a, b in zip(cpu0, cpu1)) / total / n, **traffic, **disk,
    }


DATA_LOGS = ("history.log", "accepted.log")
"""The logs of a durable peer's data folder that grow with the messages (`tom.peer.durable`)."""


def disk_figures(group: Group, delivered: int) -> dict:
    """Bytes on disk per message of a stopped durable group: each peer's ``history.log`` and
    ``accepted.log`` over the messages it delivered (``delivered``), averaged over the peers; and the
    two logs' shares. Missing logs count 0 (a peer that wrote nothing)."""
    sizes = []
    for p in group.peers:
        folder = group.data_dir(p.port)
        sizes.append([(folder / name).stat().st_size if (folder / name).exists() else 0 for name in DATA_LOGS])
    history = statistics.mean(s[0] for s in sizes) / delivered
    accepted = statistics.mean(s[1] for s in sizes) / delivered
    return {"disk_mc": history + accepted, "disk_history_mc": history, "disk_accepted_mc": accepted}


def light(n: int, count: int, workdir: Path, deadline_s: float, src: Path | None = None,
          profile: Path | None = None, rate: int = 250, secure: bool = False, http: bool = False,
          order: str = "lamport", path: bool = False, fsync: str | None = None) -> dict:
    deadline = time.monotonic() + deadline_s
    with BenchGroup(n, workdir, src=src, secure=secure, http=http, order=order, path_trace=path,
                    fsync=fsync) as group:
        group.warm_up(deadline)
        spy = start_profiler(group.peers[0].proc.pid, profile, rate) if profile else None
        expected = n
        try:
            for k in range(count):
                group.peers[k % n].send([f"l{k}"])
                expected += 1
                group.wait_delivered(expected, deadline)
        finally:
            stop_profiler(spy)
        ok, why, recs = verify(group, expected, order)
    figures = {**light_figures(ok, why, recs, count), **traffic_figures(group, expected)}
    if path:
        figures["path"] = path_lines(group, count)
    return figures


def path_lines(group: BenchGroup, count: int) -> list[str]:
    """`benchmarks.path_breakdown` of the group's step notes (the peers have stopped: written)."""
    from benchmarks.path_breakdown import breakdown, read_notes, show

    files = [group.workdir / f"path-{p.port}.txt" for p in group.peers]
    missing = [f.name for f in files if not f.exists()]
    if missing:
        return [f"  no step notes from {', '.join(missing)} (a build without tom.peer.pathtrace?)"]
    return show(breakdown([read_notes(f) for f in files], count), count)


def light_together(n: int, count: int, workdir: Path, deadline_s: float,
                   kinds: list[tuple[str, bool, str, Path | None, str | None]]) -> list[dict]:
    """Light load on one group per ``(name, secure, order, src, fsync)`` of ``kinds`` at once, one message to
    each in turn (who goes first rotates): all see the same machine (other processes' load drifts by the
    second on a shared host), so the differences of their latencies are theirs, not the moment's."""
    deadline = time.monotonic() + deadline_s
    with contextlib.ExitStack() as stack:
        groups = [stack.enter_context(light_group(n, workdir / name, secure, order, src, fsync))
                  for name, secure, order, src, fsync in kinds]
        for group in groups:
            group.warm_up(deadline)
        expected = n
        for k in range(count):
            expected += 1
            turn = k % len(groups)
            for group in groups[turn:] + groups[:turn]:
                group.peers[k % n].send([f"l{k}"])
                group.wait_delivered(expected, deadline)
        results = [verify(group, expected, "lamport" if order == FLOOR else order)
                   for group, (_, _, order, _, _) in zip(groups, kinds)]
    return [{**light_figures(*r, count), **traffic_figures(g, expected)} for r, g in zip(results, groups)]


def light_figures(ok: bool, why: str, recs: list[list[dict]], count: int) -> dict:
    every, worst = latencies(recs, "l")
    at_origin = sorted(r["delivered_at"] - r["sent_at"] for peer in recs for r in peer
                       if r["text"].startswith("l") and r["pid"] == r["peer"])
    elsewhere = sorted(r["delivered_at"] - r["sent_at"] for peer in recs for r in peer
                       if r["text"].startswith("l") and r["pid"] != r["peer"])
    return {
        "origin_p50": percentile(at_origin, 50), "others_p50": percentile(elsewhere, 50),
        "ok": ok, "why": why, "count": count,
        "p50": percentile(every, 50), "p99": percentile(every, 99),
        "all_p50": percentile(worst, 50), "all_p99": percentile(worst, 99),
    }


# -- main ------------------------------------------------------------------------------------------


def ms(x: float) -> str:
    return f"{1000 * x:8.3f}"


def scenario(run: Callable[[], dict], show: Callable[[dict], None], prof: Path | None, top: int) -> dict | None:
    """Run one scenario, print its figures and, with ``prof``, its profile; a BenchError is printed
    as FAILED and gives None."""
    try:
        result = run()
    except BenchError as e:
        print(f"  FAILED: {e}")
        return None
    show(result)
    if prof:
        summarize_profile(prof, top=top)
    return result


def print_throughput(t: dict, n: int) -> None:
    print(f"  {t['total']} multicasts in {t['elapsed']:.3f} s -> {t['rate']:,.0f}/s delivered at "
          f"every peer; latency p50 {ms(t['p50']).strip()} ms, p99 {ms(t['p99']).strip()} ms, "
          f"max {ms(t['max']).strip()} ms; order {'OK' if t['ok'] else 'MISMATCH: ' + t['why']}")
    print("  peer CPU: " + ", ".join(f"{100 * c:.0f}%" for c in t["cpu"])
          + f" of one core each; {t['cpu_us']:.1f} CPU-us per multicast per peer" + traffic_text(t))
    if t.get("disk_mc") is not None:
        print(f"  on the disk: {t['disk_mc']:,.0f} bytes per message delivered at each peer (history.log "
              f"{t['disk_history_mc']:,.0f}, accepted.log {t['disk_accepted_mc']:,.0f})")
    cores = os.cpu_count() or 1
    print(f"  CPU-bound ceiling: {1e6 / t['cpu_us']:,.0f}/s with a core per peer, "
          f"{1e6 * min(cores, n) / n / t['cpu_us']:,.0f}/s on this machine's {cores} CPUs")


def traffic_text(r: dict) -> str:
    if r.get("frames_mc") is None:
        return ""
    return f"; on the links {r['frames_mc']:.2f} frames, {r['bytes_mc']:,.0f} bytes per multicast"


def print_light(lt: dict) -> None:
    print(f"  latency p50 {ms(lt['p50']).strip()} ms, p99 {ms(lt['p99']).strip()} ms "
          f"(last peer: p50 {ms(lt['all_p50']).strip()}, p99 {ms(lt['all_p99']).strip()}; "
          f"p50 at origin {ms(lt['origin_p50']).strip()}, at others {ms(lt['others_p50']).strip()}); "
          f"order {'OK' if lt['ok'] else 'MISMATCH: ' + lt['why']}")
    if lt.get("path"):
        print("  one message's path, median time of each step after its stdin read at the origin O "
              "(B, C, ...: the others, in the order they read it; step#n: its n-th time in the window):")
        print("\n".join(lt["path"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", default="3,5", help="group sizes, comma-separated (default 3,5)")
    ap.add_argument("--order", choices=[*ORDERS, "all"], default="lamport",
                    help="the peers' order (tom peer --order), or all: the three on the same group sizes, side "
                         "by side (default lamport)")
    ap.add_argument("--messages", type=int, default=None,
                    help="throughput: messages per peer (default 20000 for 3 peers, 10000 otherwise)")
    ap.add_argument("--window", type=int, default=0,
                    help="throughput: at most W messages per peer in flight in the group (0: as fast as "
                         "the pipe takes them, the default)")
    ap.add_argument("--light", type=int, default=300, help="light load: number of messages (default 300)")
    ap.add_argument("--deadline", type=float, default=120.0, help="seconds allowed per scenario (default 120)")
    ap.add_argument("--only", choices=["throughput", "light"], help="run one scenario only")
    ap.add_argument("--path", action="store_true",
                    help="light load only, every peer noting its tasks' steps (TOM_PATH_TRACE, "
                         "tom/peer/pathtrace.py): where one message's time goes, step by step")
    ap.add_argument("--profile", action="store_true",
                    help="record a py-spy profile of one peer during each run and summarize it (perturbs the "
                         "figures: profile and measure in separate runs)")
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second (default 250)")
    ap.add_argument("--native", action="store_true",
                    help="with --profile: C frames too (the compiled build's functions, by their C names); "
                         "py-spy then pauses the peer at each sample")
    ap.add_argument("--src", type=Path, action="append",
                    help="run the peers' tom package from this source tree (e.g. a git worktree of another commit) "
                         "instead of the installed one; more than once: every scenario once per tree, side by side")
    ap.add_argument("--security", choices=["both", "plain", "secured"], default=None,
                    help="run plain groups, secured ones (--keys, mutual TLS), or both for comparison (default: "
                         "both for one order, plain with --order all)")
    ap.add_argument("--http", action="store_true",
                    help="start every peer with --http (API, metrics and dashboard served; nobody watching), to "
                         "compare with a run without it")
    ap.add_argument("--watch", action="store_true",
                    help="throughput with --http and an open dashboard: every peer's /api/events?frames=1 read "
                         "(and dropped) during the run")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (outputs, logs, profiles)")
    ap.add_argument("--peers-compare", action="store_true",
                    help="add two reference rows: PySyncObj (a Python Raft library, installed into .venv-pysyncobj by "
                         "this option, never a TOM dependency), 3 nodes, the highest request rate of which >= 90%% "
                         "commit (its own benchmark's method; benchmarks/raft_compare.py); and one Redis Stream as "
                         "the total order (redis-server, installed with apt-get when missing and run as root, the "
                         "redis client in .venv-redis), 3 members appending --messages entries each, pipelined 100 "
                         "at a time, and reading the whole stream: entries/s read at every member, and the "
                         "light-load XADD->XREAD round trip (benchmarks/redis_compare.py)")
    ap.add_argument("--durable", action="store_true",
                    help="durable peers beside in-memory ones, in one run: every scenario for peers without --data "
                         "and for peers with --data and each --fsync policy (always, batch, never), the data "
                         "folders on a real disk (--data-root); a table of each policy against in memory, and "
                         "bytes on disk per message. With --peers-compare the references get durable variants: "
                         "Redis with an append-only file (appendfsync always, everysec) and PySyncObj with a "
                         "journal (journalFile, fullDumpFile) per node")
    ap.add_argument("--data-root", type=Path, default=Path("/var/tmp"),
                    help="--durable: where the run's temporary folder goes (outputs, data folders, the references' "
                         "files); refused if it is in memory (tmpfs, ramfs) (default /var/tmp)")
    ap.add_argument("--floor", action="store_true",
                    help="light load: add a group of bare trio peers that make the same two hops of a message "
                         "(message, then every member's ACK) and nothing else, taking turns with TOM's groups: "
                         "the floor of the light-load latency on this machine (benchmarks/floor_mesh.py)")
    ap.add_argument("--library", choices=["all", "counter", "state"], nargs="?", const="all",
                    help="instead of the peers: TOM as a library (benchmarks/library.py): a replicated counter "
                         "against PySyncObj's (3 members, --inflight calls in flight each, 20 s), and a state "
                         "transfer of --entries entries of 1 KB to a joining member")
    ap.add_argument("--inflight", type=int, default=16, help="--library: calls in flight per member (default 16)")
    ap.add_argument("--entries", type=int, default=100_000,
                    help="--library: entries of 1 KB in the transferred state (default 100000: 100 MB)")
    ap.add_argument("--trace", action="store_true",
                    help="the cost of the lab bench's recording: throughput with --http and the ring off, the ring "
                         "on (--ring 4000), the ring and --trace on; alternating, --runs each, medians")
    ap.add_argument("--runs", type=int, default=None,
                    help="throughput: every scenario this many times, in turns (each build and policy, then the "
                         "Redis references, once per turn), and each row's run of median rate kept, the others' "
                         "rates printed beside it (default 1); --trace: runs of each configuration (default 3)")
    args = ap.parse_args(argv)
    if args.runs is not None and not 1 <= args.runs <= 50:
        ap.error("--runs must be 1..50")
    if args.trace:
        stop_on_sigterm()
        return trace_cost([int(x) for x in args.peers.split(",") if x.strip()], args.messages, args.runs or 3,
                          args.deadline)
    if args.library:
        from benchmarks import library

        stop_on_sigterm()
        return library.main(inflight=args.inflight, entries=args.entries,
                            only=None if args.library == "all" else args.library, durable=args.durable)
    try:
        sizes = [int(x) for x in args.peers.split(",") if x.strip()]
    except ValueError:
        ap.error("--peers takes comma-separated integers, e.g. 3,5")
    if not sizes or any(not 2 <= s <= 32 for s in sizes):
        ap.error("group sizes must be 2..32")
    if args.messages is not None and not 1 <= args.messages <= 10_000_000:
        ap.error("--messages must be 1..10000000")
    if not 1 <= args.light <= 100_000:
        ap.error("--light must be 1..100000")

    builds = [source_tree(ap, src) for src in args.src] if args.src else [None]
    global NATIVE
    NATIVE = args.native
    orders = list(ORDERS) if args.order == "all" else [args.order]
    security = args.security or ("plain" if args.order == "all" or args.durable else "both")
    policies: list[str | None] = [None, *FSYNC] if args.durable else [None]  # None: in memory
    disk = None
    if args.durable:
        try:
            disk = real_disk(args.data_root)
        except (NotADisk, OSError) as e:
            print(f"scripts/bench --durable: {e}", file=sys.stderr)
            return 2
    stop_on_sigterm()
    tmp = Path(tempfile.mkdtemp(prefix="tom-bench-", dir=args.data_root if args.durable else None))
    print(f"TOM benchmark: {os.cpu_count()} CPUs, load average {loadavg()}, Python {sys.version.split()[0]}, "
          f"loopback {HOST}, orders {', '.join(orders)}, workdir {tmp}"
          + (f" ({disk}: outputs and data folders)" if disk else "")
          + "".join(f", peers from {b} ({build_label(b)})" for b in builds if b is not None)
          + (", peers with --http" if args.http else "")
          + (", every frame watched over /api/events" if args.watch else ""))
    for b in builds:
        print(f"peers of {build_label(b)}: {peer_build(b)}")
    if args.durable:
        took = fsync_seconds(tmp)
        print(f"an fsync of 4 KiB appended in {tmp}: p50 {ms(percentile(took, 50)).strip()} ms, p99 "
              f"{ms(percentile(took, 99)).strip()} ms ({len(took)} tries; the disk's price for every durable write)")
    busy = busy_cpus()
    if busy > 0.3:
        print(f"WARNING: other processes use about {busy:.1f} CPUs right now: figures will be low and noisy")
    rows: list[dict] = []
    status = 0
    modes = {"both": ["plain", "secured"], "plain": ["plain"], "secured": ["secured"]}[security]
    if args.path:
        args.only = "light"
    # light load: groups take turns (but one at a time with a profile or step notes)
    together = ((len(modes) * len(orders) * len(builds) * len(policies) > 1 or args.floor)
                and not args.profile and not args.path)
    runs = args.runs or 1

    def label_of(n: int, mode: str, order: str, src: Path | None, fsync: str | None) -> str:
        """A scenario's name in the progress lines."""
        return (f"{n} peers, {mode}, {order}" + (f", {build_label(src)}" if len(builds) > 1 else "")
                + (f", {data_label(fsync)}" if args.durable else ""))

    turns: dict[tuple, list[dict | None]] = {}  # --runs: each throughput scenario's runs
    redis_turns: dict[str | None, list[dict]] = {}  # and the Redis references' (all but the last: `redis_reference`)
    try:
        if runs > 1 and args.only in (None, "throughput"):
            for k in range(runs):
                for n in sizes:
                    per_peer = args.messages or DEFAULT_MESSAGES.get(n, DEFAULT_OTHER)
                    for mode in modes:
                        for order, (b, src), fsync in ((o, bs, f) for o in orders for bs in enumerate(builds)
                                                       for f in policies):
                            tag = f"{n}{mode[0]}{order[0]}{b}{fsync or 'memory'}-{k}"
                            print(f"\n[{label_of(n, mode, order, src, fsync)}] throughput, turn {k + 1} of {runs}: "
                                  f"{per_peer} messages per peer ...", flush=True)
                            turns.setdefault((n, mode, order, b, fsync), []).append(scenario(
                                lambda: throughput(n, per_peer, args.window, tmp / f"tp{tag}", args.deadline, None,
                                                   args.rate, src, mode == "secured", args.http, args.watch, order,
                                                   fsync=fsync),
                                lambda t: print_throughput(t, n), None, top=0))
                if args.peers_compare and k < runs - 1:
                    for appendfsync in REDIS_AGAINST if args.durable else (None,):
                        got = redis_reference([], args.messages or DEFAULT_MESSAGES[3], 0, args.deadline, appendfsync,
                                              args.data_root if args.durable else None)
                        if got is not None:
                            redis_turns.setdefault(appendfsync, []).append(got)
        for n in sizes:
            per_peer = args.messages or DEFAULT_MESSAGES.get(n, DEFAULT_OTHER)
            first = len(rows)
            for mode in modes:
                secure = mode == "secured"
                for order, (b, src), fsync in ((o, bs, f) for o in orders for bs in enumerate(builds)
                                               for f in policies):
                    row = {"n": n, "mode": mode, "order": order, "build": build_label(src), "src": src,
                           "fsync": fsync}
                    tag = f"{n}{mode[0]}{order[0]}{b}{fsync or 'memory'}"
                    label = label_of(n, mode, order, src, fsync)
                    if args.only in (None, "throughput") and runs > 1:
                        row["tp"] = median_run(turns[(n, mode, order, b, fsync)])
                    elif args.only in (None, "throughput"):
                        what = f"window {args.window}/peer" if args.window else "unbounded"
                        print(f"\n[{label}] throughput: {per_peer} messages per peer ({what}) ...", flush=True)
                        prof = tmp / f"profile-{tag}.txt" if args.profile else None
                        row["tp"] = scenario(lambda: throughput(n, per_peer, args.window, tmp / f"tp{tag}",
                                                                args.deadline, prof, args.rate, src, secure,
                                                                args.http, args.watch, order, fsync=fsync),
                                             lambda t: print_throughput(t, n), prof, top=25)
                    if args.only in (None, "light") and not together:
                        print(f"[{label}] light load: {args.light} messages, one at a time ...", flush=True)
                        lprof = tmp / f"profile-light-{tag}.txt" if args.profile else None
                        row["lt"] = scenario(lambda: light(n, args.light, tmp / f"light{tag}", args.deadline,
                                                           src, lprof, args.rate, secure, args.http, order,
                                                           args.path, fsync),
                                             print_light, lprof, top=15)
                    rows.append(row)
            if args.only in (None, "light") and together:
                if args.floor:
                    rows.append({"n": n, "mode": "plain", "order": FLOOR, "build": FLOOR, "src": FLOOR,
                                 "fsync": None})
                mine = rows[first:]
                kinds = [(f"{r['mode']}-{r['order']}" + (f"-{r['build']}" if len(builds) > 1 else "")
                          + (f"-{data_label(r['fsync'])}" if args.durable and r["order"] != FLOOR else ""),
                          r["mode"] == "secured", r["order"], r["src"], r["fsync"]) for r in mine]
                print(f"[{n} peers, {' and '.join(k[0] for k in kinds)} side by side] light load: {args.light} "
                      f"messages to each, one at a time, taking turns ...", flush=True)
                lts = scenario(lambda: light_together(n, args.light, tmp / f"light{n}", args.deadline, kinds),
                               lambda lts: [print(f"  {k[0]}:", end="") or print_light(lt)
                                            for k, lt in zip(kinds, lts)], None, top=0)
                for row, lt in zip(mine, lts or [None] * len(mine)):
                    row["lt"] = lt
            for row in rows[first:]:
                status |= 0 if all(r and r["ok"] for k, r in row.items() if k in ("tp", "lt")) else 1
    except KeyboardInterrupt:
        print("\ninterrupted: peers stopped")
        return 130
    finally:
        if args.keep or args.profile:
            print(f"\nkept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    references: list[dict | None] = []
    if args.peers_compare:
        # the short ones first, nearest TOM's run (PySyncObj's search takes a minute or two); --durable: the
        # references' files on the same disk as the peers' data folders
        where = args.data_root if args.durable else None
        for appendfsync in REDIS_AGAINST if args.durable else (None,):
            references.append(redis_reference(rows, args.messages or DEFAULT_MESSAGES[3], args.light, args.deadline,
                                              appendfsync, where, redis_turns.get(appendfsync, [])))
        for journal in (False, True) if args.durable else (False,):
            references.append(raft_reference(rows, journal, where))
    print_table(rows, args.messages, len(builds) > 1)
    for src in builds:  # each build's own rows: its secured against its plain, its orders against lamport
        for fsync in policies:
            names = ([build_label(src)] if len(builds) > 1 else []) + ([data_label(fsync)] if args.durable else [])
            print_comparisons([r for r in rows if r["src"] == src and r.get("fsync") == fsync], sizes,
                              f" ({', '.join(names)})" if names else "")
    if len(builds) > 1:
        print_builds(rows, sizes, builds)
    print_floor(rows)
    if args.durable:
        print_durable(rows, [r for r in references if r], disk)
    print(f"load average after the run: {loadavg()}")
    print("targets: >= 50,000 multicasts/s with 3 peers; light-load p50 <= 1 ms")
    return status


TRACE_CONFIGS = (("off", 0, False), ("ring", 4000, False), ("ring+trace", 4000, True))


def trace_cost(sizes: list[int], messages: int | None, runs: int, deadline: float) -> int:
    """``--trace``: throughput of peers with --http and the ring off, the ring on, the ring and the frame
    trace on; the three take turns, ``runs`` times (the first of each turn changing), medians compared."""
    tmp = Path(tempfile.mkdtemp(prefix="tom-bench-trace-"))
    print(f"TOM benchmark --trace: {os.cpu_count()} CPUs, load average {loadavg()}, workdir {tmp}")
    busy = busy_cpus()
    if busy > 0.3:
        print(f"WARNING: other processes use about {busy:.1f} CPUs right now: figures will be low and noisy")
    status = 0
    try:
        for n in sizes:
            per_peer = messages or DEFAULT_MESSAGES.get(n, DEFAULT_OTHER)
            got: dict[str, list[dict]] = {name: [] for name, _, _ in TRACE_CONFIGS}
            for k in range(runs):
                turn = TRACE_CONFIGS[k % 3:] + TRACE_CONFIGS[:k % 3]
                for name, ring, traced in turn:
                    print(f"[{n} peers, run {k + 1}, {name}] throughput: {per_peer} messages per peer ...", flush=True)
                    t = scenario(lambda: throughput(n, per_peer, 0, tmp / f"t{n}-{k}-{name}", deadline, None, 250,
                                                    http=True, ring=ring, frame_trace=traced),
                                 lambda t: print_throughput(t, n), None, top=0)
                    if t is None or not t["ok"]:
                        status = 1
                    else:
                        if traced:
                            t["trace_mb"] = sum(f.stat().st_size for f in (tmp / f"t{n}-{k}-{name}").glob(
                                "*.trace")) / 2 ** 20
                        got[name].append(t)
                    shutil.rmtree(tmp / f"t{n}-{k}-{name}", ignore_errors=True)
            base = statistics.median(t["rate"] for t in got["off"]) if got["off"] else None
            print(f"\n{n} peers, {per_peer} messages per peer, medians of {runs}:")
            for name, _, _ in TRACE_CONFIGS:
                if not got[name]:
                    print(f"  {name:<11} no successful run")
                    continue
                rate = statistics.median(t["rate"] for t in got[name])
                cpu = statistics.median(t["cpu_us"] for t in got[name])
                extra = f", traces {statistics.median(t['trace_mb'] for t in got[name]):.0f} MiB" \
                    if name == "ring+trace" else ""
                print(f"  {name:<11} {rate:>10,.0f} multicasts/s  {cpu:5.1f} CPU-us/mc/peer"
                      + (f"  {rate / base:.2f}x of off" if base else "") + extra
                      + "  (runs: " + ", ".join(f"{t['rate']:,.0f}" for t in got[name]) + ")")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average after the run: {loadavg()}")
    print("targets: the ring on >= 0.95x of off; the ring and --trace on >= 0.90x")
    return status


def print_floor(rows: list[dict]) -> None:
    """Each light-load row against the floor of its group size (--floor): what TOM's own work adds."""
    for floor in (r for r in rows if r["order"] == FLOOR and r.get("lt")):
        for r in rows:
            if r["n"] == floor["n"] and r["order"] != FLOOR and r.get("lt"):
                print(f"{r['order']} ({r['build']}{durable_tag(r)}), {r['n']} peers, {r['mode']}: light-load p50 "
                      f"{ms(r['lt']['p50']).strip()} ms, the floor's {ms(floor['lt']['p50']).strip()} ms: TOM adds "
                      f"{1000 * (r['lt']['p50'] - floor['lt']['p50']):+.3f} ms "
                      f"({r['lt']['p50'] / floor['lt']['p50']:.2f}x)")


def raft_reference(rows: list[dict], journal: bool = False, where: Path | None = None) -> dict | None:
    """The PySyncObj row (`benchmarks.raft_compare`; with ``journal``, every node keeps its log in a
    temporary folder in ``where``), and each 3-peer plain TOM row's throughput against it (in memory:
    the in-memory rows; with the journal: the durable ones); one line instead, and None, when it cannot
    run. The row's figures for the durable table."""
    from benchmarks.raft_compare import PACKAGE, Unavailable, highest_rate

    kept = "journalFile and fullDumpFile per node" if journal else "in memory"
    print(f"\n[reference] {PACKAGE}, 3 nodes, {kept}: highest request rate with >= 90% committed ...", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="tom-raft-journal-", dir=where) as tmp:
            raft = highest_rate(Path(__file__).resolve().parent.parent, journal=Path(tmp) / "journal" if journal
                                else None)
    except Unavailable as e:
        print(f"  not run: {e}")  # the rows measured so far are still printed
        return None
    print(f"  PySyncObj (Raft), 3 nodes on loopback, {kept}: {raft:,} requests/s committed; load average {loadavg()}")
    for r in rows:
        if r["n"] == 3 and r["mode"] == "plain" and r.get("tp") and raft and (r.get("fsync") is not None) == journal:
            print(f"  TOM {r['order']} ({r['build']}{durable_tag(r)}), 3 peers: {r['tp']['rate'] / raft:.2f}x "
                  f"PySyncObj's rate")
    return {"name": f"PySyncObj, {'journal (mmap, no fsync)' if journal else 'in memory'}",
            "rate": raft or None, "unit": "requests/s", "against": ("never" if journal else None)}


REDIS_AGAINST = {None: None, "always": "always", "everysec": "batch"}
"""Each Redis Stream variant (its ``appendfsync``; None: persistence off) and TOM's policy it stands beside."""


def redis_reference(rows: list[dict], messages: int, light_count: int, deadline: float,
                    appendfsync: str | None = None, where: Path | None = None,
                    earlier: Sequence[dict] = ()) -> dict | None:
    """The Redis Stream row (`benchmarks.redis_compare`: 3 members, ``messages`` entries each, and
    ``light_count`` one at a time; with ``appendfsync``, an append-only file in ``where``), and each
    3-peer plain TOM row of the policy it stands beside (`REDIS_AGAINST`) against it; one line instead,
    and None, when it cannot run or its run fails. The row's figures for the durable table; its rate
    the median of this run's and those of ``earlier`` runs (`--runs`: rows of this function)."""
    from benchmarks.raft_compare import Unavailable
    from benchmarks.redis_compare import RunFailed, describe, measure

    kept = f", AOF appendfsync {appendfsync}" if appendfsync else ""
    print(f"\n[reference] one Redis Stream as the total order{kept}, 3 members: {messages} entries each (XADD "
          f"pipelined 100, XREAD all), then {light_count} one at a time ...", flush=True)
    try:
        redis = measure(Path(__file__).resolve().parent.parent, 3, messages, 100, light_count, deadline,
                        appendfsync, where)
    except Unavailable as e:
        print(f"  not run: {e}")  # the rows measured so far are still printed
        return None
    except RunFailed as e:
        print(f"  Redis Stream FAILED: {e}")
        return None
    if earlier:
        rates = [r["rate"] for r in earlier] + [redis["rate"]]
        redis["rate"] = sorted(rates)[(len(rates) - 1) // 2]
        print(f"  entries/s read at every member, run by run: {', '.join(f'{r:,.0f}' for r in rates)}: the median")
    print(f"  {describe(redis)}: {redis['rate']:,.0f} entries/s read at every member"
          + (f", {redis['aof_bytes']:.0f} bytes on disk per entry" if "aof_bytes" in redis else "")
          + f"; load average {loadavg()}")
    if light_count:
        print(f"  Redis Stream light load, XADD then XREAD at another member, {light_count} one at a time: "
              f"p50 {ms(redis['p50']).strip()} ms, p99 {ms(redis['p99']).strip()} ms")
    against = REDIS_AGAINST[appendfsync]
    for r in rows:
        if r["n"] == 3 and r["mode"] == "plain" and r.get("tp") and r.get("fsync") == against:
            light = (f"; light-load p50 {ms(r['lt']['p50']).strip()} ms, the stream's {ms(redis['p50']).strip()} ms"
                     if r.get("lt") and light_count else "")
            print(f"  TOM {r['order']} ({r['build']}{durable_tag(r)}), 3 peers: {r['tp']['rate'] / redis['rate']:.2f}x "
                  f"the Redis Stream's rate" + light + runs_text(r["tp"]))
    return {"name": "Redis Stream, " + (f"AOF appendfsync {appendfsync}" if appendfsync else "persistence off"),
            "rate": redis["rate"], "unit": "entries/s", "p50": redis.get("p50"), "p99": redis.get("p99"),
            "disk": redis.get("aof_bytes"), "against": against}


def median_run(got: list[dict | None]) -> dict | None:
    """Of a scenario's runs (`--runs`), the one of median rate (the lower of the two middle ones), with
    every run's rate as ``runs``; None if a run failed."""
    if any(t is None for t in got):
        return None
    done = sorted([t for t in got if t is not None], key=lambda t: t["rate"])
    return {**done[(len(done) - 1) // 2], "runs": [t["rate"] for t in got]}


def runs_text(t: dict) -> str:
    """`` (runs: a, b, c)`` for a row measured more than once (`median_run`), else empty."""
    return f" (runs: {', '.join(f'{r:,.0f}' for r in t['runs'])})" if len(t.get("runs", ())) > 1 else ""


def data_label(fsync: str | None) -> str:
    """A row's data: ``in memory``, or its --fsync policy."""
    return "in memory" if fsync is None else f"fsync {fsync}"


def durable_tag(row: dict) -> str:
    """``, fsync always`` for a durable row; empty for one in memory."""
    return f", {data_label(row['fsync'])}" if row.get("fsync") else ""


def in_memory_twin(rows: list[dict], row: dict) -> dict | None:
    """The in-memory row of the same group size, mode, order and build as ``row``."""
    return next((r for r in rows if r.get("fsync") is None and all(r[k] == row[k] for k in ("n", "mode", "order",
                                                                                           "src"))), None)


DURABLE_GOALS = {"batch": (0.6, 0.0003)}
"""The issue's goals for a policy: at least this share of the in-memory rate, at most this many seconds
more light-load p50."""


def print_durable(rows: list[dict], references: list[dict], disk: Mount | None) -> None:
    """--durable: each policy against in memory, per group size (and mode, order, build); the goals of
    `DURABLE_GOALS`; then the references with what they stand beside."""
    durable = [r for r in rows if r["order"] != FLOOR]
    if not any(r.get("fsync") for r in durable):
        return
    print(f"\ndurable peers: data folders on {disk}" if disk else "\ndurable peers")
    head = (f"{'peers':>5} | {'mode':>7} | {'order':>9} | {'data':>12} | {'multicasts/s':>12} | {'x memory':>8} | "
            f"{'light p50 ms':>12} | {'light p99 ms':>12} | {'p50 - memory ms':>15} | {'disk B/msg':>10} | check")
    print(head)
    print("-" * len(head))
    for r in durable:
        base = in_memory_twin(rows, r)
        t, lt = r.get("tp"), r.get("lt")
        durable_row = r.get("fsync") is not None
        ratio = (f"{t['rate'] / base['tp']['rate']:.2f}" if durable_row and t and base and base.get("tp") else "-")
        diff = (f"{1000 * (lt['p50'] - base['lt']['p50']):+.3f}" if durable_row and lt and base and base.get("lt")
                else "-")
        on_disk = f"{t['disk_mc']:,.0f}" if t and t.get("disk_mc") is not None else "-"
        oks = [x["ok"] for x in (t, lt) if x]
        failed = ("tp" in r and t is None) or ("lt" in r and lt is None)
        name = data_label(r["fsync"]) + (f" {r['build']}" if r["src"] is not None else "")
        print(" | ".join([f"{r['n']:>5}", f"{r['mode']:>7}", f"{r['order']:>9}", f"{name:>12}",
                          f"{t['rate']:>12,.0f}" if t else f"{'-' if 'tp' not in r else 'FAILED':>12}",
                          f"{ratio:>8}", f"{ms(lt['p50']):>12}" if lt else f"{'-':>12}",
                          f"{ms(lt['p99']):>12}" if lt else f"{'-':>12}", f"{diff:>15}", f"{on_disk:>10}",
                          "FAILED" if failed else ("OK" if all(oks) else "MISMATCH")]))
    for r in durable:
        if r.get("tp") and runs_text(r["tp"]):
            print(f"{data_label(r['fsync'])}, {r['n']} peers, {r['mode']}, {r['order']}: multicasts/s, the median of"
                  + runs_text(r["tp"]).replace(" (runs:", "", 1).rstrip(")"))
    for r in durable:
        goal = DURABLE_GOALS.get(r.get("fsync") or "")
        base = in_memory_twin(rows, r)
        if goal is None or base is None:
            continue
        parts = []
        if r.get("tp") and base.get("tp"):
            share = r["tp"]["rate"] / base["tp"]["rate"]
            parts.append(f"{share:.2f}x the in-memory rate (goal >= {goal[0]}x: "
                         f"{'met' if share >= goal[0] else 'NOT met'})")
        if r.get("lt") and base.get("lt"):
            more = r["lt"]["p50"] - base["lt"]["p50"]
            parts.append(f"light-load p50 {1000 * more:+.3f} ms (goal <= +{1000 * goal[1]:.1f} ms: "
                         f"{'met' if more <= goal[1] else 'NOT met'})")
        if parts:
            print(f"{data_label(r['fsync'])}, {r['n']} peers, {r['mode']}, {r['order']}: "
                  + "; ".join(parts))
    if references:
        print("references, 3 members each, the same burst (TOM beside: its 3-peer plain rows of the policy named):")
    for ref in references:
        figures = [f"{ref['rate']:,.0f} {ref['unit']}" if ref.get("rate") else "no rate"]
        if ref.get("p50") is not None:
            figures.append(f"light p50 {ms(ref['p50']).strip()} ms, p99 {ms(ref['p99']).strip()} ms")
        if ref.get("disk") is not None:
            figures.append(f"{ref['disk']:,.0f} bytes on disk per entry")
        beside = []
        for r in rows:
            if r["n"] != 3 or r["mode"] != "plain" or r["order"] == FLOOR or r.get("fsync") != ref["against"]:
                continue
            if r.get("tp") and ref.get("rate"):
                beside.append(f"TOM {r['order']}, {data_label(r['fsync'])}: "
                              f"{r['tp']['rate'] / ref['rate']:.2f}x its rate"
                              + (f", light p50 {1000 * (r['lt']['p50'] - ref['p50']):+.3f} ms"
                                 if r.get("lt") and ref.get("p50") is not None else ""))
        print(f"  {ref['name']}: " + "; ".join(figures) + (" | " + "; ".join(beside) if beside else ""))


def peer_build(src: Path | None) -> str:
    """Which build the peers of ``src`` run (`tom.build`): compiled (mypyc) or interpreted, and why."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    try:
        done = subprocess.run([sys.executable, "-c", "import tom.build; print(tom.build.describe())"], env=env,
                              capture_output=True, text=True, timeout=60, cwd=tempfile.gettempdir())
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    return done.stdout.strip() if done.returncode == 0 else "interpreted (a tree without tom.build)"


def build_label(src: Path | None) -> str:
    """A source tree as the table names it: its folder and git commit (``installed`` for none)."""
    if src is None:
        return "installed"
    try:
        commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    return f"{src.name}@{commit}" if commit else src.name


def print_builds(rows: list[dict], sizes: list[int], builds: list[Path | None]) -> None:
    """Each build against the first one, per group size, mode and order."""
    first = build_label(builds[0])
    for n in sizes:
        for r in rows:
            if r["n"] != n or r["src"] == builds[0]:
                continue
            base = next((b for b in rows if b["n"] == n and b["mode"] == r["mode"] and b["order"] == r["order"]
                         and b.get("fsync") == r.get("fsync") and b["src"] == builds[0]), None)
            if base is None:
                continue
            parts = []
            if base.get("tp") and r.get("tp"):
                parts.append(f"throughput {r['tp']['rate'] / base['tp']['rate']:.2f}x")
                parts.append(f"CPU per multicast {r['tp']['cpu_us'] / base['tp']['cpu_us']:.2f}x")
                parts.append(f"load p99 {1000 * (r['tp']['p99'] - base['tp']['p99']):+.1f} ms")
                if base["tp"].get("frames_mc") and r["tp"].get("frames_mc"):
                    parts.append(f"frames per multicast under load {r['tp']['frames_mc'] / base['tp']['frames_mc']:.2f}x")
            if base.get("lt") and r.get("lt"):
                parts.append(f"light-load p50 {1000 * (r['lt']['p50'] - base['lt']['p50']):+.3f} ms")
                if base["lt"].get("frames_mc") and r["lt"].get("frames_mc"):
                    parts.append(f"light-load frames per multicast {r['lt']['frames_mc'] / base['lt']['frames_mc']:.2f}x")
            if parts:
                print(f"{r['build']} vs {first}, {n} peers, {r['mode']}, {r['order']}{durable_tag(r)}: "
                      + "; ".join(parts))


def print_table(rows: list[dict], messages: int | None, builds: bool = False) -> None:
    """One line per group size, mode and order (and build, with several): the figures side by side."""
    width = max([len(r["build"]) for r in rows] + [5]) if builds else 0
    durable = any(r.get("fsync") for r in rows)
    head = ((f"{'build':>{width}} | " if builds else "") +
            f"{'peers':>5} | {'mode':>7} | {'order':>9} | " + (f"{'data':>12} | " if durable else "") +
            f"{'msgs/peer':>9} | {'multicasts/s':>12} | "
            f"{'load p50 ms':>11} | {'load p99 ms':>11} | {'light p50 ms':>12} | {'light p99 ms':>12} | "
            f"{'frames/mc load|light':>20} | {'bytes/mc load|light':>19} | {'CPU us/mc/peer':>14} | check")
    print("\n" + "=" * len(head))
    print(head)
    print("-" * len(head))
    for row in rows:
        t, lt = row.get("tp"), row.get("lt")
        n = row["n"]
        cells = ([f"{row['build']:>{width}}"] if builds else []) + [f"{n:>5}", f"{row['mode']:>7}", f"{row['order']:>9}"]
        if durable:
            cells.append(f"{data_label(row.get('fsync')) if row['order'] != FLOOR else '-':>12}")
        cells.append(f"{(messages or DEFAULT_MESSAGES.get(n, DEFAULT_OTHER)) if 'tp' in row else '-':>9}")
        cells.append(f"{t['rate']:>12,.0f}" if t else f"{'-' if 'tp' not in row else 'FAILED':>12}")
        cells.append(f"{ms(t['p50']):>11}" if t else f"{'-':>11}")
        cells.append(f"{ms(t['p99']):>11}" if t else f"{'-':>11}")
        cells.append(f"{ms(lt['p50']):>12}" if lt else f"{'-' if 'lt' not in row else 'FAILED':>12}")
        cells.append(f"{ms(lt['p99']):>12}" if lt else f"{'-':>12}")
        frames = [f"{x['frames_mc']:.2f}" if x and x.get("frames_mc") is not None else "-" for x in (t, lt)]
        size = [f"{x['bytes_mc']:,.0f}" if x and x.get("bytes_mc") is not None else "-" for x in (t, lt)]
        cells.append(f"{frames[0]:>9} | {frames[1]:<8}")
        cells.append(f"{size[0]:>9} | {size[1]:<7}")
        cells.append(f"{t['cpu_us']:>14.1f}" if t else f"{'-':>14}")
        oks = [x["ok"] for x in (t, lt) if x]
        failed = ("tp" in row and t is None) or ("lt" in row and lt is None)
        cells.append("FAILED" if failed else ("OK" if all(oks) else "MISMATCH"))
        print(" | ".join(cells))


def print_comparisons(rows: list[dict], sizes: list[int], label: str = "") -> None:
    """Secured against plain (per order), and each order against lamport (per mode), of one build
    (``label`` names it when the run has several)."""
    for n in sizes:
        for order in ORDERS:
            both = {r["mode"]: r for r in rows if r["n"] == n and r["order"] == order}
            if len(both) < 2:
                continue
            plain, secured = both["plain"], both["secured"]
            parts = []
            if plain.get("tp") and secured.get("tp"):
                parts.append(f"throughput {100 * secured['tp']['rate'] / plain['tp']['rate']:.0f}% of plain "
                             f"(goal >= 75%)")
                parts.append(f"CPU per multicast {100 * (secured['tp']['cpu_us'] / plain['tp']['cpu_us'] - 1):+.0f}% "
                             f"(steadier than rates on a busy machine)")
            if plain.get("lt") and secured.get("lt"):
                parts.append(f"light-load p50 {1000 * (secured['lt']['p50'] - plain['lt']['p50']):+.3f} ms "
                             f"(goal within 0.2 ms)")
            if parts:
                print(f"secured vs plain{label}, {n} peers, {order}: " + "; ".join(parts))
        for mode in ("plain", "secured"):
            by_order = {r["order"]: r for r in rows if r["n"] == n and r["mode"] == mode}
            base = by_order.get("lamport")
            if base is None:
                continue
            for order, r in by_order.items():
                if order == "lamport":
                    continue
                parts = []
                if base.get("tp") and r.get("tp"):
                    parts.append(f"throughput {r['tp']['rate'] / base['tp']['rate']:.2f}x lamport's")
                    if base["tp"].get("frames_mc") and r["tp"].get("frames_mc"):
                        parts.append(f"frames per multicast {r['tp']['frames_mc'] / base['tp']['frames_mc']:.2f}x")
                if base.get("lt") and r.get("lt"):
                    parts.append(f"light-load p50 {1000 * (r['lt']['p50'] - base['lt']['p50']):+.3f} ms")
                    if base["lt"].get("frames_mc") and r["lt"].get("frames_mc"):
                        parts.append(f"light-load frames per multicast "
                                     f"{r['lt']['frames_mc'] / base['lt']['frames_mc']:.2f}x")
                if parts:
                    print(f"{order} vs lamport{label}, {n} peers, {mode}: " + "; ".join(parts))


if __name__ == "__main__":
    sys.exit(main())
