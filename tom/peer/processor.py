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
from ..core.records import Ready, Sends
from ..codec.frames import Message
from ..errors import OutputError, UsageError
from ..web.eventfeed import EventFeed
from .events import (Connected, Disconnected, Event, EventSink, FramesIn, Heard, LeaveGroup, Replayed, SendDirect,
                     SendTexts, Tick)
from .idempotency import IdempotencyKeys, conflict
from .output import NoOutput, OutputFile
from .durable import Durable
from ..core.notices import DurableFrame, Rejoining
from ..codec.frames import CatchUp, History, Progress
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


def apply(core: Core, event: Event, now: float, durable: Durable | None = None,
          keys: IdempotencyKeys | None = None) -> None:
    """Feed one event to the core; reject bad frames one by one with a log line. With ``durable``, the
    user's texts are on its disk before the core takes them (and wait there until it is caught up).
    ``keys``: the idempotency keys accepted (``durable.keys`` with a data folder), for texts sent with
    keys (`send_keyed`)."""
    t = type(event)
    if t is FramesIn:
        src = event.src  # type: ignore[union-attr]
        for e in receive_all(core, src, event.frames):  # type: ignore[union-attr]
            held = REJECTED.allow(src)
            if held is not None:
                log.warning("rejected frame from %s: %s%s", src, e, held_back(held))
    elif t is SendTexts:
        if event.keys is not None:  # type: ignore[union-attr]
            if keys is None:
                keys = durable.keys if durable is not None else IdempotencyKeys()
            send_keyed(core, event, durable, keys)  # type: ignore[arg-type]
            return
        on_sent = event.on_sent  # type: ignore[union-attr]
        stamp = time.time()  # one send time for the texts taken together (so they go as one run)
        texts = event.texts  # type: ignore[union-attr]
        if durable is not None:
            try:
                taken = durable.accept(texts, None, event.inputs)  # type: ignore[union-attr]
            except OutputError as e:  # (a full disk: nothing accepted)
                if on_sent is not None:
                    for _ in texts:
                        on_sent(UsageError(f"not accepted: {e}"))
                raise
            if len(taken) < len(texts):  # (waiting in the data folder until this peer is caught up)
                if on_sent is not None:
                    for _ in texts:
                        on_sent(None)
                return
        for text in texts:
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


def send_keyed(core: Core, event: SendTexts, durable: Durable | None, keys: IdempotencyKeys) -> None:
    """`apply` for texts sent with idempotency keys: a text whose key was accepted before is not accepted
    again (`Replayed`, or `KeyConflict` for another text under it); the others go as any text, each
    key recorded once its text is accepted (on the disk, with a data folder; else once the core took
    it). ``on_sent`` hears one answer per text, in order."""
    texts, on_sent = event.texts, event.on_sent
    tags: list[str | None] = list(event.keys or [None] * len(texts))
    answers: list[Message | None | Replayed | UsageError] = [None] * len(texts)
    fresh: list[int] = []
    first: dict[str, int] = {}  # a key twice in this batch: its first text only
    for i, (text, key) in enumerate(zip(texts, tags)):
        if key is None:
            fresh.append(i)
        elif key in first:
            answers[i] = Replayed(None) if texts[first[key]] == text else conflict(key)
        elif (known := keys.check(key, text)) is not None:
            answers[i] = known
        else:
            first[key] = i
            fresh.append(i)
    stamp = time.time()
    sending = fresh
    if durable is not None and fresh:
        inputs = [event.inputs[i] for i in fresh] if event.inputs is not None else None
        try:
            taken = durable.accept([texts[i] for i in fresh], [tags[i] for i in fresh], inputs)
        except OutputError as e:  # (a full disk: nothing accepted)
            if on_sent is not None:
                for _ in texts:
                    on_sent(UsageError(f"not accepted: {e}"))
            raise
        if len(taken) < len(fresh):  # (waiting in the data folder until this peer is caught up)
            sending = []
    for i in sending:
        key = tags[i]
        try:
            sent: Message | None | UsageError = core.broadcast(texts[i], sent_at=stamp)
        except UsageError as e:
            held = NOT_SENT.allow(str(e)[:30])
            if held is not None:
                log.warning("not sent: %s%s", e, held_back(held))
            sent = e
        answers[i] = sent
        if key is not None and not isinstance(sent, UsageError):
            keys.add(key, texts[i])  # (with a data folder: added when accepted)
            if sent is not None:
                keys.sent(key, sent.clock)
    for i, key in enumerate(tags):  # a key twice in this batch: the answer of its first text
        if key is not None and first.get(key, i) != i and type(answers[i]) is Replayed:
            took = answers[first[key]]
            answers[i] = Replayed(took.clock) if isinstance(took, Message) else took
    if on_sent is not None:
        for answer in answers:
            on_sent(answer)


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


