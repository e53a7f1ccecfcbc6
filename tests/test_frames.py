"""Frame codec: baseline syntax, TOM extensions, hostile text, rejection of malformed lines, every kind's
validation, the wire byte for byte, and the fast parses held to the table."""

import pytest
import re

from hypothesis import given, settings, strategies as st

from tom.errors import FrameError
from tom.codec import frames
from tom.codec.frames import (MAX_FRAME_BYTES, Ack, Acks, CatchUp, Direct, History, Progress, Flush, Flushed, Frame, Heartbeat, Hello, Install, Join,
                              Leave, Marks, Message, Messages, Prepare, Promise, Propose, Received, Refused, Relay, Removed, Resume,
                              Sees, Suspect, Seq,
                              FRAME_KINDS, _parse_by_table, _plain_message, encode_frame, escape_text, format_frame, parse_frame)

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


@given(pid=PIDS, inc=st.integers(0, 2**62), order=st.sampled_from(["lamport", "sequencer", "causal", "future"]),
       wire=st.sampled_from([1, 2, 3]))
def test_hello_round_trips(pid, inc, order, wire):
    assert parse_frame(format_frame(Hello(pid, inc, order, wire))) == Hello(pid, inc, order, wire)


def test_wire_2_rides_on_the_order_word():
    """Wire 2 is announced as ``<order>cumulative``: a TOM of wire 1 reads an order it does not run."""
    assert format_frame(Hello("127.0.0.1:5000", 7, "lamport", 2)) == "HELLO-127.0.0.1:5000-7-lamportcumulative"
    assert parse_frame("HELLO-127.0.0.1:5000-7-causalcumulative") == Hello("127.0.0.1:5000", 7, "causal", 2)
    with pytest.raises(FrameError):
        parse_frame("HELLO-127.0.0.1:5000-7-cumulative")


def test_wire_3_rides_on_the_order_word():
    """Wire 3 (runs of messages) is announced as ``<order>runs``, by every order."""
    assert format_frame(Hello("127.0.0.1:5000", 7, "lamport", 3)) == "HELLO-127.0.0.1:5000-7-lamportruns"
    assert parse_frame("HELLO-127.0.0.1:5000-7-sequencerruns") == Hello("127.0.0.1:5000", 7, "sequencer", 3)
    with pytest.raises(FrameError):
        parse_frame("HELLO-127.0.0.1:5000-7-runs")


@given(marks=st.lists(st.integers(0, 2**62), min_size=1, max_size=40))
def test_marks_round_trip(marks):
    frame = Marks(tuple(marks))
    assert parse_frame(format_frame(frame)) == frame == _parse_by_table(format_frame(frame))


@given(clock=st.integers(0, 2**62), pid=PIDS, text=st.text(max_size=100),
       sent_at=st.none() | st.floats(0, 1e10, allow_nan=False),
       vc=st.none() | st.lists(st.integers(0, 99), min_size=1, max_size=5).map(tuple),
       marks=st.lists(st.integers(0, 2**62), min_size=1, max_size=5).map(tuple))
def test_a_message_with_marks_round_trips(clock, pid, text, sent_at, vc, marks):
    frame = Message(clock, pid, text, sent_at, vc, marks)
    wire = format_frame(frame)
    assert parse_frame(wire) == frame == _parse_by_table(wire)


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
    "PROPOSE-" + "[" * 60000, "INSTALL-" + '{"a":' * 13000, "PROPOSE-[]", "INSTALL-{}",
    "HEARTBEAT-1 ", "REMOVED-1 ", "REMOVED-x 127.0.0.1:5000/1", "HEARTBEAT-1-2 127.0.0.1:5000/1",
    "MESSAGES@1.5-1-127.0.0.1:5000-1-x", "MESSAGES@1.5-1-127.0.0.1:5000-1,1-x",
    "MESSAGES@1.5-1-127.0.0.1:5000-1,1-xyz", "MESSAGES@1.5-1-127.0.0.1:5000-1,01-xy",
    "MESSAGES@1.5-1-127.0.0.1:5000-1,2-\\nx", "MESSAGES@1.5-1-127.0.0.1:5000-1,2-x\\", "MESSAGES@1.5-1-127.0.0.1:5000-xy",
    "MESSAGES@x-1-127.0.0.1:5000-1,1-xy", "MESSAGES@1.5-1-127.0.0.1:5000-" + ",".join(["0"] * 257) + "-",
    "MESSAGES@1.5-9223372036854775807-127.0.0.1:5000-1,1-xy", "MESSAGES@1.5+1,x-1-127.0.0.1:5000-1,1-xy",
    "MESSAGES@1.5-1-127.0.0.1:5000-1,,1-xy",
    "CMESSAGES@1.5-1-127.0.0.1:5000-3-0,1,2-1,1-xy", "CMESSAGES@1.5-1-127.0.0.1:5000-0-1,1-xy",
    "CMESSAGES@1.5-1-127.0.0.1:5000-x-0,1-1,1-xy", "CMESSAGES@1.5-1-127.0.0.1:5000-0--1,1-xy",
    "CMESSAGES@1.5-1-127.0.0.1:5000-0-9223372036854775807-1,1-xy",
])
def test_malformed_lines_are_rejected(line):
    with pytest.raises(FrameError):
        parse_frame(line)


