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
    cmd = [sys.executable, "-m", "tom.tools.launch", str(nb), "--messages", "150", "--rate", "40", "--delay", "0.01",
           "--runs", str(tmp_path / "runs"), "--deadline", "90", *flags]
    if not verify:
        cmd.append("--no-verify")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]  # and runs/latest
    return result, run_dir


def test_kill_join_and_leave_under_load_keep_one_order(tmp_path):
    ports = sorted(free_ports(5))
    p = [f"127.0.0.1:{port}" for port in ports]
    # the smallest pid coordinates: it is the one that leaves, so its own leave is decided by another
    leaver, killed, late, survivors = p[0], p[2], p[4], [p[1], p[3]]
    result, run_dir = run_chaos(tmp_path, ports, "--kill", killed, "--join-late", late, "--leave", leaver)
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
    assert any(killed in r for _, _, _, r in changes), changes  # the killed peer was removed
    assert any(late in j for _, j, _, _ in changes[1:]), changes  # the late one joined
    assert any(leaver in l for _, _, l, _ in changes), changes  # the leaver left
    # the view the leaver left in (its last record) is the survivors' view too, field for field
    last = {k: v for k, v in files[leaver][-1].items() if k not in ("index", "peer", "delivered_at")}
    assert last["kind"] == "view" and last["left"] == [leaver], last
    for pid in survivors:
        assert last in [{k: v for k, v in r.items() if k not in ("index", "peer", "delivered_at")}
                        for r in files[pid]], pid
    # survivors and the leaver: every message of theirs reached every survivor
    for pid in survivors:
        got = {(r["pid"], r["text"]) for r in files[pid] if r["kind"] == "message"}
        for origin in (*survivors, leaver):
            assert sum(1 for o, _ in got if o == origin) == 150, (pid, origin)
    # the killed peer's messages: delivered by both survivors or by neither
    killed_msgs = [{(r["clock"], r["text"]) for r in files[s] if r["kind"] == "message" and r["pid"] == killed}
                   for s in survivors]
    assert killed_msgs[0] == killed_msgs[1]
    # the late joiner starts with the view it joined in, which the survivors delivered too
    assert seqs[late][0][0] == "view" and seqs[late][0] in seqs[survivors[0]]
    assert len([e for e in seqs[late] if e[0] == "message"]) > 0
