"""State transfer to joiners (`tom.Replicated`): a member that joins a running group takes the group's
state from one member before it applies anything, so its replica equals the others' after every view;
a snapshot that does not restore is one error line and the joiner applies nothing; a transfer cut by
the sender's crash restarts from another member. Real members on loopback, in one process."""

from __future__ import annotations

import base64
import logging
import time

import pytest

import tom
from members import FAST, started, wait_until
from tom.errors import UsageError
from tom.tools.peers import free_ports

pytestmark = pytest.mark.e2e


def test_a_joiner_takes_the_state_then_every_replica_stays_equal():
    members = [f"127.0.0.1:{p}" for p in free_ports(4)]
    first = started([tom.ReplDict(members, me, **FAST) for me in members[:3]])
    try:
        wait_until(lambda: all(len(d.members) == 3 for d in first))
        for i in range(30):
            first[i % 3].set(f"k{i}", {"n": i, "by": first[i % 3].me})
        first[0].pop("k0")
        late = tom.ReplDict(members, members[3], **FAST)
        late.start()
        for i in range(30, 40):  # writes go on while it joins
            first[i % 3].set(f"k{i}", i)
        assert late.wait_admitted(30)
        late.set("from the joiner", True)
        wait_until(lambda: all(d.copy() == late.copy() for d in first) and len(late) == 40)
        assert late["k1"] == {"n": 1, "by": members[1]} and "k0" not in late
        wait_until(lambda: late._transfer.awaiting == {} and all(d._transfer.awaiting == {} for d in first))  # its ok
    finally:
        for d in first:
            d.close()
        late.close()


class Broken(tom.ReplCounter):
    def restore(self, state):
        raise ValueError("this build cannot read that state")


def test_a_snapshot_that_does_not_restore_is_one_error_and_the_joiner_applies_nothing(caplog):
    members = [f"127.0.0.1:{p}" for p in free_ports(3)]
    first = started([tom.ReplCounter(members, me, **FAST) for me in members[:2]])
    try:
        wait_until(lambda: all(len(c.members) == 2 for c in first))
        first[0].add(5)
        with caplog.at_level(logging.ERROR, logger="tom.replicated"):
            broken = Broken(members, members[2], **FAST)
            broken.start()
            wait_until(lambda: broken.failed is not None)
        errors = [r for r in caplog.records if r.levelno == logging.ERROR and r.name == "tom.replicated"]
        assert len(errors) == 1 and "did not restore: ValueError: this build cannot read that state" in errors[0].message
        assert broken.value == 0 and not broken.admitted.is_set()
        first[1].add(1)  # the group goes on; the broken joiner applies nothing
        wait_until(lambda: first[0].value == first[1].value == 6)
        time.sleep(0.5)
        assert broken.value == 0
        with pytest.raises(UsageError, match="took no state"):
            broken.inc()
        wait_until(lambda: all(len(c.members) == 2 for c in first))  # it left the group
    finally:
        for c in first:
            c.close()
        broken.close()


def test_a_transfer_cut_by_the_sender_s_crash_restarts_from_another_member(monkeypatch):
    from tom import replication

    members = sorted((f"127.0.0.1:{p}" for p in free_ports(4)), key=lambda m: int(m.rsplit(":", 1)[1]))
    first = started([tom.ReplDict(members, me, **FAST) for me in members[:3]])
    real = replication._send_chunks
    crashed = []

    async def half_then_crash(group, joiner, key, chunks):
        if crashed:  # the second sender sends the whole state
            return await real(group, joiner, key, chunks)
        crashed.append(group.me)
        parts = len(chunks)
        assert parts >= 2
        for i in range(parts // 2):  # half of the chunks, then the sender crashes: no leave, its links drop
            chunk = base64.b64encode(chunks[i]).decode()
            await group.send_direct(joiner, f"{replication.STATE_PREFIX}{key} {i} {parts} {chunk}")
        group._peer.stop()

    monkeypatch.setattr(replication, "_send_chunks", half_then_crash)
    late = tom.ReplDict(members, members[3], **FAST)
    try:
        wait_until(lambda: all(len(d.members) == 3 for d in first))
        for i in range(20):
            first[i % 3].set(f"k{i}", "x" * 5000)  # ~100 KB: several chunks
        late.start()
        assert late.wait_admitted(40)
        assert crashed == [members[0]]  # the least pid sent first
        survivors = first[1:]
        wait_until(lambda: all(members[0] not in d.members for d in survivors + [late]), 40)
        survivors[0].set("after", 1)
        wait_until(lambda: all(d.copy() == late.copy() for d in survivors) and "after" in late)
        assert len(late) == 21
    finally:
        for d in first + [late]:
            d.close()


class NoSnapshot(tom.Replicated):
    def __init__(self, neighbors, me, **options):
        super().__init__(neighbors, me, **options)
        self.n = 0

    @tom.replicated
    def bump(self) -> int:
        self.n += 1
        return self.n


def test_a_sender_that_cannot_snapshot_goes_on_and_the_joiner_fails_in_one_line(caplog):
    """An object without snapshot(): the member chosen to send says so in one line and goes on serving
    the group; the joiner gets that reason as its one error line and applies nothing."""
    members = sorted((f"127.0.0.1:{p}" for p in free_ports(3)), key=lambda m: int(m.rsplit(":", 1)[1]))
    first = started([NoSnapshot(members, me, **FAST) for me in members[:2]])
    late = NoSnapshot(members, members[2], **FAST)
    try:
        wait_until(lambda: all(len(o.members) == 2 for o in first))
        first[0].bump()
        with caplog.at_level(logging.ERROR, logger="tom.replicated"):
            late.start()
            wait_until(lambda: late.failed is not None)
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and r.name == "tom.replicated"]
        assert any("no snapshot()" in e and members[0] in e for e in errors), errors
        assert late.n == 0 and not late.admitted.is_set()
        assert first[1].bump() == 2 and first[0].bump() == 3  # the sender still serves the group
        wait_until(lambda: first[0].n == first[1].n == 3)
    finally:
        for o in first + [late]:
            o.close()
