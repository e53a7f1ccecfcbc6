"""Time to the first view, and to the view after a crash, against the link delay: real ``tom peer``
processes on loopback (plain TCP, headless), each with ``--delay D`` (and ``--jitter J``).

For each configuration: the peers start at once; the first view is when every peer has written a view
record; then the largest pid is SIGKILLed and the view after the crash is when every survivor has
written a view without it. A configuration that reaches neither within ``--give-up`` seconds says
"never". Every process is stopped (SIGTERM, then SIGKILL) before the next configuration starts.

    python -m benchmarks.slow_links --peers 3 --delays 0,0.5,1,2 [--jitter 2] [--src DIR]

``--src DIR`` runs the peers from another checkout (in it, its ``tom`` package first on PYTHONPATH,
interpreted), to compare builds in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from tom.tools.peers import PeerCommand, PeerGroup, PeerProcess, free_ports, write_neighbors


def views(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    text = path.read_text(errors="replace")
    out = []
    for line in text[:text.rfind("\n") + 1].splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("kind") == "view" and r.get("members"):
            out.append(r["members"])
    return out


def wait_until(check, give_up: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < give_up:
        if check():
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def measure(n: int, delay: float, jitter: float, give_up: float, src: str | None) -> tuple[float | None, float | None]:
    ports = sorted(free_ports(n))
    pids = [f"127.0.0.1:{p}" for p in ports]
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
        env["TOM_PURE"] = "1"
    with tempfile.TemporaryDirectory(prefix="tom-slow-") as tmp:
        work = Path(tmp)
        nb = write_neighbors(work / "nb.txt", pids)
        outs = [work / f"out-{p}.jsonl" for p in ports]
        group: PeerGroup[int] = PeerGroup(grace=10)
        try:
            for i, port in enumerate(ports):
                argv = PeerCommand(nb, outs[i], port, delay=delay, jitter=jitter).argv()
                group.start(i, PeerProcess(argv, work / f"log-{port}.txt", env=env, cwd=Path(src) if src else None))
            first = wait_until(lambda: all(views(o) for o in outs), give_up)
            if first is None:
                return None, None
            victim = n - 1
            group[victim].send_signal(signal.SIGKILL)
            after = wait_until(lambda: all(views(outs[i]) and pids[victim] not in views(outs[i])[-1]
                                           for i in range(n) if i != victim), give_up)
            return first, after
        finally:
            group.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", type=int, default=3)
    ap.add_argument("--delays", default="0,0.5,1,2,3,5")
    ap.add_argument("--jitter", type=float, default=0.0)
    ap.add_argument("--give-up", type=float, default=150.0)
    ap.add_argument("--src", default=None, help="run the peers from this checkout")
    args = ap.parse_args()
    print(f"{args.peers} peers, jitter {args.jitter} s, {'src ' + args.src if args.src else 'this checkout'}",
          flush=True)
    print(f"{'delay':>6} {'first view':>11} {'after a crash':>14}", flush=True)
    for d in (float(x) for x in args.delays.split(",")):
        first, after = measure(args.peers, d, args.jitter, args.give_up, args.src)
        fmt = lambda t: "never" if t is None else f"{t:.1f} s"  # noqa: E731
        print(f"{d:>6} {fmt(first):>11} {'-' if first is None else fmt(after):>14}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
