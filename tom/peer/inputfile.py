"""Headless input from a file (``tom peer --input FILE``): every non-empty line is one message, and the
file is followed as it grows (``tail -f``); its end is not the end of the input.

`LineReader` turns bytes read from an offset into complete lines, each with the offset just past it
(no I/O). `InputFile` reads the file in bounded reads from where the reader stands and, at its end,
tells a file replaced (another inode: read from its beginning) from one truncated in place (smaller
than where reading stands: said once, then waited for). `follow` is the trio task.

What counts once (with ``--data``): each batch of texts goes to the processor with, per text, the
file's inode and the offset where reading goes on after it; a durable peer writes both with the text
in ``accepted.log`` (`tom.peer.durable.Durable.accept`), and a restarted peer goes on from the last one
written (``resume``). A line read and not accepted when the process dies is read again; a line
accepted is never read again.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

import trio

from ..core import check_text
from ..errors import ConfigError, UsageError
from .events import EventSink, SendTexts

log = logging.getLogger("tom.peer.input")

READ_SIZE = 65536
"""Bytes read at a time: a batch of lines is at most this much (or one line up to `MAX_LINE`)."""

MAX_LINE = 128 * 1024
"""Bytes of a line held while its newline has not come: past this it cannot be a message (a frame
holds at most 65,536 bytes) and is dropped up to its newline."""

POLL = 0.05
"""Seconds between two looks at a file that has not grown."""


def _text(line: bytes) -> str:
    """A line's text: without the ``\\r`` of a CRLF ending; bytes that are not UTF-8 replaced."""
    return (line[:-1] if line.endswith(b"\r") else line).decode("utf-8", "replace")


class LineReader:
    """Complete lines out of bytes fed in file order, starting at byte ``offset`` of the file.

    Invariant: ``offset`` is where the first line not complete yet starts; ``at`` is where the next
    bytes fed start (``offset`` plus what waits for its newline)."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.pending = bytearray()  # the start of a line whose newline has not come yet
        self.skipped = 0  # bytes of a line over MAX_LINE dropped so far (0: none)

    @property
    def at(self) -> int:
        return self.offset + len(self.pending) + self.skipped

    def restart(self, offset: int = 0) -> None:
        """Read another file (or the same again) from ``offset``."""
        self.offset, self.skipped = offset, 0
        self.pending.clear()

    def feed(self, data: bytes) -> list[tuple[str | None, int]]:
        """The lines ``data`` completes, in order: ``(text, offset just past its newline)``; text None
        for a line over `MAX_LINE` (dropped)."""
        parts = data.split(b"\n")
        rest = parts.pop()
        out: list[tuple[str | None, int]] = []
        at = self.at
        for k, part in enumerate(parts):
            at += len(part) + 1
            if k == 0 and self.skipped:
                out.append((None, at))
            elif k == 0 and self.pending:
                out.append((_text(bytes(self.pending) + part), at))
            else:
                out.append((_text(part), at))
        if parts:
            self.restart(at)
        if self.skipped:
            self.skipped += len(rest)
        else:
            self.pending += rest
            if len(self.pending) > MAX_LINE:
                self.skipped = len(self.pending)
                self.pending.clear()
        return out


class InputFile:
    """``path`` open for following, from the start or, with ``resume`` (the inode and offset a data
    folder recorded), from where a run before stopped. ConfigError (one line) if it cannot be read.
    ``said``: what to tell the user at start (one line each)."""

    def __init__(self, path: Path, resume: tuple[int, int] | None = None) -> None:
        self.path = path
        self.said: list[str] = []
        self._fd = -1
        self.inode = self._open()
        offset = 0
        if resume is not None:
            inode, offset = resume
            if inode != self.inode:
                self.said.append(f"--input {path}: another file than the one this data folder read before (its "
                                 "inode changed): reading it from its beginning")
                offset = 0
        self.reader = LineReader(offset)
        self._short = False  # said: the file is smaller than where reading stands
        self._gone = False  # said: the path names no file

    def _open(self) -> int:
        """Open ``path`` as the file followed; its inode."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise ConfigError(f"--input {self.path}: cannot read it: {e.strerror or e}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            why = "Is a directory" if stat.S_ISDIR(st.st_mode) else \
                "not a regular file (give a pipe's lines on stdin instead)"
            raise ConfigError(f"--input {self.path}: cannot read it: {why}")
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        return st.st_ino

    @property
    def offset(self) -> int:
        """Where the first line not read yet starts."""
        return self.reader.offset

    def read(self) -> list[tuple[str | None, int]]:
        """The lines completed since the last call, from one read of at most `READ_SIZE` bytes ([]: none
        now). OSError if the file cannot be read."""
        data = os.pread(self._fd, READ_SIZE, self.reader.at)
        return self.reader.feed(data) if data else []

    def at_end(self) -> str | None:
        """At the end of what could be read: look at the path again. A file of another inode there: read
        it from its beginning. The file smaller than where reading stands (truncated in place): wait
        until it grows past it. A line to say when either is first seen (or the path names no file)."""
        try:
            st = os.stat(self.path)
        except OSError as e:
            if self._gone:
                return None
            self._gone = True
            return f"--input {self.path}: {e.strerror or e}: waiting for it (the file open before is still followed)"
        self._gone = False
        if st.st_ino != self.inode:
            try:
                self.inode = self._open()
            except ConfigError as e:
                return f"{e}: waiting for it"
            self.reader.restart(0)
            self._short = False
            return f"--input {self.path}: replaced by another file: reading the new file from its beginning"
        size = os.fstat(self._fd).st_size
        if size >= self.reader.at:
            self._short = False
            return None
        if self._short:
            return None
        self._short = True
        return (f"--input {self.path}: the file is smaller than where reading stands ({size} bytes, reading at "
                f"byte {self.reader.at}): truncated in place; waiting for it to grow past that point")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


async def follow(send: EventSink, me: str, source: InputFile, busy: Callable[[], bool] = lambda: False,
                 poll: float = POLL) -> None:
    """Send each non-empty line of ``source`` as one message, in order, following the file as it grows;
    never returns (cancel it). While ``busy()`` (too much undelivered already) the file is not read,
    as stdin is not (`tom.peer.ui.headless`). A line that cannot be a message gets one warning and is
    not sent."""
    failing = False
    while True:
        while busy():
            await trio.sleep(0.005)
        try:
            lines = source.read()
        except OSError as e:
            if not failing:
                log.warning("--input %s: cannot read it: %s; trying again", source.path, e.strerror or e)
            failing = True
            await trio.sleep(poll)
            continue
        failing = False
        if not lines:
            said = source.at_end()
            if said is not None:
                log.warning("%s", said)
            await trio.sleep(poll)
            continue
        texts: list[str] = []
        marks: list[tuple[int, int]] = []
        for text, end in lines:
            if text is None:
                log.warning("--input %s: the line ending at byte %d is over %d bytes: not sent", source.path, end,
                            MAX_LINE)
                continue
            if not text:
                continue
            if len(text) > 8000:  # (shorter ones always fit a frame)
                try:
                    check_text(me, text)
                except UsageError as e:
                    log.warning("--input %s: the line ending at byte %d: %s", source.path, end, e)
                    continue
            texts.append(text)
            marks.append((source.inode, end))
        if texts:
            marks[-1] = (source.inode, lines[-1][1])  # (past the lines dropped after it too)
            await send.send(SendTexts(texts, inputs=marks))
