"""Durable replicated objects (`tom.Replicated(..., data=DIR)`): real members on loopback, in one
process; a member "crashes" by stopping its peer at once (no leave, its links drop, its folder stays as
it was), then a new object on the same folder starts. The promise: it takes back its state from its
snapshot and its history, catches up what it missed from the group without a state transfer, and a
call made with an id is applied once."""

from __future__ import annotations

import logging

import pytest

import tom
from members import FAST, members, started, wait_until
from tom.errors import ConfigError

pytestmark = pytest.mark.e2e


def crash(obj) -> None:
    """Stop ``obj``'s member at once: no leave (as a SIGKILL, for the group)."""

    import trio

    trio.from_thread.run_sync(obj._member._group._peer.stop, trio_token=obj._member._token)
    obj._member._thread.join(20)
    assert not obj._member._thread.is_alive()


def dicts(pids, tmp_path, which=None):
    return [tom.ReplDict(pids, me, data=tmp_path / f"m{i}", **FAST) for i, me in enumerate(pids)
            if which is None or i in which]


def test_a_member_restarted_alone_takes_back_its_state_and_catches_up_without_a_transfer(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tom.replicated")
    pids = members(3)
    group = started(dicts(pids, tmp_path), 3)
    again = None
    try:
        for i in range(30):
            group[i % 3].set(f"a{i}", i)
        wait_until(lambda: len(group[2]) == 30)
        crash(group[2])
        for i in range(40):
            group[i % 2].set(f"b{i}", i)
        caplog.clear()
        again = tom.ReplDict(pids, pids[2], data=tmp_path / "m2", **FAST)
        again.start()
        assert again.wait_admitted(30)
        wait_until(lambda: again.copy() == group[0].copy() and len(again) == 70)
        again.set("after", True)
        wait_until(lambda: all(d.get("after") for d in group[:2]))
        assert "admitted again with its state whole" in caplog.text
        assert "sending the state" not in caplog.text and "asking for it" not in caplog.text
        wait_until(lambda: all(d._transfer.awaiting == {} for d in (group[0], group[1], again)))
    finally:
        for d in group[:2] + ([again] if again else []):
            d.close()


def test_a_group_killed_as_a_whole_comes_back_with_every_key(tmp_path):
    pids = members(3)
    group = started(dicts(pids, tmp_path), 3)
    for i in range(50):
        group[i % 3].set(f"k{i}", {"n": i})
    group[1].pop("k0")
    # every call applied everywhere (49 keys alone could be k0-k48: k49 and the pop still on their way)
    want = {f"k{i}": {"n": i} for i in range(1, 50)}
    wait_until(lambda: all(d.copy() == want for d in group))
    for d in group:
        crash(d)
    group = started(dicts(pids, tmp_path), 3)
    try:
        back = [d.copy() for d in group]
        assert all(b == want for b in back), [  # (each member's keys that differ: theirs, the wanted)
            (d.me, {k: (b.get(k), want.get(k)) for k in sorted(set(b) | set(want)) if b.get(k) != want.get(k)})
            for d, b in zip(group, back) if b != want]
        group[2].set("new", 1)
        wait_until(lambda: all(d.get("new") == 1 for d in group))
    finally:
        for d in group:
            d.close()


def test_a_call_made_again_with_its_id_is_applied_once_even_across_a_restart(tmp_path):
    pids = members(2)
    counters = started([tom.ReplCounter(pids, me, data=tmp_path / f"c{i}", **FAST) for i, me in enumerate(pids)], 2)
    try:
        assert counters[0].add(5, tom_id="order-17") == 5
        assert counters[1].add(5, tom_id="order-17") == 5  # (made again elsewhere: its first result)
        assert counters[0].add(1) == 6
        crash(counters[0])
        counters[0] = tom.ReplCounter(pids, pids[0], data=tmp_path / "c0", **FAST)
        started([counters[0]])
        assert counters[0].add(5, tom_id="order-17") == 5  # (its history knows it)
        wait_until(lambda: counters[0].value == counters[1].value == 6)
    finally:
        for c in counters:
            c.close()


def test_snapshots_bound_what_a_restart_replays(tmp_path, monkeypatch, caplog):
    from tom import replication

    monkeypatch.setattr(replication, "SNAPSHOT_MIN_CALLS", 10)
    caplog.set_level(logging.INFO, logger="tom.replicated")
    pids = members(2)
    group = started(dicts(pids, tmp_path), 2)
    for i in range(95):
        group[i % 2].set(f"k{i}", "x" * 50)
    wait_until(lambda: len(group[1]) == 95)
    # a snapshot due while another was being written is taken at the next event: one more call once no
    # write is under way, then none under way, so the rule held when they crash
    wait_until(lambda: not any(d._saving for d in group))
    group[0].set("k95", "x" * 50)
    wait_until(lambda: all(len(d) == 96 for d in group) and not any(d._saving for d in group))
    assert (tmp_path / "m1" / "snapshot").exists()
    want = group[1].copy()
    for d in group:
        crash(d)
    caplog.clear()
    group = started(dicts(pids, tmp_path), 2)
    try:
        assert all(d.copy() == want for d in group)
        replayed = [int(line.split("then ")[1].split(" event")[0]) for line in caplog.messages
                    if "state taken back" in line]
        # the rule: a snapshot is taken once the calls since the last one weigh as much as it, so what a
        # restart replays weighs less than the snapshot; each call set a key of its own, so the replayed
        # calls are fewer than the keys the snapshot holds (96 - n), not the 96 calls
        assert len(replayed) == 2 and all(n < 96 - n for n in replayed), caplog.messages
    finally:
        for d in group:
            d.close()


def test_a_member_whose_history_is_gone_takes_the_group_s_state(tmp_path, caplog):
    import shutil

    caplog.set_level(logging.INFO, logger="tom.replicated")
    pids = members(3)
    group = started(dicts(pids, tmp_path), 3)
    again = None
    try:
        for i in range(20):
            group[i % 3].set(f"k{i}", i)
        wait_until(lambda: len(group[2]) == 20)
        crash(group[2])
        shutil.rmtree(tmp_path / "m2")  # (its disk replaced, say)
        group[0].set("while away", 1)
        again = tom.ReplDict(pids, pids[2], data=tmp_path / "m2", **FAST)
        again.start()
        assert again.wait_admitted(30)
        wait_until(lambda: again.copy() == group[0].copy() and len(again) == 21)
        assert "asking for it" in caplog.text and "took the group's state" in caplog.text
    finally:
        for d in group[:2] + ([again] if again else []):
            d.close()


def test_a_durable_object_needs_snapshot_and_restore(tmp_path):
    class Bare(tom.Replicated):
        pass

    with pytest.raises(ConfigError, match="needs snapshot"):
        Bare(["127.0.0.1:1"], "127.0.0.1:1", data=tmp_path)
