"""Real peer processes under load with a crash (SIGKILL), a late join and a leave; the launch script's
chaos mode drives it, and the output files are checked for virtual synchrony."""

import json
import subprocess
import sys

import pytest

from procs import free_ports, write_neighbors

pytestmark = pytest.mark.e2e


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def event(r):
    return (r["kind"], r["clock"], r["pid"])


def run_chaos(tmp_path, ports, *flags, verify=False):
    nb = write_neighbors(tmp_path / "nb.txt", ports)
    cmd = [sys.executable, "-m", "tom.launch", str(nb), "--messages", "150", "--rate", "40", "--delay", "0.01",
           "--runs", str(tmp_path / "runs"), "--deadline", "90", *flags]
    if not verify:
        cmd.append("--no-verify")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    (run_dir,) = (tmp_path / "runs").iterdir()
    return result, run_dir


def test_kill_join_and_leave_under_load_keep_one_order(tmp_path):
    ports = free_ports(5)
    p = [f"127.0.0.1:{port}" for port in ports]
    result, run_dir = run_chaos(tmp_path, ports, "--kill", p[2], "--join-late", p[4], "--leave", p[3])
    assert result.returncode == 0, result.stdout + result.stderr
    files = {pid: records(run_dir / f"out-{pid.rsplit(':', 1)[1]}.jsonl") for pid in p}
    seqs = {pid: [event(r) for r in recs] for pid, recs in files.items()}
    # one order: any two peers agree on everything both delivered, and on what lies in between
    for a, sa in seqs.items():
        for b, sb in seqs.items():
            if sb[0] in sa:
                start = sa.index(sb[0])
                overlap = min(len(sa) - start, len(sb))
                assert sa[start:start + overlap] == sb[:overlap], f"{a} and {b} diverge"
    views = {r["view"]: r for recs in files.values() for r in recs if r["kind"] == "view"}
    changes = [(v, r["joined"], r["left"], r["removed"]) for v, r in sorted(views.items())]
    assert any(p[2] in r for _, _, _, r in changes), changes  # the killed peer was removed
    assert any(p[4] in j for _, j, _, _ in changes[1:]), changes  # the late one joined
    assert any(p[3] in l for _, _, l, _ in changes), changes  # the leaver left
    # survivors and the leaver: every message of theirs reached every survivor
    survivors = [p[0], p[1]]
    for pid in survivors:
        got = {(r["pid"], r["text"]) for r in files[pid] if r["kind"] == "message"}
        for origin in (p[0], p[1], p[3]):
            assert sum(1 for o, _ in got if o == origin) == 150, (pid, origin)
    # the killed peer's messages: delivered by both survivors or by neither
    killed = [{(r["clock"], r["text"]) for r in files[s] if r["kind"] == "message" and r["pid"] == p[2]}
              for s in survivors]
    assert killed[0] == killed[1]
    # the late joiner starts with the view it joined in, which the survivors delivered too
    assert seqs[p[4]][0][0] == "view" and seqs[p[4]][0] in seqs[p[0]]
    assert len([e for e in seqs[p[4]] if e[0] == "message"]) > 0
