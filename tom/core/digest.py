"""The running digest of the messages a peer delivered in its current view.

Invariant: after ``count`` messages of a view, `DigestChain.digest` is `tom.codec.frames.delivery_digest`
folded over them in delivery order, from 0 at the view's start; `at(k)` gives the digest after the
k-th one for the last `MAX_KEPT` positions. Peers that delivered the same sequence have the same
digest at every position; the heartbeat carries ``(count, digest, last)`` for others to compare.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Iterable
from typing import Final

from .records import Delivery, ViewDelivery

crc32: Final = zlib.crc32  # (a C static in the compiled build, not a module-dict lookup per delivery)


class DigestChain:
    """Count, digest and last key of the messages delivered in one view, and the digests kept."""

    MAX_KEPT = 1 << 20  # positions kept for comparison (4 MiB); a claim about an older one is unchecked

    __slots__ = ("count", "digest", "last", "_kept", "_base")

    def __init__(self) -> None:
        self.count = 0
        self.digest = 0
        self.last: tuple[int, str] | None = None  # key of the last message delivered in this view
        self._kept = array("I")
        self._base = 0  # _kept[k] is the digest after message _base + k + 1

    def extend(self, deliveries: Iterable[Delivery | ViewDelivery]) -> None:
        """Chain the messages among ``deliveries`` (view events are skipped), in order."""
        digest, kept, n, last = self.digest, self._kept, 0, None
        for d in deliveries:
            if type(d) is Delivery:
                digest = crc32(f"{d.clock}-{d.pid}-{d.text}".encode(), digest)  # = delivery_digest
                kept.append(digest)
                n += 1
                last = d
        if last is None:
            return
        self.digest = digest
        self.count += n
        self.last = (last.clock, last.pid)
        if len(kept) > self.MAX_KEPT:
            drop = len(kept) - self.MAX_KEPT // 2
            del kept[:drop]
            self._base += drop

    def at(self, count: int) -> int | None:
        """The digest after ``count`` messages; None if that position is no longer kept."""
        if count == 0:
            return 0
        k = count - self._base - 1
        return self._kept[k] if 0 <= k < len(self._kept) else None
