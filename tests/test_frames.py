"""Frame codec: baseline syntax, TOM extensions, hostile text, rejection of malformed lines."""

import pytest
from hypothesis import given, strategies as st

from tom.errors import FrameError
from tom.codec import frames
from tom.codec.frames import (MAX_FRAME_BYTES, Ack, Acks, Flush, Flushed, Frame, Heartbeat, Hello, Install, Join,
                              Leave, Marks, Message, Propose, Received, Refused, Relay, Removed, Resume, Seq,
                              _fast_message, _parse_general, encode_frame, escape_text, format_frame, parse_frame)

PIDS = st.sampled_from(["127.0.0.1:5000", "10.0.0.2:5000", "my-host.lan:80", "[::1]:65535"])


def test_baseline_frames_parse_as_in_the_handout():
    assert parse_frame("MESSAGE-1234-10.0.0.2:5000-Text here") == Message(1234, "10.0.0.2:5000", "Text here")
    assert parse_frame("ACK-1234-10.0.0.2:5000") == Ack(1234, "10.0.0.2:5000")


def test_baseline_frames_format_as_in_the_handout():
    assert format_frame(Message(1234, "10.0.0.2:5000", "Text here")) == "MESSAGE-1234-10.0.0.2:5000-Text here"
    assert format_frame(Ack(1234, "10.0.0.2:5000")) == "ACK-1234-10.0.0.2:5000"
    assert encode_frame(Ack(1, "10.0.0.2:5000")) == b"ACK-1-10.0.0.2:5000\n"


def test_text_keeps_dashes_and_colons():
    f = parse_frame("MESSAGE-7-my-host:5000-a-b:c-d")
    assert f == Message(7, "my-host:5000", "a-b:c-d")


@given(clock=st.integers(0, 2**62), pid=PIDS, text=st.text(max_size=300),
       sent_at=st.none() | st.floats(0, 1e10, allow_nan=False))
def test_message_round_trips_hostile_text(clock, pid, text, sent_at):
    frame = Message(clock, pid, text, sent_at)
    wire = format_frame(frame)
    assert "\n" not in wire and "\r" not in wire
    assert parse_frame(wire) == frame


@given(clock=st.integers(0, 2**62), pid=PIDS)
def test_ack_round_trips(clock, pid):
    assert parse_frame(format_frame(Ack(clock, pid))) == Ack(clock, pid)


@given(clocks=st.lists(st.integers(0, 2**62), min_size=2, max_size=50), pid=PIDS)
def test_acks_round_trip(clocks, pid):
    frame = Acks(tuple(clocks), pid)
    assert parse_frame(format_frame(frame)) == frame
    assert parse_frame(format_frame(frame)) == frame  # again, with the pid now known (fast path)


@given(pid=PIDS, inc=st.integers(0, 2**62), order=st.sampled_from(["lamport", "sequencer", "causal", "future"]),
       wire=st.sampled_from([1, 2]))
def test_hello_round_trips(pid, inc, order, wire):
    assert parse_frame(format_frame(Hello(pid, inc, order, wire))) == Hello(pid, inc, order, wire)


def test_wire_2_rides_on_the_order_word():
    """Wire 2 is announced as ``<order>cumulative``: a TOM of wire 1 reads an order it does not run."""
    assert format_frame(Hello("127.0.0.1:5000", 7, "lamport", 2)) == "HELLO-127.0.0.1:5000-7-lamportcumulative"
    assert parse_frame("HELLO-127.0.0.1:5000-7-causalcumulative") == Hello("127.0.0.1:5000", 7, "causal", 2)
    with pytest.raises(FrameError):
        parse_frame("HELLO-127.0.0.1:5000-7-cumulative")


@given(marks=st.lists(st.integers(0, 2**62), min_size=1, max_size=40))
def test_marks_round_trip(marks):
    frame = Marks(tuple(marks))
    assert parse_frame(format_frame(frame)) == frame == _parse_general(format_frame(frame))


@given(clock=st.integers(0, 2**62), pid=PIDS, text=st.text(max_size=100),
       sent_at=st.none() | st.floats(0, 1e10, allow_nan=False),
       vc=st.none() | st.lists(st.integers(0, 99), min_size=1, max_size=5).map(tuple),
       marks=st.lists(st.integers(0, 2**62), min_size=1, max_size=5).map(tuple))
