"""The oracle of the verifier's one pass: its run summary and facts, computed in plain Python from
the narrow rows (:func:`analysis.schema.narrow_records`, collected), a second implementation kept
apart from the pipeline's on purpose.

:func:`run_summary` computes the rows :func:`analysis.checks.run_summary` computes in Spark, with
the order marks of each order written again from their rules (``OrderMark.java``'s in the scan);
:class:`SummaryFold` folds the facts :class:`analysis.facts.SummaryFacts` folds, batch-wise and
grouped its own way. The tests hold the pipeline to both, on hand-made and seeded random runs of
every order, clean and tampered (tests/analysis/test_one_pass_differential.py).
"""

from __future__ import annotations

import math

from analysis.checks import FINGERPRINT, latency_bin_py


# --------------------------------------------------------------------------- the summary, folded here
#
# The fast path's one aggregate (checks.run_summary) has one row per (file, split, peer, view, latency
# bin): a size set by the run's shape, not by its number of records. When it is small it is collected
# once and every derived fact is folded here, instead of one Spark job per fact (each job costs a
# planning round, a code generation and a task launch: seconds in a young JVM, more over Spark
# Connect). Each fold equals its Spark twin in analysis/checks.py (differentially tested).

def _struct_key(value):
    """Spark's ordering of a value (null first; arrays element-wise, then shorter first; strings
    byte-wise, which for UTF-8 is code-point order, as Python's)."""
    if value is None:
        return (0,)
    if isinstance(value, (list, tuple)):
        return (1, [_struct_key(v) for v in value])
    if isinstance(value, dict):
        return (1, [_struct_key(v) for v in value.values()])
    return (1, value)


