"""The main job end to end, in each order, as a user runs it: `scripts/launch --order X` with 4 real
peers, delay and jitter, then the Spark verifier on their real output (VERIFIED, the records in the
order's schema); the same files tampered — VIOLATED, with the fault named where the tampering is (two
records swapped: the first divergence, Lamport; a delivery moved before its causal predecessor: both
messages, causal); and peers of different orders refusing each other with one line on each side,
plain and secured."""

import json
import shutil
import subprocess
import sys
import time

import pytest

from procs import PeerProcs, free_ports, write_neighbors
from tests.spark_java import spark_java

ORDERS = ("lamport", "sequencer", "causal")


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


@pytest.mark.e2e
@pytest.mark.spark
@pytest.mark.skipif(not spark_java(), reason="Spark needs Java 17+")
@pytest.mark.parametrize("order", ORDERS)
def test_launch_each_order_with_delay_and_jitter_is_verified(tmp_path, order, spark_remote):
    ports = free_ports(4)
    nb = write_neighbors(tmp_path / "nb.txt", ports)
    run = subprocess.run([sys.executable, "-m", "tom.tools.launch", str(nb), "--order", order, "--messages", "40",
                          "--rate", "40", "--delay", "0.02", "--jitter", "0.04", "--no-http",
                          "--runs", str(tmp_path / "runs"), "--deadline", "90"],
                         capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "VERIFIED" in out, out
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]  # and runs/latest
    report = json.loads((run_dir / "report.json").read_text())
    assert report["verdict"] == "VERIFIED" and report["counts"]["peers"] == 4, report["counts"]
    for port in ports:
        recs = records(run_dir / f"out-{port}.jsonl")
        views = [r for r in recs if r["kind"] == "view"]
        messages = [r for r in recs if r["kind"] == "message"]
        assert len(messages) == 4 * 40 and all(r["v"] == 2 for r in recs)
        assert views and all(v["order"] == order for v in views)
        assert all(("seq" in r) == (order == "sequencer") and ("vc" in r) == (order == "causal") for r in messages)
    assert (run_dir / "report.html").stat().st_size > 1000
    if order == "lamport":
        swap_two_records_and_find_the_divergence(tmp_path, run_dir, ports)
    elif order == "causal":
        move_a_delivery_before_its_cause_and_find_both(tmp_path, run_dir)


def tampered_copy(tmp_path, run_dir):
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for f in run_dir.glob("out-*.jsonl"):
        shutil.copy(f, tampered / f.name)
    return tampered


def verify_violated(tmp_path, folder) -> tuple[str, dict]:
    check = subprocess.run([sys.executable, "-m", "analysis.verify", str(folder), "--report-dir",
                            str(tmp_path / "report")], capture_output=True, text=True, timeout=400,
                           stdin=subprocess.DEVNULL)
    assert check.returncode == 1, check.stdout + check.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["verdict"] == "VIOLATED"
    return check.stdout, report


def swap_two_records_and_find_the_divergence(tmp_path, run_dir, ports):
    """The contents of two consecutive message records of one peer swapped, indexes left in place:
    the first divergence of that peer with each other is at the first of them."""
    victim = tampered_copy(tmp_path, run_dir) / f"out-{ports[1]}.jsonl"
    recs = records(victim)
    k = next(i for i in range(5, len(recs) - 1) if recs[i]["kind"] == recs[i + 1]["kind"] == "message"
             and (recs[i]["clock"], recs[i]["pid"]) != (recs[i + 1]["clock"], recs[i + 1]["pid"]))
    for key in ("clock", "pid", "text", "sent_at"):
        recs[k][key], recs[k + 1][key] = recs[k + 1][key], recs[k][key]
    victim.write_text("".join(json.dumps(r) + "\n" for r in recs))
    _, report = verify_violated(tmp_path, victim.parent)
    pid = f"127.0.0.1:{ports[1]}"
    divergences = report["checks"]["divergence"]["first"]
    assert {d["position"] for d in divergences if pid in (d["peer_a"], d["peer_b"])} == {recs[k]["index"]}
    assert report["checks"]["order"]["count"] >= 1


def move_a_delivery_before_its_cause_and_find_both(tmp_path, run_dir):
    """One delivery moved in front of its causal predecessor (a message of a third peer): the report
    names both."""
    tampered = tampered_copy(tmp_path, run_dir)
    found = None
    for victim in sorted(tampered.glob("out-*.jsonl")):
        peer = f"127.0.0.1:{victim.stem.split('-')[1]}"
        recs = records(victim)
        for k, m in enumerate(recs):
            deps = [q for q, n in (m.get("vc") or {}).items() if q not in (m["pid"], peer) and n >= 1]
            if deps:
                q, n = deps[0], m["vc"][deps[0]]
                i = next(i for i, r in enumerate(recs) if r["kind"] == "message" and r["pid"] == q
                         and r["view"] == m["view"] and r["vc"][q] == n)
                found = (i, k, m, recs[i])
                break
        if found:
            break
    assert found, "no message depending on a third peer's message"
    i, k, m, pred = found
    moved = recs[:i] + [m] + recs[i:k] + recs[k + 1:]
    victim.write_text("".join(json.dumps(dict(r, index=x + 1)) + "\n" for x, r in enumerate(moved)))
    out, report = verify_violated(tmp_path, tampered)
    assert out.splitlines()[0] == "VIOLATED (causal order)"
    named = [(v["peer"], v["message"]["text"], v["overtook"] and v["overtook"]["text"])
             for v in report["checks"]["causal"]["first"]]
    assert (peer, m["text"], pred["text"]) in named, named


@pytest.mark.e2e
@pytest.mark.parametrize("secure", [False, True], ids=["plain", "secured"])
def test_neighbors_of_different_orders_refuse_each_other_with_one_line_each(tmp_path, secure):
    low, high = sorted(free_ports(2))
    a, b = f"127.0.0.1:{low}", f"127.0.0.1:{high}"
    with PeerProcs(tmp_path, 2, secure=secure, ports=[low, high], each=[(), ("--order", "sequencer")]) as group:
        want = {0: f"{b} runs the sequencer order, this peer the lamport order: connection refused",
                1: f"{a} runs the lamport order, this peer the sequencer order: connection refused"}
        end = time.monotonic() + 20
        while time.monotonic() < end and not all(want[i] in group.logs[i].read_text() for i in want):
            time.sleep(0.1)
        for i, line in want.items():
            log = group.logs[i].read_text()
            lines = [ln for ln in log.splitlines() if "order, this peer the" in ln]
            assert lines and lines[0].endswith(line) and "Traceback" not in log, group.log_text()
        # each forms a group of its own: what one sends, the other never delivers
        group.send(0, ["from the lamport peer"])
        end = time.monotonic() + 20
        while time.monotonic() < end and not group.messages(0):
            time.sleep(0.1)
        assert [r["text"] for r in group.messages(0)] == ["from the lamport peer"], group.log_text()
        assert not group.messages(1)
