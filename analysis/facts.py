"""The facts of a run summary: its rows in, the figures the one-pass proof decides on out.

:func:`analysis.checks.run_summary` (Spark) has one row per ``(file, split, peer, view, latency
bin)`` and per rare row (a view record, an early record): a size set by the run's shape, not by its
number of records; :func:`analysis.checks.first_bad_rows` lists the first bad rows of each file.
:class:`SummaryFacts` takes those rows one at a time, as Spark streams them to the driver in one
job, adds up the rows of one key, and keeps only what the
decision and the report read: per split, per peer, per (peer, latency bin), per (peer, view)
fingerprint, per view its member lists, per file its order claims, and the first bad rows and
early records. It is the only implementation of these facts; ``tests/analysis/fold_oracle.py``
holds an independent one over the raw records, which the tests compare it with.

Pure Python: no Spark, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.checks import FINGERPRINT


def spark_order(value):
    """A sort key equal to Spark's ordering of ``value`` (null first; arrays and structs element-wise,
    then shorter first; strings byte-wise, which for UTF-8 is code-point order, as Python's)."""
    if value is None:
        return (0,)
    if isinstance(value, (list, tuple)):
        return (1, [spark_order(v) for v in value])
    if isinstance(value, dict):
        return (1, [spark_order(v) for v in value.values()])
    return (1, value)


def _add(total, value):
    """Spark's ``sum`` one value at a time: null until a value is not null."""
    if value is None:
        return total
    return value if total is None else total + value


def _low(a, b):
    return b if a is None else a if b is None else min(a, b)


def _high(a, b):
    return b if a is None else a if b is None else max(a, b)


@dataclass
class _Peer:
    records: int = 0
    messages: int = 0
    views: int = 0
    disorder: int = 0
    index_faults: int = 0
    durable_records: int = 0
    restart_records: int = 0
    lat_sum: float | None = None
    lat_min: float | None = None
    lat_max: float | None = None