def _sum(values):
    """Spark's ``sum``: null if every value is null."""
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _min(values):
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _max(values):
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _group(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return groups


class SummaryFold:
    """The collected rows of :func:`analysis.checks.run_summary` and every fact the fast path draws
    from them, as :func:`analysis.checks.summary_blocks` and its siblings compute them in Spark."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    def blocks(self) -> list[dict]:
        """As :func:`checks.summary_blocks`."""
        return [{"file": f, "block_start": b,
                 "first_row": _min(r["first_row"] for r in g), "lines": _sum(r["lines"] for r in g),
                 "records": _sum(r["records"] for r in g), "last_row": _max(r["last_row"] for r in g),
                 "last_bad_row": _max(r["last_bad_row"] for r in g)}
                for (f, b), g in _group(self.rows, "file", "block_start").items()]

    def bad_rows(self, n: int) -> list[dict]:
        """As :func:`checks.summary_bad_rows`, the first ``n`` by ``(file, row)``."""
        bad = [{"file": r["file"], "block_start": r["block_start"], **b}
               for r in self.rows for b in r["bad"] or () if b is not None]
        return sorted(bad, key=lambda b: (b["file"], b["row"]))[:n]

    def peers(self) -> list[dict]:
        """As :func:`checks.summary_peers`."""
        out = []
        for (peer,), g in _group(self.rows, "peer").items():
            row = {c: _sum(r[c] for r in g) for c in ("records", "messages", "views", "disorder",
                                                        "index_faults", "durable_records", "restart_records",
                                                        "lat_sum")}
            row.update(peer=peer, lat_min=_min(r["lat_min"] for r in g),
                       lat_max=_max(r["lat_max"] for r in g))
            if (row["records"] or 0) > 0:
                out.append(row)
        return out

    def latency_bins(self) -> list[dict]:
        """As :func:`checks.summary_latency_bins`."""
        return [{"peer": p, "lat_bin": b, "count": _sum(r["messages"] for r in g)}
                for (p, b), g in _group([r for r in self.rows if r["messages"] > 0],
                                        "peer", "lat_bin").items()]

    def view_fingerprints(self) -> list[dict]:
        """As :func:`checks.view_fingerprints`."""
        return [{"peer": p, "view": v, **{c: _sum(r[c] for r in g) for c in FINGERPRINT}}
                for (p, v), g in _group([r for r in self.rows if r["messages"] > 0],
                                        "peer", "view").items()]

    def view_members(self) -> list[dict]:
        """As :func:`checks.summary_view_members`, ordered by view."""
        out = []
        for (view,), g in _group([r for r in self.rows if r["views"] > 0], "view").items():
            lists: list[dict] = []
            for r in g:
                for item in r["member_lists"] or ():
                    if item not in lists:
                        lists.append(item)
            least = min(lists, key=_struct_key) if lists else None
            out.append({"view": view, "members": least and least["members"],
                        "removed": least and least["removed"], "variants": len(lists)})
        return sorted(out, key=lambda v: _struct_key(v["view"]))

    def early(self) -> list[dict]:
        """As :func:`checks.summary_early`."""
        return [e for r in self.rows for e in r["early"] or () if e is not None]

    def claims(self) -> dict[str, list[str]]:
        """Per file, the orders its good records name (as :func:`analysis.run_order.claims_by_file`)."""
        out: dict[str, set[str]] = {}
        for r in self.rows:
            out.setdefault(r["file"], set()).update(c for c in r["claims"] or () if c is not None)
        return {f: sorted(c) for f, c in out.items()}

    def files_of_peers(self) -> dict[str, list[str]]:
        """Per peer, the files holding its records."""
        out: dict[str, list[str]] = {}
        for r in self.rows:
            if r["records"] > 0 and r["file"] not in out.setdefault(r["peer"], []):
                out[r["peer"]].append(r["file"])
        return out

    def messages_and_faults(self, peers: list[str]) -> tuple[int, bool, list[dict]]:
        """``(messages, mismatched, crash prefixes to check)``: the run's distinct messages (per
        view, the most any peer holds) if no view's fingerprints mismatch
        (:func:`fingerprint_mismatches`), with :func:`crash_prefixes`; else ``(0, True, [])``."""
        fingerprints, views = self.view_fingerprints(), self.view_members()
        if fingerprint_mismatches(fingerprints, views, peers):
            return 0, True, []
        best: dict = {}
        for f in fingerprints:
            best[f["view"]] = max(best.get(f["view"], 0), f["messages"])
        return sum(best.values()), False, crash_prefixes(fingerprints, views, peers)


def _fingerprint_roles(fingerprints: list[dict], views: list[dict], peers: list[str]) -> list[dict]:
    """As :func:`checks._fingerprint_roles` (``required``, ``holders``, ``variants``,
    ``unexpected``, ``ref``, ``crashed``, per view holding messages)."""
    everyone = sorted(peers)
    members_of = {v["view"]: v["members"] for v in views}
    removed_of = {v["view"]: v["removed"] for v in views}
    roles = []
    for (view,), g in _group(fingerprints, "view").items():
        if view in members_of:  # checks.view_recipients
            members = list(dict.fromkeys(members_of[view]))
            removed = removed_of.get(view + 1) if view is not None else None
            crashed = [m for m in members if m in (removed or ())]
            required = [m for m in members if m not in crashed]
        else:
            members, required = everyone, everyone
        fp = lambda r: tuple(r[f] for f in FINGERPRINT)  # noqa: E731
        req = [r for r in g if r["peer"] in required]
        ref = min(req, key=lambda r: r["peer"]) if req else None
        roles.append({
            "view": view, "required": sorted(required), "holders": sorted(r["peer"] for r in req),
            "variants": len({fp(r) for r in req}),
            "unexpected": sum(1 for r in g if r["peer"] not in members),
            "ref": ref and {"peer": ref["peer"], **{f: ref[f] for f in FINGERPRINT}},
            "crashed": [{"peer": r["peer"], **{f: r[f] for f in FINGERPRINT}}
                        for r in g if r["peer"] in members and r["peer"] not in required]})
    return roles


def fingerprint_mismatches(fingerprints: list[dict], views: list[dict], peers: list[str]) -> list[dict]:
    """As :func:`checks.fingerprint_mismatches`: ``view, holders, expected, variants``."""
    out = []
    for r in _fingerprint_roles(fingerprints, views, peers):
        ref = r["ref"]
        crashed_ok = ref is not None and all(
            all(c[f] == ref[f] for f in FINGERPRINT) or c["messages"] < ref["messages"]
            for c in r["crashed"])
        if r["holders"] != r["required"] or r["variants"] != 1 or r["unexpected"] > 0 \
                or not crashed_ok:
            out.append({"view": r["view"], "holders": r["holders"], "expected": r["required"],
                        "variants": r["variants"]})
    return out


def crash_prefixes(fingerprints: list[dict], views: list[dict], peers: list[str]) -> list[dict]:
    """As :func:`checks.crash_prefixes`: ``view, peer, ref_peer`` plus the crashed peer's
    fingerprint, for each crashed member holding fewer messages than the required ones."""
    return [{"view": r["view"], "peer": c["peer"], "ref_peer": r["ref"]["peer"],
             **{f: c[f] for f in FINGERPRINT}}
            for r in _fingerprint_roles(fingerprints, views, peers) if r["ref"] is not None
            for c in r["crashed"] if c["messages"] < r["ref"]["messages"]]


# --------------------------------------------------------------------------- the summary, computed here
#
# On a small input the Spark summary's cost is its cold start (planning, code generation and the first
# run of a window and an object-hash aggregate: seconds in a young JVM, whatever the data's size),
# not its work. There the narrow rows are collected instead and summarised here, exactly as
# checks.run_summary does it (differentially tested): Spark still reads and parses every line, so
# every bad-line rule stays Spark's.

SUMMARY_INPUT = ("file", "block_start", "row", "problem", "excerpt", "kind", "index", "peer", "clock",
                 "pid", "port", "view", "latency", "content_hash", "content_hash2", "members",
                 "removed", "early", "claim", "seq", "vc", "durable_run", "restart")
"""The columns :func:`run_summary` reads: those of :func:`analysis.schema.narrow_records` plus
``port`` (:func:`analysis.schema.pid_port` of ``pid``, taken from Spark so that its parse of a port
is the only one)."""


class UnfoldableInput(ValueError):
    """A row :func:`run_summary` cannot bin as Spark would (a latency that is not a finite number):
    the caller summarises in Spark instead."""


def _after(r: dict, prev: dict) -> bool:
    """:func:`checks.key_after`: ``(clock, host byte-wise, port)`` of ``r`` above ``prev``'s."""
    if r["clock"] != prev["clock"]:
        return r["clock"] > prev["clock"]
    host, prev_host = (x["pid"].rpartition(":")[0].encode("utf-8", "surrogatepass") for x in (r, prev))
    if host != prev_host:
        return host > prev_host
    return r["port"] > prev["port"]


