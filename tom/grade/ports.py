"""Loopback ports for the runs going on side by side, and what is left listening on them (Linux /proc).

Every port is a 5-digit one below the ephemeral range (so a group's ports have equal length, and no
outgoing connection takes one meanwhile), within ``TOM_PORT_RANGE`` when it is set (programs picking
ports side by side, a test suite's workers, each take a range of their own:
`tom.tools.peers.port_range`); a port handed out is not handed out again by this process for
`REUSE_AFTER` seconds, so runs side by side never share one.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import time
from pathlib import Path

LOW, HIGH = 10000, 32000
REUSE_AFTER = 120.0
_given: dict[int, float] = {}


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def allocate(n: int, rng: random.Random | None = None) -> list[int]:
    """``n`` distinct free 5-digit ports on 127.0.0.1, sorted, none given out lately."""
    from ..tools.peers import PORT_RANGE, default_port_range, port_range
    rng = rng or random.Random()
    low, high = LOW, min(HIGH, default_port_range()[1])  # (below the ephemeral range)
    if os.environ.get(PORT_RANGE):
        given = port_range()
        low, high = max(low, given[0]), min(high, given[1])
        if low > high:
            raise OSError(f"{PORT_RANGE}={os.environ[PORT_RANGE]} holds no 5-digit port below the ephemeral range")
    now = time.monotonic()
    for port, when in list(_given.items()):
        if now - when > REUSE_AFTER:
            del _given[port]
    ports: list[int] = []
    for _ in range(2000):
        if len(ports) == n:
            break
        port = rng.randint(low, high)
        if port in ports or port in _given or not _free(port):
            continue
        ports.append(port)
    if len(ports) < n:
        raise OSError(f"no {n} free ports on 127.0.0.1 between {low} and {high}")
    for port in ports:
        _given[port] = now
    return sorted(ports)


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def listening(port: int) -> bool:
    """Something listens on TCP ``port`` (any address), read from /proc without connecting to it; when
    /proc cannot tell, a bind test."""
    if os.path.exists("/proc/net/tcp"):
        return bool(_listening_inodes(port))
    return not _free(port)


def listeners(port: int) -> list[int]:
    """The pids of this user's processes holding a socket listening on ``port`` (not this process)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return []
    wanted = {f"socket:[{i}]" for i in inodes}
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            if os.stat(f"/proc/{entry}").st_uid != os.getuid():
                continue
            for fd in os.listdir(fd_dir):
                try:
                    if os.readlink(f"{fd_dir}/{fd}") in wanted:
                        found.append(int(entry))
                        break
                except OSError:
                    continue
        except OSError:
            continue
    return found


def kill_listeners(port: int) -> list[int]:
    """SIGKILL whatever of this user's is left listening on ``port``; the pids killed."""
    killed = []
    for pid in listeners(port):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            pass
    return killed
