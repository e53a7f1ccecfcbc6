"""Clean-up by progress: how far every peer's durable history goes, and what no peer can ask for any
more. Sans-IO: reports in, a cut out (no disk, no clock read, no socket).

Every durable member tells the members of its view, about once a second, the last position its history
holds on its disk (`tom.codec.frames.Progress`); a member without ``--data`` says it keeps none. A peer
catching up asks for what follows its own last position (`tom.durable.catchup`), so a member may drop
whatever comes before the lowest position of every peer that may still ask: each peer of the neighbors
file, and each peer it saw admitted to a view. A peer not heard from yet counts from the view that
admitted it (it may have crashed before its first report), or, never seen admitted, holds every
clean-up back (only ``--retain`` bounds the folder then).

Invariant: the cut never passes a position a peer reported or the view record that admitted a peer not
heard from since, so a peer that comes back always finds what it needs at the member that cleaned up.
"""

from __future__ import annotations

from collections.abc import Iterable

from .catchup import HistoryIndex, Position


class Progress:
    """What each peer said of its history. ``peers``: the neighbors file's (this peer's own excluded)."""

    def __init__(self, me: str, peers: Iterable[str] = ()) -> None:
        self.me = me
        self.peers = {p for p in peers if p != me}
        # pid -> the last position it reported, or None: it keeps no history (needs nothing)
        self.at: dict[str, Position | None] = {}

    def admitted(self, pid: str, view: int) -> None:
        """``pid`` is admitted by ``view`` (its record): until it reports, it may need what follows."""
        if pid == self.me:
            return
        self.peers.add(pid)
        if pid not in self.at:
            self.at[pid] = (view, 0)

    def reported(self, pid: str, at: Position | None) -> None:
        """``pid`` says its history ends at ``at`` (None: it keeps none)."""
        if pid != self.me:
            self.peers.add(pid)
            self.at[pid] = at

    def floor(self, mine: Position | None) -> Position | None:
        """The lowest position any peer may still ask for what follows (``mine``: this peer's own durable
        end), or None while a peer's need is unknown."""
        low = mine
        for p in self.peers:
            if p not in self.at:
                return None
            at = self.at[p]
            if at is not None and (low is None or at < low):
                low = at
        return low


def cut_at(index: HistoryIndex, floor: Position, by_view: bool) -> int:
    """The number of the first record a clean-up must keep so that a peer at ``floor`` can still catch
    up from ``index``'s history: the record after message ``n`` of view ``v``, or, ``by_view`` (orders
    whose members ask from a view's start: causal, sequencer), view ``v``'s own record. 0: keep all."""
    view, n = floor
    span = index.views.get(view)
    if span is None:
        return 0 if not index.views or view < min(index.views) else _before_views_after(index, view)
    if by_view:
        return span.first if span.whole else 0
    start = span.start(n)
    return start if start is not None else 0


def _before_views_after(index: HistoryIndex, view: int) -> int:
    """``floor``'s view is not in the history (it was never delivered here, e.g. this peer was away):
    keep from the first view after it."""
    later = [v for v in index.views if v > view]
    if not later:
        return 0
    span = index.views[min(later)]
    return span.first if span.whole else 0
