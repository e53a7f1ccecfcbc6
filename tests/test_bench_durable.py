"""``scripts/bench --durable``'s plumbing, without running a benchmark: the command lines and configs
each row starts with (durable peers, Redis with an append-only file, PySyncObj with a journal), the
check that refuses data folders held in memory, bytes on disk per message, and the durable table."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import peers
from benchmarks.peergroup import Mount, NotADisk, mount_of, real_disk
from benchmarks.peers import BenchGroup, disk_figures, print_durable
from benchmarks.raft_compare import NODE, node_argv, node_conf
from benchmarks.redis_compare import aof_bytes, server_command
from tom.tools.peers import PeerCommand


def option(argv: list[str], name: str) -> str | None:
    """The value after ``name`` in ``argv`` (None if absent)."""
    return argv[argv.index(name) + 1] if name in argv else None


# -- the peers -------------------------------------------------------------------------------------


def test_a_peer_command_with_data_names_the_folder_and_the_policy(tmp_path):
    argv = PeerCommand(tmp_path / "nb", tmp_path / "out", 5001, data=tmp_path / "d", fsync="batch").argv()
    assert option(argv, "--data") == str(tmp_path / "d")
    assert option(argv, "--fsync") == "batch"
    plain = PeerCommand(tmp_path / "nb", tmp_path / "out", 5001).argv()
    assert "--data" not in plain and "--fsync" not in plain


@pytest.mark.parametrize("policy", ["always", "batch", "never"])
def test_a_durable_bench_group_gives_each_peer_its_own_data_folder(tmp_path, policy):
    group = BenchGroup(3, tmp_path, fsync=policy)
    argv = group.peer_argv(tmp_path / "neighbors", tmp_path / "out-5001.jsonl", 5001, tmp_path / "keys")
    assert option(argv, "--data") == str(tmp_path / "data-5001")
    assert option(argv, "--fsync") == policy
    other = group.peer_argv(tmp_path / "neighbors", tmp_path / "out-5002.jsonl", 5002, tmp_path / "keys")
    assert option(other, "--data") == str(tmp_path / "data-5002")


def test_the_in_memory_baseline_has_no_data_folder(tmp_path):
    argv = BenchGroup(3, tmp_path).peer_argv(tmp_path / "neighbors", tmp_path / "out.jsonl", 5001, tmp_path / "k")
    assert "--data" not in argv and "--fsync" not in argv


def test_bytes_on_disk_are_the_two_logs_over_the_messages_delivered(tmp_path):
    group = BenchGroup(2, tmp_path, fsync="always")
    group.peers = [SimpleNamespace(port=5001), SimpleNamespace(port=5002)]  # type: ignore[list-item]
    for port, (history, accepted) in ((5001, (2000, 100)), (5002, (2200, 300))):
        folder = group.data_dir(port)
        folder.mkdir()
        (folder / "history.log").write_bytes(b"h" * history)
        (folder / "accepted.log").write_bytes(b"a" * accepted)
        (folder / "identity.json").write_bytes(b"x" * 5000)  # not a log that grows with the messages
    figures = disk_figures(group, 10)
    assert figures["disk_history_mc"] == pytest.approx(210.0)
    assert figures["disk_accepted_mc"] == pytest.approx(20.0)
    assert figures["disk_mc"] == pytest.approx(230.0)


# -- the real-disk check ---------------------------------------------------------------------------


def test_the_longest_mount_point_holds_a_path_and_the_later_of_two_wins():
    mounts = ("/dev/vda / ext4 rw 0 0\n"
              "tmpfs /var/tmp tmpfs rw 0 0\n"
              "/dev/vdb /var/tmp xfs rw 0 0\n"
              "/dev/vdc /var/tmpx ext4 rw 0 0\n"
              "/dev/vdd /srv/my\\040disk ext4 rw 0 0\n")
    assert mount_of(Path("/var/tmp/tom-bench"), mounts) == Mount("/dev/vdb", "/var/tmp", "xfs")
    assert mount_of(Path("/var/tmpy"), mounts) == Mount("/dev/vda", "/", "ext4")
    assert mount_of(Path("/srv/my disk/x"), mounts) == Mount("/dev/vdd", "/srv/my disk", "ext4")


@pytest.mark.parametrize("fstype", ["tmpfs", "ramfs"])
def test_a_folder_in_memory_is_refused_in_one_line(tmp_path, fstype):
    with pytest.raises(NotADisk) as raised:
        real_disk(tmp_path, f"{fstype} {tmp_path} {fstype} rw 0 0\n")
    line = str(raised.value)
    assert "\n" not in line
    assert line.startswith(f"{tmp_path} is on {fstype}")
    assert "--data-root" in line


def test_a_folder_on_a_disk_is_taken_and_named(tmp_path):
    mount = real_disk(tmp_path, f"/dev/vda / ext4 rw 0 0\n/dev/vdb {tmp_path} xfs rw 0 0\n")
    assert str(mount) == f"xfs on /dev/vdb, mounted on {tmp_path}"


def test_bench_durable_on_tmpfs_stops_before_anything_starts_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(peers, "real_disk", lambda path: real_disk(path, f"tmpfs {path} tmpfs rw 0 0\n"))
    assert peers.main(["--durable", "--data-root", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"scripts/bench --durable: {tmp_path} is on tmpfs")
    assert list(tmp_path.iterdir()) == []  # no workdir made


# -- the references --------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_a_durable_redis_keeps_an_append_only_file_fsynced_by_its_policy(tmp_path, policy):
    argv = server_command("redis-server", 6400, tmp_path, policy)
    assert option(argv, "--appendonly") == "yes"
    assert option(argv, "--appendfsync") == policy
    assert option(argv, "--save") == ""  # no RDB snapshots beside it
    assert option(argv, "--dir") == str(tmp_path)


def test_the_in_memory_redis_keeps_nothing(tmp_path):
    argv = server_command("redis-server", 6400, tmp_path)
    assert option(argv, "--appendonly") == "no" and "--appendfsync" not in argv
    with pytest.raises(ValueError):
        server_command("redis-server", 6400, tmp_path, "no")


def test_the_append_only_files_are_counted_in_both_layouts(tmp_path):
    (tmp_path / "appendonlydir").mkdir()
    (tmp_path / "appendonlydir" / "appendonly.aof.1.incr.aof").write_bytes(b"x" * 700)
    (tmp_path / "appendonlydir" / "appendonly.aof.manifest").write_bytes(b"x" * 88)
    (tmp_path / "dump.rdb").write_bytes(b"x" * 1000)  # not the append-only file
    assert aof_bytes(tmp_path) == 788
    (tmp_path / "appendonly.aof").write_bytes(b"x" * 12)  # Redis 6 and before
    assert aof_bytes(tmp_path) == 800


def test_a_journalled_pysyncobj_node_gets_its_own_journal_and_dump(tmp_path):
    assert node_conf(None, 0) == {}
    conf = node_conf(tmp_path, 1)
    assert conf == {"journalFile": str(tmp_path / "node-1.journal"), "fullDumpFile": str(tmp_path / "node-1.dump")}
    argv = node_argv(Path("py"), Path("node.py"), 1000, 5.0, conf, "127.0.0.1:7001", ["127.0.0.1:7002"])
    assert argv[:4] == ["py", "node.py", "1000", "5.0"]
    assert json.loads(argv[4]) == conf  # the node passes it to SyncObjConf(**conf)
    assert argv[5:] == ["127.0.0.1:7001", "127.0.0.1:7002"]
    compile(NODE, "node.py", "exec")  # the node's script is Python


# -- the table -------------------------------------------------------------------------------------


def row(fsync: str | None, rate: float, p50: float, disk: float | None = None) -> dict:
    tp = {"rate": rate, "ok": True, **({"disk_mc": disk} if disk is not None else {})}
    return {"n": 3, "mode": "plain", "order": "lamport", "build": "installed", "src": None, "fsync": fsync,
            "tp": tp, "lt": {"p50": p50, "p99": 2 * p50, "ok": True}}


def test_the_durable_table_sets_each_policy_against_in_memory(capsys):
    rows = [row(None, 100_000, 0.0005), row("always", 50_000, 0.0009, 201), row("batch", 50_000, 0.0009, 201),
            row("never", 90_000, 0.0006, 202)]
    references = [{"name": "Redis Stream, AOF appendfsync always", "rate": 40_000, "unit": "entries/s",
                   "p50": 0.0004, "p99": 0.001, "disk": 60.0, "against": "always"}]
    print_durable(rows, references, Mount("/dev/vda", "/", "ext4"))
    out = capsys.readouterr().out
    assert "data folders on ext4 on /dev/vda, mounted on /" in out
    always = next(line for line in out.splitlines() if "| fsync always |" in line)
    assert "|     0.50 |" in always and "+0.400" in always and "201" in always and always.endswith("OK")
    assert ("fsync batch, 3 peers, plain, lamport: 0.50x the in-memory rate (goal >= 0.6x: NOT met); "
            "light-load p50 +0.400 ms (goal <= +0.3 ms: NOT met)") in out
    assert "fsync never, 3 peers" not in out  # no goal for never
    assert ("Redis Stream, AOF appendfsync always: 40,000 entries/s; light p50 0.400 ms, p99 1.000 ms; 60 bytes on "
            "disk per entry | TOM lamport, fsync always: 1.25x its rate, light p50 +0.500 ms") in out


def test_the_fsync_probe_times_each_append_and_leaves_nothing(tmp_path):
    from benchmarks.peergroup import fsync_seconds

    took = fsync_seconds(tmp_path, tries=5, size=512)
    assert len(took) == 5 and took == sorted(took) and took[0] >= 0
    assert list(tmp_path.iterdir()) == []


def test_runs_keep_the_run_of_median_rate_and_say_every_rate(capsys):
    runs = [{"rate": r, "ok": True, "p50": r / 1e6} for r in (120_000, 150_000, 130_000)]
    kept = peers.median_run(runs)
    assert kept["rate"] == 130_000 and kept["p50"] == 0.13 and kept["runs"] == [120_000, 150_000, 130_000]
    assert peers.median_run(runs[:2])["rate"] == 120_000  # (of two, the lower)
    assert peers.median_run([runs[0], None]) is None  # a failed run fails the row
    rows = [row(None, 200_000, 0.0005), {**row("batch", 0, 0.0009), "tp": kept}]
    print_durable(rows, [], None)
    assert "fsync batch, 3 peers, plain, lamport: multicasts/s, the median of 120,000, 150,000, 130,000" \
        in capsys.readouterr().out
