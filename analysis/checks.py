"""The verifier's checks: pure ``DataFrame -> DataFrame`` transforms, no action, no I/O.

Input conventions:

* ``records``: good records from :func:`analysis.schema.good_records` (columns ``file, row, kind,
  index, peer, clock, pid, host, port, view, delivered_at, sent_at, text_hash, members, removed,
  claim, seq, vc``). Events (messages and views) are identified by their key ``(clock, pid)`` in
  every order. A Lamport run totally orders them by ``(clock, host, port)`` -- host compared
  byte-wise, port as an integer (docs/output-format.md, "The order"); a sequencer run by ``(view,
  seq)`` (a view record is ``(view, 0)``); a causal run only partially (analysis/causal.py); a
  handout run by ``(clock, pid)`` with ``pid`` the ``from`` as written, compared as a string.
* ``messages``: the event table of :func:`event_table`, one row per key with the deliveries of every
  peer nested in an array; built with a single shuffle (by key) and meant to be cached.
* Gap records (a durable peer's, ``kind = "gap"``) are records but not events: only the order check
  and the durable check read them; every other check takes :func:`events`.

Every violation frame is empty on a correct run. See docs/design/verifier.md for why each check costs at most
one shuffle and why the pairwise check is linear in the data.
"""

from __future__ import annotations

import math

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.schema import GAP, HANDOUT, pid_host, pid_port

KEY = ("clock", "pid")
ORDER_KEY = ("clock", "host", "port")
QUANTILES = (0.5, 0.95, 0.99)
LAMPORT, SEQUENCER, CAUSAL = "lamport", "sequencer", "causal"
NON_UNIFORM = (SEQUENCER, CAUSAL)
"""Orders in which a member removed as failed may have delivered messages no survivor delivered."""


def order_key(order: str = LAMPORT) -> Column:
    """The total-order key of an event as one comparable struct: ``(clock, host, port)`` in a
    Lamport run, ``(view, seq)`` in a sequencer run. A causal run has none (see analysis/causal.py);
    its key orders only views against the messages of each view: ``(view, seq)`` with ``seq``
    null (first) for the view record, so that it is usable where a prefix is taken by view. A
    handout run's is ``(clock, pid)``, ``pid`` being the ``from`` as written: compared as a string,
    as the handout's Java tools compare it (``String.compareTo``)."""
    if order == SEQUENCER:
        return F.struct("view", "seq")
    if order == HANDOUT:
        return F.struct(*KEY)
    return F.struct(*ORDER_KEY)


def events(records: DataFrame) -> DataFrame:
    """The records that are events (messages and views): ``records`` without gap records."""
    return records.filter(F.col("kind") != GAP)


def gaps(records: DataFrame) -> DataFrame:
    """A durable peer's recorded gaps: ``file, peer, index, after_view, after_n, view, reason``
    (it lost the group's events after message ``after_n`` of ``after_view`` up to the record of
    ``view``)."""
    return (records.filter(F.col("kind") == GAP)
            .select("file", "peer", "index", "after_view", "after_n", "view", "reason"))


# --------------------------------------------------------------------------- the event table

def event_table(records: DataFrame, partitions: int | None = None) -> DataFrame:
    """One row per event key with its deliveries; exactly one shuffle (hash of the key).

    Columns: ``clock, pid, host, port, kind, view, sent_at, seq, seq_max, number, number_max,
    deliveries, duplicated, differs, caught_up_by``.
    ``deliveries`` is ``array<struct<peer, index, delivered_at, view>>`` sorted by (peer, index) with
    one element per peer that delivered the event (its first delivery there); ``duplicated`` is null
    unless some peer delivered the key more than once, and then holds every delivery; ``differs``
    lists the fields (kind, view, sent_at, text, seq, vc) on which copies of the event disagree.
    ``seq`` (sequencer runs) and ``number`` (causal runs: ``vc[pid]``, the message's position among
    its origin's messages of the view) are the least over the copies, ``*_max`` the greatest.
    ``caught_up_by``: the peers holding a caught-up copy (a restarted durable peer's catch-up), sorted.
    """
    vc_hash = F.xxhash64(F.array_sort(F.map_entries("vc")))
    number = F.col("vc")[F.col("pid")]
    by_key = records.repartition(*KEY) if partitions is None else records.repartition(partitions, *KEY)
    grouped = by_key.groupBy(*KEY).agg(
        F.first("host").alias("host"),
        F.first("port").alias("port"),
        F.min("kind").alias("kind"), F.max("kind").alias("kind_max"),
        F.min("view").alias("view"), F.max("view").alias("view_max"),
        F.min("sent_at").alias("sent_at"), F.max("sent_at").alias("sent_at_max"),
        F.min("text_hash").alias("hash_min"), F.max("text_hash").alias("hash_max"),
        F.min("seq").alias("seq"), F.max("seq").alias("seq_max"),
        F.count("seq").alias("seq_count"),
        F.min(F.when(F.col("vc").isNotNull(), vc_hash)).alias("vc_min"),
        F.max(F.when(F.col("vc").isNotNull(), vc_hash)).alias("vc_max"),
        F.count("vc").alias("vc_count"),
        F.min(number).alias("number"), F.max(number).alias("number_max"),
        F.count(F.lit(1)).alias("copies"),
        F.sort_array(F.collect_list(F.struct("peer", "index", "delivered_at", "view"))).alias("all"),
        F.array_sort(F.array_distinct(F.collect_list(
            F.when(F.coalesce(F.col("caught_up"), F.lit(False)), F.col("peer"))))).alias("caught_up_by"),
    )
    first_per_peer = F.filter(
        "all", lambda d, i: F.coalesce(F.get(F.col("all"), i - 1)["peer"] != d["peer"], F.lit(True)))
    differs = F.array_compact(F.array(
        F.when(F.col("kind") != F.col("kind_max"), F.lit("kind")),
        F.when(F.col("view") != F.col("view_max"), F.lit("view")),
        F.when(F.col("sent_at") != F.col("sent_at_max"), F.lit("sent_at")),
        F.when(F.col("hash_min") != F.col("hash_max"), F.lit("text")),
        F.when((F.col("seq") != F.col("seq_max"))
               | (F.col("seq_count").between(1, F.col("copies") - 1)), F.lit("seq")),
        F.when((F.col("vc_min") != F.col("vc_max"))
               | (F.col("vc_count").between(1, F.col("copies") - 1)), F.lit("vc")),
    ))
    return grouped.select(
        *KEY, "host", "port", "kind", "view", "sent_at", "seq", "seq_max", "number", "number_max",
        first_per_peer.alias("deliveries"),
        F.when(F.size(first_per_peer) != F.size("all"), F.col("all")).alias("duplicated"),
        differs.alias("differs"), "caught_up_by",
    )


def holders(messages: DataFrame) -> Column:
    """The peers that delivered each event (sorted)."""
    return F.transform("deliveries", lambda d: d["peer"])


# --------------------------------------------------------------------------- 1. duplicates

