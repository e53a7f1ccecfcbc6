"""The link layer on in-memory streams: FIFO under jitter, exact re-send after a reconnect."""

import random

import trio
import trio.testing

from tom.net.links import Link

from linkfill import push_until_blocked


def frames(n, start=0):
    return [f"MESSAGE-{i}-127.0.0.1:5000-m{i}\n".encode() for i in range(start, start + n)]


async def read_lines(stream, n):
    data = b""
    with trio.fail_after(60):
        while data.count(b"\n") < n:
            data += await stream.receive_some(65536)
    return data.split(b"\n")[:n]


async def test_jitter_never_reorders_a_link(autojump_clock):
    link = Link("127.0.0.1:5001")
    ours, theirs = trio.testing.memory_stream_pair()
    link.attach(ours, 0, trio.current_time())
    rng = random.Random(3)
    sent = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.writer)
        for batch in range(50):
            data = frames(rng.randint(1, 5), len(sent))
            sent += data
            link.push_many(trio.current_time() + rng.uniform(0, 0.5), data)  # later batches may draw less
            await trio.sleep(rng.uniform(0, 0.05))
        got = await read_lines(theirs, len(sent))
        nursery.cancel_scope.cancel()
    assert got == [d.rstrip(b"\n") for d in sent]


async def test_reconnect_resends_exactly_what_the_neighbor_lacks(autojump_clock):
    link = Link("127.0.0.1:5001")
    assert link.meet(7) == 0
    first, lost = trio.testing.memory_stream_pair()
    link.attach(first, 0, trio.current_time())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.writer)
        link.push_many(trio.current_time(), frames(10))
        got = await read_lines(lost, 6)  # the neighbor read 6 frames; the connection then broke
        assert link.unacked_frames == 10  # written, not confirmed
        link.detach(first)
        second, fresh = trio.testing.memory_stream_pair()
        assert link.meet(7) == 0  # same incarnation: counters kept
        link.attach(second, 6, trio.current_time())  # it says (RESUME) it has 6
        link.push_many(trio.current_time(), frames(2, 10))
        resent = await read_lines(fresh, 6)
        nursery.cancel_scope.cancel()
    assert got + resent == [d.rstrip(b"\n") for d in frames(12)]  # nothing lost, nothing twice
    assert link.confirmed == 6


async def test_confirmations_bound_what_is_kept(autojump_clock):
    link = Link("127.0.0.1:5001")
    ours, theirs = trio.testing.memory_stream_pair()
    link.attach(ours, 0, trio.current_time())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.writer)
        link.push_many(trio.current_time(), frames(1000))
        await read_lines(theirs, 1000)
        link.on_received(1000)
        nursery.cancel_scope.cancel()
    assert not link.unacked and link.confirmed == 1000


def test_a_new_incarnation_gets_none_of_the_old_frames():
    link = Link("127.0.0.1:5001")
    link.meet(7)
    link.push_many(0.0, frames(5))
    link.received = 42
    assert link.meet(8) == 0  # a restart: what we had from the old one does not count
    assert not link.buffer and not link.unacked


async def test_random_batches_confirmations_and_reconnects_lose_nothing_and_repeat_nothing(autojump_clock):
    """Batches of random sizes, confirmations and broken connections at random frame counts (so
    inside batches): the neighbor ends with every frame exactly once, in order."""
    for seed in range(30):
        rng = random.Random(seed)
        link = Link("127.0.0.1:5001")
        link.meet(7)
        sent, have = [], []  # what we queued; what the neighbor kept (in order)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.writer)
            for _ in range(rng.randint(1, 8)):  # connections
                ours, theirs = trio.testing.memory_stream_pair()
                link.attach(ours, len(have), trio.current_time())  # RESUME: how many it has
                for _ in range(rng.randint(0, 4)):
                    batch = frames(rng.randint(1, 7), len(sent))
                    sent += batch
                    link.push_many(trio.current_time(), batch)
                pending = len(sent) - len(have)
                if pending:
                    got = await read_lines(theirs, rng.randint(1, pending))
                    have += [g + b"\n" for g in got]
                    if rng.random() < 0.5:
                        link.on_received(rng.randint(link.confirmed, len(have)))  # RECEIVED-n
                link.detach(ours)
            last, theirs = trio.testing.memory_stream_pair()
            link.attach(last, len(have), trio.current_time())
            if len(sent) > len(have):
                have += [g + b"\n" for g in await read_lines(theirs, len(sent) - len(have))]
            nursery.cancel_scope.cancel()
        assert have == sent, f"seed {seed}"
        assert link.unacked_frames == sum(n for _, n in link.unacked) == len(sent) - link.confirmed


