"""One JSON-able picture of a running peer, for the HTTP API, the metrics and the dashboard.

This is the only place the API reads the peer's state: `snapshot` builds a fresh dict from the core's
public `Core.status()` and counters and from each link's public fields, and never keeps a reference
into either. Everything it returns is plain data (str, int, float, bool, None, list, dict), so the
caller may serialize it at leisure while the peer goes on.

Times: ``last_heard_age`` is seconds since the neighbor was last heard (the core's trio clock);
nothing here reads a clock itself — ``now`` is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import Core, PendingStatus
from ..net.links import Link
from ..codec.pid import pid_key

PENDING_SHOWN = 100
"""At most this many pending entries are listed (the head first); ``pending_count`` has them all."""


def counters(core: Core) -> dict[str, int]:
    """The core's running counters: deliveries, premature ACKs, releases behind a late head, alarms.

    ``divergence_alarms`` is 0 for a core that does not count them."""
    stats = core.stats
    return {
        "delivered": core.delivered,
        "premature_acks": stats.get("premature_acks", 0),
        "released_behind_head": stats.get("released_behind_head", 0),
        "divergence_alarms": stats.get("divergence_alarms", 0),
    }


def waits_line(p: PendingStatus) -> str:
    """What a pending message waits for in its group's order, in one line: the core's own line
    (`PendingStatus.waits`), or, from a core that gives none, the Lamport order's missing ACKs."""
    if p.waits:
        return p.waits
    if p.text is None:
        return "its MESSAGE (an ACK came first)"
    return f"ACKs from {', '.join(p.missing)}" if p.missing else "the messages before it"


def lamport(core: Core) -> int:
    """The core's Lamport clock now."""
    return core.clock.time


def backlog(core: Core) -> int:
    """Messages accepted here and not yet delivered (what the terminal's backpressure looks at)."""
    return core.backlog()


def snapshot(core: Core, links: Mapping[str, Link], now: float) -> dict[str, Any]:
    """The peer's state as plain data; ``now`` is the current time on the core's (trio) clock."""
    st = core.status()
    view = st.view
    members = set(view.members) if view is not None else set()
    pending = [
        {"clock": p.clock, "pid": p.pid, "text": p.text, "reserved": p.text is None,
         "acks": list(p.acks), "missing": list(p.missing), "waits": waits_line(p), "seq": p.seq}
        for p in st.pending[:PENDING_SHOWN]
    ]
    peers = []
    for pid in sorted([st.me, *links], key=pid_key):
        row: dict[str, Any] = {"pid": pid, "member": pid in members, "suspected": pid in st.suspected}
        if pid == st.me:
            row.update(connection="self", incarnation=core.incarnation or None, last_heard_age=None,
                       frames_in=None, frames_out=None, queued=None)
        else:
            link = links[pid]
            heard = st.last_heard.get(pid)
            row.update(connection=link.state, incarnation=link.incarnation,
                       last_heard_age=None if heard is None else round(max(0.0, now - heard), 3),
                       frames_in=link.frames_in, frames_out=link.frames_out, queued=link.queued)
        peers.append(row)
    return {
        "peer": st.me,
        "order": st.order,
        "mode": st.mode,
        "quorum": None if st.no_quorum is None else {"reachable": st.no_quorum[0], "members": st.no_quorum[1]},
        "unreachable": [list(pair) for pair in st.unreachable],
        "clock": st.clock,
        "view": None if view is None else {
            "id": view.id,
            "members": sorted(view.members, key=pid_key),
            "coordinator": view.coordinator or None,
        },
        "pending": pending,
        "pending_count": len(st.pending),
        "backlog": core.backlog(),
        "peers": peers,
        "counters": counters(core),
        "alarms": [{"peer": a.peer, "view": a.view, "position": a.position, "mine": f"{a.mine:08x}",
                    "theirs": f"{a.theirs:08x}"} for a in getattr(st, "alarms", ())],
    }