def test_a_message_with_marks_round_trips(clock, pid, text, sent_at, vc, marks):
    frame = Message(clock, pid, text, sent_at, vc, marks)
    wire = format_frame(frame)
    assert parse_frame(wire) == frame == _parse_general(wire)
    assert parse_frame(wire) == frame  # again, the pid now known (fast path)


def test_hello_names_an_order_other_than_lamport_only():
    """The course's plain HELLO is a lamport peer's; the order rides as a last field otherwise."""
    assert format_frame(Hello("127.0.0.1:5000", 7)) == "HELLO-127.0.0.1:5000-7"
    assert parse_frame("HELLO-127.0.0.1:5000-7") == Hello("127.0.0.1:5000", 7, "lamport")
    assert format_frame(Hello("my-host:5000", 7, "causal")) == "HELLO-my-host:5000-7-causal"
    assert parse_frame("HELLO-my-host:5000-7-causal") == Hello("my-host:5000", 7, "causal")
    for bad in ("HELLO-127.0.0.1:5000-7-Causal", "HELLO-127.0.0.1:5000-7-caus4l", "HELLO-127.0.0.1:5000-causal"):
        with pytest.raises(FrameError):
            parse_frame(bad)


@pytest.mark.parametrize("line", [
    "", "garbage", "MESSAGE", "MESSAGE-", "MESSAGE-x-127.0.0.1:5000-hi", "MESSAGE-1-nohostport",
    "MESSAGE-01-127.0.0.1:5000-hi", "MESSAGE--1-127.0.0.1:5000-hi", "ACK-1", "ACK-1-127.0.0.1:0",
    "ACK-1-127.0.0.1:99999", "ACK-1-127.0.0.1:5000-extra", "NOPE-1-2", "MESSAGE@nan-1-127.0.0.1:5000-x",
    "MESSAGE-1-127.0.0.1:5000-bad\\escape", "HELLO-127.0.0.1:5000", "ACK-١٢-127.0.0.1:5000",
    "MESSAGE-1-127.0.0.1:5000-" + "x" * MAX_FRAME_BYTES, "A" * 70000,
    "ACKS-1-127.0.0.1:5000", "ACKS-1,-127.0.0.1:5000", "ACKS-,1-127.0.0.1:5000", "ACKS-1,02-127.0.0.1:5000",
    "ACKS-1,x-127.0.0.1:5000", "ACKS-1,2-127.0.0.1:0", "ACKS-1,2", "ACKS-1;2-127.0.0.1:5000",
    "ACKS-" + ",".join(["1"] * 40000) + "-127.0.0.1:5000",
    "MARKS-", "MARKS-1,,2", "MARKS-01", "MARKS-1,x", "MARKS--1", "MARKS-" + ",".join(["1"] * 2000),
    "MESSAGE@1.5+-1-127.0.0.1:5000-x", "MESSAGE@1.5+1,02-1-127.0.0.1:5000-x", "MESSAGE+x-1-127.0.0.1:5000-x",
    "RELAY+1-1-127.0.0.1:5000-x", "MESSAGEX-1-127.0.0.1:5000-x",
])
def test_malformed_lines_are_rejected(line):
    with pytest.raises(FrameError):
        parse_frame(line)


def test_frames_validate_when_built():
    with pytest.raises(FrameError):
        Ack(-1, "127.0.0.1:5000")
    with pytest.raises(FrameError):
        Message(1, "not a pid", "x")


def test_send_time_beyond_microseconds_is_rounded_as_when_built():
    assert parse_frame("MESSAGE@1.1234567-1-127.0.0.1:5000-x") == Message(1, "127.0.0.1:5000", "x", 1.1234567)


def _general_or_error(line):
    try:
        return _parse_general(line)
    except FrameError:
        return FrameError


def _parse_or_error(line):
    try:
        return parse_frame(line)
    except FrameError:
        return FrameError


FIELD = st.sampled_from(["", "0", "01", "1", "42", "x", "1.5", "1.", ".5", "1763766000.123456",
                         "1763766000.1234567", "99999999999.1", "١٢", "127.0.0.1:5000", "my-host.lan:80"])


@given(kind=st.sampled_from(["MESSAGE@", "MESSAGE", "ACK", "ACKS", "RELAY@"]),
       fields=st.lists(FIELD | st.text(max_size=8), min_size=0, max_size=4),
       text=st.text(max_size=40), known=st.booleans())
