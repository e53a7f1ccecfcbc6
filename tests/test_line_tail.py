"""`LineTail`: what the launcher and the netlab read of a peer's growing output file."""

from tom.tools.peers import LineTail


def test_a_line_is_read_once_and_only_when_complete(tmp_path):
    path = tmp_path / "out.jsonl"
    tail = LineTail(path)
    assert tail.new_lines() is None  # no file yet
    path.write_bytes(b'{"a":1}\n{"b"')
    assert tail.new_lines() == [b'{"a":1}']
    assert tail.new_lines() == []
    with open(path, "ab") as f:
        f.write(b':2}\n{"c":3}\n')
    assert tail.new_lines() == [b'{"b":2}', b'{"c":3}']
    assert tail.new_lines() == []


def test_a_torn_last_line_cut_off_by_its_writer_is_never_read(tmp_path):
    """A peer killed mid-write leaves half a line; started again, it cuts it off and appends."""
    path = tmp_path / "out.jsonl"
    tail = LineTail(path)
    path.write_bytes(b'{"a":1}\n{"b":1,"te')
    assert tail.new_lines() == [b'{"a":1}']
    with open(path, "r+b") as f:
        f.truncate(len(b'{"a":1}\n'))
        f.seek(0, 2)
        f.write(b'{"b":2,"text":"x"}\n{"c":3}\n')
    assert tail.new_lines() == [b'{"b":2,"text":"x"}', b'{"c":3}']
    assert tail.new_lines() == []