class _SequencerRule:
    """The sequencer order's marks of one peer's good rows in index order (as ``OrderMark.java``'s
    ``Sequencer``): ``(view, seq)`` strictly increasing; each origin's messages by rising clock."""

    def __init__(self) -> None:
        self.last_clock: dict[str, int] = {}

    def fault(self, r: dict, prev: dict | None) -> bool:
        if r["view"] is None or r["seq"] is None:
            return True
        bad = prev is not None and (prev["view"] is None or prev["seq"] is None
                                    or (r["view"], r["seq"]) <= (prev["view"], prev["seq"]))
        if r["kind"] == "message":
            last = self.last_clock.get(r["pid"])
            self.last_clock[r["pid"]] = r["clock"]
            bad = bad or (last is not None and r["clock"] <= last)
        return bad


class _CausalRule:
    """The causal order's marks of one peer's good rows in index order (as ``OrderMark.java``'s
    ``Causal``): views never go back and a view record is above the view before it; per view, with
    ``n[q]`` the number of q's messages delivered so far, a message's own number ``vc[pid]`` is
    ``n[pid] + 1`` and ``n[q] >= vc[q]`` for every other q in its ``vc``; each origin's messages by
    rising clock."""

    def __init__(self) -> None:
        self.last_clock: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.view = None

    def fault(self, r: dict, prev: dict | None) -> bool:
        view = r["view"]
        if view is None:
            return True
        bad = self.view is not None and (view < self.view or (r["kind"] == "view" and view <= self.view))
        if view != self.view:
            self.counts, self.view = {}, view
        if r["kind"] == "view":
            return bad
        last = self.last_clock.get(r["pid"])
        self.last_clock[r["pid"]] = r["clock"]
        bad = bad or (last is not None and r["clock"] <= last)
        vc = r["vc"]
        if vc is None:
            return True
        bad = bad or r["pid"] not in vc
        own = self.counts.get(r["pid"], 0)
        for q, count in vc.items():
            if count is None:
                bad = True
            elif q == r["pid"]:
                bad = bad or count != own + 1
            else:
                bad = bad or self.counts.get(q, 0) < count
        self.counts[r["pid"]] = own + 1
        return bad


