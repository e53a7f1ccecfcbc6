"""A durable peer's data folder at work (``tom peer --data DIR``): the shell around `tom.durable`.

The folder holds, besides its lock and identity (`tom.durable.log.DataDir`):

* ``history.log``: every event this peer wrote to its output, in order, each record the output line
  itself (caught-up and gap records included). It is what this peer serves to a member catching up
  (`tom.durable.catchup.plan`), and what tells a restarted peer where it stopped;
* ``accepted.log``: every text this peer accepted (the terminal's ``sending:``, the API's 2xx, a line
  read), written before the text reaches the core. Once the peer is admitted again and caught up, the
  accepted texts that the group's order does not hold yet are sent again, before anything new: a peer
  numbers its own messages by the order it accepted them, and the group delivers an origin's messages
  in that order (FIFO), so the ones delivered are always the first ones accepted. A record is
  ``{"text": ...}``, with ``"key"`` for a text posted under an idempotency key (the last `MAX_KEYS`
  keys are known again after a restart), and ``"input"`` and ``"inode"`` for a line of ``--input``:
  where that file's reading goes on once the text is accepted (a restart reads on from the last).

Invariants: an event reaches the output file only after it is in ``history.log``; a text is
accepted (``on_sent`` told) only once it is in ``accepted.log``; while catching up nothing of the new
view is written, so the file reads as the group's order, start to end, across restarts.
"""

from __future__ import annotations

import json
import json.encoder
import logging
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..codec.frames import CatchUp, History, Progress
from ..core import Delivery, ViewDelivery
from ..core.records import Sends
from ..durable.catchup import BEFORE_ANY, Caught, HistoryIndex, Position, Recovery, answer, end_of_view, plan
from ..codec.pid import pid_key
from ..durable.history import events, read_events, records, starts_record
from ..durable.log import MAGIC, DataDir, DataError, read_log
from ..durable.progress import Progress as Peers
from ..durable.progress import cut_at
from ..errors import OutputError
from .idempotency import MAX_KEYS, IdempotencyKeys
from .lines import tally
from .output import NoOutput, OutputFile
from .pending import Taken, as_taken, check_pending, pending_lines, pending_record

log = logging.getLogger("tom.peer.durable")
encode_basestring_ascii = json.encoder.encode_basestring_ascii  # (what json.dumps(str) calls: C)


DEFAULT_RETAIN = 1_000_000
"""Delivered events a data folder keeps by default (`Durable.clean`): a peer away for longer catches up
with a gap record."""

PENDING_KEPT = 200_000
"""Taken messages pending.log holds before it is written again with those still undelivered."""

PENDING_BYTES = 16 * 2 ** 20
"""... or bytes it holds (and twice what the last rewrite kept): a restart reads it whole."""

ACCEPTED_KEPT = 100_000
"""Accepted texts the group delivered that a clean-up keeps (the idempotency keys' bound)."""

DEFAULT_RETAIN_AGE = 7 * 24 * 3600.0
"""And for how long, in seconds, by default."""

MARK_EVERY = 1_000
"""Records between two places a clean-up may cut (`Durable._mark`), at most."""

REPORT_EVERY = 1.0
"""Seconds between two reports of this peer's durable position to the members (`Progress`)."""

CLEAN_AT_LEAST = 10_000
"""A clean-up by progress waits until it drops this many records, and four times as many as it keeps
(so its rewrite of the kept records costs at most a quarter of a copy per record dropped)."""


def _fields(payload: bytes) -> dict:
    """A history record's JSON (an output line, or the base record a clean-up put first)."""
    rec = json.loads(payload)
    if not isinstance(rec, dict) or "kind" not in rec:
        raise ValueError("no kind")
    return rec


_MESSAGE_HEAD = re.compile(rb'\{"v":2,"kind":"message","index":(\d+),"peer":"[^"\\]*","clock":(\d+),"pid":"([^"\\]*)","text":"')
_DELIVERED_AT = re.compile(rb'"delivered_at":(-?[0-9.eE+-]+)[,}]')
_VIEW = re.compile(rb'"view":(\d+)[,}]')


def message_fields(payload: bytes) -> dict | None:
    """A message record's fields but its text (``index``, ``clock``, ``pid``, ``delivered_at``, ``view``),
    read without decoding the text: its head is fixed, and ``"delivered_at":`` and ``"view":`` follow
    the text (a quote inside a JSON string is escaped, so neither can occur in it: the last of each is
    the field). None if the record is not of that form (then `_fields` reads it whole)."""
    head = _MESSAGE_HEAD.match(payload)
    if head is None:
        return None
    tail = head.end()
    at = payload.rfind(b'"delivered_at":')
    view = payload.rfind(b'"view":')
    if at < tail or view < tail:
        return None
    a, v = _DELIVERED_AT.match(payload, at), _VIEW.match(payload, view)
    if a is None or v is None:
        return None
    return {"kind": "message", "index": int(head[1]), "clock": int(head[2]), "pid": head[3].decode(),
            "delivered_at": float(a[1]), "view": int(v[1])}