@dataclass
class SummaryFacts:
    """The facts of a run summary, folded row by row (:meth:`add`); ``bad_kept``: how many bad rows
    are kept (the first by ``(file, row)``); ``rename``: Spark's name of a file -> the name it was
    given as."""

    bad_kept: int = 5
    rename: object = None
    _blocks: dict = field(default_factory=dict, init=False, repr=False)
    _bad: list = field(default_factory=list, init=False, repr=False)
    _peers: dict = field(default_factory=dict, init=False, repr=False)
    _bins: dict = field(default_factory=dict, init=False, repr=False)
    _fingerprints: dict = field(default_factory=dict, init=False, repr=False)
    _lists: dict = field(default_factory=dict, init=False, repr=False)
    _early: list = field(default_factory=list, init=False, repr=False)
    _claims: dict = field(default_factory=dict, init=False, repr=False)
    _files_of: dict = field(default_factory=dict, init=False, repr=False)
    _held: dict = field(default_factory=dict, init=False, repr=False)
    _installed: dict = field(default_factory=dict, init=False, repr=False)
    _durable_files: set = field(default_factory=set, init=False, repr=False)

    @classmethod
    def of(cls, rows, bad_kept: int = 5, rename=None, bad=()) -> SummaryFacts:
        """The facts of ``rows`` (dicts with :func:`analysis.checks.run_summary`'s columns) and of the
        bad rows ``bad`` (:func:`analysis.checks.first_bad_rows`')."""
        facts = cls(bad_kept=bad_kept, rename=rename)
        for r in rows:
            facts.add(r)
        for r in bad:
            facts.add_bad(r)
        return facts

    def add(self, r: dict) -> None:
        """Fold one summary row in."""
        file = self.rename(r["file"]) if self.rename else r["file"]
        b = self._blocks.setdefault((file, r["block_start"]), {
            "file": file, "block_start": r["block_start"], "first_row": None, "lines": None,
            "records": None, "last_row": None, "last_bad_row": None})
        b["first_row"] = _low(b["first_row"], r["first_row"])
        b["last_row"] = _high(b["last_row"], r["last_row"])
        b["last_bad_row"] = _high(b["last_bad_row"], r["last_bad_row"])
        b["lines"], b["records"] = _add(b["lines"], r["lines"]), _add(b["records"], r["records"])
        p = self._peers.setdefault(r["peer"], _Peer())
        for c in ("records", "messages", "views", "disorder", "index_faults", "durable_records",
                  "restart_records"):
            setattr(p, c, getattr(p, c) + (r[c] or 0))
        if r["records"] > 0:
            self._held.setdefault(r["peer"], set()).add(r["view"])
        if r["views"] > 0:
            self._installed.setdefault(r["peer"], set()).add(r["view"])
        if r["durable_records"]:
            self._durable_files.add((file, r["peer"]))
        p.lat_sum = _add(p.lat_sum, r["lat_sum"])
        p.lat_min, p.lat_max = _low(p.lat_min, r["lat_min"]), _high(p.lat_max, r["lat_max"])
        if r["messages"] > 0:
            key = (r["peer"], r["lat_bin"])
            self._bins[key] = self._bins.get(key, 0) + r["messages"]
            fp = self._fingerprints.setdefault((r["peer"], r["view"]), dict.fromkeys(FINGERPRINT))
            for c in FINGERPRINT:
                fp[c] = _add(fp[c], r[c])
        if r["member_list"] is not None:
            lists = self._lists.setdefault(r["view"], [])
            if r["member_list"] not in lists:
                lists.append(r["member_list"])
        if r["early"] is not None:
            self._early.append(r["early"])
        self._claims.setdefault(file, set()).update(r["claims"] or ())
        if r["records"] > 0 and file not in self._files_of.setdefault(r["peer"], []):
            self._files_of[r["peer"]].append(file)

    def add_bad(self, r: dict) -> None:
        """Fold in one bad row (``file, block_start, row, problem, excerpt``: a row of
        :func:`analysis.checks.first_bad_rows`); the first ``bad_kept`` by ``(file, row)`` are kept."""
        file = self.rename(r["file"]) if self.rename else r["file"]
        self._bad.append({**r, "file": file})
        if len(self._bad) > 4 * self.bad_kept:
            self._bad = self._first_bad()

    def has_bad_rows(self) -> bool:
        """Whether a split holds a bad row (:meth:`bad_rows` needs :meth:`add_bad` then)."""
        return any(b["last_bad_row"] is not None for b in self._blocks.values())

    def _first_bad(self) -> list[dict]:
        return sorted(self._bad, key=lambda b: (b["file"], b["row"]))[:self.bad_kept]

    def blocks(self) -> list[dict]:
        """Per file split: ``file, block_start, first_row, lines, records, last_row, last_bad_row``
        (as :func:`analysis.schema.block_stats`)."""
        return list(self._blocks.values())

    def bad_rows(self) -> list[dict]:
        """The first ``bad_kept`` bad rows by ``(file, row)``: ``file, block_start, row, problem,
        excerpt``."""
        return self._first_bad()

    def peers(self) -> list[dict]:
        """Per peer with a record: ``peer, records, messages, views, disorder, index_faults,
        durable_records, restart_records, lat_sum, lat_min, lat_max``."""
        return [{"peer": peer, **vars(p)} for peer, p in self._peers.items() if p.records > 0]

    def latency_bins(self) -> list[dict]:
        """``peer, lat_bin, count`` of delivered messages (:func:`analysis.checks.latency_bin`)."""
        return [{"peer": p, "lat_bin": b, "count": n} for (p, b), n in self._bins.items()]

    def view_fingerprints(self) -> list[dict]:
        """Per (peer, view) holding messages: ``peer, view`` and :data:`FINGERPRINT`, the multiset of
        messages that peer delivered in that view, up to hash collisions (about 2^-96)."""
        return [{"peer": p, "view": v, **fp} for (p, v), fp in self._fingerprints.items()]

    def view_members(self) -> list[dict]:
        """Per view with a view record, in view order: ``view, members, removed, variants`` (the least
        of its distinct member lists, and how many there are: > 1 is a view conflict)."""
        out = []
        for view, lists in self._lists.items():
            least = min(lists, key=spark_order) if lists else None
            out.append({"view": view, "members": least and least["members"],
                        "removed": least and least["removed"], "variants": len(lists)})
        return sorted(out, key=lambda v: spark_order(v["view"]))

    def early(self) -> list[dict]:
        """The early records: ``clock, pid, kind, peer, index, view, sent_at, delivered_at``."""
        return list(self._early)

    def claims(self) -> dict[str, list[str]]:
        """Per file, the orders its good records name (as :func:`analysis.run_order.claims_by_file`)."""
        return {f: sorted(c) for f, c in self._claims.items()}

    def durable_files(self) -> list[dict]:
        """``peer, file``: the files holding a durable peer's records, by peer and file."""
        return [{"peer": p, "file": f} for f, p in sorted(self._durable_files, key=lambda fp: (fp[1], fp[0]))]

    def broken_stretches(self) -> list[str]:
        """The durable peers (a record of :func:`analysis.schema.of_durable_run`) whose records do not
        make one whole stretch of the run's views: a peer is listed unless it installed (wrote the
        record of) every view it holds a record of and every view of the run from its first such
        view to its last. A peer not listed, with no record of a restart, was a member of each view
        of its stretch and wrote what a crash-stop peer does (docs/design/verifier.md, "The fast
        path")."""
        run_views = [v for v in self._lists if v is not None]
        broken = []
        for peer, p in self._peers.items():
            if not p.durable_records:
                continue
            held, installed = self._held.get(peer, set()), self._installed.get(peer, set())
            if None in held or not held or held != installed:
                broken.append(peer)
                continue
            low, high = min(held), max(held)
            if any(low <= v <= high and v not in installed for v in run_views):
                broken.append(peer)
        return sorted(broken)

    def files_of_peers(self) -> dict[str, list[str]]:
        """Per peer, the files holding its records."""
        return {p: list(f) for p, f in self._files_of.items()}

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
    """Per view holding messages: ``view, required, holders, variants, unexpected, ref, crashed``.

    ``required``: the members of the view that the next view does not remove (as
    :func:`analysis.checks.view_recipients`), every peer for a view without a record; ``holders``:
    the required peers holding messages of the view; ``variants``: their distinct fingerprints;
    ``unexpected``: holders not members; ``ref``: the least required holder's fingerprint;
    ``crashed``: the fingerprints of the members the next view removed.
    """
    everyone = sorted(peers)
    members_of = {v["view"]: v["members"] for v in views}
    removed_of = {v["view"]: v["removed"] for v in views}
    by_view: dict = {}
    for f in fingerprints:
        by_view.setdefault(f["view"], []).append(f)
    roles = []
    for view, held in by_view.items():
        if view in members_of:
            members = list(dict.fromkeys(members_of[view] or ()))
            removed = removed_of.get(view + 1) if view is not None else None
            crashed = [m for m in members if m in (removed or ())]
            required = [m for m in members if m not in crashed]
        else:
            members, required = everyone, everyone
        req = [r for r in held if r["peer"] in required]
        ref = min(req, key=lambda r: r["peer"]) if req else None
        roles.append({
            "view": view, "required": sorted(required), "holders": sorted(r["peer"] for r in req),
            "variants": len({tuple(r[f] for f in FINGERPRINT) for r in req}),
            "unexpected": sum(1 for r in held if r["peer"] not in members),
            "ref": ref and {"peer": ref["peer"], **{f: ref[f] for f in FINGERPRINT}},
            "crashed": [{"peer": r["peer"], **{f: r[f] for f in FINGERPRINT}}
                        for r in held if r["peer"] in members and r["peer"] not in required]})
    return roles


