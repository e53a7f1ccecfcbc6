"""What the verifier asks of Spark besides its plans: py4j lookups remembered (analysis/java_lookups.py)
and, on a small input, a violation frame taken without a cache (``verify._count_and_first``)."""

from __future__ import annotations

import pytest

from analysis import java_lookups, verify
from analysis.verify import SMALL_INPUT_CONF
from py4j_calls import round_trips

pytestmark = pytest.mark.spark


def fresh_view(spark):
    """A JVM view of the session's gateway that has resolved nothing yet, remembering, importing
    what PySpark's does."""
    from py4j.java_gateway import java_import

    jvm = java_lookups.remember(spark.sparkContext._gateway.new_jvm_view())
    java_import(jvm, "org.apache.spark.sql.functions")
    java_import(jvm, "org.apache.spark.api.java.*")
    java_import(jvm, "org.apache.spark.api.python.*")
    return jvm


def test_a_remembered_view_resolves_a_class_and_its_static_method_once(spark):
    jvm = fresh_view(spark)
    assert java_lookups.remember(jvm) is jvm  # (again: nothing changes)
    held = jvm.java.util.ArrayList()
    with round_trips(jvm) as first:
        # what py4j's finalizer thread sends, whenever it runs, for a proxy Python collected: not a lookup
        jvm._gateway_client.garbage_collect_object(held._target_id, False)
        jvm.functions.col("a")
    with round_trips(jvm) as again:
        jvm.functions.col("b")
        jvm.functions.col("c")
    assert len(first) == 3  # the class, its method, the call
    assert len(again) == 2  # the calls alone
    assert jvm.functions is jvm.functions


def test_a_remembered_view_still_asks_for_packages_and_missing_classes(spark):
    from py4j.java_gateway import JavaPackage
    from py4j.protocol import Py4JError

    jvm = fresh_view(spark)
    with round_trips(jvm) as sent:
        assert isinstance(jvm.org, JavaPackage)
        assert isinstance(jvm.org, JavaPackage)
    assert len(sent) == 2
    jvm.functions  # noqa: B018 -- (resolved, and remembered)
    with round_trips(jvm) as sent:
        for _ in range(2):
            with pytest.raises(Py4JError):
                jvm.functions.no_such_function_here
    assert len(sent) == 2


def test_a_session_s_own_view_remembers(spark):
    jvm = spark.sparkContext._jvm
    jvm.PythonUtils  # noqa: B018 -- (resolved: by now, or here)
    with round_trips(jvm) as sent:
        assert jvm.PythonUtils._fqn == "org.apache.spark.api.python.PythonUtils"
    assert sent == []


def _jobs(spark, group: str, call):
    """``(call(), the number of Spark jobs it ran)``. The status tracker learns of a job from Spark's
    listener bus, which delivers its events on threads of its own, later: on the suite's shared and
    busy JVM a job that had ended was once not counted yet (0 for 1). The count waits for the bus to
    have delivered every event posted so far (at most 60 s)."""
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        result = call()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    sc._jsc.sc().listenerBus().waitUntilEmpty(60_000)
    return result, len(sc.statusTracker().getJobIdsForGroup(group))


@pytest.mark.parametrize("rows", [0, 3, 4, 9])
def test_a_violation_frame_of_a_small_input_is_one_job_unless_it_holds_more_than_it_shows(spark, rows):
    key, value = next(iter(SMALL_INPUT_CONF.items()))
    assert spark.conf.get(key) == value  # (the analysis tests' session: `TESTS_CONF`)
    df = spark.range(rows).selectExpr("id", "9 - id AS back")
    (count, first), jobs = _jobs(spark, f"small-{rows}", lambda: verify._count_and_first(df, ["back"], 3))
    assert count == rows
    assert [r["id"] for r in first] == list(range(rows))[::-1][:3]
    assert jobs == (1 if rows <= 3 else 2)


def test_a_violation_frame_of_a_large_input_is_counted_and_its_cache_emptied(spark):
    key, value = next(iter(SMALL_INPUT_CONF.items()))
    df = spark.range(9).selectExpr("id", "9 - id AS back")
    spark.conf.set(key, "true")
    try:
        count, first = verify._count_and_first(df, ["back"], 3)
    finally:
        spark.conf.set(key, value)
    assert (count, [r["id"] for r in first]) == (9, [8, 7, 6])
    assert df.storageLevel.useMemory is False  # cached while counted, emptied after
