"""The three orders end to end, as a user runs them: `scripts/launch --order X` with 4 real peers, delay
and jitter, then the Spark verifier (VERIFIED, the records in the order's schema); and peers of
different orders refusing each other with one line on each side, plain and secured."""

import json
import shutil
import subprocess
import sys
import time

import pytest

from procs import PeerProcs, free_ports, write_neighbors

ORDERS = ("lamport", "sequencer", "causal")


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


@pytest.mark.e2e
@pytest.mark.spark
@pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17+")
@pytest.mark.parametrize("order", ORDERS)
def test_launch_each_order_with_delay_and_jitter_is_verified(tmp_path, order):
    ports = free_ports(4)
    nb = write_neighbors(tmp_path / "nb.txt", ports)
    run = subprocess.run([sys.executable, "-m", "tom.launch", str(nb), "--order", order, "--messages", "40",
                          "--rate", "40", "--delay", "0.02", "--jitter", "0.04", "--no-http",
                          "--runs", str(tmp_path / "runs"), "--deadline", "90"],
                         capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "VERIFIED" in out, out
    (run_dir,) = (tmp_path / "runs").iterdir()
    report = json.loads((run_dir / "report.json").read_text())
    assert report["verdict"] == "VERIFIED" and report["counts"]["peers"] == 4, report["counts"]
    for port in ports:
        recs = records(run_dir / f"out-{port}.jsonl")
        views = [r for r in recs if r["kind"] == "view"]
        messages = [r for r in recs if r["kind"] == "message"]
        assert len(messages) == 4 * 40 and all(r["v"] == 2 for r in recs)
        assert views and all(v["order"] == order for v in views)
        assert all(("seq" in r) == (order == "sequencer") and ("vc" in r) == (order == "causal") for r in messages)


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
