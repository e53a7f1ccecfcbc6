"""The interface every order implements, as the base class `Order` (`tom.core.order` names the orders
and says what each keeps)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..codec.frames import Frame, Message, Relay, Seq
from .queue import Entry


class Order:
    """The pending messages of one view and the delivery rule of one order: every order is a
    subclass (a native class in the compiled build, so `Core` calls an order's methods directly,
    through the class's vtable, instead of looking each up by name)."""

    __slots__ = ("name", "total", "acknowledged", "gives_numbers")

    def __init__(self, name: str = "", total: bool = False, acknowledged: bool = False,
                 gives_numbers: bool = False) -> None:
        # what an order is, as fields (read per message: native fields, where class attributes would
        # be looked up by name): its name, whether every member delivers one sequence (``total``),
        # whether members acknowledge messages, whether the view's sequencer hands out numbers
        self.name = name
        self.total = total
        self.acknowledged = acknowledged
        self.gives_numbers = gives_numbers

    def __len__(self) -> int:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Entry]:
        raise NotImplementedError

    def own(self, clock: int, text: str, sent_at: float | None) -> Message:
        """This peer multicasts ``text`` at ``clock``: it holds it; the frame to send."""
        raise NotImplementedError

    def message(self, src: str, msg: Message | Relay) -> Entry | None:
        """A member's message (from its origin, or relayed): the new entry, or None."""
        raise NotImplementedError

    def holds(self, member: str, entry: Entry) -> bool:
        """Whether ``member`` is known to hold ``entry`` (for status, the flush and the divergence
        check: an order may know it from more than ``entry.acks``)."""
        return member in entry.acks

    def may_release(self, entry: Entry) -> bool:
        """Whether taking ``entry`` may have made something deliverable."""
        raise NotImplementedError

    def acks(self, src: str, pid: str, clocks: tuple[int, ...]) -> tuple[bool, int]:
        """``src`` holds ``(c, pid)`` for each ``c``: whether something may now leave, and the
        largest clock acknowledged (-1: none)."""
        raise NotImplementedError

    def marks(self, src: str, marks: tuple[int, ...]) -> tuple[bool, int]:
        """``src``'s cumulative ACKs (wire v2): as `acks`."""
        raise NotImplementedError

    def sequence(self, src: str, frame: Seq) -> bool:
        """Sequence numbers: whether the next number may now go."""
        raise NotImplementedError

    def settles(self, required: frozenset[str]) -> bool:
        """Whether a flush's last step among ``required`` would leave nothing pending now."""
        raise NotImplementedError

    def release(self, required: frozenset[str], final: bool) -> list[Entry]:
        """Pop and return, in delivery order, what may be delivered now."""
        raise NotImplementedError

    def install(self, members: tuple[str, ...], clock: int, pid: str) -> None:
        """A view of ``members`` (pid order) was delivered at ``(clock, pid)``."""
        raise NotImplementedError

    def relays(self, removed: frozenset[str]) -> list[Frame]:
        """What a flush forwards of the ``removed`` members' messages."""
        raise NotImplementedError

    def progress(self, src: str, count: int) -> None:
        """``src`` delivered ``count`` messages of the view."""
        raise NotImplementedError

    def waits(self, entry: Entry, members: list[str]) -> str:
        """What ``entry`` waits for, for status."""
        raise NotImplementedError

    def head(self) -> Entry | None:
        """The entry that leaves next in a total order with ACKs (None otherwise)."""
        raise NotImplementedError

    def vector(self, vc: tuple[int, ...]) -> Mapping[str, int]:
        """A vector timestamp as ``{pid: count}`` (the causal order's; others never carry one)."""
        raise NotImplementedError

    def start_numbering(self) -> None:
        """The view is normal: the sequencer (if this peer is it) numbers from now."""
        raise NotImplementedError

    def stop_numbering(self) -> None:
        """A view change started: no more numbers."""
        raise NotImplementedError

    def take_numbered(self) -> list[tuple[int, int, str]]:
        """The numbers given since the last call: ``(seq, clock, pid)``."""
        raise NotImplementedError
