"""The durable record log and data folder (tom/durable/log.py) on the real disk: records come back as
written across a reopen; a torn last record is dropped in one line and cut off; damage before the end
is refused naming the file and the offset; a second process on the folder, or a folder of another pid
or group, is refused in one line."""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tom.durable.log import HEADER, MAGIC, DataDir, DataError, RecordLog, read_log

RECORDS = [b"MESSAGE-1-127.0.0.1:5000-hello", b"", b"x" * 5000, "caf\u00e9 \u2603".encode()]


@pytest.fixture
def folder(tmp_path) -> Path:
    return tmp_path


def written(path: Path, records=RECORDS, fsync="always") -> Path:
    log = RecordLog(path, fsync)
    log.append(records[:2])
    log.append(records[2:])
    log.close()
    return path


@pytest.mark.parametrize("fsync", ["always", "batch", "never"])
def test_records_come_back_in_order_after_a_reopen(folder, fsync):
    path = written(folder / "log", fsync=fsync)
    got = read_log(path)
    assert got.records == RECORDS and not got.torn and got.end == path.stat().st_size
    log = RecordLog(path, fsync)  # appending after a reopen keeps what was there
    log.append([b"more"])
    log.close()
    assert read_log(path).records == [*RECORDS, b"more"]


def test_always_syncs_each_append_batch_syncs_when_asked_never_does_not(folder, monkeypatch):
    import os
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    for policy, after_appends, after_sync in (("always", 2, 2), ("batch", 0, 1), ("never", 0, 0)):
        log = RecordLog(folder / f"log-{policy}", policy)
        calls.clear()
        log.append([b"a"])
        log.append([b"b"])
        assert len(calls) == after_appends, policy
        log.sync()
        assert len(calls) == after_sync, policy
        log.close()


@pytest.mark.parametrize("cut", [1, HEADER.size - 1, HEADER.size, HEADER.size + 3])
def test_a_torn_last_record_is_dropped_in_one_line_and_cut_off(folder, cut):
    path = written(folder / "log")
    whole = path.stat().st_size
    with open(path, "ab") as f:  # a crash in the middle of the next record's write
        f.write((HEADER.pack(10, zlib.crc32(b"0123456789")) + b"0123456789")[:cut])
    got = read_log(path)
    assert got.records == RECORDS and got.end == whole
    assert "dropped a torn last record at offset" in got.torn and "\n" not in got.torn
    RecordLog(path).close()  # opened for appending: the torn tail is cut off
    assert path.stat().st_size == whole and not read_log(path).torn


def test_a_last_record_with_a_bad_checksum_is_torn_not_corrupt(folder):
    path = written(folder / "log")
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    got = read_log(path)
    assert got.records == RECORDS[:-1] and "checksum" in got.torn


def test_damage_before_the_last_record_is_refused_naming_file_and_offset(folder):
    path = written(folder / "log")
    data = bytearray(path.read_bytes())
    second = len(MAGIC) + HEADER.size + len(RECORDS[0])  # the second record's offset
    data[second + HEADER.size - 1] ^= 0x01  # its checksum
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"{path}: corrupt record at offset {second} \(checksum mismatch\)"):
        read_log(path)
    with pytest.raises(DataError):
        RecordLog(path)  # nothing is appended to (or delivered from) a damaged log


def test_a_file_that_is_no_log_is_refused_and_a_torn_start_is_a_new_log(folder):
    other = folder / "other"
    other.write_bytes(b"hello world, not a log\n")
    with pytest.raises(DataError, match="not a TOM log"):
        read_log(other)
    torn = folder / "torn"
    torn.write_bytes(MAGIC[:3])
    assert "torn start" in read_log(torn).torn
    log = RecordLog(torn)
    log.append([b"a"])
    log.close()
    assert read_log(torn).records == [b"a"]


def test_a_second_process_on_the_same_folder_is_refused_in_one_line(folder):
    held = DataDir(folder / "d", "127.0.0.1:5000")
    try:
        code = ("import sys; from pathlib import Path; from tom.durable.log import DataDir, DataError\n"
                "try:\n    DataDir(Path(sys.argv[1]), '127.0.0.1:5000')\n"
                "except DataError as e:\n    print(e); sys.exit(2)\n")
        run = subprocess.run([sys.executable, "-c", code, str(folder / "d")], capture_output=True, text=True,
                             timeout=30)
        assert run.returncode == 2 and "another process holds this data folder" in run.stdout, run
        assert run.stdout.count("\n") == 1 and not run.stderr
    finally:
        held.close()
    DataDir(folder / "d", "127.0.0.1:5000").close()  # free again once the first let go


def test_a_folder_of_another_pid_or_group_is_refused(folder):
    d = DataDir(folder / "d", "127.0.0.1:5000")
    d.check_group("127.0.0.1:5000/17")
    d.check_group("127.0.0.1:5000/17")
    with pytest.raises(DataError, match="of group 127.0.0.1:5000/17, not 127.0.0.1:5001/3"):
        d.check_group("127.0.0.1:5001/3")
    d.close()
    with pytest.raises(DataError, match="is 127.0.0.1:5000's, not 127.0.0.1:5001's"):
        DataDir(folder / "d", "127.0.0.1:5001")
    again = DataDir(folder / "d", "127.0.0.1:5000")  # (the refusal let the lock go)
    assert again.identity == {"pid": "127.0.0.1:5000", "group": "127.0.0.1:5000/17"}
    again.close()


def test_a_full_disk_is_one_line_and_what_was_half_written_reads_back_as_a_torn_tail(folder):
    # /dev/full: every write fails with ENOSPC, as on a full disk
    log = RecordLog(folder / "log")
    whole = (folder / "log").stat().st_size
    import os
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, log._fd)  # (the log's descriptor now writes to a full device)
    os.close(full)
    with pytest.raises(DataError, match=r"log: cannot write: No space left on device"):
        log.append([b"lost"])
    assert read_log(folder / "log").records == [] and (folder / "log").stat().st_size == whole


@pytest.mark.parametrize("count", [1, 511, 512, 600, 3000])
def test_one_append_of_many_records_reads_back_whole_at_the_offsets_it_returned(folder, count):
    # one gathered write up to 512 records (1024 buffers: heads and payloads), one joined buffer past it
    payloads = [f"record {i} ".encode() * (i % 7) for i in range(count)]
    log = RecordLog(folder / "log", "never")
    log.append([b"first"])
    offsets = log.append([memoryview(p) if i % 2 else p for i, p in enumerate(payloads)])
    assert len(offsets) == count and offsets[0] == len(MAGIC) + HEADER.size + len(b"first")
    assert log.read_records(offsets[0], log.size) == payloads
    assert log.read_records(offsets[-1], log.size) == payloads[-1:]
    log.close()
    assert read_log(folder / "log").records == [b"first", *payloads]


def test_a_short_gathered_write_is_finished_whole(folder, monkeypatch):
    import os
    log = RecordLog(folder / "log", "never")
    real = os.writev

    def short(fd, parts):  # (the kernel may write less than asked: a signal, a pipe; here 11 bytes)
        return os.write(fd, b"".join(parts)[:11])

    monkeypatch.setattr(os, "writev", short)
    log.append([b"x" * 100, b"y" * 50])
    monkeypatch.setattr(os, "writev", real)
    log.append([b"z"])
    log.close()
    assert read_log(folder / "log").records == [b"x" * 100, b"y" * 50, b"z"]
