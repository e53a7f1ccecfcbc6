"""A group of real ``tom peer`` processes on loopback, shared by the benchmarks (peers.py, soak.py).

Invariants the scripts rely on:

* loopback only: every peer listens on 127.0.0.1 (``HOST``), on a port that was free a moment
  before; its neighbors file, output and log live in the group's ``workdir``;
* every process a ``Group`` starts is stopped on any exit: use it as a context manager (a failed
  ``start`` stops what it had started, ``__exit__`` runs on errors and Ctrl-C, and
  ``stop_on_sigterm`` turns SIGTERM into Ctrl-C); ``stop`` sends SIGTERM, then SIGKILL to whoever is
  left after ``stop_grace`` seconds (`tom.tools.peers`). Peers run in process groups of their own: a
  Ctrl-C at the terminal reaches the script only, which then stops them;
* every loop is bounded: ``start`` and ``stop`` go once over the ``n`` peers and every wait has a
  timeout (``stop`` takes at most ``stop_grace`` s plus 5 s per peer that had to be killed).

A script subclasses ``Group`` to say how a peer's output is counted (``counter_type``), which
exception a dead peer raises (``error``), how long a peer may take to leave (``stop_grace``) and
what to say when one had to be killed (``killed``); its own waits and workloads go there too.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, ClassVar

from tom.tools.peers import LOOPBACK as HOST
from tom.tools.peers import PeerCommand, PeerGroup, PeerProcess, free_ports, write_neighbors

CLK_TCK = os.sysconf("SC_CLK_TCK")


class GroupError(Exception):
    """A peer of the group exited on its own."""


class OutputCounter:
    """Counts the records of a peer's output file as it grows (``poll``); ``read`` returns only what
    is new, nothing while the file does not exist yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._f: BinaryIO | None = None

    def read(self, size: int = -1) -> bytes:
        if self._f is None:
            try:
                self._f = open(self.path, "rb")
            except FileNotFoundError:
                return b""
        return self._f.read(size)

    def poll(self) -> int:
        """Records counted so far."""
        raise NotImplementedError

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc); NaN when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return float("nan")


@dataclass
class Peer:
    index: int  # position in the group (ports in increasing order)
    port: int
    output: Path
    log: Path
    proc: PeerProcess
    counter: OutputCounter  # of ``output``
    sent: int = 0  # messages written by ``send``
    error: type[Exception] = GroupError  # what ``send`` raises once the peer reads no more (its group's)

    @property
    def pid(self) -> str:
        return f"{HOST}:{self.port}"

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.proc.pid)

    def send(self, texts: list[str]) -> None:
        """Write one message per text to the peer's stdin; ``error`` (`exited`) if it reads no more."""
        try:
            self.proc.write(("\n".join(texts) + "\n").encode())
        except BrokenPipeError:
            raise self.error(self.exited(wait=5.0)) from None
        self.sent += len(texts)

    def exited(self, wait: float = 0.0) -> str:
        """What to say of a peer that stopped: its exit code (waiting up to ``wait`` s for it) and its
        log's last lines."""
        end = time.monotonic() + wait
        while self.proc.running() and time.monotonic() < end:
            time.sleep(0.05)
        how = "stopped reading its stdin" if self.proc.running() else f"exited with code {self.proc.returncode}"
        return f"peer {self.pid} {how}:\n{self.proc.log_tail()}"


@dataclass
class Group:
    """``n`` peer processes in ``workdir``; a context manager, so they always stop."""

    counter_type: ClassVar[type[OutputCounter]]  # set by the subclass
    error: ClassVar[type[Exception]] = GroupError  # raised by check_alive
    stop_grace: ClassVar[float] = 5.0  # seconds between SIGTERM and SIGKILL

    n: int
    workdir: Path
    src: Path | None = None  # run the peers' tom package from this source tree (e.g. a git worktree)
    delay: float = 0.0  # tom peer --delay
    secure: bool = False  # a closed group: keys made in ``workdir/keys``, every peer runs with --keys
    http: bool = False  # tom peer --http on a free loopback port (API and dashboard served, nobody watching)
    order: str = "lamport"  # tom peer --order
    path_trace: bool = False  # every peer notes its steps' times in workdir/path-<port>.txt (tom.peer.pathtrace)
    ring: int | None = None  # tom peer --ring (with http; None: the peer's default)
    frame_trace: bool = False  # tom peer --trace workdir/<port>.trace
    fsync: str | None = None  # durable peers: --data workdir/data-<port> --fsync FSYNC (None: in memory)
    extra: tuple[str, ...] = ()  # more arguments for every peer
    peers: list[Peer] = field(default_factory=list)
    processes: PeerGroup[int] = field(init=False)  # by position, as ``peers``

    def __post_init__(self) -> None:
        self.processes = PeerGroup(self.stop_grace, on_kill=lambda i: self.killed(self.peers[i]))

    def __enter__(self) -> Group:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ports = sorted(free_ports(self.n))
        neighbors = write_neighbors(self.workdir / "neighbors", (f"{HOST}:{p}" for p in ports))
        keys = self.workdir / "keys"
        if self.secure:
            from tom.net.keys import create_keys

            create_keys([f"{HOST}:{p}" for p in ports], keys)
        env = dict(os.environ)
        if self.src is not None:
            env["PYTHONPATH"] = str(self.src) + os.pathsep + env.get("PYTHONPATH", "")
        for i, port in enumerate(ports):
            out = self.workdir / f"out-{port}.jsonl"
            log = self.workdir / f"peer-{port}.log"
            counter = self.counter_type(out)  # before the process: nothing may fail between start and record
            own_env = env | {"TOM_PATH_TRACE": str(self.workdir / f"path-{port}.txt")} if self.path_trace else env
            proc = PeerProcess(self.peer_argv(neighbors, out, port, keys), log, cwd=self.src, env=own_env)
            self.peers.append(Peer(i, port, out, log, proc, counter, error=self.error))
            self.processes.start(i, proc)

    def peer_argv(self, neighbors: Path, out: Path, port: int, keys: Path) -> list[str]:
        """The command line of the peer on ``port`` (a subclass may run another program)."""
        extra = (("--ring", str(self.ring)) if self.ring is not None else ()) + self.extra
        return PeerCommand(neighbors, out, port, HOST, order=self.order, keys=keys if self.secure else None,
                           http=f"{HOST}:0" if self.http else None, delay=self.delay,
                           trace=self.workdir / f"{port}.trace" if self.frame_trace else None,
                           data=self.data_dir(port) if self.fsync else None, fsync=self.fsync,
                           extra=extra).argv()

    def data_dir(self, port: int) -> Path:
        """The data folder of the durable peer on ``port`` (with ``fsync``; the peer creates it)."""
        return self.workdir / f"data-{port}"

    def check_alive(self) -> None:
        for p in self.peers:
            if not p.proc.running():
                raise self.error(p.exited())

    def killed(self, peer: Peer) -> None:
        """Called when ``peer`` is still running ``stop_grace`` s after SIGTERM, before its SIGKILL."""

    def stop(self) -> None:
        """SIGTERM every peer still running (it leaves the group), SIGKILL whoever is left after
        ``stop_grace`` seconds, then close the counters and stdin pipes. Calling it again is harmless.
        The pipes are closed once the peers are gone: a feeder thread blocked writing to one has failed
        (EPIPE) by then instead of holding the pipe's lock."""
        self.processes.stop()
        for p in self.peers:
            p.counter.close()


