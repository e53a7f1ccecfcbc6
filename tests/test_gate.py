"""Step mode's gate (`tom.peer.gate`): per link FIFO, only heads released, what is not held passes in its
place, nothing lost or duplicated, release-all bounded and in arrival order; liveness of what is held
reaches the core (`Heard`) and freezes its failure detector; without --step the links hand the inbox
their events themselves."""

from __future__ import annotations

import json
import random

import pytest
import trio

from tom.codec.frames import Ack, Heartbeat, Join, Marks, Message, Propose, delivery_digest
from tom.core import Core, Timing
from tom.peer.events import Connected, Disconnected, FramesIn, Heard, SendTexts
from tom.peer.gate import Gate, NothingHeld
from tom.peer.output import OutputFile
from tom.peer.processor import processor, ticker

A, B, C = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"


class Sink:
    """The inbox, as the gate sees it: every event handed on, in order."""

    def __init__(self) -> None:
        self.events: list = []

    async def send(self, event) -> None:
        self.events.append(event)

    def frames(self, src: str | None = None) -> list:
        return [f for e in self.events if type(e) is FramesIn and (src is None or e.src == src) for f in e.frames]

    def of(self, src: str) -> list:
        """What reached the inbox of link ``src``: its frames one by one and its connection events."""
        out = []
        for e in self.events:
            if type(e) is FramesIn and e.src == src:
                out.extend(e.frames)
            elif type(e) in (Connected, Disconnected) and e.pid == src:
                out.append(e)
        return out


def msg(clock: int, pid: str = A, text: str = "m") -> Message:
    return Message(clock, pid, text)


BEAT = Heartbeat(1, 0, 0, (1, A), "g")


async def test_held_frames_wait_and_what_is_not_held_passes_while_the_link_is_empty():
    sink = Sink()
    gate = Gate(sink)
    await gate.send(Connected(A, 7))
    await gate.send(FramesIn(A, [BEAT, Join(A, 7)]))
    assert sink.of(A) == [Connected(A, 7), BEAT, Join(A, 7)]  # nothing held: passed as it came
    await gate.send(FramesIn(A, [BEAT, msg(3), Ack(3, A), BEAT]))
    assert sink.of(A)[3:] == [BEAT]  # up to the first held frame
    assert gate.held() == 2
    assert Heard(A) in sink.events  # the rest waits, and the core hears that A is alive
    await gate.send(FramesIn(A, [Join(A, 7)]))  # behind held frames: it waits in its place
    await gate.send(Disconnected(A))
    assert sink.of(A)[4:] == []


async def test_only_a_head_is_released_and_what_follows_it_unheld_passes_with_it():
    sink = Sink()
    gate = Gate(sink)
    m3, ack3, m4 = msg(3), Ack(3, B), msg(4)
    await gate.send(FramesIn(A, [m3, BEAT, ack3, Join(A, 1)]))
    await gate.send(Disconnected(A))
    await gate.send(Connected(A, 2))
    await gate.send(FramesIn(A, [m4]))
    assert sink.frames() == []
    assert await gate.release(A) == m3
    assert sink.of(A) == [m3, BEAT]  # the heartbeat behind it passed by itself, the ACK waits
    assert await gate.release(A) == ack3
    assert sink.of(A) == [m3, BEAT, ack3, Join(A, 1), Disconnected(A), Connected(A, 2)]
    assert await gate.release(A) == m4
    assert sink.of(A)[-1] == m4
    with pytest.raises(NothingHeld):
        await gate.release(A)
    assert gate.held() == 0 and gate.released == 3


async def test_links_are_independent_and_release_all_replays_the_arrival_order():
    sink = Sink()
    gate = Gate(sink)
    await gate.send(FramesIn(A, [msg(1, A)]))
    await gate.send(FramesIn(B, [msg(1, B), Marks((1, 1, 0))]))
    await gate.send(FramesIn(A, [Marks((1, 1, 0)), BEAT]))
    assert await gate.release(B) == msg(1, B)  # another link's head: A's stay held
    assert gate.held() == 3
    assert await gate.release_all() == 3
    assert sink.frames() == [msg(1, B), msg(1, A), Marks((1, 1, 0)), Marks((1, 1, 0)), BEAT]
    assert [e.src for e in sink.events if type(e) is FramesIn] == [B, A, B, A]
    assert [f for f in sink.of(A)] == [msg(1, A), Marks((1, 1, 0)), BEAT]
    assert await gate.release_all() == 0


