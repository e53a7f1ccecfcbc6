"""Clean-up by progress (`tom.durable.progress`): what every peer reported bounds what a member drops;
a peer not heard from holds the clean-up back from the view that admitted it; a peer that keeps no
history needs none. And at work in a data folder (`tom.peer.durable.Durable`): the reports a member
sends, the history it cuts, and a peer that comes back after the cut still catching up in full."""

from __future__ import annotations

import json

from tom.codec.frames import CatchUp, Progress
from tom.core import Delivery, ViewDelivery
from tom.durable.catchup import HistoryIndex
from tom.durable.progress import Progress as Peers
from tom.durable.progress import cut_at
from tom.peer import durable as durable_module
from tom.peer.durable import Durable
from tom.peer.output import OutputFile

A, B, C = "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"


def test_the_floor_is_the_lowest_report_and_unknown_while_a_neighbor_never_spoke():
    peers = Peers(A, [A, B, C])
    assert peers.floor((3, 10)) is None  # B and C: nothing known, they may need anything
    peers.reported(B, (3, 4))
    assert peers.floor((3, 10)) is None
    peers.reported(C, (2, 7))
    assert peers.floor((3, 10)) == (2, 7)
    peers.reported(C, None)  # C keeps no history: it never asks
    assert peers.floor((3, 10)) == (3, 4)
    assert peers.floor((3, 1)) == (3, 1)  # (never past this peer's own)


def test_a_peer_admitted_counts_from_its_view_until_it_reports_and_a_later_admission_does_not_raise_it():
    peers = Peers(A, [A, B])
    peers.reported(B, (5, 2))
    peers.admitted(C, 4)  # (not in the neighbors file: it joined)
    assert peers.floor((6, 0)) == (4, 0)
    peers.admitted(C, 7)  # admitted again after a crash: it may need what followed its last report
    assert peers.floor((8, 0)) == (4, 0)
    peers.reported(C, (8, 3))
    assert peers.floor((9, 0)) == (5, 2)


def history(*events: tuple[str, int]) -> HistoryIndex:
    index = HistoryIndex()
    for kind, view in events:
        index.add(kind, view)
    return index


def test_the_cut_keeps_the_record_after_the_floor_or_for_the_orders_asking_by_view_the_views_record():
    index = history(("view", 1), ("message", 1), ("message", 1), ("view", 2), ("message", 2), ("message", 2))
    assert cut_at(index, (2, 1), by_view=False) == 5  # after message 1 of view 2
    assert cut_at(index, (2, 1), by_view=True) == 3  # view 2's record
    assert cut_at(index, (1, 0), by_view=False) == 1
    index.cut(2)  # (a clean-up kept records 2.. : view 1 is cut into)
    assert cut_at(index, (1, 1), by_view=False) == 1
    assert cut_at(index, (1, 2), by_view=True) == 0  # (its record is gone: nothing more to cut by view)
    assert cut_at(index, (0, 0), by_view=False) == 0  # (before every view held)


