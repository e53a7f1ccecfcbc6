"""Idempotency keys (``Idempotency-Key`` on ``POST /api/messages``): a text sent again under a key
already accepted is answered as the first time and not accepted again.

`IdempotencyKeys` holds the texts accepted under a key, by key, for the last `MAX_KEYS` keys (the
oldest forgotten first). It does no I/O: a durable peer (`tom.peer.durable.Durable`) fills it from
``accepted.log``, where each such text is written with its key, and the processor's step consults it
before a keyed text is accepted (one step at a time: two requests with one key cannot both pass).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ..errors import KeyConflict
from .events import Replayed

MAX_KEYS = 100_000
"""Keys remembered; a key older than the last this many accepted is forgotten (its text would be
accepted again)."""


def conflict(key: str) -> KeyConflict:
    """The one line that refuses another text under ``key``."""
    return KeyConflict(f"Idempotency-Key {key!r} was used for another text: send a new key for a new text")


@dataclass(slots=True)
class Keyed:
    """A text accepted under a key, and the clock it was sent with once this process knows it."""

    text: str
    clock: int | None = None


class IdempotencyKeys:
    """The texts accepted under the last ``bound`` keys."""

    def __init__(self, bound: int = MAX_KEYS) -> None:
        if bound < 1:
            raise ValueError("bound must be at least 1")
        self.bound = bound
        self._keys: OrderedDict[str, Keyed] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def check(self, key: str, text: str) -> Replayed | KeyConflict | None:
        """None if ``text`` may be accepted under ``key`` (a key not known); else what to answer instead:
        `Replayed` (the same text was accepted under it) or `KeyConflict` (another text was)."""
        known = self._keys.get(key)
        if known is None:
            return None
        if known.text == text:
            return Replayed(known.clock)
        return conflict(key)

    def add(self, key: str, text: str, clock: int | None = None) -> None:
        """``text`` is accepted under ``key`` (a key already known keeps its first text)."""
        if key in self._keys:
            return
        self._keys[key] = Keyed(text, clock)
        if len(self._keys) > self.bound:
            self._keys.popitem(last=False)

    def sent(self, key: str, clock: int) -> None:
        """The text accepted under ``key`` was sent with Lamport clock ``clock``."""
        known = self._keys.get(key)
        if known is not None:
            known.clock = clock
