"""The verifier's baseline for ``scripts/bench-verify``: the single-process check of November 23
(``analysis/fold.py`` at commit 46e8e9a), kept frozen here so that the bench's "python" column does
not move as the verifier's code (and the tests' oracle, tests/analysis/fold_oracle.py) changes.

:func:`check` reads every line into a narrow row in Python (json, Python's ``hash`` for the two
content hashes), then runs that commit's ``run_summary`` (the Lamport order's marks: that commit had
no others) and folds its facts (``SummaryFold``), as its driver route did for a small input. It
holds every row in memory (about 1 KB each: 10 GB at 10 M rows). Run as
``python -m benchmarks.frozen_fold FILE...``: prints the verdict's figures as one JSON line.

Everything below the marker line is the file of 46e8e9a, unchanged.
"""
# ruff: noqa
# fmt: off

from __future__ import annotations

import json
import sys


def narrow_rows(paths: list[str]) -> list[dict]:
    """The rows ``run_summary`` reads (``analysis.schema.narrow_records`` plus ``port``), in Python."""
    rows: list[dict] = []
    for path in paths:
        with open(path, "rb") as f:
            for n, line in enumerate(f):
                row = {"file": path, "block_start": 0, "row": n, "problem": None, "excerpt": None,
                       "kind": None, "index": None, "peer": None, "clock": None, "pid": None,
                       "port": None, "view": None, "latency": None, "content_hash": None,
                       "content_hash2": None, "members": None, "removed": None, "early": None,
                       "claim": None}
                try:
                    r = json.loads(line)
                    kind, index, peer, clock, pid = r["kind"], r["index"], r["peer"], r["clock"], r["pid"]
                except (ValueError, KeyError, TypeError):
                    row.update(problem="not valid JSON (torn or corrupt line)",
                               excerpt=line[:120].decode("utf-8", "replace"))
                    rows.append(row)
                    continue
                content = (clock, pid, kind, r.get("sent_at"), r.get("text"))
                row.update(kind=kind, index=index, peer=peer, clock=clock, pid=pid,
                           port=int(pid.rpartition(":")[2]), view=r.get("view"),
                           content_hash=hash(content), content_hash2=hash(content[::-1]) & 0x7FFFFFFF,
                           claim="sequencer" if "seq" in r else "causal" if "vc" in r else "lamport")
                if kind == "view":
                    row.update(members=r.get("members"), removed=r.get("removed"))
                else:
                    row["latency"] = r["delivered_at"] - r["sent_at"]
                if index <= 64:
                    row["early"] = {"sent_at": r.get("sent_at"), "delivered_at": r["delivered_at"]}
                rows.append(row)
    return rows


def check(paths: list[str]) -> dict:
    """The verdict's figures of the frozen fold over ``paths``."""
    rows = narrow_rows(paths)
    summary = run_summary(rows)
    del rows
    facts = SummaryFold(summary)
    peers = facts.peers()
    names = sorted(p["peer"] for p in peers)
    fingerprints, views = facts.view_fingerprints(), facts.view_members()
    mismatched = bool(fingerprint_mismatches(fingerprints, views, names))
    partial = [] if mismatched else crash_prefixes(fingerprints, views, names)
    best: dict = {}
    for f in fingerprints:
        best[f["view"]] = max(best.get(f["view"], 0), f["messages"])
    messages = sum(best.values())
    per_peer, overall = latency_stats(peers, facts.latency_bins())
    return {"messages": messages, "mismatched": mismatched, "crash_prefixes": len(partial),
            "faults": sum(p["disorder"] + p["index_faults"] for p in peers),
            "p50": overall["p50"], "p99": overall["p99"]}


def main() -> None:
    print(json.dumps(check(sys.argv[1:])))


# ------------------------------------------------------------------ analysis/fold.py at 46e8e9a
"""Driver-side folds of the fast path: small collected rows in, report values out (pure Python).

Inputs are bounded by peers x latency bins and peers x :data:`analysis.schema.EARLY_INDEX`, except
:func:`run_summary`'s, which takes every narrow row of a small input (bounded by the caller).
"""


import math

from analysis.checks import FINGERPRINT, QUANTILES, bin_value, latency_bin_py


def quantiles(bins: list[tuple[float, int]], qs=QUANTILES) -> list[float | None]:
    """Quantiles of a binned distribution: the value of the bin holding rank ``ceil(q * n)``."""
    ordered = sorted(bins)
    n = sum(c for _, c in ordered)
    out: list[float | None] = []
    for q in qs:
        if n == 0:
            out.append(None)
            continue
        rank, seen = max(1, math.ceil(q * n)), 0
        for value, count in ordered:
            seen += count
            if seen >= rank:
                out.append(value)
                break
    return out


def latency_stats(peers: list[dict], bins: list[dict]) -> tuple[list[dict], dict]:
    """Per-peer and overall ``count, min, mean, p50, p95, p99, max`` (as :func:`checks.latency_summary`).

    ``peers``: rows of :func:`checks.summary_peers`; ``bins``: rows of
    :func:`checks.summary_latency_bins`. Min, max, mean and counts are exact; percentiles are the
    value of their log-scale bin (relative error <= 0.5 %).
    """
    by_peer: dict[str, list[tuple[float, int]]] = {}
    for b in bins:
        by_peer.setdefault(b["peer"], []).append((bin_value(b["lat_bin"]), b["count"]))

    def stats(peer, count, total, low, high, binned) -> dict:
        p50, p95, p99 = quantiles(binned)
        return {"peer": peer, "count": count, "min": low, "mean": total / count if count else None,
                "p50": p50, "p95": p95, "p99": p99, "max": high}

    per_peer = [stats(p["peer"], p["messages"], p["lat_sum"] or 0.0, p["lat_min"], p["lat_max"],
                      by_peer.get(p["peer"], [])) for p in sorted(peers, key=lambda p: p["peer"])]
    lows = [p["lat_min"] for p in peers if p["lat_min"] is not None]
    highs = [p["lat_max"] for p in peers if p["lat_max"] is not None]
    overall = stats(None, sum(p["messages"] for p in peers), sum(p["lat_sum"] or 0.0 for p in peers),
                    min(lows) if lows else None, max(highs) if highs else None,
                    [x for binned in by_peer.values() for x in binned])
    return per_peer, overall


