"""``scripts/check``: the table of docs/design/model-checking.md — each order by configuration, searched
depth first to exhaustion or to a time limit; states, transitions, depth, time, states/s, verdict."""

from __future__ import annotations

import argparse
import os
import time

from .explore import search
from .world import Config

CONFIGS = [
    ("3 peers x 1 message", dict(peers=3, messages=1)),
    ("2 peers x 2 messages", dict(peers=2, messages=2)),
    ("3 peers x 2 messages", dict(peers=3, messages=2)),
    ("3 x 1, crash 3", dict(peers=3, messages=1, crash=(3,))),
    ("3 x 1, join 1", dict(peers=3, messages=1, join=1)),
    ("3 x 1, leave 3", dict(peers=3, messages=1, leave=(3,))),
    ("3 x 1, cut 1,2/3 and heal", dict(peers=3, messages=1, cut=(frozenset({1, 2}), frozenset({3})))),
    ("3 x 1, cut 3>2 and heal", dict(peers=3, messages=1, cut_one_way=((3, 2),))),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/check", description=__doc__)
    p.add_argument("--time-limit", type=float, default=600.0, help="seconds per row (default 600)")
    p.add_argument("--only", choices=("lamport", "sequencer", "causal"), action="append")
    p.add_argument("--rows", type=int, nargs="*", help="row numbers (1-based) of the configurations to run")
    p.add_argument("--quick", action="store_true", help="the no-fault rows only, 60 s each")
    args = p.parse_args(argv)
    orders = args.only or ["lamport", "sequencer", "causal"]
    rows = [c for i, c in enumerate(CONFIGS, 1) if not args.rows or i in args.rows]
    limit = args.time_limit
    if args.quick:
        rows, limit = rows[:2], 60.0
    load = os.getloadavg()[0]
    print(f"# scripts/check, {time.strftime('%Y-%m-%d %H:%M')}, load {load:.2f}, time limit {limit:g} s per row\n")
    print("| order | configuration | states | transitions | depth | terminal | time (s) | states/s | search | verdict |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    worst = 0
    for order in orders:
        for name, kw in rows:
            r = search(Config(order=order, **kw), "dfs", time_limit=limit)
            verdict = "no violation" if r.found is None else f"VIOLATION: {r.found.violation}"
            worst = max(worst, 0 if r.found is None else 1)
            how = "exhaustive" if r.exhaustive else f"bounded ({r.bound})"
            print(f"| {order} | {name} | {r.states:,} | {r.transitions:,} | {r.depth} | {r.terminal:,} | "
                  f"{r.elapsed:.1f} | {r.rate:,.0f} | {how} | {verdict} |", flush=True)
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