def source_tree(ap: argparse.ArgumentParser, src: Path | None) -> Path | None:
    """The ``--src`` option resolved (``Group.src``); a usage error unless it holds a tom package."""
    if src is None:
        return None
    src = src.resolve()
    if not (src / "tom" / "__init__.py").exists():
        ap.error(f"--src {src}: no tom package there")
    return src


def stop_on_sigterm() -> None:
    """Make SIGTERM raise KeyboardInterrupt, so that it takes Ctrl-C's way out, which stops the peers."""
    signal.signal(signal.SIGTERM, _sigterm)


def _sigterm(_sig, _frame):
    raise KeyboardInterrupt


# -- the machine -----------------------------------------------------------------------------------


def busy_cpus(interval: float = 0.5) -> float:
    """CPUs busy over ``interval`` seconds (from /proc/stat), before we start anything."""
    def sample() -> tuple[int, int]:
        try:
            v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return 0, 0
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v) - idle, sum(v)
    b0, t0 = sample()
    time.sleep(interval)
    b1, t1 = sample()
    return (b1 - b0) / max(1, t1 - t0) * (os.cpu_count() or 1)


MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")
"""Filesystems held in memory: an fsync there costs nothing, so durable figures measured there are void."""


@dataclass(frozen=True)
class Mount:
    """The mount a path lives on: its device, mount point and filesystem type (from /proc/mounts)."""

    device: str
    point: str
    fstype: str

    def __str__(self) -> str:
        return f"{self.fstype} on {self.device}, mounted on {self.point}"


class NotADisk(Exception):
    """A folder meant for durable data is not on a disk (one line: which, and what to do)."""


def _unescape(field: str) -> str:
    """A /proc/mounts field: spaces, tabs, newlines and backslashes are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_of(path: Path, mounts: str | None = None) -> Mount:
    """The mount ``path`` lives on: of the lines of ``mounts`` (/proc/mounts' text, read if None), the
    one whose mount point is the longest leading part of the resolved ``path``; of equal ones, the last
    (a later mount hides an earlier one on the same point)."""
    if mounts is None:
        mounts = Path("/proc/mounts").read_text()
    target = Path(os.path.realpath(path))
    best: Mount | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = Mount(_unescape(fields[0]), _unescape(fields[1]), fields[2])
        point = Path(mount.point)
        if (point == target or point in target.parents) and (
                best is None or len(point.parts) >= len(Path(best.point).parts)):
            best = mount
    if best is None:
        raise NotADisk(f"{path}: no mount holds it in /proc/mounts")
    return best


def real_disk(path: Path, mounts: str | None = None) -> Mount:
    """The mount of ``path``, an existing folder for durable data; NotADisk (one line) if it is not a
    folder or is held in memory."""
    if not path.is_dir():
        raise NotADisk(f"{path} is not a folder: give --data-root an existing folder on a disk")
    mount = mount_of(path, mounts)
    if mount.fstype in MEMORY_FILESYSTEMS:
        raise NotADisk(f"{path} is on {mount.fstype} ({mount.point}), in memory: an fsync there costs nothing; "
                       f"give --data-root a folder on a disk (e.g. /var/tmp or one under the repository)")
    return mount


def fsync_seconds(folder: Path, tries: int = 50, size: int = 4096) -> list[float]:
    """The seconds each of ``tries`` appends of ``size`` bytes to a scratch file in ``folder`` took to
    be fsynced, sorted: what the disk charges a durable write (a virtual disk may answer a flush from
    its host's cache). The file is removed."""
    path = folder / f".fsync-probe-{os.getpid()}"
    block = b"\0" * size
    took = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(tries):
            os.write(fd, block)
            start = time.perf_counter()
            os.fsync(fd)
            took.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return sorted(took)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"