def duplicates(messages: DataFrame) -> DataFrame:
    """Events a peer delivered more than once: ``peer, clock, pid, index, again_index`` (one row per
    extra copy: ``index`` is the first delivery, ``again_index`` the repeated one)."""
    d = F.col("duplicated")
    again = F.filter(d, lambda x, i: F.coalesce(F.get(d, i - 1)["peer"] == x["peer"], F.lit(False)))
    return (messages.filter(d.isNotNull())
            .select(*KEY, "deliveries", F.explode(again).alias("x"))
            .select(F.col("x.peer").alias("peer"), *KEY,
                    F.get(F.filter("deliveries", lambda y: y["peer"] == F.col("x.peer")), 0)["index"]
                    .alias("index"),
                    F.col("x.index").alias("again_index")))


def conflicting_copies(messages: DataFrame) -> DataFrame:
    """Events whose copies disagree on kind, view, sent_at or text: ``clock, pid, differs``."""
    return messages.select(*KEY, "differs").filter(F.size("differs") > 0)


def number_conflicts(messages: DataFrame, order: str, max_listed: int = 5) -> DataFrame:
    """Distinct messages of one view sharing a number: the same ``seq`` in a sequencer run, the
    same origin and ``vc[origin]`` in a causal run (a number names one message: the sequence
    position, or the origin's n-th message of the view). Empty for a Lamport run.

    Columns: ``view, origin`` (null for the sequencer), ``number, messages, keys`` (the first
    ``max_listed`` ``(clock, pid)`` sorted). One shuffle of the (small) message events.
    """
    msgs = messages.filter(F.col("kind") == "message")
    # a message whose copies disagree on its number takes part under each of its least and greatest
    if order == SEQUENCER:
        numbered = msgs.filter(F.col("seq").isNotNull()).select(
            "view", F.lit(None).cast("string").alias("origin"),
            F.explode(F.array_distinct(F.array("seq", "seq_max"))).alias("number"), *KEY)
    elif order == CAUSAL:
        numbered = msgs.filter(F.col("number").isNotNull()).select(
            "view", F.col("pid").alias("origin"),
            F.explode(F.array_distinct(F.array("number", "number_max"))).alias("number"), *KEY)
    else:
        numbered = msgs.select("view", F.lit(None).cast("string").alias("origin"),
                               F.lit(None).cast("long").alias("number"), *KEY).limit(0)
    return (numbered.groupBy("view", "origin", "number")
            .agg(F.count(F.lit(1)).alias("messages"),
                 F.slice(F.sort_array(F.collect_list(F.struct(*KEY))), 1, max_listed).alias("keys"))
            .filter(F.col("messages") > 1))


# --------------------------------------------------------------------------- 2. order per peer

NOT_AFTER = {LAMPORT: "not after previous (clock, pid)", SEQUENCER: "not after previous (view, seq)",
             CAUSAL: "view record not after the previous view's events",
             HANDOUT: "not after previous (clock, from)"}
"""The order check's complaint, per order (each contains "not after": the job looks for it)."""


def order_violations(records: DataFrame, order: str = LAMPORT) -> DataFrame:
    """Per peer, by ``index``: every record whose key is not strictly above the previous record's,
    or whose index is not the previous index + 1 (first index must be 1).

    The key is :func:`order_key` of ``order``. A causal run has no total order: there a record is
    out of place only if its view is below the previous record's, or it is a view record not above
    the previous record's view (a view's record comes before its messages). A gap record (no key)
    takes its index and is judged by nothing else: the next record is compared with the event
    before it.
    Columns: ``peer, index, clock, pid, prev_index, prev_clock, prev_pid, problem``; ``problem`` is a
    ``"; "``-joined subset of ``first index is not 1``, ``index repeated``, ``index gap``,
    :data:`NOT_AFTER` of the order. One shuffle (hash of peer) and a sort.
    """
    w = Window.partitionBy("peer").orderBy("index", "row")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    event = F.col("kind") != GAP
    key = F.when(event, order_key(order))

    def prev(c):  # the previous event's (a gap record has no key)
        return F.last(F.when(event, c), ignorenulls=True).over(before)

    framed = records.select(
        "peer", "index", *KEY, "kind", "view", key.alias("key"),
        F.lag("index").over(w).alias("prev_index"), prev(order_key(order)).alias("prev_key"),
        prev(F.col("view")).alias("prev_view"),
        prev(F.col("clock")).alias("prev_clock"), prev(F.col("pid")).alias("prev_pid"),
    )
    if order == CAUSAL:
        out_of_place = event & ((F.col("view") < F.col("prev_view"))
                                | ((F.col("kind") == "view") & (F.col("view") <= F.col("prev_view"))))
    else:
        out_of_place = F.col("key") <= F.col("prev_key")
    problem = F.concat_ws("; ", F.array_compact(F.array(
        F.when(F.col("prev_index").isNull() & (F.col("index") != 1), F.lit("first index is not 1")),
        F.when(F.col("index") == F.col("prev_index"), F.lit("index repeated")),
        F.when(F.col("index") > F.col("prev_index") + 1, F.lit("index gap")),
        F.when(out_of_place, F.lit(NOT_AFTER[order])),
    )))
    return (framed.select("peer", "index", *KEY, "prev_index", "prev_clock", "prev_pid",
                          problem.alias("problem"))
            .filter(F.col("problem") != ""))


# --------------------------------------------------------------------------- the clock condition

SEND, DELIVERY = 0, 1
"""The two kinds of row of a file's timeline (:func:`clock_timeline`); at one time a send sorts
first, so it is after only the deliveries of strictly earlier times."""


def clock_timeline(records: DataFrame) -> DataFrame:
    """One peer's file as a timeline on its own wall clock: a *delivery* row per message it
    delivered live (``time`` its ``delivered_at``), a *send* row per message of its own (``pid`` is
    the file's peer) with a send time (``time`` its ``sent_at``). A caught-up record is left out of
    the deliveries (its ``delivered_at`` is when the peer caught it up, not when the group delivered
    it) but sends as any of its own messages; a record with no send time (a handout frame's) sends
    nothing. Columns: ``file, peer, time, side`` (:data:`SEND` or :data:`DELIVERY`), ``key``
    (:func:`order_key` of the Lamport order), ``index, clock, pid``. Narrow: no shuffle."""
    message = F.col("kind") == "message"
    live = message & ~F.coalesce(F.col("caught_up"), F.lit(False))
    own = message & (F.col("pid") == F.col("peer")) & F.col("sent_at").isNotNull()
    columns = ["file", "peer", order_key(LAMPORT).alias("key"), "index", *KEY]
    deliveries = records.filter(live).select(F.col("delivered_at").alias("time"), F.lit(DELIVERY).alias("side"),
                                             *columns)
    sends = records.filter(own).select(F.col("sent_at").alias("time"), F.lit(SEND).alias("side"), *columns)
    return deliveries.unionByName(sends)


