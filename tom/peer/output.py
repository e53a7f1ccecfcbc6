"""The output file: JSON Lines, one record per delivered event, schema in docs/output-format.md.

Invariant: the file holds whole lines only, one per event this peer recorded as delivered. A write
that fails (a full disk) is undone to the last whole line and raises OutputError; after that the file
takes nothing more, so nothing is ever reported delivered that is not on disk.

A peer restarted on its old file (a new incarnation, same pid) goes on after it: ``index`` keeps
counting the file's records, and a torn last line the killed process left (half a record, never a
delivery on disk) is cut off first. The file then reads as one member removed and admitted again,
which is how the verifier checks it.
"""

from __future__ import annotations

import json
import os
from json.encoder import encode_basestring, encode_basestring_ascii  # what json.dumps(str) calls
from collections.abc import Iterable
from pathlib import Path

from ..core import Delivery, ViewDelivery
from ..core.handout import HandoutDelivery
from ..errors import ConfigError, OutputError

SCHEMA_VERSION = 2
_LINE_BREAKS = "\x85\u2028\u2029"


def record(d: Delivery | ViewDelivery, peer: str, delivered_at: float) -> dict:
    """The schema-v2 record of a delivered message or view change (docs/output-format.md)."""
    if type(d) is ViewDelivery:
        view = {
            "v": SCHEMA_VERSION,
            "kind": "view",
            "index": d.index,
            "peer": peer,
            "clock": d.clock,
            "pid": d.pid,
            "delivered_at": round(delivered_at, 6),
            "view": d.view,
            "members": list(d.members),
            "joined": list(d.joined),
            "left": list(d.left),
            "removed": list(d.removed),
            "order": d.order,
        }
        if d.order == "sequencer":
            view["seq"] = 0  # a view record sorts before the view's first message, (view, 0)
        return view
    message = {
        "v": SCHEMA_VERSION,
        "kind": "message",
        "index": d.index,
        "peer": peer,
        "clock": d.clock,
        "pid": d.pid,
        "text": d.text,
        "sent_at": d.sent_at,
        "delivered_at": round(delivered_at, 6),
        "view": d.view,
    }
    if d.seq is not None:
        message["seq"] = d.seq
    if d.vc is not None:
        message["vc"] = dict(d.vc)
    return message


def handout_record(d: HandoutDelivery, peer: str, delivered_at: float) -> dict:
    """The record of a message delivered on the handout's wire: no send time (its frames carry none),
    the ``from`` as written, the ACKs it was released with, and ``"wire": "handout"``
    (docs/output-format.md)."""
    return {"v": SCHEMA_VERSION, "kind": "message", "index": d.index, "peer": peer, "clock": d.clock,
            "pid": d.pid, "from": d.origin, "text": d.text, "delivered_at": round(delivered_at, 6), "view": 1,
            "wire": "handout", "acks": d.acks}


