"""The verifier on what the real core delivers: seeded dynamic-group simulations of each order
(tests/simnet.py: joins, leaves, crashes, restarts), written as schema-v2 files, must verify; a causal
one tampered so that a peer delivers a message before its causal predecessor must not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import verify

pytestmark = pytest.mark.spark
SEEDS = {"sequencer": 5, "causal": 5}  # each has a crash (simnet seed 5); Lamport: test_dynamic_groups


def v2_record(d, peer: str) -> dict:
    """The schema-v2 record of a delivery (docs/output-format.md)."""
    from tom.core import ViewDelivery

    base = {"v": 2, "index": d.index, "peer": peer, "clock": d.clock, "pid": d.pid,
            "delivered_at": 1_763_766_000.0 + d.index, "view": d.view}
    if isinstance(d, ViewDelivery):
        rec = dict(base, kind="view", members=list(d.members), joined=list(d.joined),
                   left=list(d.left), removed=list(d.removed), order=d.order)
        return dict(rec, seq=0) if d.order == "sequencer" else rec
    rec = dict(base, kind="message", text=d.text,
               sent_at=d.sent_at if d.sent_at is not None else 1_763_766_000.0)
    if d.seq is not None:
        rec["seq"] = d.seq
    if d.vc is not None:
        rec["vc"] = dict(d.vc)
    return rec


def simulated(order: str, seed: int) -> dict[str, list[dict]]:
    """Each pid's records over all its incarnations (a restarted peer appends to its file)."""
    from simnet import random_scenario

    sim = random_scenario(seed, order=order)
    assert any(n.gone == "crashed" for n in sim.history), "the seed is meant to hold a crash"
    out: dict[str, list[dict]] = {}
    for node in sim.history:
        out.setdefault(node.pid, []).extend(v2_record(d, node.pid) for d in node.delivered)
    return {pid: recs for pid, recs in out.items() if recs}


def write_files(folder: Path, run: dict[str, list[dict]]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for pid, recs in run.items():
        (folder / f"{pid.replace(':', '_')}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recs))
    return [f"file:{p}" for p in sorted(folder.glob("*.jsonl"))]


@pytest.mark.parametrize("order", list(SEEDS))
def test_simulated_run_of_each_order_verifies(spark, tmp_path, order):
    rep = verify.verify(spark, write_files(tmp_path, simulated(order, SEEDS[order]))).as_json()
    bad = {k: c["first"][:2] for k, c in rep.get("checks", {}).items() if c["count"]}
    assert (rep["verdict"], rep["order"]) == ("VERIFIED", order), bad


def test_simulated_causal_run_tampered_names_the_overtaken_predecessor(spark, tmp_path):
    run = simulated("causal", SEEDS["causal"])
    # at some peer, a message m of another origin whose vc names a message of a third member q that
    # this peer delivered before m: move m in front of that predecessor
    for pid, recs in sorted(run.items()):
        msgs = [r for r in recs if r["kind"] == "message"]
        for j, m in enumerate(msgs):
            deps = [q for q, n in m["vc"].items() if q not in (m["pid"], pid) and n >= 1]
            if not deps:
                continue
            q, n = deps[0], m["vc"][deps[0]]
            pred = next(r for r in msgs if r["pid"] == q and r["view"] == m["view"] and r["vc"][q] == n)
            i = recs.index(pred)
            k = recs.index(m)
            moved = recs[:i] + [m] + [r for r in recs[i:k]] + recs[k + 1:]
            run[pid] = [dict(r, index=recs[0]["index"] + x) for x, r in enumerate(moved)]
            break
        else:
            continue
        break
    else:
        pytest.fail("no message with a predecessor from a third member in the simulated run")
    rep = verify.verify(spark, write_files(tmp_path, run)).as_json()
    assert (rep["verdict"], rep["order"]) == ("VIOLATED", "causal")
    found = rep["checks"]["causal"]["first"]
    assert any(v["peer"] == pid and v["message"]["clock"] == m["clock"] and v["message"]["pid"] == m["pid"]
               and v["overtook"] == {"clock": pred["clock"], "pid": pred["pid"], "text": pred["text"]}
               for v in found), found
