"""`tom check --restart PEER`: durable peers that crash at any point and start again from exactly what
their data folders held at that point.

With ``Config.restart`` every peer is durable (``tom peer --data``), and its shell is part of the
explored state: the core carries it (attribute ``check_shell``, frozen and fingerprinted with the
core by `World`), so a step of a durable peer is memoised on both, as any local step. The `Shell`
is `tom.peer.durable.Durable`'s logic over values instead of files:

* its **disk**: the history (every record written, in order: what the output file shows, caught-up
  records included), the taken messages (``pending.log``: each step's `Ready.persist`), the accepted
  texts (``accepted.log``) and the group of its identity;
* its **process**: the catch-up (`tom.durable.catchup.Recovery`, the real one), whether it was
  admitted, whether it sent its accepted texts again yet, the asks it answers once it can.

A step of a durable peer runs as `tom.peer.processor`'s step runs it: a text to send is accepted
(written) before the core takes it, and waits while the peer is not admitted and caught up; then
`Core.ready`; then the texts accepted and not in the group's order go again (`not_in_order`); then
`persist_then_send` — the very function ``tom peer`` runs — writes the step's taken messages and
routes its frames; then the deliveries are written (or held while catching up), and the durable
frames (`CatchUp`, `History`) are served or taken (`plan` and `answer`, the real ones). The shipped
functions are looked up on their modules at each step, so a test that patches them patches both the
peer and this model.

``restart A`` (a step, once per peer named) is a kill and a start as one step: the old incarnation's
frames in flight, to it and from it, are lost (frames delivered before the step came are every prefix
of its links, as for ``crash``); the new incarnation (incarnation ``A + 100``) starts from the disk
alone, as ``tom peer`` starts: joining, its JOIN naming where its history ends (``resume``), its
clock past every clock it delivered, and every running peer is told its old connection went down and
a new one is up. One step rather than a crash and a later start: between the two only the others
move, and what they can do without the peer is what ``--crash`` explores (with ``--crash A`` too,
``restart A`` is also enabled once A has crashed: the start after any such stretch).

``restart A mid-step``: the crash comes inside A's last step, right after its first frame went out
(the frames out then, and possibly delivered), before what the step wrote after it (with the order
of the real shell: the history records of that step's deliveries). Enabled only when that step wrote
to the disk after its first frame, so it is another state than ``restart A``. A crash at any other
point of a step is the state before the step or after it (nothing is sent before the first frame,
and the frames of a step are all routed at once).

What is not modelled: the clean-up (no history is cut, so no member lacks what is asked), progress
reports but the one a founder waits for (a member reports the record of a view founded again once
written), the output file beside the history (written after it: the same records), ``--fsync`` (a
process crash loses nothing written; a power cut is not explored), torn records in the middle of a
log (the real logs drop a torn tail: that record was never acknowledged). Joiners (``--join``) are
not durable.

Invariants added (`check`, `check_terminal`), where the others do not already say it:

* **lost events** — a catch-up wrote a gap record (every member keeps its whole history here);
* **no duplicate text** — no peer delivers one accepted text twice (the same text sent again under
  another clock is another message to "no duplicate");
* **one sequence** (lamport) — the peers' files, each from its first record, are parts of one
  sequence of records (views and messages), crashed and restarted peers included;
* at a terminal state, **liveness** — the running members' files are equal from where both start (the
  same views, the same messages of each, in order but in the causal order, where only the set is
  one), and every text a running peer accepted is delivered by every running member.
"""

from __future__ import annotations

import json

from ..codec.frames import CatchUp, Frame, Heartbeat, History, Progress, format_frame
from ..codec.pid import pid_key
from ..core import Core, Delivery, ViewDelivery
from ..core.group import persisting
from ..core.notices import DurableFrame, Rejoining
from ..durable.catchup import Caught, HistoryIndex, Recovery, end_of_view
from ..errors import FrameError, UsageError
from .world import TIMING, Event, Local, Outcome, Violation, World, feed, number, pid, step_core

PATIENCE = 2 * TIMING.suspect_after
"""How long a catch-up waits for a silent member (the peer's ``2 * --timeout``)."""

INCARNATION = 100
"""A restarted peer ``n`` runs as incarnation ``n + INCARNATION`` (the first one as ``n``)."""

Record = tuple
"""A history record: ``("view", view, clock, pid, members, joined, left, removed)``,
``("message", view, clock, pid, text, seq)`` or ``("gap", view, after)``."""

