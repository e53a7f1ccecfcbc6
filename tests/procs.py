"""Helpers to run real `tom peer` processes on loopback from tests (through `tom.tools.peers`); every
process is stopped after.

Groups are secured (``--keys``, mutual TLS) unless a test asks for the plain protocol (``secure=False``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from tom.tools import peers
from tom.tools.peers import PeerCommand, PeerGroup, PeerProcess, PeerStartError, free_ports, tom_command

__all__ = ["DEADLINE", "PeerProcs", "free_ports", "make_keys", "run_tom", "tom_cmd", "worker_port_range",
           "write_neighbors"]

DEADLINE = 40.0


def worker_port_range(index: int, count: int) -> str:
    """The ``TOM_PORT_RANGE`` of xdist worker ``index`` of ``count``: its slice of
    `tom.tools.peers.default_port_range`, none shared. Workers pick ports at the same time and bind
    them later; from one range, one worker's peer could find its port taken by another's."""
    low, high = peers.default_port_range()
    size = (high - low + 1) // count
    first = low + index * size
    return f"{first}-{first + size - 1}"


def sigint_as_at_a_terminal() -> None:
    """``preexec_fn`` of a child the test sends SIGINT: its default, as Ctrl-C at a terminal. A suite
    started in the background (`scripts/test &`, `nohup`) runs with SIGINT ignored, and a child
    inherits an ignored signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def write_neighbors(path: Path, ports: list[int]) -> Path:
    return peers.write_neighbors(path, (f"127.0.0.1:{p}" for p in ports))


def make_keys(folder: Path, ports: list[int]) -> Path:
    """The group credentials (as `tom keys` makes them) for loopback peers on ``ports``."""
    from tom.net.keys import create_keys

    create_keys([f"127.0.0.1:{p}" for p in ports], folder)
    return folder


def tom_cmd(*args: str) -> list[str]:
    return tom_command(*args)


class PeerProcs:
    """A group of headless peers on loopback; a context manager (leaving it kills whoever still runs)."""

    def __init__(self, tmp: Path, n: int, delay: float = 0.0, secure: bool = True,
                 ports: list[int] | None = None, everyone: list[int] | None = None, http: bool = False,
                 extra: tuple[str, ...] = (), each: list[tuple[str, ...]] | None = None) -> None:
        """``n`` peers on ``ports`` (default: free ones); the neighbors file (and the keys) list
        ``everyone`` (default: just them). With ``http`` each peer also serves --http on a free port
        of its own (``http_urls``); ``extra`` are more arguments for every peer, ``each[i]`` for peer i."""
        self.tmp = tmp
        self.ports = ports if ports is not None else free_ports(n)
        self.http_ports = [p for p in free_ports(2 * n) if p not in self.ports][:n] if http else []
        self.http_urls = [f"http://127.0.0.1:{p}" for p in self.http_ports]
        self.extra = extra
        self.each = each or [() for _ in self.ports]
        self.neighbors = write_neighbors(tmp / "neighbors.txt", everyone or self.ports)
        self.keys = make_keys(tmp / "keys", everyone or self.ports) if secure else None
        self.outputs = [tmp / f"out-{p}.jsonl" for p in self.ports]
        self.logs = [tmp / f"log-{p}.txt" for p in self.ports]
        self.delay = delay
        self.group: PeerGroup[int] = PeerGroup(grace=0)  # a test's leftovers are killed at once
        self.procs = [PeerProcess(self._cmd(i), log) for i, log in enumerate(self.logs)]

    def _cmd(self, i: int) -> list[str]:
        http = str(self.http_ports[i]) if self.http_ports else None
        return PeerCommand(self.neighbors, self.outputs[i], self.ports[i], keys=self.keys, http=http,
                           delay=self.delay, extra=(*self.extra, *self.each[i])).argv()

    def __enter__(self) -> "PeerProcs":
        try:
            for i, proc in enumerate(self.procs):
                self.group.start(i, proc)
            self.wait_listening()
        except BaseException:
            self.group.stop()
            raise
        return self

    def restart(self, i: int) -> None:
        """SIGKILL peer ``i`` and start it again on the same port and output file (its log goes on)."""
        self.procs[i].kill()
        self.procs[i].wait(10)
        self.group.start(i, self.procs[i])

    def wait_listening(self, deadline: float = 20.0) -> None:
        """Return once every peer's log says it listens (bounded by ``deadline``)."""
        try:
            self.group.wait_ready(timeout=deadline)
        except PeerStartError as e:
            raise AssertionError(f"peers did not start ({e}): {self.log_text()}") from None

    def __exit__(self, *exc) -> None:
        self.group.stop()

    def send(self, i: int, lines: list[str]) -> None:
        assert self.procs[i].send(lines), f"peer {i} reads no more input"

    def records(self, i: int) -> list[dict]:
        """The whole records peer ``i`` wrote so far (a last line still being written is left out)."""
        if not self.outputs[i].exists():
            return []
        text = self.outputs[i].read_text()
        return [json.loads(ln) for ln in text[:text.rfind("\n") + 1].splitlines() if ln.strip()]

    def messages(self, i: int) -> list[dict]:
        return [r for r in self.records(i) if r["kind"] == "message"]

    def wait_delivered(self, count: int, deadline: float = DEADLINE) -> None:
        """Wait until every peer delivered ``count`` messages (view records not counted)."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if all(len(self.messages(i)) >= count for i in range(len(self.procs))):
                return
            time.sleep(0.1)
        got = [len(self.messages(i)) for i in range(len(self.procs))]
        raise AssertionError(f"not all delivered {count} within {deadline}s: {got}; logs: {self.log_text()}")

    def terminate(self, timeout: float = 10.0) -> list[int]:
        """SIGTERM every peer (each leaves the group); their exit statuses, each within ``timeout`` s."""
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        return [p.wait(timeout) for p in self.procs]

    def log_text(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')}" for log in self.logs if log.exists())


def run_tom(*args: str, timeout: float = 20.0, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(tom_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def wait_for(what: str, check, deadline: float = 30.0):
    """Poll ``check()`` every 0.1 s until it returns something truthy (bounded by ``deadline``); return
    it. A connection error (httpx's TransportError: a peer not serving yet) counts as not yet."""
    import httpx

    end = time.monotonic() + deadline
    last = None
    while time.monotonic() < end:
        try:
            last = check()
        except httpx.TransportError as e:
            last = e
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {deadline}s (last: {last!r})")
