"""``scripts/bench --library``: TOM as a library against PySyncObj, and a state transfer.

**Replicated counter.** 3 member processes on loopback, each with ``--inflight`` threads calling the
counter's increment as fast as they can (a blocking call: ``inflight`` calls in flight per member)
for ``--seconds``: TOM's `tom.ReplCounter` (``inc()``, returns once applied here) against PySyncObj's
``ReplCounter`` (``inc(sync=True)``, its default configuration, installed into ``.venv-pysyncobj`` as
for ``--peers-compare``). Figures: increments per second applied at every member (the calls completed
in the window, all members together; every member's counter must end at the same value) and the p50
and p99 latency of a call.

**State transfer.** 3 members share a `tom.ReplDict` of ``--entries`` entries of 1 KB (the same
initial state, built in each process) while one of them sets a key 1,000 times a second; a fourth
member starts, joins and takes the state. Figures: from the joiner's process start to its first
delivery after the state (``wait_admitted``), the joiner's and the sender's peak RSS (VmHWM), and
whether the joiner's dict equals the others'.

Every process is started here on 127.0.0.1 ports picked free and stopped on any exit (`tom.tools.peers`).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from tom.tools.peers import PeerGroup, PeerProcess, free_ports

NODE = r'''
import json, sys, threading, time
kind, me, seconds, inflight, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
members = sys.argv[6:]
if kind == "tom":
    import tom
    counter = tom.ReplCounter(members, me, heartbeat=0.5, timeout=5.0)
    counter.start()
    counter.wait_admitted(60)
    while len(counter.members) < len(members):
        time.sleep(0.05)
    inc = counter.inc
    value = lambda: counter.value
else:
    from pysyncobj import SyncObj
    from pysyncobj.batteries import ReplCounter
    counter = ReplCounter()
    node = SyncObj(me, [m for m in members if m != me], consumers=[counter])
    deadline = time.monotonic() + 60
    while node._getLeader() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    inc = lambda: counter.inc(sync=True)
    value = counter.get
time.sleep(max(0.0, start_at - time.time()))
end = time.monotonic() + seconds
lat = []
errors = []
def work():
    mine = []
    try:
        while time.monotonic() < end:
            t = time.perf_counter()
            inc()
            mine.append(time.perf_counter() - t)
    except Exception as e:
        errors.append(repr(e))
    lat.extend(mine)
threads = [threading.Thread(target=work) for _ in range(inflight)]
for t in threads: t.start()
for t in threads: t.join()
last, stable = None, 0
while stable < 10:  # the others' last calls apply here too
    time.sleep(0.2)
    v = value()
    stable = stable + 1 if v == last else 0
    last = v
lat.sort()
print("RESULT " + json.dumps({"calls": len(lat), "value": last, "errors": errors[:3],
      "p50": lat[len(lat) // 2] if lat else None, "p99": lat[int(len(lat) * 0.99)] if lat else None}), flush=True)
if kind == "tom":
    counter.close()
'''


def counter_run(python: str, kind: str, workdir: Path, seconds: float, inflight: int, n: int = 3) -> dict:
    """One counter run of ``kind`` (tom or pysyncobj) with ``python``; its figures, or {"error": ...}."""
    script = workdir / "counter_node.py"
    script.write_text(NODE)
    addrs = [f"127.0.0.1:{p}" for p in sorted(free_ports(n))]
    start_at = time.time() + (8.0 if kind == "tom" else 6.0)
    results = []
    with PeerGroup[int](grace=10.0) as group:
        for i, me in enumerate(addrs):
            log = workdir / f"{kind}-{i}.log"
            log.unlink(missing_ok=True)
            group.start(i, PeerProcess([python, str(script), kind, me, str(seconds), str(inflight), str(start_at),
                                        *addrs], log, stdin=False, cwd=workdir))
        deadline = time.monotonic() + seconds + 120
        for _, node in group.items():
            node.wait(max(1.0, deadline - time.monotonic()))
            line = next((ln for ln in node.log_text().splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                return {"error": f"a {kind} member said no result: {node.log_text()[-400:]}"}
            results.append(json.loads(line[7:]))
    values = {r["value"] for r in results}
    calls = sum(r["calls"] for r in results)
    return {"rate": calls / seconds, "calls": calls, "values": sorted(values), "agree": len(values) == 1,
            "p50": sorted(r["p50"] for r in results)[n // 2], "p99": max(r["p99"] for r in results),
            "errors": [e for r in results for e in r["errors"]]}


STATE_NODE = r"""
import hashlib, json, logging, os, signal, sys, threading, time
logging.basicConfig(level=logging.INFO, format="%(created).3f %(name)s %(message)s")
import tom
role, me, entries = sys.argv[1], sys.argv[2], int(sys.argv[3])
members = sys.argv[4:]

