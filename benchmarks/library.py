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
folder = "data-" + me.replace(":", "_")  # (durable kinds: in the run's folder, this machine's disk)
if kind.startswith("tom"):
    import tom
    counter = tom.ReplCounter(members, me, heartbeat=0.5, timeout=5.0, data=folder if kind == "tom-durable" else None)
    counter.start()
    counter.wait_admitted(60)
    while len(counter.members) < len(members):
        time.sleep(0.05)
    inc = counter.inc
    value = lambda: counter.value
else:
    from pysyncobj import SyncObj, SyncObjConf
    from pysyncobj.batteries import ReplCounter
    counter = ReplCounter()
    conf = SyncObjConf(journalFile=folder + ".journal", fullDumpFile=folder + ".dump") if kind == "pysyncobj-journal" else None
    node = SyncObj(me, [m for m in members if m != me], conf=conf, consumers=[counter])
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
if kind.startswith("tom"):
    counter.close()
'''


def counter_run(python: str, kind: str, workdir: Path, seconds: float, inflight: int, n: int = 3) -> dict:
    """One counter run of ``kind`` (tom or pysyncobj) with ``python``; its figures, or {"error": ...}."""
    script = workdir / "counter_node.py"
    script.write_text(NODE)
    addrs = [f"127.0.0.1:{p}" for p in sorted(free_ports(n))]
    start_at = time.time() + (8.0 if kind.startswith("tom") else 6.0)
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


DURABLE_NODE = r"""
import json, logging, os, signal, sys, threading, time
logging.basicConfig(level=logging.INFO, format="%(created).3f %(name)s %(message)s")
import tom
role, me, entries, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
members = sys.argv[5:]
stopping, writing = threading.Event(), threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stopping.set())
signal.signal(signal.SIGUSR1, lambda *a: writing.set())  # (then it sets a key 1,000 times a second)
store = tom.ReplDict(members, me, heartbeat=0.5, timeout=5.0, call_timeout=120.0, data=folder)
store.start()
store.wait_admitted(240)
print("ADMITTED %.3f %d %s" % (time.time(), len(store), store.get("tick")), flush=True)
if role == "fill" and len(store) < entries:
    value = "x" * 1018
    for first in range(0, entries, 50):  # 50 entries of 1 KB a call: one frame
        store.update({f"key{i:06d}": f"{i:06d}{value}" for i in range(first, min(entries, first + 50))})
    print("FILLED %.3f %d" % (time.time(), len(store)), flush=True)
if role == "first-call":
    store.set("after-restart", True)
    print("APPLIED %.3f" % time.time(), flush=True)
while not (stopping.is_set() or writing.is_set()):
    time.sleep(0.05)
if writing.is_set():
    k, t0 = 0, time.monotonic()
    while not stopping.is_set():
        store.set("tick", k)
        k += 1
        if k % 1000 == 0:
            print("TICK %.3f %d" % (time.time(), k), flush=True)
        time.sleep(max(0.0, t0 + k / 1000 - time.monotonic()))  # 1,000 a second
while not stopping.is_set():
    time.sleep(0.1)
print("FINAL %d %s" % (len(store), store.get("tick")), flush=True)
store.close()
"""


def durable_restart_run(python: str, workdir: Path, entries: int, behind: int = 10_000) -> dict:
    """A durable `tom.ReplDict` of ``entries`` entries of 1 KB on 3 members (folders on this machine's
    disk): all three SIGKILLed and started again (to the first call applied); then one SIGKILLed while
    another sets a key 1,000 times a second, started again ``behind`` calls later (to admitted: its
    state whole, what it missed caught up)."""
    import signal

    script = workdir / "durable_node.py"
    script.write_text(DURABLE_NODE)
    addrs = sorted((f"127.0.0.1:{p}" for p in free_ports(3)), key=lambda a: int(a.rsplit(":", 1)[1]))
    folders = [str(workdir / f"durable-{i}") for i in range(3)]

    def argv(role: str, i: int) -> list[str]:
        return [python, str(script), role, addrs[i], str(entries), folders[i], *addrs]

    def first_line(node: PeerProcess, tag: str, after: int = 0) -> str:
        end = time.monotonic() + 300
        while True:
            lines = [ln for ln in node.log_text().splitlines() if ln.startswith(tag + " ")]
            if len(lines) > after:
                return lines[after]
            if time.monotonic() > end or not node.running():
                raise RuntimeError(f"no {tag} line: {node.log_text()[-800:]}")
            time.sleep(0.05)

    out: dict = {}
    with PeerGroup[int](grace=15.0) as group:
        for i in range(3):
            group.start(i, PeerProcess(argv("fill" if i == 0 else "member", i), workdir / f"durable-{i}.log",
                                       stdin=False, cwd=workdir))
        first_line(group[0], "FILLED")
        time.sleep(3.0)  # (every member applies the fill; snapshots are written)
        for i in range(3):
            group[i].kill()
        for i in range(3):
            group[i].wait(20)
        sizes = [sum(f.stat().st_size for f in Path(folders[i]).rglob("*") if f.is_file()) for i in range(3)]
        started = time.time()
        for i in range(3):
            group.start(i, PeerProcess(argv("first-call" if i == 0 else "member", i), workdir / f"durable-{i}.log",
                                       stdin=False, cwd=workdir))
        applied = float(first_line(group[0], "APPLIED", 0).split()[1])
        admitted = [first_line(group[i], "ADMITTED", 1).split() for i in range(3)]
        out.update(whole_group=applied - started, admitted=[float(a[1]) - started for a in admitted],
                   keys=[int(a[2]) for a in admitted], folder_mb=[s / 2 ** 20 for s in sizes])
        # one member, ``behind`` calls behind
        group[2].kill()
        group[2].wait(20)
        group[0].send_signal(signal.SIGUSR1)
        first_line(group[0], "TICK", behind // 1000 - 1)
        started = time.time()
        group.start(2, PeerProcess(argv("member", 2), workdir / "durable-2r.log", stdin=False, cwd=workdir))
        caught = first_line(group[2], "ADMITTED").split()
        out.update(one_member=float(caught[1]) - started, tick=caught[3], keys_one=int(caught[2]))
        for i in range(3):
            group[i].send_signal(signal.SIGTERM)
        finals = [first_line(group[i], "FINAL").split() for i in range(3)]
        out["equal"] = len({(f[1]) for f in finals}) == 1
    return out


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


def main(seconds: float = 20.0, inflight: int = 16, entries: int = 100_000, only: str | None = None,
         durable: bool = False) -> int:
    from benchmarks.peergroup import loadavg
    from benchmarks.raft_compare import PACKAGE, Unavailable, ensure_venv

    root = Path(__file__).resolve().parent.parent
    status = 0
    with tempfile.TemporaryDirectory(prefix="tom-bench-library-", dir="/var/tmp" if durable else None) as tmp:
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
            kinds = (("tom-durable", sys.executable), ("pysyncobj-journal", pysyncobj)) if durable else (
                ("tom", sys.executable), ("pysyncobj", pysyncobj))
            for kind, python in kinds + kinds:
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
            mine, theirs = ("tom-durable", "pysyncobj-journal") if durable else ("tom", "pysyncobj")
            if rows.get(mine) and rows.get(theirs):
                best = lambda k: sorted(r["rate"] for r in rows[k])[len(rows[k]) // 2]
                print(f"  {mine} / {theirs} (median of each): {best(mine) / best(theirs):.2f}x; load average "
                      f"{loadavg()}", flush=True)
        if durable and only in (None, "state"):
            print(f"[library] durable ReplDict of {entries:,} entries of 1 KB, 3 members, folders on {workdir}; "
                  f"load average {loadavg()}", flush=True)
            try:
                r = durable_restart_run(sys.executable, workdir, entries)
            except RuntimeError as e:
                print(f"  FAILED: {e}", flush=True)
                return 1
            print(f"  all three SIGKILLed and started again: first call applied {r['whole_group']:.2f} s after; "
                  f"admitted {', '.join(f'{a:.2f}' for a in r['admitted'])} s, keys {r['keys']}; folders "
                  f"{', '.join(f'{m:.0f}' for m in r['folder_mb'])} MiB", flush=True)
            print(f"  one member started again 10,000 calls behind (1,000 a second going on): admitted, caught "
                  f"up, {r['one_member']:.2f} s after its start (tick {r['tick']}, {r['keys_one']:,} keys); "
                  f"replicas {'equal' if r['equal'] else 'DIFFER'}", flush=True)
            status |= 0 if r["equal"] else 1
        elif only in (None, "state"):
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