def view(index: int, v: int, joined: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> ViewDelivery:
    members = tuple(sorted({A, B, C} - set(removed)))
    return ViewDelivery(index, 1, A, v, members, joined, (), removed)


def test_a_member_cleans_up_what_every_peer_reported_and_a_peer_back_from_there_catches_up_in_full(tmp_path, monkeypatch):
    monkeypatch.setattr(durable_module, "CLEAN_AT_LEAST", 10)
    out = OutputFile(tmp_path / "out-a.jsonl", A)
    a = Durable(tmp_path / "data-a", A, fsync="always", retain=1000, peers=[A, B, C])
    a.reconcile(out)
    a.deliver([view(1, 1, joined=(A, B, C))], out, 10.0, 0.0)
    a.deliver([Delivery(i + 2, i + 5, B if i % 3 else A, f"t{i}", 1.5, 1) for i in range(300)], out, 10.0, 0.0)
    _, sends = a.tick(out, 10.0, 1.0)
    assert sends == [((B, C), Progress(1, 300))]  # what its disk holds, to the others
    _, sends = a.tick(out, 10.0, 1.5)
    assert sends == []  # (once a second at most)
    a.on_frame(B, Progress(1, 300), out, 10.0, 1.6)
    a.tick(out, 10.0, 1.7)
    size = (tmp_path / "data-a" / "history.log").stat().st_size
    assert a.index.count == 301  # C never said how far it got: all kept
    a.on_frame(C, Progress(1, 120), out, 10.0, 1.8)
    a.tick(out, 10.0, 1.9)
    assert a.index.count == 301  # (120 would go, 180 stay: not worth a rewrite yet)
    a.on_frame(C, Progress(1, 250), out, 10.0, 1.8)
    a.tick(out, 10.0, 1.9)
    assert (tmp_path / "data-a" / "history.log").stat().st_size < size
    first = json.loads(a.history.read_records(a.offsets[0], a.offsets[1])[0])
    skipped = first["skipped"]  # (cut where a mark is: every 10th record with --retain 1000)
    assert first["kind"] == "base" and first["view"] == 1 and 240 <= skipped <= 250
    assert a.index.count == 1 + 300 - skipped
    assert first["own"] == len(range(0, skipped, 3)) and a.index.own == 100  # (A's own among those dropped)
    a.deliver([view(302, 2, joined=(C,))], out, 11.0, 2.1)
    _, answers = a.on_frame(C, CatchUp(1, 250, 2), out, 11.0, 2.2)  # C, back, asks from where it said
    got = [json.loads(r) for _, f in answers for r in f.records]
    assert [r["text"] for r in got] == [f"t{i}" for i in range(250, 300)]
    _, answers = a.on_frame(C, CatchUp(1, skipped - 1, 2), out, 11.0, 2.2)
    assert answers[0][1].status == "none"  # (what went)
    a.close()
    out.close()


def test_a_report_goes_again_when_the_members_change_and_every_ten_seconds_otherwise(tmp_path):
    out = OutputFile(tmp_path / "out-a.jsonl", A)
    a = Durable(tmp_path / "data-a", A, fsync="never", peers=[A, B, C])
    a.reconcile(out)
    a.deliver([view(1, 1, joined=(A, B, C))], out, 10.0, 0.0)
    assert a.tick(out, 10.0, 1.0)[1] == [((B, C), Progress(1, 0))]
    assert a.tick(out, 10.0, 5.0)[1] == []
    a.deliver([view(2, 2, removed=(C,))], out, 10.0, 5.0)
    assert a.tick(out, 10.0, 6.0)[1] == [((B,), Progress(2, 0))]
    assert a.tick(out, 10.0, 16.5)[1] == [((B,), Progress(2, 0))]
    a.close()
    out.close()


def test_under_fsync_batch_a_member_reports_only_what_a_sync_made_durable(tmp_path):
    out = OutputFile(tmp_path / "out-a.jsonl", A)
    a = Durable(tmp_path / "data-a", A, fsync="batch", peers=[A, B])
    a.reconcile(out)
    a.deliver([view(1, 1, joined=(A, B))], out, 10.0, 0.0)
    assert a.tick(out, 10.0, 1.0)[1] == []  # written, not synced yet
    a.sync(1.0)
    a.deliver([Delivery(2, 5, B, "x", 1.5, 1)], out, 10.0, 1.0)
    a._syncing.result(10)  # (the group commit runs on a worker thread)
    assert a.tick(out, 10.0, 2.0)[1] == [((B, C), Progress(1, 0))]
    a.close()
    out.close()


def test_a_progress_line_is_a_view_and_a_count_or_none_and_anything_else_is_refused():
    import pytest

    from tom.codec.frames import parse_frame
    from tom.errors import FrameError
    assert parse_frame("PROGRESS-3-0") == Progress(3, 0) and parse_frame("PROGRESS-none") == Progress()
    for bad in ("PROGRESS-0-3", "PROGRESS-3", "PROGRESS-3-x", "PROGRESS--1-2", "PROGRESS-1-2-3"):
        with pytest.raises(FrameError):
            parse_frame(bad)
