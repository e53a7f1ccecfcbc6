"""The processor task: the only caller of the core.

Drains the incoming channel in batches (frames from links, texts from the UI), feeds the core, then
passes the core's sends to the sender and writes its deliveries to the output file before anything
else is read. A frame the core rejects is logged and dropped; the peer goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio

from .core import Core, Delivery
from .errors import FrameError, UsageError
from .events import Event, FramesIn, SendTexts
from .output import OutputFile

log = logging.getLogger("tom.processor")

MAX_EVENTS_PER_STEP = 64


def apply(core: Core, event: Event) -> None:
    """Feed one event to the core; reject bad frames one by one with a log line."""
    if type(event) is FramesIn:
        src, receive = event.src, core.receive
        for frame in event.frames:
            try:
                receive(src, frame)
            except FrameError as e:
                log.warning("rejected frame from %s: %s", src, e)
    else:
        for text in event.texts:
            try:
                core.broadcast(text, sent_at=time.time())
            except UsageError as e:
                log.warning("not sent: %s", e)


async def processor(
    core: Core,
    incoming: trio.MemoryReceiveChannel,
    outgoing: trio.MemorySendChannel,
    output: OutputFile,
    on_deliver: Callable[[list[Delivery]], None] | None = None,
) -> None:
    """Run the core over ``incoming`` until it closes."""
    async with incoming, outgoing:
        async for event in incoming:
            apply(core, event)
            for _ in range(MAX_EVENTS_PER_STEP):  # coalesce what is already waiting
                try:
                    event = incoming.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                apply(core, event)
            ready = core.ready()
            if ready.deliveries:
                output.write(ready.deliveries, time.time())
                if on_deliver is not None:
                    on_deliver(ready.deliveries)
            if ready.sends:
                await outgoing.send(ready.sends)
