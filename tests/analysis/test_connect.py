"""``tom verify --remote sc://...`` against a real Spark Connect server on loopback.

The server is the suite's one Spark JVM (tests/suite_spark.py: :mod:`analysis.connect_server`'s,
pyspark's Connect plugin in a local session bound to 127.0.0.1, start bounded in time, stopped by
its process group), the one this test process shares with the e2e tests' verifies. Where it cannot start (no Java, no script,
no Connect client libraries, no port within the bound) the tests are skipped with the reason. The
verifier runs as a user would: the CLI in a fresh process (a process that has built a Connect
session is in Connect mode for good, so it cannot share this test process's local session).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.analysis.conftest import PEERS, run_of

pytestmark = pytest.mark.spark
A, B, C = PEERS
EVENTS = [(1, A), (1, B), (2, A), (2, C), (3, B), (4, A), (5, C)]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def connect_url(connect_server):
    """``sc://127.0.0.1:PORT`` of the Spark Connect server of this test process (tests/conftest.py's
    ``connect_server``, which the e2e tests' verifies use too)."""
    url, why = connect_server
    if url is None:
        print(f"Spark Connect server not started: {why}")
        pytest.skip(f"Spark Connect server not started: {why}")
    return url


def _write_run(folder: Path, run: dict[str, list[dict]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for peer, recs in run.items():
        (folder / f"{peer.replace(':', '_')}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recs))


def _tom_verify(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_GATEWAY_PORT")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "tom.cli", "verify", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def _comparable(report_dir: Path) -> tuple[dict, str]:
    """report.json without timings and how the order was checked (a Connect session has no scan
    check: the window), and report.html without its "checked in N s" line."""
    rep = json.loads((report_dir / "report.json").read_text())
    rep.pop("timing")
    rep.pop("order_check", None)
    page = re.sub(r"checked in [0-9.]+ s", "checked in - s", (report_dir / "report.html").read_text())
    return rep, page


def _verdict_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if not line.startswith(("checked in", "report:", "picture:"))]


def _healthy_and_faulty(root: Path) -> tuple[Path, Path]:
    _write_run(root / "healthy", run_of(EVENTS))
    run = run_of(EVENTS)
    recs = list(run[B])
    recs[2], recs[3] = recs[3], recs[2]
    run[B] = [dict(r, index=i + 1) for i, r in enumerate(recs)]
    _write_run(root / "faulty", run)
    return root / "healthy", root / "faulty"


@pytest.mark.parametrize("how", ["--remote", "SPARK_REMOTE"])
def test_connect_gives_the_local_verdict_report_and_picture(connect_url, spark, tmp_path, capsys, how):
    """A healthy run through ``--remote``, a faulty one (exact path too) through ``SPARK_REMOTE``."""
    from analysis import verify

    healthy, faulty = _healthy_and_faulty(tmp_path)
    folder, code = (healthy, 0) if how == "--remote" else (faulty, 1)
    capsys.readouterr()
    local_code = verify.main([str(folder), "--report-dir", str(tmp_path / "local")])
    local_out = capsys.readouterr().out
    remote_dir = tmp_path / "remote"
    if how == "--remote":
        remote = _tom_verify(str(folder / "*.jsonl"), "--remote", connect_url,
                             "--report-dir", str(remote_dir))
    else:
        remote = _tom_verify(str(folder), "--report-dir", str(remote_dir),
                             env_extra={"SPARK_REMOTE": connect_url})
    assert (local_code, remote.returncode) == (code, code), remote.stdout + remote.stderr
    assert _verdict_lines(remote.stdout) == _verdict_lines(local_out)
    assert "spark-driver.log" not in os.listdir(remote_dir)  # no local JVM was started
    rep_local, page_local = _comparable(tmp_path / "local")
    rep_remote, page_remote = _comparable(remote_dir)
    rep_local["inputs"] = rep_remote["inputs"]  # the only thing that differs: how we named them
    # a small input in a session of its own (the server's session for this client) is verified with
    # interpreted expressions; a session the verifier was given (the tests') is left as it is
    assert rep_remote.pop("spark_settings") == verify.SMALL_INPUT_CONF
    assert "spark_settings" not in rep_local
    assert rep_remote == rep_local
    assert page_remote == page_local


def test_unreachable_connect_server_is_one_line(tmp_path):
    _write_run(tmp_path / "run", run_of(EVENTS))
    from analysis.connect_server import free_port

    done = _tom_verify(str(tmp_path / "run"), "--remote", f"sc://127.0.0.1:{free_port()}")
    assert done.returncode == 2
    assert len(done.stdout.strip().splitlines()) == 1 and "cannot connect" in done.stdout
    assert "Traceback" not in done.stderr