def persist_then_send(ready: Ready, durable: Durable | None, route: Callable[[Sends], None], now: float,
                      fail: Callable[[OutputError], None]) -> None:
    """A step's effects in the order a crash may cut them: the messages the core took
    (`Ready.persist`) on the disk of a durable peer (synced as ``--fsync`` says), then the step's
    frames out, which acknowledge them. A crash between the two leaves a message on the disk and not
    acknowledged, never acknowledged and not on the disk (`tom check --restart` explores that point,
    through this very function). A disk error goes to ``fail``."""
    if durable is not None:
        try:
            durable.persist(ready.persist)
            durable.sync(now)  # (--fsync batch: a group commit, every 0.1 s at most)
        except OutputError as e:
            fail(e)
    if TRACE is not None:
        TRACE.note("core")
    if ready.sends:
        route(ready.sends)


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
    durable: Durable | None = None,
) -> None:
    """Run the core over ``incoming`` until it closes; show every step to ``tap`` (``--http``) if any.
    With ``inbox`` (the counted face of ``incoming``'s sending end), its senders may step an event
    themselves while nothing waits."""

    keys = durable.keys if durable is not None else IdempotencyKeys()  # (without a folder: in memory)

    def step(events: list[Event]) -> None:
        """Feed ``events`` to the core, then send, record and show what it hands out."""
        if TRACE is not None:
            TRACE.note("step")
        now = trio.current_time()
        shown: list[Delivery | ViewDelivery] = []  # recorded on disk, so shown
        if durable is not None and durable.caught_up_now:
            durable.caught_up_now.clear()
        for event in events:
            try:
                apply(core, event, now, durable, keys)
            except OutputError as e:
                fail(e)
            if tap is not None:
                tap.incoming(event)
            if durable is not None and output.failed is None:
                t = type(event)
                if t is Tick:
                    took(durable.tick(output, time.time(), now), shown)
                elif t is Disconnected:
                    took(durable.gone(event.pid, output, time.time(), now), shown)  # type: ignore[union-attr]
        ready = core.ready()
        if durable is not None:
            unsent = durable.take_unsent()
            if unsent:  # (admitted and caught up: what was accepted before goes first)
                for text in unsent:
                    try:
                        core.broadcast(text, sent_at=time.time())
                    except UsageError as e:
                        log.warning("an accepted text not sent again: %s", e)
                more = core.ready()
                ready.persist += more.persist
                ready.sends += more.sends
                ready.deliveries += more.deliveries
                ready.notices += more.notices
        persist_then_send(ready, durable if output.failed is None else None, route, now, fail)
        if ready.deliveries and output.failed is None:
            try:
                if durable is not None:
                    group = core.view.group if core.view is not None else ""
                    took(durable.deliver(ready.deliveries, output, time.time(), now, group), shown)
                else:
                    output.write(ready.deliveries, time.time())
                    shown += ready.deliveries
                if TRACE is not None:
                    TRACE.note("written")
            except OutputError as e:
                fail(e)
        notes = ready.notices
        if notes:
            notes = []
            for notice in ready.notices:
                if type(notice) is DurableFrame:
                    if durable is None:  # (no history kept here: ask another member; and it needs none)
                        if type(notice.frame) is CatchUp:
                            route([((notice.src,), History("none"))])
                        elif type(notice.frame) is Progress and notice.frame.view:
                            route([((notice.src,), Progress())])
                    elif output.failed is None:
                        try:
                            took(durable.on_frame(notice.src, notice.frame, output, time.time(), now), shown)
                        except OutputError as e:
                            fail(e)
                else:
                    if durable is not None and type(notice) is Rejoining:
                        core.held.forget()
                        durable.rejoining()
                    notes.append(notice)
        if shown and on_deliver is not None:
            on_deliver(shown)
        if tap is not None:
            tap.step(ready.sends, shown, notes, ready.alarms)
        for alarm in ready.alarms:
            log.error("%s", divergence_line(core.me, alarm))
        for notice in notes:
            if on_notice is not None:
                on_notice(notice)

    def took(step: tuple[list[Delivery | ViewDelivery], Sends], shown: list[Delivery | ViewDelivery]) -> None:
        """What the data folder wrote (shown) and sends (routed now)."""
        written, sends = step
        shown += written
        if sends:
            route(sends)

    said: list[OutputError] = []

    def fail(e: OutputError) -> None:
        """The first failure to record stops the recording and is said (once: a full disk fails every
        write after it too)."""
        if output.failed is None:
            output.failed = e  # (nothing more is written)
        if not said and on_output_error is not None:
            said.append(e)
            on_output_error(e)

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
