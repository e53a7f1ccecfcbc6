"""The processor task and its inbox: the core is called only from the processor's step.

A step feeds the core a batch of events (frames, connections, ticks, the user's texts and quit), then
queues the core's sends on their links (``route``, `tom.net.sender.Router`) and writes its deliveries to
the output file, all synchronously: steps never interleave. The processor task steps what waits in its
channel; an event sent while nothing waits is stepped by the task that sends it (`Inbox`). A frame the
core rejects is logged (rate-limited); the peer goes on. Deliveries are shown to the user only once
they are on disk; once the output cannot be written, nothing more is recorded or shown, and
``on_output_error`` is told (once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio

from ..core import Core, Delivery, Divergence, ViewDelivery
from ..core.group import heard_at_gate, receive_all, send_direct
from ..core.records import Sends
from ..errors import OutputError, UsageError
from ..web.eventfeed import EventFeed
from .events import Connected, Disconnected, Event, EventSink, FramesIn, Heard, LeaveGroup, SendDirect, SendTexts, Tick
from .output import NoOutput, OutputFile
from .pathtrace import TRACE
from ..net.ratelimit import LogLimiter, held_back

log = logging.getLogger("tom.peer.processor")

MAX_EVENTS_PER_STEP = 64
REJECTED = LogLimiter()  # frames the core rejects, per sender
NOT_SENT = LogLimiter(5.0)  # texts the core refuses (e.g. while leaving), per kind of reason


def divergence_line(me: str, alarm: Divergence) -> str:
    head = f"DIVERGENCE: {alarm.peer} and this peer ({me}) delivered different messages in view {alarm.view}: "
    if alarm.skipped is not None:
        clock, pid = alarm.skipped
        return (head + f"{alarm.peer} delivered past message ({clock}, {pid}), message {alarm.position} of the "
                f"view here, without acknowledging it")
    return head + (f"their digests differ after message {alarm.position} of the view "
                   f"(ours {alarm.mine:08x}, theirs {alarm.theirs:08x})")


def apply(core: Core, event: Event, now: float) -> None:
    """Feed one event to the core; reject bad frames one by one with a log line."""
    t = type(event)
    if t is FramesIn:
        src = event.src  # type: ignore[union-attr]
        for e in receive_all(core, src, event.frames):  # type: ignore[union-attr]
            held = REJECTED.allow(src)
            if held is not None:
                log.warning("rejected frame from %s: %s%s", src, e, held_back(held))
    elif t is SendTexts:
        on_sent = event.on_sent  # type: ignore[union-attr]
        stamp = time.time()  # one send time for the texts taken together (so they go as one run)
        for text in event.texts:  # type: ignore[union-attr]
            try:
                sent = core.broadcast(text, sent_at=stamp)
            except UsageError as e:
                held = NOT_SENT.allow(str(e)[:30])
                if held is not None:
                    log.warning("%s%s", e if str(e).startswith("message not sent") else f"not sent: {e}",
                                held_back(held))
                sent = e
            if on_sent is not None:
                on_sent(sent)
    elif t is Tick:
        core.tick(now)
    elif t is Connected:
        core.connected(event.pid, event.incarnation)  # type: ignore[union-attr]
    elif t is Disconnected:
        core.disconnected(event.pid)  # type: ignore[union-attr]
    elif t is LeaveGroup:
        core.leave()
    elif t is SendDirect:
        try:
            send_direct(core, event.dest, event.text)  # type: ignore[union-attr]
        except UsageError as e:
            refused: UsageError | None = e
        else:
            refused = None
        if event.on_sent is not None:  # type: ignore[union-attr]
            event.on_sent(refused)  # type: ignore[union-attr]
    elif t is Heard:  # (step mode only: `tom.peer.gate`)
        heard_at_gate(core, event.pid, now)  # type: ignore[union-attr]


class Inbox:
    """The processor's channel, counted, for every task that hands the processor an event.

    ``send`` an event: when nothing sent before it still waits to be taken, no other task is about to
    run and the processor runs, the sending task steps it at once (`processor`'s step is synchronous:
    nothing comes between, and events are stepped in the order they were sent either way); otherwise it
    waits on the channel, and the processor steps what waits in batches, as many as it would have found
    there. Under light load a message's hop then has no task switch between a link's read and the core;
    under load, the steps are the same batches."""

    def __init__(self, channel: trio.MemorySendChannel) -> None:
        self.channel = channel
        self.waiting = 0  # sent to the channel, not yet taken by the processor
        self.step: Callable[[list[Event]], None] | None = None  # while the processor runs

    async def send(self, event: Event) -> None:
        step = self.step
        if step is not None and self.waiting == 0 and trio.lowlevel.current_statistics().tasks_runnable == 0:
            step([event])
            await trio.lowlevel.checkpoint()
            return
        self.waiting += 1
        try:
            await self.channel.send(event)
        except BaseException:
            self.waiting -= 1  # not sent
            raise


async def processor(
    core: Core,
    incoming: trio.MemoryReceiveChannel,
    route: Callable[[Sends], None],
    output: OutputFile | NoOutput,
    on_deliver: Callable[[list[Delivery | ViewDelivery]], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
    on_output_error: Callable[[OutputError], None] | None = None,
    tap: EventFeed | None = None,
    inbox: Inbox | None = None,
) -> None:
    """Run the core over ``incoming`` until it closes; show every step to ``tap`` (``--http``) if any.
    With ``inbox`` (the counted face of ``incoming``'s sending end), its senders may step an event
    themselves while nothing waits."""

    def step(events: list[Event]) -> None:
        """Feed ``events`` to the core, then send, record and show what it hands out."""
        if TRACE is not None:
            TRACE.note("step")
        now = trio.current_time()
        for event in events:
            apply(core, event, now)
            if tap is not None:
                tap.incoming(event)
        ready = core.ready()
        if TRACE is not None:
            TRACE.note("core")
        if ready.sends:
            route(ready.sends)
        shown: list[Delivery | ViewDelivery] = []  # recorded on disk, so shown
        if ready.deliveries and output.failed is None:
            try:
                output.write(ready.deliveries, time.time())
                if TRACE is not None:
                    TRACE.note("written")
            except OutputError as e:
                if on_output_error is not None:
                    on_output_error(e)
            else:
                shown = ready.deliveries
                if on_deliver is not None:
                    on_deliver(shown)
        if tap is not None:
            tap.step(ready.sends, shown, ready.notices, ready.alarms)
        for alarm in ready.alarms:
            log.error("%s", divergence_line(core.me, alarm))
        for notice in ready.notices:
            if on_notice is not None:
                on_notice(notice)

    if inbox is not None:
        inbox.step = step
    try:
        async with incoming:
            async for event in incoming:
                events = [event]
                for _ in range(MAX_EVENTS_PER_STEP):  # coalesce what is already waiting
                    try:
                        events.append(incoming.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                if inbox is not None:
                    inbox.waiting -= len(events)
                step(events)
    finally:
        if inbox is not None:
            inbox.step = None


async def ticker(incoming: EventSink, period: float) -> None:
    """Send a Tick every ``period`` seconds, for heartbeats and failure detection."""
    while True:
        await trio.sleep(period)
        await incoming.send(Tick())
