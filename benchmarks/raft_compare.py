"""A reference row for ``scripts/bench --peers-compare``: PySyncObj, a Python Raft library, on loopback.

PySyncObj is installed by this module into a venv of its own (``.venv-pysyncobj`` beside the project's
``.venv``; pip, from the package index) — never a dependency of TOM or of its tests. Its method is that
of PySyncObj's own benchmark (``benchmarks/benchmarks.py`` in its repository): ``n`` nodes on loopback
(3 by default), every node submits its share of ``R`` requests per second (a replicated method call
with a short random argument) for a while; ``R`` passes when at least 90 % of the requests are
committed (their callbacks report success); a bisection finds the highest passing ``R``. PySyncObj's
script submits for 25 s per try and repeats the search 5 times; here a try lasts ``--seconds`` (5 by
default) and the search runs once, so the figure is quicker and somewhat noisier.

With a journal folder (``journal``: ``scripts/bench --durable --peers-compare``, or ``--journal DIR``
here) every node keeps its Raft log on the disk: ``SyncObjConf(journalFile=..., fullDumpFile=...)``,
both files its own, fresh for every try. The dump goes with the journal because PySyncObj compacts its
log every 5,000 entries: what a compaction drops from the journal is then only in the dump. PySyncObj
0.3.17 writes its journal through an ``mmap`` and never calls ``fsync`` or ``msync`` on it while it
runs (``FileJournal.add``; ``flush`` only when the node is destroyed): an entry is in the kernel's page
cache when the node acknowledges it, so it survives the process's crash, not a power cut, as TOM's
``--fsync never``.

Every node is a process started here (`tom.tools.peers`), on 127.0.0.1 ports picked free, stopped
(SIGTERM, then SIGKILL) on any exit; every try is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

from tom.tools.peers import PeerGroup, PeerProcess, free_ports

PACKAGE = "pysyncobj==0.3.17"
PASS = 0.9  # the share of requests that must commit

NODE = r'''
import json, random, sys, time
from pysyncobj import SyncObj, SyncObjConf, replicated, FAIL_REASON

class Counter(SyncObj):
    def __init__(self, me, partners, conf):
        super().__init__(me, partners, SyncObjConf(dynamicMembershipChange=False, **conf))
        self.applied = 0

    @replicated
    def add(self, value):
        self.applied += 1

rate, seconds, conf = int(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
me, partners = sys.argv[4], sys.argv[5:]
node = Counter(me, partners, conf)
ok = sent = 0
def done(result, error):
    global ok
    if error == FAIL_REASON.SUCCESS:
        ok += 1
deadline = time.monotonic() + 30
while node._getLeader() is None:
    if time.monotonic() > deadline:
        print("NO LEADER", flush=True)
        sys.exit(2)
    time.sleep(0.1)
time.sleep(2.0)  # the others find the leader too
start = time.monotonic()
while time.monotonic() - start < seconds:
    second = time.monotonic()
    for _ in range(rate):
        node.add("%08x" % random.randrange(16 ** 8), callback=done)
        sent += 1
    spent = time.monotonic() - second
    if spent < 1.0:
        time.sleep(1.0 - spent)
time.sleep(3.0)  # let the last requests commit
print("RESULT %d %d" % (ok, sent), flush=True)
'''


class Unavailable(Exception):
    """The reference cannot run here (one line: why)."""


def ensure_venv(root: Path, package: str = PACKAGE, name: str = ".venv-pysyncobj") -> Path:
    """The python of ``root/name``, created with ``package`` (pip requirements, space-separated) installed if it is missing (a venv of the
    bench's own, beside the project's ``.venv``). Unavailable (one line, pip's last error line) if it
    cannot be installed; pip's output is shown only then."""
    env = root / name
    python = env / "bin" / "python"
    stamp = env / ".installed"
    if not stamp.exists() or stamp.read_text() != package:
        print(f"  installing {package} into {env} (once) ...", flush=True)
        try:
            venv.create(env, with_pip=True, clear=True)
            done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                   *package.split()], capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise Unavailable(f"cannot install {package} into {env}: {e}") from None
        if done.returncode != 0:
            errors = [line.strip() for line in done.stderr.splitlines()
                      if line.strip() and not line.startswith("WARNING: Location")]
            raise Unavailable(f"cannot install {package} into {env}: "
                              f"{errors[-1] if errors else f'pip exited with {done.returncode}'}")
        stamp.write_text(package)
    return python


