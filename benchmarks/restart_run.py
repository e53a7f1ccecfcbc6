"""Durable peers through the crashes issue 42 describes: 3 peers on loopback (``--data`` each), each fed
1,500 messages at 150/s headless; at 30 % one peer is SIGKILLed and started again 2 s later with the
same command line; later all three are SIGKILLed at once and started again the same way, each feed
going on after what its data folder accepted. Prints, per peer, the messages in its file, how many are
distinct, how many were caught up, and how many accepted texts it misses.

    python -m benchmarks.restart_run [lamport|sequencer|causal] [--keys]

Uses the end-to-end tests' helper (tests/procs.py) to run the peers; every process is stopped.
"""
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from procs import PeerProcs  # noqa: E402

from tom.durable.log import read_log  # noqa: E402

order = sys.argv[1] if len(sys.argv) > 1 else "lamport"
secure = "--keys" in sys.argv
tmp = Path(tempfile.mkdtemp(prefix=f"scenario-{order}-", dir="/var/tmp"))
data = [tmp / f"data-{i}" for i in range(3)]
each = [("--data", str(d)) for d in data]
N, RATE = 1500, 150.0


def accepted(i):
    return [json.loads(p)["text"] for p in read_log(data[i] / "accepted.log").records if b'"text"' in p]

with PeerProcs(tmp, 3, secure=secure, extra=("--order", order), each=each) as g:
    start = time.monotonic()
    while not all(any(r["kind"] == "view" and len(r["members"]) == 3 for r in g.records(i)) for i in range(3)):
        time.sleep(0.1)
    nxt = [0, 0, 0]
    down = set()
    def feed_until(t_end):
        while time.monotonic() < t_end:
            for i in range(3):
                if i not in down and nxt[i] < N:
                    g.procs[i].send([f"p{i}-{nxt[i]}"]); nxt[i] += 1
            time.sleep(1 / RATE)
    t0 = time.monotonic()
    feed_until(t0 + 0.3 * N / RATE)           # 30 %
    g.procs[1].kill(); g.procs[1].wait(10); down.add(1)
    feed_until(time.monotonic() + 2.0)
    g.group.start(1, g.procs[1]); down.discard(1)
    nxt[1] = len(accepted(1))
    feed_until(time.monotonic() + 0.3 * N / RATE)  # later: all three at once
    for p in g.procs: p.kill()
    for p in g.procs: p.wait(10)
    time.sleep(2.0)
    for i in range(3):
        g.group.start(i, g.procs[i]); nxt[i] = len(accepted(i))
    feed_until(time.monotonic() + 2 * N / RATE)
    while any(n < N for n in nxt):
        feed_until(time.monotonic() + 1)
    want = set().union(*(set(accepted(i)) for i in range(3)))
    end = time.monotonic() + 90
    while time.monotonic() < end and not all(want <= {r.get("text") for r in g.records(i)} for i in range(3)):
        time.sleep(0.5)
    recs = [g.records(i) for i in range(3)]
    for i in range(3):
        texts = [r["text"] for r in recs[i] if r["kind"] == "message"]
        print(f"peer {i}: {len(texts)} messages, {len(set(texts))} distinct, caught up {sum(1 for r in recs[i] if r.get('caught_up'))},"
              f" missing accepted {len(want - set(texts))}, gaps {sum(1 for r in recs[i] if r['kind']=='gap')}")
    print("accepted everywhere:", len(want), "fed:", sum(nxt))
    print("run folder", tmp)
    g.terminate()
