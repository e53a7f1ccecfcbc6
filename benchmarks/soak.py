"""Soak test: do TOM peers keep their memory flat over a long run (a million messages)?

Starts N peers as real processes on 127.0.0.1 (temporary neighbors file, free ports, temporary
directory), waits until every peer's output file holds a view record with all N members (the group
formed), then feeds M messages in total, spread round-robin over the peers' stdin — paced at
``--rate`` messages/s for the whole group, or as fast as the pipes take them (a peer stops reading
stdin while 4096 of its own messages are undelivered, so the feeder simply blocks). Every
``--sample`` seconds it records each peer's RSS (``VmRSS`` of ``/proc/PID/status``) together with the
number of messages that peer has delivered so far (message records of its output file, counted
incrementally), until every peer delivered all M messages or ``--deadline`` passes.

It then prints delivered count vs RSS at about ten points of the run, the RSS of each peer at 10 %
and at 100 % of its deliveries and the growth between them (MiB and %), the least-squares slope of
RSS over deliveries in that span (MiB per 100k messages: a leak shows as a steady slope), the peak
RSS (``VmHWM``), throughput and CPU, and a verdict: **flat** when every peer grew by less than
10 MiB and less than 15 % from 10 % to 100 %, **GROWS** otherwise. Finally it checks, streaming the
files side by side, that every peer delivered the same ``(clock, pid)`` sequence, strictly increasing,
with every message of every origin exactly once and in its send order.

Every loop is bounded in count and time; every process started is stopped (SIGTERM — the peer leaves
the group —, then SIGKILL after 20 s) on every exit path, Ctrl-C and SIGTERM included; the temporary
directory (about 200 MB of output per peer per million messages) is deleted unless ``--keep``.

Run: ``scripts/soak [--peers 3] [--messages 1000000] [--rate R] [--sample 1.0] [--deadline 900]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.peergroup import (Group, GroupError, OutputCounter, Peer, busy_cpus, loadavg, source_tree,
                                  stop_on_sigterm)
from benchmarks.peers import pid_key

STOP_GRACE = 20.0  # seconds between SIGTERM and SIGKILL
FORM_TIMEOUT = 60.0  # seconds allowed for the group to form
TICK = 0.05  # seconds between polls of the output files
CHUNK = 1024  # lines per write to a peer's stdin
PACE_TICK = 0.005  # seconds a paced feeder sleeps when nothing is due
MIB = 1024 * 1024
FLAT_MIB = 10.0
FLAT_PCT = 15.0
MSG_MARK = b'"kind":"message"'


class SoakError(GroupError):
    pass


# -- peers -----------------------------------------------------------------------------------------


class Counter(OutputCounter):
    """Counts the message records of a growing JSON Lines file; keeps the view records (few) parsed,
    and only complete lines are looked at."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.messages = 0
        self.views: list[dict] = []
        self._rest = b""

    def poll(self) -> int:
        for _ in range(64):  # bounded: at most 64 MiB per poll
            data = self.read(MIB)
            if not data:
                break
            data = self._rest + data
            cut = data.rfind(b"\n") + 1
            whole, self._rest = data[:cut], data[cut:]
            n = whole.count(MSG_MARK)
            self.messages += n
            if whole.count(b"\n") != n:  # some view records (or torn lines) in there
                for line in whole.splitlines():
                    if b'"kind":"view"' in line:
                        try:
                            self.views.append(json.loads(line))
                        except ValueError:
                            pass
        return self.messages


