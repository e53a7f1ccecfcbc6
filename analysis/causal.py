"""The causal order's check: pure ``DataFrame -> DataFrame`` transforms (docs/design/verifier.md, "Which
order, and what each order changes").

A causal run's message records carry ``vc``, the message's vector timestamp in its view: ``vc[q]`` is
how many of ``q``'s messages of the view its origin had delivered when it sent it, and for the
origin itself the message's own position among the origin's messages of the view
(docs/output-format.md). The rule checked at every peer ``p``, for every message ``m`` of view ``k``
that ``p`` delivered and every member ``q`` in ``vc_m``:

    #(q's messages of view k delivered at p before m)  >=  vc_m[q] - (1 if q is m's origin else 0)

Together with "no peer delivers a message twice" (:func:`analysis.checks.duplicates`) and "no two
messages of a view share an origin and a number" (:func:`analysis.checks.number_conflicts`), it
means exactly that ``p`` delivered ``m`` after the first ``vc_m[q]`` messages of every ``q`` -- every
message that happened before ``m``. Proof that the counted messages are the right ones: at one peer,
let ``x_1, x_2, ...`` be the numbers (``vc[q]``) of ``q``'s messages in the order delivered; the rule
for ``q`` itself says ``j - 1 >= x_j - 1``, so ``x_j <= j``; distinct positive integers with
``x_j <= j`` are ``1, 2, 3, ...``; so the first ``c`` of ``q``'s messages delivered at ``p`` are
``q``'s messages numbered ``1..c``.

The count is a running count, so the whole check is one window: no pairwise join of messages.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

VIOLATION_COLUMNS = ("peer", "view", "index", "clock", "pid", "member", "needed", "delivered")


def requirements(records: DataFrame) -> DataFrame:
    """Deliveries and what each one requires, in one frame keyed by ``(peer, view, origin)``.

    Per delivered message ``m`` at ``peer``: one *delivery* row (``origin`` = m's pid,
    ``is_need`` false) and one *need* row per member ``q`` of ``vc_m`` with ``needed`` =
    ``vc_m[q]`` (minus one for m's origin) >= 1 (``origin`` = q, ``is_need`` true). Both carry m's
    ``index, row, clock, pid``. Columns: ``peer, view, origin, index, row, is_need, needed, clock,
    pid``. No shuffle.
    """
    msgs = records.filter((F.col("kind") == "message") & F.col("vc").isNotNull()).select(
        "peer", "view", "index", "row", "clock", "pid", "vc")
    deliveries = msgs.select("peer", "view", F.col("pid").alias("origin"), "index", "row",
                             F.lit(False).alias("is_need"), F.lit(None).cast("long").alias("needed"),
                             "clock", "pid")
    own = F.when(F.col("member") == F.col("pid"), F.lit(1)).otherwise(F.lit(0))
    needs = (msgs.select("peer", "view", "index", "row", "clock", "pid",
                         F.explode("vc").alias("member", "count"))
             .select("peer", "view", F.col("member").alias("origin"), "index", "row",
                     F.lit(True).alias("is_need"), (F.col("count") - own).alias("needed"),
                     "clock", "pid")
             .filter(F.col("needed") >= 1))
    return deliveries.unionByName(needs)


def delivered_before(frame: DataFrame) -> Column:
    """Over :func:`requirements`: for a need row, how many of its ``origin``'s messages of the view
    the peer delivered before the message (index below the message's); for a delivery row, its
    position among its origin's messages of the view at that peer (itself included).

    A running count per ``(peer, view, origin)`` by ``index``, need rows sorted before the delivery
    row of the same index (m's own): one hash shuffle on those three columns and a sort.
    """
    w = (Window.partitionBy("peer", "view", "origin")
         .orderBy("index", F.col("is_need").desc(), "row")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return F.sum(F.when(F.col("is_need"), F.lit(0)).otherwise(F.lit(1))).over(w)


def causal_violations(records: DataFrame) -> DataFrame:
    """Every (peer, message m, member q) where the peer delivered m before q's ``needed``-th message
    of the view (the causal predecessor it overtook).

    Columns: ``peer, view, index, clock, pid`` (m and where the peer delivered it), ``member`` (q),
    ``needed`` (the predecessor's number among q's messages of the view: ``vc_m[q]``, minus one if q
    is m's origin), ``delivered`` (how many of q's messages of the view the peer had delivered before
    m: fewer than ``needed``). Empty on a correct causal run. One shuffle (see
    :func:`delivered_before`); linear in the deliveries times the members named in their ``vc``.
    """
    frame = requirements(records)
    counted = frame.select("*", delivered_before(frame).alias("delivered"))
    return (counted.filter(F.col("is_need") & (F.col("delivered") < F.col("needed")))
            .select("peer", "view", "index", "clock", "pid", F.col("origin").alias("member"),
                    "needed", "delivered"))


def wanted_messages(first: list[dict]) -> Column:
    """True on a JSON record (:func:`analysis.schema.read_records`) that names one of the messages of
    the ``first`` violations of :func:`causal_violations`: the message m itself (its ``clock, pid``)
    or the predecessor it overtook (``view``, ``pid`` = the member, ``vc[pid]`` = ``needed``)."""
    cond = F.lit(False)
    for v in first:
        cond = cond | ((F.col("clock") == v["clock"]) & (F.col("pid") == v["pid"]))
        cond = cond | ((F.col("view") == v["view"]) & (F.col("pid") == v["member"])
                       & (F.col("vc")[F.col("pid")] == v["needed"]))
    return (F.col("kind") == "message") & F.col("vc").isNotNull() & cond


def named_messages(read: DataFrame, first: list[dict]) -> DataFrame:
    """``view, clock, pid, number, text`` of the messages :func:`wanted_messages` selects, one row
    per message (from whichever peer's copy comes first). One scan, no shuffle of the input."""
    return (read.filter(wanted_messages(first))
            .select("view", "clock", "pid", F.col("vc")[F.col("pid")].alias("number"), "text")
            .groupBy("view", "clock", "pid")
            .agg(F.min("number").alias("number"), F.min("text").alias("text")))


def describe(first: list[dict], named: list[dict]) -> list[dict]:
    """The ``first`` violations with the message and the overtaken predecessor spelled out:
    ``peer, view, index, message {clock, pid, text}, overtook {clock, pid, text} | null,
    overtook_note, member, needed, delivered``."""
    by_key = {(n["clock"], n["pid"]): n for n in named}
    by_number = {(n["view"], n["pid"], n["number"]): n for n in named}
    out = []
    for v in first:
        m = by_key.get((v["clock"], v["pid"]), {})
        pred = by_number.get((v["view"], v["member"], v["needed"]))
        out.append({
            "peer": v["peer"], "view": v["view"], "index": v["index"],
            "message": {"clock": v["clock"], "pid": v["pid"], "text": m.get("text")},
            "overtook": pred and {"clock": pred["clock"], "pid": pred["pid"], "text": pred["text"]},
            "overtook_note": (f"message {v['needed']} of {v['member']} in view {v['view']}"
                              + ("" if pred else ": delivered by no peer")),
            "member": v["member"], "needed": v["needed"], "delivered": v["delivered"],
        })
    return out