def clock_condition(timeline: DataFrame) -> DataFrame:
    """The clock condition a file can decide (docs/design/verifier.md): a message a peer sent after it
    delivered m1 -- its ``sent_at`` strictly above m1's ``delivered_at``, both that peer's clock --
    must come after m1 in the Lamport order. Per send row of :func:`clock_timeline`, the greatest
    key the file delivered at a strictly earlier time (a running max over the file's timeline, a
    send sorting before a delivery of the same time); a violation where it is not below the sent
    message's. Columns: ``file, peer, index, clock, pid, sent_at`` (the message sent) and
    ``after_index, after_clock, after_pid, after_delivered_at`` (the greatest delivered before it).
    One shuffle (hash of file) and a sort."""
    w = (Window.partitionBy("file").orderBy("time", "side", "index")
         .rowsBetween(Window.unboundedPreceding, -1))
    delivered = F.when(F.col("side") == DELIVERY,
                       F.struct("key", F.col("index").alias("index"), F.col("clock").alias("clock"),
                                F.col("pid").alias("pid"), F.col("time").alias("delivered_at")))
    marked = timeline.select("*", F.max(delivered).over(w).alias("before"))
    return (marked.filter((F.col("side") == SEND) & (F.col("before.key") >= F.col("key")))
            .select("file", "peer", "index", *KEY, F.col("time").alias("sent_at"),
                    F.col("before.index").alias("after_index"), F.col("before.clock").alias("after_clock"),
                    F.col("before.pid").alias("after_pid"),
                    F.col("before.delivered_at").alias("after_delivered_at")))


# --------------------------------------------------------------------------- 3. FIFO per origin

def fifo_reorders(records: DataFrame) -> DataFrame:
    """Messages a peer delivered before an earlier-sent message of the same origin.

    Per (peer, origin) by ``index``, clocks must strictly increase. Columns: ``peer, origin, index,
    clock, prev_index, prev_clock``. Implied by :func:`order_violations` being empty for that peer.
    """
    w = Window.partitionBy("peer", "pid").orderBy("index", "row")
    return (records.filter(F.col("kind") == "message")
            .select("peer", F.col("pid").alias("origin"), "index", "clock",
                    F.lag("index").over(w).alias("prev_index"),
                    F.lag("clock").over(w).alias("prev_clock"))
            .filter(F.col("clock") <= F.col("prev_clock")))


def fifo_gaps(records: DataFrame, missing: DataFrame, max_listed: int = 10) -> DataFrame:
    """Runs of an origin's messages a peer skipped while delivering that origin's messages around them.

    ``missing``: ``peer, clock, pid`` of messages a peer should have delivered and did not (from
    :func:`missing_deliveries`). A missing message is a gap at that peer iff the peer delivered a
    message of the same origin with a lower clock and one with a higher clock. Columns: ``peer,
    origin, after_clock, before_clock, missing, missing_clocks`` (first ``max_listed`` clocks).
    Only the (peer, origin) pairs with something missing are scanned.
    """
    absent = missing.select("peer", "pid", "clock", F.lit(False).alias("present"))
    affected = F.broadcast(absent.select("peer", "pid").distinct())
    present = (records.filter(F.col("kind") == "message")
               .join(affected, ["peer", "pid"], "left_semi")
               .select("peer", "pid", "clock", F.lit(True).alias("present")))
    w = Window.partitionBy("peer", "pid").orderBy("clock", F.col("present").desc())
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    after = w.rowsBetween(1, Window.unboundedFollowing)
    present_clock = F.when(F.col("present"), F.col("clock"))
    framed = present.unionByName(absent).select(
        "peer", "pid", "clock", "present",
        F.max(present_clock).over(before).alias("after_clock"),
        F.min(present_clock).over(after).alias("before_clock"),
    )
    return (framed.filter(~F.col("present") & F.col("after_clock").isNotNull()
                          & F.col("before_clock").isNotNull())
            .groupBy("peer", F.col("pid").alias("origin"), "after_clock", "before_clock")
            .agg(F.count(F.lit(1)).alias("missing"),
                 F.slice(F.sort_array(F.collect_list("clock")), 1, max_listed).alias("missing_clocks")))


# --------------------------------------------------------------------------- 4. agreement

def _view_rows(lists: Column) -> list[Column]:
    """``members, removed, variants`` from an array of distinct ``(members, removed)`` structs."""
    least = F.array_min(lists)
    return [least["members"].alias("members"), least["removed"].alias("removed"),
            F.size(lists).alias("variants")]


def view_members(records: DataFrame) -> DataFrame:
    """Each view as recorded by ``kind="view"`` records: ``view, members, removed, variants``.

    A view record with ``view = k`` installs view ``k``: its ``members`` are view k's, its ``removed``
    the members of view k - 1 that crashed during k - 1 (docs/output-format.md). ``variants`` > 1
    means peers recorded different members or removed lists for the same view (the least is shown).
    """
    lists = F.collect_set(F.struct(F.array_sort("members").alias("members"), "removed"))
    return (records.filter(F.col("kind") == "view").groupBy("view").agg(lists.alias("lists"))
            .select("view", *_view_rows(F.col("lists"))))


def _everyone(peers: list[str]) -> Column:
    return F.array(*[F.lit(p) for p in sorted(peers)]) if peers else F.array().cast("array<string>")


def view_recipients(views: DataFrame) -> DataFrame:
    """Per view ``k`` with a view record: ``view, members, crashed, required``.

    ``crashed``: members of k that view k + 1 lists in ``removed`` (they crashed during k);
    ``required``: the others, who must deliver every message of view k. A peer that left at k + 1 is
    not crashed: it delivers all of view k. Small (one row per view).
    """
    nxt = views.select((F.col("view") - 1).alias("view"), F.col("removed").alias("_removed"))
    crashed = F.array_intersect("members", F.coalesce("_removed", F.array().cast("array<string>")))
    return (views.join(nxt, "view", "left")
            .select("view", "members", crashed.alias("crashed"),
                    F.array_except("members", crashed).alias("required")))


def unsettled_views(views: DataFrame) -> DataFrame:
    """``view, peer``: the members removed as failed at ``view + 1`` in a view whose coordinator (its
    least member in pid order, the sequencer) was removed too.

    In the sequencer order the survivors then settle the numbers that died with the coordinator
    themselves, so such a member's last view may hold other numbers, or another order, than the
    survivors' (docs/output-format.md, "Uniformity"): its messages of that view are held only to
    its own file's order, not compared with anyone's. Small (one row per such member).
    """
    as_key = F.transform("members", lambda m: F.struct(pid_host(m).alias("host"),
                                                       pid_port(m).alias("port"), m.alias("pid")))
    return (view_recipients(views)
            .select("view", "crashed", F.array_min(as_key)["pid"].alias("coordinator"))
            .filter(F.array_contains("crashed", F.col("coordinator")))
            .select("view", F.explode("crashed").alias("peer")))


