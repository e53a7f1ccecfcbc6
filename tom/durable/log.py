"""An append-only log of records on a real disk, and the data folder that holds it.

A record is ``length (4 bytes, big-endian) | CRC-32 of the payload (4 bytes) | payload``. The file
starts with `MAGIC`. Reading a log back (`read_log`):

* every record before the last must be whole and match its checksum; anything else is corruption:
  `DataError` naming the file and the record's offset, and nothing is delivered from it;
* the last record may be torn (a crash in the middle of a write: its length, or its payload, runs past
  the end, or its checksum does not match): it is dropped, said in one line (`LogRead.torn`), and the
  file is cut back to the last whole record when it is opened for appending.

`fsync` policies (`FSYNC`): ``always`` (each `RecordLog.append` returns once its records are on the
disk), ``batch`` (`RecordLog.sync` is called by the owner, e.g. once per step, before what the
records allow is sent), ``never`` (the kernel writes when it likes). A process crash (SIGKILL) loses
nothing written under any policy: the bytes are in the kernel's page cache; a power cut loses what was
not synced.

The data folder (`DataDir`) is held by one process at a time (an exclusive ``flock`` on ``lock``; a
second process is refused in one line), and says whose it is (``identity.json``: the peer's pid and
the group it belongs to, once it knows it); a folder of another pid or group is refused in one line.
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator
from itertools import accumulate
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError

MAGIC = b"TOMLOG1\n"
"""The first bytes of every log file."""

HEADER = struct.Struct(">II")
"""A record's head: its payload's length, then the payload's CRC-32."""

MAX_RECORD = 64 * 1024 * 1024
"""A length above this is not a record's: corruption (or a torn length)."""

FSYNC = ("always", "batch", "never")

IOV_MAX = 1024
"""At most this many buffers in one `os.writev` (Linux's ``IOV_MAX``)."""


class DataError(ConfigError):
    """The data folder or a log in it cannot be used (corrupt, another peer's, held by another process):
    one line naming the file (and the offset, for a corrupt record)."""


@dataclass
class LogRead:
    """What `read_log` found: the whole records' payloads, where the last whole record ends, and a line
    on a torn last record that was dropped (empty if none)."""

    records: list[bytes] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    end: int = len(MAGIC)
    torn: str = ""


def _records(path: Path, data: bytes) -> Iterator[tuple[int, bytes | str]]:
    """(offset, payload) per whole record, or (offset, why) for the first record that is not whole and
    ends the file, with every record that is not the last checked (`DataError` otherwise)."""
    at, size = len(MAGIC), len(data)
    while at < size:
        if at + HEADER.size > size:
            yield at, f"{size - at} bytes of a record's head"
            return
        length, crc = HEADER.unpack_from(data, at)
        start, end = at + HEADER.size, at + HEADER.size + length
        if length > MAX_RECORD or end > size:
            if length > MAX_RECORD and end < size:
                raise DataError(f"{path}: corrupt record at offset {at} (length {length})")
            yield at, f"a record of {length} bytes with {max(0, size - start)} of them written"
            return
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            if end < size:
                raise DataError(f"{path}: corrupt record at offset {at} (checksum mismatch)")
            yield at, "a record whose checksum does not match"
            return
        yield at, payload
        at = end


