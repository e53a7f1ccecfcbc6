"""The Lamport clock."""

from __future__ import annotations


class LamportClock:
    """A Lamport clock: `tick` before a send, `observe` on a receive."""

    __slots__ = ("time",)

    def __init__(self, time: int = 0) -> None:
        self.time = time

    def tick(self) -> int:
        """Advance for a local send and return the new time."""
        self.time += 1
        return self.time

    def observe(self, remote: int) -> int:
        """Merge a received timestamp: ``time = max(time, remote) + 1``."""
        t = self.time
        self.time = (remote if remote > t else t) + 1
        return self.time
