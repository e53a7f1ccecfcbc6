"""The promise at the edges, on the pure core and the link layer: one size limit, no silent drop on a
link, frames behind RESUME at once, one pid grammar, exact texts, divergence noticed, a joiner that is
never admitted says so, a full disk loses nothing already recorded."""

import json

import pytest

from tom.core.notices import Left, NotAdmitted
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from tom.core import Core, Timing, check_text
from tom.errors import ConfigError, FrameError, OutputError, UsageError
from tom.peer.events import Connected, Disconnected, FramesIn
from tom.codec.frames import (MAX_FRAME_BYTES, Ack, Heartbeat, Hello, Message, Refused, Resume, encode_frame,
                        format_frame, message_frame_bytes, parse_frame)
from tom.net.handshake import expect
from tom.codec.frames import decode_line as decode
from tom.net.links import Link, LineReader
from tom.net.listener import run_link
from tom.codec.neighbors import load_neighbors
from tom.peer.output import OutputFile
from tom.codec.pid import is_pid, parse_pid
from tom.peer.ui import parse_command

A, B, C = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"
GROUP = [A, B, C]


# -- 1. one size limit, in bytes of the encoded frame ---------------------------------------------

def test_a_text_whose_frame_is_over_the_byte_limit_is_refused_and_nothing_is_sent():
    emoji = "\U0001F600" * 16384  # 16,384 characters, 65,536 bytes of UTF-8: the frame cannot fit
    core = Core(A, GROUP)
    with pytest.raises(UsageError, match="over the limit of 65,536"):
        core.broadcast(emoji)
    assert not core.ready() and len(core.order) == 0 and core.clock.time == 0


def test_the_longest_text_the_sender_takes_is_a_frame_the_receiver_takes():
    """Sender and receiver hold the same constant: a text right at the sender's limit, at the largest
    clock and send time, is a line the link reader and the codec accept."""
    head = message_frame_bytes(A, "")
    text = "\u00e9" * ((MAX_FRAME_BYTES - head) // 2)  # two bytes each
    check_text(A, text)
    with pytest.raises(UsageError):
        check_text(A, text + "x")
    frame = Message(2**63 - 1, A, text, 99999999999.99998)
    data = encode_frame(frame)
    assert len(data) - 1 <= MAX_FRAME_BYTES
    assert parse_frame(data[:-1].decode()) == frame


async def test_the_link_reader_takes_a_line_over_the_byte_limit_for_a_fault_even_when_it_came_whole():
    ours, theirs = trio.testing.memory_stream_pair()
    reader = LineReader(theirs)
    big = format_frame(Message(1, A, "\U0001F600" * 16384)).encode()  # as an old peer would send it
    assert len(big) > MAX_FRAME_BYTES
    await ours.send_all(b"ACK-1-127.0.0.1:5000\n" + big + b"\nACK-2-127.0.0.1:5000\n")
    lines = []
    with trio.fail_after(5):
        while not lines or lines[-1] is not None and not any(type(x) is bytes and x.startswith(b"\xff") for x in lines):
            lines += await reader.chunk() or [None]
    assert decode(lines[0]) is not None
    with pytest.raises(FrameError, match="over the limit of 65536 bytes"):
        decode(lines[-1])


# -- the link never silently loses a frame from a member -------------------------------------------

def frames(n, start=0):
    return [f"MESSAGE-{i + 1}-127.0.0.1:5000-m{i}\n".encode() for i in range(start, start + n)]


async def corrupting_pipe(src, dst, bad_line: int | None):
    """Carry bytes from ``src`` to ``dst``, replacing line number ``bad_line`` with junk; close ``dst``'s
    writer when ``src`` ends and ``src`` when ``dst`` is closed (both ends of one connection)."""
    seen, buf = 0, b""
    try:
        while True:
            data = await src.receive_some(65536)
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                seen += 1
                await dst.send_all((b"MESSAGE-garbled" if seen == bad_line else line) + b"\n")
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    await trio.aclose_forcefully(src)
    await trio.aclose_forcefully(dst)


async def test_a_frame_the_receiver_refuses_closes_the_connection_and_comes_again(autojump_clock):
    """Receiver refuses a frame -> connection closed -> resumed -> every frame delivered once, in order."""
    sending = Link(B)  # at A: the link to B
    receiving = Link(A)  # at B: the link to A
    sending.meet(2)
    receiving.meet(1)
    sent = frames(40)
    tx, rx = trio.open_memory_channel(1000)
    got = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sending.writer)
        for bad in (17, None):  # the first connection garbles frame 17 in transit; the second none
            a_end, pipe_in = trio.testing.memory_stream_pair()
            pipe_out, b_end = trio.testing.memory_stream_pair()
            nursery.start_soon(corrupting_pipe, pipe_in, pipe_out, bad)
            sending.attach(a_end, receiving.received, trio.current_time())  # RESUME: what B has
            if bad:
                sending.push_many(trio.current_time(), sent)
            await run_link(receiving, b_end, LineReader(b_end), 0, tx) if bad else \
                nursery.start_soon(run_link, receiving, b_end, LineReader(b_end), 0, tx)
            if bad:
                assert receiving.received == 16  # nothing counted from the refused frame on
                sending.detach(a_end)
        with trio.fail_after(30):
            while sum(len(e.frames) for e in got if type(e) is FramesIn) < len(sent):
                got.append(await rx.receive())
        nursery.cancel_scope.cancel()
    delivered = [f for e in got if type(e) is FramesIn for f in e.frames]
    assert [format_frame(f).encode() + b"\n" for f in delivered] == sent
    assert [type(e) for e in got if type(e) is not FramesIn] == [Connected, Disconnected, Connected]


