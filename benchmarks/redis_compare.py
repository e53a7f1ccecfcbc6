"""A reference row for ``scripts/bench --peers-compare``: one Redis Stream as the total order, on loopback.

The broker a Python user might pick instead of TOM: every member appends to one stream (``XADD``) and
reads the whole stream back (``XREAD``); the order of the stream is the order every member sees.

What is installed where, never a dependency of TOM or of its tests:

* ``redis-server``, Debian's package (7.0.15 on bookworm). When it is missing and this runs as root
  with apt-get, it is installed (``apt-get install -y --no-install-recommends redis-server``, bounded
  in time; the package lists are refreshed once if the first try fails); otherwise the row is skipped
  with one line saying why.
* the ``redis`` client with ``hiredis`` (its C reply parser, what redis-py recommends for speed: without
  it the members parse every reply in Python and read about 2.4x slower) (``PACKAGE``, pip, from the
  package index), in a venv of its own: ``.venv-redis`` beside the project's ``.venv``
  (`benchmarks.raft_compare.ensure_venv`).

Method. A ``redis-server`` started here for each scenario, on 127.0.0.1 and a port picked free
(`tom.tools.peers.free_ports`), persistence off (``--save "" --appendonly no``), its own temporary
directory, in the foreground; ``n`` members (3 by default, as TOM's 3 peers), each a Python process of
``.venv-redis`` with two connections to it. The members connect, say READY, and start together on a
``go`` line on their stdin.

* throughput: every member ``XADD``s M short texts (``t<member>.<k>``, as TOM's bench messages; by
  default as many as TOM's throughput scenario gives each of 3 peers) to the one stream, in pipelines
  of 100 commands (no transaction), from a second thread, while its main thread reads the whole stream
  with blocking ``XREAD`` (COUNT 100000, from id 0) until it has read all n*M entries. Figure: entries
  read at every member per second, ``n*M / (the slowest member's last read - the go)``.
* light load: one entry at a time, round-robin over the members: member ``k % n`` appends entry ``k``
  (with its send time) 1 ms after it has read entry ``k - 1``. Figure: p50 and p99 of the time from
  just before an ``XADD`` to the return of the ``XREAD`` that brings the entry to another member (all
  members' clocks are this machine's).

Durable variants (``appendfsync``: ``scripts/bench --durable --peers-compare``, or ``--appendfsync``
here): the server keeps an append-only file (``--appendonly yes --appendfsync always|everysec``, still
no RDB snapshots) in its directory, which is then on the disk the caller names (``where``). With
``always`` Redis writes and fsyncs the file before it answers the commands of an event-loop turn, one
fsync for all of them (compared with TOM's ``--fsync always``); with ``everysec``, the policy Redis
recommends, a background thread fsyncs it about once a second and answers do not wait for it
(compared with TOM's ``batch``, one fsync per step). The file's size at the end of the throughput run,
over the entries, is the row's bytes on disk per entry.

Every run checks that each member read all n*M entries, each text once, and the same sequence of entry
ids as the first member: a run that does not is reported as failed (`RunFailed`). Every process started
here (the server and the members) is stopped by its pid (SIGTERM, then SIGKILL) on any exit; every wait
is bounded in time.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from benchmarks.peers import percentile
from benchmarks.raft_compare import Unavailable, ensure_venv
from tom.tools.peers import PeerGroup, PeerProcess, free_ports

PACKAGE = "redis==8.1.0 hiredis==3.5.0"  # hiredis: the client's C reply parser, which redis-py uses when present
VENV = ".venv-redis"
APT_TIMEOUT = 300.0  # seconds for one apt-get command
START_TIMEOUT = 20.0  # seconds for the server, or the members, to be ready
GRACE = 5.0  # seconds between SIGTERM and SIGKILL
READY_LINE = "Ready to accept connections"  # redis-server's log, once it listens

MEMBER = r'''
import sys, threading, time
import redis

STREAM = "tom-bench"
PAUSE = 0.001  # light load: seconds between reading entry k - 1 and appending entry k
mode, port, me, n, count, batch, out, seconds = sys.argv[1:9]
port, me, n, count, batch, seconds = int(port), int(me), int(n), int(count), int(batch), float(seconds)
# protocol 2: the reply shapes read_all takes apart (a list of [stream, entries])
writer = redis.Redis(host="127.0.0.1", port=port, protocol=2)
reader = redis.Redis(host="127.0.0.1", port=port, protocol=2)
writer.ping()
reader.ping()
print("READY", flush=True)
if sys.stdin.readline().strip() != "go":
    sys.exit(3)
deadline = time.monotonic() + seconds
failures = []


def add_all():
    """Append this member's texts, ``batch`` commands a pipeline."""
    try:
        pipe = writer.pipeline(transaction=False)
        for k in range(count):
            pipe.xadd(STREAM, {"m": "t%d.%d" % (me, k)})
            if len(pipe) >= batch:
                pipe.execute()
        pipe.execute()
    except Exception as e:
        failures.append(repr(e))


