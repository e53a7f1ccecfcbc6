"""The handout wire's connections on real loopback sockets: lines in accept order, a last line ended
by the close, a long-lived connection carrying many lines, a silent connection holding nobody for ever,
and the sender's one connection per frame in order, retrying a neighbor that is not up yet."""

from __future__ import annotations

import trio

from tom.net import handout as handout_net
from tom.net.handout import send_lines, serve_lines


async def _collect(n: int, rx: trio.MemoryReceiveChannel, limit: float = 5.0) -> list[str]:
    got: list[str] = []
    with trio.move_on_after(limit):
        while len(got) < n:
            got.append((await rx.receive()).line)
    return got


async def _start(nursery) -> tuple[int, trio.MemoryReceiveChannel]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    tx, rx = trio.open_memory_channel(100)
    port = await nursery.start(serve_lines, listeners, tx)
    return port, rx


async def test_lines_are_passed_on_in_accept_order():
    async with trio.open_nursery() as nursery:
        port, rx = await _start(nursery)
        first = await trio.open_tcp_stream("127.0.0.1", port)
        await trio.sleep(0.05)  # accepted first, writes nothing yet
        second = await trio.open_tcp_stream("127.0.0.1", port)
        await second.send_all(b"ACK-1-h:1\n")
        await second.aclose()
        await trio.sleep(0.1)
        await first.send_all(b"MESSAGE-1-h:1-a")  # no "\n": ended by the close
        await first.aclose()
        assert await _collect(2, rx) == ["MESSAGE-1-h:1-a", "ACK-1-h:1"]
        nursery.cancel_scope.cancel()


async def test_a_long_lived_connection_carries_many_lines_and_holds_no_one_back():
    async with trio.open_nursery() as nursery:
        port, rx = await _start(nursery)
        long_lived = await trio.open_tcp_stream("127.0.0.1", port)
        await long_lived.send_all(b"one\r\ntwo\n")
        assert await _collect(2, rx) == ["one", "two"]
        other = await trio.open_tcp_stream("127.0.0.1", port)
        await other.send_all(b"three\n")
        await other.aclose()
        assert await _collect(1, rx) == ["three"]  # while the long-lived one stays open
        await long_lived.send_all(b"four\n")
        assert await _collect(1, rx) == ["four"]
        await long_lived.aclose()
        nursery.cancel_scope.cancel()


async def test_a_silent_connection_holds_later_ones_back_only_for_a_while(monkeypatch):
    monkeypatch.setattr(handout_net, "FIRST_LINE_WAIT", 0.3)
    async with trio.open_nursery() as nursery:
        port, rx = await _start(nursery)
        start = trio.current_time()  # (before the silent one is accepted: its wait starts later)
        silent = await trio.open_tcp_stream("127.0.0.1", port)
        await trio.sleep(0.05)
        other = await trio.open_tcp_stream("127.0.0.1", port)
        await other.send_all(b"after the silent one\n")
        await other.aclose()
        assert await _collect(1, rx) == ["after the silent one"]
        # held back the whole wait while the silent one might still write: a lower bound, whatever
        # the machine's load (the bound measured from after the second connection failed once so)
        assert trio.current_time() - start >= handout_net.FIRST_LINE_WAIT
        await silent.aclose()
        nursery.cancel_scope.cancel()


async def test_sender_one_connection_per_frame_in_order_retrying_a_late_neighbor():
    """The neighbor is not listening at first: the frames wait (retried, not dropped, not reordered)
    and arrive in order, each on a connection of its own."""
    probe = trio.socket.socket()
    await probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    pid = f"127.0.0.1:{port}"
    out_tx, out_rx = trio.open_memory_channel(10)
    connections: list[list[bytes]] = []

    async def handler(stream):
        data = b""
        async for chunk in stream:
            data += chunk
        connections.append(data.split(b"\n")[:-1])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_lines, out_rx, [pid], 0.0, lambda p: True)
        for i in range(5):
            await out_tx.send((f"ACK-{i}-h:1", (pid,)))
        await trio.sleep(0.3)  # refused meanwhile: retried with a back-off
        await nursery.start(trio.serve_tcp, handler, port)
        with trio.move_on_after(10):
            while len(connections) < 5:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert connections == [[f"ACK-{i}-h:1".encode()] for i in range(5)]


async def test_sender_gives_up_on_a_neighbor_that_need_not_be_reached():
    """--dynamic: a neighbor that is not a member and refuses gets nothing; the others get everything."""
    out_tx, out_rx = trio.open_memory_channel(10)
    got: list[bytes] = []

    async def handler(stream):
        async for chunk in stream:
            got.append(chunk)

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        up = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        nursery.start_soon(trio.serve_listeners, handler, listeners)
        probe = trio.socket.socket()
        await probe.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{probe.getsockname()[1]}"
        probe.close()
        nursery.start_soon(send_lines, out_rx, [down, up], 0.0, lambda p: p == up)
        await out_tx.send(("HEARTBEAT-1-h:1", (down, up)))
        with trio.move_on_after(5):
            while not got:
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()
    assert got == [b"HEARTBEAT-1-h:1\n"]



async def test_a_line_over_the_limit_closes_its_connection_and_nobody_else_s(monkeypatch):
    monkeypatch.setattr(handout_net, "MAX_LINE_BYTES", 1000)
    async with trio.open_nursery() as nursery:
        port, rx = await _start(nursery)
        junk = await trio.open_tcp_stream("127.0.0.1", port)
        try:
            await junk.send_all(b"x" * 5000)
            with trio.move_on_after(5):
                while await junk.receive_some(100):  # the peer closes it: EOF
                    pass
        except trio.BrokenResourceError:
            pass  # (or resets it)
        other = await trio.open_tcp_stream("127.0.0.1", port)
        await other.send_all(b"ACK-1-h:1\n")
        await other.aclose()
        assert await _collect(1, rx) == ["ACK-1-h:1"]
        nursery.cancel_scope.cancel()