def test_send_time_beyond_microseconds_is_rounded_as_when_built():
    assert parse_frame("MESSAGE@1.1234567-1-127.0.0.1:5000-x") == Message(1, "127.0.0.1:5000", "x", 1.1234567)


@pytest.mark.parametrize("sent_at", [0, -0.0, 7, 1e-7, 99999999999.99998, 99999999999.999985])
def test_a_message_takes_only_send_times_its_wire_form_carries(sent_at):
    """(Before, a negative, infinite or NaN send time, or one of 1e11 or more, made a frame that
    formatted and could not be parsed.)"""
    for frame in (Message(1, "127.0.0.1:5000", "x", sent_at), Relay(1, "127.0.0.1:5000", "x", sent_at)):
        assert type(frame.sent_at) is float and 0 <= frame.sent_at < 1e11
        assert parse_frame(format_frame(frame)) == frame
        assert not format_frame(frame).startswith(("MESSAGE@-", "RELAY@-"))


# -- every kind validates its fields when built ---------------------------------------------------

P = "127.0.0.1:5000"
BAD_BUILDS = [
    lambda: Message(-1, P, "x"), lambda: Message(1, "not a pid", "x"), lambda: Message(1, P, b"x"),
    lambda: Message(1, P, "x", vc=()), lambda: Message(1, P, "x", marks=(1, -1)),
    lambda: Message(1, P, "x" * (MAX_FRAME_BYTES + 1)),
    lambda: Message(1, P, "x", sent_at=-1.0), lambda: Message(1, P, "x", sent_at=float("nan")),
    lambda: Message(1, P, "x", sent_at=float("inf")), lambda: Message(1, P, "x", sent_at="1.5"),
    lambda: Relay(1, P, "x", sent_at=1e11), lambda: Relay(1, P, "x", sent_at=99999999999.9999999),
    lambda: Relay(2**63, P, "x"), lambda: Relay(1, P, "x", vc=(True,)),
    lambda: Ack(-1, P), lambda: Ack(1, ["127.0.0.1:5000"]),
    lambda: Acks((1,), P), lambda: Acks([1, 2], P),
    lambda: Marks(()), lambda: Marks((0,) * 1025),
    lambda: Seq(0, (1,), P), lambda: Seq(1, (), P),
    lambda: Heartbeat(-1), lambda: Heartbeat(1, 2), lambda: Heartbeat(1, 2, 2**32, (1, P)),
    lambda: Refused("x" * 1001),
    lambda: Hello(P, -1), lambda: Hello(P, 1, "Causal"), lambda: Hello(P, 1, "lamportcumulative"),
    lambda: Hello(P, 1, "lamport", 4), lambda: Hello(P, 1, "lamportruns", 3),
    lambda: Messages(1, P, ("x",)), lambda: Messages(1, P, ["x", "y"]), lambda: Messages(1, P, ("x",) * 257),
    lambda: Messages(2**63 - 1, P, ("x", "y")), lambda: Messages(1, P, ("x", b"y")),
    lambda: Messages(1, P, ("x", "y" * MAX_FRAME_BYTES)), lambda: Messages(1, P, ("x", "y"), sent_at=-1.0),
    lambda: Messages(1, P, ("x", "y"), marks=()), lambda: Messages(1, "not a pid", ("x", "y")),
    lambda: Messages(1, P, ("x", "y"), vc=(1, 2), grows=2), lambda: Messages(1, P, ("x", "y"), grows=1),
    lambda: Messages(1, P, ("x", "y"), vc=(2**63 - 1,)), lambda: Messages(1, P, ("x", "y"), vc=()),
    lambda: Direct(5), lambda: Direct("x" * (MAX_FRAME_BYTES + 1)),
    lambda: Join(P, -1), lambda: Leave("127.0.0.1:0"), lambda: Flush(1, 1, "x"), lambda: Flushed(1, 1, 1.0),
    lambda: Removed(-1), lambda: Removed(1, "a\nb"), lambda: Heartbeat(1, group="a\nb"), lambda: Suspect(1, P, 1, -1),
    lambda: Sees(1, "x", 1), lambda: Resume("1"), lambda: Received(None),
    lambda: Propose(1, 1, P, ((P,),), ()), lambda: Propose(1, 1, P, (), (), "a\nb"),
    lambda: Install(1, 1, P, 1, (), ("bad",), (), ()), lambda: Install(1, 1, P, 1, (), (), (), (), "", ((P, -1),)),
    lambda: Prepare(1, -1, P), lambda: Prepare(1, 1, P, "a\nb"),
    lambda: Promise(2, 1, P, ((0, P, (P,), Install(3, 0, P, 1, (), (), (), ())),)),
    lambda: Flush(1, 1, P, -1), lambda: Propose(2, 1, P, (), (), "", Install(3, 0, P, 1, (), (), (), ())),
    lambda: CatchUp(1, -1, 2), lambda: Join(P, 1, 3), lambda: Join(P, 1, 0, "g"), lambda: History("maybe"), lambda: History("end", 1, ("x", 1)), lambda: History("end", -1),
    lambda: Progress(-1, 0), lambda: Progress(1, -2),
]