def memory(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon of a process, bytes (empty when it is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                key, _, rest = line.partition(b":")
                if key in (b"VmRSS", b"VmHWM", b"RssAnon"):
                    out[key.decode()] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


class SoakGroup(Group):
    """N peers; a peer has STOP_GRACE s to leave the group before its SIGKILL."""

    counter_type = Counter
    error = SoakError
    stop_grace = STOP_GRACE

    def killed(self, peer: Peer) -> None:
        print(f"  peer {peer.pid} still running {STOP_GRACE:.0f} s after SIGTERM: SIGKILL")

    def wait_formed(self, deadline: float) -> float:
        """Until every output file holds a view record with all N members; returns seconds taken."""
        t0 = time.monotonic()
        everyone = {p.pid for p in self.peers}
        for _ in range(int(FORM_TIMEOUT / TICK) + 1):
            for p in self.peers:
                p.counter.poll()
            if all(any(set(v.get("members", ())) == everyone for v in p.counter.views) for p in self.peers):
                return time.monotonic() - t0
            self.check_alive()
            if time.monotonic() > deadline or time.monotonic() - t0 > FORM_TIMEOUT:
                break
            time.sleep(TICK)
        seen = {p.pid: [v.get("members") for v in p.counter.views] for p in self.peers}
        raise SoakError(f"the group did not form within {FORM_TIMEOUT:.0f} s; views seen: {seen}")


# -- workload --------------------------------------------------------------------------------------


class Feeder(threading.Thread):
    """Writes messages ``s<i>.<k>`` (k = 0..count-1) to one peer's stdin: at ``rate`` per second,
    or as fast as the pipe takes them (``rate`` 0). Blocks on a full pipe: that is the backpressure."""

    def __init__(self, peer: Peer, count: int, rate: float, stop: threading.Event, deadline: float) -> None:
        super().__init__(daemon=True, name=f"feed-{peer.port}")
        self.peer, self.count, self.rate, self.stop, self.deadline = peer, count, rate, stop, deadline
        self.sent = 0
        self.error: BaseException | None = None
        self.t_start = self.t_end = None

    def _write(self, k0: int, k1: int) -> None:
        i = self.peer.index
        self.peer.proc.write("".join(f"s{i}.{k}\n" for k in range(k0, k1)).encode())
        self.sent = k1

    def run(self) -> None:
        try:
            self.t_start = time.monotonic()
            # bounded: every iteration either writes >= 1 line or sleeps PACE_TICK (so at most
            # count writes plus deadline/PACE_TICK sleeps), and stops at the deadline anyway
            max_iter = self.count + int(max(0.0, self.deadline - self.t_start) / PACE_TICK) + 10
            for _ in range(max_iter):
                if self.sent >= self.count or self.stop.is_set() or time.monotonic() > self.deadline:
                    break
                if self.rate <= 0:
                    self._write(self.sent, min(self.count, self.sent + CHUNK))
                    continue
                due = min(self.count, int((time.monotonic() - self.t_start) * self.rate) + 1)
                if due > self.sent:
                    self._write(self.sent, min(due, self.sent + CHUNK))
                else:
                    time.sleep(PACE_TICK)
            self.t_end = time.monotonic()
        except BaseException as e:  # reported by the main thread
            self.error = e


@dataclass
class Sample:
    t: float  # seconds since the workload started
    delivered: list[int]
    rss: list[int]  # bytes
    anon: list[int]
    sent: int
    cpu: list[float]


def sample(group: SoakGroup, t0: float, feeders: list[Feeder]) -> Sample:
    delivered = [p.counter.poll() for p in group.peers]
    mems = [memory(p.proc.pid) for p in group.peers]
    return Sample(time.monotonic() - t0, delivered, [m.get("VmRSS", 0) for m in mems],
                  [m.get("RssAnon", 0) for m in mems], sum(f.sent for f in feeders),
                  [p.cpu_seconds() for p in group.peers])


# -- order check (streaming) -----------------------------------------------------------------------


def message_keys(path: Path, limit: int):
    """(clock, pid, text) of the message records of a file, in file order, one line at a time."""
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if n > limit:
                raise SoakError(f"{path.name}: more than {limit} lines")
            if MSG_MARK not in line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                raise SoakError(f"{path.name}: line {n} is not JSON: {line[:80]!r}") from None
            yield r["clock"], r["pid"], r["text"]


def verify(group: SoakGroup, expected: int) -> tuple[bool, list[str]]:
    """All peers: the same (clock, pid) sequence, strictly increasing, ``expected`` long, and every
    origin's messages s<i>.0, s<i>.1, ... each once, in send order (an origin's clocks increase)."""
    problems: list[str] = []
    streams = [message_keys(p.output, expected + 1000) for p in group.peers]
    origin_of = {p.pid: p.index for p in group.peers}
    next_k = [0] * group.n
    prev = None
    count = 0
    done = object()
    for _ in range(expected + 1001):
        rows = [next(s, done) for s in streams]
        if all(r is done for r in rows):
            break
        if any(r is done for r in rows):
            short = [group.peers[i].pid for i, r in enumerate(rows) if r is done]
            problems.append(f"{', '.join(short)} ended after {count} messages; others go on")
            break
        keys = {(c, q) for c, q, _ in rows}
        if len(keys) != 1:
            problems.append(f"peers differ at message {count + 1}: "
                            + ", ".join(f"{p.pid}: ({r[0]}, {r[1]})" for p, r in zip(group.peers, rows)))
            break
        clock, pid, text = rows[0]
        key = (clock, pid_key(pid))
        if prev is not None and key <= prev:
            problems.append(f"message {count + 1}: ({clock}, {pid}) does not follow {prev}")
            break
        prev = key
        i = origin_of.get(pid)
        if i is None or text != f"s{i}.{next_k[i]}":
            want = f"s{i}.{next_k[i]}" if i is not None else "(unknown origin)"
            problems.append(f"message {count + 1} from {pid}: text {text!r}, expected {want!r} "
                            f"(lost, duplicated or reordered)")
            break
        next_k[i] += 1
        count += 1
    if not problems and count != expected:
        problems.append(f"every peer delivered {count} messages, expected {expected}")
    return not problems, problems


# -- report ----------------------------------------------------------------------------------------


def mib(b: float) -> float:
    return b / MIB


def first_at(samples: list[Sample], peer: int, target: int) -> Sample | None:
    return next((s for s in samples if s.delivered[peer] >= target), None)


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of RSS (bytes) over delivered messages, in MiB per 100k messages."""
    if len(points) < 3:
        return float("nan")
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return float("nan")
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx * 100_000 / MIB


def report(group: SoakGroup, samples: list[Sample], base: Sample, total: int, wall: float | None,
           cpu0: list[float]) -> bool:
    w = 22
    print("\ndelivered vs RSS (first sample at or past each tenth of the run; RSS in MiB)")
    head = f"{'point':>6} {'t (s)':>7} {'sent':>9} {'msg/s':>8} | " + " | ".join(
        f"{'peer ' + str(p.port):>{w}}" for p in group.peers)
    print(head)
    print(f"{'':>6} {'':>7} {'':>9} {'':>8} | " + " | ".join(f"{'delivered':>11} {'RSS':>10}" for _ in group.peers))
    print("-" * len(head))
    rows = [("start", base)]
    for k in range(1, 11):
        s = next((s for s in samples if min(s.delivered) >= total * k // 10), None)
        if s is not None and s is not rows[-1][1]:
            rows.append((f"{10 * k}%", s))
        elif s is not None:
            first = rows[-1][0].split("-")[0].rstrip("%")
            rows[-1] = (f"{first}-{10 * k}%" if first != "start" else f"{10 * k}%", s)
    if samples and (rows[-1][1] is not samples[-1]) and min(samples[-1].delivered) < total:
        rows.append(("last", samples[-1]))
    prev = None
    for label, s in rows:
        rate = "" if prev is None or s.t <= prev.t else f"{(min(s.delivered) - min(prev.delivered)) / (s.t - prev.t):,.0f}"
        print(f"{label:>6} {s.t:7.1f} {s.sent:9d} {rate:>8} | " + " | ".join(
            f"{d:11d} {mib(r):10.1f}" for d, r in zip(s.delivered, s.rss)))
        prev = s

    print("\nper peer: RSS at start / 10% / 100% of its deliveries, growth 10%->100%, slope, peak")
    print(f"{'peer':>15} {'start':>8} {'@10%':>8} {'@100%':>8} {'growth':>15} {'MiB/100k msg':>13} "
          f"{'max RSS':>8} {'VmHWM':>8} {'anon@10%':>9} {'anon@100%':>9}")
    flat = True
    complete = True
    for i, p in enumerate(group.peers):
        s10 = first_at(samples, i, total // 10)
        s100 = first_at(samples, i, total)
        if s100 is None:
            complete = False
            s100 = samples[-1] if samples else None
        if s10 is None or s100 is None or s10 is s100:
            print(f"{p.pid:>15} {mib(base.rss[i]):8.1f}  (not enough samples)")
            flat = False
            continue
        g = s100.rss[i] - s10.rss[i]
        pct = 100.0 * g / s10.rss[i] if s10.rss[i] else float("nan")
        span = [(s.delivered[i], s.rss[i]) for s in samples if s10.t <= s.t <= s100.t]
        peak = max(r for _, r in span)
        hwm = memory(p.proc.pid).get("VmHWM", 0) if p.proc.poll() is None else 0
        ok = mib(g) < FLAT_MIB and pct < FLAT_PCT
        flat &= ok
        print(f"{p.pid:>15} {mib(base.rss[i]):8.1f} {mib(s10.rss[i]):8.1f} {mib(s100.rss[i]):8.1f} "
              f"{mib(g):+7.1f} ({pct:+5.1f}%) {slope(span):+13.2f} {mib(peak):8.1f} "
              f"{(f'{mib(hwm):8.1f}' if hwm else '       -')} {mib(s10.anon[i]):9.1f} {mib(s100.anon[i]):9.1f}")
        print(f"{'':>15} (10% sample: {s10.delivered[i]} delivered at {s10.t:.1f} s; "
              f"100% sample: {s100.delivered[i]} at {s100.t:.1f} s)")
    if wall:
        last = samples[-1]
        cpus = [(c - c0) / wall for c, c0 in zip(last.cpu, cpu0)]
        print(f"\nthroughput: {total:,} multicasts delivered at every peer in {wall:.1f} s -> "
              f"{total / wall:,.0f}/s; peer CPU " + ", ".join(f"{100 * c:.0f}%" for c in cpus) + " of a core")
    else:
        print(f"\nthroughput: incomplete run (delivered {min(samples[-1].delivered) if samples else 0:,} of "
              f"{total:,} at the slowest peer)")
    verdict = ("flat" if flat else "GROWS") if complete else ("flat so far (INCOMPLETE)" if flat else "GROWS (INCOMPLETE)")
    print(f"verdict: {verdict} (flat: every peer's RSS grew < {FLAT_MIB:.0f} MiB and < {FLAT_PCT:.0f}% "
          f"from 10% to 100% of the run)")
    return flat and complete


def write_csv(path: Path, group: SoakGroup, samples: list[Sample]) -> None:
    with open(path, "w") as f:
        f.write("t,sent," + ",".join(f"delivered_{p.port},rss_kib_{p.port},anon_kib_{p.port},cpu_s_{p.port}"
                                     for p in group.peers) + "\n")
        for s in samples:
            f.write(f"{s.t:.3f},{s.sent}," + ",".join(
                f"{d},{r // 1024},{a // 1024},{c:.2f}" for d, r, a, c in zip(s.delivered, s.rss, s.anon, s.cpu))
                + "\n")


# -- main ------------------------------------------------------------------------------------------


def data_size(folder: Path) -> int:
    """Bytes of the files in a peer's data folder (0 while it has none)."""
    try:
        return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    except OSError:
        return 0


def data_line(group: SoakGroup, delivered: int) -> str:
    """Each durable peer's data folder: MiB on disk, and bytes per message delivered."""
    sizes = [data_size(group.data_dir(p.port)) for p in group.peers]
    return ", ".join(f"{mib(b):.1f} MiB ({b / max(delivered, 1):.0f} B/msg)" for b in sizes)


def run(args, workdir: Path) -> int:
    n, total = args.peers, args.messages
    start = time.monotonic()
    deadline = start + args.deadline
    per_peer = [total // n + (1 if i < total % n else 0) for i in range(n)]
    with SoakGroup(n, workdir, src=args.src, fsync=args.data, extra=tuple(args.peer_arg)) as group:
        formed = group.wait_formed(deadline)
        print(f"group of {n} formed in {formed:.1f} s: " + ", ".join(f"{p.pid} (pid {p.proc.pid})" for p in group.peers))
        stop = threading.Event()
        feeders = [Feeder(p, c, (args.rate / n if args.rate else 0.0), stop, deadline)
                   for p, c in zip(group.peers, per_peer)]
        t0 = time.monotonic()
        base = sample(group, t0, feeders)
        cpu0 = base.cpu
        samples: list[Sample] = [base]
        for f in feeders:
            f.start()
        wall = None
        next_sample = t0 + args.sample
        max_ticks = int(args.deadline / TICK) + 10
        try:
            for tick in range(max_ticks):
                now = time.monotonic()
                if now >= next_sample:
                    samples.append(sample(group, t0, feeders))
                    next_sample += args.sample
                    if next_sample < now:
                        next_sample = now + args.sample
                    s = samples[-1]
                    if len(samples) % max(1, int(30 / args.sample)) == 0:
                        print(f"  {s.t:6.0f} s: sent {s.sent:,}, delivered {min(s.delivered):,}, RSS "
                              + " ".join(f"{mib(r):.1f}" for r in s.rss) + f" MiB, load {loadavg()}"
                              + (f", data folders {data_line(group, min(s.delivered))}" if args.data else ""),
                              flush=True)
                    if min(s.delivered) >= total:
                        wall = s.t
                        break
                else:
                    counts = [p.counter.poll() for p in group.peers]
                    if min(counts) >= total:
                        samples.append(sample(group, t0, feeders))  # the 100% point, sampled at once
                        wall = samples[-1].t
                        break
                for f in feeders:
                    if f.error is not None:
                        raise SoakError(f"feeding {f.peer.pid} failed: {f.error!r}")
                    if not f.is_alive() and f.sent < f.count and now <= deadline:
                        raise SoakError(f"feeding {f.peer.pid} stopped after {f.sent} of {f.count} messages")
                if tick % 20 == 0:
                    group.check_alive()
                if now > deadline:
                    print(f"deadline of {args.deadline:.0f} s passed")
                    break
                time.sleep(TICK)
        finally:
            stop.set()
        ok_report = report(group, samples, base, total, wall, cpu0)
        if args.data:
            print(f"data folders at the end: {data_line(group, min(samples[-1].delivered))}")
        if args.csv:
            write_csv(args.csv, group, samples)
            print(f"samples written to {args.csv}")
        status = 0 if ok_report else 1
        print(f"\nload average at the end: {loadavg()}")
        # leave the group and exit (SIGTERM), then check the finished files
        group.stop()
        for f in feeders:
            f.join(timeout=1.0)
    if wall is not None:
        t = time.monotonic()
        ok, problems = verify(group, total)
        print(f"order check ({time.monotonic() - t:.1f} s, streamed): "
              + ("OK — same (clock, pid) sequence at every peer, strictly increasing, every message once, "
                 "in send order per origin" if ok else "MISMATCH: " + "; ".join(problems[:3])))
        status |= 0 if ok else 1
    return status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", type=int, default=3, help="group size (default 3)")
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages in total, over all peers "
                                                                     "(default 1000000)")
    ap.add_argument("--rate", type=float, default=0.0, help="messages/s for the whole group (default: as fast "
                                                            "as the peers take them)")
    ap.add_argument("--sample", type=float, default=1.0, help="seconds between RSS samples (default 1)")
    ap.add_argument("--deadline", type=float, default=900.0, help="seconds allowed for the run (default 900)")
    ap.add_argument("--src", type=Path, help="run the peers' tom package from this source tree (e.g. a git "
                                              "worktree) instead of the installed one")
    ap.add_argument("--csv", type=Path, help="also write every sample (t, sent, per peer: delivered, RSS, "
                                              "anonymous RSS, CPU seconds) to this CSV file")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (outputs, logs)")
    ap.add_argument("--data", choices=("always", "batch", "never"), default=None, metavar="FSYNC",
                    help="durable peers: each with --data in the work folder and this --fsync policy; the data "
                         "folders' size is sampled too (bytes on disk per message)")
    ap.add_argument("--peer-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for every peer (repeat: --peer-arg=--retain --peer-arg=100000)")
    args = ap.parse_args(argv)
    if not 2 <= args.peers <= 16:
        ap.error("--peers must be 2..16")
    if not 10 <= args.messages <= 50_000_000:
        ap.error("--messages must be 10..50000000")
    if args.rate < 0 or not 0.05 <= args.sample <= 60 or not 1 <= args.deadline <= 86400:
        ap.error("--rate >= 0, --sample 0.05..60, --deadline 1..86400")
    args.src = source_tree(ap, args.src)
    stop_on_sigterm()
    tmp = Path(tempfile.mkdtemp(prefix="tom-soak-"))
    print(f"TOM soak: {args.peers} peers, {args.messages:,} messages"
          + (f" at {args.rate:,.0f}/s" if args.rate else " as fast as the peers take them")
          + f", RSS sampled every {args.sample:g} s, deadline {args.deadline:.0f} s; {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}, workdir {tmp}" + (f", peers from {args.src}" if args.src else ""))
    busy = busy_cpus()
    print(f"load average {loadavg()}; about {busy:.1f} CPUs busy before start"
          + (" (WARNING: other processes compete: throughput will be low)" if busy > 0.3 else ""), flush=True)
    status = 1
    try:
        status = run(args, tmp)
    except SoakError as e:
        print(f"FAILED: {e}")
        status = 1
    except KeyboardInterrupt:
        print("\ninterrupted: peers stopped")
        status = 130
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
