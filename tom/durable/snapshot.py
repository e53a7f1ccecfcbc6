"""A durable replicated object's disk (`tom.Replicated(..., data=DIR)`): its snapshot, and the events
of its member's history that follow it.

``DIR/snapshot`` holds `SNAP_MAGIC`, then one record (length, CRC-32, payload): the object's state at
a delivery boundary and the event it was taken after (``after``: ``[view, clock, pid]`` for a message,
``[view, 0, ""]`` for a view change, None before any event). It is written beside itself, synced and
renamed over the old one, so a crash leaves one of the two whole. ``DIR/group`` is the member's data
folder (`tom.peer.durable`): its ``history.log`` holds every event the member delivered, so what came
after the snapshot is read back from there (`records_after`); the member's clean-up keeps those records
(`tom.peer.durable.Durable.hold`).

Invariant: the snapshot, then `records_after` it, applied in order, is the object's state after the last
event its member delivered before it stopped.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

from .log import HEADER, DataError

SNAP_MAGIC = b"TOMSNAP1\n"
"""The first bytes of a snapshot file."""

Key = tuple[int, int, str]
"""The event a snapshot was taken after: (view, clock, pid) of a message, (view, 0, "") of a view change."""


def key_of(rec: dict) -> Key | None:
    """The key of a history record (None: a gap or base record)."""
    if rec.get("kind") == "message":
        return (int(rec["view"]), int(rec["clock"]), str(rec["pid"]))
    if rec.get("kind") == "view":
        return (int(rec["view"]), 0, "")
    return None


class SnapshotFile:
    """``DIR/snapshot``: `load` and `save` a payload (the object's codec writes it)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "snapshot"

    def load(self) -> bytes | None:
        """The payload saved last (None: none yet). A damaged file is a DataError naming it."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise DataError(f"{self.path}: cannot read it: {e.strerror or e}") from None
        head = len(SNAP_MAGIC) + HEADER.size
        if not data.startswith(SNAP_MAGIC) or len(data) < head:
            raise DataError(f"{self.path}: not a TOM snapshot")
        length, crc = HEADER.unpack_from(data, len(SNAP_MAGIC))
        payload = data[head:]
        if len(payload) != length or zlib.crc32(payload) != crc:
            raise DataError(f"{self.path}: a damaged snapshot ({len(payload)} of {length} bytes, or its checksum)")
        return payload

    def save(self, payload: bytes | bytearray) -> int:
        """Write ``payload`` as the snapshot (synced, then renamed over the old one); returns its size."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name("snapshot.new")
        try:
            with open(tmp, "wb") as f:
                f.write(SNAP_MAGIC + HEADER.pack(len(payload), zlib.crc32(payload)))
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            fd = os.open(self.folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise DataError(f"{self.path}: cannot write the snapshot: {e.strerror or e}") from None
        return len(payload)


def records_after(payloads: list[bytes], after: Key | None) -> tuple[list[dict], bool]:
    """The records of a member's ``history.log`` (``payloads``) after the event ``after`` (all of them
    for None), parsed from the end back to it only (a snapshot is recent), and whether they follow it
    whole: false when ``after`` is not in it any more (or, for None, its start was cleaned up), or a
    gap record comes after it (the object then needs the group's state)."""
    if after is None:
        records = [json.loads(p) for p in payloads]
        if records and records[0].get("kind") == "base":  # (the start was cleaned up)
            return [], False
    else:
        records = []
        for p in reversed(payloads):
            rec = json.loads(p)
            if key_of(rec) == tuple(after):
                break
            records.append(rec)
        else:
            return [], False
        records.reverse()
    out = [r for r in records if r.get("kind") in ("message", "view", "gap")]
    return out, not any(r["kind"] == "gap" for r in out)
