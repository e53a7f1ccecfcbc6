"""A finished run, read back from its folder: every peer's frame trace (``tom peer --trace``) and output
file, as one list of events in a causal order.

What is read: the files of the folder (not its subfolders) whose first line is a trace header are
traces; the ``*.jsonl`` files whose records are TOM's output records are outputs; anything else (logs,
the neighbors file, keys) is left alone. A line that cannot be read is counted and named in
``Run.problems`` (one line each, at most a few), never a traceback.

Each wire line of a trace is one `FrameEvent` (a run of messages, one line, is one event). A receive
pairs with a send by ``(sender, sender's incarnation, receiver, receiver's incarnation, frame number)``;
a frame sent twice (again after a reconnect) pairs with the last send of it: a link sends a frame again
only when the receiver's RESUME said it did not have it, so no clock is needed to choose.
`Run.events` lists frames and deliveries (`Delivered`, from the outputs) so that every receive comes
after the send it pairs with, and each peer's events keep their own order: a causal order, whatever
the hosts' clocks say (they are used only to interleave).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codec.frames import Frame, FrameError, Messages, Received, decode_line

PROBLEMS_SHOWN = 5


@dataclass(frozen=True, slots=True)
class FrameEvent:
    """One wire line written (``dir`` "out") or read ("in") by ``peer`` on its link to ``link``."""

    t: float
    peer: str
    dir: str
    link: str
    mine: int | None  # incarnations: the peer's, the link's other end's
    theirs: int | None
    n: int  # the frame's number on the link (per pair of incarnations)
    line: str
    frames: tuple[Frame, ...]  # what the line holds (a run: its messages)

    @property
    def key(self) -> tuple:
        """What pairs a send with its receive."""
        if self.dir == "out":
            return (self.peer, self.mine, self.link, self.theirs, self.n)
        return (self.link, self.theirs, self.peer, self.mine, self.n)


@dataclass(frozen=True, slots=True)
class Delivered:
    """One output record of ``peer``: a message or a view, delivered at ``t``."""

    t: float
    peer: str
    record: dict[str, Any]


@dataclass
class Run:
    folder: Path
    peers: list[str]
    order: str
    events: list[FrameEvent | Delivered]  # a causal order (see the module's docstring)
    pairs: dict[int, int]  # index of a receive in ``events`` -> index of its send
    traces: list[Path] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def start(self) -> float:
        return min((e.t for e in self.events), default=0.0)

    @property
    def end(self) -> float:
        return max((e.t for e in self.events), default=0.0)


class RunError(Exception):
    """A folder that holds no run (one line, for the user)."""


def _first_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.readline(65536).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _is_trace(first: str) -> bool:
    return first.startswith('{"trace":')  # (json.dumps' own spacing: the header is written that way)


def _is_output(first: str) -> bool:
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and "peer" in record and "index" in record


def _frames_of(line: str) -> tuple[Frame, ...] | None:
    """The frames of one wire line; None for a RECEIVED line (link control, not counted)."""
    frame = decode_line(line)
    if type(frame) is Received:
        return None
    if type(frame) is Messages:
        return tuple(frame.messages())
    return (frame,)


def read_trace(path: Path, problems: list[str]) -> tuple[str | None, str | None, list[FrameEvent]]:
    """``(peer, order, frame events)`` of one trace file (`tom.net.frametrace`'s format), in its order."""
    peer = order = None
    mine: int | None = None
    events: list[FrameEvent] = []
    passes: dict[str, list[tuple[float, int]]] = {}  # step mode: per link, (when, frames) that passed the gate
    with open(path, "rb") as f:
        lines = iter(enumerate(f, 1))
        for number, raw in lines:
            if raw.startswith(b"{"):
                try:
                    head = json.loads(raw)
                    peer, order, mine = head["peer"], head.get("order"), head.get("incarnation")
                except (ValueError, KeyError, TypeError):
                    problems.append(f"{path}:{number}: not a trace header")
                continue
            fields = raw.split()
            kind = fields[0] if fields else b""
            try:
                if kind == b"O":
                    t, link, theirs, first, count = float(fields[2]), fields[3], fields[4], int(fields[5]), int(fields[6])
                elif kind == b"I":
                    t, link, theirs, first, count = float(fields[1]), fields[2], fields[3], int(fields[4]), int(fields[5])
                elif kind == b"G":
                    passes.setdefault(fields[2].decode(), []).append((float(fields[1]), int(fields[3])))
                    continue
                else:
                    continue  # U, D, E: connections, for the eye
            except (IndexError, ValueError):
                problems.append(f"{path}:{number}: not a trace record (a torn last line?)")
                continue
            body = [line for _, line in itertools.islice(lines, count)]
            if peer is None:
                continue
            d = "out" if kind == b"O" else "in"
            other = link.decode()
            inc = None if theirs == b"-" else int(theirs)
            n = first
            for line in body:
                text = line.rstrip(b"\n").decode("utf-8", "backslashreplace")
                try:
                    frames = _frames_of(text)
                except FrameError:
                    if d == "in":
                        break  # a link fault: nothing after it is counted (`decode_lines`)
                    continue
                if frames is None:
                    continue
                events.append(FrameEvent(t, peer, d, other, mine, inc, n, text, frames))
                n += 1
    return peer, order, _at_the_gate(events, passes) if passes else events


def _at_the_gate(events: list[FrameEvent], passes: dict[str, list[tuple[float, int]]]) -> list[FrameEvent]:
    """Step mode: a frame read is received when the gate let it through to the core (its ``G`` record:
    a link's frames pass in the order they were read), not when the link read it."""
    out = []
    cursor = {link: (iter(p), 0.0, 0) for link, p in passes.items()}  # (records, when, frames left in it)
    for e in events:
        if e.dir == "in" and e.link in cursor:
            records, when, left = cursor[e.link]
            need, first = len(e.frames), None
            while need:
                if not left:
                    nxt = next(records, None)
                    if nxt is None:  # (the trace ended before the gate let it through)
                        break
                    when, left = nxt
                first = when if first is None else first
                took = min(left, need)
                left, need = left - took, need - took
            cursor[e.link] = (records, when, left)
            if first is not None:
                e = dataclasses.replace(e, t=max(first, e.t))
        out.append(e)
    return out


def read_output(path: Path, problems: list[str]) -> list[Delivered]:
    out: list[Delivered] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                r = json.loads(raw)
                out.append(Delivered(float(r["delivered_at"]), r["peer"], r))
            except (ValueError, KeyError, TypeError):
                problems.append(f"{path}:{number}: not an output record")
    return out


def load_run(folder: Path) -> Run:
    """Read ``folder``'s traces and outputs (see the module's docstring); RunError if it holds neither."""
    if not folder.is_dir():
        raise RunError(f"{folder}: not a folder (give a run folder, e.g. runs/<timestamp>/)")
    problems: list[str] = []
    traces, outputs = [], []
    for path in sorted(folder.iterdir()):
        if not path.is_file():
            continue
        first = _first_line(path)
        if _is_trace(first):
            traces.append(path)
        elif path.suffix == ".jsonl" and _is_output(first):
            outputs.append(path)
    if not traces and not outputs:
        raise RunError(f"{folder}: no frame trace (tom peer --trace) and no output file in it")
    per_peer: dict[str, list[FrameEvent | Delivered]] = {}
    orders = set()
    for path in traces:
        peer, order, events = read_trace(path, problems)
        if peer is not None:
            per_peer.setdefault(peer, []).extend(events)
            orders.add(order)
    for path in outputs:
        for d in read_output(path, problems):
            per_peer.setdefault(d.peer, []).append(d)
            if d.record.get("kind") == "view" and d.record.get("order"):
                orders.add(d.record["order"])
    for peer, events in per_peer.items():  # a trace and an output: interleaved by the peer's own clock
        events.sort(key=lambda e: e.t)
    known = sorted(o for o in orders if o)
    if len(known) > 1:
        problems.append(f"the files disagree about the order: {', '.join(known)} (drawn as {known[0]})")
    events, pairs = causal_merge(per_peer)
    return Run(folder, sorted(per_peer), known[0] if known else "lamport", events, pairs, traces, outputs,
               problems)


def causal_merge(per_peer: dict[str, list[FrameEvent | Delivered]]) -> tuple[list[FrameEvent | Delivered], dict[int, int]]:
    """All peers' events in one list: each peer's in its order, every receive after the send it pairs
    with (the last send of its key), the rest by time.
    Returns the list and, for each paired receive, the index of its send."""
    sends: dict[tuple, list[tuple[float, str, int]]] = {}  # key -> (t, peer, position) of each send
    for peer, events in per_peer.items():
        for i, e in enumerate(events):
            if type(e) is FrameEvent and e.dir == "out":
                sends.setdefault(e.key, []).append((e.t, peer, i))
    wanted: dict[tuple[str, int], tuple[str, int]] = {}  # (peer, position) of a receive -> its send's
    for peer, events in per_peer.items():
        for i, e in enumerate(events):
            if type(e) is FrameEvent and e.dir == "in":
                options = sends.get(e.key)
                if options:  # the last: a frame is sent again only if the receiver did not have it (RESUME)
                    _, sp, si = options[-1]
                    wanted[(peer, i)] = (sp, si)
    done: dict[tuple[str, int], int] = {}  # (peer, position) -> index in the merged list
    merged: list[FrameEvent | Delivered] = []
    pairs: dict[int, int] = {}
    at = {peer: 0 for peer in per_peer}
    heap = [(events[0].t, peer) for peer, events in per_peer.items() if events]
    heapq.heapify(heap)
    waiting: dict[tuple[str, int], list[str]] = {}  # a send not merged yet -> peers whose head waits for it
    total = sum(len(v) for v in per_peer.values())
    while len(merged) < total:
        if not heap:  # every head waits for a send that waits in turn: take the earliest as unpaired
            blocked = min((per_peer[p][at[p]].t, p) for p in per_peer if at[p] < len(per_peer[p]))
            peer = blocked[1]
            wanted.pop((peer, at[peer]), None)
            for ps in waiting.values():
                if peer in ps:
                    ps.remove(peer)
            heap.append(blocked)
        _, peer = heapq.heappop(heap)
        i = at[peer]
        send = wanted.get((peer, i))
        if send is not None and send not in done:
            waiting.setdefault(send, []).append(peer)
            continue
        done[(peer, i)] = len(merged)
        if send is not None:
            pairs[len(merged)] = done[send]
        merged.append(per_peer[peer][i])
        at[peer] = i + 1
        if i + 1 < len(per_peer[peer]):
            heapq.heappush(heap, (per_peer[peer][i + 1].t, peer))
        for p in waiting.pop((peer, i), ()):
            heapq.heappush(heap, (per_peer[p][at[p]].t, p))
    return merged, pairs