async def test_release_all_is_bounded():
    sink = Sink()
    gate = Gate(sink)
    await gate.send(FramesIn(A, [msg(c) for c in range(1, 11)]))
    assert await gate.release_all(limit=4) == 4
    assert gate.held() == 6


async def test_random_releases_a_head_of_some_link_and_nothing_when_nothing_is_held():
    sink = Sink()
    gate = Gate(sink, rng=random.Random(3))
    with pytest.raises(NothingHeld):
        await gate.release_random()
    await gate.send(FramesIn(A, [msg(1, A), msg(2, A)]))
    await gate.send(FramesIn(B, [msg(1, B)]))
    seen = []
    for _ in range(3):
        src, frame = await gate.release_random()
        seen.append((src, frame))
    assert sorted((s, f.clock) for s, f in seen) == [(A, 1), (A, 2), (B, 1)]
    assert [f for s, f in seen if s == A] == [msg(1, A), msg(2, A)]  # a link's order, whatever the draws


async def test_an_open_gate_lets_everything_through_and_closed_again_holds():
    sink = Sink()
    gate = Gate(sink)
    await gate.send(FramesIn(A, [msg(1), BEAT]))
    await gate.send(FramesIn(B, [msg(1, B)]))
    assert await gate.hold(False) == 2  # opening releases what was held, oldest first
    assert sink.frames() == [msg(1), BEAT, msg(1, B)] and gate.held() == 0
    await gate.send(FramesIn(A, [msg(2), Ack(2, B)]))
    assert sink.frames(A) == [msg(1), BEAT, msg(2), Ack(2, B)]  # open: passed at once
    assert await gate.hold(True) == 0
    await gate.send(FramesIn(A, [msg(3)]))
    assert gate.held() == 1 and sink.frames(A)[-1] == Ack(2, B)


@pytest.mark.parametrize("seed", range(20))
async def test_any_schedule_of_releases_hands_on_each_link_exactly_as_it_came(seed):
    """Seeded: random arrivals (frames held or not, connection events) on three links, releases of
    random heads in between; at the end, per link, the inbox got exactly the link's sequence."""
    rng = random.Random(seed)
    sink = Sink()
    gate = Gate(sink, rng=random.Random(seed))
    sent: dict[str, list] = {A: [], B: [], C: []}
    clock = 0
    for _ in range(60):
        src = rng.choice([A, B, C])
        r = rng.random()
        if r < 0.1:
            event = rng.choice([Disconnected(src), Connected(src, rng.randint(1, 3))])
            sent[src].append(event)
            await gate.send(event)
        elif r < 0.7:
            frames = []
            for _ in range(rng.randint(1, 4)):
                clock += 1
                frames.append(rng.choice([msg(clock, src, f"t{clock}"), Ack(clock, src), BEAT, Join(src, clock)]))
            sent[src].extend(frames)
            await gate.send(FramesIn(src, frames))
        elif r < 0.75:
            await gate.hold(rng.random() < 0.6)
        elif rng.random() < 0.5:
            try:
                await gate.release_random()
            except NothingHeld:
                pass
        else:
            try:
                await gate.release(rng.choice([A, B, C]))
            except NothingHeld:
                pass
        for queue in gate.queues.values():  # a queue is empty or starts with a held frame
            assert not queue or queue[0].held
    await gate.release_all()
    assert gate.held() == 0
    for src in (A, B, C):
        assert sink.of(src) == sent[src]


async def test_a_full_link_waits_until_a_release_makes_room():
    sink = Sink()
    gate = Gate(sink, limit=3)
    await gate.send(FramesIn(A, [msg(1), msg(2), msg(3)]))
    done = trio.Event()

    async def more():
        await gate.send(FramesIn(A, [msg(4)]))
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(more)
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()  # backpressure: the link's reader waits
        await gate.release(A)
        with trio.fail_after(1):
            await done.wait()
    assert gate.held() == 3
    await gate.release_all()
    assert sink.frames(A) == [msg(1), msg(2), msg(3), msg(4)]


