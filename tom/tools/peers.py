"""Run peer processes: build a ``tom peer`` command line, start it, wait until it listens, write to its
stdin, stop it. The launcher, the network lab, the benchmarks and the tests all run peers through here.

Invariants:

* a `PeerProcess` runs at most one child at a time, in a process group of its own (a Ctrl-C at the
  terminal reaches only the program that started it, which then stops it); the child's stdout and
  stderr both go to the process's log file, opened for appending (a restarted peer's log goes on),
  never to a pipe that could fill up;
* a peer is *ready* once its log says ``Started to listen`` after its latest start;
* `PeerGroup.stop` (and `PeerProcess.stop`) leaves no child running: SIGCONT (a paused peer cannot
  act on SIGTERM) and SIGTERM (the peer leaves its group), SIGKILL for whoever is left after the
  grace, or at once when the grace is 0 or an exception (Ctrl-C) interrupts the grace; every signal
  goes to a child's own pid;
* every wait is bounded in time and every loop in count.

A durable peer restarted by a tool (`start_again`) runs its very command line again; whoever feeds its
stdin goes on after the lines its data folder accepted (`accepted_count`): the peer reads its stdin in
order, so what it accepted is a prefix of what it was given, the peer itself sends again those of them
the group did not deliver, and the lines left in the dead child's pipe are the feeder's to write again.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

from ..durable.log import DataError, read_log
from ..errors import TomError

LOOPBACK = "127.0.0.1"
READY = "Started to listen"  # the line a peer prints once its listener is bound
READY_TIMEOUT = 20.0  # seconds a peer may take to be ready
STOP_GRACE = 20.0  # seconds between SIGTERM and SIGKILL
KILL_WAIT = 5.0  # seconds to wait for a process after its SIGKILL
POLL = 0.05  # seconds between two looks at the logs

K = TypeVar("K", bound=Hashable)


class PeerStartError(TomError):
    """A peer was not ready in time, or exited before it was."""


class PeerExited(PeerStartError):
    """The peer ``key`` exited before it was ready."""

    def __init__(self, key: Hashable, process: PeerProcess) -> None:
        super().__init__(f"peer {key} exited at start with status {process.returncode}")
        self.key = key
        self.process = process


class NotReady(PeerStartError):
    """The peers ``keys`` were not ready within ``timeout`` seconds."""

    def __init__(self, keys: list[Hashable], timeout: float) -> None:
        super().__init__(f"peers {', '.join(map(str, keys))} did not start listening within {timeout:g} s")
        self.keys = keys
        self.timeout = timeout


def tom_command(*args: str, python: str = sys.executable) -> list[str]:
    """``tom ARGS...`` run by ``python``: the tom package that interpreter imports."""
    return [python, "-m", "tom", *args]


@dataclass(frozen=True)
class PeerCommand:
    """The options of one ``tom peer`` run; `argv` is its command line. Options at their default are
    left out of it, so the peer's own defaults apply."""

    neighbors: Path
    output: Path
    port: int
    host: str = LOOPBACK  # the address to listen on (brackets around an IPv6 address are dropped)
    order: str = "lamport"
    wire: str = "tom"
    keys: Path | None = None  # a closed group's keys folder
    http: str | None = None  # [HOST:]PORT of the API and dashboard
    delay: float = 0.0
    jitter: float = 0.0
    headless: bool = True  # --no-ui: every stdin line is a message
    trace: Path | None = None  # --trace: the peer's frame trace
    data: Path | None = None  # --data: a durable peer's data folder
    fsync: str | None = None  # --fsync, with data: when its writes reach the disk (None: the peer's default)
    extra: tuple[str, ...] = ()  # more arguments, last
    python: str = sys.executable

    def argv(self) -> list[str]:
        cmd = tom_command("peer", str(self.neighbors), str(self.output), str(self.port),
                          "--host", self.host.strip("[]"), python=self.python)
        if self.wire != "tom":
            cmd += ["--wire", self.wire]
        if self.order != "lamport":
            cmd += ["--order", self.order]
        if self.keys is not None:
            cmd += ["--keys", str(self.keys)]
        if self.http is not None:
            cmd += ["--http", self.http]
        if self.delay:
            cmd += ["--delay", str(self.delay)]
        if self.jitter:
            cmd += ["--jitter", str(self.jitter)]
        if self.trace is not None:
            cmd += ["--trace", str(self.trace)]
        if self.data is not None:
            cmd += ["--data", str(self.data)]
            if self.fsync is not None:
                cmd += ["--fsync", self.fsync]
        if self.headless:
            cmd.append("--no-ui")
        return cmd + list(self.extra)