class OutputFile:
    """Appends records and flushes after each batch, so a delivered message is on disk at once."""

    def __init__(self, path: str | Path, peer: str) -> None:
        self.path = Path(path)
        self.peer = peer
        try:
            if self.path.is_dir():
                raise IsADirectoryError("it is a directory")
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            reason = e.strerror or str(e)
            raise ConfigError(f"{self.path}: cannot write the output file ({reason})") from None
        self._size = os.fstat(self._fd).st_size
        self.offset = 0  # records of an earlier run in the file: indexes go on after them
        self.resumed: str | None = None  # one line saying so, for the log
        if self._size:
            self._resume()
        self.failed: OutputError | None = None
        self.written = 0
        self._peer = json.dumps(peer)
        self._head = f'{{"v":{SCHEMA_VERSION},"kind":"message","index":'
        self._quoted: dict[str, str] = {}

    def _resume(self) -> None:
        """Go on after the file's last whole record (see the module docstring)."""
        size, block = self._size, 1 << 16
        tail, pos, whole, last = b"", size, 0, None
        try:
            with open(self.path, "rb") as f:
                while pos > 0:
                    step = min(block, pos)
                    pos -= step
                    f.seek(pos)
                    tail = f.read(step) + tail
                    end = tail.rfind(b"\n")
                    if end < 0:
                        continue  # no whole line yet
                    start = tail.rfind(b"\n", 0, end)
                    if start < 0 and pos > 0:
                        continue  # the last whole line starts further back
                    whole, last = pos + end + 1, tail[start + 1:end]
                    break
            torn = size - whole
            if torn:
                os.ftruncate(self._fd, whole)  # type: ignore[arg-type]
                self._size = whole
        except OSError as e:
            raise ConfigError(f"{self.path}: cannot read the output file to go on after it "
                              f"({e.strerror or e})") from None
        try:
            self.offset = int(json.loads(last)["index"]) if last else 0
        except (ValueError, TypeError, KeyError):
            self.offset = 0
        note = (f"output file {self.path}: going on after record {self.offset} of an earlier run"
                if self.offset else f"output file {self.path}: its last line is no TOM record; "
                "indexes start at 1")
        if torn:
            note += f" (its torn last line, {torn} bytes, cut off)"
        self.resumed = note

    def write(self, deliveries: Iterable[Delivery | ViewDelivery | HandoutDelivery], delivered_at: float) -> None:
        """Append one line per delivery and flush. Message lines are built by hand (the hot path);
        `record` is the reference they must equal once parsed (tested)."""
        dumps, quoted = json.dumps, self._quoted
        stamp = f"{delivered_at:.6f}".rstrip("0").rstrip(".")
        head, offset = self._head, self.offset
        lines = []
        for d in deliveries:
            if type(d) is Delivery:
                pid = quoted.get(d.pid)
                if pid is None:
                    pid = quoted[d.pid] = dumps(d.pid)
                sent = "null" if d.sent_at is None else repr(d.sent_at)
                text = d.text
                # raw non-ASCII keeps files readable; but U+0085/U+2028/U+2029 split lines for some readers
                if text.isascii() or not any(c in text for c in _LINE_BREAKS):
                    text = encode_basestring(text)  # = json.dumps(text, ensure_ascii=False)
                else:
                    text = encode_basestring_ascii(text)
                if d.seq is None and d.vc is None:  # lamport
                    tail = "}\n"
                elif d.vc is None:
                    tail = f',"seq":{d.seq}}}\n'
                else:  # (pid -> int: what json.dumps(vc, separators=(",", ":")) writes, without it)
                    parts = []
                    for member, count in d.vc.items():
                        key = quoted.get(member)
                        if key is None:
                            key = quoted[member] = dumps(member)
                        parts.append(f"{key}:{count}")
                    vc = ",".join(parts)
                    tail = f',"vc":{{{vc}}}}}\n' if d.seq is None else f',"seq":{d.seq},"vc":{{{vc}}}}}\n'
                lines.append(f'{head}{d.index + offset},"peer":{self._peer},"clock":{d.clock},"pid":{pid},'
                             f'"text":{text},"sent_at":{sent},'
                             f'"delivered_at":{stamp},"view":{d.view}{tail}')
            elif type(d) is HandoutDelivery:
                rec = handout_record(d, self.peer, delivered_at)
                rec["index"] += offset
                lines.append(dumps(rec, ensure_ascii=any(c in d.text for c in _LINE_BREAKS),
                                   separators=(",", ":")) + "\n")
            else:
                view = record(d, self.peer, delivered_at)
                view["index"] += offset
                lines.append(dumps(view, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._append("".join(lines).encode())
        self.written += len(lines)

    def _append(self, data: bytes) -> None:
        """Write ``data`` whole, or raise OutputError with the file cut back to its last whole line."""
        if self.failed is not None:
            raise self.failed
        fd = self._fd
        assert fd is not None, "output file closed"
        n = 0
        try:
            while n < len(data):
                n += os.write(fd, memoryview(data)[n:])
        except OSError as e:
            if n:
                try:
                    os.ftruncate(fd, self._size)  # never leave half a line behind
                except OSError:
                    pass
            self.failed = OutputError(f"cannot write {self.path}: {e.strerror or e}")
            raise self.failed from None
        self._size += n

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass
