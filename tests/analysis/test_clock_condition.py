"""The clock condition a file can decide (`checks.clock_timeline`, `checks.clock_condition`): a
peer's own message sent after it delivered m1 comes after m1 in the Lamport order. Each transform on
tiny inline files; the mutant clock of issue 43 in real peers: tests/test_e2e_clock_condition.py."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from analysis import checks
from tests.analysis.conftest import PEERS, message, run_of

pytestmark = pytest.mark.spark
A, B, C = PEERS
T = 1_763_766_000.0
FILE_B = "file:/run/127.0.0.1_5001.jsonl"


def at(peer: str, index: int, clock: int, pid: str, sent: float, delivered: float, **extra) -> dict:
    """A v2 message record of ``peer`` with its times given (seconds after T)."""
    return {**message(peer, index, clock, pid), "v": 2, "sent_at": T + sent, "delivered_at": T + delivered,
            **extra}


def clock_condition(records, run):
    return checks.clock_condition(checks.clock_timeline(records(run)))


VIOLATION = ("file string, peer string, index long, clock long, pid string, sent_at double, "
             "after_index long, after_clock long, after_pid string, after_delivered_at double")


def test_a_files_timeline_is_its_live_deliveries_and_its_own_sends(spark, records):
    run = {B: [at(B, 1, 3, A, 0.5, 1.0), at(B, 2, 4, B, 1.5, 2.0), at(B, 3, 5, C, 1.7, 3.0, caught_up=True),
               at(B, 4, 6, B, 2.5, 3.5, caught_up=True)]}
    got = checks.clock_timeline(records(run)).select("time", "side", "index", "clock", "pid", "key.port")
    expected = spark.createDataFrame(
        [(T + 1.0, checks.DELIVERY, 1, 3, A, 5000), (T + 2.0, checks.DELIVERY, 2, 4, B, 5001),
         (T + 1.5, checks.SEND, 2, 4, B, 5001), (T + 2.5, checks.SEND, 4, 6, B, 5001)],
        "time double, side int, index long, clock long, pid string, port int")
    assertDataFrameEqual(got, expected)


def test_a_correct_run_keeps_the_clock_condition(records):
    """Every peer's own messages, sent after deliveries of smaller keys (conftest's times follow the
    clocks): nothing to report."""
    run = run_of([(1, A), (1, B), (2, A), (2, C), (3, B), (4, A)])
    assert clock_condition(records, run).count() == 0


def test_an_own_message_under_one_delivered_before_it_was_sent_is_named(spark, records):
    """B delivered (3, A) at 1.0 and sent (2, B) at 1.5: the mutant clock of issue 43, which ticks on a
    receipt but ignores the received clock. Named: the file, the message sent, the one it does not
    follow."""
    run = {B: [at(B, 1, 3, A, 0.5, 1.0), at(B, 2, 2, B, 1.5, 2.0)]}
    expected = spark.createDataFrame([(FILE_B, B, 2, 2, B, T + 1.5, 1, 3, A, T + 1.0)], VIOLATION)
    assertDataFrameEqual(clock_condition(records, run), expected)


def test_the_greatest_key_delivered_before_the_send_is_the_one_named(spark, records):
    run = {B: [at(B, 1, 4, A, 0.1, 0.2), at(B, 2, 5, C, 0.3, 0.4), at(B, 3, 3, B, 1.5, 2.0)]}
    expected = spark.createDataFrame([(FILE_B, B, 3, 3, B, T + 1.5, 2, 5, C, T + 0.4)], VIOLATION)
    assertDataFrameEqual(clock_condition(records, run), expected)


def test_equal_keys_break_it_and_ports_compare_as_integers(records):
    """(3, host:5001) sent after (3, host:10000) was delivered is under it (ports as integers); the
    other way round it is above."""
    hi = "127.0.0.1:10000"
    run = {B: [at(B, 1, 3, hi, 0.5, 1.0), at(B, 2, 3, B, 1.5, 2.0)]}
    assert [(r.clock, r.after_pid) for r in clock_condition(records, run).collect()] == [(3, hi)]
    lo = "127.0.0.1:5000"
    run = {B: [at(B, 1, 3, lo, 0.5, 1.0), at(B, 2, 3, B, 1.5, 2.0)]}
    assert clock_condition(records, run).count() == 0


def test_only_a_send_strictly_after_the_delivery_is_after_it(records):
    """Sent at the very time of the delivery (the clocks' resolution), or before it: concurrent as far
    as the file can tell, so under it is no violation."""
    for sent in (1.0, 0.9):
        run = {B: [at(B, 1, 3, A, 0.5, 1.0), at(B, 2, 2, B, sent, 2.0)]}
        assert clock_condition(records, run).count() == 0


def test_a_caught_up_delivery_is_no_cause(records):
    """A caught-up record's delivered_at is when the restarted peer caught it up: the peer's core never
    took that message before sending, so it is left out of the deliveries."""
    run = {B: [at(B, 1, 3, A, 0.5, 1.0, caught_up=True), at(B, 2, 2, B, 1.5, 2.0)]}
    assert clock_condition(records, run).count() == 0


def test_another_peers_message_sends_nothing_and_files_are_judged_apart(records):
    """Only a file's own messages are sends; and C's deliveries say nothing of B's sends."""
    run = {B: [at(B, 1, 2, B, 1.5, 2.0)], C: [at(C, 1, 3, A, 0.5, 1.0), at(C, 2, 2, B, 1.5, 2.0)]}
    assert clock_condition(records, run).count() == 0
