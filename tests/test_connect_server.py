"""The suite's and the bench's Spark Connect server program (analysis/connect_server.py) without a
JVM: how it ends when stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

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
