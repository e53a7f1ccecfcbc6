"""What this peer's users entered that the group has not taken yet.

Invariants: ``texts`` go out in the order they were entered, once this peer is a member in normal
mode with a quorum (`Core._send_held`); ``resubmit`` holds this peer's own messages that were still
pending when it was cut off from its group, and each is sent again after the rejoin unless the group
delivered it (its clock is at most what `Install.delivered` says the group delivered of this peer).
"""

from __future__ import annotations

from collections.abc import Iterable

from mypy_extensions import mypyc_attr

from .queue import Entry


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Held:
    """The users' texts held outside a view (or while a flush runs, or without a quorum), and this
    peer's messages to send again after a rejoin."""

    __slots__ = ("texts", "resubmit")

    def __init__(self) -> None:
        self.texts: list[tuple[str, float | None]] = []  # (text, sent_at), in the order entered
        self.resubmit: list[tuple[int, str, float | None]] = []  # (clock, text, sent_at) cut off

    def hold(self, text: str, sent_at: float | None) -> None:
        self.texts.append((text, sent_at))

    def take(self) -> list[tuple[str, float | None]]:
        """The texts to send now, in order; none held after."""
        texts, self.texts = self.texts, []
        return texts

    def cut_off(self, own: Iterable[Entry]) -> None:
        """This peer left its group by a rejoin with ``own`` pending (its own messages, with texts)."""
        self.resubmit += sorted((e.clock, e.text, e.sent_at) for e in own if e.text is not None)

    def forget(self) -> None:
        """Nothing is held here: a durable peer's shell sends its accepted texts again itself, from its
        data folder, once it is admitted and caught up (`tom.peer.durable`)."""
        self.texts, self.resubmit = [], []

    def admitted(self, mark: int) -> None:
        """Admitted to a group that delivered this peer's messages up to clock ``mark``: the rest of
        the cut-off messages go out first, before what the users entered since."""
        if self.resubmit:
            self.texts[:0] = [(text, sent_at) for clock, text, sent_at in self.resubmit if clock > mark]
            self.resubmit = []
