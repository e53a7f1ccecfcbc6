"""A group member on a background thread, for programs that are not trio: a blocking face
(`GroupThread`: ``send``, an iterator, a callback) and an asyncio face (`AsyncioGroup`: ``await send``,
``async for``), both over one `tom.open_group` run by trio on a thread of its own.

    with tom.GroupThread(members, me) as group:          # plain threads, Flask, a script
        group.send("hello")
        for event in group:
            ...

    async with tom.AsyncioGroup(members, me) as group:   # asyncio, FastAPI
        await group.send("hello")
        async for event in group:
            ...

Invariants (besides `tom.library`'s):

* the member's thread runs only trio; the program's threads reach it through ``trio.from_thread``
  (``send``) and read events from a thread-safe queue, so events keep the group's order;
* ``on_event``, if given, is called on the member's thread, once per event, in order, before the event
  is queued for the iterator; it must not block (it holds up delivery to the program);
* starting waits (bounded by ``start_timeout``) until the member listens, so a bad argument raises its
  `tom.errors.ConfigError` in the caller; closing leaves the group and joins the thread (bounded).
"""

from __future__ import annotations

import asyncio
import logging
import math
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import trio

from .errors import UsageError
from .library import Group, GroupEvent, Sent, open_group

__all__ = ["AsyncioGroup", "GroupThread"]

log = logging.getLogger("tom.group_thread")

_END = object()  # queued after the last event: the member has stopped