def test_a_chunks_lines_decode_to_its_frames_up_to_the_first_fault_with_received_counts_apart():
    from tom.codec.frames import OVER_LONG, Ack, FrameError, Received, decode_lines, format_frame

    good = ["ACK-1-127.0.0.1:5000", "RECEIVED-7", "ACK-2-127.0.0.1:5000\r", b"ACK-3-127.0.0.1:5000"]
    frames, taken, received, fault = decode_lines(good)
    assert taken == 3
    assert [format_frame(f) for f in frames] == [f"ACK-{i}-127.0.0.1:5000" for i in (1, 2, 3)]
    assert all(type(f) is Ack for f in frames) and received == [7] and fault is None
    assert format_frame(Received(7)) == "RECEIVED-7"
    for bad, why in ((b"\xffACK", "not UTF-8"), (OVER_LONG, "over the limit"), ("NONSENSE", "")):
        frames, taken, received, fault = decode_lines(["ACK-1-127.0.0.1:5000", bad, "RECEIVED-3", "ACK-2-127.0.0.1:5000"])
        assert len(frames) == taken == 1 and received == [] and isinstance(fault, FrameError) and why in str(fault)


def test_a_batch_of_sends_is_encoded_once_per_frame_in_order_for_each_destination():
    from tom.codec.frames import Ack, encode_frame, encode_sends

    a, b, c = Ack(1, "127.0.0.1:5000"), Ack(2, "127.0.0.1:5000"), Ack(3, "127.0.0.1:5000")
    per_dest = encode_sends([(("x", "y"), a), (("y",), b), (("x", "y"), c)])
    assert per_dest == {"x": [encode_frame(a), encode_frame(c)], "y": [encode_frame(f) for f in (a, b, c)]}
    assert per_dest["x"][0] is per_dest["y"][0]  # encoded once


async def _tcp_pair():
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    client = await trio.testing.open_stream_to_socket_listener(listeners[0])
    server = await listeners[0].accept()
    await listeners[0].aclose()
    return client, server


async def test_a_due_batch_on_an_idle_plain_link_is_written_at_once_without_the_writer():
    client, server = await _tcp_pair()
    link = Link("127.0.0.1:5001")
    link.attach(client, 0, trio.current_time())
    now = trio.current_time()
    link.push_many(now, frames(2), now)  # no writer task runs here
    assert not link.buffer and link.frames_out == 2 and link.unacked_frames == 2
    assert await read_lines(server, 2) == [f.rstrip(b"\n") for f in frames(2)]
    link.push_many(now + 5.0, frames(1, 2), now)  # not due (a delay): it waits for the writer
    link.push_many(now, frames(1, 3), now)  # due, but behind a waiting batch: waits too, in order
    assert [n for _, _, n in link.buffer] == [1, 1] and link.frames_out == 2
    link.detach(client)
    link.push_many(now, frames(1, 4), now)  # no connection: waits
    assert link.queued == 3
    await client.aclose()
    await server.aclose()


async def test_what_the_socket_does_not_take_at_once_goes_first_when_the_writer_runs():
    client, server = await _tcp_pair()
    link = Link("127.0.0.1:5001")
    link.attach(client, 0, trio.current_time())
    sent = push_until_blocked(link, batches=400, per_batch=100)
    got = b""
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.writer)
            want = len(b"".join(sent))
            while len(got) < want:
                got += await server.receive_some(1 << 20)
            nursery.cancel_scope.cancel()
    assert got == b"".join(sent)  # every byte once, in order
    assert link.frames_out == len(sent) == link.unacked_frames
    await client.aclose()
    await server.aclose()


