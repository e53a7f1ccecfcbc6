"""A verification's typed report (:class:`Report`) and its parts: each check's finding, the
verdict, the proof that settled it, the counts and the per-peer latency rows.

The pipeline (analysis/verify.py) fills a :class:`Report`; its ``as_json`` gives the keys
``report.json`` has always had (docs/verifier.md), so its readers (analysis/report.py, the
dashboard, the tests) read them unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, replace


class Verdict(enum.Enum):
    """The outcome, with the process's exit status."""

    VERIFIED = "VERIFIED"
    VIOLATED = "VIOLATED"
    UNUSABLE = "UNUSABLE INPUT"

    @property
    def exit_code(self) -> int:
        return {Verdict.VERIFIED: 0, Verdict.VIOLATED: 1, Verdict.UNUSABLE: 2}[self]

    @classmethod
    def of(cls, checks: dict[str, Check]) -> Verdict:
        """VIOLATED if any check found something, else VERIFIED."""
        return cls.VIOLATED if any(c.count for c in checks.values()) else cls.VERIFIED


class Proof(enum.Enum):
    """What settled the run: the one pass over the summary, or the exact checks."""

    ONE_PASS = "one pass"
    EXACT = "exact checks"


@dataclass(frozen=True, slots=True)
class Check:
    """One check's finding: how many violations, the first few rows, how it was settled (``note``)
    and the figures it adds (``figures``: e.g. the pairs compared)."""

    count: int
    first: list[dict] = field(default_factory=list)
    note: str | None = None
    figures: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.count < 0 or (self.count == 0 and self.first):
            raise ValueError(f"a check with count {self.count} lists {len(self.first)} rows")

    @classmethod
    def settled(cls, note: str, **figures) -> Check:
        """A check at 0, with how that was established."""
        return cls(0, [], note, figures)

    def noted(self, note: str) -> Check:
        return replace(self, note=note)

    def as_json(self) -> dict:
        return {"count": self.count, "first": self.first, **self.figures,
                **({"note": self.note} if self.note is not None else {})}


def checks_json(checks: dict[str, Check]) -> dict[str, dict]:
    return {name: c.as_json() for name, c in checks.items()}


@dataclass(frozen=True, slots=True)
class Counts:
    records: int
    peers: int
    events: int
    messages: int
    views: int

    def as_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class PeerLatency:
    """Latency figures of one peer (``peer`` None: the whole run), in seconds."""

    peer: str | None
    count: int
    min: float | None
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None

    def as_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Latency:
    """The report's ``latency``: overall, per peer, and the picture's histogram."""

    overall: PeerLatency | None
    per_peer: list[PeerLatency]
    low: float
    high: float
    counts: list[int]

    def as_json(self) -> dict:
        return {"overall": self.overall.as_json() if self.overall else {},
                "per_peer": [p.as_json() for p in self.per_peer],
                "histogram": {"low": self.low, "high": self.high, "bins": len(self.counts) - 1,
                              "counts": self.counts}}


@dataclass
class Report:
    """A verification's report, filled in stage by stage by the pipeline (analysis/verify.py).

    Until a stage decides otherwise the verdict is UNUSABLE: a run is VERIFIED or VIOLATED only once
    its checks are in. :meth:`as_json` gives ``report.json`` (docs/verifier.md): the fields that are
    set, each typed part as its JSON, ``exit_code`` beside the verdict.
    """

    inputs: list[str]
    timing: dict[str, float] = field(default_factory=dict)
    verdict: Verdict = Verdict.UNUSABLE
    problems: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    file_summaries: list[dict] | None = None
    bad_lines: dict | None = None
    order: str | None = None
    order_check: str | None = None
    proof: Proof | None = None
    fast_path: str | None = None
    counts: Counts | None = None
    peers: list[str] | None = None
    views: list[dict] | None = None
    rejoins: list[dict] | None = None
    checks: dict[str, Check] | None = None
    latency: Latency | None = None
    diagram: list[dict] | None = None
    peer_files: dict[str, list[str]] | None = None
    incomplete: list[dict] | None = None
    durable: list[dict] | None = None
    gaps: list[dict] | None = None
    spark_settings: dict[str, str] | None = None

    def settle(self, checks: dict[str, Check]) -> None:
        """The checks are in: they and the verdict they give."""
        self.checks = checks
        self.verdict = Verdict.of(checks)

    def as_json(self) -> dict:
        out: dict = {"inputs": self.inputs, "problems": self.problems, "timing": self.timing,
                     "verdict": self.verdict.value, "exit_code": self.verdict.exit_code,
                     "files": self.files}
        if self.skipped:
            out["skipped"] = self.skipped
        for name in ("file_summaries", "bad_lines", "order", "order_check", "fast_path", "peers",
                     "views", "rejoins", "diagram", "peer_files", "incomplete", "durable", "gaps",
                     "spark_settings"):
            if (value := getattr(self, name)) is not None:
                out[name] = value
        if self.proof is not None:
            out["proof"] = self.proof.value
        if self.counts is not None:
            out["counts"] = self.counts.as_json()
        if self.checks is not None:
            out["checks"] = checks_json(self.checks)
        if self.latency is not None:
            out["latency"] = self.latency.as_json()
        return out
