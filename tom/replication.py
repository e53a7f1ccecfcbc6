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
* state transfer: a member that joins a running group (or joins it again after a partition) takes the
  group's state from one member before it applies anything: at the view that admits it, every member
  agrees (from the ordered stream alone) on the one that sends it, the least pid among the members that
  have the state; that member takes ``snapshot()`` right there in the order and sends it in chunks on
  its link to the joiner (`Direct` frames, ``STATE_PREFIX``). The joiner holds every event it delivers
  meanwhile, ``restore()``s the snapshot, applies the held events that follow the snapshot's view, and
  says so to the group (a ``tom-state ok`` message); only then is it admitted (`wait_admitted`). If the
  sender leaves or fails first, the next member in that order sends a snapshot of a later view. A
  snapshot that fails to restore is one error line; the joiner then applies nothing and leaves. Until a
  joiner's ``ok`` is ordered, the members keep track of it, and that bookkeeping travels with the
  snapshot. Taking a snapshot holds the member's thread (no delivery meanwhile).
* the codec of calls and snapshots is JSON; ``codec="pickle"`` takes any picklable value, but
  unpickling runs code, so it is allowed only in a closed group (``keys=``: every link is mutual TLS).
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import logging
import pickle
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .errors import ConfigError, UsageError
from .group_thread import GroupThread
from .library import Delivered, Group, GroupEvent, ViewChanged
from .statetransfer import Restore, SendState, StateTransfer

__all__ = ["CALL_PREFIX", "STATE_PREFIX", "ReplCounter", "ReplDict", "ReplLockManager", "Replicated", "replicated"]

CALL_PREFIX = "tom-call "
"""What a replicated call's message text starts with (docs/wire.md); other messages are not calls."""

STATE_PREFIX = "tom-state "
"""What a state transfer's texts start with: ``tom-state <view> <part> <parts> <base64>`` (a chunk, in a
`Direct` frame to the joiner) and the group message ``tom-state ok`` (the joiner has the state)."""

STATE_OK = STATE_PREFIX + "ok"
_ENCODER = json.JSONEncoder(separators=(",", ":"))
CHUNK_BYTES = 45_000  # raw bytes a chunk carries: 60,000 characters of base64, well inside a frame

log = logging.getLogger("tom.replicated")


