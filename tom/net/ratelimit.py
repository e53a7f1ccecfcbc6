"""Rate-limited log lines: a stranger or a broken link must not flood the log.

`LogLimiter.allow(key)` lets one line per key through every ``interval`` seconds and counts the lines
it held back, so the next line that passes can say how many there were. Keys are bounded in number.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class LogLimiter:
    """At most one line per key every ``interval`` seconds (``clock`` in seconds, monotonic)."""

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 1024) -> None:
        self.interval = interval
        self.clock = clock
        self.max_keys = max_keys
        self._last: dict[Hashable, tuple[float, int]] = {}  # key -> (last line's time, held back since)

    def allow(self, key: Hashable) -> int | None:
        """None: hold this line back. Otherwise let it through; the number is how many lines of this
        key were held back since the last one that passed."""
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval:
            self._last[key] = (last[0], last[1] + 1)
            return None
        if last is None and len(self._last) >= self.max_keys:
            self._last.clear()  # bounded: forgetting old keys only lets one more line through
        self._last[key] = (now, 0)
        return 0 if last is None else last[1]


def held_back(count: int) -> str:
    """The suffix of a line that passed after ``count`` were held back."""
    return f" ({count} more like it since the last report)" if count else ""