class _LamportRule:
    """The Lamport order's marks: ``(clock, host byte-wise, port)`` strictly increasing."""

    def fault(self, r: dict, prev: dict | None) -> bool:
        return prev is not None and not _after(r, prev)


class _HandoutRule:
    """The handout's order's marks: ``(clock, from as written)`` strictly increasing, ``from``
    compared as a string (code points: Spark's byte-wise order of UTF-8)."""

    def fault(self, r: dict, prev: dict | None) -> bool:
        return prev is not None and not (r["clock"], r["pid"]) > (prev["clock"], prev["pid"])


_RULES = {"lamport": _LamportRule, "sequencer": _SequencerRule, "causal": _CausalRule,
          "handout": _HandoutRule}


def order_marks(rows: list[dict], order: str = "lamport") -> tuple[set, set]:
    """The ``(file, row)`` of the rows marked ``disorder`` and ``index_fault`` (a row id is unique
    within its file only: a class's text outputs and JSON Lines are two reads): per peer, good rows
    in ``(index, row)`` order, each against the one before it, by the rule of ``order`` (Lamport: as
    :func:`checks.order_marks`; sequencer and causal: as :func:`checks.order_marks_in_scan`)."""
    by_peer: dict = {}
    for r in rows:
        if r["problem"] is None:
            by_peer.setdefault(r["peer"], []).append(r)
    disorder, index_fault = set(), set()
    for good in by_peer.values():
        good.sort(key=lambda r: (r["index"], r["row"]))
        rule = _RULES[order]()
        prev = None
        for r in good:
            if rule.fault(r, prev):
                disorder.add((r["file"], r["row"]))
            if (prev["index"] if prev is not None else 0) + 1 != r["index"]:
                index_fault.add((r["file"], r["row"]))
            prev = r
    return disorder, index_fault


_LOW32 = 0xFFFFFFFF
_LOW64 = (1 << 64) - 1


def _nulls_last(values: list) -> list:
    """Spark's ``array_sort``: ascending, nulls last."""
    return sorted(values, key=lambda v: (v is None, v if v is not None else ""))


