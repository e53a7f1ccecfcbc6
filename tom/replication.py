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
* state transfer (`tom.statetransfer`): a member admitted without the group's state (a joiner of a
  running group, one back after a partition, a durable member whose catch-up left a gap) holds what it
  delivers and multicasts ``tom-state want``; at that point of the order the least pid among the
  members with the state takes ``snapshot()`` and sends it in chunks on its link (`Direct` frames,
  ``STATE_PREFIX``); the member ``restore()``s it, applies the held events after its want, says
  ``tom-state ok``, and only then is admitted (`wait_admitted`). If the sender leaves or fails first,
  the next member sends a snapshot taken at that view. A snapshot that fails to restore is one error
  line; the member then applies nothing and leaves. Taking a snapshot holds the member's thread;
* a durable object (``data=DIR``): ``DIR/group`` is its member's data folder (every event delivered,
  on the disk before it is applied), ``DIR/snapshot`` its state after one event of that history
  (`tom.durable.snapshot`), taken at a delivery boundary when `SNAPSHOT_MIN_CALLS` say so. Started
  again it restores the snapshot, applies its history after it, then what it catches up from the
  group, and says ``ok`` when admitted: state whole, no transfer (unless its catch-up left a gap);
* a call made with ``tom_id=`` is applied once: its id and first result are kept (`MAX_CALL_IDS`);
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
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import trio

from .durable.history import events
from .durable.log import DataError, read_log
from .durable.snapshot import Key, SnapshotFile, records_after
from .errors import ConfigError, UsageError
from .group_thread import GroupThread
from .library import Delivered, Group, GroupEvent, ViewChanged, event_of
from .peer.durable import event_of_record
from .statetransfer import WANT, Action, Ask, Confirm, Restore, SendState, StateTransfer

__all__ = ["CALL_PREFIX", "STATE_PREFIX", "ReplCounter", "ReplDict", "ReplLockManager", "Replicated", "replicated"]

CALL_PREFIX = "tom-call "
"""What a replicated call's message text starts with (docs/design/wire.md); other messages are not calls."""

STATE_PREFIX = "tom-state "
"""What a state transfer's texts start with: ``tom-state <view> <part> <parts> <base64>`` (a chunk, in a
`Direct` frame to the joiner) and the group message ``tom-state ok`` (the joiner has the state)."""

STATE_OK = STATE_PREFIX + "ok"
_ENCODER = json.JSONEncoder(separators=(",", ":"))
CHUNK_BYTES = 45_000  # raw bytes a chunk carries: 60,000 characters of base64, well inside a frame

SNAPSHOT_MIN_CALLS = 1_000
"""A durable object (``data=``) takes a snapshot once at least this many calls were applied since its
last one, and their texts weigh as much as that snapshot did: the history it replays stays about the
snapshot's size, and writing snapshots costs a bounded amount per call."""