Disk = tuple
"""``(history, taken, accepted, group)``: what a data folder holds."""


def _shipped():
    """The functions ``tom peer`` runs, looked up now (a test may have patched them)."""
    from ..peer import durable, processor

    return durable, processor


def record_of(d: Delivery | ViewDelivery) -> Record:
    if type(d) is ViewDelivery:
        return ("view", d.view, d.clock, d.pid, tuple(d.members), tuple(d.joined), tuple(d.left), tuple(d.removed))
    return ("message", d.view, d.clock, d.pid, d.text, d.seq)


def _json(r: Record) -> str:
    """A record as the output line a member serves (`History`)."""
    if r[0] == "view":
        rec: dict = {"kind": "view", "view": r[1], "clock": r[2], "pid": r[3], "members": list(r[4]),
                     "joined": list(r[5]), "left": list(r[6]), "removed": list(r[7])}
    elif r[0] == "message":
        rec = {"kind": "message", "view": r[1], "clock": r[2], "pid": r[3], "text": r[4], "seq": r[5]}
    else:
        rec = {"kind": "gap", "view": r[1], "after": list(r[2])}
    return json.dumps(rec, separators=(",", ":"))


def _parsed(rec: dict) -> Record:
    kind = rec["kind"]
    if kind == "view":
        return ("view", int(rec["view"]), int(rec["clock"]), str(rec["pid"]), tuple(rec["members"]),
                tuple(rec["joined"]), tuple(rec["left"]), tuple(rec["removed"]))
    if kind == "message":
        return ("message", int(rec["view"]), int(rec["clock"]), str(rec["pid"]), str(rec["text"]), rec.get("seq"))
    return ("gap", int(rec["view"]), tuple(rec["after"]))


def entry_of(r: Record) -> tuple:
    """A record as a `World` log entry (`world._log_entry`; a gap: ``("g", view, after)``)."""
    if r[0] == "view":
        return ("v", r[1], r[4], r[7])
    if r[0] == "message":
        return ("m", (r[2], r[3]), r[1], r[4], r[5])
    return ("g", r[1], r[2])


def _described(r: Record) -> str:
    if r[0] == "view":
        return f"view {r[1]} {' '.join(str(number(m)) for m in r[4])}"
    if r[0] == "message":
        return f"({r[2]}, {number(r[3])}) {r[4]}" + (f" seq={r[5]}" if r[5] is not None else "")
    return f"gap after {tuple(r[2])} up to view {r[1]}"


def index_of(history: tuple[Record, ...], me: str) -> HistoryIndex:
    index = HistoryIndex()
    for r in history:
        index.add(r[0], r[1], r[0] == "message" and r[3] == me)
    return index


class _Effects:
    """What one step of a durable peer does, in order: frames routed, records written, and the disk as
    it was when its first frame went out (`restart A mid-step`)."""

    __slots__ = ("sends", "written", "at_first_send")

    def __init__(self) -> None:
        self.sends: list[tuple[tuple[str, ...], Frame]] = []
        self.written: list[Record] = []
        self.at_first_send: Disk | None = None