class LineTail:
    """The complete lines appended to a growing file since the last call, read from where the last
    call stopped (a line still being written waits for its newline). A torn last line that the writer
    cuts off (a peer killed mid-write, then started again) is never read: each call reads again from
    the start of the incomplete line, so what replaces it is read as written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0  # where the first line not read yet starts

    def new_lines(self) -> list[bytes] | None:
        """The lines appended since the last call (without newlines); None while the file is missing."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return None
        lines = data.split(b"\n")
        self.offset += len(data) - len(lines.pop())
        return lines


PORT_RANGE = "TOM_PORT_RANGE"
"""The environment variable that narrows the ports `free_ports` picks to ``LOW-HIGH`` (both included):
programs that pick ports at the same time on one machine (a test suite's workers) each take a range of
their own, so that none binds a port another picked a moment before."""


def default_port_range() -> tuple[int, int]:
    """From 20000 up to 32000 or to just below the kernel's ephemeral range, whichever is lower: a port
    of the ephemeral range could be taken meanwhile as the local end of some outgoing connection (a
    peer started late would then find its port in use)."""
    low, high = 20000, 32000
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            high = min(high, int(f.read().split()[0]) - 1)
    except (OSError, ValueError, IndexError):
        pass
    return low, high


def port_range() -> tuple[int, int]:
    """The ports `free_ports` picks from, lowest and highest: ``TOM_PORT_RANGE`` when set, else
    `default_port_range`. A malformed ``TOM_PORT_RANGE`` is a `TomError`."""
    value = os.environ.get(PORT_RANGE)
    if not value:
        return default_port_range()
    try:
        low, high = (int(part) for part in value.split("-"))
    except ValueError:
        low = high = 0
    if not 1024 <= low <= high <= 65535:
        raise TomError(f"{PORT_RANGE}={value!r} is not LOW-HIGH, two ports from 1024 to 65535, LOW first")
    return low, high


_HANDED_OUT: deque[int] = deque(maxlen=512)
"""The ports `free_ports` gave this process lately: free when it checked them but maybe not bound yet
(groups started one after another, each peer binding its port once it runs), so not given again: in
`scripts/bench`'s four groups started side by side, a peer found its port taken by another group's."""


def free_ports(n: int, host: str = LOOPBACK) -> list[int]:
    """``n`` distinct ports of `port_range` that were free on ``host`` a moment ago, none of them among
    the last 512 it gave this process. At most 1000 ports are tried."""
    low, high = port_range()
    rng = random.Random()
    ports: list[int] = []
    for _ in range(1000):
        if len(ports) == n:
            break
        port = rng.randint(low, high)
        if port in ports or port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        ports.append(port)
    if len(ports) < n:
        raise RuntimeError(f"no {n} free ports on {host} between {low} and {high}")
    _HANDED_OUT.extend(ports)
    return ports


def write_neighbors(path: Path, pids: Iterable[str]) -> Path:
    """A neighbors file listing ``pids`` (``host:port``), one a line."""
    path.write_text("".join(f"{pid}\n" for pid in pids))
    return path