MAX_CALL_IDS = 100_000
"""The calls made with an id (``tom_id=``) whose results an object keeps, to apply each once."""

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
    def call(self: Replicated, *args: Any, tom_id: str | None = None, **kwargs: Any) -> Any:
        return self._call(method.__name__, args, kwargs, tom_id)

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
    `close`). ``data``: a folder that makes the object durable (the module docstring)."""

    def __init__(self, neighbors: Any, me: str, *, call_timeout: float = 30.0, codec: str = "json",
                 data: str | Path | None = None, **options: Any) -> None:
        self._codec = Codec(codec)
        if codec == "pickle" and options.get("keys") is None:
            raise ConfigError("codec pickle runs code when it reads: only in a closed group (keys=...)")
        self._folder = Path(data) if data is not None else None
        if self._folder is not None:
            if type(self).snapshot is Replicated.snapshot or type(self).restore is Replicated.restore:
                raise ConfigError(f"{type(self).__name__}: a durable object (data=) needs snapshot() and restore()")
            options["data"] = self._folder / "group"
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
        self._chunks: dict[str, bytearray] = {}  # snapshot key -> its chunks so far, in order
        self._parts: dict[str, int] = {}  # snapshot key -> chunks taken
        # the calls made with an id (tom_id=): id -> the result of its first application (JSON values)
        self._done: OrderedDict[str, Any] = OrderedDict()
        # durable (data=): the last event applied, whether the state is whole (its snapshot and history,
        # and what it caught up, with no gap), what was applied since the last snapshot, and its size
        self._after: Key | None = None
        self._whole = False
        self._since = (0, 0)  # (calls, bytes of their texts)
        self._snapshot_size = 0
        self._gaps_seen = 0
        self._gate = threading.Lock()  # (the member's thread and the one taking the state back)
        self._early: list[GroupEvent] = []  # delivered while the state is taken back

    # -- the member ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the group (the member runs on a thread of its own until `close`). A durable object takes
        back its state from its folder meanwhile (while its member opens its own folder and founds or
        joins the group); what the member delivers before that is done waits, then comes in order."""
        if self._member is not None:
            return
        if self._folder is None:
            self._member = GroupThread(self._neighbors, self._me, on_event=self._apply, on_direct=self._on_direct,
                                       **self._options)
            return
        payload = SnapshotFile(self._folder).load()  # (read before the member writes to its folder)
        history = events(read_log(self._folder / "group" / "history.log"))[0]
        failed: list[BaseException] = []

        def recover() -> None:
            try:
                self._recover(payload, history)
            except BaseException as e:  # noqa: BLE001 - raised by start, below
                failed.append(e)

        self._recovering = True
        worker = threading.Thread(target=recover, name=f"tom-recover-{self._me}", daemon=True)
        worker.start()
        try:
            self._member = GroupThread(self._neighbors, self._me, on_event=self._apply, on_direct=self._on_direct,
                                       **self._options)
        finally:
            worker.join()
        if failed:
            self._member.close()
            raise failed[0]
        trio.from_thread.run_sync(self._recovered, trio_token=self._member._token)

    def _recovered(self) -> None:
        """On the member's thread: the state is back; what the member delivered meanwhile, in order."""
        with self._gate:
            self._recovering = False
            early, self._early = self._early, []
        for event in early:
            self._apply(event)

    _recovering = False  # (a durable object's state is being taken back: `start`)

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

    # -- a durable object (data=) -------------------------------------------------------------------

    def _recover(self, payload: bytes | None, history: list[bytes]) -> None:
        """Its snapshot (``payload``), then the events of its member's history (``history``: the
        records) after it (the module docstring)."""
        assert self._folder is not None
        store = SnapshotFile(self._folder)
        if payload is not None:
            try:
                taken = self._codec.loads(bytearray(payload))
                with self.lock:
                    self.restore(taken["state"])
                self._after = tuple(taken["after"]) if taken["after"] is not None else None  # type: ignore[assignment]
                self._transfer.restored(dict(taken["awaiting"]), list(taken["wanted"]))
                self._transfer.members = self.members = tuple(taken["members"])
                self._done = OrderedDict(taken["done"])
            except DataError:
                raise
            except Exception as e:  # noqa: BLE001 - one line naming the file
                raise DataError(f"{store.path}: the snapshot does not restore: {type(e).__name__}: {e}") from None
            self._snapshot_size = len(payload)
        records, whole = records_after(history, self._after)
        for rec in records:
            if rec["kind"] == "gap":
                continue
            self._apply_one(event_of(event_of_record(rec, int(rec["index"]), ""), True), acting=False)
        # (without a snapshot, its history must start with the group: a founding, view 1)
        self._whole = whole and (payload is not None or bool(records) and records[0]["kind"] == "view"
                                 and records[0]["view"] == 1)
        if not whole:
            log.warning("%s: the history of %s does not hold every event after its snapshot: it takes the "
                        "group's state once admitted", self._me, self._folder)
        log.info("%s: state taken back from %s (%s, then %d event(s) of its history)", self._me, self._folder,
                 "a snapshot" if payload is not None else "no snapshot", len(records))

    def _has_state(self) -> bool:
        """Whether this member holds the group's state as of the view that admits it now."""
        if self._folder is None or self._member is None:
            return False
        gaps = self._member.group_gaps()
        if gaps > self._gaps_seen:  # (its catch-up lost a stretch: a gap record)
            self._gaps_seen, self._whole = gaps, False
        return self._whole

    def _maybe_snapshot(self) -> None:
        """Take a snapshot if `SNAPSHOT_MIN_CALLS` say so (at a delivery boundary: an event was applied)."""
        calls, size = self._since
        if self._folder is None or calls < SNAPSHOT_MIN_CALLS or size < self._snapshot_size:
            return
        self._save_snapshot()

    def _save_snapshot(self) -> None:
        """Take a snapshot here (a delivery boundary); a task writes it (off the member's thread: its
        links go on) and then lets the history before it go (`tom.library.Group.hold_history`)."""
        assert self._folder is not None
        if self._saving:
            return
        with self.lock:
            taken = {"after": self._after, "state": self.snapshot(), "awaiting": self._transfer.awaiting,
                     "wanted": sorted(self._transfer.wanted), "members": list(self.members),
                     "done": list(self._done.items())}
            payload = self._codec.dumps(taken)
        self._since, self._saving = (0, 0), True
        assert self._member is not None
        self._member.spawn(_write_snapshot, self, SnapshotFile(self._folder), payload, self._after)

    _saving = False  # (a snapshot is being written)

    # -- calls ----------------------------------------------------------------------------------------

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], tom_id: str | None = None) -> Any:
        if self._member is None:
            raise RuntimeError(f"{type(self).__name__} is not started: use 'with obj:' or obj.start()")
        if self.failed is not None:
            raise UsageError(f"this member took no state and applies nothing: {self.failed}")
        if tom_id is not None and not isinstance(tom_id, str):
            raise UsageError("tom_id is a str")
        call_id = f"{self._me}#{next(self._ids)}" if tom_id is None else f"id:{tom_id}"
        text = CALL_PREFIX + self._codec.text([call_id, name, list(args), kwargs])
        waiter = _Waiter()
        self._waiting.setdefault(call_id, waiter)
        waiter = self._waiting[call_id]

        def refused(error: BaseException) -> None:
            waiter.error = error
            waiter.done.set()

        try:
            with self.lock:
                if call_id in self._done:  # (applied once already: its result again)
                    return self._done[call_id]
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
        if self._recovering:
            with self._gate:
                if self._recovering:  # (taken in order once the state is back: `_recovered`)
                    self._early.append(event)
                    return
        if self.failed is not None:
            return
        if self._transfer.needs_state:
            self._do(self._transfer.hold(event))
            return
        self._apply_one(event, acting=not event.caught_up)
        self._maybe_snapshot()

    def _apply_one(self, event: GroupEvent, acting: bool = True) -> None:
        """Apply one event; ``acting`` false for one replayed from the folder or caught up (what the
        group decided of state transfers then is noted, not done again)."""
        if isinstance(event, ViewChanged):
            self._after = (event.view, 0, "")
            with self.lock:
                self.members = event.members
                self.on_view(event)
            admitting = acting and self._me in event.joined
            for action in self._transfer.at_view(event, self._has_state() if admitting else True, acting):
                self._do(action)  # (a snapshot taken here holds what on_view did)
            if admitting and not self._transfer.needs_state:
                self._whole = self._folder is not None
            if self._me in event.members and not self._transfer.needs_state and self.failed is None and acting:
                self.admitted.set()
            return
        if not isinstance(event, Delivered) or not isinstance(event.payload, str):
            return
        self._after = (event.view, event.clock, event.origin)
        if event.payload == STATE_OK:
            self._transfer.took(event.origin)
            return
        if event.payload == WANT:
            for action in self._transfer.want(event.origin, event.clock, acting):
                self._do(action)
            return
        if not event.payload.startswith(CALL_PREFIX):
            return
        self._since = (self._since[0] + 1, self._since[1] + len(event.payload))
        try:
            call_id, name, args, kwargs = self._codec.from_text(event.payload[len(CALL_PREFIX):])
            method = self._methods[name]
        except Exception:  # noqa: BLE001 - a call this object cannot read is not applied, anywhere
            log.warning("a call from %s that this object does not know: %.80s", event.origin, event.payload)
            return
        waiter = self._waiting.get(call_id) if event.origin == self._me or call_id.startswith("id:") else None
        if call_id.startswith("id:") and call_id in self._done:  # (a call made again with its id: once)
            if waiter is not None:
                waiter.result = self._done[call_id]
                waiter.done.set()
            return
        try:
            with self.lock:
                result = method(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the caller's, and every member's alike
            result = None
            if waiter is not None:
                waiter.error = e
        else:
            if waiter is not None:
                waiter.result = result
        if call_id.startswith("id:"):
            self._done[call_id] = result if _is_json(result) else None
            while len(self._done) > MAX_CALL_IDS:
                self._done.popitem(last=False)
        if waiter is not None:
            waiter.done.set()

    # -- state transfer (the module docstring) ---------------------------------------------------------

    def _do(self, action: Action | None) -> None:
        """Carry out what the state transfer decided."""
        assert self._member is not None or action is None
        if isinstance(action, SendState):
            try:
                with self.lock:
                    taken = {"state": self.snapshot(), "awaiting": self._transfer.awaiting,
                             "wanted": sorted(self._transfer.wanted), "done": list(self._done.items())}
                    chunks = self._codec.chunks(taken, CHUNK_BYTES)
            except Exception as e:  # noqa: BLE001 - the joiner hears why, this member goes on
                why = f"{self._me} could not take a snapshot: {type(e).__name__}: {e}"
                log.error("%s; %s will not be admitted with the state", why, action.joiner)
                chunks = self._codec.chunks({"error": why}, CHUNK_BYTES)
            assert self._member is not None
            log.info("sending the state (at %s) to %s: %d bytes", action.key, action.joiner, sum(map(len, chunks)))
            self._member.spawn(_send_chunks, action.joiner, action.key, chunks)
        elif isinstance(action, Restore):
            self._restore_state(action)
        elif isinstance(action, Ask):
            log.info("%s: admitted without the group's state: asking for it", self._me)
            self._member.spawn(_say, WANT)  # type: ignore[union-attr]
        elif isinstance(action, Confirm):
            log.info("%s: admitted again with its state whole (its folder, and what it caught up)", self._me)
            self._member.spawn(_say, STATE_OK)  # type: ignore[union-attr]

    def _on_direct(self, src: str, text: str) -> None:
        """A chunk of our state (on the member's thread); the last one restores it."""
        if not text.startswith(STATE_PREFIX):
            return
        try:
            key, part_s, parts_s, chunk = text[len(STATE_PREFIX):].split(" ", 3)
            part, parts = int(part_s), int(parts_s)
            raw = base64.b64decode(chunk, validate=True)
        except ValueError:
            log.warning("a state chunk from %s that cannot be read: %.80s", src, text)
            return
        # one sender per point of the order, in order on its link: part 0 starts a snapshot, each next one extends it
        if part == 0:
            self._chunks[key], self._parts[key] = bytearray(), 0
        got = self._chunks.get(key)
        if got is None or self._parts.get(key, 0) != part:
            self._chunks.pop(key, None)  # (a snapshot whose start was lost with its sender)
            return
        got += raw
        self._parts[key] = part + 1
        if part + 1 == parts:
            del self._chunks[key], self._parts[key]
            if self.failed is None:
                self._do(self._transfer.snapshot(key, got))

    def _restore_state(self, action: Restore) -> None:
        key, data = action.key, action.data
        size = len(data)  # (the codec empties a bytearray as it reads it)
        try:
            taken = self._codec.loads(data)
            if "error" in taken:
                raise RuntimeError(taken["error"])
            with self.lock:
                self.restore(taken["state"])
            awaiting, wanted = dict(taken["awaiting"]), list(taken.get("wanted", ()))
            done = OrderedDict(taken.get("done", ()))
        except Exception as e:  # noqa: BLE001 - one clear line, and this member applies nothing
            self.failed = e
            log.error("%s: the group's state (at %s, %d bytes) did not restore: %s: %s; this member "
                      "applies nothing and leaves the group", self._me, key, size, type(e).__name__, e)
            for waiter in list(self._waiting.values()):
                waiter.error = UsageError(f"this member took no state: {e}")
                waiter.done.set()
            assert self._member is not None
            self._member.stop_soon()
            return
        held = self._transfer.held
        point = len(held) - len(action.then)
        views = [e for e in held[:point] if isinstance(e, ViewChanged)]
        if views:  # (the snapshot's point came after a view change: its members are the current ones)
            with self.lock:
                self.members = views[-1].members
        for event in held[:point]:
            self._after = key_of_event(event)
        self._transfer.restored(awaiting, wanted)
        self._done = done
        log.info("%s took the group's state at %s (%d bytes); applying %d held events", self._me, key,
                 size, len(action.then))
        assert self._member is not None
        self._member.spawn(_say, STATE_OK)
        self.admitted.set()
        self._whole = self._folder is not None
        if self._folder is not None:  # (its own snapshot: a restart needs no transfer)
            self._save_snapshot()
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


def key_of_event(event: GroupEvent) -> Key:
    """The key of an event (`tom.durable.snapshot.Key`)."""
    if isinstance(event, ViewChanged):
        return (event.view, 0, "")
    return (event.view, event.clock, event.origin)


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_R = TypeVar("_R", bound=Replicated)


async def _send_chunks(group: Group, joiner: str, key: str, chunks: list[bytes]) -> None:
    """A task of the sending member: a snapshot's ``chunks`` to ``joiner``, in order, on the link to it;
    each is let go once it is on its way."""
    parts = len(chunks)
    chunks.reverse()
    try:
        for i in range(parts):
            chunk = base64.b64encode(chunks.pop()).decode()
            await group.send_direct(joiner, f"{STATE_PREFIX}{key} {i} {parts} {chunk}")
    except UsageError as e:
        log.warning("state transfer to %s stopped: %s", joiner, e)


async def _write_snapshot(group: Group, obj: Replicated, store: SnapshotFile, payload: bytes | bytearray,
                          after: Key | None) -> None:
    """A task of a durable object's member: write its snapshot on a worker thread, then let the history
    before it go. A snapshot that cannot be written is one line; the history is kept whole."""
    try:
        obj._snapshot_size = await trio.to_thread.run_sync(store.save, payload)
    except DataError as e:
        log.error("%s; the history before it is kept", e)
    else:
        group.hold_history(after)
    finally:
        obj._saving = False


async def _say(group: Group, text: str) -> None:
    """A task of a member admitted: tell the group, in its order, that it has the state or wants it."""
    try:
        await group.send(text)
    except UsageError as e:
        log.warning("could not say %r to the group: %s", text, e)


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