class Shell:
    """A durable peer's data folder and the shell around it (module docstring)."""

    __slots__ = ("me", "order", "history", "taken", "accepted", "group", "recovery", "started", "resent",
                 "waiting", "torn", "fx", "decided")

    def __init__(self, me: str, order: str, disk: Disk, running: bool) -> None:
        self.me, self.order = me, order
        self.history, self.taken, self.accepted, self.group = disk
        index = index_of(self.history, me)
        known = None
        if order != "lamport":  # (the messages of its last view: it asks from the view's start)
            known = set()
            for r in self.history:
                if r[0] == "view":
                    known.clear()
                elif r[0] == "message":
                    known.add((r[1], r[2], r[3]))
        self.recovery = Recovery(me, index.last, PATIENCE, known)
        self.started = running  # admitted since this process started
        self.resent = running  # its accepted texts not in the order were sent again (`take_unsent`)
        self.waiting: tuple[tuple[str, CatchUp], ...] = ()
        self.decided: tuple = ()  # a founder's end of the last view, written once the members have it
        self.torn: Disk | None = None  # the disk at its last step's first frame, if it wrote after it
        self.fx: _Effects | None = None  # (during a step only)

    @property
    def owes(self) -> bool:
        """Admitted and caught up, it has yet to send its accepted texts again: `Durable.take_unsent`
        runs at its next step (the processor takes it before the step's catch-up frames end the
        catch-up), and a peer always has a next step: a tick comes every heartbeat period."""
        return self.started and not self.resent and not self.recovery.catching_up

    @property
    def disk(self) -> Disk:
        return (self.history, self.taken, self.accepted, self.group)

    # -- what the processor calls ----------------------------------------------------------------
    def route(self, sends: list[tuple[tuple[str, ...], Frame]]) -> None:
        fx = self.fx
        assert fx is not None
        if sends and fx.at_first_send is None:
            fx.at_first_send = self.disk
        fx.sends.extend(sends)

    def accept(self, text: str) -> bool:
        """`Durable.accept`: written; whether the core takes it now."""
        self.accepted += (text,)
        return self.resent

    def take_unsent(self) -> list[str]:
        if self.resent or not self.started or self.recovery.catching_up:
            return []
        self.resent = True
        durable, _ = _shipped()
        return durable.not_in_order(list(self.accepted), 0, index_of(self.history, self.me).own)

    def persist(self, taken: list) -> None:
        if taken:
            self.taken += tuple(taken)

    def sync(self, now: float) -> None:
        """(A process crash loses nothing written: nothing to do.)"""

    def rejoining(self) -> None:
        self.resent, self.started = False, False

    # -- the history -----------------------------------------------------------------------------
    def _append(self, records: list[Record]) -> None:
        self.history += tuple(records)
        assert self.fx is not None
        self.fx.written.extend(records)
        if not self.recovery.catching_up:
            self.recovery.last = index_of(self.history, self.me).last

    def _write(self, deliveries: list) -> None:
        if not deliveries:
            return
        known = self.recovery.known
        records = []
        report: tuple[str, ...] = ()
        for d in deliveries:
            records.append(record_of(d))
            if type(d) is ViewDelivery and set(d.joined) >= set(d.members):
                report = tuple(d.members)  # (a view founded again: its founder may wait for this report)
            if known is not None:
                if type(d) is ViewDelivery:
                    known.clear()
                else:
                    known.add((d.view, d.clock, d.pid))
        self._append(records)
        if report:  # (`Durable._report`: a view's record on the disk is reported at once)
            last = index_of(self.history, self.me).last
            others = tuple(p for p in report if p != self.me)
            if last is not None and others:
                self.route([(others, Progress(*last))])

    def deliver(self, deliveries: list, group: str, now: float) -> None:
        """`Durable.deliver`."""
        batch: list = []
        recovery = self.recovery
        for d in deliveries:
            if type(d) is ViewDelivery:
                if self.me in d.joined:
                    self.started = True
                    if group and self.group != group:
                        self.group = group
                step = recovery.delivered("view", d.view, d.members, d.joined, d, now, d.pid)
                asking = recovery.asking
                if asking is not None and (asking in d.removed or asking in d.left) and step is not None:
                    self._write(batch)
                    batch = []
                    self._apply(step)
                    step = recovery.gone(asking, now) or Caught()
            else:
                step = recovery.delivered("message", d.view, (), (), d, now)
            if step is None:
                batch.append(d)
            else:
                self._write(batch)
                batch = []
                self._apply(step)
        self._write(batch)
        self._answer_waiting()

    def _apply(self, step: Caught | None) -> None:
        """`Durable._apply`."""
        if step is None:
            return
        for dest, frame in step.sends:
            self.route([((dest,), frame)])
        records = [_parsed(rec) for rec in step.records]
        if step.gap is not None:
            records.append(("gap", int(step.gap["view"]), tuple(step.gap["after"])))
        if records:
            self._append(records)
        if step.offered is not None:
            self.decided = tuple(self._extension(step.offered)) if self.order == "lamport" else ()
        if step.decided:
            self._write([Delivery(0, c, p, t, s, v) for v, c, p, t, s in self.decided])
            self.decided = ()
        if step.release:
            self._write(list(step.release))

    def _last_key(self) -> tuple[int, int, str]:
        for r in reversed(self.history):
            if r[0] == "message":
                return (r[1], r[2], r[3])
        return (0, 0, "")

    def taken_not_delivered(self, view: int) -> dict[tuple[int, int, str], tuple]:
        taken = {(t[0], t[1], t[2]): t for t in self.taken if t[0] >= view}
        for r in self.history:
            if r[0] == "message":
                taken.pop((r[1], r[2], r[3]), None)
        return taken

    def _extension(self, offered: dict) -> list[tuple]:
        """`Durable._extension`: how the founder of a group founded again ends its last view, with the
        messages a founder took and none delivered (`end_of_view`)."""
        last = index_of(self.history, self.me).last
        if last is None:
            return []
        view = last[0]
        upto = self.recovery.upto if self.recovery.upto is not None else view + 1
        return end_of_view(view, self._last_key(), upto, offered, self.taken_not_delivered(view))[0]

    # -- serving and catching up -----------------------------------------------------------------
    def on_frame(self, src: str, frame: CatchUp | History | Progress, now: float) -> None:
        if type(frame) is CatchUp:
            self._serve(src, frame)
        elif type(frame) is Progress:
            self._apply(self.recovery.reported(src, (frame.view, frame.count) if frame.view else None))
            self._answer_waiting()
        elif type(frame) is History:
            self._apply(self.recovery.history(src, frame, now))
            self._answer_waiting()

    def _serve(self, src: str, ask: CatchUp) -> None:
        """`Durable._serve`."""
        durable, _ = _shipped()
        recovery = self.recovery
        holding = recovery.upto == ask.upto
        founder = holding and recovery.refounded and recovery.coordinator == self.me
        index = index_of(self.history, self.me)
        wait = recovery.orphaned or (founder and not recovery.deciding)
        where = "wait" if wait else durable.plan(index, ask, holding)
        if where == "wait":
            self.waiting += ((src, ask),)
            return
        if isinstance(where, str):
            self.route([((src,), History("none"))])
            return
        first, end = where
        texts = [_json(r) for r in self.history[first:end]]
        if founder:
            texts += [json.dumps({"kind": "message", "view": v, "clock": c, "pid": p, "text": t, "sent_at": s},
                                 separators=(",", ":")) for v, c, p, t, s in self.decided]
        elif holding:
            last = index.last[0] if index.last is not None else 0
            texts += [json.dumps({"kind": "message", "view": t[0], "clock": t[1], "pid": t[2], "text": t[3],
                                  "sent_at": t[4], "pending": True}, separators=(",", ":"))
                      for t in self.taken_not_delivered(last).values()]
        self.route([((src,), f) for f in durable.answer(texts)])

    def _answer_waiting(self) -> None:
        if self.waiting:
            waiting, self.waiting = self.waiting, ()
            for src, ask in waiting:
                self._serve(src, ask)

    def gone(self, who: str, now: float) -> None:
        self.waiting = tuple((s, a) for s, a in self.waiting if s != who)
        self._apply(self.recovery.gone(who, now))
        self._answer_waiting()

    def tick(self, now: float) -> None:
        self._apply(self.recovery.tick(now))
        self._answer_waiting()


