"""The wire protocols side by side on the pure core, without processes, sockets or machine noise.

``n`` static cores of one order exchange every frame through the text codec (format, then parse, as on
a link) in rounds: in each round every peer takes up to ``--batch`` frames waiting for it, multicasts
``k`` new messages, and ends its step (`Core.ready`). ``k`` sets the regime: 1 with small steps is a
steady moderate load, where wire 1 sends an ACK frame per origin and step and wire 2 lets the marks ride
on the next message; a large ``k`` with large steps is the saturated regime of ``scripts/bench``, where
wire 1's ACKS frames already carry a whole run. Figures: CPU-µs of the core and codec per multicast per
peer (``time.process_time``, best of ``--repeat`` runs, wires alternating) and frames per multicast.

Run: ``python -m benchmarks.core_steps [--peers 3,5] [--order lamport,causal] [--steps 1:4,8:64]
[--messages N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque

from tom.core import Core, Delivery
from tom.codec.frames import format_frame, parse_frame


def run(n: int, order: str, wire: int, per_peer: int, k: int, batch: int) -> tuple[float, float]:
    """CPU-µs per multicast per peer and frames per multicast, for one run."""
    pids = [f"127.0.0.1:{5000 + i}" for i in range(n)]
    cores = {p: Core(p, pids, order=order, wire=wire) for p in pids}
    inbox: dict[str, deque] = {p: deque() for p in pids}
    sent = dict.fromkeys(pids, 0)
    delivered = dict.fromkeys(pids, 0)
    total, frames, rounds = n * per_peer, 0, 0
    t0 = time.process_time()
    while min(delivered.values()) < total:
        rounds += 1
        if rounds > 100 * total + 1000:
            raise RuntimeError(f"no progress: delivered {delivered} of {total}")
        for p in pids:
            core, queue = cores[p], inbox[p]
            for _ in range(min(batch, len(queue))):
                src, line = queue.popleft()
                core.receive(src, parse_frame(line))
            for _ in range(k):
                if sent[p] < per_peer:
                    core.broadcast(f"t{p[-1]}.{sent[p]}", sent_at=1.0)
                    sent[p] += 1
            ready = core.ready()
            delivered[p] += sum(1 for d in ready.deliveries if type(d) is Delivery)
            for dests, frame in ready.sends:
                line = format_frame(frame)
                for d in dests:
                    inbox[d].append((p, line))
                frames += len(dests)
    return 1e6 * (time.process_time() - t0) / total / n, frames / total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.core_steps", description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", default="3,5", help="group sizes (default 3,5)")
    ap.add_argument("--order", default="lamport,causal", help="orders with ACKs (default lamport,causal)")
    ap.add_argument("--steps", default="1:4,8:64",
                    help="regimes K:B, comma-separated: K messages multicast and at most B frames taken per peer "
                         "and step (default 1:4,8:64)")
    ap.add_argument("--messages", type=int, default=5000, help="messages per peer (default 5000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure, best kept (default 3)")
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.peers.split(",")]
        steps = [tuple(int(y) for y in x.split(":")) for x in args.steps.split(",")]
    except ValueError:
        ap.error("--peers takes integers, --steps K:B pairs")
    if any(len(s) != 2 or min(s) < 1 for s in steps) or any(not 2 <= n <= 32 for n in sizes):
        ap.error("--steps takes K:B pairs of positive integers; group sizes are 2..32")
    if not 1 <= args.messages <= 1_000_000 or not 1 <= args.repeat <= 20:
        ap.error("--messages must be 1..1000000 and --repeat 1..20")
    orders = args.order.split(",")
    print(f"{'peers':>5} | {'order':>7} | {'K:B':>6} | {'wire 1 us/mc':>12} | {'wire 2 us/mc':>12} | "
          f"{'ratio':>5} | {'frames/mc 1 | 2':>15}")
    for n in sizes:
        for order in orders:
            for k, batch in steps:
                best = {1: (float("inf"), 0.0), 2: (float("inf"), 0.0)}
                for r in range(args.repeat):
                    for wire in ((1, 2) if r % 2 == 0 else (2, 1)):
                        us, fpm = run(n, order, wire, args.messages, k, batch)
                        best[wire] = min(best[wire], (us, fpm))
                (u1, f1), (u2, f2) = best[1], best[2]
                print(f"{n:>5} | {order:>7} | {f'{k}:{batch}':>6} | {u1:>12.2f} | {u2:>12.2f} | {u2 / u1:>5.2f} | "
                      f"{f1:>6.2f} | {f2:<6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