@pytest.mark.parametrize("build", BAD_BUILDS)
def test_every_kind_validates_its_fields_when_built(build):
    """A frame built with a bad field raises FrameError; in the compiled build a field of the wrong
    type is refused before that, as a TypeError (mypyc checks the annotations)."""
    from tom.build import compiled

    if compiled() and build is BAD_BUILDS[13]:
        pytest.skip("a bool where an int is due: the compiled build takes it as the int (mypyc); on the wire "
                    "no field is a bool, and a true or false in a frame is refused (test below)")
    with pytest.raises((FrameError, TypeError) if compiled() else FrameError):
        build()


@pytest.mark.parametrize("line", [
    'INSTALL-{"view":2,"attempt":0,"coordinator":"127.0.0.1:5000","clock":1,"members":"abc","joined":[],'
    '"left":[],"removed":[],"group":"127.0.0.1:5000/1"}',
    'INSTALL-{"view":"2","attempt":0,"coordinator":"127.0.0.1:5000","clock":1,"members":[["127.0.0.1:5000",1]],'
    '"joined":[],"left":[],"removed":[],"group":"127.0.0.1:5000/1"}',
    'PREPARE-{"view":2,"attempt":[1],"coordinator":"127.0.0.1:5000","group":"127.0.0.1:5000/1"}',
    'PREPARE-{"view":true,"attempt":1,"coordinator":"127.0.0.1:5000","group":"127.0.0.1:5000/1"}',
])
def test_a_wire_field_of_the_wrong_type_is_a_frame_error_in_either_build(line):
    with pytest.raises(FrameError):
        parse_frame(line)


def test_there_is_a_bad_build_of_every_kind():
    built = {getattr(frames, build.__code__.co_names[0]) for build in BAD_BUILDS}  # the class each one calls
    assert built == {kind.cls for kind in FRAME_KINDS}


# -- the table, and the fast parses held to it ------------------------------------------------------

ANY_PID = st.sampled_from(["127.0.0.1:5000", "10.0.0.2:5000", "my-host.lan:80", "[::1]:65535", "a-b-c:1"])
CLOCK = st.integers(0, 10**6) | st.integers(10**17, 2**63 - 1)  # 18 digits and 19 (which no fast parse takes)
COUNT = st.integers(0, 2**63 - 1)
SENT_AT = (st.none() | st.floats(0, 1e11, exclude_max=True) | st.floats(0, 1e10)
           | st.integers(0, 2 * 10**9).map(lambda s: s + 0.123456))


def clocks(low, high):
    return st.lists(CLOCK, min_size=low, max_size=high).map(tuple)


MEMBERS = st.lists(st.tuples(ANY_PID, COUNT), max_size=4).map(tuple)
PID_LIST = st.lists(ANY_PID, max_size=3).map(tuple)
GROUP = st.text(max_size=30).filter(lambda g: "\n" not in g)
ORDER = st.from_regex(r"[a-z]{1,20}", fullmatch=True).filter(lambda o: not o.endswith(("cumulative", "runs")))
TEXTS = st.lists(st.text(max_size=20), min_size=2, max_size=6).map(tuple)


@st.composite
def causal_runs(draw, fast=False):
    """A causal run: its first vector, and which count grows along it."""
    vc = draw(st.lists(st.integers(0, 10**6) | st.integers(10**17, 2**62), min_size=1, max_size=5).map(tuple))
    return Messages(draw(st.integers(0, 10**6)), draw(ANY_PID), draw(TEXTS), draw(SENT_AT),
                    draw(st.none() | clocks(1, 4)), vc, draw(st.integers(0, len(vc) - 1)))

