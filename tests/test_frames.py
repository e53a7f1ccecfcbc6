"""Frame codec: baseline syntax, TOM extensions, hostile text, rejection of malformed lines."""

import pytest
from hypothesis import given, strategies as st

from tom.errors import FrameError
from tom.frames import Ack, Acks, Hello, Message, encode_frame, format_frame, parse_frame, MAX_TEXT_CHARS

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


@given(pid=PIDS, inc=st.integers(0, 2**62))
def test_hello_round_trips(pid, inc):
    assert parse_frame(format_frame(Hello(pid, inc))) == Hello(pid, inc)


@pytest.mark.parametrize("line", [
    "", "garbage", "MESSAGE", "MESSAGE-", "MESSAGE-x-127.0.0.1:5000-hi", "MESSAGE-1-nohostport",
    "MESSAGE-01-127.0.0.1:5000-hi", "MESSAGE--1-127.0.0.1:5000-hi", "ACK-1", "ACK-1-127.0.0.1:0",
    "ACK-1-127.0.0.1:99999", "ACK-1-127.0.0.1:5000-extra", "NOPE-1-2", "MESSAGE@nan-1-127.0.0.1:5000-x",
    "MESSAGE-1-127.0.0.1:5000-bad\\escape", "HELLO-127.0.0.1:5000", "ACK-١٢-127.0.0.1:5000",
    "MESSAGE-1-127.0.0.1:5000-" + "x" * (MAX_TEXT_CHARS + 1), "A" * 70000,
    "ACKS-1-127.0.0.1:5000", "ACKS-1,-127.0.0.1:5000", "ACKS-,1-127.0.0.1:5000", "ACKS-1,02-127.0.0.1:5000",
    "ACKS-1,x-127.0.0.1:5000", "ACKS-1,2-127.0.0.1:0", "ACKS-1,2", "ACKS-1;2-127.0.0.1:5000",
    "ACKS-" + ",".join(["1"] * 40000) + "-127.0.0.1:5000",
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
