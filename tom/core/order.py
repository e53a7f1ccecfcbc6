"""What an order is in TOM: the `Order` Protocol that `Core` drives, and the orders a group can run.

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

from collections.abc import Callable, Iterator
from typing import ClassVar, Protocol

from ..codec.frames import Frame, Message, Relay, Seq
from .causal import CausalOrder
from .lamport import LamportOrder
from .queue import Entry
from .records import PendingStatus
from .sequencer import SequencerOrder


class Order(Protocol):
    """The pending messages of one view and the delivery rule of one order."""

    name: ClassVar[str]
    total: ClassVar[bool]
    acknowledged: ClassVar[bool]
    gives_numbers: ClassVar[bool]

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Entry]: ...
    def own(self, clock: int, text: str, sent_at: float | None) -> Message:
        """This peer multicasts ``text`` at ``clock``: it holds it; the frame to send."""
    def message(self, src: str, msg: Message | Relay) -> Entry | None:
        """A member's message (from its origin, or relayed): the new entry, or None."""
    def may_release(self, entry: Entry) -> bool:
        """Whether taking ``entry`` may have made something deliverable."""
    def acks(self, src: str, pid: str, clocks: tuple[int, ...]) -> tuple[bool, int]:
        """``src`` holds ``(c, pid)`` for each ``c``: whether something may now leave, and the
        largest clock acknowledged (-1: none)."""
    def marks(self, src: str, marks: tuple[int, ...]) -> tuple[bool, int]:
        """``src``'s cumulative ACKs (wire v2): as `acks`."""
    def sequence(self, src: str, frame: Seq) -> bool:
        """Sequence numbers: whether the next number may now go."""
    def settles(self, required: frozenset[str]) -> bool:
        """Whether a flush's last step among ``required`` would leave nothing pending now."""
    def release(self, required: frozenset[str], final: bool) -> list[Entry]:
        """Pop and return, in delivery order, what may be delivered now."""
    def install(self, members: tuple[str, ...], clock: int, pid: str) -> None:
        """A view of ``members`` (pid order) was delivered at ``(clock, pid)``."""
    def relays(self, removed: frozenset[str]) -> list[Frame]:
        """What a flush forwards of the ``removed`` members' messages."""
    def progress(self, src: str, count: int) -> None:
        """``src`` delivered ``count`` messages of the view."""
    def waits(self, entry: Entry, members: list[str]) -> str:
        """What ``entry`` waits for, for status."""
    def head(self) -> Entry | None:
        """The entry that leaves next in a total order with ACKs (None otherwise)."""
    def vector(self, vc: tuple[int, ...]) -> dict[str, int]:
        """A vector timestamp as ``{pid: count}`` (the causal order's; others never carry one)."""
    def start_numbering(self) -> None:
        """The view is normal: the sequencer (if this peer is it) numbers from now."""
    def stop_numbering(self) -> None:
        """A view change started: no more numbers."""
    def take_numbered(self) -> list[tuple[int, int, str]]:
        """The numbers given since the last call: ``(seq, clock, pid)``."""


ORDERS = ("lamport", "sequencer", "causal")
"""The orders a group can run (`Core`'s ``order``); every member of a group runs the same."""

ORDER_CLASSES: dict[str, Callable[[str, dict[str, int]], Order]] = {
    "lamport": LamportOrder, "sequencer": SequencerOrder, "causal": CausalOrder}


def pending_status(order: Order, members: list[str]) -> tuple[PendingStatus, ...]:
    """What a status shows of the messages pending in ``order``: who of ``members`` (pid order) holds
    each, who does not (in an order with ACKs), and what it waits for."""
    return tuple(
        PendingStatus(e.clock, e.pid, e.text, tuple(p for p in members if p in e.acks),
                      tuple(p for p in members if p not in e.acks) if order.acknowledged else (),
                      order.waits(e, members), e.seq)
        for e in order)