FRAMES = st.one_of(
    st.builds(Message, CLOCK, ANY_PID, st.text(max_size=60), SENT_AT, st.none() | clocks(1, 5),
              st.none() | clocks(1, 5)),
    st.builds(Relay, CLOCK, ANY_PID, st.text(max_size=60), SENT_AT, st.none() | clocks(1, 5)),
    st.builds(Messages, st.integers(0, 10**6) | st.integers(10**17, 2**63 - 7), ANY_PID, TEXTS, SENT_AT,
              st.none() | clocks(1, 5)),
    causal_runs(),
    st.builds(Ack, CLOCK, ANY_PID),
    st.builds(Acks, clocks(2, 6), ANY_PID),
    st.builds(Marks, clocks(1, 6)),
    st.builds(Seq, st.integers(1, 2**63 - 1) | st.integers(1, 10**6), clocks(1, 6), ANY_PID),
    st.builds(Heartbeat, COUNT) | st.builds(Heartbeat, COUNT, COUNT, st.integers(0, 2**32 - 1),
                                            st.tuples(CLOCK, ANY_PID)),
    st.builds(Refused, st.text(max_size=100)),
    st.builds(Hello, ANY_PID, COUNT, ORDER, st.sampled_from([1, 2, 3])),
    st.builds(Join, ANY_PID, COUNT),
    st.builds(Leave, ANY_PID),
    st.builds(Flush, COUNT, COUNT, ANY_PID),
    st.builds(Flushed, COUNT, COUNT, CLOCK),
    st.builds(Removed, COUNT),
    st.builds(Suspect, COUNT, ANY_PID, COUNT, COUNT),
    st.builds(Sees, COUNT, ANY_PID, COUNT),
    st.builds(Resume, COUNT),
    st.builds(Received, COUNT),
    st.builds(Propose, COUNT, COUNT, ANY_PID, MEMBERS, MEMBERS, GROUP),
    st.builds(Install, COUNT, COUNT, ANY_PID, CLOCK, MEMBERS, PID_LIST, PID_LIST, PID_LIST, GROUP,
              st.lists(st.tuples(ANY_PID, CLOCK), max_size=3).map(tuple)),
)

KIND_OF = {kind.cls: kind for kind in FRAME_KINDS}


def outcome(parse, line):
    """What ``parse`` makes of ``line``: the frame (with its type), or the error's message."""
    try:
        frame = parse(line)
    except FrameError as e:
        return ("error", str(e))
    return (type(frame), frame)


def takes_the_fast_parse(frame):
    """Whether TOM's own frame ``frame`` is of the form its kind's fast parse must take."""
    short = lambda *ns: all(n < 10**18 for n in ns)
    if type(frame) is Message:
        return (frame.sent_at is not None and "-" not in frame.pid
                and short(frame.clock, *(frame.vc or ()), *(frame.marks or ())))
    if type(frame) is Messages:  # (a causal run is read by the table's parse: once per run)
        return (frame.vc is None and frame.sent_at is not None and "-" not in frame.pid
                and short(frame.clock, *(frame.marks or ())))
    if type(frame) is Marks:
        return short(*frame.marks)
    if type(frame) is Seq:
        return short(frame.first, *frame.clocks)  # (the pid is the last field: it may hold "-")
    if type(frame) is Ack:
        return short(frame.clock)
    if type(frame) is Acks:
        return short(*frame.clocks)
    return False


def test_each_kind_is_in_the_table_once():
    assert len(KIND_OF) == len(FRAME_KINDS)
    tags = [tag for kind in FRAME_KINDS for tag in kind.tags]
    assert len(tags) == len(set(tags))


@given(frame=FRAMES)
def test_every_frame_is_parsed_the_same_by_its_fast_parse_and_the_table(frame):
    line = format_frame(frame)
    assert "\n" not in line and "\r" not in line
    assert outcome(parse_frame, line) == outcome(_parse_by_table, line) == (type(frame), frame)
    assert format_frame(parse_frame(line)) == line
    kind = KIND_OF[type(frame)]
    if kind.fast is not None:
        head, _, rest = line.partition("-")
        quick = kind.fast(head, rest)
        assert quick is None or (type(quick), quick) == (type(frame), frame)
        assert (quick is not None) == takes_the_fast_parse(frame)


FAST_FRAMES = st.one_of(
    st.builds(Message, CLOCK, ANY_PID, st.text(max_size=30), SENT_AT, st.none() | clocks(1, 4),
              st.none() | clocks(1, 4)),
    st.builds(Marks, clocks(1, 4)),
    st.builds(Messages, st.integers(0, 10**6) | st.integers(10**17, 2**63 - 7), ANY_PID, TEXTS, SENT_AT,
              st.none() | clocks(1, 4)),
    st.builds(Ack, CLOCK | st.integers(10**17, 2**63 - 1), ANY_PID),
    st.builds(Acks, clocks(2, 4), ANY_PID),
    st.builds(Seq, st.integers(1, 10**6) | st.integers(10**17, 2**63 - 1), clocks(1, 4), ANY_PID),
)


@settings(max_examples=500)
@given(frame=FAST_FRAMES)
def test_a_fast_parse_takes_exactly_the_forms_it_names(frame):
    line = format_frame(frame)
    head, _, rest = line.partition("-")
    quick = KIND_OF[type(frame)].fast(head, rest)
    assert (quick is not None) == takes_the_fast_parse(frame)
    assert quick is None or (type(quick), quick) == (type(frame), frame) == outcome(_parse_by_table, line)


