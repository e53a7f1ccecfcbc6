"""A peer's step timestamps for `scripts/bench --path`: where one message's time goes, task by task.

With ``TOM_PATH_TRACE=FILE`` in its environment a peer notes the monotonic time (``CLOCK_MONOTONIC``,
the same clock in every process of the host, so the files of a group line up) of each step of its
tasks: its stdin read, a link's read, the processor's batch taken, the core's step done, the frames
handed on, the output written, the sender's routing, a link's write. At exit it writes them to FILE,
one ``<nanoseconds> <step>`` per line. Off (the default), every step costs one test of a global.
At most `LIMIT` steps are kept: a trace is for light load, not for a long run.
"""

from __future__ import annotations

import os
import time

LIMIT = 1_000_000


class PathTrace:
    """Steps noted in memory, written once at the end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.steps: list[tuple[int, str]] = []

    def note(self, step: str) -> None:
        if len(self.steps) < LIMIT:
            self.steps.append((time.perf_counter_ns(), step))

    def save(self) -> None:
        try:
            with open(self.path, "w") as f:
                f.writelines(f"{ns} {step}\n" for ns, step in self.steps)
        except OSError:
            pass  # a benchmark's aid: no file, no figures, and the peer's exit goes on


def _from_environment() -> PathTrace | None:
    path = os.environ.get("TOM_PATH_TRACE")
    return PathTrace(path) if path else None


TRACE: PathTrace | None = _from_environment()
