"""The causal order, with vector clocks per view (b1's CO rule).

A message ``m`` of origin ``p`` carries ``V_m``: for every member ``k`` of the view (in pid order),
the number of ``k``'s messages of this view that ``p`` had delivered when it sent ``m``, and for ``p``
itself ``m``'s own position among its messages. A peer with delivered counts ``V`` delivers ``m`` when
``V_m[p] = V[p] + 1`` and ``V_m[k] <= V[k]`` for every other ``k``. The origin delivers its own message
at once. Messages that are not causally related may leave in different orders at different peers.

Invariants:

* ``V`` only grows within a view and restarts at zero with the next: every message belongs to one
  view (the flush delivers or drops all of a view before the next starts);
* a delivered message stays in ``history`` (per origin, in clock order) until every member is known
  to hold it (members ACK every message, as in the Lamport order, but only for this): until then the
  flush may need it. It leaves when its origin's floor of the marks passes it, or by explicit ACKs
  (relays); one whose explicit ACKs all came before it was delivered may stay until the floor passes
  or the view ends (a flush then relays it once more: harmless);
* an origin's messages are delivered in their order, so ``last_clock[p]`` (the clock of ``p``'s last
  message delivered here) tells a late ACK or relay from one about a message still to come.

The flush: each member forwards the texts of removed origins it holds, pending or in its history.
After every survivor's marker all survivors hold the same messages, and the final step delivers the
same set everywhere: every message whose causal past is held, the rest (whose past died with removed
members) is dropped by all.

This order is not uniform: a member that crashes may have delivered a message nobody else holds.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import cast
from collections import deque
from collections.abc import Iterator, Mapping

from ..errors import FrameError
from ..codec.frames import Frame, Message, Relay, Seq, trusted_message
from ..codec.pid import pid_key
from .marks import MarkFloors
from .ordering import Order
from .queue import Entry, _clock
from .vector import Vector


class CausalOrder(Order):
    """Pending messages, the delivered counts ``V``, and the history a flush may need."""

    __slots__ = ("me", "stats", "members", "index", "counts", "pending", "by_count", "history",
                 "last_clock", "floor", "required", "own_sent", "held")

    def __init__(self, me: str = "", stats: dict[str, int] | None = None) -> None:
        # (defaults: the compiled build constructs a copy before it sets its fields, `tom.core.viewchange`)
        Order.__init__(self, "causal", False, True, False)
        self.me = me
        self.stats = {} if stats is None else stats
        self.members: tuple[str, ...] = ()
        self.index: dict[str, int] = {}
        self.counts: list[int] = []  # V: messages of each member delivered here in this view
        self.pending: dict[tuple[int, str], Entry] = {}  # not delivered: with text, or ACKed only
        self.by_count: dict[str, dict[int, Entry]] = {}  # origin -> its position -> pending with text
        # origin -> its messages delivered here and maybe not yet held by every member, in clock order
        self.history: dict[str, deque[Entry]] = {}
        self.last_clock: dict[str, int] = {}
        self.floor = -1  # the view event's clock: a frame about a message at or below it is of an older view
        self.required: frozenset[str] = frozenset()
        self.own_sent = 0  # this peer's messages of this view (its own count in their vectors)
        self.held = MarkFloors()  # the members' cumulative ACKs (wire v2), per view

    def __len__(self) -> int:
        return len(self.pending)

    def __iter__(self) -> Iterator[Entry]:
        return iter(sorted(self.pending.values(), key=lambda e: (e.clock, pid_key(e.pid))))

    def install(self, members: tuple[str, ...], clock: int, pid: str) -> None:
        self.members = members
        self.index = {p: i for i, p in enumerate(members)}
        self.counts = [0] * len(members)
        self.required = frozenset(members)
        self.pending.clear()
        self.by_count = {p: {} for p in members}
        self.history = {p: deque() for p in members}
        self.last_clock.clear()
        self.floor = clock
        self.own_sent = 0
        self.held = MarkFloors(members, self.me)

    def vector(self, vc: tuple[int, ...]) -> Mapping[str, int]:
        """``vc`` as ``{pid: count}``, members with a count of 0 left out (the output's form)."""
        return cast("Mapping[str, int]", Vector(self.members, vc))  # (a registered Mapping)

    # -- messages ------------------------------------------------------------------------------

    def own(self, clock: int, text: str, sent_at: float | None) -> Message:
        """This peer's message: stamped with ``V`` (its own count included) and delivered at once
        (`release` hands it out)."""
        i = self.index[self.me]
        vc = list(self.counts)
        self.own_sent += 1
        vc[i] = self.own_sent
        vc_t = tuple(vc)
        entry = Entry(clock, self.me, text, sent_at, {self.me}, None, vc_t)
        self.pending[(clock, self.me)] = entry
        self.by_count[self.me][vc_t[i]] = entry
        return trusted_message(clock, self.me, text, sent_at, vc_t)

    def message(self, src: str, msg: Message | Relay) -> Entry | None:
        vc = msg.vc
        if vc is None or len(vc) != len(self.members):
            raise FrameError(f"{src} sent a message without this view's vector timestamp "
                             f"({len(self.members)} counts) in a causal group")
        pid = msg.pid
        i = self.index.get(pid)
        if i is None:
            raise FrameError(f"{src} sent a message of {pid}, which is not a member")
        if vc[i] <= self.counts[i] or msg.clock <= self.last_clock.get(pid, self.floor) or msg.clock <= self.floor:
            return None  # delivered already, or of an older view
        key = (msg.clock, pid)
        entry = self.pending.get(key)
        if entry is None:
            entry = self.pending[key] = Entry(msg.clock, pid)
        elif entry.text is not None:
            return None  # a duplicate
        entry.text, entry.sent_at, entry.vc = msg.text, msg.sent_at, vc
        entry.acks.update((pid, src, self.me))
        self.by_count[pid][vc[i]] = entry
        return entry

    def may_release(self, entry: Entry) -> bool:
        return entry.vc is not None and entry.vc[self.index[entry.pid]] == self.counts[self.index[entry.pid]] + 1

    def sequence(self, src: str, frame: Seq) -> bool:
        raise FrameError(f"{src} sent a sequence number in a causal group")

    def acks(self, src: str, pid: str, clocks: tuple[int, ...]) -> tuple[bool, int]:
        """``src`` holds these messages of ``pid``: what every member holds leaves the history; an
        ACK before its message reserves an entry. Nothing becomes deliverable by an ACK."""
        last, floor = self.last_clock.get(pid, -1), self.floor
        pending, required = self.pending, self.required
        top = -1
        for clock in clocks:
            if clock > top:
                top = clock
            if clock <= floor:
                continue  # about a message of an older view
            if clock <= last:
                waiting = self.history.get(pid)
                if waiting:  # (rare: relays are acknowledged explicitly, messages by the marks)
                    k = bisect_left(waiting, clock, key=_clock)
                    if k < len(waiting) and waiting[k].clock == clock:
                        done = waiting[k]
                        done.acks.add(src)
                        if self.held.all_hold(done, required):
                            del waiting[k]
                continue
            key = (clock, pid)
            entry = pending.get(key)
            if entry is None:
                entry = pending[key] = Entry(clock, pid)
                self.stats["premature_acks"] += 1
            entry.acks.add(src)
        return False, top

    def head(self) -> Entry | None:
        """(Only a total order with ACKs has a head that waits for them.)"""
        return None

    def start_numbering(self) -> None:
        """(No numbers in this order.)"""

    def stop_numbering(self) -> None:
        """(No numbers in this order.)"""

    def take_numbered(self) -> list[tuple[int, int, str]]:
        return []

    def settles(self, required: frozenset[str]) -> bool:
        """The last step of a flush leaves nothing pending in this order (it drops what waits)."""
        return True

    def marks(self, src: str, marks: tuple[int, ...]) -> tuple[bool, int]:
        """``src``'s cumulative ACKs (`MarkFloors.update`): what every member now holds (an origin's
        messages up to its floor) leaves the history. Nothing becomes deliverable by an ACK."""
        held = self.held
        grew, top = held.update(src, marks)
        history, members, floors = self.history, self.members, held.floors
        for i in grew:
            waiting, floor = history[members[i]], floors[i]
            while waiting and waiting[0].clock <= floor:
                waiting.popleft()
        return False, top

    def holds(self, member: str, entry: Entry) -> bool:
        """Whether ``member`` is known to hold ``entry``: by its ACK, or its marks."""
        return self.held.holds(member, entry)

    def release(self, required: frozenset[str], final: bool) -> list[Entry]:
        """The messages deliverable now, in an order that respects causality; ``final``: then drop
        whatever is left (its causal past is held by no survivor)."""
        out: list[Entry] = []
        counts, by_count = self.counts, self.by_count
        n = len(counts)
        progress = True
        while progress:
            progress = False
            for i, pid in enumerate(self.members):
                waiting = by_count[pid]
                while waiting:
                    entry = waiting.get(counts[i] + 1)
                    if entry is None:
                        break
                    vc = entry.vc
                    if vc is None or any(vc[k] > counts[k] for k in range(n) if k != i):
                        break
                    del waiting[counts[i] + 1]
                    counts[i] += 1
                    out.append(entry)
                    progress = True
        if out:
            pending, history, last_clock = self.pending, self.history, self.last_clock
            index, floors = self.index, self.held.floors
            for entry in out:
                pid, clock = entry.pid, entry.clock
                del pending[(clock, pid)]
                last_clock[pid] = clock
                if clock > floors[index[pid]]:  # not yet held by every member (as far as the marks say)
                    history[pid].append(entry)
        if final:
            self.pending.clear()
            for waiting in by_count.values():
                waiting.clear()
        return out

    # -- what the flush needs ------------------------------------------------------------------

    def progress(self, src: str, count: int) -> None:
        """(Stability comes from the ACKs in this order.)"""

    def relays(self, removed: frozenset[str]) -> list[Frame]:
        """The texts of removed origins this peer holds, pending or delivered but maybe not by all."""
        held = [e for waiting in self.history.values() for e in waiting]
        entries = sorted((e for e in held + list(self.pending.values()) if e.pid in removed),
                         key=lambda e: (e.clock, pid_key(e.pid)))
        return [Relay(e.clock, e.pid, e.text, e.sent_at, e.vc) for e in entries if e.text is not None]

    def waits(self, entry: Entry, members: list[str]) -> str:
        if entry.vc is None:
            return "its text (only ACKs came)"
        need = []
        for k, pid in enumerate(self.members):
            have = self.counts[k]
            want = entry.vc[k] - 1 if pid == entry.pid else entry.vc[k]
            if want > have:
                need.append(f"{want - have} of {pid}")
        return "its causal past: " + ", ".join(need) if need else "its turn"