class PeerProcess:
    """One child process (a ``tom peer``, or any program) run as ``prefix + argv`` in ``cwd`` with
    ``env``, its stdout and stderr appended to ``log``, its stdin a pipe (``stdin=True``) or
    /dev/null. `start` may be called again once the previous child has exited."""

    def __init__(self, argv: Sequence[str], log: Path, *, prefix: Sequence[str] = (), cwd: Path | None = None,
                 env: Mapping[str, str] | None = None, stdin: bool = True) -> None:
        self.argv = [*prefix, *argv]
        self.log = log
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.stdin = stdin
        self.popen: subprocess.Popen[bytes] | None = None
        self.input_open = False  # stdin may still be written to
        self._log_start = 0  # the log's size when the current child started
        self._ready = False
        self._nonblocking = False

    # -- life --------------------------------------------------------------------------------------
    def start(self) -> PeerProcess:
        if self.running():
            raise RuntimeError(f"{self.argv[0]} (pid {self.pid}) is still running")
        self.close_input()  # the previous child's pipe: lines left in it are lost with that child
        with open(self.log, "ab") as log:  # the child has its own copy of the descriptor
            self._log_start = os.fstat(log.fileno()).st_size
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.PIPE if self.stdin else subprocess.DEVNULL,
                                          stdout=log, stderr=subprocess.STDOUT, cwd=self.cwd, env=self.env,
                                          process_group=0)
        self.input_open = self.stdin
        self._ready = False
        self._nonblocking = False
        return self

    def _child(self) -> subprocess.Popen[bytes]:
        if self.popen is None:
            raise RuntimeError("the process was never started")
        return self.popen

    @property
    def pid(self) -> int:
        return self._child().pid

    @property
    def returncode(self) -> int | None:
        """The exit status of the latest child (negative: the signal that ended it); None while it
        runs or before it started."""
        return None if self.popen is None else self.popen.poll()

    def poll(self) -> int | None:
        return self.returncode

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def ready(self) -> bool:
        """The log says the current child listens (it may have exited since)."""
        if not self._ready and self.popen is not None:
            self._ready = READY in self.log_text(since_start=True)
        return self._ready

    def wait(self, timeout: float) -> int:
        """The exit status, once the child exits within ``timeout`` s (else subprocess.TimeoutExpired)."""
        return self._child().wait(timeout)

    def send_signal(self, sig: int) -> None:
        """Signal the child by its pid; nothing when it has exited."""
        if self.popen is not None:
            self.popen.send_signal(sig)  # polls first: never a signal to a reaped pid

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def pause(self) -> None:
        self.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.send_signal(signal.SIGCONT)

    def stop(self, grace: float = STOP_GRACE) -> int | None:
        """Stop the child (see the module's invariants); its exit status, None if even SIGKILL did not
        end it within KILL_WAIT s."""
        _stop([(None, self)], grace)
        return self.returncode

    # -- stdin -------------------------------------------------------------------------------------
    def send(self, texts: Iterable[str]) -> bool:
        """Write one line per text (blocking while the pipe is full); False, and stdin closed for
        good, when the child no longer reads it."""
        if not self.input_open:
            return False
        try:
            self.write("".join(t + "\n" for t in texts).encode())
        except (BrokenPipeError, ValueError):
            self.input_open = False
            return False
        return True

    def write(self, data: bytes) -> None:
        """Write ``data`` to stdin, blocking while the pipe is full (the peer's backpressure); raises
        BrokenPipeError when the child no longer reads it."""
        pipe = self._child().stdin
        if pipe is None:
            raise ValueError("this process's stdin is /dev/null")
        pipe.write(data)
        pipe.flush()

    def write_some(self, data: bytes) -> int | None:
        """Write what the pipe takes of ``data`` without blocking: the bytes written (0 when the pipe is
        full, e.g. of a paused peer), None when the child no longer reads it. Once called, the pipe
        stays non-blocking: do not mix with `write` or `send`."""
        pipe = self._child().stdin
        if pipe is None or not self.input_open:
            return None
        if not self._nonblocking:
            os.set_blocking(pipe.fileno(), False)
            self._nonblocking = True
        try:
            return os.write(pipe.fileno(), data)
        except BlockingIOError:
            return 0
        except BrokenPipeError:
            self.input_open = False
            return None

    def close_input(self) -> None:
        """End the child's input (a headless peer then leaves its group)."""
        self.input_open = False
        pipe = self.popen.stdin if self.popen is not None else None
        if pipe is not None:
            try:
                pipe.close()
            except (OSError, ValueError):  # data left in the buffer for a child that is gone
                pass

    # -- log ---------------------------------------------------------------------------------------
    def log_text(self, since_start: bool = False) -> str:
        """The log (only what the current child wrote, with ``since_start``); "" when there is none."""
        try:
            with open(self.log, "rb") as f:
                if since_start:
                    f.seek(self._log_start)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 15) -> str:
        return "\n".join(self.log_text().splitlines()[-n:]) or "(no log)"


