"""The main job end to end: the launch script's headless run of 3 real peers, then the Spark verifier
on their real output — verified; and the same files with one peer's file tampered — violated, with the
first divergence where the tampering is."""

import json
import shutil
import subprocess
import sys

import pytest

from procs import free_ports, write_neighbors

pytestmark = [pytest.mark.e2e, pytest.mark.spark,
              pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17+")]


def test_launch_then_verify_then_tamper(tmp_path):
    ports = free_ports(3)
    nb = write_neighbors(tmp_path / "nb.txt", ports)
    run = subprocess.run([sys.executable, "-m", "tom.launch", str(nb), "--messages", "60", "--rate", "100",
                          "--delay", "0.02", "--runs", str(tmp_path / "runs"), "--deadline", "60"],
                         capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout + run.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    report = json.loads((run_dir / "report.json").read_text())
    assert report["verdict"] == "VERIFIED" and report["counts"]["peers"] == 3, report["counts"]
    assert (run_dir / "report.html").stat().st_size > 1000
    assert "VERIFIED" in run.stdout + run.stderr

    # swap the contents of two consecutive message records of one peer, indexes left in place
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for f in run_dir.glob("out-*.jsonl"):
        shutil.copy(f, tampered / f.name)
    victim = tampered / f"out-{ports[1]}.jsonl"
    recs = [json.loads(line) for line in victim.read_text().split("\n") if line]
    k = next(i for i in range(5, len(recs) - 1) if recs[i]["kind"] == recs[i + 1]["kind"] == "message"
             and (recs[i]["clock"], recs[i]["pid"]) != (recs[i + 1]["clock"], recs[i + 1]["pid"]))
    for key in ("clock", "pid", "text", "sent_at"):
        recs[k][key], recs[k + 1][key] = recs[k + 1][key], recs[k][key]
    victim.write_text("".join(json.dumps(r) + "\n" for r in recs))
    check = subprocess.run([sys.executable, "-m", "analysis.verify", str(tampered), "--report-dir",
                            str(tmp_path / "report")], capture_output=True, text=True, timeout=400,
                           stdin=subprocess.DEVNULL)
    assert check.returncode == 1, check.stdout + check.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["verdict"] == "VIOLATED"
    divergences = report["checks"]["divergence"]["first"]
    pid = f"127.0.0.1:{ports[1]}"
    assert {d["position"] for d in divergences if pid in (d["peer_a"], d["peer_b"])} == {recs[k]["index"]}
    assert report["checks"]["order"]["count"] >= 1


def _launch_knows_orders() -> bool:
    out = subprocess.run([sys.executable, "-m", "tom.launch", "--help"], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    return "--order" in out.stdout


def test_causal_launch_then_verify_then_overtake(tmp_path):
    """Real peers in the causal order verify; the same files with one delivery moved in front of its
    causal predecessor (a message of a third peer) are VIOLATED, and the report names both."""
    if not _launch_knows_orders():
        pytest.skip("scripts/launch has no --order yet")
    ports = free_ports(3)
    nb = write_neighbors(tmp_path / "nb.txt", ports)
    run = subprocess.run([sys.executable, "-m", "tom.launch", str(nb), "--order", "causal", "--messages", "60",
                          "--rate", "100", "--delay", "0.02", "--jitter", "0.01", "--runs", str(tmp_path / "runs"),
                          "--deadline", "60", "--no-http"],
                         capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout + run.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    report = json.loads((run_dir / "report.json").read_text())
    assert (report["verdict"], report["order"]) == ("VERIFIED", "causal"), report.get("checks")

    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for f in run_dir.glob("out-*.jsonl"):
        shutil.copy(f, tampered / f.name)
    for victim in sorted(tampered.glob("out-*.jsonl")):
        peer = f"127.0.0.1:{victim.stem.split('-')[1]}"
        recs = [json.loads(line) for line in victim.read_text().split("\n") if line]
        found = None
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
    check = subprocess.run([sys.executable, "-m", "analysis.verify", str(tampered), "--report-dir",
                            str(tmp_path / "report")], capture_output=True, text=True, timeout=400,
                           stdin=subprocess.DEVNULL)
    assert check.returncode == 1, check.stdout + check.stderr
    assert check.stdout.splitlines()[0] == "VIOLATED (causal order)"
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    named = [(v["peer"], v["message"]["text"], v["overtook"] and v["overtook"]["text"])
             for v in report["checks"]["causal"]["first"]]
    assert (peer, m["text"], pred["text"]) in named, named
