"""The frame trace (``tom peer --trace FILE``): every frame this peer's links write and read, as written.

One file per peer, appended to (each incarnation starts with its own first line). Its first line names
the peer, in JSON::

    {"trace": 1, "peer": PID, "incarnation": N, "order": "lamport", "delay": SECONDS, "t": WALL}

then one record per batch of frames that went through a link, in the order the link saw them: a line
of space-separated fields, followed by the batch's wire lines exactly as they crossed the link::

    O WALL SENT LINK THEIRS FIRST COUNT     COUNT lines written to LINK; SENT: when the peer sent them
    I WALL LINK THEIRS FIRST COUNT          COUNT lines read from LINK (link control, RECEIVED, included)
    U WALL LINK THEIRS HAS                  a connection is up (after RESUME: the neighbor has HAS frames)
    D WALL LINK                             it broke
    G WALL LINK COUNT                       step mode (--step): LINK's next COUNT frames went from the gate
                                            to the core now (frames as decoded: a run is its messages)
    E WALL limit                            the trace ends here (--trace-limit)

(THEIRS: the neighbor's incarnation, ``-`` while unknown.) Invariant: the frames of a link are numbered
as the link numbers them (`tom.net.links`: per pair of incarnations, the k-th counted line is frame k,
a run of messages one frame, RECEIVED lines not counted), and FIRST is the number of the record's first
counted line, so the receive of frame (A, inc_A, B, inc_B, k) in B's trace pairs with its send in A's —
the last send of it, when a reconnect made A send it again. An ``I`` record holds the chunk as read: a
reader applies `tom.codec.frames.decode_lines`' rules (RECEIVED skipped, nothing counted from the first
line that is not a frame). Records are plain bytes (no JSON per frame): a record costs about a
microsecond, so a peer can trace at full speed.

The file is written through a large buffer, flushed by `flush` (the peer calls it every half second)
and at `close`; it is bounded: past ``limit`` bytes it ends with an ``E`` record and records nothing
more (one log line says so); a write that fails (a full disk) ends it with one log line. The peer goes
on either way: the trace is a record of the run, never a part of it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import IO

log = logging.getLogger("tom.net.frametrace")

TRACE_LIMIT = 512 * 1024 * 1024
"""Bytes a trace may grow to by default (``--trace-limit``)."""

class FrameTrace:
    """The open trace file of one peer (one incarnation)."""

    def __init__(self, path: Path, peer: str, incarnation: int, order: str, limit: int = TRACE_LIMIT,
                 delay: float = 0.0) -> None:
        self.path = path
        self.peer, self.incarnation = peer, incarnation
        self.limit = limit
        self.delay = delay  # the links' --delay: a frame is written that long after it was sent
        self.written = 0
        self._file: IO[bytes] | None = open(path, "ab", buffering=1 << 20)
        self._put(json.dumps({"trace": 1, "peer": peer, "incarnation": incarnation, "order": order, "delay": delay,
                              "t": time.time()}).encode() + b"\n")

    @property
    def open(self) -> bool:
        return self._file is not None

    def _put(self, head: bytes, body: bytes = b"") -> None:
        file = self._file
        if file is None:
            return
        try:
            file.write(head)
            if body:
                file.write(body)
        except OSError as e:
            self._end(f"cannot write the trace {self.path}: {e.strerror or e}: no more frames recorded")
            return
        self.written += len(head) + len(body)
        if self.written > self.limit:
            try:
                file.write(b"E %.6f limit\n" % time.time())
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
        seconds after its release time; SENT is when the peer sent it (queued it on the link): the
        release time less the link's ``--delay`` (for a frame sent again after a reconnect: when it was
        queued again)."""
        now = time.time()
        self._put(f"O {now:.6f} {now - (late if late > 0.0 else 0.0) - self.delay:.6f} {link} "
                  f"{'-' if theirs is None else theirs} {first} {data.count(10)}\n".encode(), data)

    def received(self, link: str, theirs: int | None, first: int, raw: bytes) -> None:
        """The complete lines ``raw`` (newline-terminated) were read from ``link``; its first counted line
        is frame ``first``."""
        self._put(f"I {time.time():.6f} {link} {'-' if theirs is None else theirs} {first} "
                  f"{raw.count(10)}\n".encode(), raw)

    def passed(self, link: str, count: int) -> None:
        """Step mode: ``count`` more frames of ``link`` passed the gate to the core."""
        self._put(f"G {time.time():.6f} {link} {count}\n".encode())

    def connected(self, link: str, theirs: int | None, has: int) -> None:
        self._put(f"U {time.time():.6f} {link} {'-' if theirs is None else theirs} {has}\n".encode())

    def disconnected(self, link: str) -> None:
        self._put(f"D {time.time():.6f} {link}\n".encode())

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
