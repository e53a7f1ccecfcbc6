"""Write a synthetic, correct schema-v2 run of one order, to time the verifier on it.

``python -m benchmarks.orders_run DIR --order causal --peers 4 --per-peer 250000`` writes
``DIR/peer0.jsonl`` ... (``peers x per-peer`` records). The run is one view of ``peers`` members
(a view record first, naming the order). In round ``r`` every member sends one message; it had
delivered all of round ``r - 1`` first, so a causal message's ``vc`` is ``r - 1`` for the others and
``r`` for its origin, and the round's messages are concurrent: each peer delivers them in its own
(pseudo-random, fixed) order. A sequencer run numbers the messages in one order that every peer
follows; a Lamport run delivers them by ``(clock, pid)``.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

T0 = 1_763_766_000.0


def write_run(folder: Path, order: str, peers: int, per_peer: int) -> list[Path]:
    """Write the run; return the files. ``per_peer`` is rounded down to whole rounds (plus the
    view record)."""
    folder.mkdir(parents=True, exist_ok=True)
    pids = [f"127.0.0.1:{5000 + i}" for i in range(peers)]
    rounds = max(1, (per_peer - 1) // peers)
    paths = []
    for p, peer in enumerate(pids):
        rng = random.Random(p)
        path = folder / f"peer{p}.jsonl"
        paths.append(path)
        view = {"v": 2, "kind": "view", "index": 1, "peer": peer, "clock": 1, "pid": pids[0],
                "delivered_at": T0, "view": 1, "members": pids, "joined": pids, "left": [],
                "removed": [], "order": order}
        if order == "sequencer":
            view["seq"] = 0
        with open(path, "w", buffering=1 << 22) as f:
            f.write(json.dumps(view, separators=(",", ":")) + "\n")
            index = 1
            chunk = []
            for r in range(1, rounds + 1):
                senders = list(range(peers))
                if order == "causal":
                    rng.shuffle(senders)
                for o in senders:
                    index += 1
                    sent = T0 + r * 0.001 + o * 1e-5
                    extra = ""
                    if order == "sequencer":
                        extra = f',"seq":{(r - 1) * peers + o + 1}'
                    elif order == "causal":
                        vc = ",".join(f'"{q}":{r if i == o else r - 1}' for i, q in enumerate(pids)
                                      if i == o or r > 1)
                        extra = f',"vc":{{{vc}}}'
                    chunk.append(f'{{"v":2,"kind":"message","index":{index},"peer":"{peer}",'
                                 f'"clock":{r + 1},"pid":"{pids[o]}","text":"round {r} from {pids[o]}",'
                                 f'"sent_at":{sent:.6f},"delivered_at":{sent + 0.002:.6f},"view":1'
                                 f'{extra}}}\n')
                if len(chunk) >= 50_000:
                    f.write("".join(chunk))
                    chunk.clear()
            f.write("".join(chunk))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--order", choices=("lamport", "sequencer", "causal"), default="causal")
    parser.add_argument("--peers", type=int, default=4)
    parser.add_argument("--per-peer", type=int, default=250_000)
    args = parser.parse_args()
    paths = write_run(args.folder, args.order, args.peers, args.per_peer)
    print(f"{len(paths)} files, {sum(1 for p in paths for _ in open(p)):,} records in {args.folder}")


if __name__ == "__main__":
    main()
