"""Replicated state on TOM's order: methods marked ``@replicated`` run at every member, in the group's
order, and return their result to the caller once its own call is applied here.

    class Inventory(tom.Replicated):
        def __init__(self, members, me):
            super().__init__(members, me)
            self.stock = {}

        @tom.replicated
        def add(self, item, n):
            self.stock[item] = self.stock.get(item, 0) + n
            return self.stock[item]

    with Inventory(members, me) as inv:     # joins the group; leaving the block leaves it
        inv.add("apple", 3)                 # -> 3 here, once applied here; every member applies it too

Invariants:

* a call travels as one message, ``CALL_PREFIX`` followed by the JSON of ``[call id, method, args,
  kwargs]`` (so arguments are JSON values: str, numbers, booleans, None, lists, dicts with str keys; a
  call must fit in one frame: about 65,400 bytes of UTF-8); every member applies every call in the group's order on
  the member's own thread, one at a time, under ``lock``; a method must be deterministic (its effect
  and result depend only on the object's state and its arguments);
* a view change is applied in the same order too (`on_view`), so what a method does about members
  (the lock manager frees a departed member's locks) is the same everywhere;
* the caller blocks until its call is applied here (or ``call_timeout`` passes: TimeoutError; the call
  may still be applied later, everywhere); an exception the method raises is raised to the caller (the
  other members raise it too and go on: the state is what the method left);
* reads are local (no round trip): take ``lock`` to read several fields consistently;
* a member that joins a running group starts from the state it was constructed with, then applies the
  calls ordered after its join: state transfer to joiners is not there yet, so start the members of a
  replicated object together (they found the group together) or give them the same initial state.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .group_thread import GroupThread
from .library import Delivered, GroupEvent, ViewChanged

__all__ = ["CALL_PREFIX", "ReplCounter", "ReplDict", "ReplLockManager", "Replicated", "replicated"]

CALL_PREFIX = "tom-call "
"""What a replicated call's message text starts with (docs/wire.md); other messages are not calls."""

log = logging.getLogger("tom.replicated")

F = TypeVar("F", bound=Callable[..., Any])


def replicated(method: F) -> F:
    """Mark a method of a `Replicated` subclass: calling it sends the call to the group, which applies
    it at every member in order; the call returns its result here once applied here."""

    @functools.wraps(method)
    def call(self: Replicated, *args: Any, **kwargs: Any) -> Any:
        return self._call(method.__name__, args, kwargs)

    call.__tom_replicated__ = method  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]