# -- a durable peer's step ----------------------------------------------------------------------
def durable(core: Core, config) -> tuple[tuple, ...]:
    """Make ``core`` (a peer of the start) durable; its log: view 1 in its history, if it is in one."""
    history: tuple[Record, ...] = ()
    if core.view is not None:
        v = core.view
        members = tuple(sorted(v.members, key=pid_key))
        history = (("view", v.id, 0, v.coordinator or members[0], members, members, (), ()),)
    shell = Shell(core.me, config.order, (history, (), (), core.view.group if core.view is not None else ""), True)
    if config.order == "lamport":
        persisting(core)
    core.__dict__["check_shell"] = shell
    return tuple(entry_of(r) for r in history)


def step(local: Local, core: Core, kind: str, arg: tuple) -> Outcome:
    """One input to a durable peer, run as `tom.peer.processor`'s step runs it (module docstring)."""
    shell: Shell = core.__dict__["check_shell"]
    fx = shell.fx = _Effects()
    error = ""
    sent = None
    try:
        if kind == "send":
            if shell.accept(arg[0]):
                sent = feed(core, kind, arg)
        else:
            sent = feed(core, kind, arg)
    except (FrameError, UsageError) as e:
        error = str(e)
        core = local.core()
        shell = core.__dict__["check_shell"]
        fx = shell.fx = _Effects()
    now = core.now
    if not error:
        if kind in ("tick", "timeout", "clock"):
            shell.tick(now)
        elif kind == "disconnected":
            shell.gone(arg[0], now)
    ready = core.ready()
    unsent = shell.take_unsent()
    if unsent:  # (admitted and caught up: what was accepted before goes first)
        for text in unsent:
            try:
                core.broadcast(text)
            except UsageError:
                pass
        more = core.ready()
        ready.persist += more.persist
        ready.sends += more.sends
        ready.deliveries += more.deliveries
        ready.notices += more.notices

    def fail(e: Exception) -> None:
        raise e

    _, processor = _shipped()
    processor.persist_then_send(ready, shell, shell.route, now, fail)  # type: ignore[arg-type]
    if ready.deliveries:
        shell.deliver(ready.deliveries, core.view.group if core.view is not None else "", now)
    for notice in ready.notices:
        if type(notice) is DurableFrame:
            shell.on_frame(notice.src, notice.frame, now)
        elif type(notice) is Rejoining:
            core.held.forget()
            shell.rejoining()
    disk = shell.disk
    shell.torn = fx.at_first_send if fx.at_first_send is not None and fx.at_first_send != disk else None
    shell.fx = None
    sends = tuple((tuple(dests), format_frame(frame), frame.view if type(frame) is Heartbeat else None)
                  for dests, frame in fx.sends)
    return Outcome(Local.of(core), sends, tuple(entry_of(r) for r in fx.written),
                   tuple(_described(r) for r in fx.written), str(ready.alarms[0]) if ready.alarms else "",
                   error, sent)


