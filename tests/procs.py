"""Helpers to run real `tom peer` processes on loopback from tests; every process is stopped after.

Groups are secured (``--keys``, mutual TLS) unless a test asks for the plain protocol (``secure=False``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DEADLINE = 40.0


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports that were free a moment ago, outside the ephemeral range: a port
    from that range could be taken meanwhile as the local end of some outgoing connection (a peer
    started late would then find its port in use)."""
    import random

    low, high = 20000, 32000
    try:
        eph_low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
        high = min(high, eph_low - 1)
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    ports: list[int] = []
    for _ in range(1000):
        if len(ports) == n:
            return ports
        port = rng.randint(low, high)
        if port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
    raise RuntimeError("no free ports")


def write_neighbors(path: Path, ports: list[int]) -> Path:
    path.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
    return path


def make_keys(folder: Path, ports: list[int]) -> Path:
    """The group credentials (as `tom keys` makes them) for loopback peers on ``ports``."""
    from tom.net.keys import create_keys

    create_keys([f"127.0.0.1:{p}" for p in ports], folder)
    return folder


def tom_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "tom", *args]


class PeerProcs:
    """A group of headless peers started with Popen; use as a context manager."""

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
        self.procs: list[subprocess.Popen] = []

    def _cmd(self, i: int) -> list[str]:
        cmd = tom_cmd("peer", str(self.neighbors), str(self.outputs[i]), str(self.ports[i]), "--host",
                      "127.0.0.1", "--no-ui", "--delay", str(self.delay), *self.extra, *self.each[i])
        if self.keys is not None:
            cmd += ["--keys", str(self.keys)]
        if self.http_ports:
            cmd += ["--http", str(self.http_ports[i])]
        return cmd

    def __enter__(self) -> "PeerProcs":
        for i, log in enumerate(self.logs):
            self.procs.append(subprocess.Popen(self._cmd(i), stdin=subprocess.PIPE, stdout=open(log, "wb"),
                                               stderr=subprocess.STDOUT))
        self.wait_listening()
        return self

    def restart(self, i: int) -> None:
        """SIGKILL peer ``i`` and start it again on the same port and output file (its log goes on)."""
        self.procs[i].kill()
        self.procs[i].wait(10)
        self.procs[i] = subprocess.Popen(self._cmd(i), stdin=subprocess.PIPE, stdout=open(self.logs[i], "ab"),
                                         stderr=subprocess.STDOUT)

    def wait_listening(self, deadline: float = 20.0) -> None:
        """Return once every peer's log says it listens (bounded by ``deadline``)."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if all(log.exists() and "Started to listen" in log.read_text(errors="replace") for log in self.logs):
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.05)
        raise AssertionError(f"peers did not start: {self.log_text()}")

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(5)

    def send(self, i: int, lines: list[str]) -> None:
        stdin = self.procs[i].stdin
        assert stdin is not None
        stdin.write("".join(f"{ln}\n" for ln in lines).encode())
        stdin.flush()

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
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        return [p.wait(timeout) for p in self.procs]

    def log_text(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')}" for log in self.logs if log.exists())


def run_tom(*args: str, timeout: float = 20.0, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run(tom_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          stdin=subprocess.DEVNULL, env=env)
