"""The output file: hand-built message lines equal the reference records, views included."""

import json

from hypothesis import given, strategies as st

from tom.core import Delivery, ViewDelivery
from tom.output import OutputFile, record

PEER = "127.0.0.1:5000"


@given(text=st.text(max_size=200), clock=st.integers(0, 2**63 - 1), index=st.integers(1, 10**9),
       sent_at=st.none() | st.floats(0, 1e10, allow_nan=False).map(lambda x: round(x, 6)),
       delivered_at=st.floats(0, 1e10, allow_nan=False), view=st.integers(0, 10**6))
def test_message_lines_parse_to_the_reference_record(tmp_path_factory, text, clock, index, sent_at,
                                                    delivered_at, view):
    path = tmp_path_factory.mktemp("out") / "o.jsonl"
    d = Delivery(index, clock, "[::1]:5001", text, sent_at, view)
    out = OutputFile(path, PEER)
    out.write([d], delivered_at)
    out.close()
    (line,) = path.read_text(encoding="utf-8").splitlines()
    got = json.loads(line)
    want = record(d, PEER, delivered_at)
    assert got == want


def test_view_records_and_append(tmp_path):
    path = tmp_path / "o.jsonl"
    out = OutputFile(path, PEER)
    out.write([ViewDelivery(1, 5, PEER, 2, (PEER, "127.0.0.1:5001"), ("127.0.0.1:5001",), (), ())], 10.5)
    out.close()
    out = OutputFile(path, PEER)  # appended, never truncated
    out.write([Delivery(2, 7, PEER, "x\ny", 9.25, 2)], 11.0)
    out.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["view", "message"]
    assert records[0]["members"] == [PEER, "127.0.0.1:5001"] and records[0]["joined"] == ["127.0.0.1:5001"]
    assert records[1]["text"] == "x\ny" and records[1]["delivered_at"] == 11.0