# -- 5. frames that arrive in the same read as RESUME are handled at once --------------------------

async def test_frames_in_the_same_read_as_the_handshake_are_not_kept_waiting():
    ours, theirs = trio.testing.memory_stream_pair()
    reader = LineReader(theirs)
    await ours.send_all(b"HELLO-127.0.0.1:5000-7\nRESUME-0\nACK-1-127.0.0.1:5000\nACK-2-127.0.0.1:5000\n")
    assert await expect(reader, Hello) == Hello(A, 7)
    assert await expect(reader, Resume) == Resume(0)
    with trio.fail_after(1):  # no further byte will come: they must be there already
        lines = await reader.chunk()
    assert [format_frame(decode(x)) for x in lines] == ["ACK-1-127.0.0.1:5000", "ACK-2-127.0.0.1:5000"]


async def test_a_refusal_reaches_the_dialler_as_its_reason():
    ours, theirs = trio.testing.memory_stream_pair()
    await ours.send_all(encode_frame(Refused("127.0.0.1:5003 is not in 127.0.0.1:5001's neighbors file")))
    from tom.errors import RefusedError

    with pytest.raises(RefusedError, match="not in 127.0.0.1:5001's neighbors file"):
        await expect(LineReader(theirs), Hello)


# -- 6. one pid grammar --------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["host+x:5000", "münchen:5000", "a b:5000", "h*st:1"])
def test_the_neighbors_file_refuses_a_host_the_wire_cannot_carry(tmp_path, line):
    path = tmp_path / "n.txt"
    path.write_text(f"127.0.0.1:5000\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"n.txt:2: bad host"):
        load_neighbors(path)


@given(st.text(max_size=30))
def test_every_pid_the_neighbors_file_takes_can_say_hello(text):
    try:
        pid = parse_pid(text)
    except ConfigError:
        return
    assert is_pid(pid)
    assert parse_frame(format_frame(Hello(pid, 1))) == Hello(pid, 1)


# -- 7. texts round-trip exactly -----------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=300) | st.sampled_from(["x\r", "\r", "a\r\n", "\\r", " lead and trail "]),
       cut=st.integers(1, 50))
def test_texts_round_trip_exactly_from_broadcast_to_the_output_file(tmp_path_factory, text, cut):
    sender, receiver = Core(A, [A, B]), Core(B, [A, B])
    try:
        sender.broadcast(text, sent_at=1.5)
    except UsageError:
        return  # a lone surrogate: refused, nothing sent
    (dests, frame), = sender.ready().sends
    wire = encode_frame(frame)

    async def through_the_link():
        ours, theirs = trio.testing.memory_stream_pair()
        for i in range(0, len(wire), cut):  # any split into reads
            await ours.send_all(wire[i:i + cut])
        await ours.aclose()
        reader, lines = LineReader(theirs), []
        while (chunk := await reader.chunk()) is not None:
            lines += chunk
        return [decode(x) for x in lines]

    (received,) = trio.run(through_the_link)
    receiver.receive(A, received)  # a group of two: A's ACK is implied, B's its own
    out = tmp_path_factory.mktemp("o") / "o.jsonl"
    f = OutputFile(out, B)
    f.write(receiver.ready().deliveries, 2.0)
    f.close()
    (record,) = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert record["text"] == text