def histogram(bins: list[dict], low: float, high: float, n_bins: int) -> list[int]:
    """Re-bin log-scale latency bins into ``n_bins`` equal bins over [low, high) plus one overflow
    bin (as :func:`checks.latency_histogram`, each log bin counted at its representative value)."""
    width = (high - low) / n_bins if high > low else 1.0
    counts = [0] * (n_bins + 1)
    for b in bins:
        i = math.floor((bin_value(b["lat_bin"]) - low) / width)
        counts[max(0, min(n_bins, i))] += b["count"]
    return counts


def _order_key(clock: int, pid: str) -> tuple:
    host, _, port = pid.rpartition(":")
    return clock, host.encode(), int(port)


def diagram(early: list[dict], n: int) -> list[dict]:
    """The first ``n`` messages in the total order with their deliveries (as
    :func:`checks.first_events`), from the early records of a healthy run."""
    events: dict[tuple, dict] = {}
    for r in early:
        if r["kind"] != "message":
            continue
        host, _, port = r["pid"].rpartition(":")
        e = events.setdefault((r["clock"], r["pid"]), {
            "clock": r["clock"], "pid": r["pid"], "host": host, "port": int(port),
            "sent_at": r["sent_at"], "deliveries": []})
        e["deliveries"].append({"peer": r["peer"], "index": r["index"],
                                "delivered_at": r["delivered_at"], "view": r["view"]})
    first = sorted(events.values(), key=lambda e: _order_key(e["clock"], e["pid"]))[:n]
    for e in first:
        e["deliveries"].sort(key=lambda d: (d["peer"], d["index"]))
    return first


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
                                                        "index_faults", "lat_sum")}
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
                 "removed", "early", "claim")
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


def order_marks(rows: list[dict]) -> tuple[set, set]:
    """The ``row`` ids :func:`checks.order_marks` marks ``disorder`` and ``index_fault``: per peer,
    good rows in ``(index, row)`` order, each against the one before it."""
    by_peer: dict = {}
    for r in rows:
        if r["problem"] is None:
            by_peer.setdefault(r["peer"], []).append(r)
    disorder, index_fault = set(), set()
    for good in by_peer.values():
        good.sort(key=lambda r: (r["index"], r["row"]))
        prev = None
        for r in good:
            if prev is not None and not _after(r, prev):
                disorder.add(r["row"])
            if (prev["index"] if prev is not None else 0) + 1 != r["index"]:
                index_fault.add(r["row"])
            prev = r
    return disorder, index_fault


_LOW32 = 0xFFFFFFFF
_LOW64 = (1 << 64) - 1


def _nulls_last(values: list) -> list:
    """Spark's ``array_sort``: ascending, nulls last."""
    return sorted(values, key=lambda v: (v is None, v if v is not None else ""))


def run_summary(rows: list[dict], bad_kept: int = 5) -> list[dict]:
    """The rows of :func:`analysis.checks.run_summary` over the narrow rows ``rows`` (dicts with
    :data:`SUMMARY_INPUT`), one per ``(file, block_start, peer, view, lat_bin)``, with every column.

    Lists hold what Spark's hold, in an order of their own (every reader of them ignores it: the
    fold dedups ``member_lists`` and sorts ``claims`` and ``early``); ``bad`` is sorted by row, as
    Spark's. Float sums are added in row order (Spark's order is its own: equal up to rounding).
    Raises :class:`UnfoldableInput` for a message whose latency is not finite.
    """
    disorder, index_fault = order_marks(rows)
    groups: dict[tuple, dict] = {}
    for r in rows:
        good = r["problem"] is None
        kind = r["kind"]
        msg = good and kind == "message"
        latency = r["latency"] if msg else None
        if msg and not math.isfinite(latency):
            raise UnfoldableInput(f"latency {latency} at row {r['row']}")
        key = (r["file"], r["block_start"], r["peer"], r["view"],
               latency_bin_py(latency) if msg else None)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "file": key[0], "block_start": key[1], "peer": key[2], "view": key[3],
                "lat_bin": key[4], "lines": 0, "records": 0, "messages": 0, "views": 0,
                "first_row": r["row"], "last_row": r["row"], "last_bad_row": None, "bad": [],
                "disorder": 0, "index_faults": 0, "hash_lo": None, "hash_hi": None, "hash2": None,
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
        g["disorder"] += row in disorder
        g["index_faults"] += row in index_fault
        if msg:
            h = r["content_hash"]
            g["messages"] += 1
            g["hash_lo"] = (g["hash_lo"] or 0) + (h & _LOW32)
            g["hash_hi"] = (g["hash_hi"] or 0) + ((h & _LOW64) >> 32)
            g["hash2"] = (g["hash2"] or 0) + r["content_hash2"] + 2**31
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


if __name__ == "__main__":
    main()
