"""The suite's one Spark JVM: the analysis tests' local Spark and the suite's Spark Connect server in
one driver, shared by every worker.

It is a Spark Connect server of :mod:`analysis.connect_server` (a local session with the Connect
plugin, in a process group of its own) with :data:`SUITE_CONF`. A worker attaches to its py4j
gateway (:func:`attach`) and works in a session of its own (``newSession``: its own settings, views
and functions over the shared SparkContext); the e2e tests' and the docs' ``tom verify`` reach the
same JVM through Spark Connect. The suite's controller stops its group (tests/conftest.py). One JVM
starts, loads Spark's classes and compiles its hot code once for the whole suite, where three did
(two analysis workers and the Connect server)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from spark_java import LONG_LIVED_JVM

SUITE_CONF = {"spark.default.parallelism": "1", "spark.sql.shuffle.partitions": "2",
              "spark.driver.memory": "2g", "spark.driver.extraJavaOptions": LONG_LIVED_JVM}
"""The suite's Spark (``local[2]``): two task slots for the workers that share it, one default
partition for every session (a file read packs into one split, as the analysis tests' ``local[1]``
did), two shuffle partitions for the Connect sessions (an analysis session sets one), a heap for
both, the throughput collector (:data:`spark_java.LONG_LIVED_JVM`)."""


def start(folder: Path):
    """Start the suite's Spark; return its process (the id of its group) and its ``info``: the
    gateway's ``port`` and ``secret``, the Connect ``url``. `ConnectServerUnavailable` if it cannot."""
    from analysis import order_mark
    from analysis.connect_server import GATEWAY, start_connect_server
    from analysis.session import NO_CALL_SITES
    conf = {**SUITE_CONF, NO_CALL_SITES[0]: NO_CALL_SITES[1]}
    jar, _ = order_mark.build()  # as the verifier's own session: the order check in the scan
    if jar is not None:
        conf["spark.jars"] = str(jar)
    proc, url = start_connect_server(folder, cores=2, timeout_s=180.0, conf=conf)
    return proc, {**json.loads((folder / GATEWAY).read_text()), "url": url}


def attach(info: dict):
    """A SparkSession of this process's own on the suite's JVM (``info``: :func:`start`'s), with the
    shared SparkContext."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from analysis import java_lookups

    os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"] = str(info["port"]), info["secret"]
    try:
        gateway = launch_gateway()
    finally:  # (this process's children, a `tom verify` among them, start a JVM of their own)
        del os.environ["PYSPARK_GATEWAY_PORT"], os.environ["PYSPARK_GATEWAY_SECRET"]
    jvm = java_lookups.remember(gateway.jvm)
    jsc = jvm.org.apache.spark.api.java.JavaSparkContext.fromSparkContext(
        jvm.org.apache.spark.SparkContext.getOrCreate())
    return SparkSession(SparkContext(gateway=gateway, jsc=jsc)).newSession()


def detach(session) -> None:
    """Let go of the suite's JVM (:func:`attach`), leaving it running: this process's accumulator
    server stops and its gateway connections close, so that nothing of it talks to a JVM the
    controller stops later (py4j deleting its objects at exit, Spark closing the accumulator link)."""
    sc = session.sparkContext
    server = getattr(sc, "_accumulatorServer", None)
    if server is not None:
        server.shutdown()
        server.server_close()
    sc._gateway.close()
