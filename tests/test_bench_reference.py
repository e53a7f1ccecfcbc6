"""The bench's reference rows (``scripts/bench --peers-compare``): a PySyncObj, a redis client or a
redis-server that cannot be installed is one line, and the bench goes on to print what it measured;
the Redis Stream row's checks and figures, on tiny inputs; its server stops however its run ends."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from benchmarks import redis_compare
from benchmarks.raft_compare import Unavailable, ensure_venv
from benchmarks.redis_compare import (RunFailed, light_latencies, order_problems, parse_version, rate,
                                      redis_server, why_not_installable)


@pytest.mark.parametrize("package, name", [("pysyncobj===not a version", ".venv-pysyncobj"),
                                           ("redis===not a version", ".venv-redis")])
def test_an_uninstallable_reference_is_one_line(tmp_path, package, name):
    with pytest.raises(Unavailable) as raised:
        ensure_venv(tmp_path, package, name)  # pip refuses it before any download
    line = str(raised.value)
    assert "\n" not in line
    assert line.startswith(f"cannot install {package} into {tmp_path / name}")
    assert "Traceback" not in line
    assert not (tmp_path / name / ".installed").exists()


def test_redis_server_is_installed_only_as_root_with_apt_get():
    assert why_not_installable(0, "/usr/bin/apt-get") is None
    assert "takes root" in why_not_installable(1000, "/usr/bin/apt-get")
    assert "apt-get is not available" in why_not_installable(0, None)


def test_a_missing_redis_server_that_cannot_be_installed_is_one_line(monkeypatch):
    monkeypatch.setattr(redis_compare.shutil, "which", lambda name: None)  # no redis-server, no apt-get
    with pytest.raises(Unavailable) as raised:
        redis_compare.server_binary()
    assert str(raised.value) == "redis-server is not installed and apt-get is not available to install it"


def test_the_server_version_is_read_from_its_line():
    line = "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=c4d5b7b5d4f2e2a1\n"
    assert parse_version(line) == "7.0.15"
    assert parse_version("something else") is None


EXPECTED = ["t0.0", "t0.1", "t1.0"]
READ = [("1-0", "t0.0"), ("1-1", "t1.0"), ("2-0", "t0.1")]


def test_members_that_read_the_same_entries_in_the_same_order_pass():
    assert order_problems([READ, list(READ), list(READ)], EXPECTED) == []


def test_a_member_that_read_another_order_is_named_with_the_position():
    swapped = [READ[0], READ[2], READ[1]]
    assert order_problems([READ, swapped], EXPECTED) == ["member 1 read other entry ids than member 0 from position 1"]


def test_a_member_that_missed_or_repeated_an_entry_is_named():
    short = READ[:2]
    assert order_problems([READ, short], EXPECTED) == [
        "member 1 read 2 entries of 3 (1 missing, 0 extra or twice)",
        "member 1 read other entry ids than member 0 from position 2"]
    twice = [READ[0], READ[1], ("2-0", "t0.0")]
    problems = order_problems([twice, twice], EXPECTED)
    assert problems == [f"member {i} read 3 entries of 3 (1 missing, 1 extra or twice)" for i in (0, 1)]


def test_the_rate_is_counted_to_the_slowest_member():
    assert rate(3000, 100.0, [100.5, 101.0, 100.75]) == pytest.approx(3000.0)


def test_light_latencies_leave_out_the_origin():
    # l0 is appended by member 0, l1 by member 1 (n = 2); each read is (text, sent at, read at)
    reads = [[("l0", 10.0, 10.001), ("l1", 11.0, 11.003)],
             [("l0", 10.0, 10.002), ("l1", 11.0, 11.0005)]]
    assert light_latencies(reads, 2) == pytest.approx([0.002, 0.003])


def test_the_redis_server_stops_however_its_block_is_left(tmp_path):
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (scripts/bench --peers-compare installs it, as root with apt-get)")
    with pytest.raises(RuntimeError, match="the run broke"):
        with redis_server(binary, tmp_path) as port:
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass  # it listens
            raise RuntimeError("the run broke")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_a_server_that_cannot_start_is_one_line(tmp_path):
    with pytest.raises(RunFailed) as raised:
        with redis_server(str(tmp_path / "no-such-redis-server"), tmp_path):
            pass
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith(f"cannot start {Path(tmp_path) / 'no-such-redis-server'}: ")


def test_the_path_breakdown_keys_each_step_by_role_and_takes_medians():
    from benchmarks.path_breakdown import breakdown

    # two messages (ns), from peer 0 then from peer 1; the others' first link read makes them B and C
    a = [(0, "stdin"), (10, "step"), (30, "sent"), (200, "recv"), (220, "written"),
         (1000, "recv"), (1040, "sent"), (1300, "written")]
    b = [(100, "recv"), (120, "sent"), (300, "written"),
         (1000, "stdin"), (1012, "step"), (1030, "sent"), (1250, "recv"), (1290, "written")]
    c = [(110, "recv"), (130, "sent"), (250, "written"), (1100, "recv"), (1110, "sent"), (1280, "written")]
    rows = breakdown([a, b, c], 2)
    got = {key: (at, seen) for key, at, seen in rows}
    assert got["O step#1"] == (pytest.approx(0.011), 2)  # 10 and 12 ns after stdin
    assert got["B recv#1"] == (pytest.approx(0.05), 2)  # b at 100, then a at 0
    assert got["C recv#1"] == (pytest.approx(0.105), 2)  # c at 110, then c at 100
    assert got["O written#1"] == (pytest.approx(0.255), 2)  # a at 220, then b at 290
    assert [at for _, at, _ in rows] == sorted(at for _, at, _ in rows)
    assert "O recv#2" not in got  # in neither window


def test_the_floor_group_delivers_one_message_at_a_time_everywhere_in_the_same_order(tmp_path):
    """``scripts/bench --floor``: bare trio peers, real processes on loopback, warm up one message at a
    time, deliver every message everywhere once it has every member's ACK, and write the records the
    bench checks (the Lamport order's check: the same (clock, pid) sequence, increasing)."""
    import time

    from benchmarks.peers import FloorGroup, verify

    deadline = time.monotonic() + 60
    with FloorGroup(3, tmp_path) as group:
        group.warm_up(deadline)
        for k in range(6):
            group.peers[k % 3].send([f"l{k}"])
            group.wait_delivered(3 + k + 1, deadline)
        ok, why, recs = verify(group, 9, "lamport")
    assert ok, why
    assert [r["text"] for r in recs[1]][3:] == [f"l{k}" for k in range(6)]
    for peer, mine in zip(group.peers, recs):
        assert all(r["peer"] == peer.pid and r["delivered_at"] >= r["sent_at"] for r in mine)
    assert {r["pid"] for r in recs[0]} == {p.pid for p in group.peers}
    assert all(not p.proc.running() for p in group.peers)  # stopped by the group
