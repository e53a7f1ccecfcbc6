"""Headless input from a file (``tom peer --input FILE``): the lines and their offsets
(`tom.peer.inputfile.LineReader`), the file followed on the real disk (`InputFile`, `follow`), and where
a durable peer goes on reading after a restart (the offsets in ``accepted.log``)."""

from __future__ import annotations

import json
import os

import pytest
import trio

from tom.durable.log import read_log
from tom.errors import ConfigError
from tom.peer.durable import Durable
from tom.peer.events import SendTexts
from tom.peer.inputfile import MAX_LINE, InputFile, LineReader, follow

A = "127.0.0.1:5001"


def test_a_line_counts_once_its_newline_is_there_and_each_says_where_the_next_one_starts():
    r = LineReader()
    assert r.feed(b"one\r\n\ntw") == [("one", 5), ("", 6)]
    assert r.offset == 6 and r.at == 8  # "tw" waits for its newline
    assert r.feed(b"o\n") == [("two", 10)]
    assert r.feed(b"\xff\n") == [("\ufffd", 12)]  # not UTF-8: replacement characters
    r = LineReader(100)  # going on where a run before stopped
    assert r.feed(b"x\n") == [("x", 102)]


def test_a_line_longer_than_any_message_is_dropped_without_holding_it_in_memory():
    r = LineReader()
    assert r.feed(b"a" * (MAX_LINE + 10)) == []
    assert r.at == MAX_LINE + 10 and len(r.pending) == 0  # (the reader goes on past it)
    assert r.feed(b"aaa\nok\n") == [(None, MAX_LINE + 14), ("ok", MAX_LINE + 17)]


def test_a_missing_file_or_a_folder_is_a_setup_error_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="--input .*nope.txt: cannot read it") as e:
        InputFile(tmp_path / "nope.txt")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="cannot read it"):
        InputFile(tmp_path)


def test_the_file_is_followed_as_it_grows_in_bounded_reads(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\npart")
    f = InputFile(path)
    assert f.read() == [("a", 2), ("b", 4)]
    assert f.read() == [] and f.at_end() is None
    with open(path, "ab") as w:
        w.write(b"ial\n" + b"x\n" * 100_000)
    lines = f.read()
    assert lines[0] == ("partial", 12) and 1000 < len(lines) < 100_000  # one bounded read
    while more := f.read():
        lines += more
    assert len(lines) == 100_001 and lines[-1] == ("x", 12 + 200_000)
    f.close()


def test_a_file_truncated_in_place_is_said_once_and_waited_for(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\n")
    f = InputFile(path)
    assert len(f.read()) == 2
    os.truncate(path, 0)
    line = f.at_end()
    assert line is not None and "smaller than" in line and "\n" not in line
    assert f.at_end() is None  # once
    path.write_bytes(b"c\nd\ne\n")  # the same file grows past where reading stopped: it goes on there
    assert f.read() == [("e", 6)]
    f.close()


def test_a_file_replaced_while_followed_is_read_from_the_start_of_the_new_one(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\n")
    f = InputFile(path)
    assert len(f.read()) == 2
    (tmp_path / "new.txt").write_bytes(b"c\n")
    os.replace(tmp_path / "new.txt", path)
    line = f.at_end()
    assert line is not None and "replaced" in line
    assert f.read() == [("c", 2)]
    f.close()


def test_a_restarted_peer_goes_on_after_the_last_accepted_line_or_from_the_start_of_another_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\nc\n")
    inode = os.stat(path).st_ino
    f = InputFile(path, resume=(inode, 4))
    assert f.read() == [("c", 6)] and f.said == []
    f.close()
    f = InputFile(path, resume=(inode + 1, 4))  # another file than the one read before
    assert f.read()[0] == ("a", 2) and "another file" in f.said[0]
    f.close()


def test_offsets_go_to_accepted_log_with_their_lines_and_a_restart_reads_the_last(tmp_path):
    d = Durable(tmp_path / "data", A)
    assert d.input_at is None
    d.accept(["typed"])
    d.accept(["a", "b"], inputs=[(77, 2), (77, 6)])
    d.accept(["from the api"], keys=["k"])
    d.close()
    payloads = [json.loads(p) for p in read_log(tmp_path / "data" / "accepted.log").records]
    assert payloads[1:3] == [{"text": "a", "input": 2, "inode": 77}, {"text": "b", "input": 6, "inode": 77}]
    d = Durable(tmp_path / "data", A)
    assert d.input_at == (77, 6) and d.accepted == ["typed", "a", "b", "from the api"]
    d.close()


async def test_follow_sends_each_batch_with_its_offsets_and_does_not_stop_at_the_end(tmp_path, autojump_clock):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\n\nb\ntoo")
    source = InputFile(path)
    tx, rx = trio.open_memory_channel(10)
    busy = [False]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow, tx, A, source, lambda: busy[0])
        first = await rx.receive()
        assert isinstance(first, SendTexts) and first.texts == ["a", "b"]
        assert first.inputs == [(source.inode, 2), (source.inode, 5)]
        await trio.sleep(5)  # at the end of the file it waits (no leave)
        busy[0] = True
        with open(path, "ab") as w:
            w.write(b" late\n")
        await trio.sleep(5)
        with pytest.raises(trio.WouldBlock):  # backpressure: nothing read while busy
            rx.receive_nowait()
        busy[0] = False
        second = await rx.receive()
        assert second.texts == ["too late"] and second.inputs == [(source.inode, 14)]
        nursery.cancel_scope.cancel()
    source.close()
