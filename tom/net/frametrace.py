"""The frame trace (``tom peer --trace FILE``): every frame this peer's links write and read, as written.

One JSON Lines file per peer. The first line names the peer::

    {"trace": 1, "peer": PID, "incarnation": N, "order": "lamport", "t": WALL}

then one line per batch of frames that went through a link, in the order the link saw them::

    {"t": WALL, "dir": "out"|"in", "link": PID, "inc": [MINE, THEIRS], "n": FIRST, "lines": [LINE, ...]}
                                                       (an "out" also has "q": when the peer sent it)
    {"t": WALL, "dir": "up", "link": PID, "inc": [MINE, THEIRS], "has": COUNT}     (a connection, after RESUME)
    {"t": WALL, "dir": "down", "link": PID}                                          (it broke)

``lines`` are the wire lines exactly as they crossed the link (without their newlines). Invariant: the
frames of a link are numbered as the link numbers them (`tom.net.links`: per pair of incarnations, the
k-th counted line is frame k, a run of messages one frame, RECEIVED lines not counted), and ``n`` is
the number of the first counted line of the record, so the receive of frame (A, inc_A, B, inc_B, k) in
B's trace pairs with its send in A's trace — the last send of it when a reconnect made A send it again.
An ``in`` record holds the chunk as read: a reader applies `tom.codec.frames.decode_lines`' rules
(RECEIVED lines skipped, nothing counted from the first line that is not a frame).

The file is written through a large buffer, flushed by `flush` (the peer calls it every half second)
and at `close`; it is bounded: past ``limit`` bytes it ends with ``{"dir": "end", "reason": "limit"}``
and records nothing more (one log line says so); a write that fails (a full disk) ends it with one
log line. The peer goes on either way: the trace is a record of the run, never a part of it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import IO, Any

log = logging.getLogger("tom.net.frametrace")

TRACE_LIMIT = 512 * 1024 * 1024
"""Bytes a trace may grow to by default (``--trace-limit``)."""

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class FrameTrace:
    """The open trace file of one peer (one incarnation)."""

    def __init__(self, path: Path, peer: str, incarnation: int, order: str, limit: int = TRACE_LIMIT,
                 delay: float = 0.0) -> None:
        self.path = path
        self.delay = delay  # the links' --delay: a frame is written that long after it was sent
        self.peer, self.incarnation = peer, incarnation
        self.limit = limit
        self.written = 0
        self._file: IO[str] | None = open(path, "a", encoding="utf-8", buffering=1 << 20)
        self._put({"trace": 1, "peer": peer, "incarnation": incarnation, "order": order, "delay": delay,
                   "t": time.time()})

    @property
    def open(self) -> bool:
        return self._file is not None

    def _put(self, record: dict[str, Any]) -> None:
        file = self._file
        if file is None:
            return
        line = _dumps(record) + "\n"
        try:
            file.write(line)
        except OSError as e:
            self._end(f"cannot write the trace {self.path}: {e.strerror or e}: no more frames recorded")
            return
        self.written += len(line)
        if self.written > self.limit:
            try:
                file.write(_dumps({"t": time.time(), "dir": "end", "reason": "limit"}) + "\n")
            except OSError:
                pass
            self._end(f"the trace {self.path} reached its limit of {self.limit // (1024 * 1024)} MiB "
                      "(--trace-limit): no more frames recorded")

    def _end(self, why: str) -> None:
        log.warning("%s", why)
        file, self._file = self._file, None
        try:
            file.close()  # type: ignore[union-attr]
        except OSError:
            pass

    def sent(self, link: str, theirs: int | None, first: int, data: bytes, late: float = 0.0) -> None:
        """``data`` (whole frames, ``first`` the number of its first) was written to ``link``, ``late``
        seconds after its release time; ``q`` is when the peer sent it (queued it on the link): the
        release time less the link's ``--delay`` (for a frame sent again after a reconnect: when it was
        queued again)."""
        now = time.time()
        self._put({"t": now, "q": now - max(late, 0.0) - self.delay, "dir": "out", "link": link,
                   "inc": [self.incarnation, theirs], "n": first,
                   "lines": data.decode("utf-8", "backslashreplace").split("\n")[:-1]})

    def received(self, link: str, theirs: int | None, first: int, lines: list[str | bytes]) -> None:
        """The chunk ``lines`` was read from ``link``; its first counted line is frame ``first``."""
        shown = [x if type(x) is str else x.decode("utf-8", "backslashreplace") for x in lines]  # type: ignore[union-attr]
        self._put({"t": time.time(), "dir": "in", "link": link, "inc": [self.incarnation, theirs], "n": first,
                   "lines": shown})

    def connected(self, link: str, theirs: int | None, has: int) -> None:
        self._put({"t": time.time(), "dir": "up", "link": link, "inc": [self.incarnation, theirs], "has": has})

    def disconnected(self, link: str) -> None:
        self._put({"t": time.time(), "dir": "down", "link": link})

    def flush(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as e:
                self._end(f"cannot write the trace {self.path}: {e.strerror or e}: no more frames recorded")

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as e:
                log.warning("cannot write the trace %s: %s", self.path, e.strerror or e)
            self._file = None
