"""The suite's and the bench's Spark Connect server program (analysis/connect_server.py) without a
JVM: how it ends when stopped, and what a start that fails says."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_sigterm_ends_the_server_program_through_its_exit_handlers(tmp_path):
    mark = tmp_path / "exited"
    program = (f"import atexit, pathlib, time; from analysis.connect_server import exit_on_sigterm; "
               f"exit_on_sigterm(); atexit.register(pathlib.Path({str(mark)!r}).write_text, 'handlers ran'); "
               f"print('ready', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", program], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert mark.read_text() == "handlers ran"


def _fake_server(tmp_path: Path, monkeypatch, body: str) -> None:
    """The server's program replaced by a shell script (``sys.executable`` runs it, with the program's
    arguments), on a machine taken to have Java: what `start_connect_server` does when the program
    fails, without a JVM."""
    import analysis.session

    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(script))
    monkeypatch.setattr(analysis.session, "use_java", lambda: "java")


def test_a_start_without_java_says_so_in_one_line(monkeypatch, tmp_path):
    import analysis.session
    from analysis.connect_server import ConnectServerUnavailable, start_connect_server

    monkeypatch.setattr(analysis.session, "use_java", lambda: None)
    with pytest.raises(ConnectServerUnavailable, match=r"^Java 17\+ is required$"):
        start_connect_server(tmp_path / "log")


def test_a_server_program_that_exits_is_reported_with_its_status_and_last_line(monkeypatch, tmp_path):
    from analysis.connect_server import ConnectServerUnavailable, start_connect_server

    _fake_server(tmp_path, monkeypatch, "echo starting; echo 'no room for the JVM'; exit 3")
    with pytest.raises(ConnectServerUnavailable) as caught:
        start_connect_server(tmp_path / "log", timeout_s=30)
    assert str(caught.value).startswith("the server exited with 3 (no room for the JVM); see ")


def test_a_server_that_never_gets_ready_is_stopped_with_its_whole_group(monkeypatch, tmp_path):
    """Past its start's time bound the server's group gets SIGTERM: the script and what it started."""
    from analysis.connect_server import ConnectServerUnavailable, start_connect_server

    child = tmp_path / "child.pid"
    _fake_server(tmp_path, monkeypatch, f"sleep 60 & echo $! > {child}; wait")
    with pytest.raises(ConnectServerUnavailable, match=r"^not listening after 1 s; see "):
        start_connect_server(tmp_path / "log", timeout_s=1.0)
    pid = int(child.read_text())
    try:  # gone, or a zombie its new parent has not reaped yet
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z"), state


def test_stopping_a_group_whose_script_this_process_started_reaps_it():
    """The suite's session owner stops the JVM a worker, or (in one process) itself, started: with no
    ``proc`` in hand, a script that ended stays a zombie of this process, which still counts in its
    group, until it is reaped; then the stop returns instead of waiting for its time out."""
    import os

    from analysis.connect_server import stop_group

    script = subprocess.Popen(["sleep", "60"], start_new_session=True)
    pgid = script.pid
    script.returncode = 0  # the handle forgotten, as a session owner holds only the group's id
    stop_group(pgid, wait_s=3.0)
    with pytest.raises(ChildProcessError):
        os.waitpid(pgid, os.WNOHANG)  # reaped by the stop
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
