"""Where one message's time goes under light load (`scripts/bench --path`), from the peers' step notes.

Each peer of a light-load run notes the monotonic time of its tasks' steps (`tom.peer.pathtrace`: the
same clock in every process of the host). Messages go one at a time, so the steps between one
message's ``stdin`` note at its origin and the next message's belong to it (a heartbeat's steps land
in some windows; the medians pass over them). In each window the origin is ``O`` and the others are
``B``, ``C``, ... in the order of their first link read. A step is keyed by (role, step, its n-th
occurrence at that role in the window); `breakdown` gives each key seen in most windows with the
median of its time after ``stdin``, in time order.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

Notes = list[tuple[int, str]]  # (nanoseconds, step) of one peer


def read_notes(path: Path) -> Notes:
    notes = []
    for line in path.read_text().splitlines():
        ns, _, step = line.partition(" ")
        notes.append((int(ns), step))
    return notes


def windows(peers: list[Notes], count: int) -> list[tuple[int, int, int]]:
    """(origin's index, start ns, end ns) of the last ``count`` messages: each from a ``stdin`` note to the
    next one (the last to the end of the notes)."""
    starts = sorted((ns, i) for i, notes in enumerate(peers) for ns, step in notes if step == "stdin")[-count:]
    end = max(ns for notes in peers for ns, _ in notes) + 1
    return [(i, ns, starts[k + 1][0] if k + 1 < len(starts) else end) for k, (ns, i) in enumerate(starts)]


def breakdown(peers: list[Notes], count: int, share: float = 0.8) -> list[tuple[str, float, int]]:
    """``(key, median µs after stdin, windows seen)`` of each key seen in at least ``share`` of the
    windows, by median time; a key is ``"<role> <step>#<n>"``."""
    seen: dict[str, list[float]] = defaultdict(list)
    spans = windows(peers, count)
    for origin, start, end in spans:
        inside = {i: [(ns, step) for ns, step in notes if start <= ns < end] for i, notes in enumerate(peers)}
        first_recv = sorted((next((ns for ns, s in inside[i] if s == "recv"), end), i)
                            for i in inside if i != origin)
        roles = {origin: "O"} | {i: "BCDEFGHIJ"[k] for k, (_, i) in enumerate(first_recv)}
        for i, notes in inside.items():
            nth: dict[str, int] = defaultdict(int)
            for ns, step in notes:
                nth[step] += 1
                seen[f"{roles[i]} {step}#{nth[step]}"].append((ns - start) / 1000)
    rows = [(key, statistics.median(v), len(v)) for key, v in seen.items() if len(v) >= share * len(spans)]
    return sorted(rows, key=lambda r: r[1])


def show(rows: list[tuple[str, float, int]], windows_total: int) -> list[str]:
    """One line per step: its median time after stdin and the gap from the line before."""
    out, last = [], 0.0
    for key, at, seen in rows:
        out.append(f"  {at:8.1f} µs  (+{at - last:6.1f})  {key:<14} in {seen}/{windows_total} windows")
        last = at
    return out
