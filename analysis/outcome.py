"""The typed parts of a verification's report: each check's finding, the verdict, the proof that
settled it, the counts and the per-peer latency rows.

The pipeline (analysis/verify.py) builds these and puts them into the report through
``as_json``, which gives the keys ``report.json`` has always had (docs/verifier.md), so its
readers (analysis/report.py, the dashboard, the tests) read them unchanged.
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

    def put(self, result: dict) -> None:
        """Into the report: ``verdict`` and ``exit_code``."""
        result["verdict"], result["exit_code"] = self.value, self.exit_code


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