class Codec:
    """How calls and snapshots are written as text: JSON, or pickle (base64) in a closed group."""

    def __init__(self, name: str) -> None:
        if name not in ("json", "pickle"):
            raise ConfigError(f"codec must be json or pickle, got {name!r}")
        self.name = name

    def dumps(self, value: Any) -> bytes | bytearray:
        """``value`` written; JSON piece by piece into one buffer (a snapshot is never also one str)."""
        if self.name == "json":
            out = bytearray()
            for piece in _ENCODER.iterencode(value):
                out += piece.encode()
            return out
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def chunks(self, value: Any, size: int) -> list[bytes]:
        """``value`` written, cut into pieces of ``size`` bytes (the last one shorter): a snapshot is
        never held whole beside its pieces, and the pieces can go one by one."""
        if self.name != "json":
            data = self.dumps(value)
            return [bytes(data[i:i + size]) for i in range(0, max(1, len(data)), size)]
        out: list[bytes] = []
        buf = bytearray()
        for piece in _ENCODER.iterencode(value):
            buf += piece.encode()
            while len(buf) >= size:
                out.append(bytes(buf[:size]))
                del buf[:size]
        if buf or not out:
            out.append(bytes(buf))
        return out

    def loads(self, data: bytes | bytearray) -> Any:
        """``data`` read back. A bytearray is emptied once decoded: a snapshot's bytes are not kept while
        its objects are built."""
        if self.name == "json":
            text = data.decode()
            if isinstance(data, bytearray):
                data.clear()
            return json.loads(text)
        return pickle.loads(data)  # noqa: S301 - a closed group only

    def text(self, value: Any) -> str:
        return self.dumps(value).decode() if self.name == "json" else base64.b64encode(self.dumps(value)).decode()

    def from_text(self, text: str) -> Any:
        return self.loads(text.encode() if self.name == "json" else base64.b64decode(text))

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

    def __init__(self, neighbors: Any, me: str, *, call_timeout: float = 30.0, codec: str = "json",
                 **options: Any) -> None:
        self._codec = Codec(codec)
        if codec == "pickle" and options.get("keys") is None:
            raise ConfigError("codec pickle runs code when it reads: only in a closed group (keys=...)")
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
        self.failed: BaseException | None = None  # a state transfer that failed: this member applies nothing
        self._transfer = StateTransfer(me)  # who waits for the state, who sends it (tom.statetransfer)
        self._chunks: dict[int, bytearray] = {}  # snapshot view -> its chunks so far, in order
        self._parts: dict[int, int] = {}  # snapshot view -> chunks taken

    # -- the member ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the group (the member runs on a thread of its own until `close`)."""
        if self._member is None:
            self._member = GroupThread(self._neighbors, self._me, on_event=self._apply, on_direct=self._on_direct,
                                       **self._options)

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
        if self.failed is not None:
            raise UsageError(f"this member took no state and applies nothing: {self.failed}")
        call_id = f"{self._me}#{next(self._ids)}"
        text = CALL_PREFIX + self._codec.text([call_id, name, list(args), kwargs])
        waiter = self._waiting[call_id] = _Waiter()

        def refused(error: BaseException) -> None:
            waiter.error = error
            waiter.done.set()

        try:
            self._member.post(text, refused)  # (one call in flight per calling thread: it waits below)
            if not waiter.done.wait(self.call_timeout):
                raise TimeoutError(f"{name}: not applied here within {self.call_timeout} s (it may still be)")
        finally:
            self._waiting.pop(call_id, None)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _apply(self, event: GroupEvent) -> None:
        """On the member's thread, in the group's order: hold the event while this member waits for its
        state, else apply it."""
        if self.failed is not None:
            return
        if self._transfer.needs_state:
            self._do(self._transfer.hold(event))
            return
        self._apply_one(event)

    def _apply_one(self, event: GroupEvent) -> None:
        if isinstance(event, ViewChanged):
            with self.lock:
                self.members = event.members
                self.on_view(event)
            for action in self._transfer.at_view(event):  # (a snapshot taken here holds what on_view did)
                self._do(action)
            if self._me in event.members and not self._transfer.needs_state and self.failed is None:
                self.admitted.set()
            return
        if not isinstance(event, Delivered) or not isinstance(event.payload, str):
            return
        if event.payload == STATE_OK:
            self._transfer.took(event.origin)
            return
        if not event.payload.startswith(CALL_PREFIX):
            return
        try:
            call_id, name, args, kwargs = self._codec.from_text(event.payload[len(CALL_PREFIX):])
            method = self._methods[name]
        except Exception:  # noqa: BLE001 - a call this object cannot read is not applied, anywhere
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

    # -- state transfer (the module docstring) ---------------------------------------------------------

    def _do(self, action: SendState | Restore | None) -> None:
        """Carry out what the state transfer decided."""
        if isinstance(action, SendState):
            try:
                with self.lock:
                    taken = {"state": self.snapshot(), "awaiting": self._transfer.awaiting}
                    chunks = self._codec.chunks(taken, CHUNK_BYTES)
            except Exception as e:  # noqa: BLE001 - the joiner hears why, this member goes on
                why = f"{self._me} could not take a snapshot: {type(e).__name__}: {e}"
                log.error("%s; %s will not be admitted with the state", why, action.joiner)
                chunks = self._codec.chunks({"error": why}, CHUNK_BYTES)
            assert self._member is not None
            log.info("sending the state of view %d to %s: %d bytes", action.view, action.joiner,
                     sum(map(len, chunks)))
            self._member.spawn(_send_chunks, action.joiner, action.view, chunks)
        elif isinstance(action, Restore):
            self._restore_state(action)

    def _on_direct(self, src: str, text: str) -> None:
        """A chunk of our state (on the member's thread); the last one restores it."""
        if not text.startswith(STATE_PREFIX):
            return
        try:
            view_s, part_s, parts_s, chunk = text[len(STATE_PREFIX):].split(" ", 3)
            view, part, parts = int(view_s), int(part_s), int(parts_s)
            raw = base64.b64decode(chunk, validate=True)
        except ValueError:
            log.warning("a state chunk from %s that cannot be read: %.80s", src, text)
            return
        # one sender per view, in order on its link: part 0 starts a snapshot, each next one extends it
        if part == 0:
            self._chunks[view], self._parts[view] = bytearray(), 0
        got = self._chunks.get(view)
        if got is None or self._parts.get(view, 0) != part:
            self._chunks.pop(view, None)  # (a snapshot whose start was lost with its sender)
            return
        got += raw
        self._parts[view] = part + 1
        if part + 1 == parts:
            del self._chunks[view], self._parts[view]
            if self.failed is None:
                self._do(self._transfer.snapshot(view, got))

    def _restore_state(self, action: Restore) -> None:
        view, data = action.view, action.data
        size = len(data)  # (the codec empties a bytearray as it reads it)
        try:
            taken = self._codec.loads(data)
            if "error" in taken:
                raise RuntimeError(taken["error"])
            with self.lock:
                self.restore(taken["state"])
            awaiting = dict(taken["awaiting"])
        except Exception as e:  # noqa: BLE001 - one clear line, and this member applies nothing
            self.failed = e
            log.error("%s: the group's state (view %d, %d bytes) did not restore: %s: %s; this member "
                      "applies nothing and leaves the group", self._me, view, size, type(e).__name__, e)
            for waiter in list(self._waiting.values()):
                waiter.error = UsageError(f"this member took no state: {e}")
                waiter.done.set()
            assert self._member is not None
            self._member.stop_soon()
            return
        views = [e for e in self._transfer.held if isinstance(e, ViewChanged) and e.view == view]
        if views:  # the snapshot's view came after ours: its members are the current ones
            with self.lock:
                self.members = views[0].members
        self._transfer.restored(awaiting)
        log.info("%s took the group's state of view %d (%d bytes); applying %d held events", self._me, view,
                 size, len(action.then))
        assert self._member is not None
        self._member.spawn(_say_state_taken)
        self.admitted.set()
        for event in action.then:
            self._apply_one(event)

    def snapshot(self) -> Any:
        """The object's state, as the codec can write it (JSON values by default): what a joiner
        `restore`s. Override it, with `restore`, to let members join a running group."""
        raise NotImplementedError(f"{type(self).__name__} has no snapshot(): members cannot join a running group")

    def restore(self, state: Any) -> None:
        """Take ``state`` (what `snapshot` returned at another member) as this object's state."""
        raise NotImplementedError(f"{type(self).__name__} has no restore()")

    def on_view(self, view: ViewChanged) -> None:
        """Called in the group's order when the membership changes (under ``lock``); override it to
        react the same way at every member."""


