"""How ``history.log`` holds a member's events: a record holds one write's events (`Durable._append`),
a JSON line each, joined by newlines (a JSON line holds none), so a write's framing and checksum are
paid once. A write is cut into several records where a clean-up may cut (`Durable._mark`): every such
place starts a record, and a clean-up (`RecordLog.cut_head`) cuts only there. A folder whose records
hold one event each reads the same.

Each event's position is the offset of the record that holds it: the offsets of the events are
non-decreasing, and an event starts its record when its offset is not the one before it."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from tom.durable.log import LogRead, RecordLog


def events(read: LogRead) -> tuple[list[bytes], list[int]]:
    """The events of the records ``read`` found, and the offset of the record holding each."""
    lines: list[bytes] = []
    offsets: list[int] = []
    for at, payload in zip(read.offsets, read.records):
        if b"\n" in payload:
            part = payload.split(b"\n")
            lines += part
            offsets += [at] * len(part)
        else:
            lines.append(payload)
            offsets.append(at)
    return lines, offsets


def starts_record(offsets: Sequence[int], event: int) -> bool:
    """Whether event number ``event`` is the first of its record."""
    return event == 0 or offsets[event] != offsets[event - 1]


def records(lines: Sequence[str], starts: Sequence[int]) -> tuple[bytes, list[bytes | memoryview], list[int]]:
    """A write of ``lines`` (events, each ending in a newline): the bytes of them all (for the output
    file), the payloads of its records, and how many events each holds; a record starts at each of
    ``starts`` (ascending positions in ``lines``) and at the first line."""
    n = len(lines)
    cuts = [s for s in starts if 0 < s < n]
    if not cuts:
        data = "".join(lines).encode()
        return data, [memoryview(data)[:-1]], [n]  # (not copied)
    payloads: list[bytes | memoryview] = []
    counts: list[int] = []
    prev = 0
    for cut in [*cuts, n]:
        payloads.append("".join(lines[prev:cut])[:-1].encode())
        counts.append(cut - prev)
        prev = cut
    return b"\n".join(payloads) + b"\n", payloads, counts


def read_events(log: RecordLog, offsets: Sequence[int], first: int, last: int) -> list[bytes]:
    """Events ``first`` up to (not including) ``last`` of ``log``, read from the disk (``offsets``: each
    event's record, as `events` and `RecordLog.append` give them)."""
    if last <= first:
        return []
    start = offsets[first]
    skip = first - bisect_left(offsets, start, 0, first)
    end = log.size
    if last < len(offsets):
        after = bisect_right(offsets, offsets[last - 1], last - 1)  # (the record after the one of event last - 1)
        if after < len(offsets):
            end = offsets[after]
    out: list[bytes] = []
    for payload in log.read_records(start, end):
        out += payload.split(b"\n")
    return out[skip:skip + last - first]