def fingerprint_mismatches(fingerprints: list[dict], views: list[dict], peers: list[str]) -> list[dict]:
    """Views whose messages are not provably held as the rules require (docs/design/verifier.md):
    ``view, holders, expected, variants``. Empty iff, per view, every required recipient holds the
    same multiset of messages, no non-member holds any, and each crashed member holds either that
    same multiset or fewer messages -- whether those few are a prefix is :func:`crash_prefixes`'
    business."""
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
    """``view, peer, ref_peer`` plus :data:`FINGERPRINT`: the crashed members holding fewer messages
    of their last view than its required recipients, each with one required holder to compare
    with (:func:`analysis.checks.prefix_fingerprint`); meaningful when
    :func:`fingerprint_mismatches` is empty."""
    return [{"view": r["view"], "peer": c["peer"], "ref_peer": r["ref"]["peer"],
             **{f: c[f] for f in FINGERPRINT}}
            for r in _fingerprint_roles(fingerprints, views, peers) if r["ref"] is not None
            for c in r["crashed"] if c["messages"] < r["ref"]["messages"]]


def diagram(early: list[dict], n: int) -> list[dict]:
    """The first ``n`` messages in the total order with their deliveries (as
    :func:`analysis.checks.first_events`), from the early records of a healthy run."""
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
    first = sorted(events.values(), key=lambda e: (e["clock"], e["host"].encode(), e["port"]))[:n]
    for e in first:
        e["deliveries"].sort(key=lambda d: (d["peer"], d["index"]))
    return first