def crash_points(messages: DataFrame, views: DataFrame, order: str = LAMPORT) -> DataFrame:
    """``view, peer, last``: per member that crashed during ``view``, the order key (as
    :func:`order_key` of ``order``, a total order) of the last event it delivered in that view (null
    if none).

    A peer delivers in the total order, so what it delivered before crashing is every event of the
    view up to ``last``; after ``last`` it owes nothing. Only crashed peers' deliveries are scanned.
    """
    crashed = (view_recipients(views).select("view", F.explode("crashed").alias("peer")))
    delivered = messages.select("view", order_key(order).alias("key"),
                                F.explode(holders(messages)).alias("peer"))
    last = (delivered.join(F.broadcast(crashed), ["view", "peer"], "left_semi")
            .groupBy("view", "peer").agg(F.max("key").alias("last")))
    return crashed.join(last, ["view", "peer"], "left")


def expected_recipients(messages: DataFrame, views: DataFrame, peers: list[str],
                        order: str = LAMPORT) -> DataFrame:
    """``messages`` plus ``expected`` (the peers that must deliver each message) and ``allowed``
    (the peers that may).

    Static group (no view records): every peer in ``peers``, for both. Dynamic group, a message of
    view ``k``: ``allowed`` are the members of view k; ``expected`` are those members except the ones
    view k + 1 removed (crashed during k) whose last delivery in view k comes before the message in
    the total order -- a crashed peer owes the prefix of view k it lived through, nothing after.
    A view without a view record falls back to ``peers``. View events get nulls (their recipients are
    not checked).

    Non-uniform orders (:data:`NON_UNIFORM`, docs/output-format.md "Uniformity"): a message of view
    k that no required member of k (one that stays in k + 1) delivered is an extra of crashed
    members, and the required members owe it nothing. A sequencer run keeps the prefix rule above,
    in ``(view, seq)`` order (a crashed member that delivered seq 7 owes the survivors' seq 1..6); a
    causal run has no total order, so a crashed member owes nothing at all: whatever it delivered
    is held to the causal check instead.

    A handout run (a static group, no view record) is :func:`cut_short_recipients`.
    """
    if order == HANDOUT:
        return cut_short_recipients(messages, peers)
    everyone = _everyone(peers)
    no_one = F.array().cast("array<string>")
    roles = view_recipients(views).select(F.col("view").alias("_view"), F.col("members").alias("_members"),
                                          F.col("crashed").alias("_crashed"))
    if order != CAUSAL:
        points = crash_points(messages, views, order).groupBy("view").agg(
            F.collect_list(F.struct("peer", "last")).alias("_points"))
        roles = roles.join(points.withColumnRenamed("view", "_view"), "_view", "left")
    known = F.broadcast(roles)
    joined = messages.join(known, messages["view"] == known["_view"], "left")
    allowed = F.coalesce(F.col("_members"), everyone)
    if order == CAUSAL:
        excused = F.coalesce(F.col("_crashed"), no_one)
    else:
        key = order_key(order)
        excused = F.coalesce(F.transform(
            F.filter("_points", lambda c: ~F.coalesce(c["last"] >= key, F.lit(False))),
            lambda c: c["peer"]), no_one)
    owed = F.array_except(allowed, excused)
    if order in NON_UNIFORM:
        required = F.array_except(allowed, F.coalesce(F.col("_crashed"), no_one))
        by_required = F.arrays_overlap(holders(messages), required)
        owed = F.when(by_required, owed).otherwise(F.array_except(owed, required))
    is_message = F.col("kind") == "message"
    return joined.select(*messages.columns,
                         F.when(is_message, owed).alias("expected"),
                         F.when(is_message, allowed).alias("allowed"))


def cut_short_recipients(messages: DataFrame, peers: list[str], order: str = HANDOUT) -> DataFrame:
    """``messages`` plus ``expected`` and ``allowed`` for a static group whose files may each be cut
    short (a class's tools stopped at any time): every peer may deliver every message, and owes the
    messages up to its own last delivery in the total order (:func:`order_key` of ``order``),
    nothing after it.

    So a file that is a prefix of the common order misses nothing, while a message missing before a
    file's last one (a gap) is missing. One small aggregate (a row per peer), broadcast.
    """
    everyone = _everyone(peers)
    key = order_key(order)
    last = (messages.select(key.alias("key"), F.explode(holders(messages)).alias("peer"))
            .groupBy("peer").agg(F.max("key").alias("last"))
            .agg(F.collect_list(F.struct("peer", "last")).alias("_points")))
    excused = F.transform(F.filter("_points", lambda c: c["last"] < key), lambda c: c["peer"])
    is_message = F.col("kind") == "message"
    return messages.crossJoin(F.broadcast(last)).select(
        *messages.columns,
        F.when(is_message, F.array_except(everyone, excused)).alias("expected"),
        F.when(is_message, everyone).alias("allowed"))


def departures(records: DataFrame, messages: DataFrame, order: str = HANDOUT,
               max_listed: int = 3) -> DataFrame:
    """Per peer whose file is not a prefix of the common order, its first departure from it.

    The common order is every message of the run sorted by :func:`order_key` of ``order``; a file
    is a prefix of it iff its record at every ``index`` i is the common order's i-th message. The
    first index where not: ``peer, index, clock, pid`` (what it has there), ``file, block_start,
    row`` (to name the line), ``expected_clock, expected_pid`` (the message that belongs there;
    null past the end) and ``as_in`` (the first ``max_listed`` peers that have it there).

    A gap, a swap, a duplicate and an extra message all depart; a file cut short does not. The
    ranks take one sort of the distinct messages in a single partition: meant for a class's
    runs (handout runs), which are small.
    """
    ranked = (messages.filter(F.col("kind") == "message")
              .select(*KEY, F.row_number().over(Window.orderBy(order_key(order))).alias("position")))
    placed = records.filter(F.col("kind") == "message").join(ranked, list(KEY))
    first = (placed.filter(F.col("index") != F.col("position"))
             .groupBy("peer").agg(F.min_by(F.struct("index", *KEY, "file", "block_start", "row"),
                                           F.col("index")).alias("at"))
             .select("peer", "at.*"))
    expected = ranked.select(F.col("position").alias("index"), F.col("clock").alias("expected_clock"),
                             F.col("pid").alias("expected_pid"))
    there = (placed.filter(F.col("index") == F.col("position"))
             .select("index", F.col("clock").alias("expected_clock"),
                     F.col("pid").alias("expected_pid"), F.col("peer").alias("_holder")))
    return (first.join(expected, "index", "left")
            .join(there, ["index", "expected_clock", "expected_pid"], "left")
            .groupBy("peer", "index", *KEY, "file", "block_start", "row", "expected_clock",
                     "expected_pid")
            .agg(F.slice(F.array_sort(F.collect_list("_holder")), 1, max_listed).alias("as_in")))


def messages_per_peer(messages: DataFrame) -> DataFrame:
    """``peer, messages``: how many distinct messages each peer delivered (a row per peer)."""
    return (messages.filter(F.col("kind") == "message")
            .select(F.explode(holders(messages)).alias("peer"))
            .groupBy("peer").agg(F.count(F.lit(1)).alias("messages")))


