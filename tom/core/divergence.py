"""The divergence check: members compare, through their heartbeats, what they delivered in a view.

A heartbeat says "after ``count`` messages of view v my digest is d, and the last event I delivered is
``last``". `DivergenceCheck` chains its own digest over what this peer delivers (`DigestChain`),
compares a claim at the same position now or once it gets there (``claims``), and raises one alarm
per peer and view (`Divergence`): a different digest, or a delivery past a message the claimant
never acknowledged (`DivergenceCheck.skipped`). Claims and alarms belong to one view: `new_view`
drops the claims of the view that ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..codec.frames import Heartbeat, Install
from ..codec.pid import pid_key
from .digest import DigestChain
from .queue import Entry
from .records import Delivery, Divergence, View, ViewDelivery

if TYPE_CHECKING:
    from .order import Order

Step = Sequence[Delivery | ViewDelivery]
"""What this peer delivered in the step under way (`Outbox.deliveries`)."""

MAX_ALARMS = 100
"""Alarms kept for status (the most recent); every alarm also goes out once in `Ready.alarms`."""


class DivergenceCheck:
    """This peer's chain over the current view, the claims it has not reached yet, and its alarms."""

    __slots__ = ("chain", "chained", "claims", "alarmed", "alarms", "raised", "stats")

    def __init__(self, stats: dict[str, int]) -> None:
        self.stats = stats  # counts "divergence_alarms": every claim found wrong, repeats included
        self.chain = DigestChain()
        self.chained = 0  # deliveries of the current step already chained
        self.claims: dict[str, tuple[int, int]] = {}  # peer -> (count, digest) not reached yet
        self.alarmed: set[tuple[str, int]] = set()  # (peer, view) already alarmed
        self.alarms: list[Divergence] = []  # the last MAX_ALARMS, for status
        self.raised: list[Divergence] = []  # alarms of the step under way (to `Ready.alarms`)

    def chain_up(self, step: Step, view: int) -> None:
        """Chain the messages delivered in this step since the last call: in batches (at the step's
        end, before a view event, before any use), not on the delivery path."""
        start = self.chained
        if start == len(step):
            return
        self.chain.extend(step[start:] if start else step)
        self.chained = len(step)
        if self.claims:
            for src, (count, digest) in list(self.claims.items()):
                if count <= self.chain.count:
                    del self.claims[src]
                    self.compare(src, count, digest, view)

    def step_ended(self) -> list[Divergence]:
        """The step ends: the alarms it raised."""
        self.chained = 0
        raised, self.raised = self.raised, []
        return raised

    def compare(self, src: str, count: int, digest: int, view: int) -> None:
        """``src`` says: after ``count`` messages of our view, its digest is ``digest``. Compare it with
        ours at the same position — now, or once we get there."""
        if count > self.chain.count:
            self.claims[src] = (count, digest)
            return
        mine = self.chain.at(count)
        if mine is None or mine == digest:
            return
        self.alarm(src, view, count, mine, digest)

    def alarm(self, src: str, view: int, position: int, mine: int, theirs: int,
              skipped: tuple[int, str] | None = None) -> bool:
        """Raise an alarm about ``src`` in ``view``, once per peer and view. Whether it was new."""
        self.stats["divergence_alarms"] += 1
        key = (src, view)
        if key in self.alarmed:
            return False  # once diverged, it stays so in this view
        self.alarmed.add(key)
        alarm = Divergence(src, view, position, mine, theirs, skipped)
        self.alarms = (self.alarms + [alarm])[-MAX_ALARMS:]
        self.raised.append(alarm)
        return True

    def last_key(self, install: Install | None, me: str) -> tuple[int, str]:
        """The key of the last event delivered in this view: its last message, else the view event of
        its ``install`` (``(0, me)`` in a static group that has delivered nothing)."""
        last = self.chain.last
        if last is not None:
            return last
        return (install.clock + 1, install.coordinator) if install is not None else (0, me)

    def beat(self, view: View | None, normal: bool, joining: bool, step: Step, install: Install | None,
             me: str) -> Heartbeat:
        """This peer's heartbeat: in ``normal`` mode, its view and what it delivered in it, counted and
        digested up to the ``step`` under way, and its last event (`last_key`); in a view change, its view
        only (a flush's last step may pass over what only removed members held: what this peer
        delivered is compared again once the next view is installed); outside any view, none."""
        if view is not None and normal:
            self.chain_up(step, view.id)
            return Heartbeat(view.id, self.chain.count, self.chain.digest, self.last_key(install, me), view.group)
        if view is not None and not joining:
            return Heartbeat(view.id, group=view.group)
        return Heartbeat(0)

    def claimed(self, src: str, frame: Heartbeat, view: int, order: Order, cut: bool, normal: bool,
                step: Step) -> None:
        """The heartbeat of ``src``, a member of our ``view``, says what it delivered in it: its count
        and digest are compared with ours (`compare`) where the ``order`` is total and uniform — in the
        causal order peers may deliver one set in different orders; in the sequencer order a member
        the flush under way removes (``cut``) may have delivered, unknowing, what the rest number
        otherwise —, and, in ``normal`` mode, its last event with our head (`skipped`)."""
        if frame.count is None:
            return
        if order.total and (not cut or order.name == "lamport"):
            self.chain_up(step, view)
            self.compare(src, frame.count, frame.digest, view)
        if order.acknowledged and order.total and frame.last is not None and normal and not cut:
            self.skipped(src, frame.last, order.head(), view, order)

    def skipped(self, src: str, last: tuple[int, str], head: Entry | None, view: int, order: Order) -> None:
        """``src`` says the last event it delivered is ``last``. If that is past our ``head``, whose body
        we hold and which ``src`` never acknowledged, ``src`` delivered past a message it does not
        hold: its ACK would have reached us before this heartbeat (links are FIFO). A divergence, seen
        while we still wait for that ACK (a digest cannot show it: we never reach its position)."""
        if (head is None or head.text is None or order.holds(src, head)
                or (head.clock, pid_key(head.pid)) > (last[0], pid_key(last[1]))):
            return
        self.alarm(src, view, self.chain.count + 1, self.chain.digest, 0, (head.clock, head.pid))

    def forget(self, pids: Iterable[str]) -> None:
        """Members removed as failed: their claims not reached yet are void (cut off, they may have
        delivered in their last view what the rest did not: only a uniform order's check holds them)."""
        for pid in pids:
            self.claims.pop(pid, None)

    def new_view(self, step: Step, view: int, removed: Iterable[str] = ()) -> None:
        """A view was installed: what the ``step`` delivered before it is chained (the old view's, but
        compared as of ``view``) once the claims of the ``removed`` are void (`forget`); the chain of the
        view starts empty, and the claims about the old one are void."""
        self.forget(removed)
        self.chain_up(step, view)
        self.chain = DigestChain()
        self.claims.clear()

    def restart(self) -> None:
        """This peer rejoins: nothing of the old group counts any more (alarms for status stay)."""
        self.chain = DigestChain()
        self.claims.clear()
        self.alarmed = set()
