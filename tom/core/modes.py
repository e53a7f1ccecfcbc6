"""The modes of a peer in its group and the legal changes between them, as data (h11's state table)."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """Where a peer stands in the group; `TRANSITIONS` holds every legal change (h11's state table)."""

    JOINING = "joining"  # in no view yet: asks to join, or forms a group
    NORMAL = "normal"  # a member of an installed view: multicasts and delivers
    FLUSHING = "flushing"  # a view change runs: no new multicasts; the old view's rest is settled
    FLUSHED = "flushed"  # the old view is fully delivered here; waiting for INSTALL
    LEFT = "left"  # final: its leave was delivered
    REMOVED = "removed"  # final: the group went on without it


TRANSITIONS: dict[Mode, frozenset[Mode]] = {
    Mode.JOINING: frozenset({Mode.NORMAL, Mode.LEFT}),  # an install (or forming a group); a leave
    # a proposal; removed (or, with a quorum, back to joining: the primary component went on without it);
    # a static leave
    Mode.NORMAL: frozenset({Mode.FLUSHING, Mode.REMOVED, Mode.JOINING, Mode.LEFT}),
    Mode.FLUSHING: frozenset({Mode.FLUSHING, Mode.FLUSHED, Mode.NORMAL, Mode.LEFT, Mode.REMOVED, Mode.JOINING}),
    Mode.FLUSHED: frozenset({Mode.FLUSHING, Mode.NORMAL, Mode.LEFT, Mode.REMOVED, Mode.JOINING}),  # a newer attempt; install
    Mode.LEFT: frozenset(),
    Mode.REMOVED: frozenset(),
}
