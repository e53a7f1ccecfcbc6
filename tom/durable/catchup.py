"""Catching up: what a durable peer admitted again missed, asked of the group over its links. Sans-IO:
records and frames in, decisions out (no disk, no clock read, no socket).

A *position* in the group's order is ``(view, n)``: the view's record, then its messages counted from
1 (``n = 0``: right after the view's record). Every member that stays from view ``v`` into ``v + 1``
delivers the same messages in ``v`` (virtual synchrony, Lamport order), so a position names the same
point of the order at every member of the view.

`Recovery` is the restarted peer's side. Admitted again by view ``w`` (its record names this peer in
``joined``) with a last position ``(v, n)``, it holds every event it delivers from ``w``'s record on,
asks one member that was in the view before ``w`` (`CatchUp(v, n, w)`), takes the records that come
back (each must follow the last one: `follows`), and once the answer ends releases what it held. A
member that does not hold what was asked, is silent for ``patience`` or goes away is replaced by the
next; when none is left, the missing stretch becomes one explicit gap record.

A view *founded again* (a group restarted as a whole: every member of it joined) is ended by its
founder: each other member asks the others first and the founder last; the founder asks every other
member (each answers with its history and the messages it took and did not deliver), *decides* how
the last view ends (`Caught.offered`: the shell works the records out) and answers with them, and
writes them itself only once every other member reported a position in the new view
(`Recovery.reported`) or went away: so a founder that dies has written its end nowhere but where
every member it waited for wrote it too. A member whose founder went away before answering is
*orphaned*: it writes nothing and answers nobody; it asks the founder again now and then (its link may
have come back), and once a view admits it again (the group founded again, its founder then ending
the last view from the histories and the messages taken that are left), it drops what it held
(`Caught.dropped`: their messages are among the taken ones) and catches up to that view instead.

`plan` is the serving member's side: where its own history holds the asked stretch.

Invariant: the records a peer writes, read start to end, follow one another (`follows`) except across
a gap record: nothing twice, nothing skipped without saying so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..codec.frames import CatchUp, History
from ..codec.pid import pid_key

Position = tuple[int, int]
"""``(view, n)``: after message ``n`` of view ``view`` (``n = 0``: after the view's record)."""

MAX_HISTORY_BYTES = 48 * 1024
"""Records per `History` frame, in bytes of JSON: a frame stays under `MAX_FRAME_BYTES`."""


def advance(last: Position | None, kind: str, view: int) -> Position:
    """The position of a record of ``kind`` in ``view`` delivered after ``last``."""
    if kind == "view":
        return (view, 0)
    if last is not None and last[0] == view:
        return (view, last[1] + 1)
    return (view, 1)


def follows(last: Position | None, kind: str, view: int) -> bool:
    """Whether a record of ``kind`` in ``view`` may come right after ``last`` in the group's order: the
    next message of the same view, or the record of a later view."""
    if last is None:
        return True
    if kind == "view":
        return view > last[0]
    return kind == "message" and view == last[0]


@dataclass
class ViewSpan:
    """Where one view's records are in a member's history: the record number of its view record and
    how many messages of it follow. After a clean-up cut into the view (`HistoryIndex.cut`), its
    record is gone (``skipped`` > 0 or ``whole`` false): ``first`` is then its first message kept, the
    ``skipped + 1``-th of the view."""

    first: int
    messages: int = 0
    skipped: int = 0
    whole: bool = True

    def start(self, count: int) -> int | None:
        """The record number of message ``count + 1`` of the view, if this history holds it."""
        if self.whole:
            return self.first + 1 + count
        return self.first + count - self.skipped if count >= self.skipped else None


@dataclass
class HistoryIndex:
    """A member's delivered history, as positions: for each view, where its records start. Records are
    numbered from 0 in the order written; the shell keeps their offsets. ``own``: this peer's own
    messages in the whole history, those a clean-up dropped included (its first record says how many)."""

    views: dict[int, ViewSpan] = field(default_factory=dict)
    count: int = 0
    last: Position | None = None
    own: int = 0

    def add(self, kind: str, view: int, own: bool = False) -> None:
        if kind == "view":
            self.views[view] = ViewSpan(self.count)
        elif kind == "message":
            span = self.views.get(view)
            if span is not None:
                span.messages += 1
            self.own += own
        if kind in ("view", "message"):
            self.last = advance(self.last, kind, view)
        self.count += 1

    def add_messages(self, view: int, n: int, own: int) -> None:
        """``n`` messages of ``view`` written one after the other (``own`` of them this peer's): `add`'s
        effect for each, at once."""
        span = self.views.get(view)
        if span is not None:
            span.messages += n
        self.own += own
        last = self.last
        self.last = (view, (last[1] if last is not None and last[0] == view else 0) + n)
        self.count += n

    def base(self, own: int, view: int, skipped: int) -> None:
        """The first record of a history cleaned up: ``own`` messages of this peer's dropped, and the
        records kept start inside ``view`` after ``skipped`` of its messages (``view`` 0: at a view's
        record)."""
        self.own += own
        self.count += 1
        if view:
            self.views[view] = ViewSpan(self.count, skipped=skipped, messages=skipped, whole=False)
            self.last = (view, skipped)

    def cut(self, c: int) -> tuple[int, int]:
        """Drop records ``0 .. c-1`` (``c`` >= 1) and make room for a base record in their place: the
        numbers of the records kept move down by ``c - 1``. Returns where the kept records start, as
        `base` takes it: ``(view, skipped)``, ``(0, 0)`` at a view's record."""
        inside = (0, 0)
        for v in sorted(self.views):
            span = self.views[v]
            end = span.first + (1 if span.whole else 0) + span.messages - span.skipped
            if end <= c:
                del self.views[v]
            elif span.first < c:  # the cut falls inside this view
                dropped = c - span.first - (1 if span.whole else 0)
                span.skipped += dropped
                span.first, span.whole = c, False
                inside = (v, span.skipped)
        for span in self.views.values():
            span.first -= c - 1
        self.count -= c - 1
        return inside


def plan(index: HistoryIndex, ask: CatchUp, holding: bool = False) -> tuple[int, int] | str:
    """The records ``ask`` wants from ``index``'s history, as record numbers ``(first, end)`` (``end``
    excluded: view ``ask.upto``'s record, or the history's end while this member ``holding`` that view
    itself — it is catching up to it too, so all it has comes before it); or why not: ``"none"`` (this
    member does not hold them: it never did, or cleaned them up) or ``"wait"`` (it has not delivered
    view ``ask.upto``'s record yet)."""
    span = index.views.get(ask.view)
    first = span.start(ask.count) if span is not None and ask.count <= span.messages else None
    if first is None or ask.upto <= ask.view:
        return "none"
    end = index.views.get(ask.upto)
    if end is not None:
        return (first, end.first) if end.whole else "none"
    if holding:
        return first, index.count
    return "wait" if index.last is not None and index.last[0] < ask.upto else "none"


BEFORE_ANY = (-1, ("", -1))
"""A ``(clock, pid_key)`` before every message's: where a view with no message delivered yet ends."""

Key = tuple[int, int, str]
"""A message: ``(view, clock, pid)``."""


def end_of_view(view: int, last_key: Key, upto: int, offered: dict[Key, dict],
                taken: dict[Key, tuple]) -> tuple[list[tuple], int]:
    """How the founder of a group founded again (caught up to view ``upto``) ends ``view``, the last
    view it wrote, whose last message written is ``last_key`` (if of that view): the messages a founder
    took and none delivered — ``offered`` by the others (their records), ``taken`` by itself
    (`read_pending`'s tuples) — of that view or a later one none wrote (a view founded before whose
    founder died; not of ``upto``, whose deliveries it holds), in ``(view, clock, pid)`` order after
    its last delivered message. Every founder then copies them: a message any member delivered had been
    taken by every member of its view, this founder included, so none is lost. Returns them as
    ``(view, clock, pid, text, sent_at)``, all of ``view``, and how many sort before its last
    delivered message (never delivered)."""
    last_view, last_clock, last_pid = last_key
    after = (view, last_clock, pid_key(last_pid)) if last_view == view else (view, *BEFORE_ANY)
    chosen = {k: (r["text"], r.get("sent_at")) for k, r in offered.items() if view <= k[0] < upto}
    chosen.update({k: (t[3], t[4]) for k, t in taken.items() if view <= k[0] < upto})
    ranked = sorted((k[0], k[1], pid_key(k[2]), k) for k in chosen)
    late = sum(1 for r in ranked if r[:3] <= after)
    return [(view, k[1], k[2], *chosen[k]) for *rank, k in ranked if tuple(rank) > after], late


def batches(records: Iterable[str]) -> list[tuple[str, ...]]:
    """``records`` cut into `History` frames' worth (`MAX_HISTORY_BYTES`)."""
    out: list[tuple[str, ...]] = []
    batch: list[str] = []
    size = 0
    for r in records:
        if batch and size + len(r) > MAX_HISTORY_BYTES:
            out.append(tuple(batch))
            batch, size = [], 0
        batch.append(r)
        size += len(r) + 8
    if batch:
        out.append(tuple(batch))
    return out


def answer(records: list[str]) -> list[History]:
    """The `History` frames that carry ``records`` (the last one says ``end``)."""
    parts = batches(records) or [()]
    return [History("end" if i == len(parts) - 1 else "more", len(records), part) for i, part in enumerate(parts)]


@dataclass
class Caught:
    """What `Recovery` decides for one step: frames to send, records to write as caught up (parsed),
    a gap record to write (its fields), deliveries to release, and lines to say."""

    sends: list[tuple[str, CatchUp]] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    gap: dict | None = None
    release: list = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    done: bool = False
    # the founder of a group founded again, caught up: it decides how the last view ends with the
    # messages any founder took and none delivered (these offered, and its own), and waits to write it
    offered: dict[tuple[int, int, str], dict] | None = None
    # the founder's end is decided everywhere it waited for: write it now, before the view it founded
    decided: bool = False
    # an orphaned member's group founded again: the deliveries it held of the views before, dropped
    dropped: int = 0


class Recovery:
    """A durable peer's catch-up (the module docstring). ``last``: the last position in its history
    (None: it never delivered anything, so it owes nothing)."""

    def __init__(self, me: str, last: Position | None, patience: float,
                 known: set[tuple[int, int, str]] | None = None) -> None:
        self.me, self.last, self.patience = me, last, patience
        # orders whose members may deliver a view's messages in other orders (causal), or a crashed
        # member other ones (sequencer): the messages of the last view this peer holds, (view, clock,
        # pid); it asks from the view's start and skips them (None: the Lamport order, by position)
        self.known = known
        self.upto: int | None = None  # catching up to this view's record
        self.candidates: list[str] = []
        self.asking: str | None = None
        self.asked_at = 0.0
        self.held: list = []
        self.got = 0  # caught-up records so far, of ``total``
        self.total: int | None = None
        self.refounded = False  # the view caught up to was founded again by its members, none of them old
        self.coordinator = ""  # ... and the member that founded it
        # the messages other founders took and did not deliver, as they offered them: (view, clock, pid) -> record
        self.offered: dict[tuple[int, int, str], dict] = {}
        self.deciding = False  # the founder's end is decided; it waits for ``awaiting`` to write it
        self.awaiting: set[str] = set()  # the members of the view founded that did not report it yet
        self.members: tuple[str, ...] = ()  # the members of the view caught up to
        self.orphaned = False  # the founder went away before it answered: waiting for a founding again
        # members asked that went away (or fell silent) before they said whether they hold the events: their
        # disks may; with nobody left to ask, this peer waits for them (``stalled``), writing nothing
        self.went_away: set[str] = set()
        self.stalled = False
        self.heard: dict[str, Position | None] = {}  # the last position each member reported (`reported`)

    @property
    def catching_up(self) -> bool:
        return self.upto is not None

    def delivered(self, kind: str, view: int, members: Iterable[str], joined: Iterable[str], item: object,
                  now: float, coordinator: str = "") -> Caught | None:
        """A delivery of this peer's: None if it may be written now (then `wrote`); else it is held (a
        `Caught` with what to send, when it starts a catch-up)."""
        if self.upto is not None:
            if (self.orphaned or self.stalled) and kind == "view" and self.me in joined:
                dropped = len(self.held)  # (admitted again: caught up from there, or ended by its founder)
                self.upto, self.held, self.orphaned, self.stalled = None, [], False, False
                step = self.delivered(kind, view, members, joined, item, now, coordinator) or Caught()
                step.dropped = dropped
                step.said.append(f"admitted again by view {view}: the {dropped} event(s) held before it are caught "
                                 "up from there instead")
                return step
            self.held.append(item)
            if kind == "view" and self.refounded:
                return self._view_changed(tuple(members), coordinator, now)
            return Caught()
        if kind == "view" and self.me in joined and self.last is not None and view > self.last[0]:
            joiners = set(joined)
            old = sorted(p for p in members if p not in joiners)
            self.members = tuple(members)
            # founded again by its members (a group restarted as a whole): each may be ahead, ask all
            self.refounded = not old
            # founded again: the founder decides how the last view ends (`offered`), so it is asked last
            self.coordinator = coordinator if self.refounded else ""
            self.candidates = old or self._everyone(members, coordinator)
            self.upto, self.held, self.got, self.total = view, [item], 0, None
            self.went_away, self.stalled = set(), False
            self.offered, self.deciding, self.awaiting, self.orphaned = {}, False, set(), False
            return self._ask_next(now, "")
        return None

    def _view_changed(self, members: tuple[str, ...], coordinator: str, now: float) -> Caught:
        """A view change while catching up to a view founded again. The founder deciding waits no more
        for the members it removed; a member whose founder it removed before it answered asks again,
        the new view's coordinator last, which decides instead (what it holds of the views founded
        since is the same at every member that stays: virtual synchrony)."""
        self.members = members
        if self.deciding:
            self.awaiting &= set(members)
            return self._awaited() or Caught()
        if self.coordinator in members:
            return Caught()
        gone, self.coordinator = self.coordinator, coordinator
        self.candidates = self._everyone(members, coordinator)
        self.offered, self.orphaned = {}, False
        return self._ask_next(now, f"the founder of view {self.upto}, {gone}, left the group before it ended view "
                                   f"{self.last[0] if self.last else 0}: {coordinator} ends it instead")

    def _everyone(self, members: Iterable[str], coordinator: str) -> list[str]:
        """The members to ask when each may be ahead: every other one, ``coordinator`` (who decides how
        the last view ends) last."""
        return sorted((p for p in members if p != self.me), key=lambda p: p == coordinator)

    def _awaited(self) -> Caught | None:
        """The founder deciding: its end is written once no member is awaited any more."""
        return None if self.awaiting else self._finish(Caught())

    def wrote(self, kind: str, view: int, key: tuple[int, int, str] | None = None) -> None:
        """A record of this peer's own delivery is written (the last position moves on)."""
        if kind in ("view", "message"):
            self.last = advance(self.last, kind, view)
        if self.known is not None:
            if kind == "view":
                self.known.clear()
            elif key is not None:
                self.known.add(key)

    def _ask_next(self, now: float, why: str) -> Caught:
        step = Caught()
        if why:
            step.said.append(why)
        if self.candidates:
            self.asking = self.candidates.pop(0)
            self.asked_at = now
            step.sends.append((self.asking, self._ask()))
            return step
        assert self.last is not None
        if self.refounded and self.coordinator != self.me:  # (its founder went away before it answered)
            self.asking, self.orphaned, self.asked_at = None, True, now
            step.said.append(f"the founder of view {self.upto}, {self.coordinator}, went away before it ended view "
                             f"{self.last[0]}: nothing of view {self.upto} is written until a view names who ends it")
            return step
        if self.refounded:  # (every member asked: nobody there was further)
            return self._finish(step)
        if self.went_away:  # (they may hold the events, on their disks: a gap only once every member said none)
            if not self.stalled:
                step.said.append(f"{', '.join(sorted(self.went_away))} went away before saying whether they hold the "
                                 f"events after message {self.last[1]} of view {self.last[0]}: nothing is written "
                                 "until one of them answers")
            self.asking, self.stalled, self.asked_at = None, True, now
            return step
        step.gap = {"view": self.upto, "after": list(self.last),
                    "reason": "no member of the group holds the events after it any more"}
        step.said.append(f"lost the group's events after message {self.last[1]} of view {self.last[0]} up to "
                         f"view {self.upto}: no member holds them any more (a gap record marks it in the output)")
        return self._finish(step)

    def _ask(self) -> CatchUp:
        """What this peer asks for: from its last position — after the messages of its last view held
        here (the Lamport order), or from that view's start (orders whose members deliver a view's
        messages in other orders: `known`) — up to the view it catches up to."""
        assert self.last is not None and self.upto is not None
        return CatchUp(self.last[0], 0 if self.known is not None else self.last[1], self.upto)

    def _finish(self, step: Caught) -> Caught:
        if self.refounded and self.coordinator == self.me and not self.deciding:
            step.offered = self.offered  # (decided: written once the others have it, `reported`)
            self.deciding, self.asking = True, None
            self.awaiting = {p for p in self.members if p != self.me and not self._holds(p)}
            if self.awaiting:
                return step
        step.decided = self.deciding
        self.deciding = False
        step.release, self.held = self.held, []
        self.upto, self.asking, self.went_away, self.stalled = None, None, set(), False
        step.done = True
        return step

    def history(self, src: str, frame: History, now: float) -> Caught | None:
        """A `History` frame from ``src``: the records that follow, and the end of the catch-up."""
        if self.orphaned and src == self.coordinator:  # (it answered after all: it was asked again)
            self.asking, self.orphaned = src, False
        if src != self.asking or self.upto is None:
            return None
        if frame.status == "none":
            return self._ask_next(now, f"{src} does not hold the events after message {self.last[1]} of view "  # type: ignore[index]
                                       f"{self.last[0]}; asking the next member")  # type: ignore[index]
        self.asked_at = now
        self.total = frame.total
        step = Caught()
        for text in frame.records:
            try:
                rec = json.loads(text)
                kind, view = rec["kind"], rec["view"]
                if rec.get("pending") is True:  # (taken by that member, never delivered: `Durable._serve`)
                    self.offered[(int(view), int(rec["clock"]), str(rec["pid"]))] = rec
                    continue
                ok = isinstance(view, int) and view <= self.upto and (
                    kind == "gap" or (view < self.upto and follows(self.last, kind, view)))
            except (ValueError, TypeError, KeyError):
                ok = False
            if not ok:
                return self._ask_next(now, f"{src} sent a record that does not follow message {self.last[1]} of "  # type: ignore[index]
                                           f"view {self.last[0]}; asking the next member")  # type: ignore[index]
            self.got += 1
            if self.known is not None and kind == "message":
                key = (int(view), int(rec["clock"]), str(rec["pid"]))
                if key in self.known:
                    continue  # (held here already: delivered before the crash)
                self.known.add(key)
            elif self.known is not None and kind == "view":
                self.known.clear()
            step.records.append(rec)
            if kind != "gap":
                self.last = advance(self.last, kind, view)
        if frame.status == "end":
            # (founded again: the next member may be further still; and only the founder's answer says
            # how the last view ends: `_ask_next` orphans a member whose founder went away meanwhile)
            if self.refounded and (self.candidates or src != self.coordinator):
                more = self._ask_next(now, "")
                more.records = step.records
                return more
            return self._finish(step)
        return step

    def reported(self, pid: str, at: Position | None) -> Caught | None:
        """``pid`` says its history ends at ``at`` (None: it keeps none). The founder deciding writes its
        end once every other member of the view it founded holds that view (or keeps no history)."""
        self.heard[pid] = at
        if self.deciding and pid in self.awaiting and self._holds(pid):
            self.awaiting.discard(pid)
            return self._awaited()
        return None

    def _holds(self, pid: str) -> bool:
        """Whether ``pid`` reported a position in the view caught up to, or that it keeps no history."""
        at = self.heard.get(pid, (0, 0))
        return at is None or (self.upto is not None and at[0] >= self.upto)

    def gone(self, pid: str, now: float) -> Caught | None:
        """``pid`` is no longer there to answer (its link went down, or the group removed it)."""
        if self.deciding and pid in self.awaiting:
            self.awaiting.discard(pid)  # (it wrote the end it was sent, or it catches up from here later)
            return self._awaited()
        if pid == self.asking and self.upto is not None:
            self.went_away.add(pid)  # (asked again while waiting for it: said once already)
            why = "" if self.stalled else f"{pid} went away during the catch-up; asking the next member"
            return self._ask_next(now, why)
        if pid in self.candidates:
            self.candidates.remove(pid)
            self.went_away.add(pid)
        return None

    def tick(self, now: float) -> Caught | None:
        if self.orphaned and now - self.asked_at > self.patience:  # (its link may have come back)
            self.asked_at = now
            return Caught(sends=[(self.coordinator, self._ask())])
        if self.refounded and self.asking == self.coordinator:
            return None  # (the founder answers once it decided: it is waited for while it is there)
        if self.upto is not None and self.asking is not None and now - self.asked_at > self.patience:
            self.went_away.add(self.asking)
            return self._ask_next(now, "" if self.stalled else f"{self.asking} did not answer within "
                                                              f"{self.patience:.0f} s; asking the next member")
        if self.stalled and now - self.asked_at > self.patience:  # (one of them may be back: asked again)
            self.candidates, self.went_away = sorted(self.went_away, key=pid_key), set()
            return self._ask_next(now, "")
        return None