@settings(max_examples=500)
@given(frame=FAST_FRAMES)
def test_the_plain_message_parse_takes_exactly_plain_messages_as_tom_sends_them(frame):
    line = format_frame(frame)
    quick = _plain_message(line)
    plain = type(frame) is Message and frame.vc is None and takes_the_fast_parse(frame)
    assert (quick is not None) == plain
    assert quick is None or (type(quick), quick) == (type(frame), frame) == outcome(_parse_by_table, line)


PLAIN_MESSAGE_BEFORE = re.compile(  # the regular expression the hand-written parse replaced: the oracle
    r"MESSAGE@([0-9]{1,11}\.[0-9]{1,6})(?:\+((?:0|[1-9][0-9]{0,17})(?:,(?:0|[1-9][0-9]{0,17}))*))?"
    r"-(0|[1-9][0-9]{0,17})-([^-\\]*)-", re.ASCII)
NEAR_MESSAGES = st.lists(st.sampled_from(["0", "1", "9", "00", "12", "1234567890123456789", ".", "+", ",", "-",
                                          "\\", "\\n", "x", "١", "²", "127.0.0.1:5000", "h-1:80", " ", ""]),
                         max_size=12).map(lambda parts: "MESSAGE@" + "".join(parts)) | st.builds(
    lambda stamp, marks, clock, pid, text: f"MESSAGE@{stamp}{marks}-{clock}-{pid}-{text}",
    st.sampled_from(["1.5"] * 8 + ["12345678901.123456", "123456789012.5", "1.1234567", "1.", ".5", "1", "١.5", "1.5.5",
                     "0.0", "01.5", ""]),
    st.sampled_from([""] * 6 + ["+1,2,3"] * 6 + ["+0", "+01", "+1,", "+,1", "+", "+" + ",".join(["7"] * 1024),
                     "+" + ",".join(["7"] * 1025), "+123456789012345678", "+1234567890123456789", "+1+2", "+١"]),
    st.sampled_from(["7"] * 8 + ["0", "00", "07", "123456789012345678", "1234567890123456789", "", "١", "+1", "1.5"]),
    st.sampled_from(["127.0.0.1:5000"] * 8 + ["127.0.0.1:0", "host:80", "[::1]:9", "x\\y:1", "", "a:b", "HOST:80"]),
    st.sampled_from(["x"] * 6 + ["", "a-b-c", "back\\\\slash", "bad\\q", "new\\nline", "tail\\", "١"]))


def plain_message_before(line):
    """The parse the hand-written one replaced (a regular expression, then the same checks): the oracle."""
    m = PLAIN_MESSAGE_BEFORE.match(line)
    if m is None:
        return None
    stamp, marks_field, clock, pid = m.groups()
    if not frames.is_pid(pid):
        return None
    marks = None
    if marks_field is not None:
        marks = tuple(map(int, marks_field.split(",")))
        if len(marks) > frames.MAX_MARKS:
            return None
    text = line[m.end():]
    if "\\" in text:
        try:
            text = frames.unescape_text(text)
        except FrameError:
            return None
    return Message(int(clock), pid, text, float(stamp), None, marks)


@settings(max_examples=3000)
@given(line=NEAR_MESSAGES)
def test_the_plain_message_parse_takes_what_the_regular_expression_took_and_only_that(line):
    """Lines near the form, good and bad: the hand-written parse gives what the regular expression it
    replaced gave (the same message, or None for the full parse to judge)."""
    assert _plain_message(line) == plain_message_before(line), line