def test_send_text_keeps_what_was_typed():
    assert parse_command("send  two spaces before, one after ") == ("send", " two spaces before, one after ")
    assert parse_command("send x\r") == ("send", "x\r")
    assert parse_command("1") == ("ask-text", "")


# -- divergence never goes unnoticed -------------------------------------------------------------

def beat(core):
    """The heartbeat ``core`` sends now (to its connected neighbors)."""
    for pid in core.view.members - {core.me}:
        core.connected(pid, 0)
    core.ready()
    core._send_heartbeats()
    (dests, hb), = [s for s in core.ready().sends if type(s[1]) is Heartbeat]
    return hb


def test_peers_that_delivered_different_sequences_raise_an_alarm_naming_both_and_the_position():
    a, b = Core(A, [A, B, C]), Core(B, [A, B, C])
    for core, text in ((a, "the real one"), (b, "a forged one")):  # C told them different things
        core.receive(C, Message(1, C, text))
        core.receive(A if core is b else B, Ack(1, C))
        core.ready()
    assert a.view_delivered == b.view_delivered == 1
    hb = beat(a)
    assert (hb.view, hb.count) == (1, 1)
    b.receive(A, hb)
    ready = b.ready()
    (alarm,) = ready.alarms
    assert (alarm.peer, alarm.view, alarm.position) == (A, 1, 1) and alarm.mine != alarm.theirs
    assert b.stats["divergence_alarms"] == 1 and b.status().alarms == (alarm,)
    b.receive(A, hb)  # counted, but one alarm per peer and view
    assert not b.ready().alarms and b.stats["divergence_alarms"] == 2


def test_a_digest_from_ahead_is_checked_once_this_peer_gets_there():
    a, c = Core(A, GROUP), Core(C, GROUP)  # both receive B's messages; c gets a different third one

    def feed(core, ack_from, texts):
        for i, text in enumerate(texts, 1):
            core.receive(B, Message(i, B, text))
            core.receive(ack_from, Ack(i, B))

    feed(a, C, ["m1", "m2", "m3"])
    hb = beat(a)
    assert hb.count == 3
    c.receive(A, hb)  # c has delivered nothing yet: nothing to compare
    assert not c.ready().alarms
    feed(c, A, ["m1", "m2", "other"])
    assert c.view_delivered == 3
    (alarm,) = c.ready().alarms
    assert (alarm.peer, alarm.position) == (A, 3)


def test_a_peer_that_delivered_past_a_message_it_never_acknowledged_raises_an_alarm_at_once():
    """Symptom 1 of issue 7: R lost B's message (its link dropped the frame) and went on delivering
    past it, while A waits for R's ACK of it: the positions A can compare never diverge, but R's
    heartbeat names a last delivery beyond A's head, which R never acknowledged."""
    a = Core(A, GROUP)
    a.receive(B, Message(5, B, "the lost one"))  # A's head: it has B's and its own ACK, not C's
    a.receive(C, Message(6, C, "after it"))
    a.receive(B, Ack(6, C))
    assert a.view_delivered == 0
    for pid in (B, C):
        a.connected(pid, 0)
    a.receive(C, Heartbeat(1, 1, 0x1234, (6, C)))  # C delivered (6, C) without holding (5, B)
    (alarm,) = a.ready().alarms
    assert (alarm.peer, alarm.position, alarm.skipped) == (C, 1, (5, B))
    from tom.peer.processor import divergence_line

    assert divergence_line(A, alarm) == (
        "DIVERGENCE: 127.0.0.1:5002 and this peer (127.0.0.1:5000) delivered different messages in view 1: "
        "127.0.0.1:5002 delivered past message (5, 127.0.0.1:5001), message 1 of the view here, without "
        "acknowledging it")
    a.receive(B, Heartbeat(1, 0, 0, (0, A)))  # B is behind: no alarm
    assert not a.ready().alarms