def _stop(items: Sequence[tuple[K, PeerProcess]], grace: float,
          on_kill: Callable[[K], None] | None = None) -> None:
    """Stop every process of ``items`` (see the module's invariants); ``on_kill(key)`` is called for
    each one still running ``grace`` s after its SIGTERM, just before its SIGKILL."""
    try:
        if grace > 0:
            running = [(k, p) for k, p in items if p.running()]
            for _, p in running:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
            end = time.monotonic() + grace
            for key, p in running:
                try:
                    p.wait(max(0.0, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    if on_kill is not None:
                        on_kill(key)
                    p.kill()
    finally:  # also on Ctrl-C during the grace: nobody is left running
        left = [p for _, p in items if p.running()]
        for p in left:
            p.kill()
        for p in left:
            try:
                p.wait(KILL_WAIT)
            except subprocess.TimeoutExpired:
                pass
        for _, p in items:
            p.close_input()


def accepted_count(data: Path) -> int | None:
    """How many texts the data folder ``data`` says its peer accepted (None: its log cannot be read)."""
    try:
        return len(read_log(data / "accepted.log").records)
    except DataError:
        return None


def start_again(group: PeerGroup[K], key: K, data: Path) -> int | None:
    """Start the durable peer ``key`` of ``group``, killed before, again with its very command line (its
    output file, its data folder ``data``, its log appended to), once its killed child is gone (at most
    KILL_WAIT s). Returns how many lines of its input it had accepted: its feed goes on after them
    (None: its accepted log cannot be read; the caller keeps its own count)."""
    process = group[key]
    if process.running():
        try:
            process.wait(KILL_WAIT)
        except subprocess.TimeoutExpired:
            raise PeerStartError(f"peer {key} is still running {KILL_WAIT:g} s after its SIGKILL: not "
                                 "started again") from None
    accepted = accepted_count(data)
    group.start(key, process)
    return accepted


class PeerGroup(Generic[K]):
    """Processes by key (a pid, a peer number, a position), in the order they were first started. A
    context manager: leaving the ``with`` block, by any way, stops them all (`stop`)."""

    def __init__(self, grace: float = STOP_GRACE, on_kill: Callable[[K], None] | None = None) -> None:
        self.grace = grace
        self.on_kill = on_kill
        self.processes: dict[K, PeerProcess] = {}

    def start(self, key: K, process: PeerProcess) -> PeerProcess:
        """Start ``process`` as ``key`` (which it replaces, if that one has exited)."""
        old = self.processes.get(key)
        if old is not None and old is not process and old.running():
            raise RuntimeError(f"peer {key} is still running")
        self.processes[key] = process  # recorded first: `stop` reaches it whatever happens next
        return process.start()

    def __getitem__(self, key: K) -> PeerProcess:
        return self.processes[key]

    def __contains__(self, key: object) -> bool:
        return key in self.processes

    def __iter__(self) -> Iterator[K]:
        return iter(self.processes)

    def __len__(self) -> int:
        return len(self.processes)

    def items(self) -> list[tuple[K, PeerProcess]]:
        return list(self.processes.items())

    def running(self) -> list[K]:
        return [k for k, p in self.processes.items() if p.running()]

    def returncodes(self) -> dict[K, int | None]:
        return {k: p.returncode for k, p in self.processes.items()}

    def wait_ready(self, keys: Iterable[K] | None = None, timeout: float = READY_TIMEOUT) -> None:
        """Return once every peer of ``keys`` (default: all) is ready and running; PeerExited for the
        first found exited, NotReady when ``timeout`` s pass first."""
        chosen = [(k, self.processes[k]) for k in (self.processes if keys is None else keys)]
        end = time.monotonic() + timeout
        for _ in range(int(timeout / POLL) + 2):
            for key, p in chosen:
                if not p.running():
                    raise PeerExited(key, p)
            if all(p.ready() for _, p in chosen):
                return
            if time.monotonic() >= end:
                break
            time.sleep(POLL)
        raise NotReady([k for k, p in chosen if not p.ready()], timeout)

    def stop(self, grace: float | None = None) -> dict[K, int | None]:
        """Stop every process (grace: ``self.grace`` unless given; 0: SIGKILL at once); their exit
        statuses. Calling it again is harmless."""
        _stop(self.items(), self.grace if grace is None else grace, self.on_kill)
        return self.returncodes()

    def __enter__(self) -> PeerGroup[K]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