OVER = str(2**63)  # 19 digits, over the largest clock
EDGE_LINES = [
    f"MESSAGE@1.5-{OVER}-{P}-x", f"MESSAGE@1.5+{OVER}-1-{P}-x", f"CMESSAGE@1.5-1-{P}-{OVER}-x",
    f"MESSAGE@1.5-{OVER[:-1]}-{P}-x", f"CMESSAGE@1.5+1-1-{P}-0,{OVER[:-1]}-x", "MARKS-١", f"SEQ-1-١-{P}",
    f"MESSAGE@1.5+1,١-1-{P}-x", f"CMESSAGE@1.5-1-{P}-١-x", f"MESSAGE@1.5-١-{P}-x",
    "MESSAGE@1.5+" + ",".join(["1"] * 1024) + f"-1-{P}-x", "MESSAGE@1.5+" + ",".join(["1"] * 1025) + f"-1-{P}-x",
    f"MARKS-{OVER}", f"MARKS-1,{OVER[:-1]}", "MARKS-" + ",".join(["1"] * 1024), "MARKS-" + ",".join(["1"] * 1025),
    f"SEQ-0-1-{P}", f"SEQ-{OVER}-1-{P}", f"SEQ-1-{OVER}-{P}", f"SEQ-1-1,{OVER[:-1]}-{P}", "SEQ-1-1-my-host.lan:80",
    f"SEQ-01-1-{P}", f"SEQ-1-1-{P}-", f"SEQ-1--{P}",
    f"MESSAGE@123456789012.5-1-{P}-x", f"MESSAGE@1.1234567-1-{P}-x", f"MESSAGE@1-1-{P}-x", f"MESSAGE@.5-1-{P}-x",
    f"MESSAGE@1.-1-{P}-x", f"MESSAGE@١.5-1-{P}-x", f"MESSAGE@1.5-1-{P}-bad\\q", f"MESSAGE@1.5-1-my-host.lan:80-x",
    f"CMESSAGE@1.5-1-{P}-x", f"CMESSAGE@1.5-1-{P}--x", f"MESSAGE@1.5+-1-{P}-x", f"MESSAGE+1@1.5-1-{P}-x",
    f"MESSAGE@1.5@2-1-{P}-x", f"RELAY@1.5-1-{P}-x", f"MESSAGE@1.5-01-{P}-x", f"MESSAGE@1.5-1-127.0.0.1:0-x",
    f"ACK-{OVER}-{P}", f"ACK-{OVER[:-1]}-{P}", f"ACK-01-{P}", f"ACK-1-", f"ACK--{P}", "ACK-1-my-host.lan:80",
    f"ACKS-1-{P}", f"ACKS-1,2-{P}", f"ACKS-1,{OVER}-{P}", f"ACKS-1,,2-{P}", f"ACKS-1,2-127.0.0.1:0", "ACKS-1,2-my-host.lan:80",
]


@pytest.mark.parametrize("line", EDGE_LINES)
def test_the_fast_parses_agree_with_the_table_at_their_edges(line):
    assert outcome(parse_frame, line) == outcome(_parse_by_table, line)


JUNK = st.sampled_from(["", "-", "0", "01", "x", ",", ",,", "@", "+", ".", "١", "9" * 19, ":", "[", "\\",
                        "\\q", "-1", " ", "1e3"])


@given(frame=FAST_FRAMES | FRAMES, at=st.integers(0, 10**6), cut=st.integers(0, 3), junk=JUNK)
def test_the_fast_parses_agree_with_the_table_on_damaged_lines(frame, at, cut, junk):
    """Whatever the line, a fast parse returns what the table's parse returns, or hands over."""
    line = format_frame(frame)
    i = at % (len(line) + 1)
    damaged = line[:i] + junk + line[i + cut:]
    assert outcome(parse_frame, damaged) == outcome(_parse_by_table, damaged), damaged


FIELD = st.sampled_from(["", "0", "01", "1", "42", "x", "1.5", "1.", ".5", "1763766000.123456",
                         "1763766000.1234567", "99999999999.1", "١٢", "127.0.0.1:5000", "my-host.lan:80", "1,2"])


@given(kind=st.sampled_from(["MESSAGE@", "CMESSAGE@", "MESSAGE", "MESSAGES@", "CMESSAGES@", "MARKS", "SEQ", "ACK",
                             "ACKS", "RELAY@"]),
       fields=st.lists(FIELD | st.text(max_size=8), min_size=0, max_size=4), text=st.text(max_size=40))
def test_the_fast_parses_agree_with_the_table_on_any_line(kind, fields, text):
    line = kind + ("" if kind.endswith("@") else "-") + "-".join(fields) + "-" + escape_text(text)
    for candidate in (line, line.replace("-", "", 1), kind + "-".join(fields)):
        assert outcome(parse_frame, candidate) == outcome(_parse_by_table, candidate), candidate


# -- the wire, byte for byte -----------------------------------------------------------------------

A, B, V6 = "127.0.0.1:5000", "my-host.lan:80", "[::1]:65535"

