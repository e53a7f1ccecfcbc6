"""A Spark Connect server on loopback from pyspark's own scripts, for tests and benchmarks.

``with local_connect_server(log_dir) as url:`` runs ``sbin/start-connect-server.sh --wait`` (the
spark-connect jar ships in pyspark's ``jars/``) in its own process group, bound to 127.0.0.1 only,
``local[N]``, and yields ``sc://127.0.0.1:PORT`` once the port accepts connections. The start is
bounded in time; on exit the process group (whose id is the pid started here) gets SIGTERM, then
SIGKILL. :class:`ConnectServerUnavailable` says in one line why a server could not be had.
:func:`start_connect_server` and :func:`stop_group` are the two halves, for a server that outlives
the process that started it (the test suite's, shared by its workers, stopped by its controller).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


class ConnectServerUnavailable(Exception):
    """The server could not be started here (the message says why)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def stop_group(pgid: int, wait_s: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM, then SIGKILL, to the process group ``pgid`` (a server's script and its JVM), each
    followed by up to ``wait_s`` seconds for the whole group to be gone; ``proc``, the script if this
    process started it, is reaped meanwhile."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if proc is not None:
                proc.poll()  # a zombie script still counts in its group
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


@contextlib.contextmanager
def local_connect_server(log_dir: Path, *, cores: int = 1, timeout_s: float = 120.0,
                         conf: dict[str, str] | None = None) -> Iterator[str]:
    """Run a Spark Connect server on 127.0.0.1 for the duration of the block; yield its URL."""
    proc, url = start_connect_server(log_dir, cores=cores, timeout_s=timeout_s, conf=conf)
    try:
        yield url
    finally:
        stop_group(proc.pid, proc=proc)


def start_connect_server(log_dir: Path, *, cores: int = 1, timeout_s: float = 120.0,
                         conf: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """Start a Spark Connect server on 127.0.0.1 in a process group of its own, whose id is the
    returned process's pid; return that process and the server's URL once it accepts connections.
    It runs until :func:`stop_group` stops it; a start that fails is stopped here and raises
    :class:`ConnectServerUnavailable`."""
    import shutil

    import pyspark

    from analysis.session import connect_available
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ConnectServerUnavailable("Java 17+ is required")
    if not connect_available():
        raise ConnectServerUnavailable("the Spark Connect client libraries are missing "
                                       "(pip install 'pyspark[connect]')")
    home = Path(pyspark.__file__).parent
    script = home / "sbin" / "start-connect-server.sh"
    if not script.exists() or not list((home / "jars").glob("spark-connect_*.jar")):
        raise ConnectServerUnavailable(f"no {script} or spark-connect jar in this pyspark")
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=str(log_dir), SPARK_PID_DIR=str(log_dir),
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT"):
        env.pop(name, None)
    settings = {"spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(port),
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false", **(conf or {})}
    args = ["bash", str(script), "--wait", "--master", f"local[{cores}]"]
    for k, v in settings.items():
        args += ["--conf", f"{k}={v}"]
    log = log_dir / "connect-server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=log_dir)
    try:
        deadline = time.monotonic() + timeout_s
        while not _listening(port):
            if proc.poll() is not None:
                raise ConnectServerUnavailable(f"the server exited with {proc.returncode}; see {log}")
            if time.monotonic() > deadline:
                raise ConnectServerUnavailable(f"not listening after {timeout_s:.0f} s; see {log}")
            time.sleep(0.5)
    except BaseException:
        stop_group(proc.pid, proc=proc)
        raise
    return proc, f"sc://127.0.0.1:{port}"