async def test_a_link_that_is_not_a_plain_socket_always_goes_through_the_writer():
    ours, theirs = trio.testing.memory_stream_pair()
    link = Link("127.0.0.1:5001")
    link.attach(ours, 0, trio.current_time())
    now = trio.current_time()
    link.push_many(now, frames(1), now)
    assert link.queued == 1 and link.frames_out == 0


async def test_a_run_of_messages_is_one_frame_at_both_ends_of_a_link_and_across_a_reconnect():
    """The link counts lines: a run (`Messages`) is one on the writer's side and one on the reader's
    (`decode_lines`' count), so RECEIVED and RESUME agree and a reconnect re-sends exactly the rest."""
    from tom.codec.frames import Message, decode_lines, encode_sends, trusted_message
    from tom.net.links import LineReader

    me, other = "127.0.0.1:5000", "127.0.0.1:5001"
    msgs = [trusted_message(5 + i, me, f"m{i}", 1.5, None, (2, 3) if i in (3, 9) else None) for i in range(10)]
    data = encode_sends([((other,), m) for m in msgs])[other]
    assert len(data) == 2  # clocks 5..8 (marks on the 4th), then 9..14 (marks on the last)
    client, server = await _tcp_pair()
    sender, receiver = Link(other), Link(me)
    sender.attach(client, 0, trio.current_time())
    now = trio.current_time()
    sender.push_many(now, data, now)
    assert sender.frames_out == 2 == sender.unacked_frames
    reader, got = LineReader(server), []
    with trio.fail_after(30):
        while len(got) < len(msgs):
            frames, taken, _, fault = decode_lines(await reader.chunk())
            assert fault is None
            receiver.count_in(taken, now)
            got += frames
    assert got == msgs and all(type(f) is Message for f in got)
    assert receiver.received == 2
    # the connection is lost after the first run arrived; the new one's RESUME says 1
    sender.detach(client)
    client2, server2 = await _tcp_pair()
    sender.attach(client2, 1, trio.current_time())
    assert sender.unacked_frames == 0 and sender.confirmed == 1 and [n for _, _, n in sender.buffer] == [1]
    _, again, _ = sender.buffer[0]
    frames, taken, _, _ = decode_lines([again.decode()[:-1]])
    assert frames == msgs[4:] and taken == 1
    for stream in (client, server, client2, server2):
        await stream.aclose()


async def test_jitter_is_an_extra_delay_per_link_that_changes_every_period(autojump_clock):
    # a draw per frame makes no premature ACK: under load each link waits for its slowest draw, so all
    # links end as slow as the largest one. A delay per link, drawn again each period, lets one path
    # be slower than two others for a while (issue 41: `--jitter` showed no premature ACK)
    from tom.codec.frames import Heartbeat
    from tom.net.sender import JITTER_PERIOD, Router

    random.seed(5)
    b, c = "127.0.0.1:5001", "127.0.0.1:5002"
    links = {b: Link(b), c: Link(c)}  # (not connected: every frame waits in the buffer, with its release)
    route = Router(links, delay=1.0, jitter=2.0)
    extra: dict[str, list[float]] = {b: [], c: []}
    for k in range(8):  # four sends a period, two periods
        now = trio.current_time()
        route([((b, c), Heartbeat(k))])
        for pid in (b, c):
            extra[pid].append(round(links[pid].buffer[-1][0] - now - 1.0, 6))
        await trio.sleep(JITTER_PERIOD / 4)
    for pid in (b, c):
        first, second = extra[pid][:4], extra[pid][4:]
        assert len(set(first)) == 1 and len(set(second)) == 1 and 0 <= first[0] <= 2, extra  # held a period
        assert first[0] != second[0], extra  # then drawn again
    assert extra[b][0] != extra[c][0], extra  # each link its own
