"""A tool's deliveries as it wrote or printed them (pure).

The output file's default line form is the verifier's (``analysis/schema.py``): ``[<n> ACKs on
]MESSAGE-<clock>-<from>-<text>``; a student's ``tom-grade.toml`` may give another (``[output]
line_regex`` with named groups ``clock``, ``sender``, ``text``, and ``acks`` if it has one). Printed
``Delivered: MESSAGE-...`` lines on the terminal are read the same way, so that a tool that writes its
file only when it quits can still be watched live.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_LINE = r"^(?:(?P<acks>\d+) ACKs? on )?MESSAGE-(?P<clock>\d+)-(?P<sender>.+?:\d+)-(?P<text>.*)$"
_PRINTED = re.compile(r"(?i)deliver\w*\W+(?:(?P<acks>\d+) ACKs? on )?MESSAGE-(?P<clock>\d+)-(?P<sender>.+?:\d+)-"
                      r"(?P<text>[^\r\n]*)")


@dataclass(frozen=True, slots=True)
class Delivered:
    """One delivery: ``line_no`` counts from 1 in its file (0: seen on the terminal)."""

    clock: int
    sender: str
    text: str
    acks: int | None = None
    line_no: int = 0

    @property
    def key(self) -> tuple[int, str]:
        return (self.clock, self.sender)

    def frame(self) -> str:
        return f"MESSAGE-{self.clock}-{self.sender}-{self.text}"


def check_line_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled; ValueError naming what is missing."""
    compiled = re.compile(pattern)
    missing = {"clock", "sender", "text"} - set(compiled.groupindex)
    if missing:
        raise ValueError(f"line_regex needs the named groups clock, sender and text (missing: "
                         f"{', '.join(sorted(missing))})")
    return compiled


def parse_output(text: str, pattern: str = DEFAULT_LINE) -> tuple[list[Delivered], list[tuple[int, str]]]:
    """The deliveries of an output file, and the (line number, line) pairs that are none."""
    regex = check_line_regex(pattern)
    found: list[Delivered] = []
    other: list[tuple[int, str]] = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        m = regex.match(line)
        if m is None or not m["clock"].isdigit():
            other.append((no, line))
            continue
        acks = m.groupdict().get("acks")
        found.append(Delivered(int(m["clock"]), m["sender"], m["text"], int(acks) if acks else None, no))
    return found, other


def printed_deliveries(terminal: str) -> list[Delivered]:
    """``Delivered: MESSAGE-...`` lines (any word starting with "deliver") in a terminal transcript."""
    return [Delivered(int(m["clock"]), m["sender"], m["text"].rstrip(), int(m["acks"]) if m["acks"] else None)
            for m in _PRINTED.finditer(terminal)]


def texts(deliveries: list[Delivered]) -> list[str]:
    return [d.text for d in deliveries]