def read_all(total, on_entry):
    """Read the stream from its start until ``total`` entries; ``on_entry(index, id, fields, read_at)``
    for each. The time of the last read."""
    last, got = "0-0", 0
    while got < total:
        if time.monotonic() > deadline or failures:
            print("FAILED after %d of %d entries: %s" % (got, total, failures[0] if failures else "timed out"),
                  flush=True)
            sys.exit(2)
        for _, entries in reader.xread({STREAM: last}, count=100000, block=500) or []:
            at = time.time()
            for entry_id, fields in entries:
                on_entry(got, entry_id, fields, at)
                got += 1
            last = entries[-1][0]
    return time.time()


def throughput():
    read = []
    adder = threading.Thread(target=add_all, daemon=True)
    adder.start()
    done = read_all(n * count, lambda i, entry_id, fields, at: read.append((entry_id, fields[b"m"])))
    adder.join(max(0.0, deadline - time.monotonic()))
    return done, ["%s %s\n" % (entry_id.decode(), text.decode()) for entry_id, text in read]


def light():
    read = []
    def send(k):
        writer.xadd(STREAM, {"m": "l%d" % k, "at": repr(time.time())})
    def on_entry(i, entry_id, fields, at):
        read.append((entry_id, fields[b"m"], fields[b"at"], at))
        if i + 1 < count and (i + 1) % n == me:
            time.sleep(PAUSE)
            send(i + 1)
    if me == 0:
        send(0)
    done = read_all(count, on_entry)
    return done, ["%s %s %s %r\n" % (e.decode(), m.decode(), s.decode(), at) for e, m, s, at in read]


done, lines = throughput() if mode == "throughput" else light()
with open(out, "w") as f:
    f.writelines(lines)