def test_the_batched_digest_equals_the_reference_fold():
    from tom.codec.frames import delivery_digest

    core = Core(A, [A, B])
    texts = ["a", "", "é\n\\", "\U0001F600" * 3]
    for i, text in enumerate(texts, 1):
        core.receive(B, Message(i, B, text))
        if i == 2:
            core.ready()  # in two batches
    want = 0
    for i, text in enumerate(texts, 1):
        want = delivery_digest(want, i, B, text)
    assert (core.view_delivered, core.digest) == (4, want)


def test_agreeing_peers_raise_no_alarm():
    a, b = Core(A, [A, B]), Core(B, [A, B])
    a.broadcast("x")
    (_, msg), = a.ready().sends
    b.receive(A, msg)
    (_, ack), = b.ready().sends
    a.receive(B, ack)
    b.receive(A, beat(a))
    a.receive(B, beat(b))
    assert a.view_delivered == b.view_delivered == 1
    assert not a.ready().alarms and not b.ready().alarms and a.digest == b.digest


# -- 3. a peer that cannot join says so; what it was given waits and is counted ---------------------

def test_a_joiner_never_admitted_is_told_so_and_keeps_its_messages():
    timing = Timing(heartbeat=1.0, suspect_after=5.0, verify_after=1.0, form_after=2.5, admit_after=10.0)
    d = Core.joining("127.0.0.1:5003", 9, timing)
    d.connected(B, 4)
    d.receive(B, Heartbeat(1, 0, 0, (1, B)))  # B is in a group, which does not add us
    assert d.broadcast("wait for me") is None
    notices = []
    for k in range(1, 41):
        d.tick(k * 0.5)
        notices += d.ready().notices
    assert notices == [NotAdmitted(), NotAdmitted()]  # at 10 s and 20 s
    assert d.mode == "joining" and d.undelivered_own() == 1
    d.leave()
    assert d.ready().notices == [Left()] and d.undelivered_own() == 1


# -- 2. output write errors ----------------------------------------------------------------------

def test_a_full_disk_gives_one_line_and_nothing_more_is_recorded(tmp_path):
    from tom.core import Delivery

    out = OutputFile("/dev/full", A)
    with pytest.raises(OutputError, match="^cannot write /dev/full: No space left on device$"):
        out.write([Delivery(1, 1, A, "x", None, 1)], 1.0)
    assert out.written == 0 and out.failed is not None
    with pytest.raises(OutputError):
        out.write([Delivery(2, 2, A, "y", None, 1)], 1.0)
    out.close()  # no second error at close


# -- 4. a member missing from this peer's neighbors file -----------------------------------------

async def test_frames_for_a_member_missing_from_the_neighbors_file_are_one_warning_not_a_crash(caplog):
    from tom.codec.frames import Install
    from tom.net.sender import Router

    links = {B: Link(B)}
    route = Router(links)
    install = Install(2, 0, B, 5, ((A, 1), (B, 2), ("127.0.0.1:5003", 3)), ("127.0.0.1:5003",), (), ())
    for _ in range(3):
        route([((B, "127.0.0.1:5003"), install)])
    warnings = [r.getMessage() for r in caplog.records if "not in this peer's neighbors file" in r.getMessage()]
    assert len(warnings) == 1 and "127.0.0.1:5003" in warnings[0]
    assert links[B].queued == 3  # the known member still gets its frames


def test_a_peer_alone_waits_for_a_backed_off_redial_before_forming_a_group(tmp_path):
    """Seen with --heartbeat 0.2: a peer started next to a running group formed a group of one before
    the group's re-dial (backed off to 2 s) reached it, and was never admitted."""
    from tom.net.links import MAX_BACKOFF, backoff
    from tom.peer.process import Peer, PeerConfig

    nb = tmp_path / "n.txt"
    nb.write_text("127.0.0.1:5000\n127.0.0.1:5001\n")
    peer = Peer(PeerConfig(nb, tmp_path / "o.jsonl", 5001, "127.0.0.1", heartbeat=0.2, timeout=1.5))
    peer.output.close()
    assert peer.core.timing.form_after > MAX_BACKOFF >= max(backoff(k) for k in range(20))
    assert max(backoff(k, reached=False) for k in range(20)) == 0.5  # a neighbor still to start: sooner
