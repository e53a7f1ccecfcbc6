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
from collections.abc import Sequence
from pathlib import Path

from ..core import Delivery, ViewDelivery
from ..core.handout import HandoutDelivery
from ..errors import ConfigError, OutputError
from .lines import SCHEMA_VERSION, handout_record, lines, record

__all__ = ["NoOutput", "OutputFile", "SCHEMA_VERSION", "handout_record", "record"]


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

    def write(self, deliveries: Sequence[Delivery | ViewDelivery | HandoutDelivery], delivered_at: float) -> None:
        """Append one line per delivery (`tom.peer.lines`) and flush."""
        out = lines(deliveries, self.peer, self._peer, self.offset, delivered_at, self._quoted)
        self._append("".join(out).encode())
        self.written += len(out)

    def render(self, deliveries: Sequence[Delivery | ViewDelivery], delivered_at: float) -> list[str]:
        """The lines `write` would append for ``deliveries`` (each with its newline)."""
        return lines(deliveries, self.peer, self._peer, self.offset, delivered_at, self._quoted)

    def append_lines(self, out: Sequence[str]) -> None:
        """Append lines made by `render` (or records of the same form) and flush."""
        self._append("".join(out).encode())
        self.written += len(out)

    def append_bytes(self, data: bytes, count: int) -> None:
        """Append ``count`` whole lines, already encoded (``data`` ends with a newline), and flush."""
        self._append(data)
        self.written += count

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


class NoOutput:
    """No output file (an embedded peer, `tom.library`): every write succeeds and is only counted, so a
    delivery is handed to the program at once."""

    resumed: str | None = None
    failed: OutputError | None = None
    peer = ""

    def __init__(self) -> None:
        self.written = 0
        self.offset = 0
        self._quoted: dict[str, str] = {}

    def render(self, deliveries: Sequence[Delivery | ViewDelivery], delivered_at: float) -> list[str]:
        return lines(deliveries, self.peer, json.dumps(self.peer), self.offset, delivered_at, self._quoted)

    def append_lines(self, out: Sequence[str]) -> None:
        self.written += len(out)

    def append_bytes(self, data: bytes, count: int) -> None:
        self.written += count

    def write(self, deliveries: Sequence[Delivery | ViewDelivery | HandoutDelivery], delivered_at: float) -> None:
        self.written += len(deliveries)

    def close(self) -> None:
        pass
