"""Which order a run used, from what its files say (docs/output-format.md, "What each order adds").

Every good record names an order (:func:`analysis.schema.order_claim`): a v2 view record its
``order``; a v2 message ``sequencer`` if it carries ``seq``, ``causal`` if it carries ``vc``,
``lamport`` if neither; a v1 record ``lamport``. A run uses one order, so every record of every file
must name the same one; if they do not, the run cannot be checked against any order and the verdict
is UNUSABLE INPUT with one line saying which files name which order.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.schema import ORDERS, display_path

FILES_NAMED = 3  # files listed per order in the disagreement line


@dataclass(frozen=True, slots=True)
class RunOrder:
    """The order to check (``None`` if the files disagree) and, if so, the one-line problem."""

    order: str | None
    problem: str | None = None


def claims_by_file(records: DataFrame) -> DataFrame:
    """``file, claims``: per input file, the distinct orders its good records name (small: one row
    per file)."""
    return records.groupBy("file").agg(F.array_sort(F.collect_set("claim")).alias("claims"))


def decide(claims: dict[str, list[str]]) -> RunOrder:
    """The run's order from ``{file: orders its records name}``.

    No claim at all (no record) is a Lamport run. One order named everywhere is the run's order.
    Anything else (two files naming different orders, or one file naming two) is a problem line:
    ``the files disagree about the order: lamport in a.jsonl; sequencer in b.jsonl, c.jsonl``.
    """
    named: dict[str, list[str]] = {}
    for file, orders in sorted(claims.items()):
        for order in orders or ():
            named.setdefault(order, []).append(display_path(file))
    if len(named) <= 1:
        return RunOrder(next(iter(named), "lamport"))
    parts = []
    for order in sorted(named, key=lambda o: ORDERS.index(o) if o in ORDERS else len(ORDERS)):
        files = named[order]
        shown = ", ".join(files[:FILES_NAMED])
        more = f" and {len(files) - FILES_NAMED} more" if len(files) > FILES_NAMED else ""
        parts.append(f"{order} in {shown}{more}")
    return RunOrder(None, "the files disagree about the order: " + "; ".join(parts))