class _Waiter:
    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class Replicated:
    """The base of an object replicated by a group. Subclasses set their state in ``__init__`` (after
    calling this one) and mark the methods that change it with `replicated`. ``options`` are
    `tom.open_group`'s; the member starts with ``with obj:`` (or `start`) and leaves at its end (or
    `close`)."""

    def __init__(self, neighbors: Any, me: str, *, call_timeout: float = 30.0, **options: Any) -> None:
        self._neighbors, self._me, self._options = neighbors, me, options
        self.call_timeout = call_timeout
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._waiting: dict[str, _Waiter] = {}
        self._member: GroupThread | None = None
        self._methods = {name: getattr(attr, "__tom_replicated__") for klass in type(self).__mro__
                         for name, attr in vars(klass).items() if hasattr(attr, "__tom_replicated__")}
        self.members: tuple[str, ...] = ()
        self.admitted = threading.Event()

    # -- the member ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the group (the member runs on a thread of its own until `close`)."""
        if self._member is None:
            self._member = GroupThread(self._neighbors, self._me, on_event=self._apply, **self._options)

    def close(self) -> None:
        """Leave the group; calls still waiting fail with TimeoutError at their deadline."""
        if self._member is not None:
            self._member.close()

    def __enter__(self: _R) -> _R:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def me(self) -> str:
        return self._me

    def wait_admitted(self, timeout: float | None = None) -> bool:
        """Wait until this member is in a view of the group; whether it is."""
        return self.admitted.wait(timeout)

    # -- calls ----------------------------------------------------------------------------------------

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._member is None:
            raise RuntimeError(f"{type(self).__name__} is not started: use 'with obj:' or obj.start()")
        call_id = f"{self._me}#{next(self._ids)}"
        text = CALL_PREFIX + json.dumps([call_id, name, list(args), kwargs], separators=(",", ":"))
        waiter = self._waiting[call_id] = _Waiter()
        try:
            self._member.send(text)
            if not waiter.done.wait(self.call_timeout):
                raise TimeoutError(f"{name}: not applied here within {self.call_timeout} s (it may still be)")
        finally:
            self._waiting.pop(call_id, None)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _apply(self, event: GroupEvent) -> None:
        """On the member's thread, in the group's order: apply a call, or a view change."""
        if isinstance(event, ViewChanged):
            with self.lock:
                self.members = event.members
                self.on_view(event)
            if self._me in event.members:
                self.admitted.set()
            return
        if not isinstance(event, Delivered) or not event.payload.startswith(CALL_PREFIX):
            return
        try:
            call_id, name, args, kwargs = json.loads(event.payload[len(CALL_PREFIX):])
            method = self._methods[name]
        except (ValueError, KeyError, TypeError):
            log.warning("a call from %s that this object does not know: %.80s", event.origin, event.payload)
            return
        waiter = self._waiting.get(call_id) if event.origin == self._me else None
        try:
            with self.lock:
                result = method(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the caller's, and every member's alike
            if waiter is not None:
                waiter.error = e
        else:
            if waiter is not None:
                waiter.result = result
        if waiter is not None:
            waiter.done.set()

    def on_view(self, view: ViewChanged) -> None:
        """Called in the group's order when the membership changes (under ``lock``); override it to
        react the same way at every member."""


_R = TypeVar("_R", bound=Replicated)


class ReplCounter(Replicated):
    """A counter: ``inc`` and ``add`` are replicated and return the new value; ``value`` reads it here."""

    def __init__(self, neighbors: Any, me: str, *, initial: int = 0, **options: Any) -> None:
        super().__init__(neighbors, me, **options)
        self.value = initial

    @replicated
    def inc(self) -> int:
        self.value += 1
        return self.value

    @replicated
    def add(self, n: int) -> int:
        self.value += n
        return self.value


class ReplDict(Replicated):
    """A dict with str keys and JSON values: ``set``, ``pop``, ``update`` and ``clear`` are replicated;
    reads (``get``, ``[k]``, ``in``, ``len``, ``items``, ``copy``) are local."""

    def __init__(self, neighbors: Any, me: str, **options: Any) -> None:
        super().__init__(neighbors, me, **options)
        self._data: dict[str, Any] = {}

    @replicated
    def set(self, key: str, value: Any) -> None:
        self._data[key] = value

    @replicated
    def pop(self, key: str, default: Any = None) -> Any:
        return self._data.pop(key, default)

    @replicated
    def update(self, items: dict[str, Any]) -> None:
        self._data.update(items)

    @replicated
    def clear(self) -> None:
        self._data.clear()

    def get(self, key: str, default: Any = None) -> Any:
        with self.lock:
            return self._data.get(key, default)

    def __getitem__(self, key: str) -> Any:
        with self.lock:
            return self._data[key]

    def __contains__(self, key: object) -> bool:
        with self.lock:
            return key in self._data

    def __len__(self) -> int:
        with self.lock:
            return len(self._data)

    def __iter__(self) -> Iterator[str]:
        return iter(self.copy())

    def items(self) -> list[tuple[str, Any]]:
        with self.lock:
            return list(self._data.items())

    def copy(self) -> dict[str, Any]:
        """A snapshot of the whole dict, as applied here so far."""
        with self.lock:
            return dict(self._data)


class ReplLockManager(Replicated):
    """Named locks held by members: ``try_acquire`` and ``release`` are replicated; a member that leaves
    the group (or is removed) loses its locks, at every member in the same place of the order."""

    def __init__(self, neighbors: Any, me: str, **options: Any) -> None:
        super().__init__(neighbors, me, **options)
        self._owners: dict[str, str] = {}

    def try_acquire(self, name: str) -> bool:
        """Take lock ``name`` for this member if it is free (or already ours); whether we hold it."""
        return self._acquire(name, self.me)

    def release(self, name: str) -> bool:
        """Release lock ``name`` if this member holds it; whether it did."""
        return self._release(name, self.me)

    @replicated
    def _acquire(self, name: str, owner: str) -> bool:
        if self._owners.get(name, owner) != owner:
            return False
        self._owners[name] = owner
        return True

    @replicated
    def _release(self, name: str, owner: str) -> bool:
        if self._owners.get(name) != owner:
            return False
        del self._owners[name]
        return True

    def owner(self, name: str) -> str | None:
        """Who holds lock ``name``, as applied here so far."""
        with self.lock:
            return self._owners.get(name)

    def is_acquired(self, name: str) -> bool:
        """Whether this member holds lock ``name``."""
        return self.owner(name) == self.me

    def on_view(self, view: ViewChanged) -> None:
        for name, owner in list(self._owners.items()):
            if owner in view.left:
                del self._owners[name]