def run_summary(rows: list[dict], bad_kept: int = 5, order: str = "lamport") -> list[dict]:
    """The rows of :func:`analysis.checks.run_summary` over the narrow rows ``rows`` (dicts with
    :data:`SUMMARY_INPUT`), one per ``(file, block_start, peer, view, lat_bin)``, with every column;
    its order marks by the rule of ``order`` (:func:`order_marks`).

    Lists hold what Spark's hold, in an order of their own (every reader of them ignores it: the
    fold dedups ``member_lists`` and sorts ``claims`` and ``early``); ``bad`` is sorted by row, as
    Spark's. Float sums are added in row order (Spark's order is its own: equal up to rounding).
    Raises :class:`UnfoldableInput` for a message whose latency is not finite. A message without
    one (a handout-wire record: no ``sent_at``) is in bin None and adds to no latency figure, as in
    Spark.
    """
    disorder, index_fault = order_marks(rows, order)
    groups: dict[tuple, dict] = {}
    for r in rows:
        good = r["problem"] is None
        kind = r["kind"]
        msg = good and kind == "message"
        latency = r["latency"] if msg else None
        if latency is not None and not math.isfinite(latency):
            raise UnfoldableInput(f"latency {latency} at row {r['row']}")
        key = (r["file"], r["block_start"], r["peer"], r["view"],
               latency_bin_py(latency) if latency is not None else None)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "file": key[0], "block_start": key[1], "peer": key[2], "view": key[3],
                "lat_bin": key[4], "lines": 0, "records": 0, "messages": 0, "views": 0,
                "first_row": r["row"], "last_row": r["row"], "last_bad_row": None, "bad": [],
                "disorder": 0, "index_faults": 0, "durable_records": 0, "restart_records": 0, "hash_lo": None, "hash_hi": None, "hash2": None,
                "lat_sum": None, "lat_min": None, "lat_max": None, "member_lists": [], "early": [],
                "claims": []}
        row = r["row"]
        g["lines"] += 1
        g["first_row"] = min(g["first_row"], row)
        g["last_row"] = max(g["last_row"], row)
        if not good:
            g["last_bad_row"] = row if g["last_bad_row"] is None else max(g["last_bad_row"], row)
            g["bad"].append({"row": row, "problem": r["problem"], "excerpt": r["excerpt"]})
            continue
        g["records"] += 1
        g["durable_records"] += bool(r["durable_run"])
        g["restart_records"] += bool(r["restart"])
        g["disorder"] += (r["file"], row) in disorder
        g["index_faults"] += (r["file"], row) in index_fault
        if msg:
            h = r["content_hash"]
            g["messages"] += 1
            g["hash_lo"] = (g["hash_lo"] or 0) + (h & _LOW32)
            g["hash_hi"] = (g["hash_hi"] or 0) + ((h & _LOW64) >> 32)
            g["hash2"] = (g["hash2"] or 0) + r["content_hash2"] + 2**31
            if latency is not None:
                g["lat_sum"] = latency if g["lat_sum"] is None else g["lat_sum"] + latency
                g["lat_min"] = latency if g["lat_min"] is None else min(g["lat_min"], latency)
                g["lat_max"] = latency if g["lat_max"] is None else max(g["lat_max"], latency)
        elif kind == "view":
            g["views"] += 1
            lists = {"members": _nulls_last(r["members"]), "removed": r["removed"]}
            if lists not in g["member_lists"]:
                g["member_lists"].append(lists)
        if r["early"] is not None:
            g["early"].append({"clock": r["clock"], "pid": r["pid"], "kind": kind, "peer": r["peer"],
                               "index": r["index"], "view": r["view"],
                               "sent_at": r["early"]["sent_at"],
                               "delivered_at": r["early"]["delivered_at"]})
        if r["claim"] is not None and r["claim"] not in g["claims"]:
            g["claims"].append(r["claim"])
    for g in groups.values():
        g["bad"] = sorted(g["bad"], key=lambda b: b["row"])[:bad_kept]
    return list(groups.values())


def narrow_rows(narrow) -> list[dict]:
    """The narrow rows of a (small) input as :func:`run_summary` reads them: collected from Spark,
    with ``port`` parsed by Spark (:func:`analysis.schema.pid_port`) so that its parse is the only
    one."""
    from analysis import schema

    columns = [schema.pid_port(narrow["pid"]).alias("port") if c == "port" else c
               for c in SUMMARY_INPUT]
    return [r.asDict(recursive=True) for r in narrow.select(*columns).collect()]