def not_in_order(accepted: Sequence[str], base: int, own: int) -> list[str]:
    """The accepted texts the group's order does not hold yet — ``accepted`` holds the texts from
    number ``base`` on, ``own`` is the number of this peer's own messages in its history: the de-dup
    of a restarted peer, which sends again only these. An origin's messages are delivered in the order
    it sent them, and it sends them in the order it accepted them, so the delivered ones are the first
    ``own`` accepted (a text sent again under a new clock would be delivered twice)."""
    return list(accepted[own - base:])


def event_of_record(rec: dict, index: int, order: str) -> Delivery | ViewDelivery:
    """A caught-up output record as the delivery it stands for (``index``: its place in this peer's
    file), so the program, the terminal and the dashboard hear of it as of any other."""
    if rec["kind"] == "view":
        return ViewDelivery(index, int(rec.get("clock", 0)), str(rec.get("pid", "")), int(rec["view"]),
                            tuple(rec.get("members", ())), tuple(rec.get("joined", ())), tuple(rec.get("left", ())),
                            tuple(rec.get("removed", ())), str(rec.get("order", order)))
    sent_at = rec.get("sent_at")
    return Delivery(index, int(rec["clock"]), str(rec["pid"]), str(rec["text"]),
                    float(sent_at) if sent_at is not None else None, int(rec["view"]), rec.get("seq"), rec.get("vc"))


