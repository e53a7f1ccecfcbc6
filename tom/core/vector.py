"""A causal message's vector timestamp as a delivery hands it out: a read-only ``{pid: count}``.

Invariants: ``members`` is the view's members in pid order and ``counts`` has one count per member, in
that order; the mapping leaves out the members with a count of 0 (the output's form,
docs/output-format.md), so it equals the dict the output file holds. It is built once per delivery
from the message's counts as they are (no dict is made unless asked: the output lines read the
counts directly).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import final


@final
class Vector:
    """``{pid: count}`` over ``members`` and ``counts`` (zero counts left out); compares equal to the
    dict with the same items."""

    __slots__ = ("members", "counts")

    def __init__(self, members: tuple[str, ...] = (), counts: tuple[int, ...] = ()) -> None:
        if len(members) != len(counts):
            raise ValueError(f"{len(counts)} counts for {len(members)} members")
        self.members = members
        self.counts = counts

    def as_dict(self) -> dict[str, int]:
        return {p: c for p, c in zip(self.members, self.counts) if c}

    def __getitem__(self, pid: str) -> int:
        for p, c in zip(self.members, self.counts):
            if p == pid and c:
                return c
        raise KeyError(pid)

    def get(self, pid: str, default: int | None = None) -> int | None:
        return self.as_dict().get(pid, default)

    def __contains__(self, pid: object) -> bool:
        return pid in self.as_dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return sum(1 for c in self.counts if c)

    def keys(self) -> KeysView[str]:
        return self.as_dict().keys()

    def values(self) -> ValuesView[int]:
        return self.as_dict().values()

    def items(self) -> ItemsView[str, int]:
        return self.as_dict().items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Vector):
            return self.as_dict() == other.as_dict()
        if isinstance(other, Mapping):
            return self.as_dict() == dict(other)
        return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        return repr(self.as_dict())

    def __reduce__(self) -> tuple[type, tuple[tuple[str, ...], tuple[int, ...]]]:
        return (Vector, (self.members, self.counts))


Mapping.register(Vector)