async def test_a_release_and_an_arrival_on_the_same_link_keep_its_order():
    """A release that waits on a full inbox: a frame of that link arriving meanwhile must not overtake."""

    class SlowSink(Sink):
        async def send(self, event) -> None:
            await trio.sleep(0.01)
            self.events.append(event)

    sink = SlowSink()
    gate = Gate(sink)
    await gate.send(FramesIn(A, [msg(1), BEAT]))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gate.release, A)
        await trio.sleep(0.001)  # the release is under way (its first send sleeps)
        nursery.start_soon(gate.send, FramesIn(A, [Join(A, 1)]))
    assert sink.frames(A) == [msg(1), BEAT, Join(A, 1)]


class Hearless:
    """An inbox that loses the gate's `Heard` events (the fault the gate must not have)."""

    def __init__(self, inbox) -> None:
        self.inbox = inbox

    async def send(self, event) -> None:
        if type(event) is not Heard:
            await self.inbox.send(event)


async def hold_for_twenty_seconds(tmp_path, *, hears: bool = True, gate_on: bool = True):
    """A (this core) and B form a group; A multicasts; B's ACK (marks) and then a heartbeat of B that
    claims the delivery come, and wait at A's gate for 20 s (more than the 5 s timeout) while B's
    heartbeats keep coming behind them; then everything is released. ``hears=False``: the gate's
    liveness news is lost; ``gate_on=False``: no gate, and the heartbeat overtakes the ACK (as a gate
    that let heartbeats pass would). What A sent, and A's core."""
    core = Core.joining(A, 1, Timing(), now=trio.current_time())
    in_tx, in_rx = trio.open_memory_channel(64)
    gate = Gate(in_tx if hears else Hearless(in_tx))
    sent = []
    output = OutputFile(tmp_path / "a.jsonl", A)

    def route(batch):
        sent.extend((trio.current_time(), dests, frame) for dests, frame in batch)

    async def feed():
        await gate.send(Connected(B, 2))
        await gate.send(FramesIn(B, [Heartbeat(0), Join(B, 2)]))
        for _ in range(100):
            if core.view is not None:
                break
            await trio.sleep(0.1)
        view = core.view
        assert view is not None and view.members == {A, B}
        await gate.send(FramesIn(B, [Heartbeat(view.id, group=view.group)]))  # B announces the view
        box = []
        await in_tx.send(SendTexts(["hello"], box.append))
        await trio.sleep(0.1)
        m = box[0]
        claim = Heartbeat(view.id, 1, delivery_digest(0, m.clock, A, "hello"), (m.clock, A), view.group)
        if gate_on:
            await gate.send(FramesIn(B, [Marks((m.clock, 0)), claim]))
        else:
            await in_tx.send(FramesIn(B, [claim]))
        for _ in range(20):
            await trio.sleep(1.0)
            await gate.send(FramesIn(B, [claim]))
        await gate.release_all()
        if not gate_on:
            await in_tx.send(FramesIn(B, [Marks((m.clock, 0))]))
        await trio.sleep(1.0)

    with trio.move_on_after(40):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(processor, core, in_rx, route, output)
            nursery.start_soon(ticker, in_tx, core.timing.heartbeat / 4)
            await feed()
            nursery.cancel_scope.cancel()
    output.close()
    return sent, core


async def test_frames_held_longer_than_the_timeout_remove_nobody_and_raise_no_alarm(autojump_clock, tmp_path):
    sent, core = await hold_for_twenty_seconds(tmp_path)
    assert not [f for _, _, f in sent if type(f) is Propose]  # nobody suspected, nobody removed
    assert core.view.members == {A, B} and not core.detector.suspected
    assert core.stats["divergence_alarms"] == 0
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r.get("text") for r in records if r["kind"] == "message"] == ["hello"]  # delivered once released


async def test_the_checks_catch_their_faults(autojump_clock, tmp_path):
    """Without the liveness news B is removed for its held frames; a heartbeat that overtakes the ACK
    it follows raises a false divergence alarm. (What the gate's design avoids.)"""
    (tmp_path / "deaf").mkdir()
    (tmp_path / "no-gate").mkdir()
    sent, core = await hold_for_twenty_seconds(tmp_path / "deaf", hears=False)
    assert [f for _, _, f in sent if type(f) is Propose]
    sent, core = await hold_for_twenty_seconds(tmp_path / "no-gate", gate_on=False)
    assert core.stats["divergence_alarms"] >= 1
