"""Helpers for tests of the library (`import tom`): members on free loopback ports, started together,
and a bounded wait."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from tom.tools.peers import free_ports

FAST = {"heartbeat": 0.2, "timeout": 1.5, "leave_timeout": 10.0}  # failure detection in test time


def members(n: int) -> list[str]:
    """``n`` member pids on free loopback ports, in port order."""
    return [f"127.0.0.1:{p}" for p in sorted(free_ports(n))]


def wait_until(predicate: Callable[[], bool], seconds: float = 30.0) -> None:
    """Return once ``predicate()`` holds; fail after ``seconds``."""
    end = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def started(objs: Sequence, size: int | None = None) -> list:
    """Start replicated objects together; return them once each is admitted (and, with ``size``, sees a
    view of that many members)."""
    for o in objs:
        o.start()
    assert all(o.wait_admitted(30) for o in objs)
    if size is not None:
        wait_until(lambda: all(len(o.members) == size for o in objs))
    return list(objs)
