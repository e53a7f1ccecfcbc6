"""A Spark Connect server on loopback: a local Spark session with pyspark's own Connect plugin, for
tests and benchmarks.

``with local_connect_server(log_dir) as url:`` runs this module as a program in its own process
group: it starts a ``local[N]`` SparkSession with ``spark.plugins`` the Connect plugin (the
spark-connect jar ships in pyspark's ``jars/``), bound to 127.0.0.1 only, and yields
``sc://127.0.0.1:PORT`` once the port accepts connections. The start is bounded in time; on exit
the process group (whose id is the pid started here) gets SIGTERM, then SIGKILL.
:class:`ConnectServerUnavailable` says in one line why a server could not be had.
:func:`start_connect_server` and :func:`stop_group` are the two halves, for a server that outlives
the process that started it (the test suite's, shared by its workers, stopped by its controller).
The server's driver is a Python process: it writes its py4j gateway's port and secret to
``gateway.json`` in the log folder, with which another Python process of this machine can work on
the same JVM (the test suite's workers do).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

GATEWAY = "gateway.json"
PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"


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
    followed by up to ``wait_s`` seconds for the whole group to be gone. The script is reaped meanwhile
    if this process started it (a zombie still counts in its group): by ``proc`` when given (which
    keeps its exit status), else by the group's id."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if proc is not None:
                proc.poll()
            else:
                _reap_children_in(pgid)
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def _reap_children_in(pgid: int) -> None:
    """Reap the children of this process in group ``pgid`` that have ended, without waiting."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-pgid, os.WNOHANG)[0]:
            pass


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
    returned process's pid; return that process and the server's URL once it accepts connections
    and its ``gateway.json`` is written. It runs until :func:`stop_group` stops it; a start that
    fails is stopped here and raises :class:`ConnectServerUnavailable`."""
    import pyspark

    from analysis.session import use_java
    if use_java() is None:
        raise ConnectServerUnavailable("Java 17+ is required")
    if not list((Path(pyspark.__file__).parent / "jars").glob("spark-connect_*.jar")):
        raise ConnectServerUnavailable("no spark-connect jar in this pyspark")
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT",
                        "PYSPARK_GATEWAY_SECRET")}
    args = [sys.executable, str(Path(__file__).resolve()), str(log_dir), str(port), f"local[{cores}]",
            json.dumps(conf or {})]
    log = log_dir / "connect-server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=log_dir)
    try:
        deadline = time.monotonic() + timeout_s
        while not (log_dir / GATEWAY).exists():
            if proc.poll() is not None:
                last = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1][:200]
                raise ConnectServerUnavailable(f"the server exited with {proc.returncode} ({last}); see {log}")
            if time.monotonic() > deadline:
                raise ConnectServerUnavailable(f"not listening after {timeout_s:.0f} s; see {log}")
            time.sleep(0.3)
    except BaseException:
        stop_group(proc.pid, proc=proc)
        raise
    return proc, f"sc://127.0.0.1:{port}"


def exit_on_sigterm() -> None:
    """Make SIGTERM end this process with status 0 through ``sys.exit``, so that its exit handlers
    run (a coverage run's data is written by one): by default SIGTERM kills a Python process at once."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))


def serve(log_dir: Path, port: int, master: str, conf: dict[str, str], timeout_s: float = 120.0) -> None:
    """The server's program: a ``master`` SparkSession with the Connect plugin on 127.0.0.1:``port``
    and ``conf``; once the port accepts connections, ``gateway.json`` (written whole, by a rename);
    then it waits to be stopped: SIGTERM (:func:`stop_group`) ends it as a program ends, its exit
    handlers run (:func:`exit_on_sigterm`)."""
    exit_on_sigterm()
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # read by the JVM at start: bind nothing else
    from pyspark.sql import SparkSession
    settings = {"spark.plugins": PLUGIN, "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(port),
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", **conf}
    spark = SparkSession.builder.master(master).appName("tom-connect-server").config(map=settings).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    deadline = time.monotonic() + timeout_s
    while not _listening(port):
        if time.monotonic() > deadline:
            sys.exit(f"the Connect plugin did not listen on port {port} within {timeout_s:.0f} s")
        time.sleep(0.2)
    params = spark.sparkContext._gateway.gateway_parameters
    tmp = log_dir / (GATEWAY + ".tmp")
    tmp.write_text(json.dumps({"port": params.port, "secret": params.auth_token}))
    tmp.rename(log_dir / GATEWAY)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]))
