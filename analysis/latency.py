"""Latency figures from log-scale bins (:func:`analysis.checks.latency_bin`): percentiles per peer
and overall, and the picture's histogram. Pure Python over already-counted bins."""

from __future__ import annotations

import math

from analysis.checks import QUANTILES, bin_value


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
    """Per-peer and overall ``count, min, mean, p50, p95, p99, max`` (as
    :func:`analysis.checks.latency_summary`).

    ``peers``: :meth:`analysis.facts.SummaryFacts.peers`; ``bins``: its ``latency_bins``. Min, max,
    mean and counts are exact; percentiles are the value of their log-scale bin (relative error
    <= 0.5 %). A message without times (bin None: the handout's) counts nowhere, as in
    :func:`analysis.checks.latency_summary`.
    """
    by_peer: dict[str, list[tuple[float, int]]] = {p["peer"]: [] for p in peers}
    for b in bins:
        if b["lat_bin"] is not None:
            by_peer.setdefault(b["peer"], []).append((bin_value(b["lat_bin"]), b["count"]))

    def stats(peer, count, total, low, high, binned) -> dict:
        p50, p95, p99 = quantiles(binned)
        return {"peer": peer, "count": count, "min": low, "mean": total / count if count else None,
                "p50": p50, "p95": p95, "p99": p99, "max": high}

    per_peer = [stats(p["peer"], sum(c for _, c in by_peer[p["peer"]]), p["lat_sum"] or 0.0,
                      p["lat_min"], p["lat_max"], by_peer[p["peer"]])
                for p in sorted(peers, key=lambda p: p["peer"])]
    lows = [p["lat_min"] for p in peers if p["lat_min"] is not None]
    highs = [p["lat_max"] for p in peers if p["lat_max"] is not None]
    overall = stats(None, sum(r["count"] for r in per_peer), sum(p["lat_sum"] or 0.0 for p in peers),
                    min(lows) if lows else None, max(highs) if highs else None,
                    [x for binned in by_peer.values() for x in binned])
    return per_peer, overall


def histogram(bins: list[dict], low: float, high: float, n_bins: int) -> list[int]:
    """Re-bin log-scale latency bins into ``n_bins`` equal bins over [low, high) plus one overflow
    bin (as :func:`analysis.checks.latency_histogram`, each log bin counted at its value)."""
    width = (high - low) / n_bins if high > low else 1.0
    counts = [0] * (n_bins + 1)
    for b in bins:
        if b["lat_bin"] is None:
            continue
        i = math.floor((bin_value(b["lat_bin"]) - low) / width)
        counts[max(0, min(n_bins, i))] += b["count"]
    return counts


def histogram_range(overall: dict) -> tuple[float, float]:
    """The histogram's ``[low, high)``: from 0 (or a negative minimum, clock skew) to 1.25 x p99."""
    low = min(0.0, overall.get("min") or 0.0)
    high = overall.get("p99") or overall.get("max") or 0.0
    return low, (high * 1.25 if high > 0 else (overall.get("max") or 1.0))
