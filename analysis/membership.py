"""Members that left the group's views without leaving and were admitted again: peers cut off by a
partition (they rejoin after the heal, in the same process and output file) or restarted.

What such a peer owes (docs/output-format.md): the messages of the views it was a member of, up to
where it was cut off — the prefix of its last view there that it delivered, the same rule as for a
crashed member — and everything from the view that admitted it again on. The checks need nothing
more than the view records for that; this module names these peers for the report.

Input: the run's views as the verifier collects them (one dict per view: ``view``, ``members``,
``removed``; small, on the driver). Pure: no Spark, no I/O.
"""

from __future__ import annotations


def rejoins(views: list[dict]) -> list[dict]:
    """One row per time a member was removed (``removed`` of view ``r``) and later was a member again
    (first view ``j >= r`` listing it; ``j = r`` is a restart admitted in the view that removed its
    old incarnation): ``peer, last_view`` (``r - 1``: the view it was cut off in),
    ``removed_by`` (``r``), ``admitted_in`` (``j``). Ordered by ``admitted_in``, then ``peer``.

    Views missing from the input (no peer recorded them) are skipped over: ``j`` is the first view
    recorded from ``r`` on that lists the peer."""
    by_id = sorted((v for v in views if v.get("view") is not None), key=lambda v: v["view"])
    out: list[dict] = []
    open_: dict[str, int] = {}  # peer -> view that removed it, not yet admitted again
    for v in by_id:
        members = set(v.get("members") or ())
        for peer in sorted(open_):
            if peer in members:
                r = open_.pop(peer)
                out.append({"peer": peer, "last_view": r - 1, "removed_by": r, "admitted_in": v["view"]})
        for peer in v.get("removed") or ():
            if peer in members:  # a restart: its old incarnation removed, the new one admitted at once
                out.append({"peer": peer, "last_view": v["view"] - 1, "removed_by": v["view"],
                            "admitted_in": v["view"]})
            else:
                open_[peer] = v["view"]
    return sorted(out, key=lambda row: (row["admitted_in"], row["peer"]))


def describe(row: dict) -> str:
    """One line for the report: who, where it was cut off, where it was admitted again."""
    return (f"{row['peer']}: member until view {row['last_view']} (removed by view {row['removed_by']}), "
            f"admitted again in view {row['admitted_in']}; owed view {row['last_view']} up to its cut "
            f"and every view from {row['admitted_in']} on")
