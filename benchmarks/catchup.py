"""How long a durable peer takes to catch up, and a group restarted as a whole to deliver again: real
``tom peer --data`` processes on loopback (plain TCP, headless), data folders on this machine's disk.

* catch-up: 3 peers; the last is SIGKILLed, the others deliver ``--behind`` messages without it, then it
  is started again with the same command line while peer 0 is fed ``--rate`` messages a second. Times,
  from the restart: its first caught-up record written (started, admitted again, asked, answered: its
  ``delivered_at``), and its file holding every message the others delivered before the restart
  (complete; the file is only counted while it runs, parsed once after).
* whole group: ``--peers`` peers deliver a few messages, are all SIGKILLed at once and started again
  together; time from the restart to the first message delivered after it at every peer, and how
  much of it is the founding (the view that founds the group again in every file).

    python -m benchmarks.catchup [--behind 20000] [--rate 1000] [--peers 5] [--data-root DIR]

Every process is stopped (SIGTERM, then SIGKILL) before the next measure; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from tom.tools.peers import PeerCommand, PeerGroup, PeerProcess, free_ports, write_neighbors

FAST = ("--heartbeat", "0.2", "--timeout", "1")


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    text = path.read_text(errors="replace")
    out = []
    for line in text[:text.rfind("\n") + 1].splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def count_messages(path: Path) -> int:
    if not path.exists():
        return 0
    return path.read_bytes().count(b'"kind":"message"')


def wait_until(check, give_up: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < give_up:
        if check():
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def start_group(work: Path, n: int) -> tuple[PeerGroup[int], list[Path], list[PeerProcess]]:
    ports = sorted(free_ports(n))
    nb = write_neighbors(work / "nb.txt", [f"127.0.0.1:{p}" for p in ports])
    outs = [work / f"out-{p}.jsonl" for p in ports]
    group: PeerGroup[int] = PeerGroup(grace=10)
    procs = []
    for i, port in enumerate(ports):
        argv = PeerCommand(nb, outs[i], port, extra=(*FAST, "--data", str(work / f"data-{port}"))).argv()
        procs.append(group.start(i, PeerProcess(argv, work / f"log-{port}.txt")))
    return group, outs, procs


def settle(procs: list[PeerProcess], outs: list[Path], give_up: float = 60.0) -> None:
    mark = f"settle-{time.monotonic_ns()}".encode()
    procs[0].send([mark.decode()])
    if wait_until(lambda: all(o.exists() and mark in o.read_bytes() for o in outs), give_up) is None:
        raise SystemExit("the group did not form")


def catch_up(work: Path, behind: int, rate: float, give_up: float) -> tuple[float | None, float | None, int]:
    group, outs, procs = start_group(work, 3)
    try:
        settle(procs, outs)
        procs[2].kill()
        procs[2].wait(10)
        target = count_messages(outs[0])
        for k in range(0, behind, 1000):
            procs[k // 1000 % 2].send([f"behind-{k + j}" for j in range(min(1000, behind - k))])
        if wait_until(lambda: count_messages(outs[0]) >= target + behind - 1 and count_messages(outs[1]) >= target
                      + behind - 1, give_up) is None:
            raise SystemExit(f"the survivors did not deliver the backlog: {count_messages(outs[0])}, "
                             f"{count_messages(outs[1])} of {target + behind}; {(work / 'nb.txt').read_text()}"
                             + "".join(p.log.read_text()[-1500:] for p in procs))
        want = count_messages(outs[0])
        stop = threading.Event()

        def feed() -> None:
            k = 0
            while not stop.is_set():
                procs[0].send([f"live-{k}"])
                k += 1
                time.sleep(1.0 / rate)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        before = len(records(outs[2]))
        start, wall = time.monotonic(), time.time()
        group.start(2, procs[2])
        # (a cheap check while it runs: the file is parsed once, after)
        complete = wait_until(lambda: count_messages(outs[2]) >= want, give_up)
        done = None if complete is None else time.monotonic() - start
        stop.set()
        feeder.join(5)
        after = records(outs[2])[before:]
        caught = [r for r in after if r.get("caught_up")]
        # when the restarted peer wrote its first caught-up record (it was admitted, asked and answered):
        # its own clock, on this machine
        first = caught[0]["delivered_at"] - wall if caught else None
        return first, done, len(caught)
    finally:
        group.stop()


def whole_group(work: Path, n: int, give_up: float) -> tuple[float | None, float | None]:
    group, outs, procs = start_group(work, n)
    try:
        settle(procs, outs)
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(10)
        sizes = [len(records(o)) for o in outs]
        start = time.monotonic()
        for i, p in enumerate(procs):
            group.start(i, p)
        founded = wait_until(lambda: all(any(r.get("kind") == "view" for r in records(o)[s:])
                                         for o, s in zip(outs, sizes)), give_up)
        mark = "after-restart"
        procs[0].send([mark])
        first = wait_until(lambda: all(any(r.get("text") == mark for r in records(o)[s:])
                                       for o, s in zip(outs, sizes)), give_up)
        return founded, None if first is None else time.monotonic() - start
    finally:
        group.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--behind", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--peers", type=int, default=5, help="the whole-group restart's group size")
    ap.add_argument("--give-up", type=float, default=120.0)
    ap.add_argument("--data-root", type=Path, default=Path("/var/tmp"),
                    help="where the run's folder goes (a real disk, not tmpfs; default /var/tmp)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tom-catchup-", dir=args.data_root) as tmp:
        first, complete, caught = catch_up(Path(tmp), args.behind, args.rate, args.give_up)
        fmt = lambda t: "never" if t is None else f"{t:.2f} s"  # noqa: E731
        print(f"catch-up, {args.behind} behind, the group going on at {args.rate:.0f}/s: first caught-up "
              f"record written {fmt(first)} after the restart (admitted, asked, answered), file complete "
              f"{fmt(complete)} after it ({caught} caught-up records)", flush=True)
    with tempfile.TemporaryDirectory(prefix="tom-whole-", dir=args.data_root) as tmp:
        founded, first = whole_group(Path(tmp), args.peers, args.give_up)
        print(f"whole group of {args.peers} killed and started again: founded again {fmt(founded)} after the "
              f"restart, first new delivery at every peer {fmt(first)} after it", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