def agreement(expected: DataFrame) -> DataFrame:
    """Messages not delivered by exactly their expected recipients.

    Input: :func:`expected_recipients`. Columns: ``clock, pid, view, delivered_by, missing,
    unexpected`` (``missing``: expected peers that did not deliver it; ``unexpected``: peers that
    delivered it without being allowed to). A caught-up copy (``caught_up_by``) counts as a
    delivery and is never unexpected: a restarted durable peer catches up views it was not in.
    """
    got = holders(expected)
    unexpected = F.array_except(got, "allowed")
    if "caught_up_by" in expected.columns:
        unexpected = F.array_except(unexpected, F.coalesce("caught_up_by", F.array().cast("array<string>")))
    return (expected.filter(F.col("kind") == "message")
            .select(*KEY, "view", F.size(got).alias("delivered_by"),
                    F.array_except("expected", got).alias("missing"),
                    unexpected.alias("unexpected"))
            .filter((F.size("missing") > 0) | (F.size("unexpected") > 0)))


def missing_deliveries(violations: DataFrame) -> DataFrame:
    """One row ``peer, clock, pid`` per (peer, message) from :func:`agreement`'s ``missing``."""
    return violations.select(F.explode("missing").alias("peer"), *KEY)


# --------------------------------------------------------------------------- 5. pairwise order

def set_differences(messages: DataFrame, peers: list[str]) -> DataFrame:
    """``peer_a, peer_b, only_a``: how many events A delivered that B did not (only non-zero rows).

    Rows are generated only for events some peer lacks, so a complete run costs one scan.
    """
    everyone = _everyone(peers)
    got = holders(messages)
    lacking = F.array_except(everyone, got)
    return (messages.filter(F.size(lacking) > 0)
            .select(F.explode(got).alias("peer_a"), lacking.alias("lacking"))
            .select("peer_a", F.explode("lacking").alias("peer_b"))
            .groupBy("peer_a", "peer_b").agg(F.count(F.lit(1)).alias("only_a")))


def _pair_rows(messages: DataFrame) -> DataFrame:
    """One row per event and pair of peers (a < b) that both delivered it: ``peer_a, peer_b,
    clock, pid, index_a, index_b`` (first delivery at each)."""
    pairs = F.flatten(F.transform(
        "deliveries",
        lambda x: F.transform(
            F.filter("deliveries", lambda y: y["peer"] > x["peer"]),
            lambda y: F.struct(x["peer"].alias("peer_a"), y["peer"].alias("peer_b"),
                               x["index"].alias("index_a"), y["index"].alias("index_b")))))
    return messages.select(*KEY, F.inline(pairs))


def _first_by_rank(rows: DataFrame, rank_a: str, rank_b: str) -> DataFrame:
    """Reduce pair rows with ranks to the first divergence per pair.

    Sequences of common events at A and at B first differ at rank r iff r is the least rank (at
    either peer) of an event whose two ranks differ; the event A has at r is then the differing
    event with least rank at A, and likewise for B. Partial aggregation keeps this a small shuffle.
    """
    differing = rows.filter(F.col(rank_a) != F.col(rank_b))
    at = lambda side, rank: F.min_by(  # noqa: E731
        F.struct(F.col("clock"), F.col("pid"), F.col(f"index_{side}").alias("index")), F.col(rank))
    return differing.groupBy("peer_a", "peer_b").agg(
        F.min(rank_a).alias("position"),
        at("a", rank_a).alias("at_a"),
        at("b", rank_b).alias("at_b"),
        F.count(F.lit(1)).alias("displaced"),
    )


def divergences_by_index(messages: DataFrame, skip_pairs: list[tuple[str, str]] = ()) -> DataFrame:
    """First divergence per pair, using each peer's ``index`` as its rank.

    Valid for a pair whose two peers delivered the same set of events, each exactly once, with indexes
    exactly 1..n (:func:`first_divergences` sends every other pair to :func:`divergences_by_rank`).
    Only events not delivered at the same index everywhere generate rows: no sort, no join.
    Columns: ``peer_a, peer_b, position, at_a, at_b, displaced`` (``at_*`` = ``struct<clock, pid,
    index>`` delivered at ``position`` by that peer; ``displaced`` = common events at different ranks).
    """
    idx = F.transform("deliveries", lambda d: d["index"])
    rows = _pair_rows(messages.filter(F.array_min(idx) != F.array_max(idx)))
    rows = rows.withColumn("rank_a", F.col("index_a")).withColumn("rank_b", F.col("index_b"))
    for a, b in skip_pairs:
        rows = rows.filter(~((F.col("peer_a") == a) & (F.col("peer_b") == b)))
    return _first_by_rank(rows, "rank_a", "rank_b")


def divergences_by_rank(messages: DataFrame, pairs: list[tuple[str, str]] | None = None) -> DataFrame:
    """First divergence per pair, ranking each event among the events both peers delivered.

    Exact for any pair (missing events, duplicates, index gaps): rank at A = row number by A's
    index among the pair's common events. Costs one shuffle by pair and two sorts over the common
    events of the requested ``pairs`` (all pairs if None). Same columns as
    :func:`divergences_by_index`.
    """
    rows = _pair_rows(messages)
    if pairs is not None:
        wanted = F.lit(False)
        for a, b in pairs:
            wanted = wanted | ((F.col("peer_a") == a) & (F.col("peer_b") == b))
        rows = rows.filter(wanted)
    by_pair = Window.partitionBy("peer_a", "peer_b")
    rows = rows.select(
        "*",
        F.row_number().over(by_pair.orderBy("index_a", "clock", "pid")).alias("rank_a"),
        F.row_number().over(by_pair.orderBy("index_b", "clock", "pid")).alias("rank_b"),
    )
    return _first_by_rank(rows, "rank_a", "rank_b")


def first_divergences(messages: DataFrame, exact_pairs: list[tuple[str, str]]) -> DataFrame:
    """First divergence of every pair of peers: ranks for ``exact_pairs``, indexes for the others."""
    fast = divergences_by_index(messages, exact_pairs)
    if not exact_pairs:
        return fast
    return fast.unionByName(divergences_by_rank(messages, exact_pairs))


# --------------------------------------------------------------------------- 5b. durable peers
#
# A durable peer (``tom peer --data``) killed and restarted catches up what the group delivered while
# it was away, so its one file, read from start to end across its restarts, holds a stretch of the
# group's order: every event from its first record to its last, once each, in order, except across
# a recorded gap (docs/output-format.md, "Durable peers").

def durable_files(records: DataFrame) -> DataFrame:
    """``file, peer``: the files holding a view record with ``durable`` (a durable peer's)."""
    return (records.filter((F.col("kind") == "view") & F.col("durable"))
            .select("file", "peer").distinct())


