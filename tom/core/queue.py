"""The pending queue: entries keyed by ``(clock, pid)``, leaving in ``(clock, pid_key)`` order."""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Iterator, ValuesView
from dataclasses import dataclass
from typing import Final

from ..codec.pid import pid_key


@dataclass(slots=True, init=False)
class Entry:
    """A pending message; ``text is None`` while only premature ACKs have reserved it."""

    clock: int
    pid: str
    text: str | None
    sent_at: float | None
    acks: set[str]
    seq: int | None  # sequencer order: its number, once known
    vc: tuple[int, ...] | None  # causal order: its vector timestamp

    def __init__(self, clock: int = 0, pid: str = "", text: str | None = None, sent_at: float | None = None,
                 acks: set[str] | None = None, seq: int | None = None,
                 vc: tuple[int, ...] | None = None) -> None:
        # written out, not the dataclass's: the compiled build then constructs an entry natively (the
        # defaults: it constructs a copy before it sets its fields, `tom.core.viewchange`)
        self.clock, self.pid, self.text, self.sent_at = clock, pid, text, sent_at
        self.acks = set() if acks is None else acks
        self.seq, self.vc = seq, vc


def _clock(entry: Entry) -> int:
    return entry.clock


# (C statics in the compiled build: a module-dict lookup per call otherwise, several per message)
_heappush: Final = heapq.heappush
_heappop: Final = heapq.heappop
_heapify: Final = heapq.heapify
_insort: Final = bisect.insort


class _Origin:
    """One origin's pending entries, in clock order, and the origin's rank: its place in `pid_key`
    order among the origins its queue has seen."""

    __slots__ = ("entries", "rank")

    def __init__(self, rank: int = 0) -> None:
        self.entries: deque[Entry] = deque()
        self.rank = rank


class PendingQueue:
    """Entries keyed by ``(clock, pid)``, iterated and popped in ``(clock, pid_key)`` order.

    One queue per origin in clock order (its messages come in that order on its FIFO link, so a new
    entry is nearly always appended), merged through a small heap of the origins' first entries:
    ``(clock, rank, entry)``, where an origin's rank is its place in `pid_key` order among the origins
    seen (integers compare fast; a new origin re-ranks them and rebuilds the heap), keys unique so an
    entry is never compared. Under load thousands of entries wait; a pop then costs some log(origins)
    comparisons, not log(entries).

    The heap may hold stale items — an entry that is no longer its origin's first (an entry reserved
    out of order went before it), or one already popped — and `head` drops them; every origin's first
    entry is always in it."""

    __slots__ = ("_fronts", "_origins", "_entries", "_ranks")

    def __init__(self) -> None:
        self._fronts: list[tuple[int, int, Entry]] = []
        self._origins: dict[str, _Origin] = {}
        self._entries: dict[tuple[int, str], Entry] = {}
        self._ranks: dict[str, int] = {}  # every origin seen -> its place in pid_key order

    def _rank(self, pid: str) -> int:
        """``pid``'s rank, ranking it first if it is new (which re-ranks the origins after it)."""
        rank = self._ranks.get(pid)
        if rank is not None:
            return rank
        ranks = self._ranks
        order = sorted([*ranks, pid], key=pid_key)
        self._ranks = ranks = {p: i for i, p in enumerate(order)}
        if ranks[pid] != len(order) - 1:  # others moved: their origins and the heap follow
            for p, origin in self._origins.items():
                origin.rank = ranks[p]
            self._fronts = [(e.clock, ranks[e.pid], e) for _, _, e in self._fronts]
            _heapify(self._fronts)
        return ranks[pid]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        """Entries in delivery order (a sorted copy: for status, not for the hot path)."""
        return iter(sorted(self._entries.values(), key=lambda e: (e.clock, pid_key(e.pid))))

    def unordered(self) -> ValuesView[Entry]:
        """The entries in no particular order (cheap: for checks that look at all of them)."""
        return self._entries.values()

    def get(self, clock: int, pid: str) -> Entry | None:
        return self._entries.get((clock, pid))

    def reserve(self, clock: int, pid: str) -> Entry:
        """The entry for ``(clock, pid)``, created empty (reserved) if absent."""
        entry = self._entries.get((clock, pid))
        return entry if entry is not None else self.add(clock, pid)

    def add(self, clock: int, pid: str) -> Entry:
        """A new, empty entry for ``(clock, pid)`` (which must be absent)."""
        entry = self._entries[(clock, pid)] = Entry(clock, pid)
        origin = self._origins.get(pid)
        if origin is None:
            origin = self._origins[pid] = _Origin(self._rank(pid))
        queue = origin.entries
        if not queue:
            queue.append(entry)
            _heappush(self._fronts, (clock, origin.rank, entry))
        elif clock > queue[-1].clock:
            queue.append(entry)
        else:  # out of its origin's order (a relay, or an ACK before its message)
            _insort(queue, entry, key=_clock)
            if queue[0] is entry:
                _heappush(self._fronts, (clock, origin.rank, entry))
        return entry

    def head(self) -> Entry | None:
        fronts, origins = self._fronts, self._origins
        while fronts:
            entry = fronts[0][2]
            origin = origins.get(entry.pid)
            if origin is not None and origin.entries and origin.entries[0] is entry:
                return entry
            _heappop(fronts)  # stale
        return None

    def pop(self) -> Entry:
        """Remove and return the head (the caller has just seen it with `head`)."""
        entry = self.head()
        assert entry is not None, "pop from an empty queue"
        _heappop(self._fronts)
        origin = self._origins[entry.pid]
        queue = origin.entries
        queue.popleft()
        del self._entries[(entry.clock, entry.pid)]
        if queue:
            nxt = queue[0]
            _heappush(self._fronts, (nxt.clock, origin.rank, nxt))
        else:
            del self._origins[entry.pid]
        return entry
