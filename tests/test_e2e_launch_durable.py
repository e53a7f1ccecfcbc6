"""`scripts/launch` with durable peers, as a user runs it (``python -m tom.tools.launch``, headless, real
processes on loopback): every peer keeps a data folder in the run folder unless ``--no-data``, and the
``--restart PEER`` chaos kills a peer under load and starts it again with its own command line.

The promise checked: the restarted peer is no crashed peer; at the end its file, like every other,
holds the group's whole Lamport order, start to end, each message once, the stretch it missed written
as caught-up records.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from procs import free_ports, write_neighbors

pytestmark = pytest.mark.e2e

MESSAGES = 300


def launch(tmp_path: Path, ports: list[int], *flags: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    nb = write_neighbors(tmp_path / "nb.txt", ports)
    cmd = [sys.executable, "-m", "tom.tools.launch", str(nb), "--runs", str(tmp_path / "runs"), "--insecure",
           "--no-http", "--no-trace", "--no-verify", "--deadline", "30", *flags]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]  # and runs/latest
    return result, run_dir


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def key(r: dict) -> tuple:
    return (r["view"], r["clock"], r["pid"])


def test_a_restarted_peer_ends_with_the_groups_whole_order_like_the_others(tmp_path):
    ports = sorted(free_ports(3))
    restarted = f"127.0.0.1:{ports[1]}"
    result, run_dir = launch(tmp_path, ports, "--messages", str(MESSAGES), "--rate", "100",
                             "--restart", str(ports[1]))
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    files = {port: records(run_dir / f"out-{port}.jsonl") for port in ports}
    order = sorted({key(r) for recs in files.values() for r in recs if r["kind"] == "message"})
    assert len(order) == 3 * MESSAGES, "a text of the workload not delivered, or delivered twice"
    for port, recs in files.items():
        mine = [key(r) for r in recs if r["kind"] == "message"]
        assert len(mine) == len(set(mine)), f"{port}: a message twice"
        start = order.index(mine[0])
        assert mine == order[start:start + len(mine)], f"{port}: not a stretch of the group's order (a gap?)"
        assert mine == order, f"{port}: not the whole order"
        assert [r["index"] for r in recs] == list(range(1, len(recs) + 1)), f"{port}: indexes not 1..n"
        assert (run_dir / f"data-{port}" / "accepted.log").is_file(), f"{port}: no data folder in the run folder"
    mine = files[ports[1]]
    caught = [k for k, r in enumerate(mine) if r.get("caught_up")]
    assert caught, "the restarted peer caught up nothing"
    admitted = next(k for k, r in enumerate(mine) if k > caught[0] and r["kind"] == "view"
                    and restarted in r["joined"] and not r.get("caught_up"))
    assert caught[-1] < admitted, "caught-up records after the view that admitted it again"
    assert all(r.get("durable") for recs in files.values() for r in recs if r["kind"] == "view")
    report = " ".join(said.split())  # (rich wraps its lines)
    assert f"restart of {restarted}: SIGKILL at" in report and f"{len(caught)} event(s) caught up" in report, said


def test_no_data_starts_crash_stop_peers_and_restart_needs_durable_ones(tmp_path):
    ports = sorted(free_ports(3))
    result, run_dir = launch(tmp_path, ports, "--messages", "20", "--rate", "100", "--no-data")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not list(run_dir.glob("data-*")), "a data folder with --no-data"
    for port in ports:
        recs = records(run_dir / f"out-{port}.jsonl")
        assert sum(r["kind"] == "message" for r in recs) == 3 * 20
        assert not any(r.get("durable") for r in recs)

    refused = subprocess.run([sys.executable, "-m", "tom.tools.launch", str(tmp_path / "nb.txt"), "--runs",
                              str(tmp_path / "refused"), "--messages", "20", "--rate", "100", "--no-data",
                              "--restart", str(ports[0])], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    assert refused.returncode == 2
    assert " ".join(refused.stderr.split()).startswith("launch: error: --restart needs durable peers"), refused.stderr
    assert not (tmp_path / "refused").exists(), "a run folder for a refused run"
