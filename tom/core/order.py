"""What an order is in TOM: the `Order` that `Core` drives (`tom.core.ordering`), and the orders a group can run.

An order holds the pending messages of the current view and says what is deliverable; `Core` numbers
the deliveries, acknowledges and runs membership around it. Every member of a group runs the same
order (`ORDERS`). Invariants every order keeps:

* `release` hands out each message at most once, and only what the order's rule allows now; with
  ``final`` (a flush's last step, every survivor's marker in) it leaves nothing pending, the same
  way at every survivor holding the same frames;
* `message` returns an entry only for a message not held before (None: stale or a duplicate);
* ``total``: every member delivers one sequence (so digests of it compare); ``acknowledged``: members
  acknowledge every message they receive (ACKs, marks); ``gives_numbers``: the view's sequencer
  hands out numbers (`take_numbered`) that `Core` sends as SEQ frames.
"""

from __future__ import annotations

from collections.abc import Callable

from .causal import CausalOrder
from .lamport import LamportOrder
from .ordering import Order as Order  # (re-exported: what an order is)
from .queue import Entry
from .records import PendingStatus
from .sequencer import SequencerOrder


ORDERS = ("lamport", "sequencer", "causal")
"""The orders a group can run (`Core`'s ``order``); every member of a group runs the same."""

ORDER_CLASSES: dict[str, Callable[[str, dict[str, int]], Order]] = {
    "lamport": LamportOrder, "sequencer": SequencerOrder, "causal": CausalOrder}


def pending_status(order: Order, members: list[str]) -> tuple[PendingStatus, ...]:
    """What a status shows of the messages pending in ``order``: who of ``members`` (pid order) holds
    each, who does not (in an order with ACKs), and what it waits for."""
    return tuple(
        PendingStatus(e.clock, e.pid, e.text, tuple(p for p in members if order.holds(p, e)),
                      tuple(p for p in members if not order.holds(p, e)) if order.acknowledged else (),
                      order.waits(e, members), e.seq)
        for e in order)