def group_order(messages: DataFrame) -> DataFrame:
    """Every event of the run at its place in the group's (Lamport) order: views by increasing id,
    within a view its record first, then its messages by ``(clock, host, port)``.

    Columns: ``clock, pid, kind, view, position`` (1-based, over the whole run) and ``nth`` (0 for
    a view record, n for the view's n-th message). ``messages``: the event table. The positions are
    one sort of the distinct events in a single partition (a window without partitioning).
    """
    key = [F.col("view"), (F.col("kind") == "message").alias("_msg"), *[F.col(c) for c in ORDER_KEY]]
    in_view = (Window.partitionBy("view").orderBy(*key)
               .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return messages.select(
        *KEY, "kind", "view",
        F.row_number().over(Window.orderBy(*key)).alias("position"),
        F.sum((F.col("kind") == "message").cast("long")).over(in_view).alias("nth"))


def durable_deliveries(records: DataFrame, durable: DataFrame, group: DataFrame) -> DataFrame:
    """``file, peer, index, clock, pid, position``: each event record of a durable file
    (``durable``: :func:`durable_files`) with its place in the group's order (:func:`group_order`)."""
    return (events(records).join(F.broadcast(durable.select("file")), "file", "left_semi")
            .join(group.select(*KEY, "position"), list(KEY))
            .select("file", "peer", "index", *KEY, "position"))


def durable_holes(group: DataFrame, placed: DataFrame, recorded: DataFrame) -> DataFrame:
    """Events of the group's order missing from a durable file within its stretch (from its first
    record to its last), runs of them grouped by where they belong.

    ``placed``: :func:`durable_deliveries`; ``recorded``: :func:`gaps` (an event between a gap's
    ``after`` and its view's record is excused: the gap says it was lost). Columns: ``file, peer,
    index`` (the file's record that the missing run precedes), ``clock, pid, kind, view`` (the run's
    first missing event) and ``events`` (how many are missing there). Rows scale with the durable
    files times the group's events in their stretches.
    """
    stretch = placed.groupBy("file", "peer").agg(F.min("position").alias("_lo"),
                                                 F.max("position").alias("_hi"))
    owed = (group.join(F.broadcast(stretch),
                       group["position"].between(F.col("_lo"), F.col("_hi")))
            .drop("_lo", "_hi"))
    present = placed.groupBy("file", *KEY).agg(F.min("index").alias("index"))
    after = (Window.partitionBy("file").orderBy("position")
             .rowsBetween(1, Window.unboundedFollowing))
    framed = (owed.join(present, ["file", *KEY], "left")
              .select("*", F.min("index").over(after).alias("_next")))
    excused = F.broadcast(recorded.select(
        F.col("file").alias("_gf"), F.col("after_view").alias("_av"), F.col("after_n").alias("_an"),
        F.col("view").alias("_gv")))
    lost = ((F.col("view") > F.col("_av")) | ((F.col("view") == F.col("_av")) & (F.col("nth") > F.col("_an")))) \
        & (F.col("view") < F.col("_gv"))
    missing = framed.filter(F.col("index").isNull())
    missing = missing.join(excused, (F.col("file") == F.col("_gf")) & lost, "left_anti")
    return (missing.groupBy("file", "peer", F.col("_next").alias("index"))
            .agg(F.min_by(F.struct(*KEY, "kind", "view"), F.col("position")).alias("_first"),
                 F.count(F.lit(1)).alias("events"))
            .select("file", "peer", "index", "_first.*", "events"))


def durable_repeats(placed: DataFrame) -> DataFrame:
    """Events a durable file holds more than once: ``file, peer, index`` (the repeat),
    ``clock, pid, first_index`` (where it came first); one row per extra copy."""
    w = Window.partitionBy("file", *KEY).orderBy("index")
    return (placed.select("file", "peer", "index", *KEY, F.first("index").over(w).alias("first_index"))
            .filter(F.col("index") != F.col("first_index")))


def misplaced_gaps(records: DataFrame) -> DataFrame:
    """Gap records not followed, in their file, by the record of the view they name: ``file, peer,
    index`` (the gap's), ``view`` (the view named), ``clock, pid`` (the record that follows it, null
    if none)."""
    recorded = gaps(records).select("file", "peer", "index", "view")
    following = events(records).select(
        "file", (F.col("index") - 1).alias("index"), *KEY, F.col("kind").alias("_kind"),
        F.col("view").alias("_view"))
    fits = (F.col("_kind") == "view") & (F.col("_view") == F.col("view"))
    return (recorded.join(following, ["file", "index"], "left")
            .filter(~F.coalesce(fits, F.lit(False)))
            .select("file", "peer", "index", "view", *KEY))


def durable_violations(records: DataFrame, messages: DataFrame) -> DataFrame:
    """Every durable file's departures from the group's order (Lamport): ``file, peer, index,
    problem`` (``missing``, ``repeated`` or ``misplaced gap``), ``clock, pid, view, events,
    first_index`` (:func:`durable_holes`, :func:`durable_repeats`, :func:`misplaced_gaps`). Empty
    when no file is durable and no gap is misplaced."""
    group = group_order(messages)
    durable = durable_files(records)
    placed = durable_deliveries(records, durable, group)
    holes = durable_holes(group, placed, gaps(records)).select(
        "file", "peer", "index", F.lit("missing").alias("problem"), *KEY, "view", "events",
        F.lit(None).cast("long").alias("first_index"))
    repeats = durable_repeats(placed).join(group.select(*KEY, "view"), list(KEY)).select(
        "file", "peer", "index", F.lit("repeated").alias("problem"), *KEY, "view",
        F.lit(1).cast("long").alias("events"), "first_index")
    misplaced = misplaced_gaps(records).select(
        "file", "peer", "index", F.lit("misplaced gap").alias("problem"), *KEY, "view",
        F.lit(0).cast("long").alias("events"), F.lit(None).cast("long").alias("first_index"))
    return holes.unionByName(repeats).unionByName(misplaced)


# --------------------------------------------------------------------------- 6. latency

def latencies(records: DataFrame) -> DataFrame:
    """``peer, latency`` (seconds, ``delivered_at - sent_at``) of every delivered message but the
    caught-up ones (their ``delivered_at`` is the catch-up's time, not the delivery's)."""
    return (records.filter((F.col("kind") == "message")
                           & ~F.coalesce(F.col("caught_up"), F.lit(False)))
            .select("peer", (F.col("delivered_at") - F.col("sent_at")).alias("latency")))


def latency_summary(latency: DataFrame) -> DataFrame:
    """Per peer and overall (``peer`` null): ``count, min, mean, p50, p95, p99, max`` in seconds.

    One aggregation (rollup); percentiles are approximate (``percentile_approx``).
    """
    q = F.percentile_approx("latency", list(QUANTILES), 10000)
    return (latency.rollup("peer")
            .agg(F.count("latency").alias("count"), F.min("latency").alias("min"),
                 F.avg("latency").alias("mean"), q.alias("q"), F.max("latency").alias("max"))
            .select("peer", "count", "min", "mean", F.col("q")[0].alias("p50"),
                    F.col("q")[1].alias("p95"), F.col("q")[2].alias("p99"), "max"))


def latency_histogram(latency: DataFrame, low: float, high: float, bins: int) -> DataFrame:
    """``bin, count``: ``bins`` equal bins over [low, high); values >= high count in bin ``bins``.
    A message without a latency (a handout run's: no send time) is in no bin."""
    width = (high - low) / bins if high > low else 1.0
    b = F.floor((F.col("latency") - F.lit(low)) / F.lit(width)).cast("int")
    clamped = F.greatest(F.lit(0), F.least(F.lit(bins), b))
    return (latency.filter(F.col("latency").isNotNull())
            .groupBy(clamped.alias("bin")).agg(F.count(F.lit(1)).alias("count")))


# --------------------------------------------------------------------------- picture

def first_events(messages: DataFrame, n: int) -> DataFrame:
    """The first ``n`` messages in the total order (a bounded top-n, for the space-time diagram)."""
    return (messages.filter(F.col("kind") == "message")
            .orderBy(*ORDER_KEY)
            .limit(n)
            .select(*KEY, "host", "port", "sent_at", "deliveries"))


# --------------------------------------------------------------------------- fast path: one pass
#
# A healthy run is proven by small aggregates of one pass over the narrow rows of
# analysis.schema.narrow_records (see docs/design/verifier.md, "The fast path"):
# * every peer's keys strictly increase with its index, indexes 1..n  (one shuffle of narrow rows);
# * per view, every expected recipient holds the same multiset of messages (fingerprints).
# Together they imply every other check; any failure sends the run to the exact checks above.

LATENCY_GAMMA = 1.01   # log-scale latency bins: relative error of a bin's value <= 0.5 %
_BIN_OFFSET = 3000     # keeps bins of latencies down to 1e-9 s positive


def key_after(clock: Column, pid: Column, prev_clock: Column, prev_pid: Column) -> Column:
    """``(clock, pid) > (prev_clock, prev_pid)`` in the total order; host/port are only split off
    for equal clocks (``when`` is lazy)."""
    host, prev_host = pid_host(pid), pid_host(prev_pid)
    return (F.when(clock != prev_clock, clock > prev_clock)
            .when(host != prev_host, host > prev_host)
            .otherwise(pid_port(pid) > pid_port(prev_pid)))


def order_marks(narrow: DataFrame, order: str = LAMPORT) -> DataFrame:
    """``narrow`` plus ``disorder`` and ``index_fault`` per good row, by (index, row) within its peer.

    ``disorder``: the key is not above the previous record's (the Lamport order's ``(clock, host,
    port)``, :func:`key_after`; the handout's ``(clock, from as written)``, :func:`order_key`);
    ``index_fault``: the index is not the previous one + 1 (or, first, not 1). One shuffle (hash of
    peer) of narrow rows and a sort. The three ``lag`` columns are named once: written inside
    ``key_after`` they would be three window functions per use (eleven in all), each copying its
    column for every row. The sequencer and causal orders' marks are the scan's only
    (:func:`order_marks_in_scan`).
    """
    if order not in (LAMPORT, HANDOUT):
        raise ValueError(f"no window marks for the {order} order")
    good = F.col("problem").isNull()
    w = Window.partitionBy("peer", good).orderBy("index", "row")
    lagged = narrow.select("*", *[F.lag(c).over(w).alias(f"_prev_{c}") for c in ("clock", "pid", "index")])
    prev_clock, prev_pid, prev_index = (F.col(f"_prev_{c}") for c in ("clock", "pid", "index"))
    clock, pid = F.col("clock"), F.col("pid")
    after = (key_after(clock, pid, prev_clock, prev_pid) if order == LAMPORT else
             (clock > prev_clock) | ((clock == prev_clock) & (pid > prev_pid)))
    return lagged.select(
        *narrow.columns,
        (good & prev_clock.isNotNull() & ~after).alias("disorder"),
        (good & (F.coalesce(prev_index, F.lit(0)) + 1 != F.col("index"))).alias("index_fault"),
    )


def order_marks_in_scan(narrow: DataFrame, order: str = LAMPORT) -> DataFrame:
    """:func:`order_marks` with no shuffle: each good row compared with the previous good row its
    task read from the same file, by the JVM function ``tom_order_mark`` (:mod:`analysis.order_mark`,
    whose source states when a row is left unmarked).

    Stricter than :func:`order_marks`: rows out of file order, a file holding two peers, or a file's
    good rows read by two tasks are marked (``index_fault``) even where sorting by index would hide
    it; so a healthy run is unmarked only while each file is read whole by one task
    (:func:`analysis.order_mark.whole_files`). Equal to :func:`order_marks` on an unmarked run only if
    each peer's records are in one file: the caller checks that. A mark only sends the run to the
    exact checks.

    ``order`` picks the function: the Lamport order's key, or the sequencer's ``(view, seq)`` and
    the causal order's running counts (each with its origins' clocks increasing, so no message
    twice at a peer: ``OrderMark.java``). Only the Lamport marks have a window twin
    (:func:`order_marks`).
    """
    from analysis.order_mark import DISORDER, FUNCTIONS

    # a gap record has no key: left out here, it marks the next record's index (the exact checks
    # judge a run with durable records in any case)
    good = F.col("problem").isNull() & F.coalesce(F.col("kind") != GAP, F.lit(True))
    row = ["file", "block_start", "peer", good, "index", "clock", "pid"]
    numbered = {SEQUENCER: ["kind", "view", "seq"], CAUSAL: ["kind", "view", "vc"]}
    mark = F.call_function(FUNCTIONS[order], *row, *numbered.get(order, []))
    marked = narrow.select("*", mark.alias("_mark"))
    return marked.select(
        *narrow.columns,
        (F.col("_mark").bitwiseAND(DISORDER) != 0).alias("disorder"),
        (F.col("_mark").bitwiseAND(~DISORDER) != 0).alias("index_fault"),
    )


def latency_bin(latency: Column) -> Column:
    """Log-scale bin of a latency: ``sign * (ceil(log_gamma |x|) + offset)``, 0 for ``|x| < 1e-9``."""
    mag = F.abs(latency)
    b = F.ceil(F.log(mag) / math.log(LATENCY_GAMMA)).cast("int") + _BIN_OFFSET
    return F.when(mag < 1e-9, F.lit(0)).otherwise(F.signum(latency).cast("int") * F.greatest(F.lit(1), b))


def latency_bin_py(latency: float) -> int:
    """:func:`latency_bin` of one value, in Python (for tests and the driver)."""
    mag = abs(latency)
    if mag < 1e-9:
        return 0
    b = math.ceil(math.log(mag) / math.log(LATENCY_GAMMA)) + _BIN_OFFSET
    return (1 if latency > 0 else -1) * max(1, b)


def bin_value(b: int) -> float:
    """The representative latency of bin ``b`` (the midpoint of its range, relatively)."""
    if b == 0:
        return 0.0
    top = LATENCY_GAMMA ** (abs(b) - _BIN_OFFSET)
    return (1 if b > 0 else -1) * 2 * top / (1 + LATENCY_GAMMA)


FINGERPRINT = ("messages", "hash_lo", "hash_hi", "hash2")


def fingerprint_sums(msg: Column) -> list[Column]:
    """``hash_lo, hash_hi, hash2`` over the rows where ``msg`` holds: exact sums of the 32-bit halves
    of ``content_hash`` and of ``content_hash2`` -- with the count, a multiset fingerprint."""
    h = F.col("content_hash")
    return [F.sum(F.when(msg, h.bitwiseAND(0xFFFFFFFF))).alias("hash_lo"),
            F.sum(F.when(msg, F.shiftrightunsigned(h, 32))).alias("hash_hi"),
            F.sum(F.when(msg, F.col("content_hash2").cast("long") + 2**31)).alias("hash2")]


CLAIM_BITS = {LAMPORT: 1, SEQUENCER: 2, CAUSAL: 4, HANDOUT: 8}
"""The orders a record can name, as bits of :func:`run_summary` (``bit_or``)."""

SUMMARY_KEYS = ("file", "block_start", "peer", "view", "lat_bin")


def run_summary(narrow: DataFrame, marks=order_marks) -> DataFrame:
    """The one aggregate of the fast path: its rows are few (set by the run's shape, not its size)
    and fold on the driver (:class:`analysis.facts.SummaryFacts`).

    One row per ``(file, block_start, peer, view, lat_bin)``, and one more for each *rare* row: a
    good view record, a peer's first :data:`EARLY_INDEX <analysis.schema.EARLY_INDEX>` records, a
    claim outside :data:`CLAIM_BITS`. Columns: the keys, ``lines, records, messages, views,
    first_row, last_row, last_bad_row, disorder, index_faults, durable_records`` (records of a
    durable peer: :func:`analysis.schema.of_durable_run`), ``restart_records`` (records of a durable
    peer started again: :func:`analysis.schema.of_restart`), message fingerprint sums
    ``hash_lo, hash_hi, hash2`` (exact: 32-bit parts summed in 64 bits), ``lat_sum, lat_min,
    lat_max``, ``claims`` (the orders its good records name), and a rare row's ``member_list``
    (a view's sorted ``members`` and ``removed``) and ``early`` (the picture's fields); null
    elsewhere. Bad rows are counted, not listed: :func:`first_bad_rows` lists them.

    A plain hash aggregate of numbers (generated code, no object aggregate meets a row of the
    input); the rows of the same key that it leaves apart, the fold adds up.

    ``marks`` adds ``disorder``/``index_fault``: :func:`order_marks` (a window) or
    :func:`order_marks_in_scan` (no shuffle, under its conditions).
    """
    good = F.col("problem").isNull()
    is_view = F.col("kind") == "view"
    msg = good & (F.col("kind") == "message")
    when_msg = lambda c: F.when(msg, c)  # noqa: E731
    claim_bit = F.lit(None).cast("int")
    for name, bit in reversed(CLAIM_BITS.items()):
        claim_bit = F.when(F.col("claim") == name, F.lit(bit)).otherwise(claim_bit)
    early = F.struct("clock", "pid", "kind", "peer", "index", "view",
                     F.col("early.sent_at").alias("sent_at"),
                     F.col("early.delivered_at").alias("delivered_at"))
    rare = F.when(
        good & (is_view | F.col("early").isNotNull() | (F.col("claim").isNotNull() & claim_bit.isNull())),
        F.struct(F.when(is_view, F.struct(F.array_sort("members").alias("members"), "removed"))
                 .alias("member_list"),
                 F.when(F.col("early").isNotNull(), early).alias("early"),
                 F.when(claim_bit.isNull(), F.col("claim")).alias("claim")))
    summary = marks(narrow).groupBy(
        "file", "block_start", "peer", "view", latency_bin(when_msg(F.col("latency"))).alias("lat_bin"),
        rare.alias("rare"),
    ).agg(
        F.count(F.lit(1)).alias("lines"),
        F.count_if(good).alias("records"),
        F.count_if(msg).alias("messages"),
        F.count_if(good & is_view).alias("views"),
        F.min("row").alias("first_row"),
        F.max("row").alias("last_row"),
        F.max(F.when(~good, F.col("row"))).alias("last_bad_row"),
        F.count_if("disorder").alias("disorder"),
        F.count_if("index_fault").alias("index_faults"),
        F.count_if(good & F.col("durable_run")).alias("durable_records"),
        F.count_if(good & F.col("restart")).alias("restart_records"),
        *fingerprint_sums(msg),
        F.sum(when_msg(F.col("latency"))).alias("lat_sum"),
        F.min(when_msg(F.col("latency"))).alias("lat_min"),
        F.max(when_msg(F.col("latency"))).alias("lat_max"),
        F.bit_or(claim_bit).alias("claim_bits"),
    )
    bits = F.col("claim_bits")
    named = [F.when(bits.bitwiseAND(bit) != 0, F.lit(name)) for name, bit in CLAIM_BITS.items()]
    return summary.select(
        *SUMMARY_KEYS, "lines", "records", "messages", "views", "first_row", "last_row",
        "last_bad_row", "disorder", "index_faults", "durable_records", "restart_records", "hash_lo", "hash_hi", "hash2", "lat_sum",
        "lat_min", "lat_max", F.array_compact(F.array(*named, F.col("rare.claim"))).alias("claims"),
        F.col("rare.member_list").alias("member_list"), F.col("rare.early").alias("early"))


def first_bad_rows(narrow: DataFrame, n: int) -> DataFrame:
    """The first ``n`` bad rows of each file by row: ``file, block_start, row, problem, excerpt``
    (at most ``n`` per file reach the driver). Only bad rows meet the window."""
    w = Window.partitionBy("file").orderBy("row")
    bad = narrow.filter(F.col("problem").isNotNull()).select(
        "file", "block_start", "row", "problem", "excerpt", F.row_number().over(w).alias("_n"))
    return bad.filter(F.col("_n") <= n).drop("_n")


def prefix_fingerprint(narrow: DataFrame, view: int, peer: str, ref_peer: str) -> DataFrame:
    """One row, :data:`FINGERPRINT` of ``ref_peer``'s messages of ``view`` up to (in the total order)
    the last message of ``view`` that ``peer`` delivered.

    ``narrow``: :func:`analysis.schema.narrow_records` of (at least) both peers' files. If it equals
    ``peer``'s own fingerprint of ``view``, ``peer`` delivered exactly the prefix of the view's
    messages that ``ref_peer`` delivered up to its crash: nothing missing before, nothing extra.
    """
    msgs = narrow.filter(F.col("problem").isNull() & (F.col("kind") == "message")
                         & (F.col("view") == view))
    key = F.struct("clock", pid_host(F.col("pid")).alias("host"), pid_port(F.col("pid")).alias("port"))
    last = msgs.filter(F.col("peer") == peer).agg(F.max(key).alias("_last"))
    ref = msgs.filter(F.col("peer") == ref_peer).crossJoin(F.broadcast(last)).filter(key <= F.col("_last"))
    return ref.agg(F.count(F.lit(1)).alias("messages"), *fingerprint_sums(F.lit(True)))
