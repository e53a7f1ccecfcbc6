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