GOLDEN = [
    (Message(1234, "10.0.0.2:5000", "Text here"), "MESSAGE-1234-10.0.0.2:5000-Text here"),
    (Message(7, B, "a-b:c-d\\ two\nlines\r"), "MESSAGE-7-my-host.lan:80-a-b:c-d\\\\ two\\nlines\\r"),
    (Message(42, A, "hi", sent_at=1763766000.123456), "MESSAGE@1763766000.123456-42-127.0.0.1:5000-hi"),
    (Message(42, V6, "", sent_at=0.5, marks=(3, 0, 17)), "MESSAGE@0.500000+3,0,17-42-[::1]:65535-"),
    (Message(9, A, "causal", sent_at=1.25, vc=(1, 0, 2)), "CMESSAGE@1.250000-9-127.0.0.1:5000-1,0,2-causal"),
    (Messages(42, A, ("hi", "a-b\n", ""), sent_at=0.5, marks=(3, 0)), "MESSAGES@0.500000+3,0-42-127.0.0.1:5000-2,5,0-hia-b\\n"),
    (Messages(7, B, ("x", "y")), "MESSAGES-7-my-host.lan:80-1,1-xy"),
    (Messages(9, A, ("p", "q-r"), 1.25, (4, 5), (2, 0, 7), 2), "CMESSAGES@1.250000+4,5-9-127.0.0.1:5000-2-2,0,7-1,3-pq-r"),
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
    (Heartbeat(2, group="127.0.0.1:5000/1"), "HEARTBEAT-2 127.0.0.1:5000/1"),
    (Heartbeat(1, 0, 0, (0, B), "my-host.lan:80/3"), "HEARTBEAT-1-0-00000000-0-my-host.lan:80 my-host.lan:80/3"),
    (Refused("not in my neighbors file"), "REFUSED-not in my neighbors file"),
    (Refused("line\nbreak \\ back-slash"), "REFUSED-line\\nbreak \\\\ back-slash"),
    (Hello(A, 7), "HELLO-127.0.0.1:5000-7"),
    (Hello(B, 0, "causal"), "HELLO-my-host.lan:80-0-causal"),
    (Hello(A, 7, "lamport", 2), "HELLO-127.0.0.1:5000-7-lamportcumulative"),
    (Hello(A, 7, "sequencer", 3), "HELLO-127.0.0.1:5000-7-sequencerruns"),
    (Hello(V6, 2, "sequencer", 1), "HELLO-[::1]:65535-2-sequencer"),
    (Hello(B, 3, "causal", 2), "HELLO-my-host.lan:80-3-causalcumulative"),
    (Join(B, 5), "JOIN-my-host.lan:80-5"),
    (Direct("state 1/2: a-b\nc\\d"), "DIRECT-state 1/2: a-b\\nc\\\\d"),
    (Direct(""), "DIRECT-"),
    (Leave(V6), "LEAVE-[::1]:65535"),
    (Flush(2, 1, A), "FLUSH-2-1-127.0.0.1:5000"),
    (Flush(2, 1, B, 17), "FLUSH-2-1-my-host.lan:80-17"),
    (Prepare(2, 1, B, "g"), 'PREPARE-{"view":2,"attempt":1,"coordinator":"my-host.lan:80","group":"g"}'),
    (Promise(2, 1, B, ((0, A, (A, B), Install(2, 0, A, 4, ((A, 1),), (), (B,), (), "g")),)),
     'PROMISE-{"view":2,"attempt":1,"coordinator":"my-host.lan:80","accepted":[[0,"127.0.0.1:5000",'
     '["127.0.0.1:5000","my-host.lan:80"],{"view":2,"attempt":0,"coordinator":"127.0.0.1:5000","clock":4,'
     '"members":[["127.0.0.1:5000",1]],"joined":[],"left":["my-host.lan:80"],"removed":[],"group":"g"}]]}'),
    (Propose(2, 1, B, ((A, 1),), ((A, 1),), "g", Install(2, 0, A, 4, ((A, 1),), (), (B,), (), "g")),
     'PROPOSE-{"view":2,"attempt":1,"coordinator":"my-host.lan:80","members":[["127.0.0.1:5000",1]],'
     '"removed":[["127.0.0.1:5000",1]],"group":"g","adopts":{"view":2,"attempt":0,"coordinator":"127.0.0.1:5000",'
     '"clock":4,"members":[["127.0.0.1:5000",1]],"joined":[],"left":["my-host.lan:80"],"removed":[],"group":"g"}}'),
    (Flushed(2, 1, 99), "FLUSHED-2-1-99"),
    (Removed(4), "REMOVED-4"),
    (Removed(4, "127.0.0.1:5000/1"), "REMOVED-4 127.0.0.1:5000/1"),
    (Suspect(4, B, 5, 6), "SUSPECT-4-5-6-my-host.lan:80"),
    (Sees(4, B, 5), "SEES-4-5-my-host.lan:80"),
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
    (CatchUp(3, 12, 5), "CATCHUP-3-12-5"),
    (Join(B, 7, 12, "127.0.0.1:5000/1"), "JOIN-my-host.lan:80-7-12 127.0.0.1:5000/1"),
    (History("more", 7, ('{"kind":"message","text":"a-b\\n"}',)), 'HISTORY-more-7-["{\\"kind\\":\\"message\\",\\"text\\":\\"a-b\\\\n\\"}"]'),
    (History("none"), "HISTORY-none-0-[]"),
    (Progress(4, 17), "PROGRESS-4-17"), (Progress(), "PROGRESS-none"),
]
"""One frame or more of every kind, and its exact wire text (as TOM formatted it before the codec became a
table): a change to any of these lines is a change of the wire."""


@pytest.mark.parametrize("frame,line", GOLDEN, ids=[line[:40] for _, line in GOLDEN])
def test_the_wire_form_of_every_kind_is_unchanged(frame, line):
    assert format_frame(frame) == line
    assert encode_frame(frame) == line.encode() + b"\n"
    assert parse_frame(line) == frame == _parse_by_table(line)
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
    assert parse_frame(line) == frame == _parse_by_table(line)