def read_log(path: Path) -> LogRead:
    """Read the log at ``path`` (a missing file is an empty log). `DataError` if it is not a log or a
    record before the last is damaged."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LogRead()
    except OSError as e:
        raise DataError(f"{path}: cannot read it: {e.strerror or e}") from None
    if not data:
        return LogRead()
    if not data.startswith(MAGIC):
        if MAGIC.startswith(data):  # (torn while its first bytes were written)
            return LogRead(torn=f"{path}: dropped a torn start of the file ({len(data)} bytes)")
        raise DataError(f"{path}: not a TOM log (it does not start with {MAGIC!r})")
    out = LogRead()
    for at, item in _records(path, data):
        if isinstance(item, str):
            out.torn = f"{path}: dropped a torn last record at offset {at} ({item}): a crash while it was written"
            break
        out.records.append(item)
        out.offsets.append(at)
        out.end = at + HEADER.size + len(item)
    return out


class RecordLog:
    """A log open for appending (after `read_log`: a torn tail is cut off first). Not thread-safe: one
    owner appends."""

    def __init__(self, path: Path, fsync: str = "always") -> None:
        if fsync not in FSYNC:
            raise ValueError(f"fsync policy {fsync!r}: one of {', '.join(FSYNC)}")
        self.path, self.fsync = path, fsync
        self.read = read_log(path)
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self._fd).st_size < len(MAGIC):  # new, or torn while its first bytes were written
                os.ftruncate(self._fd, 0)
                os.write(self._fd, MAGIC)
            else:
                os.ftruncate(self._fd, self.read.end)  # (a torn last record goes)
            self.size = os.lseek(self._fd, 0, os.SEEK_END)
            os.fsync(self._fd)
            self._sync_dir()
        except OSError as e:
            raise DataError(f"{path}: cannot open it for writing: {e.strerror or e}") from None
        self.dirty = False
        # held by a sync (of any thread) and by what swaps or closes the file: a group commit may run
        # on a worker thread (`tom.peer.durable.Durable.sync`) while this one appends
        self._syncing = threading.Lock()

    def append(self, payloads: Iterable[bytes | memoryview]) -> list[int]:
        """Write ``payloads`` as records, in order, in one write; with ``always``, on the disk on return.
        Returns the records' offsets."""
        pack, crc, head = HEADER.pack, zlib.crc32, HEADER.size
        payloads = payloads if isinstance(payloads, list) else list(payloads)
        offsets = list(accumulate([head + len(p) for p in payloads], initial=self.size))
        at = offsets.pop()
        if at == self.size:
            return offsets
        parts: list[bytes | memoryview] = []  # (heads and payloads as they are: one gathered write, no copy)
        for p in payloads:
            parts += (pack(len(p), crc(p)), p)
        try:
            written = os.writev(self._fd, parts) if len(parts) <= IOV_MAX else 0
            if written < at - self.size:  # (a short write, or too many parts: the rest as one buffer)
                view = memoryview(b"".join(parts))[written:]
                while view:
                    view = view[os.write(self._fd, view):]
            self.dirty = True
            if self.fsync == "always":
                self.sync()
        except OSError as e:  # (a full disk: what was half written is a torn tail, dropped when read back)
            try:
                os.ftruncate(self._fd, self.size)
                os.lseek(self._fd, self.size, os.SEEK_SET)
            except OSError:
                pass
            raise DataError(f"{self.path}: cannot write: {e.strerror or e}") from None
        self.size = at
        return offsets

    def cut_head(self, cut: int, head: bytes) -> int:
        """Drop every record before offset ``cut`` and put record ``head`` first (a clean-up): the new
        file is written beside the log, synced and renamed over it, so a crash leaves the old log or
        the new one whole. Returns by how much the offsets of the records kept moved (new = old - it)."""
        record = HEADER.pack(len(head), zlib.crc32(head)) + head

        def tail() -> Iterator[bytes]:
            at = cut
            while at < self.size:
                chunk = os.pread(self._fd, min(1 << 20, self.size - at), at)
                if not chunk:
                    return
                yield chunk
                at += len(chunk)

        shift = cut - len(MAGIC) - len(record)
        self._replace([record], tail(), "clean it up")
        return shift

    def rewrite(self, payloads: Iterable[bytes]) -> None:
        """Replace the whole log by ``payloads`` (written beside it, synced, renamed over it)."""
        self._replace([HEADER.pack(len(p), zlib.crc32(p)) + p for p in payloads], (), "write it again")

    def _replace(self, records: list[bytes], tail: Iterable[bytes], what: str) -> None:
        """Write ``MAGIC``, ``records`` and ``tail`` beside the log, sync, rename it over the log, and
        go on appending to it."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        size = 0
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for part in (MAGIC, *records, *tail):
                    view = memoryview(part)
                    while view:
                        view = view[os.write(fd, view):]
                    size += len(part)
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                raise
            with self._syncing:  # (no sync on the old file meanwhile)
                os.replace(tmp, self.path)
                self._sync_dir()
                os.close(self._fd)
                self._fd, self.size, self.dirty = fd, size, False
        except OSError as e:
            raise DataError(f"{self.path}: cannot {what}: {e.strerror or e}") from None
        os.lseek(self._fd, self.size, os.SEEK_SET)

    def read_records(self, start: int, end: int) -> list[bytes]:
        """The payloads of the whole records from offset ``start`` up to offset ``end`` (as written by
        this log: `append`'s offsets)."""
        out: list[bytes] = []
        try:
            data = os.pread(self._fd, end - start, start)
        except OSError as e:
            raise DataError(f"{self.path}: cannot read it: {e.strerror or e}") from None
        at = 0
        while at + HEADER.size <= len(data):
            length, crc = HEADER.unpack_from(data, at)
            payload = data[at + HEADER.size:at + HEADER.size + length]
            if len(payload) != length or zlib.crc32(payload) != crc:
                raise DataError(f"{self.path}: corrupt record at offset {start + at}")
            out.append(payload)
            at += HEADER.size + length
        return out

    def sync(self) -> None:
        """What was appended before this call is on the disk (a no-op under ``never``, or when nothing
        was appended). Safe on another thread than the one appending: what is appended meanwhile
        stays marked for the next sync."""
        with self._syncing:
            if self.dirty and self.fsync != "never" and self._fd >= 0:
                self.dirty = False  # (before the fsync: an append during it marks the log again)
                try:
                    os.fsync(self._fd)
                except OSError as e:
                    self.dirty = True
                    raise DataError(f"{self.path}: cannot write: {e.strerror or e}") from None

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            with self._syncing:
                os.close(self._fd)
                self._fd = -1

    def _sync_dir(self) -> None:
        """The file's name is durable too (a new file in the folder)."""
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class DataDir:
    """A peer's data folder, held (locked) while this object is open. ``pid``: the peer it belongs to."""

    def __init__(self, path: Path, pid: str) -> None:
        self.path, self.pid = path, pid
        try:
            path.mkdir(parents=True, exist_ok=True)
            self._lock = os.open(path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise DataError(f"{path}: cannot use it as a data folder: {e.strerror or e}") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            raise DataError(f"{path / 'lock'}: another process holds this data folder (a second peer "
                            f"started with the same --data?)") from None
        try:
            self.identity = self._identity()
        except DataError:
            self.close()
            raise

    def _identity(self) -> dict[str, str]:
        file = self.path / "identity.json"
        try:
            identity = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            identity = {"pid": self.pid, "group": ""}
            self._write_identity(identity)
            return identity
        except (OSError, ValueError) as e:
            raise DataError(f"{file}: unreadable ({e}): not a data folder TOM wrote") from None
        if not isinstance(identity, dict) or identity.get("pid") != self.pid:
            raise DataError(f"{file}: this data folder is {identity.get('pid') if isinstance(identity, dict) else '?'}'s, "
                            f"not {self.pid}'s")
        return identity

    def check_group(self, group: str) -> None:
        """This peer is in ``group`` now: recorded the first time; `DataError` if the folder is another
        group's."""
        known = self.identity.get("group", "")
        if known and known != group:
            raise DataError(f"{self.path / 'identity.json'}: this data folder is of group {known}, not {group}")
        if not known:
            self.identity = {**self.identity, "group": group}
            self._write_identity(self.identity)

    def set_group(self, group: str) -> None:
        """This peer is in ``group`` now (founded anew, when the folder's group is gone): recorded."""
        if self.identity.get("group") != group:
            self.identity = {**self.identity, "group": group}
            self._write_identity(self.identity)

    def _write_identity(self, identity: dict[str, str]) -> None:
        file, tmp = self.path / "identity.json", self.path / "identity.json.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(identity, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, file)

    def log(self, name: str, fsync: str = "always") -> RecordLog:
        return RecordLog(self.path / name, fsync)

    def close(self) -> None:
        if self._lock >= 0:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            os.close(self._lock)
            self._lock = -1
