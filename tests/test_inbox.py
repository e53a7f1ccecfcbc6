"""The processor's inbox: an event sent while nothing waits is stepped by its sender at once; events
that wait on the channel are stepped as one batch; every event is stepped once, in the order each
task sent it, however the tasks interleave."""

import trio

from tom.core import Core, Timing
from tom.peer.events import SendTexts
from tom.peer.output import OutputFile
from tom.peer.processor import Inbox, processor

A = "127.0.0.1:5000"


class Steps:
    """The processor's tap (as `--http`'s event feed): which events each step took."""

    def __init__(self):
        self.current, self.steps = [], []

    def incoming(self, event):
        self.current.append(event.texts[0])

    def step(self, sends, shown, notices, alarms):
        self.steps.append(self.current)
        self.current = []


async def test_events_are_stepped_at_once_when_idle_and_in_batches_when_they_come_together(tmp_path):
    core = Core.joining(A, 1, Timing(), now=trio.current_time())
    channel, receive = trio.open_memory_channel(64)
    inbox, taps = Inbox(channel), Steps()
    output = OutputFile(tmp_path / "out.jsonl", A)
    for text in ("early1", "early2"):  # before the processor runs: they wait on the channel
        await inbox.send(SendTexts([text]))
    assert inbox.waiting == 2 and taps.steps == []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(processor, core, receive, lambda sends: None, output, None, None, None, taps, inbox)
        await trio.sleep(0.01)  # the processor takes what waits, in one step, then waits for events
        assert taps.steps == [["early1", "early2"]] and inbox.waiting == 0
        await inbox.send(SendTexts(["alone"]))
        assert taps.steps[-1] == ["alone"] and inbox.waiting == 0  # stepped before send returned

        go = trio.Event()

        async def sender(names):
            await go.wait()
            for name in names:
                await inbox.send(SendTexts([name]))

        nursery.start_soon(sender, ["a1", "a2", "a3"])
        nursery.start_soon(sender, ["b1", "b2", "b3"])
        await trio.sleep(0.01)
        go.set()  # both become runnable together
        with trio.fail_after(5):
            while sum(map(len, taps.steps)) < 9:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    stepped = [t for step in taps.steps for t in step]
    assert sorted(stepped) == sorted(["early1", "early2", "alone", "a1", "a2", "a3", "b1", "b2", "b3"])
    assert [t for t in stepped if t in ("a1", "a2", "a3")] == ["a1", "a2", "a3"]
    assert [t for t in stepped if t[0] == "b"] == ["b1", "b2", "b3"]
    assert inbox.waiting == 0
    output.close()