def node_conf(journal: Path | None, i: int) -> dict[str, str]:
    """The ``SyncObjConf`` options of node ``i`` beyond the defaults: none in memory; with a ``journal``
    folder, its own journal and dump files there."""
    if journal is None:
        return {}
    return {"journalFile": str(journal / f"node-{i}.journal"), "fullDumpFile": str(journal / f"node-{i}.dump")}


def node_argv(python: Path, script: Path, per_node: int, seconds: float, conf: dict[str, str], me: str,
              partners: list[str]) -> list[str]:
    """The command line of one node (``NODE``): its share of the rate, the seconds it submits, its
    ``SyncObjConf`` options as JSON, its address and its partners'."""
    return [str(python), str(script), str(per_node), str(seconds), json.dumps(conf), me, *partners]


def one_try(python: Path, script: Path, nodes: int, rate: int, seconds: float, journal: Path | None = None) -> float:
    """The share of ``rate`` requests per second (over all nodes) that committed; 0.0 if a node failed.
    Each node's output goes to ``node-<i>.log`` beside ``script`` (overwritten by the next try); with
    ``journal``, the folder of the nodes' journals, emptied first (every try starts a fresh log)."""
    ports = sorted(free_ports(nodes))
    addrs = [f"127.0.0.1:{p}" for p in ports]
    per_node = max(1, rate // nodes)
    if journal is not None:
        shutil.rmtree(journal, ignore_errors=True)
        journal.mkdir(parents=True)
    with PeerGroup[int](grace=5.0) as group:
        for i, me in enumerate(addrs):
            partners = addrs[:i] + addrs[i + 1:]
            log = script.parent / f"node-{i}.log"
            log.unlink(missing_ok=True)
            group.start(i, PeerProcess(node_argv(python, script, per_node, seconds, node_conf(journal, i), me,
                                                 partners), log, stdin=False))
        end = time.monotonic() + seconds + 60
        shares = []
        for _, node in group.items():
            try:
                node.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                return 0.0
            line = next((ln for ln in node.log_text().splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                return 0.0
            ok, sent = map(int, line.split()[1:])
            shares.append(ok / max(1, sent))
        return sum(shares) / len(shares)


def highest_rate(root: Path, nodes: int = 3, seconds: float = 5.0, low: int = 1000, high: int = 64000,
                 step: int = 1000, journal: Path | None = None) -> int:
    """The highest request rate (requests per second over the group) of which >= 90 % commit; with
    ``journal``, the nodes keep their logs in that folder (`node_conf`)."""
    python = ensure_venv(root)
    with tempfile.TemporaryDirectory(prefix="tom-raft-") as tmp:
        script = Path(tmp) / "node.py"
        script.write_text(NODE)
        if one_try(python, script, nodes, low, seconds, journal) < PASS:
            return 0
        while high - low > step:
            mid = (low + high) // 2
            share = one_try(python, script, nodes, mid, seconds, journal)
            print(f"  PySyncObj, {nodes} nodes, {mid:,} requests/s: {100 * share:.1f}% committed", flush=True)
            if share >= PASS:
                low = mid
            else:
                high = mid
        return low


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.raft_compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=3, help="Raft nodes (default 3)")
    ap.add_argument("--seconds", type=float, default=5.0, help="seconds each try submits requests (default 5)")
    ap.add_argument("--journal", type=Path, help="keep every node's Raft log (journalFile, fullDumpFile) in this "
                                                 "folder, emptied before each try (default: in memory)")
    args = ap.parse_args(argv)
    if not 3 <= args.nodes <= 7 or not 1 <= args.seconds <= 60:
        ap.error("--nodes must be 3..7 and --seconds 1..60")
    root = Path(__file__).resolve().parent.parent
    try:
        rate = highest_rate(root, args.nodes, args.seconds, journal=args.journal)
    except Unavailable as e:
        print(f"PySyncObj not run: {e}", file=sys.stderr)
        return 2
    kept = f", journals in {args.journal}" if args.journal else ", in memory"
    print(f"PySyncObj ({PACKAGE}, Raft), {args.nodes} nodes on loopback{kept}: {rate:,} requests/s committed (>= 90 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