def test_fast_paths_agree_with_the_general_parser(kind, fields, text, known):
    """Whatever the line, the fast paths return what the general parser returns, or hand over."""
    if known:
        parse_frame("ACK-1-127.0.0.1:5000")  # makes the pid known, as after the first frame
    line = kind + ("" if kind.endswith("@") else "-") + "-".join(fields) + "-" + escape_text(text)
    for candidate in (line, line.replace("-", "", 1), kind + "-".join(fields)):
        assert _parse_or_error(candidate) == _general_or_error(candidate), candidate


@given(clock=st.integers(0, 2**62), text=st.text(max_size=200),
       sent_at=st.floats(0, 1e10, allow_nan=False))
def test_fast_message_path_is_taken_and_exact(clock, text, sent_at):
    msg = Message(clock, "127.0.0.1:5000", text, sent_at)
    line = format_frame(msg)
    parse_frame(line)
    assert _parse_general(line) == msg
    assert _fast_message(line) == (msg if clock < 10**18 else None)  # 19 digits: the general path


# -- the wire, byte for byte -----------------------------------------------------------------------

A, B, V6 = "127.0.0.1:5000", "my-host.lan:80", "[::1]:65535"

GOLDEN = [
    (Message(1234, "10.0.0.2:5000", "Text here"), "MESSAGE-1234-10.0.0.2:5000-Text here"),
    (Message(7, B, "a-b:c-d\\ two\nlines\r"), "MESSAGE-7-my-host.lan:80-a-b:c-d\\\\ two\\nlines\\r"),
    (Message(42, A, "hi", sent_at=1763766000.123456), "MESSAGE@1763766000.123456-42-127.0.0.1:5000-hi"),
    (Message(42, V6, "", sent_at=0.5, marks=(3, 0, 17)), "MESSAGE@0.500000+3,0,17-42-[::1]:65535-"),
    (Message(9, A, "causal", sent_at=1.25, vc=(1, 0, 2)), "CMESSAGE@1.250000-9-127.0.0.1:5000-1,0,2-causal"),
    (Message(9, A, "causal", vc=(0, 4), marks=(5, 6)), "CMESSAGE+5,6-9-127.0.0.1:5000-0,4-causal"),
    (Message(2**63 - 1, A, "max", sent_at=99999999999.5),
     "MESSAGE@99999999999.500000-9223372036854775807-127.0.0.1:5000-max"),
    (Relay(3, A, "relayed"), "RELAY-3-127.0.0.1:5000-relayed"),
    (Relay(3, B, "relayed-with\ttab", sent_at=12.000001), "RELAY@12.000001-3-my-host.lan:80-relayed-with\ttab"),
    (Relay(3, A, "x", vc=(0, 1)), "CRELAY-3-127.0.0.1:5000-0,1-x"),
    (Relay(3, A, "x", sent_at=1.5, vc=(2, 1)), "CRELAY@1.500000-3-127.0.0.1:5000-2,1-x"),
    (Ack(1234, "10.0.0.2:5000"), "ACK-1234-10.0.0.2:5000"),
    (Ack(0, V6), "ACK-0-[::1]:65535"),
    (Acks((1, 2, 5), A), "ACKS-1,2,5-127.0.0.1:5000"),
    (Acks((10, 11), B), "ACKS-10,11-my-host.lan:80"),
    (Marks((0,)), "MARKS-0"),
    (Marks((4, 0, 9)), "MARKS-4,0,9"),
    (Seq(1, (2,), A), "SEQ-1-2-127.0.0.1:5000"),
    (Seq(4, (1, 5, 9), B), "SEQ-4-1,5,9-my-host.lan:80"),
    (Heartbeat(0), "HEARTBEAT-0"),
    (Heartbeat(3, 12, 0xDEADBEEF, (40, A)), "HEARTBEAT-3-12-deadbeef-40-127.0.0.1:5000"),
    (Heartbeat(1, 0, 0, (0, B)), "HEARTBEAT-1-0-00000000-0-my-host.lan:80"),
    (Refused("not in my neighbors file"), "REFUSED-not in my neighbors file"),
    (Refused("line\nbreak \\ back-slash"), "REFUSED-line\\nbreak \\\\ back-slash"),
    (Hello(A, 7), "HELLO-127.0.0.1:5000-7"),
    (Hello(B, 0, "causal"), "HELLO-my-host.lan:80-0-causal"),
    (Hello(A, 7, "lamport", 2), "HELLO-127.0.0.1:5000-7-lamportcumulative"),
    (Hello(V6, 2, "sequencer", 1), "HELLO-[::1]:65535-2-sequencer"),
    (Hello(B, 3, "causal", 2), "HELLO-my-host.lan:80-3-causalcumulative"),
    (Join(B, 5), "JOIN-my-host.lan:80-5"),
    (Leave(V6), "LEAVE-[::1]:65535"),
    (Flush(2, 1, A), "FLUSH-2-1-127.0.0.1:5000"),
    (Flushed(2, 1, 99), "FLUSHED-2-1-99"),
    (Removed(4), "REMOVED-4"),
    (Resume(0), "RESUME-0"),
    (Received(300), "RECEIVED-300"),
    (Propose(2, 1, A, ((A, 1), (B, 2)), ((V6, 3),), "127.0.0.1:5000/1"),
     'PROPOSE-{"view":2,"attempt":1,"coordinator":"127.0.0.1:5000","members":[["127.0.0.1:5000",1],'
     '["my-host.lan:80",2]],"removed":[["[::1]:65535",3]],"group":"127.0.0.1:5000/1"}'),
    (Propose(1, 0, A, ((A, 1),), ()),
     'PROPOSE-{"view":1,"attempt":0,"coordinator":"127.0.0.1:5000","members":[["127.0.0.1:5000",1]],'
     '"removed":[],"group":""}'),
    (Install(2, 1, A, 40, ((A, 1), (B, 2)), (B,), (), (V6,), "127.0.0.1:5000/1"),
     'INSTALL-{"view":2,"attempt":1,"coordinator":"127.0.0.1:5000","clock":40,"members":[["127.0.0.1:5000",1],'
     '["my-host.lan:80",2]],"joined":["my-host.lan:80"],"left":[],"removed":["[::1]:65535"],'
     '"group":"127.0.0.1:5000/1"}'),
    (Install(3, 0, B, 41, ((A, 1), (B, 2), (V6, 1)), (V6,), (), (), "g", ((A, 7), (V6, 0))),
     'INSTALL-{"view":3,"attempt":0,"coordinator":"my-host.lan:80","clock":41,"members":[["127.0.0.1:5000",1],'
     '["my-host.lan:80",2],["[::1]:65535",1]],"joined":["[::1]:65535"],"left":[],"removed":[],"group":"g",'
     '"marks":[["127.0.0.1:5000",7],["[::1]:65535",0]]}'),
]
"""One frame or more of every kind, and its exact wire text (as TOM formatted it before the codec became a
table): a change to any of these lines is a change of the wire."""