class Store(tom.ReplDict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if role != "joiner":  # the group's state: the same in every founding member
            self._data = {f"key{i:06d}": f"{i:06d}" + "x" * 1018 for i in range(entries)}

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
stopping = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stopping.set())
store = Store(members, me, heartbeat=0.5, timeout=10.0, call_timeout=60.0)
store.start()
store.wait_admitted(180)
if role == "joiner":
    print("ADMITTED %.3f %d" % (time.time() - float(os.environ["STARTED_AT"]), len(store)), flush=True)
def write(first):
    k, t0 = first, time.monotonic()
    while not stopping.is_set():
        store.set("tick", k)
        k += 2
        time.sleep(max(0.0, t0 + (k - first) / 1000 - time.monotonic()))  # 500 a second a thread
if role == "writer":
    for first in (0, 1):
        threading.Thread(target=write, args=(first,), daemon=True).start()
print("READY %d" % len(store), flush=True)
stopping.wait()
time.sleep(1.0 if role == "writer" else 0.0)
peak = hwm()  # (before the digest below, which copies the whole dict twice)
digest = hashlib.sha256(json.dumps(sorted(store.items())).encode()).hexdigest()[:16]
print("FINAL %d %d %s" % (peak, len(store), digest), flush=True)
store.close()
"""


def _line(node: PeerProcess, tag: str) -> str | None:
    return next((ln for ln in node.log_text().splitlines() if ln.startswith(tag + " ")), None)


def _wait_line(node: PeerProcess, tag: str, seconds: float) -> str:
    end = time.monotonic() + seconds
    while (line := _line(node, tag)) is None:
        if time.monotonic() > end or not node.running():
            raise RuntimeError(f"no {tag} line: {node.log_text()[-600:]}")
        time.sleep(0.05)
    return line


def state_transfer_run(python: str, workdir: Path, entries: int) -> dict:
    """Three members holding ``entries`` entries of 1 KB (one writing 1,000 sets a second), then a
    fourth that joins and takes the state: its figures (the module docstring)."""
    import os
    import signal

    script = workdir / "state_node.py"
    script.write_text(STATE_NODE)
    addrs = sorted((f"127.0.0.1:{p}" for p in free_ports(4)), key=lambda a: int(a.rsplit(":", 1)[1]))
    roles = ["writer", "member", "member", "joiner"]
    with PeerGroup[int](grace=15.0) as group:
        for i in range(3):
            group.start(i, PeerProcess([python, str(script), roles[i], addrs[i], str(entries), *addrs],
                                       workdir / f"state-{i}.log", stdin=False, cwd=workdir))
        for i in range(3):
            _wait_line(group[i], "READY", 240)
        time.sleep(2.0)  # the writer's sets flow
        started = time.time()
        env = dict(os.environ, STARTED_AT=repr(started))
        group.start(3, PeerProcess([python, str(script), "joiner", addrs[3], str(entries), *addrs],
                                   workdir / "state-3.log", stdin=False, cwd=workdir, env=env))
        admitted = _wait_line(group[3], "ADMITTED", 240).split()
        time.sleep(2.0)
        group[0].send_signal(signal.SIGTERM)  # the writer stops first, then the others
        _wait_line(group[0], "FINAL", 60)
        time.sleep(1.0)
        for i in (1, 2, 3):
            group[i].send_signal(signal.SIGTERM)
        finals = [_wait_line(group[i], "FINAL", 60).split() for i in range(4)]
    return {"seconds": float(admitted[1]), "keys": int(admitted[2]), "state_mb": entries * 1024 / 2 ** 20,
            "joiner_hwm": int(finals[3][1]), "sender_hwm": int(finals[0][1]),  # the least pid sends
            "others_hwm": [int(f[1]) for f in finals[1:3]],
            "equal": len({f[3] for f in finals[1:]}) == 1, "digests": [f[3] for f in finals]}


def main(seconds: float = 20.0, inflight: int = 16, entries: int = 100_000, only: str | None = None) -> int:
    from benchmarks.peergroup import loadavg
    from benchmarks.raft_compare import PACKAGE, Unavailable, ensure_venv

    root = Path(__file__).resolve().parent.parent
    status = 0
    with tempfile.TemporaryDirectory(prefix="tom-bench-library-") as tmp:
        workdir = Path(tmp)
        if only in (None, "counter"):
            rows = {}
            print(f"[library] replicated counter, 3 members, {inflight} calls in flight per member, {seconds:.0f} s "
                  f"each; load average {loadavg()}", flush=True)
            try:
                pysyncobj = str(ensure_venv(root, PACKAGE))
            except Unavailable as e:
                print(f"  PySyncObj not run: {e}")
                pysyncobj = None
            for kind, python in (("tom", sys.executable), ("pysyncobj", pysyncobj), ("tom", sys.executable),
                                 ("pysyncobj", pysyncobj)):
                if python is None:
                    continue
                r = counter_run(python, kind, workdir, seconds, inflight)
                if "error" in r:
                    print(f"  {kind}: FAILED: {r['error']}", flush=True)
                    status = 1
                    continue
                rows.setdefault(kind, []).append(r)
                print(f"  {kind:9}: {r['rate']:9,.0f} increments/s applied at every member; call p50 "
                      f"{1000 * r['p50']:.2f} ms, p99 {1000 * r['p99']:.2f} ms; counters {r['values']}"
                      f"{'' if r['agree'] else ' DISAGREE'}{'; errors ' + str(r['errors']) if r['errors'] else ''}",
                      flush=True)
                status |= 0 if r["agree"] and not r["errors"] else 1
            if rows.get("tom") and rows.get("pysyncobj"):
                best = lambda k: sorted(r["rate"] for r in rows[k])[len(rows[k]) // 2]
                print(f"  TOM / PySyncObj (median of each): {best('tom') / best('pysyncobj'):.2f}x; load average "
                      f"{loadavg()}", flush=True)
        if only in (None, "state"):
            print(f"[library] state transfer: a ReplDict of {entries:,} entries of 1 KB, 1,000 sets a second, "
                  f"a fourth member joins; load average {loadavg()}", flush=True)
            try:
                r = state_transfer_run(sys.executable, workdir, entries)
            except RuntimeError as e:
                print(f"  FAILED: {e}", flush=True)
                return 1
            print(f"  joiner: started to admitted with the state {r['seconds']:.2f} s ({r['keys']:,} keys, "
                  f"{r['state_mb']:.0f} MiB of values); peak RSS joiner {r['joiner_hwm']} MiB, sender "
                  f"{r['sender_hwm']} MiB (the others {r['others_hwm']}); replicas "
                  f"{'equal' if r['equal'] else 'DIFFER ' + str(r['digests'])}", flush=True)
            status |= 0 if r["equal"] else 1
    return status