def incarnation(world: World, n: int) -> int:
    return n + INCARNATION if n in world.restarted else n


def restart(w: World, n: int, mid: bool, events: list[Event] | None) -> None:
    """The step ``restart n`` (``mid``: ``restart n mid-step``) on ``w``, the world being made."""
    config = w.config
    old = w.locals[n].core()
    shell: Shell = old.__dict__["check_shell"]
    disk = shell.torn if mid and shell.torn is not None else shell.disk
    fresh = Shell(shell.me, config.order, disk, False)
    history, group = disk[0], disk[3]
    last = index_of(history, fresh.me).last
    w.restarted = w.restarted | {n}
    w._renumber(("restarted",), w.restarted)
    inc = incarnation(w, n)
    pids = [pid(m) for m in range(1, config.peers + 1)]
    core = Core.joining(pid(n), inc, TIMING, now=max(w.now.get(n, 0.0), old.now), order=config.order,
                        expected=pids, resume=(last[0], group) if last is not None and group else (0, ""))
    core.clock.time = max([0] + [r[2] for r in history if r[0] != "gap"])  # (past every clock it delivered)
    if config.order == "lamport":
        persisting(core)
    core.__dict__["check_shell"] = fresh
    w.locals[n] = Local.of(core)
    w._renumber(("local", n), w.locals[n].fp)
    if n in w.crashed:
        w.crashed = w.crashed - {n}
        w._renumber(("crashed",), w.crashed)
    for link in [link for link in w.links if n in link]:
        del w.links[link]  # (what was on its way to it, or from it, dies with the old incarnation)
        w._renumber(("link", link), None)
        if w.due.pop(link, None) is not None:
            w._renumber(("due", link), None)
    w.announced = dict(w.announced)
    for link in [link for link in w.announced if n in link]:
        del w.announced[link]  # (new connections: the first heartbeat on each announces the view again)
        w._renumber(("announced", link), None)
    if w.ticks.get(n):
        w.ticks = {**w.ticks, n: 0}
        w._renumber(("ticks", n), None)
    log = tuple(entry_of(r) for r in history)
    if log != w.logs.get(n):
        w.logs = {**w.logs, n: log}
        w._renumber(("log", n), log)
    w.grew = None  # (a log may have lost its last records: judge the whole world)
    if events is not None:
        events.append(Event(n, note="restart mid-step" if mid else "restart"))
    for m in sorted(w.locals):
        if m == n or m in w.crashed:
            continue
        w._apply(m, step_core(w.locals[m], "disconnected", (pid(n),)), events, f"disconnected {n}")
        w._apply(n, step_core(w.locals[n], "connected", (pid(m), incarnation(w, m))), events, f"connected {m}")
        w._apply(m, step_core(w.locals[m], "connected", (pid(n), inc)), events, f"connected {n}")


def crash_mid_step(w: World, n: int) -> None:
    """``crash n mid-step``: ``n``'s disk is as it was at its last step's first frame out (the crash step
    itself stops it)."""
    core = w.locals[n].core()
    shell: Shell = core.__dict__["check_shell"]
    assert shell.torn is not None
    shell.history, shell.taken, shell.accepted, shell.group = shell.torn
    shell.torn = None
    w.locals[n] = Local.of(core)
    w._renumber(("local", n), w.locals[n].fp)
    log = tuple(entry_of(r) for r in shell.history)
    w.logs = {**w.logs, n: log}
    w._renumber(("log", n), log)
    w.grew = None


