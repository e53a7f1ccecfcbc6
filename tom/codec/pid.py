"""Peer identifiers.

A pid is the canonical string ``host:port`` of a peer, exactly as built by `make_pid`: the host is
lower-cased, IPv6 hosts are bracketed (``[::1]:5000``), the port is a decimal integer without
leading zeros. Every peer and the Spark verifier order pids by `pid_key`: ``(host, port)`` with the
host compared as a string and the port as an integer.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from typing import Final

from ..errors import ConfigError

PID_PATTERN: Final = re.compile(r"(?:\[[0-9a-f:.]+\]|[a-z0-9._-]+):(?:[1-9][0-9]{0,4})\Z")
"""The one pid grammar, used by the neighbors file (`make_pid`) and the wire codec: a host — a
bracketed IPv6 address, or letters ``a-z``, digits, ``.``, ``_`` and ``-`` (IPv4 addresses and host
names; an internationalised name in its ASCII ``xn--`` form) — then ``:`` and a port 1..65535
without leading zeros."""


def is_pid(text: str) -> bool:
    """Whether ``text`` is a canonical pid of the one grammar (`PID_PATTERN`, port at most 65535)."""
    return (type(text) is str and PID_PATTERN.match(text) is not None
            and int(text.rpartition(":")[2]) <= 65535)


def make_pid(host: str, port: int) -> str:
    """Return the canonical pid for ``host`` and ``port``."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.version == 6:
        host = f"[{ip.compressed}]"
    elif ip is not None:
        host = str(ip)
    if not 0 < port < 65536:
        raise ConfigError(f"port {port} is out of range 1..65535")
    pid = f"{host}:{port}"
    if not is_pid(pid):
        raise ConfigError(f"bad host {host!r}: a host is an IP address or a name of letters a-z, digits, "
                          f"'.', '-' and '_' (an internationalised name in its xn-- form)")
    return pid


def parse_pid(text: str) -> str:
    """Parse ``host:port`` (IPv6 as ``[addr]:port``) into a canonical pid; raise ConfigError."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"expected host:port, got {text!r}")
    if ":" in host and not host.startswith("["):
        raise ConfigError(f"IPv6 hosts must be bracketed, as [::1]:5000; got {text!r}")
    return make_pid(host, int(port))


def split_pid(pid: str) -> tuple[str, int]:
    """Split a canonical pid into ``(host, port)``; the host keeps IPv6 brackets."""
    host, _, port = pid.rpartition(":")
    return host, int(port)


@functools.lru_cache(maxsize=4096)
def pid_key(pid: str) -> tuple[str, int]:
    """The documented sort key of a pid: ``(host, port)``."""
    return split_pid(pid)


def socket_host(pid: str) -> str:
    """The host of ``pid`` in the form a socket call takes (no IPv6 brackets)."""
    host = split_pid(pid)[0]
    return host[1:-1] if host.startswith("[") else host


def sorted_pids(pids: Iterable[str]) -> list[str]:
    """``pids`` in the documented pid order."""
    return sorted(pids, key=pid_key)
