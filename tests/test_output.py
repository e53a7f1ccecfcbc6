"""The output file: hand-built message lines equal the reference records, views included."""

import base64
import json

from hypothesis import given, strategies as st

from tom.core import Delivery, ViewDelivery
from tom.core.vector import Vector
from tom.peer.output import OutputFile, record

PEER = "127.0.0.1:5000"


PIDS = st.sampled_from(["127.0.0.1:5000", "127.0.0.1:5001", "[::1]:5001", "peer-b.example:10000"])
# what the causal core hands out: a view's members (pid order) and one count each, zeros among them
VECTORS = st.lists(st.integers(0, 10**9), min_size=1, max_size=9).map(
    lambda counts: Vector(tuple(f"10.0.0.{i}:5000" for i in range(len(counts))), tuple(counts)))


BYTES_TEXTS = st.binary(max_size=100).map(lambda b: "tom-b64 " + base64.b64encode(b).decode())  # (library bytes)


@given(text=st.text(max_size=200) | BYTES_TEXTS, clock=st.integers(0, 2**63 - 1), index=st.integers(1, 10**9),
       sent_at=st.none() | st.floats(0, 1e10, allow_nan=False).map(lambda x: round(x, 6)),
       delivered_at=st.floats(0, 1e10, allow_nan=False), view=st.integers(0, 10**6),
       seq=st.none() | st.integers(1, 2**63 - 1),
       vc=st.none() | st.dictionaries(PIDS, st.integers(0, 10**9)) | VECTORS)
def test_message_lines_parse_to_the_reference_record(tmp_path_factory, text, clock, index, sent_at,
                                                    delivered_at, view, seq, vc):
    """Every order's message lines (lamport: neither seq nor vc; sequencer: seq; causal: vc)."""
    path = tmp_path_factory.mktemp("out") / "o.jsonl"
    d = Delivery(index, clock, "[::1]:5001", text, sent_at, view, seq, vc)
    out = OutputFile(path, PEER)
    out.write([d], delivered_at)
    out.close()
    (line,) = path.read_text(encoding="utf-8").splitlines()
    got = json.loads(line)
    want = record(d, PEER, delivered_at)
    assert got == want and list(got) == list(want)  # the same keys in the same order
    assert got["v"] == 2 and ("seq" in got) == (seq is not None) and ("vc" in got) == (vc is not None)
    assert ("encoding" in got) == text.startswith("tom-b64 ")


@given(sent=st.lists(st.sampled_from([None, 0.0, -0.0, 1.5, 1795620084.813782, 1795620084.81378, 1e-7]),
                     min_size=1, max_size=12))
def test_a_batch_of_lines_is_the_reference_records_whatever_the_send_times(tmp_path_factory, sent):
    """Lines written together (a run's messages share their send time, written once) are each the
    reference record, with equal and differing send times in any order."""
    path = tmp_path_factory.mktemp("out") / "o.jsonl"
    batch = [Delivery(i + 1, i + 1, PEER, f"t{i}", at, 1) for i, at in enumerate(sent)]
    out = OutputFile(path, PEER)
    out.write(batch, 2.5)
    out.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == [json.dumps(record(d, PEER, 2.5), ensure_ascii=False, separators=(",", ":")) for d in batch]


def test_records_of_each_order_as_documented():
    """The schema-v2 additions, as docs/output-format.md lists them."""
    lamport = record(Delivery(1, 1, PEER, "hi", 1.5, 1), PEER, 2.0)
    assert lamport["v"] == 2 and "seq" not in lamport and "vc" not in lamport
    assert record(Delivery(7, 9, PEER, "hi", 1.5, 2, seq=4), PEER, 2.0)["seq"] == 4
    vc = {PEER: 2, "127.0.0.1:5001": 3}
    assert record(Delivery(7, 9, PEER, "re", 1.5, 2, vc=vc), PEER, 2.0)["vc"] == vc
    raw = record(Delivery(1, 1, PEER, "tom-b64 AAEC", 1.5, 1), PEER, 2.0)  # bytes 0, 1, 2 from the library
    assert raw["text"] == "AAEC" and raw["encoding"] == "base64" and list(raw)[6:8] == ["text", "encoding"]
    for order in ("lamport", "sequencer", "causal"):
        view = record(ViewDelivery(1, 1, PEER, 1, (PEER,), (PEER,), (), (), order), PEER, 2.0)
        assert view["order"] == order and view["v"] == 2
        assert view.get("seq") == (0 if order == "sequencer" else None)