_R = TypeVar("_R", bound=Replicated)


async def _send_chunks(group: Group, joiner: str, view: int, chunks: list[bytes]) -> None:
    """A task of the sending member: a snapshot's ``chunks`` to ``joiner``, in order, on the link to it;
    each is let go once it is on its way."""
    parts = len(chunks)
    chunks.reverse()
    try:
        for i in range(parts):
            chunk = base64.b64encode(chunks.pop()).decode()
            await group.send_direct(joiner, f"{STATE_PREFIX}{view} {i} {parts} {chunk}")
    except UsageError as e:
        log.warning("state transfer to %s stopped: %s", joiner, e)


async def _say_state_taken(group: Group) -> None:
    """A task of a joiner that took its state: tell the group, in its order."""
    try:
        await group.send(STATE_OK)
    except UsageError as e:
        log.warning("could not say the state was taken: %s", e)


class ReplCounter(Replicated):
    """A counter: ``inc`` and ``add`` are replicated and return the new value; ``value`` reads it here."""

    def __init__(self, neighbors: Any, me: str, *, initial: int = 0, **options: Any) -> None:
        super().__init__(neighbors, me, **options)
        self.value = initial

    def snapshot(self) -> Any:
        return self.value

    def restore(self, state: Any) -> None:
        self.value = int(state)

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

    def snapshot(self) -> Any:
        return self._data

    def restore(self, state: Any) -> None:
        self._data = dict(state)

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

    def snapshot(self) -> Any:
        return self._owners

    def restore(self, state: Any) -> None:
        self._owners = dict(state)

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