@pytest.mark.parametrize("frame,line", GOLDEN, ids=[line[:40] for _, line in GOLDEN])
def test_the_wire_form_of_every_kind_is_unchanged(frame, line):
    assert format_frame(frame) == line
    assert encode_frame(frame) == line.encode() + b"\n"
    assert parse_frame(line) == frame
    assert parse_frame(line) == frame  # again, every pid now known (the fast paths)
    assert _parse_general(line) == frame
    assert format_frame(parse_frame(line)) == line


def test_the_golden_lines_hold_every_kind_of_frame():
    kinds = {v for v in vars(frames).values() if isinstance(v, type) and issubclass(v, Frame) and v is not Frame}
    assert {type(frame) for frame, _ in GOLDEN} == kinds


@pytest.mark.parametrize("line,frame", [
    ("MESSAGE@1.5-3-127.0.0.1:5000-x", Message(3, A, "x", 1.5)),  # fewer decimals than TOM writes
    ("MESSAGE@1.1234567-1-127.0.0.1:5000-x", Message(1, A, "x", 1.123457)),  # more: whole microseconds
    ("MESSAGE@17-1-127.0.0.1:5000-x", Message(1, A, "x", 17.0)),
    ("CRELAY@1.5-3-my-host.lan:80-0,1-a-b", Relay(3, B, "a-b", 1.5, (0, 1))),
])
def test_lines_in_other_forms_parse_to_the_same_frame(line, frame):
    assert parse_frame(line) == frame == _parse_general(line)