def test_view_records_and_append(tmp_path):
    path = tmp_path / "o.jsonl"
    out = OutputFile(path, PEER)
    out.write([ViewDelivery(1, 5, PEER, 2, (PEER, "127.0.0.1:5001"), ("127.0.0.1:5001",), (), (), "sequencer")],
              10.5)
    out.close()
    out = OutputFile(path, PEER)  # appended, never truncated
    out.write([Delivery(2, 7, PEER, "x\ny", 9.25, 2)], 11.0)
    out.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["kind"] for r in records] == ["view", "message"]
    assert records[0]["members"] == [PEER, "127.0.0.1:5001"] and records[0]["joined"] == ["127.0.0.1:5001"]
    assert records[0]["order"] == "sequencer" and records[0]["seq"] == 0
    assert records[1]["text"] == "x\ny" and records[1]["delivered_at"] == 11.0


def test_a_restarted_peer_goes_on_after_its_old_records_and_cuts_a_torn_line(tmp_path):
    """A peer restarted on its file (a new incarnation numbers from 1 again): indexes go on after the
    file's last record, views included, and the half record a SIGKILL left is cut off first."""
    path = tmp_path / "o.jsonl"
    out = OutputFile(path, PEER)
    out.write([ViewDelivery(1, 1, PEER, 1, (PEER,), (PEER,), (), (), "lamport"),
               Delivery(2, 2, PEER, "a", 1.0, 1), Delivery(3, 3, PEER, "é" * 40_000, 1.0, 1)], 2.0)
    out.close()
    torn = b'{"v":2,"kind":"message","index":4,"peer":"127.0.0.1:50'  # killed mid-write
    with open(path, "ab") as f:
        f.write(torn)
    out = OutputFile(path, PEER)
    assert out.offset == 3 and "after record 3" in out.resumed
    assert f"torn last line, {len(torn)} bytes" in out.resumed
    out.write([ViewDelivery(1, 9, PEER, 3, (PEER,), (PEER,), (), (PEER,), "lamport"),
               Delivery(2, 10, PEER, "b", 9.0, 3)], 10.0)
    out.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["index"] for r in records] == [1, 2, 3, 4, 5]
    assert [r.get("text", "")[:1] for r in records] == ["", "a", "é", "", "b"]


def test_a_file_whose_last_line_is_no_record_numbers_from_one(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_text("notes of mine\n")
    out = OutputFile(path, PEER)
    assert out.offset == 0 and "no TOM record" in out.resumed
    out.close()
    assert OutputFile(tmp_path / "new.jsonl", PEER).resumed is None


def test_a_vector_is_the_dict_of_its_nonzero_counts():
    """A causal delivery's ``vc``: read-only ``{pid: count}`` over the view's members, zeros left out,
    equal to that dict both ways, a Mapping, not hashable, and the same after a pickle."""
    import pickle
    from collections.abc import Mapping

    v = Vector(("a:1", "b:1", "c:1"), (2, 0, 5))
    want = {"a:1": 2, "c:1": 5}
    assert v == want and want == v and not v != want and v != {"a:1": 2} and v != [("a:1", 2)]
    assert dict(v) == want and list(v) == ["a:1", "c:1"] and len(v) == 2 and repr(v) == repr(want)
    assert v["c:1"] == 5 and "b:1" not in v and v.get("b:1") is None and list(v.items()) == list(want.items())
    assert isinstance(v, Mapping) and pickle.loads(pickle.dumps(v)) == v
    try:
        v["b:1"]
    except KeyError:
        pass
    else:
        raise AssertionError("a zero count is no key")
    try:
        hash(v)
    except TypeError:
        pass
    else:
        raise AssertionError("a vector is a mapping: not hashable")
    try:
        Vector(("a:1",), (1, 2))
    except ValueError:
        pass
    else:
        raise AssertionError("one count per member")


def test_tally_says_whether_a_view_is_there_how_many_are_mine_and_the_highest_clock():
    from tom.peer.lines import tally
    me, other = "127.0.0.1:5000", "127.0.0.1:5001"
    msgs = [Delivery(1, 4, me, "a", 1.0, 1), Delivery(2, 9, other, "b", 1.0, 1), Delivery(3, 9, me, "c", 1.0, 1)]
    assert tally(msgs, me) == (False, 2, 9)
    assert tally(msgs, other) == (False, 1, 9)
    view = ViewDelivery(4, 12, other, 2, (me, other), (), (), ())  # (a view's pid is no message of its)
    assert tally([*msgs, view], other) == (True, 1, 12)
    assert tally([], me) == (False, 0, -1)
