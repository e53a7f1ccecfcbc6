"""Heartbeats, failure detection and group forming through the real trio tasks, on trio's MockClock."""

import json

import trio

from tom.core import Core, Timing
from tom.peer.events import Connected, FramesIn
from tom.codec.frames import Heartbeat, Install, Join, Propose
from tom.peer.output import OutputFile
from tom.peer.processor import processor, ticker

A, B, C = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"


async def run_for(seconds, core, out_path, feed):
    """Run processor + ticker for ``seconds`` of (virtual) time; return [(time, dests, frame)] sent."""
    in_tx, in_rx = trio.open_memory_channel(64)
    sent = []
    output = OutputFile(out_path, A)

    def route(batch):
        sent.extend((trio.current_time(), dests, frame) for dests, frame in batch)

    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(processor, core, in_rx, route, output)
            nursery.start_soon(ticker, in_tx, core.timing.heartbeat / 4)
            await feed(in_tx)
    output.close()
    return sent


async def test_heartbeats_every_period_then_silent_member_removed(autojump_clock, tmp_path):
    core = Core.joining(A, 1, Timing(), now=trio.current_time())
    start = trio.current_time()

    async def feed(tx):
        await tx.send(Connected(B, 2))
        await tx.send(FramesIn(B, [Heartbeat(0), Join(B, 2)]))  # B is up and asks to join; then silence

    out = tmp_path / "a.jsonl"
    sent = await run_for(20, core, out, feed)
    installs = [(t - start, f) for t, _, f in sent if type(f) is Install]
    beats = [(t - start, f.view) for t, dests, f in sent if type(f) is Heartbeat and dests == (B,)]
    # a new view is also announced by a heartbeat at once: those are not periodic
    periodic = [t for (t, v), (_, before) in zip(beats[1:], beats) if v == before]
    gaps = [b - a for a, b in zip(periodic, periodic[1:])]
    assert len(periodic) >= 15 and all(abs(g - 1.0) < 1e-6 for g in gaps), [round(g, 3) for g in gaps]
    assert installs and installs[0][1].view == 1 and dict(installs[0][1].members).keys() == {A, B}
    formed_at = installs[0][0]
    assert 2.5 <= formed_at <= 3.5  # form_after, to the next tick
    proposals = [(t - start, f) for t, _, f in sent if type(f) is Propose]
    assert proposals and proposals[0][1].removed == ((B, 2),)
    # silent since the group formed: suspected 5 s later, removed after 1 s more (to the next tick)
    assert 6.0 <= proposals[0][0] - formed_at <= 6.25
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["kind"], r["view"], r["members"]) for r in records] == [
        ("view", 1, [A, B]), ("view", 2, [A])]
    assert records[1]["removed"] == [B]


async def test_every_expected_peer_here_and_asking_to_join_founds_without_waiting_out_the_window(
        autojump_clock, tmp_path):
    core = Core.joining(A, 1, Timing(), now=trio.current_time(), expected=[A, B, C])
    start = trio.current_time()

    async def feed(tx):
        for pid, inc in ((B, 2), (C, 3)):
            await tx.send(Connected(pid, inc))
            await tx.send(FramesIn(pid, [Heartbeat(0), Join(pid, inc)]))

    sent = await run_for(2, core, tmp_path / "a.jsonl", feed)
    proposals = [(t - start, f) for t, _, f in sent if type(f) is Propose]
    assert proposals and proposals[0][0] < 0.5 < core.timing.form_after  # (at its next tick)
    assert dict(proposals[0][1].members).keys() == {A, B, C}


async def test_a_member_that_keeps_talking_is_never_suspected(autojump_clock, tmp_path):
    core = Core.joining(A, 1, Timing(), now=trio.current_time())

    async def feed(tx):
        await tx.send(Connected(B, 2))
        await tx.send(FramesIn(B, [Heartbeat(0), Join(B, 2)]))
        for _ in range(30):
            await trio.sleep(0.9)
            await tx.send(FramesIn(B, [Heartbeat(core.view.id if core.view else 0)]))

    sent = await run_for(25, core, tmp_path / "a.jsonl", feed)
    assert not [f for _, _, f in sent if type(f) is Propose]
    assert core.view is not None and core.view.members == {A, B} and not core.detector.suspected