class GroupThread:
    """A group member run by trio on a background thread, with a blocking face. A context manager;
    `close` leaves the group. ``options`` are `tom.open_group`'s."""

    def __init__(self, neighbors: Any, me: str, *, on_event: Callable[[GroupEvent], None] | None = None,
                 on_end: Callable[[], None] | None = None, on_direct: Callable[[str, str], None] | None = None,
                 start_timeout: float = 30.0, **options: Any) -> None:
        self._on_event = on_event
        self._on_end = on_end
        self._on_direct = on_direct
        self._nursery: trio.Nursery | None = None
        self._posted: trio.MemorySendChannel[tuple[str | bytes, Callable[[BaseException], None]]] | None = None
        self._queue: queue.Queue[object] = queue.Queue()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._group: Group | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._leave_timeout = float(options.get("leave_timeout", 15.0))
        self._thread = threading.Thread(target=trio.run, args=(self._main, neighbors, me, options),
                                        name=f"tom-group-{me}", daemon=True)
        self._thread.start()
        if not self._started.wait(start_timeout):
            raise TimeoutError(f"the member {me} did not start within {start_timeout} s")
        if self._error is not None:
            raise self._error

    async def _main(self, neighbors: Any, me: str, options: dict[str, Any]) -> None:
        try:
            async with open_group(neighbors, me, **options) as group:
                self._group, self._token, self._stop = group, trio.lowlevel.current_trio_token(), trio.Event()
                group.on_direct = self._on_direct
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self._posted, posted = trio.open_memory_channel(math.inf)  # (bounded by the callers: post)
                    nursery.start_soon(self._pump, group, nursery.cancel_scope)
                    nursery.start_soon(self._send_posted, group, posted)
                    self._started.set()  # (last: the caller's thread may use all of the above at once)
                    await self._stop.wait()
                    nursery.cancel_scope.cancel()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread, or said
            while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
                e = e.exceptions[0]  # (the nurseries' groups: what went wrong is inside)
            if not self._started.is_set():
                self._error = e  # raised by __init__
            elif not isinstance(e, (trio.Cancelled, KeyboardInterrupt)):
                log.error("the member %s stopped: %s: %s", me, type(e).__name__, e)
        finally:
            self._queue.put(_END)
            if self._on_end is not None:
                self._on_end()
            self._started.set()

    async def _pump(self, group: Group, scope: trio.CancelScope) -> None:
        async for event in group:
            if self._on_event is not None:
                self._on_event(event)
            self._queue.put(event)
        scope.cancel()  # the member stopped on its own (removed, or left)

    @property
    def me(self) -> str:
        assert self._group is not None
        return self._group.me

    @property
    def members(self) -> tuple[str, ...]:
        """The members of the current view (read from the member's thread)."""
        if self._group is None or self._token is None or not self._thread.is_alive():
            return ()
        try:
            return trio.from_thread.run_sync(lambda: self._group.members, trio_token=self._token)  # type: ignore[union-attr]
        except trio.RunFinishedError:
            return ()

    def send(self, payload: str | bytes) -> Sent | None:
        """Multicast ``payload`` (as `tom.Group.send`); blocks until it left this member."""
        if self._group is None or self._token is None:
            raise RuntimeError("the member is not running")
        try:
            return trio.from_thread.run(self._group.send, payload, trio_token=self._token)
        except trio.RunFinishedError:
            raise UsageError("this member has left the group: nothing more can be sent") from None

    def post(self, payload: str | bytes, on_error: Callable[[BaseException], None]) -> None:
        """Multicast ``payload`` without waiting for it to leave: posts from one thread go in their order;
        ``on_error`` hears, on the member's thread, why one was refused. For callers that wait anyway
        (a replicated call waits for its result), so that what is posted stays bounded by them."""
        if self._posted is None or self._token is None:
            raise RuntimeError("the member is not running")
        try:
            self._token.run_sync_soon(self._posted.send_nowait, (payload, on_error))  # (FIFO)
        except trio.RunFinishedError:
            raise UsageError("this member has left the group: nothing more can be sent") from None

    async def _send_posted(self, group: Group, posted: trio.MemoryReceiveChannel[
            tuple[str | bytes, Callable[[BaseException], None]]]) -> None:
        async for payload, on_error in posted:
            try:
                await group.send(payload)
            except (UsageError, TypeError) as e:
                on_error(e)

    def send_direct(self, member: str, text: str) -> None:
        """Send ``text`` to ``member`` alone (as `tom.Group.send_direct`); blocks until it is queued."""
        if self._group is None or self._token is None:
            raise RuntimeError("the member is not running")
        trio.from_thread.run(self._group.send_direct, member, text, trio_token=self._token)

    def spawn(self, async_fn: Callable[..., Any], *args: Any) -> None:
        """Start ``async_fn(group, *args)`` as a task of the member (call it from the member's thread, e.g.
        in ``on_event``); it ends with the member."""
        assert self._nursery is not None and self._group is not None
        self._nursery.start_soon(async_fn, self._group, *args)

    def group_gaps(self) -> int:
        """`tom.library.Group.gaps` (on the member's thread)."""
        return self._group.gaps if self._group is not None else 0

    def hold_history(self, after: tuple[int, int, str] | None) -> None:
        """`tom.library.Group.hold_history` (on the member's thread)."""
        if self._group is not None:
            self._group.hold_history(after)

    def stop_soon(self) -> None:
        """From the member's thread: leave the group as `close` does, without waiting."""
        if self._stop is not None:
            self._stop.set()

    def get(self, timeout: float | None = None) -> GroupEvent | None:
        """The next event, waiting at most ``timeout`` seconds (None: for ever); None once the member
        has stopped and every event was read, or when the time is up."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is _END:
            self._queue.put(_END)  # every later reader sees the end too
            return None
        return item  # type: ignore[return-value]

    def __iter__(self) -> Iterator[GroupEvent]:
        while (event := self.get()) is not None:
            yield event

    def close(self) -> None:
        """Leave the group and wait (bounded) until the member's thread has ended. Calling it again is
        harmless."""
        if self._stop is not None and self._token is not None and self._thread.is_alive():
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(self._leave_timeout + 10)

    def __enter__(self) -> GroupThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncioGroup:
    """A group member for an asyncio program: `GroupThread` underneath, with ``await send`` and
    ``async for``. Use ``async with AsyncioGroup(...) as group``; ``options`` are `tom.open_group`'s."""

    def __init__(self, neighbors: Any, me: str | Path, **options: Any) -> None:
        self._args = (neighbors, str(me), options)
        self._thread: GroupThread | None = None
        self._queue: asyncio.Queue[object] = asyncio.Queue()

    async def __aenter__(self) -> AsyncioGroup:
        loop = asyncio.get_running_loop()
        neighbors, me, options = self._args

        def forward(event: object) -> None:
            try:
                loop.call_soon_threadsafe(self._queue.put_nowait, event)
            except RuntimeError:  # the program's loop has closed: nobody reads any more
                pass

        self._thread = await loop.run_in_executor(None, lambda: GroupThread(
            neighbors, me, on_event=forward, on_end=lambda: forward(_END), **options))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Leave the group (bounded); then the iteration ends."""
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.close)

    @property
    def me(self) -> str:
        assert self._thread is not None
        return self._thread.me

    @property
    def members(self) -> tuple[str, ...]:
        return self._thread.members if self._thread is not None else ()

    async def send(self, payload: str | bytes) -> Sent | None:
        """Multicast ``payload`` (as `tom.Group.send`)."""
        assert self._thread is not None, "use: async with AsyncioGroup(...) as group"
        return await asyncio.get_running_loop().run_in_executor(None, self._thread.send, payload)

    def __aiter__(self) -> AsyncIterator[GroupEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[GroupEvent]:
        while True:
            item = await self._queue.get()
            if item is _END:
                self._queue.put_nowait(_END)
                return
            yield item  # type: ignore[misc]
