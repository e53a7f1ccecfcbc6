"""The pending queue: entries keyed by ``(clock, pid)``, leaving in ``(clock, pid_key)`` order."""

from __future__ import annotations

from dataclasses import dataclass, field
from heapq import heappop, heappush
from collections.abc import Iterator

from ..pid import pid_key


@dataclass(slots=True)
class Entry:
    """A pending message; ``text is None`` while only premature ACKs have reserved it."""

    clock: int
    pid: str
    text: str | None = None
    sent_at: float | None = None
    acks: set[str] = field(default_factory=set)
    seq: int | None = None  # sequencer order: its number, once known
    vc: tuple[int, ...] | None = None  # causal order: its vector timestamp


class PendingQueue:
    """Entries keyed by ``(clock, pid)``, iterated and popped in ``(clock, pid_key)`` order.

    The heap holds ``(clock, pid_key, entry)``: keys are unique, so an entry is never compared."""

    __slots__ = ("_heap", "_entries")

    def __init__(self) -> None:
        self._heap: list[tuple[int, tuple[str, int], Entry]] = []
        self._entries: dict[tuple[int, str], Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        """Entries in delivery order (a sorted copy: for status, not for the hot path)."""
        return iter([e for _, _, e in sorted(self._heap, key=lambda item: item[:2])])

    def unordered(self):
        """The entries in no particular order (cheap: for checks that look at all of them)."""
        return self._entries.values()

    def get(self, clock: int, pid: str) -> Entry | None:
        return self._entries.get((clock, pid))

    def reserve(self, clock: int, pid: str) -> Entry:
        """The entry for ``(clock, pid)``, created empty (reserved) if absent."""
        entry = self._entries.get((clock, pid))
        if entry is None:
            entry = self._entries[(clock, pid)] = Entry(clock, pid)
            heappush(self._heap, (clock, pid_key(pid), entry))
        return entry

    def add(self, clock: int, pid: str) -> Entry:
        """A new, empty entry for ``(clock, pid)`` (which must be absent)."""
        entry = self._entries[(clock, pid)] = Entry(clock, pid)
        heappush(self._heap, (clock, pid_key(pid), entry))
        return entry

    def head(self) -> Entry | None:
        heap = self._heap
        return heap[0][2] if heap else None

    def pop(self) -> Entry:
        entry = heappop(self._heap)[2]
        del self._entries[(entry.clock, entry.pid)]
        return entry
