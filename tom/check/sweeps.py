"""The randomized sweeps of a tree's tests, seed by seed: run by path, in a process of its own per tree
(``scripts/core-diff sweep`` starts it), with ``python -P tom/check/sweeps.py TREE OUT``.

It imports nothing of the tree it lives in: TREE's ``tom`` and ``tests/`` go first on ``sys.path``,
and the sweeps are the tests' own functions (``simnet.random_scenario`` and ``guarantees.check`` —
in a tree from before the one network, ``dynsim.random_scenario`` and ``dynsim.check`` —, and
``test_simulation.run_seed``) with the tests' own seed counts (``test_dynamic.SEEDS`` and the others,
which read ``TOM_DYN_SEEDS`` and its siblings), times a multiplier. Every seed runs, failing or not:
OUT gets, per sweep and order, each seed's failure (if any) and a digest of what every peer delivered
(so two trees can be compared seed by seed, not only by their failures).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib
import json
import sys
import time
from pathlib import Path

SWEEPS = ("dynamic", "no-quorum", "partition", "edge", "founding", "simulation", "regressions")


def _plain(d: object) -> tuple:
    """A delivery's fields, plain (its class may move or be renamed; its fields are what it says)."""
    out = []
    for f in dataclasses.fields(d):  # type: ignore[arg-type]
        v = getattr(d, f.name)
        out.append((f.name, tuple(sorted(v.items())) if isinstance(v, dict) else v))
    return tuple(out)


def _digest(parts: object) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=6).hexdigest()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sweeps.py", description=__doc__)
    p.add_argument("tree", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--multiplier", type=float, default=1.0)
    p.add_argument("--sweeps", default="all")
    p.add_argument("--orders", default="")
    p.add_argument("--paired", metavar="REV", help="run the sweeps on paired cores (tom.check.differential): "
                   "this tree's core against git revision REV's, compared at every step")
    args = p.parse_args(argv)
    tree = args.tree.resolve()
    sys.path[:0] = [str(tree / "tests"), str(tree)]
    tom = importlib.import_module("tom")  # this tree's (imported by name: nothing here is tom's own)
    if Path(str(tom.__file__)).resolve().parent != tree / "tom":
        raise SystemExit(f"sweeps.py: imported {tom.__file__}, not {tree}/tom")
    if (tree / "tests" / "simnet.py").is_file():  # one network (simnet.py), the checks beside it
        import guarantees
        import simnet

        random_scenario, check, networks = simnet.random_scenario, guarantees.check, ["simnet"]
    else:  # a tree of before: two simulators, the checks in dynsim.py
        import dynsim

        random_scenario, check, networks = dynsim.random_scenario, dynsim.check, ["dynsim", "netsim"]
    import test_dynamic
    import test_simulation
    from tom.core import ORDERS

    if args.paired:  # every core the simulations build is a pair, old and new
        from tom.check import differential

        differential.load_old(args.paired, repo=tree)
        for name in networks:
            setattr(importlib.import_module(name), "Core", differential.PairedCore)

    orders = [o for o in args.orders.split(",") if o] or list(ORDERS)
    m = args.multiplier

    def count(n: int) -> int:
        return max(1, round(n * m))

    digest = [""]  # what the seed being run delivered (set before its checks, so a failing seed has one too)

    def scenario(**kwargs):
        def run(seed: int, order: str) -> None:
            sim = random_scenario(seed, order=order, **kwargs)
            # (``gone`` as text: an older core said "left" with its Mode, whose repr is another)
            digest[0] = _digest([(n.pid, n.incarnation, str(n.gone), [_plain(d) for d in n.delivered])
                                 for n in sim.history] + sim.log)
            check(sim)
        return run

    if hasattr(test_simulation, "Network"):  # to see the network `run_seed` builds (its deliveries)
        class Recording(test_simulation.Network):  # type: ignore[name-defined,misc]
            def run(self, *a, **k):
                try:
                    return super().run(*a, **k)
                finally:
                    digest[0] = _digest(sorted((pid, [_plain(d) for d in ds]) for pid, ds in self.delivered.items()))

        test_simulation.Network = Recording  # type: ignore[misc]

    def simulation(seed: int, order: str) -> None:
        test_simulation.run_seed(seed, order)

    known = [[order, seed, why] for (order, seed), why in sorted(getattr(test_dynamic, "FOUNDING_KNOWN", {}).items())]
    plan = {
        "dynamic": (count(test_dynamic.SEEDS), orders, scenario()),
        "no-quorum": (count(200), ["lamport"], scenario(quorum="none")),
        "partition": (count(test_dynamic.PARTITION_SEEDS), orders, scenario(partitions=True)),
        "edge": (count(test_dynamic.EDGE_SEEDS), orders, scenario(edges=True)),
        "founding": (count(test_dynamic.FOUNDING_SEEDS), orders, scenario(partitions=True, founding=True)),
        "simulation": (count(test_simulation.SEEDS), orders, simulation),
    }
    # the seeds the tests name (regressions, and the known limits, expected to fail): (order, key, run, seed)
    regressions = (
        [("lamport", f"dynamic:{s}{'/batching' if b else ''}", scenario(batching=b), s)
         for s in test_dynamic.REGRESSIONS for b in (False, True)]
        + [(o, f"dynamic:{s}", scenario(), s) for o, s in test_dynamic.ORDER_REGRESSIONS]
        + [(o, f"partition:{s}", scenario(partitions=True), s) for o, s in test_dynamic.PARTITION_REGRESSIONS]
        + [(o, f"founding:{s}", scenario(partitions=True, founding=True), s)
           for o, s in list(test_dynamic.FOUNDING_REGRESSIONS) + sorted(getattr(test_dynamic, "FOUNDING_KNOWN", {}))])
    out: dict = {"tree": str(tree), "sweeps": {}, "known": known, "paired": args.paired or ""}
    chosen = list(SWEEPS) if args.sweeps == "all" else [s for s in args.sweeps.split(",") if s]
    for name in chosen:
        if name not in SWEEPS:
            raise SystemExit(f"sweeps.py: unknown sweep {name!r}: {', '.join(SWEEPS)}")
    for name in chosen:
        if name == "regressions":
            by_order: dict[str, list] = {}
            for o, key, run, seed in regressions:
                if o in orders:
                    by_order.setdefault(o, []).append((key, run, seed))
        else:
            n, sweep_orders, run = plan[name]
            by_order = {o: [(str(s), run, s) for s in range(n)] for o in sweep_orders if o in orders}
        for order, seeds in by_order.items():
            started = time.perf_counter()
            results: dict[str, dict] = {}
            for key, run, seed in seeds:
                digest[0] = ""
                try:
                    run(seed, order)
                    results[key] = {"digest": digest[0]}
                except Exception as e:  # every seed runs: a failure is recorded, not raised
                    first = (str(e).strip().splitlines() or [""])[0]
                    results[key] = {"digest": digest[0], "failed": f"{type(e).__name__}: {first}"[:300]}
                    if type(e).__name__ == "CoreMismatch":
                        results[key]["mismatch"] = "\n".join(str(e).splitlines()[:60])
            failed = sum(1 for r in results.values() if "failed" in r)
            out["sweeps"].setdefault(name, {})[order] = {"seeds": len(seeds), "results": results,
                                                        "seconds": time.perf_counter() - started}
            print(f"  {tree.name}: {name} {order}: {len(seeds)} seeds, {failed} failing, "
                  f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    args.out.write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
