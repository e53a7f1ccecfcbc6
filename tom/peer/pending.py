"""``pending.log``'s records: the messages the core took in a step (`tom.peer.durable.Durable.persist`),
a line each, ``view clock pid sent_at text``. Written once per message a member takes, before its ACK
goes out, so this runs on the busy path: compiled with the core (`scripts/build-compiled`).

A line holds one message: its text is escaped as on the wire (`escape_text`). The send time is whole
microseconds (what the wire carries: `MESSAGE@`), ``None`` when there is none, or, for a time too far
off for a float to hold its microseconds, the float as Python writes it; a folder of an older TOM wrote
every time as the float, and reads the same."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final, Optional, Tuple

from ..codec.frames import escape_text, unescape_text

Taken = Tuple[int, int, str, str, Optional[float]]
"""A message the core took: (view, clock, pid, text, sent_at)."""

MICROS_BELOW: Final = 9e9
"""Send times below this many seconds are written as whole microseconds: the count stays below 2**53,
so the float read back is the one written."""


def pending_record(taken: Sequence[Taken]) -> bytes:
    """A step's taken messages as one pending.log record (module docstring)."""
    escape = False
    for m in taken:  # (most steps have nothing to escape)
        t = m[3]
        if "\\" in t or "\n" in t or "\r" in t:
            escape = True
            break
    lines: list[str] = []
    for v, c, p, t, s in taken:
        if escape:
            t = escape_text(t)
        if s is None:
            lines.append(f"{v} {c} {p} None {t}")
        elif s < MICROS_BELOW:
            lines.append(f"{v} {c} {p} {round(s * 1e6)} {t}")
        else:
            lines.append(f"{v} {c} {p} {s!r} {t}")
    return "\n".join(lines).encode()


def sent_at(s: str) -> Optional[float]:
    """A line's send time, as `pending_record` wrote it."""
    if s.isdigit():
        return int(s) / 1e6
    return None if s == "None" else float(s)


def pending_lines(payload: bytes) -> Iterator[Tuple[int, int, str, str, str]]:
    """A record's lines as written: ``(view, clock, pid, sent_at, text)``, the last two still as text
    (`as_taken` reads them: a caller may not need them)."""
    for line in payload.decode().split("\n"):
        v, c, p, s, t = line.split(" ", 4)
        yield int(v), int(c), p, s, t


def check_pending(payload: bytes) -> int:
    """The number of taken messages in a record, its lines' heads checked (`read_pending` decodes the
    texts too, when they are needed)."""
    n = 0
    for line in pending_lines(payload):
        sent_at(line[3])
        n += 1
    return n


def as_taken(v: int, c: int, p: str, s: str, t: str) -> Taken:
    """A line of `pending_lines` as the message it holds."""
    return v, c, p, unescape_text(t), sent_at(s)


def read_pending(payload: bytes) -> list[Taken]:
    """A record's messages."""
    return [as_taken(*line) for line in pending_lines(payload)]