# -- invariants ---------------------------------------------------------------------------------
def check(world: World) -> None:
    """The invariants a restart adds (module docstring), judged at every state; memoised on the logs."""
    book, sig = world.book, world.sig
    key = None
    if book is not None and sig is not None and not book.foreign:
        key = book.logs_of(sig)
        fine = book.__dict__.setdefault("restart_fine", set())
        if key in fine:
            return
    logs = world.logs
    for n, log in sorted(logs.items()):
        texts: dict[str, tuple] = {}
        for e in log:
            if e[0] == "g":
                raise Violation("lost events", f"peer {n} wrote a gap record: the events after message {e[2][1]} of "
                                               f"view {e[2][0]} up to view {e[1]} were lost to it")
            if e[0] == "m":
                first = texts.setdefault(e[3], e[1])
                if first != e[1]:
                    raise Violation("no duplicate text", f"peer {n} delivered the text {e[3]} twice: as "
                                                         f"({first[0]}, {number(first[1])}) and ({e[1][0]}, {number(e[1][1])})")
    if world.config.order == "lamport":
        peers = sorted(logs)
        for i, a in enumerate(peers):
            for b in peers[i + 1:]:
                _one_sequence(a, logs[a], b, logs[b], False)
    if key is not None:
        fine.add(key)


def _aligned(a: tuple, b: tuple) -> tuple[tuple, tuple, int]:
    """``a`` and ``b`` from the first record both hold where the later-starting one starts (and the
    offset into ``a`` it is at)."""
    if not a or not b:
        return (), (), 0
    if b[0] in a:
        i = a.index(b[0])
        return a[i:], b, i
    if a[0] in b:
        i = b.index(a[0])
        return a, b[i:], 0
    return (), (), 0


def _show(e: tuple | None) -> str:
    if e is None:
        return "nothing"
    if e[0] == "v":
        return f"view {e[1]} {','.join(str(number(m)) for m in e[2])}"
    return f"({e[1][0]}, {number(e[1][1])}) {e[3]}"


def _one_sequence(a: int, la: tuple, b: int, lb: tuple, equal: bool) -> None:
    x, y, off = _aligned(la, lb)
    k = min(len(x), len(y))
    for i in range(k):
        if x[i] != y[i]:
            raise Violation("one sequence", f"record {off + i + 1} of peer {a}'s file is {_show(x[i])}, but where "
                                            f"peer {b}'s file has the same records before it, it has {_show(y[i])}")
    if equal and len(x) != len(y):
        longer, shorter = (a, b) if len(x) > len(y) else (b, a)
        extra = x[k] if len(x) > len(y) else y[k]
        raise Violation("liveness", f"peer {longer}'s file goes on with {_show(extra)} where peer {shorter}'s "
                                    f"ends, at a state where nothing more can happen")


def check_terminal(world: World) -> None:
    """The liveness a restart adds (module docstring)."""
    live = [n for n, local in sorted(world.locals.items())
            if n not in world.crashed and n not in world.left and local.mode == "normal"]
    logs = world.logs
    for i, a in enumerate(live):
        for b in live[i + 1:]:
            if world.config.order == "causal":  # (views in order, and the same set of messages in each)
                x, y, _ = _aligned(logs[a], logs[b])
                if _views(x) != _views(y):
                    raise Violation("liveness", f"peers {a} and {b} end with other views or other messages in them")
            else:
                _one_sequence(a, logs[a], b, logs[b], True)
    delivered = {n: {e[3] for e in logs[n] if e[0] == "m"} for n in live}
    for n in live:
        shell: Shell = world.locals[n].core().__dict__["check_shell"]
        for text in shell.accepted:
            for m in live:
                if text not in delivered[m]:
                    raise Violation("liveness", f"peer {n} accepted {text}, and peer {m} never delivered it")


def _views(log: tuple) -> list[tuple]:
    out: list[tuple] = []
    for e in log:
        if e[0] == "v":
            out.append((e, set()))
        elif out:
            out[-1][1].add(e[1])
    return [(v, frozenset(s)) for v, s in out]


__all__ = ["Shell", "check", "check_terminal", "durable", "restart", "step"]


def _register() -> None:
    import sys

    from . import world

    world.DURABLE = sys.modules[__name__]


_register()