EDGE_RUN_LINES = [
    f"MESSAGES@1.5-1-{P}-1,1-xy", f"MESSAGES@1.5-{OVER[:-1]}-{P}-1,1-xy", f"MESSAGES@1.5-{OVER}-{P}-1,1-xy",
    f"MESSAGES@1.5-9223372036854775807-{P}-1,1-xy", f"MESSAGES@1.5-1-{P}-1-x", f"MESSAGES@1.5-1-{P}-1,1,1-xy",
    f"MESSAGES@1.5-1-{P}-2,0-\\\\", f"MESSAGES@1.5-1-{P}-1,1-\\\\", f"MESSAGES@1.5-1-{P}-0,2-\\n",
    f"MESSAGES@1.5-1-my-host.lan:80-1,1-xy", f"MESSAGES-1-{P}-1,1-xy", f"MESSAGES@1.5+1,2-1-{P}-1,1-x-",
    f"MESSAGES@1.5-1-{P}-" + ",".join(["1"] * 256) + "-" + "x" * 256,
    f"MESSAGES@1.5-1-{P}-" + ",".join(["1"] * 257) + "-" + "x" * 257, f"MESSAGES@1.5-1-{P}-1,١-xy",
    f"MESSAGES@1.5-1-{P}-01,1-xy", f"MESSAGES@1.1234567-1-{P}-1,1-xy", f"MESSAGES@1.5-1-{P}--xy",
]


@pytest.mark.parametrize("line", EDGE_RUN_LINES)
def test_the_run_parse_agrees_with_the_table_at_its_edges(line):
    assert outcome(parse_frame, line) == outcome(_parse_by_table, line)


# -- runs: what a sender's batch becomes on the wire, and back ---------------------------------------

def test_a_steps_messages_go_as_one_line_and_come_back_as_they_were_sent():
    from tom.codec.frames import decode_lines, encode_sends, trusted_message

    msgs = [trusted_message(10 + i, A, text, 1795620084.813782, None, (3, 4, 5) if i == 3 else None)
            for i, text in enumerate(["a", "b\\|c", "x-y\nz", "", "after"])]
    per_dest = encode_sends([((B, V6), m) for m in msgs])
    assert per_dest[B] == per_dest[V6]
    assert per_dest[B][0] == (b"MESSAGES@1795620084.813782+3,4,5-10-127.0.0.1:5000-1,5,6,0-ab\\\\|cx-y\\nz\n")
    assert len(per_dest[B]) == 2  # the marks end the run: "after" goes alone
    frames_out, taken, received, fault = decode_lines([line.decode()[:-1] for line in per_dest[B]])
    assert frames_out == msgs and taken == 2 and received == [] and fault is None


SENDABLE = st.one_of(
    st.builds(Message, st.integers(1, 40), st.sampled_from([A, B]), st.text(max_size=12),
              st.sampled_from([None, 5.5, 6.25]), st.none(), st.none() | st.just((1, 2))),
    st.builds(Message, st.integers(1, 40), st.sampled_from([A, B]), st.text(max_size=12), st.just(5.5),
              st.sampled_from([(0, 1, 2), (0, 2, 2), (0, 3, 2), (1, 3, 2), (0, 4, 2, 9)]), st.none()),
    st.builds(Message, st.integers(1, 40), st.sampled_from([A, B]), st.text(max_size=4), st.just(5.5),
              st.just((1,))),
    st.builds(Ack, st.integers(1, 40), st.sampled_from([A, B])),
    st.builds(Marks, clocks(1, 3)),
)


@settings(max_examples=400)
@given(sends=st.lists(st.tuples(st.sampled_from([(A,), (B,), (A, B)]), SENDABLE), max_size=40),
       consecutive=st.booleans())
def test_whatever_a_step_sends_each_destination_reads_exactly_that(sends, consecutive):
    """Runs are the codec's alone: per destination, `decode_lines` of what `encode_sends` wrote is the
    frames sent there, in order; a line is a run only of what may form one."""
    from tom.codec.frames import decode_lines, encode_sends

    if consecutive:  # make runs likely: one member's messages with growing clocks (and vectors)
        sends = [(dests, Message(i + 1, A, f.text, 5.5, None if f.vc is None else (0, i, 2), f.marks)
                  if type(f) is Message else f) for i, (dests, f) in enumerate(sends)]
    per_dest = encode_sends(sends)
    for dest in (A, B):
        sent = [f for dests, f in sends if dest in dests]
        lines = per_dest.get(dest, [])
        frames_in, taken, received, fault = decode_lines([line.decode()[:-1] for line in lines])
        assert fault is None and received == [] and taken == len(lines)
        assert frames_in == sent
        assert [(type(f), f) for f in frames_in] == [(type(f), f) for f in sent]