class Durable:
    """One peer's data folder, open (locked) until `close`. ``patience``: how long a catch-up waits for a
    silent member before it asks the next; ``keys_bound``: how many idempotency keys `keys` holds."""

    def __init__(self, path: Path, me: str, fsync: str = "batch", patience: float = 10.0,
                 retain: int = DEFAULT_RETAIN, retain_age: float = DEFAULT_RETAIN_AGE, keys_bound: int = MAX_KEYS,
                 order: str = "lamport", peers: Iterable[str] = ()) -> None:
        self.me, self.retain, self.retain_age = me, retain, retain_age
        self.peers = Peers(me, peers)  # how far each peer's history goes (clean-up by progress)
        self.gaps: list[int] = []  # the output indexes of the gap records written since this process started
        # the caught-up events of the step under way (their ids), for the program's events (`tom.library`)
        self.caught_up_now: set[int] = set()
        # a program's hold on the clean-up (a durable replicated object): the records after the
        # message (view, clock, pid), or view record (view, 0, ""), it last took a snapshot at stay
        self.hold: tuple[int, int, str] | None = None
        self.members: tuple[str, ...] = ()  # the members of the last view delivered here
        self.durable_last: Position | None = None  # the history's last position on the disk (synced)
        self._reported: tuple[float, Position | None, tuple[str, ...]] = (float("-inf"), None, ())
        self.dir = DataDir(path, me)
        try:
            self.history = self.dir.log("history.log", fsync)
            self.accepted_log = self.dir.log("accepted.log", fsync)
            self.pending_log = self.dir.log("pending.log", fsync)
        except DataError:
            self.dir.close()
            raise
        self.said: list[str] = [r.torn for r in (self.history.read, self.accepted_log.read, self.pending_log.read)
                                if r.torn]
        history_events, offsets = events(self.history.read)
        self.offsets = array("q", offsets)
        self.history.read.records.clear()
        self.index = HistoryIndex()
        indexes: list[int] = []
        self.max_clock = 0  # the highest clock in the history: a restarted peer's clock goes on from it
        self.accepted: list[str] = []  # the texts accepted, from number ``accepted_base`` on (not all delivered)
        self.accepted_base = 0
        self.file_base = 0  # the number of the first text accepted.log still holds (`_clean_accepted`)
        self.keys = IdempotencyKeys(keys_bound)  # the texts accepted under an idempotency key
        self.input_at: tuple[int, int] | None = None  # --input: (inode, offset) past the last line accepted
        self.base_own = 0  # this peer's own messages a clean-up dropped (the base record's)
        self.last_key = (0, 0, "")  # the last message in the history: (view, clock, pid)
        last_view_keys: set[tuple[int, int, str]] = set()
        # where a clean-up may cut: (a record, when it was written, this peer's own messages before it),
        # one a minute, or every hundredth of --retain records (`_mark`)
        self.written_ats: list[tuple[int, float, int]] = []
        try:
            for k, payload in enumerate(history_events):
                rec = message_fields(payload) or _fields(payload)  # (a message's text is not read here)
                kind = rec["kind"]
                if starts_record(offsets, k):  # (a clean-up cuts where a record starts)
                    self._mark(float(rec.get("delivered_at", 0.0)))
                if kind == "base":
                    self.base_own, self.history_has_base = int(rec["own"]), True
                    self.index.base(self.base_own, int(rec["view"]), int(rec["skipped"]))
                    self.max_clock = max(self.max_clock, int(rec.get("clock", 0)))
                    indexes.append(0)
                    continue
                self.index.add(kind, int(rec.get("view", 0)), kind == "message" and rec.get("pid") == me)
                if kind == "message":
                    self.last_key = (int(rec["view"]), int(rec["clock"]), str(rec["pid"]))
                    last_view_keys.add(self.last_key)
                elif kind == "view":
                    last_view_keys.clear()
                indexes.append(int(rec["index"]))
                self.max_clock = max(self.max_clock, int(rec.get("clock", 0)))
            for payload in self.accepted_log.read.records:
                rec = json.loads(payload)
                if rec.get("kind") == "base":  # (a clean-up: how many were dropped before the rest)
                    self.accepted_base = self.file_base = int(rec["dropped"])
                    if rec.get("input") is not None:
                        self.input_at = (int(rec["inode"]), int(rec["input"]))
                    continue
                text = rec["text"]
                if not isinstance(text, str):
                    raise TypeError("a text that is not a string")
                self.accepted.append(text)
                if "key" in rec:
                    self.keys.add(str(rec["key"]), text)
                if "input" in rec:
                    self.input_at = (int(rec["inode"]), int(rec["input"]))
        except (ValueError, KeyError, TypeError) as e:
            self.close()
            raise DataError(f"{path}: a record of its logs is not TOM's ({e})") from None
        self._indexes = indexes  # (until `reconcile`)
        self._events = history_events  # (until `reconcile`)
        try:  # (each record a step's taken messages: `persist`; read again when needed, `taken_not_delivered`)
            self.pending_records = sum(check_pending(payload) for payload in self.pending_log.read.records)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            self.close()
            raise DataError(f"{path}: a record of pending.log is not TOM's ({e})") from None
        self.pending_log.read.records.clear()
        self.order = order
        self.recovery = Recovery(me, self.index.last, patience, None if order == "lamport" else set(last_view_keys))
        # texts accepted and not known delivered: sent once admitted and caught up (None: done)
        self.unsent: list[str] | None = None
        self.waiting: list[tuple[str, CatchUp]] = []  # asks to answer once their view is delivered here
        # the founder of a group founded again: how it ends the last view, written once the members have it
        self.decided: list[tuple[int, int, str, str, float | None]] = []
        self.last_index = 0  # the last index written to the output file
        self.started = False  # admitted to a view since this process started
        self.restarted = self.index.last is not None  # this folder has a past
        self.durable_last = self.index.last
        if self.index.last is not None:
            self.said.append(f"data folder {path}: {self.index.count} events delivered before, the last after "
                             f"message {self.index.last[1]} of view {self.index.last[0]}; "
                             f"{self.accepted_base + len(self.accepted) - self.index.own} accepted text(s) not known delivered")

    @property
    def resume(self) -> tuple[int, str]:
        """Where the history ends, for the JOIN: its last view and that view's group ((0, ""): none)."""
        group = self.dir.identity.get("group", "")
        return (self.index.last[0], group) if self.index.last is not None and group else (0, "")

    def reconcile(self, output: OutputFile | NoOutput) -> None:
        """Write to the output file the records the history holds past its end: a process killed between
        the two writes (history first) left them out. Then the history alone is kept as an index."""
        records, indexes = self._events, self._indexes
        missing = [k for k, at in enumerate(indexes) if at > output.offset]
        if isinstance(output, NoOutput):  # (no file: the history alone)
            output.offset = indexes[-1] if indexes else 0
        elif missing:
            output.append_lines([records[k].decode() + "\n" for k in missing])
            output.offset = indexes[-1]
            self.said.append(f"output file: {len(missing)} record(s) the data folder holds and the file did not "
                             "(the peer was killed between the two writes) written again")
        self.last_index = output.offset
        self._events, self._indexes = [], []

    # -- accepting ---------------------------------------------------------------------------------

    def accept(self, texts: Sequence[str], keys: Sequence[str | None] | None = None,
               inputs: Sequence[tuple[int, int]] | None = None) -> list[str]:
        """Make ``texts`` durable, each with its idempotency key (``keys``) or, for a line of --input,
        where that file's reading goes on (``inputs``: inode, offset); return those the core takes now.
        Until this peer is admitted and caught up (`take_unsent`) they wait: they go after the texts
        accepted before a restart."""
        if keys is None and inputs is None:  # (the common case: as json.dumps({"text": t}) writes it, by hand)
            payloads = [b'{"text":' + encode_basestring_ascii(t).encode() + b"}" for t in texts]
        else:
            payloads = []
            for k, t in enumerate(texts):
                rec: dict[str, object] = {"text": t}
                if keys is not None and keys[k] is not None:
                    rec["key"] = keys[k]
                if inputs is not None:
                    rec["input"], rec["inode"] = inputs[k][1], inputs[k][0]
                payloads.append(json.dumps(rec, ensure_ascii=False).encode())
        try:
            self.accepted_log.append(payloads)
        except DataError as e:
            raise OutputError(str(e)) from None
        self.accepted.extend(texts)
        if keys is not None:
            for t, key in zip(texts, keys):
                if key is not None:
                    self.keys.add(key, t)
        if inputs:
            self.input_at = inputs[-1]
        own = self.index.own
        if own - self.accepted_base > 4096 and self.unsent is not None:  # (delivered: memory keeps none of them)
            del self.accepted[:own - self.accepted_base]
            self.accepted_base = own
        if self.accepted_base + len(self.accepted) - self.file_base > 2 * ACCEPTED_KEPT \
                and own - self.file_base > ACCEPTED_KEPT:
            self._clean_accepted()
        return list(texts) if self.unsent is not None else []

    def _clean_accepted(self) -> None:
        """Drop the accepted texts the group delivered but the last `ACCEPTED_KEPT` (their keys are the
        last the map remembers): the log's first record says how many went, and where --input goes on."""
        drop = self.index.own - self.file_base - ACCEPTED_KEPT
        records = [r for r in read_log(self.accepted_log.path).records if b'"kind":"base"' not in r[:40]]
        base: dict[str, object] = {"kind": "base", "dropped": self.file_base + drop}
        if self.input_at is not None:
            base["inode"], base["input"] = self.input_at
        try:
            self.accepted_log.rewrite([json.dumps(base, separators=(",", ":")).encode(), *records[drop:]])
        except DataError as e:
            raise OutputError(str(e)) from None
        self.file_base += drop

    @property
    def held(self) -> int:
        """Texts accepted that wait in this folder for the peer to be admitted and caught up (the core
        has not taken them yet)."""
        return max(0, self.accepted_base + len(self.accepted) - self.index.own) if self.unsent is None else 0

    def take_unsent(self) -> list[str]:
        """Once admitted and caught up: the accepted texts the group's order does not hold yet (once)."""
        if self.unsent is not None or not self.started or self.recovery.catching_up:
            return []
        self.unsent = []
        texts = not_in_order(self.accepted, self.accepted_base, self.index.own)
        if texts and self.restarted:
            log.info("sending %d accepted text(s) the group has not delivered", len(texts))
        return texts

    def persist(self, taken: Sequence[tuple[int, int, str, str, float | None]]) -> None:
        """The messages the core took in a step (`Ready.persist`): on the disk before the step's frames,
        which acknowledge them, go out (so a message any member delivered is on the disk of every
        member of its view)."""
        if not taken:
            return
        try:
            self.pending_log.append([pending_record(taken)])
            self.pending_records += len(taken)
            size = self.pending_log.size
            if self.pending_records > PENDING_KEPT or size > max(PENDING_BYTES, 2 * self.pending_kept):
                # (mostly delivered by now: written again, what is not)
                still = list(self.taken_not_delivered(self.index.last[0] if self.index.last else 0).values())
                self.pending_log.rewrite([pending_record(still)] if still else [])
                self.pending_records, self.pending_kept = len(still), self.pending_log.size
        except DataError as e:
            raise OutputError(str(e)) from None

    def taken_not_delivered(self, view: int) -> dict[tuple[int, int, str], Taken]:
        """The messages of ``view`` and later views this peer took (pending.log) and its history does not
        hold: what a group founded again may still owe (`_extension`). Read from the disk: needed rarely, and so the
        busy path keeps no map of them."""
        found: dict[tuple[int, int, str], Taken] = {}
        size = self.pending_log.size
        # the Lamport order delivers a view's messages in (clock, pid) order: those of the last view up
        # to its last delivered one are in the history (or never will be), and no history is read
        lamport = self.order == "lamport"
        last_view, last_clock, last_pid = self.last_key
        after = (last_clock, pid_key(last_pid)) if last_view == view else BEFORE_ANY
        for payload in self.pending_log.read_records(len(MAGIC), size):
            for line in pending_lines(payload):
                v, c, p = line[:3]
                if v < view or (lamport and v == view and (c, pid_key(p)) <= after):
                    continue
                found[(v, c, p)] = as_taken(*line)
        span = self.index.views.get(view)
        if found and span is not None and not lamport:
            for r in read_events(self.history, self.offsets, span.first, len(self.offsets)):
                if b'"kind":"message"' in r:
                    rec = json.loads(r)
                    found.pop((int(rec["view"]), int(rec["clock"]), str(rec["pid"])), None)
        return found

    def _delivered_now(self, kind: str, view: int, clock: int, pid: str) -> None:
        """A record written: the last message delivered here moves on."""
        if kind == "message":
            self.last_key = (view, clock, pid)

    BATCH = 0.1
    """``--fsync batch``: at most this long, in seconds, between two syncs of what was written."""

    def sync(self, now: float) -> None:
        """End of a step: under ``--fsync batch``, what was written since the last sync is synced if
        that was `BATCH` seconds ago or more, on a worker thread while this one goes on (a group
        commit: a crash of the process loses nothing, written is enough for that; a power cut loses
        at most that long and the sync under way); a no-op under ``always``, which synced each write,
        and ``never``. A sync that failed is raised by the next call."""
        if self.history.fsync != "batch" or now - self._synced < self.BATCH:
            return
        running = self._syncing
        if running is not None:
            if not running.done():
                return  # (the next step looks again)
            self._syncing = None
            try:
                running.result()
            except DataError as e:
                raise OutputError(str(e)) from None
        self._synced = now
        if self._syncer is None:
            self._syncer = ThreadPoolExecutor(1, thread_name_prefix="tom-fsync")
        # (what is written now is on the disk once the sync returns)
        self._syncing = self._syncer.submit(self._sync_all, self.index.last)

    def _sync_all(self, written: Position | None) -> None:
        """On the worker thread: the three logs, the texts accepted first (`RecordLog.sync`); then the
        history is durable up to ``written``."""
        self.accepted_log.sync()
        self.pending_log.sync()
        self.history.sync()
        self.durable_last = written

    pending_kept = 0  # the bytes of pending.log after its last rewrite (`persist`)
    report_soon = 0  # a view whose record was written: this peer reports it at once, once on the disk (`_report`)
    _synced = float("-inf")
    _syncer: ThreadPoolExecutor | None = None
    _syncing: Future | None = None

    @property
    def on_disk(self) -> Position | None:
        """The last position of the history that a power cut keeps (under ``--fsync never``: that a
        crash of the process keeps)."""
        return self.durable_last if self.history.fsync == "batch" else self.index.last

    def rejoining(self) -> None:
        """The core starts again as a joiner (cut off, or founding the group again): what it held is
        forgotten (`Held.forget`), and the texts accepted and not delivered go out again once this peer
        is admitted and caught up."""
        self.unsent, self.started = None, False

    # -- delivering --------------------------------------------------------------------------------

    def deliver(self, deliveries: Sequence[Delivery | ViewDelivery], output: OutputFile | NoOutput,
                at: float, now: float, group: str = "") -> tuple[list[Delivery | ViewDelivery], Sends]:
        """Write what may be written now (history first, then the output file); hold the rest while
        catching up. Returns what was written (to show) and what to send. ``group``: the group of the
        view installed now (recorded in the folder when this peer is admitted to it)."""
        sends: Sends = []
        written: list[Delivery | ViewDelivery] = []
        self.written_at = at
        if self.recovery.upto is None:
            counted = tally(deliveries, self.me)
            if not counted[0]:  # (the busy path: messages, written at once)
                self._write(list(deliveries), output, at, written, counted)
                return written, self._answer_waiting()
        batch: list[Delivery | ViewDelivery] = []
        for d in deliveries:
            if type(d) is ViewDelivery:
                self.members = d.members
                for p in d.joined:
                    self.peers.admitted(p, d.view)
                if self.me in d.joined:
                    self.started = True
                    if group and self.dir.identity.get("group") != group:
                        if self.dir.identity.get("group"):
                            log.warning("the group of this data folder (%s) is gone: this peer is in group %s now",
                                        self.dir.identity.get("group"), group)
                        self.dir.set_group(group)
                step = self.recovery.delivered("view", d.view, d.members, d.joined, d, now, d.pid)
                asking = self.recovery.asking
                if asking is not None and (asking in d.removed or asking in d.left) and step is not None:
                    self._write(batch, output, at, written)
                    batch = []
                    self._apply(step, output, at, sends, written)
                    step = self.recovery.gone(asking, now) or Caught()
            elif self.recovery.upto is None:  # (not catching up: a message is written at once)
                batch.append(d)
                continue
            else:
                step = self.recovery.delivered("message", d.view, (), (), d, now)
            if step is None:
                batch.append(d)
            else:
                self._write(batch, output, at, written)
                batch = []
                self._apply(step, output, at, sends, written)
        self._write(batch, output, at, written)
        sends += self._answer_waiting()
        return written, sends

    def _write(self, deliveries: list[Delivery | ViewDelivery], output: OutputFile | NoOutput, at: float,
               written: list[Delivery | ViewDelivery], counted: tuple[bool, int, int] | None = None) -> None:
        """Write ``deliveries`` (``counted``: their `tally`, if the caller made it)."""
        if not deliveries:
            return
        lines = output.render(deliveries, at)
        me, known = self.me, self.recovery.known
        first, last = deliveries[0], deliveries[-1]
        if known is None and first.view == last.view:
            views, mine, top = counted or tally(deliveries, me)
            if not views:  # (the busy path: a view's messages)
                self._write_messages(deliveries, lines, output, written, mine, top)
                return
        kinds: list = []  # ("view", view, 0) per view record, ("messages", view, n, own) per run of messages
        top = self.max_clock
        run_view, run_n, run_own = -1, 0, 0
        # where a clean-up may cut inside this write too (`_mark`): (record number, own messages before it)
        every, base, own = self._mark_every, self.index.count, self.index.own
        inner: list[tuple[int, int]] = []
        next_mark = self._next_mark(base)
        for i, d in enumerate(deliveries):
            if base + i >= next_mark and i:
                inner.append((base + i, own))
                next_mark = base + i + every
            if d.clock > top:
                top = d.clock
            if type(d) is ViewDelivery:
                if run_n:
                    kinds.append(("messages", run_view, run_n, run_own))
                    run_view, run_n, run_own = -1, 0, 0
                rec = json.loads(lines[i])
                rec["durable"] = True
                lines[i] = json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n"
                kinds.append(("view", d.view, 0))
                self.report_soon = max(self.report_soon, d.view)
                if known is not None:
                    known.clear()
                continue
            if d.view != run_view:
                if run_n:
                    kinds.append(("messages", run_view, run_n, run_own))
                run_view, run_n, run_own = d.view, 0, 0
            run_n += 1
            if d.pid == me:
                run_own += 1
                own += 1
            if known is not None:
                known.add((d.view, d.clock, d.pid))
        if run_n:
            kinds.append(("messages", run_view, run_n, run_own))
        self.max_clock = top
        last = deliveries[-1]
        if type(last) is Delivery:
            self.last_key = (last.view, last.clock, last.pid)
        self._append(lines, kinds, output, inner)
        self.last_index = last.index + output.offset
        written.extend(deliveries)

    def _write_messages(self, deliveries: list[Delivery | ViewDelivery], lines: list[str], output: OutputFile | NoOutput,
                        written: list[Delivery | ViewDelivery], mine: int, top: int) -> None:
        """`_write` of messages of one view only (no view record among them, no `Recovery.known`), of
        which ``mine`` are this peer's, ``top`` the highest clock."""
        me, n = self.me, len(deliveries)
        every, base = self._mark_every, self.index.count
        next_mark = self._next_mark(base)
        inner: list[tuple[int, int]] = []
        own, counted = self.index.own, 0
        for at in range(next_mark, base + n, every):  # (a mark each ``every`` records)
            own += [d.pid for d in deliveries[counted:at - base]].count(me)
            counted = at - base
            inner.append((at, own))
        if top > self.max_clock:
            self.max_clock = top
        last = deliveries[-1]
        self.last_key = (last.view, last.clock, last.pid)
        self._append(lines, [("messages", last.view, n, mine)], output, inner)
        self.last_index = last.index + output.offset
        written.extend(deliveries)

    def _append(self, lines: list[str], kinds: list, output: OutputFile | NoOutput,
                inner: Sequence[tuple[int, int]] = ()) -> None:
        """Write ``lines`` to the history, then to the output file; ``kinds``: what they are, as
        ``(kind, view, own)`` per record or ``("messages", view, n, own)`` per run of messages;
        ``inner``: marks inside them (`_mark`), as (record number, own messages before it)."""
        count = self.index.count  # (a record starts at each mark: a clean-up cuts there)
        data, payloads, counts = records(lines, [first - count for first, _ in inner])
        try:
            at = self.history.append(payloads)
        except DataError as e:
            raise OutputError(str(e)) from None
        for offset, n in zip(at, counts):
            self.offsets.extend(array("q", (offset,)) * n)
        self._mark(self.written_at)
        marks = self.written_ats
        for first, own in inner:
            if first > marks[-1][0]:
                marks.append((first, self.written_at, own))
        index = self.index
        for kind in kinds:
            if kind[0] == "messages":
                index.add_messages(kind[1], kind[2], kind[3])
            else:
                index.add(kind[0], kind[1], bool(kind[2]))
        self.recovery.last = index.last if not self.recovery.catching_up else self.recovery.last
        output.append_bytes(data, len(lines))
        if index.count > 2 * self.retain:  # (half of it goes: the clean-up's cost, per record, stays small)
            self.clean(self.written_at)

    _aged = 0.0  # (when the age bound was last checked)
    history_has_base = False  # (its first record is a clean-up's base record)
    written_at = 0.0  # (the wall-clock time of the records being written: `deliver`, `_apply`)

    def _mark(self, at: float) -> None:
        """The next record, written at ``at``, may start what a clean-up keeps: noted if a minute passed
        since the last such mark, or a hundredth of ``retain`` records (`MARK_EVERY` at most; so the
        marks stay few, and a clean-up by progress keeps at most that many records it could drop)."""
        marks = self.written_ats
        if not marks or at - marks[-1][1] >= 60.0 or self.index.count - marks[-1][0] >= self._mark_every:
            marks.append((self.index.count, at, self.index.own))

    def _next_mark(self, base: int) -> int:
        """Where the first mark inside a write that starts at record ``base`` goes (`_append` marks
        ``base`` itself when one is due)."""
        every = self._mark_every
        after = (self.written_ats[-1][0] if self.written_ats else 0) + every
        return after if after > base else base + every

    @property
    def _mark_every(self) -> int:
        return max(min(self.retain // 100, MARK_EVERY), 1)

    def clean(self, now: float, needed: int = 0) -> None:
        """Drop the oldest records: those before record ``needed`` (no peer can ask for them any more:
        `tom.durable.progress`), and those past ``retain`` events or older than ``retain_age`` seconds,
        cut at a mark (`_mark`). The history's first record then says how many of this peer's own
        messages went with them, and where the records kept start. A member asked for what it dropped
        says it does not hold it (the asker writes a gap record, unless another member holds it)."""
        count, steps = self.index.count, self.written_ats
        if not steps:
            return
        young = next((k for k, (_, at, _) in enumerate(steps) if at >= now - self.retain_age), len(steps) - 1)
        size = next((k for k, (first, _, _) in enumerate(steps) if first >= count - self.retain), len(steps) - 1)
        told = max((k for k, (first, _, _) in enumerate(steps) if first <= needed), default=0)
        k = max(young, size, told)  # (the first step kept; the last one always is: it holds the position)
        held = self._held_from()
        if held is not None:  # (a program replays what follows its snapshot from here: `hold`)
            k = min(k, max((k for k, (first, _, _) in enumerate(steps) if first <= held), default=0))
        cut, at, own = steps[k]
        if cut < 2:
            return
        view, skipped = self.index.cut(cut)
        head = json.dumps({"kind": "base", "own": own, "view": view, "skipped": skipped, "clock": self.max_clock,
                           "delivered_at": at}, separators=(",", ":")).encode()
        try:
            shift = self.history.cut_head(self.offsets[cut], head)
        except DataError as e:
            raise OutputError(str(e)) from None
        self.offsets = array("q", [self.offsets[0]]) + array("q", (o - shift for o in self.offsets[cut:]))
        self.base_own, self.history_has_base = own, True
        self.written_ats = [(0, at, own)] + [(f - cut + 1, a, o) for f, a, o in steps[k:]]
        log.info("data folder: cleaned up %d delivered event(s) (kept the last %d)", cut - 1, self.index.count - 1)

    def _apply(self, step: Caught | None, output: OutputFile | NoOutput, at: float, sends: Sends,
               written: list[Delivery | ViewDelivery]) -> None:
        if step is None:
            return
        self.written_at = at
        for line in step.said:
            log.warning("%s", line)
        for dest, frame in step.sends:
            sends.append(((dest,), frame))
            log.info("catching up: asked %s for the group's events after message %d of view %d, up to view %d",
                     dest, frame.count, frame.view, frame.upto)
        records = list(step.records)
        if step.gap is not None:
            records.append({"kind": "gap", **step.gap})
        if records:
            lines, kinds = [], []
            for k, rec in enumerate(records, 1):
                if rec["kind"] == "gap":
                    rec = {"v": 2, "kind": "gap", "index": self.last_index + k, "peer": self.me,
                           "delivered_at": round(at, 6), "view": rec["view"], "after": rec["after"],
                           "reason": rec["reason"]}
                else:
                    rec = {**rec, "index": self.last_index + k, "peer": self.me, "delivered_at": round(at, 6),
                           "caught_up": True}
                lines.append(json.dumps(rec, separators=(",", ":")) + "\n")
                kinds.append((rec["kind"], int(rec["view"]), rec["kind"] == "message" and rec.get("pid") == self.me))
            self._append(lines, kinds, output)
            for k, rec in enumerate(records, 1):
                if rec["kind"] == "gap":
                    self.gaps.append(self.last_index + k)
                else:
                    self._delivered_now(rec["kind"], int(rec["view"]), int(rec.get("clock", 0)), str(rec.get("pid", "")))
                    event = event_of_record(rec, self.last_index + k, self.order)
                    self.caught_up_now.add(id(event))
                    written.append(event)
            self.last_index += len(records)
            output.offset += len(records)
        if step.dropped:  # (held, never written: what the core delivers next follows what is written)
            output.offset -= step.dropped
        if step.offered is not None:  # (the orders that deliver before all hold it do not keep what was
            self.decided = self._extension(step.offered) if self.order == "lamport" else []  # taken: not uniform)
        if step.decided:
            self._extend(self.decided, output, at, written)
            self.decided = []
        if step.done and step.gap is None:
            log.info("caught up: %d event(s) the group delivered while this peer was away", self.recovery.got)
        if step.release:
            self._write(list(step.release), output, at, written)  # (from the view that admitted it on)

    def _extension(self, offered: dict[tuple[int, int, str], dict]) -> list[tuple[int, int, str, str, float | None]]:
        """As the founder of a group founded again, caught up: how its last view ends (`end_of_view`,
        from what the others offered and what this peer took)."""
        if self.index.last is None:
            return []
        view = self.index.last[0]
        upto = self.recovery.upto if self.recovery.upto is not None else view + 1
        decided, late = end_of_view(view, self.last_key, upto, offered, self.taken_not_delivered(view))
        if late:
            log.warning("%d message(s) taken by founders sort before the last one delivered: not delivered", late)
        return decided

    def _extend(self, decided: list[tuple[int, int, str, str, float | None]], output: OutputFile | NoOutput,
                at: float, written: list[Delivery | ViewDelivery]) -> None:
        """Write the end of the last view this founder decided (`_extension`), now that every other
        member of the view it founded holds it (or went away)."""
        if not decided:
            return
        base = self.last_index - output.offset
        extension = [Delivery(base + n, c, p, t, s, v) for n, (v, c, p, t, s) in enumerate(decided, 1)]
        self._write(extension, output, at, written)  # (indexes after the last written)
        output.offset += len(extension)  # (the core did not count them: what it delivers next comes after)
        log.info("founded the group again: ended view %d with %d message(s) its members had taken and none "
                 "delivered", decided[0][0], len(extension))

    # -- serving and catching up -------------------------------------------------------------------

    def on_frame(self, src: str, frame: CatchUp | History | Progress, output: OutputFile | NoOutput, at: float,
                 now: float) -> tuple[list[Delivery | ViewDelivery], Sends]:
        """A durable peer's frame from ``src``: answer an ask, take an answer, or note how far it got."""
        sends: Sends = []
        written: list[Delivery | ViewDelivery] = []
        if type(frame) is Progress:
            at_ = (frame.view, frame.count) if frame.view else None
            self.peers.reported(src, at_)
            self._apply(self.recovery.reported(src, at_), output, at, sends, written)
        elif type(frame) is CatchUp:
            sends += self._serve(src, frame)
        else:
            assert type(frame) is History
            step = self.recovery.history(src, frame, now)
            self._apply(step, output, at, sends, written)
            sends += self._answer_waiting()
        return written, sends

    def _serve(self, src: str, ask: CatchUp) -> Sends:
        recovery = self.recovery
        holding = recovery.upto == ask.upto
        founder = holding and recovery.refounded and recovery.coordinator == self.me
        # (the founder answers once it decided how the last view ends; an orphaned member answers nobody)
        wait = recovery.orphaned or (founder and not recovery.deciding)
        where = "wait" if wait else plan(self.index, ask, holding)
        if where == "wait":
            self.waiting.append((src, ask))
            return []
        if isinstance(where, str):
            log.info("%s asks for the events after message %d of view %d: not held here", src, ask.count, ask.view)
            return [((src,), History("none"))]
        first, last = where
        records = read_events(self.history, self.offsets, first, last)
        log.info("%s catches up from here: %d event(s) after message %d of view %d, up to view %d", src,
                 len(records), ask.count, ask.view, ask.upto)
        texts = [r.decode() for r in records]
        if founder:  # (the end it decided, which it writes once the members have it)
            texts += [json.dumps({"kind": "message", "view": v, "clock": c, "pid": p, "text": t, "sent_at": s},
                                 separators=(",", ":")) for v, c, p, t, s in self.decided]
        elif holding:  # (a group founded again: what this member took and did not deliver, for its founder)
            last = self.index.last[0] if self.index.last is not None else 0
            texts += [json.dumps({"kind": "message", "view": t[0], "clock": t[1], "pid": t[2], "text": t[3],
                                  "sent_at": t[4], "pending": True}, separators=(",", ":"))
                      for t in self.taken_not_delivered(last).values()]
        return [((src,), f) for f in answer(texts)]

    def _answer_waiting(self) -> Sends:
        if not self.waiting:
            return []
        waiting, self.waiting = self.waiting, []
        sends: Sends = []
        for src, ask in waiting:
            sends += self._serve(src, ask)
        return sends

    def gone(self, pid: str, output: OutputFile | NoOutput, at: float,
             now: float) -> tuple[list[Delivery | ViewDelivery], Sends]:
        sends: Sends = []
        written: list[Delivery | ViewDelivery] = []
        self.waiting = [(s, a) for s, a in self.waiting if s != pid]
        self._apply(self.recovery.gone(pid, now), output, at, sends, written)
        sends += self._answer_waiting()
        return written, sends

    def tick(self, output: OutputFile | NoOutput, at: float, now: float) -> tuple[list[Delivery | ViewDelivery], Sends]:
        sends: Sends = []
        written: list[Delivery | ViewDelivery] = []
        self._apply(self.recovery.tick(now), output, at, sends, written)
        sends += self._answer_waiting()
        sends += self._report(now)
        if at - self._aged >= 60.0:  # (the age bound, once a minute)
            self._aged = at
            self.clean(at)
        else:
            self._clean_by_progress(at)
        return written, sends

    def _report(self, now: float) -> Sends:
        """This peer's durable position to the other members of its view, once a `REPORT_EVERY` when it
        moved or the members changed, else every ten times that."""
        when, last, members = self._reported
        mine = self.on_disk
        if mine is None:
            return []
        soon = self.report_soon and mine != last  # (a view's record on the disk: a founder may wait for it)
        if not soon and (now - when < REPORT_EVERY or (
                mine == last and members == self.members and now - when < 10 * REPORT_EVERY)):
            return []
        if mine[0] >= self.report_soon:
            self.report_soon = 0
        self._reported = (now, mine, self.members)
        others = tuple(p for p in self.members if p != self.me)
        return [(others, Progress(*mine))] if others else []

    def _held_from(self) -> int | None:
        """The number of the first record `hold` keeps (None: no hold, or its record is gone already)."""
        if self.hold is None:
            return None
        view, clock, pid = self.hold
        offsets, end = self.offsets, len(self.offsets)
        while end > 1:  # (a record at a time, from the end: a snapshot is recent)
            first = max(bisect_left(offsets, offsets[end - 1]), 1)
            payloads = read_events(self.history, offsets, first, end)
            for r in range(end - 1, first - 1, -1):
                rec = _fields(payloads[r - first])
                if rec.get("kind") == "view" and not pid and rec.get("view") == view:
                    return r + 1
                if rec.get("kind") == "message" and (rec.get("view"), rec.get("clock"), rec.get("pid")) == (view, clock, pid):
                    return r + 1
            end = first
        return None

    def _clean_by_progress(self, at: float) -> None:
        """Drop what no peer can ask for any more, once that is `CLEAN_AT_LEAST` records and four times
        as many as the history keeps."""
        floor = self.peers.floor(self.on_disk)
        if floor is None or self.recovery.catching_up:
            return
        needed = cut_at(self.index, floor, self.order != "lamport")
        if needed - 1 >= max(CLEAN_AT_LEAST, 4 * (self.index.count - needed)):
            self.clean(at, needed)

    def status(self) -> str | None:
        """"catching up k of n" while it does, else None."""
        r = self.recovery
        if not r.catching_up:
            return None
        return f"catching up {r.got} of {r.total if r.total is not None else '?'} from {r.asking}"

    def close(self) -> None:
        if self._syncer is not None:  # (the sync under way ends first; each log syncs as it closes)
            self._syncer.shutdown(wait=True)
            self._syncer = None
        for f in (getattr(self, "history", None), getattr(self, "accepted_log", None),
                  getattr(self, "pending_log", None)):
            if f is not None:
                try:
                    f.close()
                except DataError:
                    pass
        self.dir.close()