print("DONE %r" % done, flush=True)
'''


class RunFailed(Exception):
    """A run of the reference did not complete, or its members disagree (one line: why)."""


# -- the server ------------------------------------------------------------------------------------


def why_not_installable(euid: int, apt_get: str | None) -> str | None:
    """Why redis-server cannot be installed here (None: it can): apt-get must be there, and we root."""
    if apt_get is None:
        return "apt-get is not available to install it"
    if euid != 0:
        return "installing it takes root (apt-get install -y --no-install-recommends redis-server)"
    return None


def last_line(text: str, default: str) -> str:
    """The last non-blank line of ``text`` (a command's error), stripped; ``default`` if none."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else default


def apt_get(*args: str) -> subprocess.CompletedProcess[str]:
    """``apt-get -q ARGS``, non-interactive, waiting at most 60 s for the package lock and APT_TIMEOUT
    s in all."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", "-q", "-o", "DPkg::Lock::Timeout=60", *args], capture_output=True, text=True,
                          env=env, timeout=APT_TIMEOUT)


def install_server() -> None:
    """Install Debian's redis-server; the package lists are refreshed and the install tried again once
    if it fails. Unavailable (apt-get's last line) if it still fails."""
    print("  installing redis-server with apt-get (once) ...", flush=True)
    command = ("install", "-y", "--no-install-recommends", "redis-server")
    try:
        done = apt_get(*command)
        if done.returncode != 0:
            apt_get("update")
            done = apt_get(*command)
    except (OSError, subprocess.SubprocessError) as e:
        raise Unavailable(f"apt-get could not install redis-server: {e}") from None
    if done.returncode != 0:
        raise Unavailable("apt-get could not install redis-server: "
                          + last_line(done.stderr or done.stdout, f"apt-get exited with {done.returncode}"))


def server_binary() -> str:
    """The path of redis-server, installed first if it is missing and can be; Unavailable (one line)
    otherwise."""
    found = shutil.which("redis-server")
    if found:
        return found
    why = why_not_installable(os.geteuid(), shutil.which("apt-get"))
    if why:
        raise Unavailable(f"redis-server is not installed and {why}")
    install_server()
    found = shutil.which("redis-server")
    if not found:
        raise Unavailable("apt-get installed redis-server, but it is not on PATH")
    return found


def parse_version(text: str) -> str | None:
    """The version in ``redis-server --version``'s line (``Redis server v=7.0.15 sha=...``)."""
    found = re.search(r"\bv=(\S+)", text)
    return found.group(1) if found else None


def server_version(binary: str) -> str:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return parse_version(done.stdout) or "?"


def wait_for_line(process: PeerProcess, text: str, timeout: float, what: str) -> None:
    """Return once ``process``'s log holds ``text``; RunFailed if it exits, or ``timeout`` s pass, first."""
    end = time.monotonic() + timeout
    while text not in process.log_text(since_start=True):
        if not process.running():
            raise RunFailed(f"{what} exited with status {process.returncode}: {last_line(process.log_text(), '')}")
        if time.monotonic() > end:
            raise RunFailed(f"{what} was not ready within {timeout:g} s: {last_line(process.log_text(), '')}")
        time.sleep(0.02)


APPENDFSYNC = ("always", "everysec")
"""The append-only file's fsync policies a durable variant may take (redis.conf's ``appendfsync``)."""


def server_command(binary: str, port: int, workdir: Path, appendfsync: str | None = None) -> list[str]:
    """redis-server in the foreground on 127.0.0.1:``port``, ``workdir`` its directory; no persistence,
    or with ``appendfsync`` an append-only file there fsynced by that policy (never RDB snapshots)."""
    if appendfsync is not None and appendfsync not in APPENDFSYNC:
        raise ValueError(f"appendfsync {appendfsync!r}: one of {', '.join(APPENDFSYNC)}")
    persistence = ["--appendonly", "no"] if appendfsync is None else ["--appendonly", "yes", "--appendfsync",
                                                                        appendfsync]
    return [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", *persistence,
            "--dir", str(workdir), "--daemonize", "no", "--logfile", ""]


def aof_bytes(workdir: Path) -> int:
    """The bytes of the append-only file(s) a stopped server left in ``workdir`` (Redis 7 keeps them in
    ``appendonlydir``, older versions in ``appendonly.aof``)."""
    files = [*workdir.glob("appendonlydir/*"), *workdir.glob("appendonly.aof")]
    return sum(f.stat().st_size for f in files if f.is_file())


@contextlib.contextmanager
def redis_server(binary: str, workdir: Path, appendfsync: str | None = None) -> Iterator[int]:
    """A fresh redis-server (an empty store; ``appendfsync``: see `server_command`) for the ``with``
    block: its port. It is stopped by its pid (SIGTERM, then SIGKILL after GRACE s) however the block is
    left."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_ports(1)[0]
    with PeerGroup[str](grace=GRACE) as group:
        try:
            server = group.start("redis-server", PeerProcess(server_command(binary, port, workdir, appendfsync),
                                                             workdir / "redis-server.log", stdin=False))
        except OSError as e:
            raise RunFailed(f"cannot start {binary}: {e}") from None
        wait_for_line(server, READY_LINE, START_TIMEOUT, "redis-server")
        yield port


# -- the members -----------------------------------------------------------------------------------


def run_members(python: Path, script: Path, port: int, mode: str, n: int, count: int, batch: int,
                workdir: Path, seconds: float) -> tuple[float, list[float], list[list[list[str]]]]:
    """Run ``n`` members of ``mode`` against the server on ``port`` and start them together: the time of
    the go, each member's time of its last read, and the fields of each line each member wrote (one
    line per entry read, in the order read). RunFailed if a member fails or outlives ``seconds``."""
    with PeerGroup[int](grace=GRACE) as group:
        members = []
        for i in range(n):
            out = workdir / f"{mode}-{i}.txt"
            argv = [str(python), str(script), mode, str(port), str(i), str(n), str(count), str(batch), str(out),
                    str(seconds)]
            members.append((group.start(i, PeerProcess(argv, workdir / f"{mode}-{i}.log")), out))
        for i, (member, _) in enumerate(members):
            wait_for_line(member, "READY", START_TIMEOUT, f"member {i}")
        go = time.time()
        for member, _ in members:
            member.send(["go"])
        end = time.monotonic() + seconds + 10
        done = [member_done(i, member, end) for i, (member, _) in enumerate(members)]
    return go, done, [[line.split() for line in out.read_text().splitlines()] for _, out in members]


def member_done(i: int, member: PeerProcess, end: float) -> float:
    """The time member ``i`` read its last entry, once it has exited by ``end`` (monotonic); RunFailed
    if it did not, or exited otherwise than 0."""
    try:
        status = member.wait(max(0.0, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise RunFailed(f"member {i} did not finish in time: {last_line(member.log_text(), '')}") from None
    line = next((ln for ln in member.log_text().splitlines() if ln.startswith("DONE ")), None)
    if status != 0 or line is None:
        raise RunFailed(f"member {i} exited with status {status}: {last_line(member.log_text(), '')}")
    return float(line.split()[1])


# -- checks and figures ----------------------------------------------------------------------------


def order_problems(reads: list[list[tuple[str, str]]], expected: list[str]) -> list[str]:
    """What is wrong with what the members read (each a list of ``(entry id, text)``): each must hold
    every text of ``expected`` once and nothing else, and the same entry ids in the same order as the
    first member. Empty when all is well."""
    problems = []
    want = collections.Counter(expected)
    first = [entry_id for entry_id, _ in reads[0]] if reads else []
    for i, read in enumerate(reads):
        got = collections.Counter(text for _, text in read)
        if got != want:
            missing, extra = sum((want - got).values()), sum((got - want).values())
            problems.append(f"member {i} read {len(read)} entries of {len(expected)} "
                            f"({missing} missing, {extra} extra or twice)")
        ids = [entry_id for entry_id, _ in read]
        if ids != first:
            at = next((k for k, (a, b) in enumerate(zip(first, ids)) if a != b), min(len(first), len(ids)))
            problems.append(f"member {i} read other entry ids than member 0 from position {at}")
    return problems


def rate(total: int, go: float, done: list[float]) -> float:
    """Entries read at every member per second: ``total`` over the time from the go to the slowest
    member's last read."""
    return total / max(1e-9, max(done) - go)


def light_latencies(reads: list[list[tuple[str, float, float]]], n: int) -> list[float]:
    """The seconds from the XADD to the read of each entry at every member but its origin (``l<k>`` is
    appended by member ``k % n``), sorted; each member's reads are ``(text, sent at, read at)``."""
    return sorted(read_at - sent_at for member, read in enumerate(reads) for text, sent_at, read_at in read
                  if int(text[1:]) % n != member)


# -- the scenarios ---------------------------------------------------------------------------------


def throughput(binary: str, python: Path, script: Path, workdir: Path, n: int, messages: int, batch: int,
               seconds: float, appendfsync: str | None = None) -> float:
    """Entries read at every member per second (see the module docstring); RunFailed if the members
    did not all read the same n*M entries in the same order."""
    with redis_server(binary, workdir / "throughput", appendfsync) as port:
        go, done, lines = run_members(python, script, port, "throughput", n, messages, batch, workdir, seconds)
    expected = [f"t{i}.{k}" for i in range(n) for k in range(messages)]
    problems = order_problems([[(f[0], f[1]) for f in member] for member in lines], expected)
    if problems:
        raise RunFailed("; ".join(problems[:4]))
    return rate(n * messages, go, done)


def light(binary: str, python: Path, script: Path, workdir: Path, n: int, count: int, seconds: float,
          appendfsync: str | None = None) -> list[float]:
    """The sorted round trips, XADD to XREAD at another member, of ``count`` entries one at a time;
    RunFailed if the members did not all read the same entries in the same order."""
    with redis_server(binary, workdir / "light", appendfsync) as port:
        _, _, lines = run_members(python, script, port, "light", n, count, 1, workdir, seconds)
    problems = order_problems([[(f[0], f[1]) for f in member] for member in lines], [f"l{k}" for k in range(count)])
    if problems:
        raise RunFailed("; ".join(problems[:4]))
    return light_latencies([[(f[1], float(f[2]), float(f[3])) for f in member] for member in lines], n)


def measure(root: Path, n: int = 3, messages: int = 20000, batch: int = 100, light_count: int = 300,
            seconds: float = 120.0, appendfsync: str | None = None, where: Path | None = None) -> dict:
    """The reference's figures: redis-server's version, ``rate`` (entries/s read at every member) and,
    with ``light_count``, the light-load ``p50`` and ``p99`` (seconds); with ``appendfsync``, an
    append-only file fsynced by that policy and ``aof_bytes``, its bytes per entry after the throughput
    run. The server's directory is a temporary one in ``where`` (the system's default if None).
    Unavailable when redis-server or the client cannot be had; RunFailed when a run fails."""
    binary = server_binary()
    python = ensure_venv(root, PACKAGE, VENV)
    with tempfile.TemporaryDirectory(prefix="tom-redis-", dir=where) as tmp:
        workdir = Path(tmp)
        script = workdir / "member.py"
        script.write_text(MEMBER)
        figures = {"version": server_version(binary), "n": n, "messages": messages, "batch": batch,
                   "appendfsync": appendfsync,
                   "rate": throughput(binary, python, script, workdir, n, messages, batch, seconds, appendfsync)}
        if appendfsync is not None:  # the server has stopped: its file is whole
            figures["aof_bytes"] = aof_bytes(workdir / "throughput") / (n * messages)
        if light_count:
            trips = light(binary, python, script, workdir, n, light_count, seconds, appendfsync)
            figures.update(light=light_count, p50=percentile(trips, 50), p99=percentile(trips, 99))
    return figures


def describe(figures: dict) -> str:
    """The reference row's label: ``Redis Stream (redis-server 7.0.15, 3 members, XADD pipelined 100,
    XREAD all)``."""
    persistence = ("persistence off" if figures.get("appendfsync") is None
                   else f"AOF, appendfsync {figures['appendfsync']}")
    return (f"Redis Stream (redis-server {figures['version']}, {figures['n']} members, "
            f"XADD pipelined {figures['batch']}, XREAD all, {persistence})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.redis_compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=3, help="members (default 3)")
    ap.add_argument("--messages", type=int, default=20000, help="entries each member appends (default 20000)")
    ap.add_argument("--light", type=int, default=300, help="light load: entries, one at a time (default 300; 0: none)")
    ap.add_argument("--deadline", type=float, default=120.0, help="seconds allowed per scenario (default 120)")
    ap.add_argument("--appendfsync", choices=APPENDFSYNC,
                    help="keep an append-only file fsynced by this policy (default: persistence off)")
    ap.add_argument("--dir", type=Path, help="where the server's temporary directory goes (default: the system's)")
    args = ap.parse_args(argv)
    if not 2 <= args.members <= 32 or not 1 <= args.messages <= 10_000_000 or not 0 <= args.light <= 100_000:
        ap.error("--members must be 2..32, --messages 1..10000000 and --light 0..100000")
    try:
        figures = measure(Path(__file__).resolve().parent.parent, args.members, args.messages, 100, args.light,
                          args.deadline, args.appendfsync, args.dir)
    except (Unavailable, RunFailed) as e:
        print(f"Redis Stream not run: {e}", file=sys.stderr)
        return 2
    print(f"{describe(figures)}: {figures['rate']:,.0f} entries/s read at every member"
          + (f", {figures['aof_bytes']:.0f} bytes on disk per entry" if "aof_bytes" in figures else ""))
    if args.light:
        print(f"  light load, XADD then XREAD at another member, one at a time: p50 {1000 * figures['p50']:.3f} ms, "
              f"p99 {1000 * figures['p99']:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
