"""A durable peer's data folder at work (`tom.peer.durable.Durable`) on the real disk: what reaches the
history and the output file, and in what order; a restart after a kill between the two writes; what a
member serves; bad folders refused in one line."""

from __future__ import annotations

import json

import pytest

from tom.codec.frames import CatchUp, History, Progress
from tom.core import Delivery, ViewDelivery
from tom.durable.log import DataError, read_log
from tom.peer.durable import Durable
from tom.peer.output import OutputFile

A, B, C = "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"


def view(index: int, v: int, joined: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> ViewDelivery:
    members = tuple(sorted({A, B, C} - set(removed)))
    return ViewDelivery(index, 1, A, v, members, joined, (), removed)


def msg(index: int, clock: int, v: int = 1, pid: str = A) -> Delivery:
    return Delivery(index, clock, pid, f"t{clock}", 1.5, v)


def lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_the_history_gets_every_record_before_the_output_file_and_a_kill_between_is_repaired(tmp_path):
    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A)
    d.reconcile(out)
    written, _ = d.deliver([view(1, 1, joined=(A, B, C)), msg(2, 5), msg(3, 6, pid=B)], out, 10.0, 0.0)
    assert len(written) == 3
    d.close()
    out.close()
    whole = (tmp_path / "out.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "out.jsonl").write_text("".join(whole[:1]))  # killed after the history, before the file
    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A)
    d.reconcile(out)
    assert (tmp_path / "out.jsonl").read_text() == "".join(whole)
    assert d.index.last == (1, 2) and d.index.own == 1 and d.last_index == 3
    assert any("written again" in line for line in d.said)
    assert all(r.get("durable") for r in lines(tmp_path / "out.jsonl") if r["kind"] == "view")
    d.close()
    out.close()


def restarted(tmp_path, peer=C) -> tuple[Durable, OutputFile]:
    """A durable peer that delivered view 1 and one message, killed, started again."""
    out = OutputFile(tmp_path / f"out-{peer}.jsonl", peer)
    d = Durable(tmp_path / f"data-{peer}", peer)
    d.reconcile(out)
    d.deliver([view(1, 1, joined=(A, B, C)), msg(2, 5)], out, 10.0, 0.0)
    d.close()
    out.close()
    out = OutputFile(tmp_path / f"out-{peer}.jsonl", peer)
    d = Durable(tmp_path / f"data-{peer}", peer)
    d.reconcile(out)
    return d, out


def test_a_restarted_peer_writes_the_caught_up_records_before_the_view_that_admitted_it(tmp_path):
    # the member that serves: it went on without C
    out_a = OutputFile(tmp_path / "out-a.jsonl", A)
    server = Durable(tmp_path / "data-a", A)
    server.reconcile(out_a)
    server.deliver([view(1, 1, joined=(A, B, C)), msg(2, 5), msg(3, 7, pid=B), view(4, 2, removed=(C,)), msg(5, 9, 2),
                    view(6, 3, joined=(C,))], out_a, 10.0, 0.0)
    d, out = restarted(tmp_path)
    written, sends = d.deliver([view(1, 3, joined=(C,)), msg(2, 11, 3)], out, 20.0, 1.0)
    assert written == [] and sends == [((A,), CatchUp(1, 1, 3))]  # held; A asked (the smallest old member)
    assert d.status() == "catching up 0 of ? from 127.0.0.1:5001"
    _, answers = server.on_frame(C, CatchUp(1, 1, 3), out_a, 20.0, 1.0)
    assert [dest for dest, _ in answers] == [(C,)] and answers[-1][1].status == "end"
    for _, frame in answers:
        written, _ = d.on_frame(A, frame, out, 21.0, 1.1)
    recs = lines(tmp_path / f"out-{C}.jsonl")
    assert [(r["kind"], r["view"], r.get("clock"), bool(r.get("caught_up"))) for r in recs] == [
        ("view", 1, 1, False), ("message", 1, 5, False),
        ("message", 1, 7, True), ("view", 2, 1, True), ("message", 2, 9, True),  # what it missed
        ("view", 3, 1, False), ("message", 3, 11, False)]  # then what it held
    assert [r["index"] for r in recs] == list(range(1, 8)) and {r["peer"] for r in recs} == {C}
    assert len(written) == 5 and d.status() is None  # what it missed, then what it held
    assert [id(w) in d.caught_up_now for w in written] == [True, True, True, False, False]
    assert [w.index for w in written[:3]] == [3, 4, 5] and type(written[1]) is ViewDelivery


def test_a_member_that_has_not_delivered_the_view_asked_answers_once_it_has(tmp_path):
    out = OutputFile(tmp_path / "out-a.jsonl", A)
    server = Durable(tmp_path / "data-a", A)
    server.reconcile(out)
    server.deliver([view(1, 1, joined=(A, B, C)), msg(2, 5)], out, 10.0, 0.0)
    _, sends = server.on_frame(C, CatchUp(1, 1, 3), out, 11.0, 1.0)
    assert sends == []
    _, sends = server.deliver([view(3, 2, removed=(C,)), view(4, 3, joined=(C,))], out, 12.0, 2.0)
    assert len(sends) == 1 and sends[0][1].status == "end" and len(sends[0][1].records) == 1
    _, sends = server.on_frame(C, CatchUp(0, 0, 3), out, 11.0, 1.0)
    assert sends == [((C,), History("none"))]


def test_texts_accepted_before_a_kill_are_sent_again_after_the_catch_up_in_the_order_accepted(tmp_path):
    out = OutputFile(tmp_path / "out.jsonl", C)
    d = Durable(tmp_path / "data", C)
    d.reconcile(out)
    assert d.accept(["early"]) == []  # not admitted yet: it waits in the folder
    d.deliver([view(1, 1, joined=(A, B, C))], out, 1.0, 0.0)
    assert d.take_unsent() == ["early"] and d.take_unsent() == []
    assert d.accept(["x", "y"]) == ["x", "y"]
    d.deliver([msg(2, 3, pid=C)], out, 2.0, 0.0)  # "early" delivered; x and y not yet
    d.close()
    out.close()
    out = OutputFile(tmp_path / "out.jsonl", C)
    d = Durable(tmp_path / "data", C)
    d.reconcile(out)
    assert d.accept(["z"]) == []
    d.deliver([view(1, 2, joined=(C,))], out, 3.0, 0.0)  # admitted again: asks first
    assert d.take_unsent() == []
    d.on_frame(A, History("end", 0, ()), out, 3.0, 0.0)
    assert d.take_unsent() == ["x", "y", "z"]


def test_a_second_process_on_the_same_folder_and_a_corrupt_history_are_refused_in_one_line(tmp_path):
    d = Durable(tmp_path / "data", A)
    with pytest.raises(DataError, match="another process holds this data folder"):
        Durable(tmp_path / "data", A)
    d.close()
    with pytest.raises(DataError, match="not 127.0.0.1:5002's"):
        Durable(tmp_path / "data", B)
    log = tmp_path / "data" / "history.log"
    log.write_bytes(log.read_bytes() + b"\x00\x00\x00\x05\x00\x00\x00\x00abcde" + b"\x00\x00\x00\x01\x00\x00\x00\x00z")
    with pytest.raises(DataError, match="corrupt record at offset 8"):
        Durable(tmp_path / "data", A)


def test_a_history_past_its_bound_is_cleaned_up_and_a_restart_reads_the_same_positions(tmp_path):
    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A, retain=10)
    d.reconcile(out)
    k = 1
    for v in (1, 2, 3):
        batch: list = [view(k, v, joined=(A, B, C) if v == 1 else (), removed=() if v == 1 else (C,))]
        k += 1
        for j in range(12):
            batch.append(msg(k, 100 * v + j, v, pid=A if j % 3 == 0 else B))
            k += 1
        d.deliver(batch, out, 10.0 * v, 0.0)
    assert set(d.index.views) == {3} and d.index.count == 11  # (a base record, then the last 10 events)
    assert d.index.own == 12 and d.index.last == (3, 12)
    # what it still holds is served; what it dropped is not
    _, kept = d.on_frame(C, CatchUp(3, 5, 4), out, 40.0, 1.0)
    assert kept == [] and d.waiting  # (view 4 not delivered yet: it waits, and holds the stretch)
    _, dropped = d.on_frame(C, CatchUp(1, 3, 4), out, 40.0, 1.0)
    assert dropped == [((C,), History("none"))]
    _, answer = d.deliver([view(k, 4, joined=(C,))], out, 50.0, 2.0)
    served = [json.loads(r) for _, f in answer for r in f.records]
    assert [r["clock"] for r in served] == [305 + j for j in range(7)]  # messages 6..12 of view 3
    size = (tmp_path / "data" / "history.log").stat().st_size
    d.close()
    out.close()
    again = Durable(tmp_path / "data", A, retain=10)
    again.reconcile(OutputFile(tmp_path / "out.jsonl", A))
    assert (again.index.own, again.index.last, again.index.count) == (12, (4, 0), d.index.count)
    assert again.max_clock == 311
    assert {v: (s.first, s.messages, s.skipped, s.whole) for v, s in again.index.views.items()} == \
        {v: (s.first, s.messages, s.skipped, s.whole) for v, s in d.index.views.items()}
    assert (tmp_path / "data" / "history.log").stat().st_size == size
    assert len(lines(tmp_path / "out.jsonl")) == 40  # the output file keeps everything
    again.close()


def test_events_older_than_the_age_bound_go_at_the_next_minute(tmp_path):
    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A, retain_age=3600.0)
    d.reconcile(out)
    d.deliver([view(1, 1, joined=(A, B, C)), msg(2, 5), msg(3, 6)], out, 1000.0, 0.0)
    d.deliver([view(4, 2, removed=(C,)), msg(5, 9, 2)], out, 5000.0, 0.0)
    d.tick(out, 4000.0, 1.0)
    assert d.index.count == 5  # nothing is an hour old yet
    d.tick(out, 5000.0, 2.0)
    assert d.index.count == 3 and set(d.index.views) == {2}  # view 1 went: a base record and view 2's two
    d.close()


def test_a_group_founded_again_ends_its_last_view_with_what_any_founder_took_and_none_delivered(tmp_path):
    """The founder (A) ends view 1 with the messages A and B took and did not deliver, in (clock, pid)
    order; B copies them, and A writes them once B reported the new view: both files hold one sequence
    (a member absent now may have delivered some)."""
    peers = {}
    for pid in (A, B):
        out = OutputFile(tmp_path / f"out-{pid}.jsonl", pid)
        d = Durable(tmp_path / f"data-{pid}", pid)
        d.reconcile(out)
        d.deliver([view(1, 1, joined=(A, B, C)), msg(2, 1), msg(3, 2, pid=B)], out, 1.0, 0.0)
        peers[pid] = (d, out)
    peers[A][0].persist([(1, 4, C, "c4", 1.0), (1, 5, A, "a5", 1.0)])  # taken, never delivered (a crash)
    peers[B][0].persist([(1, 4, C, "c4", 1.0), (1, 6, C, "c6", 1.0)])
    for pid in (A, B):  # killed and started again: the pending messages come back from pending.log
        d, out = peers[pid]
        d.close()
        out.close()
        out = OutputFile(tmp_path / f"out-{pid}.jsonl", pid)
        d = Durable(tmp_path / f"data-{pid}", pid)
        d.reconcile(out)
        assert len(d.taken_not_delivered(1)) == 2
        peers[pid] = (d, out)
    (a, out_a), (b, out_b) = peers[A], peers[B]
    refounded = ViewDelivery(1, 7, A, 2, (A, B), (A, B), (), ())
    _, ask_a = a.deliver([refounded], out_a, 2.0, 0.0)
    _, ask_b = b.deliver([refounded], out_b, 2.0, 0.0)
    assert ask_a == [((B,), CatchUp(1, 2, 2))] and ask_b == [((A,), CatchUp(1, 2, 2))]
    _, waits = a.on_frame(B, ask_b[0][1], out_a, 2.1, 0.1)
    assert waits == []  # the founder answers once it has ended the view
    _, offer = b.on_frame(A, ask_a[0][1], out_b, 2.1, 0.1)
    _, answer_b = a.on_frame(B, offer[0][1], out_a, 2.2, 0.2)
    for _, frame in answer_b:
        b.on_frame(A, frame, out_b, 2.3, 0.3)
    assert len(lines(tmp_path / f"out-{A}.jsonl")) == 3  # the founder writes its end once B holds it too
    b.sync(0.3)
    b._syncing.result(10)  # (the group commit runs on a worker thread)
    _, report = b.tick(out_b, 2.4, 0.4)  # (a view's record on the disk is reported at once)
    assert report == [((A,), Progress(2, 0))]
    a.on_frame(B, report[0][1], out_a, 2.5, 0.5)
    ends = {pid: [(r["kind"], r["view"], r.get("clock"), r.get("pid")) for r in lines(tmp_path / f"out-{pid}.jsonl")]
            for pid in (A, B)}
    assert ends[A] == ends[B]
    assert ends[A][3:] == [("message", 1, 4, C), ("message", 1, 5, A), ("message", 1, 6, C), ("view", 2, 7, A)]
    assert a.taken_not_delivered(1) == {} and b.taken_not_delivered(1) == {}


def test_accepted_texts_the_group_delivered_are_cleaned_up_and_the_rest_still_sent_again(tmp_path, monkeypatch):
    import tom.peer.durable as durable

    monkeypatch.setattr(durable, "ACCEPTED_KEPT", 3)
    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A)
    d.reconcile(out)
    d.deliver([view(1, 1, joined=(A, B, C))], out, 1.0, 0.0)
    d.take_unsent()
    k = 2
    for n in range(10):
        d.accept([f"t{n}"], [f"key-{n}"])
        if n < 8:  # the group delivers all but the last two
            d.deliver([msg(k, 10 + n)], out, 2.0, 0.0)
            k += 1
    assert d.file_base > 0 and d.accepted[-1] == "t9"
    d.close()
    out.close()
    again = Durable(tmp_path / "data", A)
    again.reconcile(OutputFile(tmp_path / "out.jsonl", A))
    again.deliver([view(1, 2, joined=(A,))], OutputFile(tmp_path / "out.jsonl", A), 3.0, 0.0)
    again.on_frame(B, History("end", 0, ()), OutputFile(tmp_path / "out.jsonl", A), 3.0, 0.0)
    assert again.take_unsent() == ["t8", "t9"]
    assert again.keys.check("key-9", "t9") is not None and again.file_base == d.file_base


def test_taken_messages_come_back_from_pending_log_whatever_their_text():
    from tom.peer.pending import pending_record, read_pending

    taken = [(3, 7, A, "a b\nc\\d\re", 1.25), (3, 8, "my-host.lan:80", "", None), (4, 1, B, "é – \u2028 x", 1e9)]
    assert read_pending(pending_record(taken)) == taken
    # send times as the wire carries them (whole microseconds) come back the same floats, far-off ones too
    times = [round(1_732_000_000 + k * 0.000137, 6) for k in range(2000)] + [8_999_999_999.999999, 9e9, 99_999_999_999.999998]
    back = read_pending(pending_record([(1, k, A, "t", s) for k, s in enumerate(times)]))
    assert [m[4] for m in back] == times
    # a folder of an older TOM: the float as Python writes it
    assert read_pending(b"2 5 " + A.encode() + b" 1732000000.123456 hi\n2 6 " + A.encode() + b" None x") == \
        [(2, 5, A, "hi", 1732000000.123456), (2, 6, A, "x", None)]


def test_a_new_data_folder_has_nothing_to_clean_up(tmp_path):
    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A)
    d.reconcile(out)
    d.tick(out, 1e9, 0.0)  # (the age bound's check, with nothing written yet)
    d.clean(1e9)
    assert d.index.count == 0
    d.close()


def test_fsync_batch_syncs_on_a_worker_thread_and_a_failed_sync_is_said_at_the_next_step(tmp_path, monkeypatch):
    import errno
    import threading

    from tom.durable import log as log_module
    from tom.errors import OutputError

    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A, fsync="batch")
    d.reconcile(out)
    d.deliver([view(1, 1, joined=(A, B, C)), msg(2, 5)], out, 10.0, 0.0)
    started, release = threading.Event(), threading.Event()
    real = log_module.os.fsync

    def slow(fd):
        started.set()
        assert release.wait(10)
        real(fd)

    monkeypatch.setattr(log_module.os, "fsync", slow)
    d.sync(1.0)  # returns while the disk is still busy: the peer goes on
    assert started.wait(10) and not release.is_set()
    d.deliver([msg(3, 6)], out, 10.0, 1.1)  # (appending meanwhile)
    d.sync(1.2)  # (the sync under way is not done: none more is started)
    assert d.durable_last is None
    release.set()
    d._syncing.result(10)
    assert d.durable_last == (1, 1)  # (what was written when that sync began)

    def failing(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(log_module.os, "fsync", failing)
    d.sync(2.0)
    with pytest.raises(Exception):
        d._syncing.result(10)
    with pytest.raises(OutputError, match="cannot write: Input/output error"):
        d.sync(3.0)
    monkeypatch.setattr(log_module.os, "fsync", real)
    d.close()
    out.close()


def test_a_founder_whose_last_view_delivered_no_message_ends_it_with_what_was_taken(tmp_path):
    """Found by `tom check --restart`: the founder's last view holds no message yet (its last message,
    if any, is of an earlier view), so there is no last key to sort after — every taken message of
    the view comes after its record."""
    out = OutputFile(tmp_path / "out-a.jsonl", A)
    a = Durable(tmp_path / "data-a", A)
    a.reconcile(out)
    a.deliver([view(1, 1, joined=(A, B, C))], out, 1.0, 0.0)
    a.persist([(1, 2, C, "c2", 1.0)])  # taken, never delivered
    _, asks = a.deliver([ViewDelivery(2, 3, A, 2, (A, B), (A, B), (), ())], out, 2.0, 0.0)
    assert asks == [((B,), CatchUp(1, 0, 2))]
    a.on_frame(B, History("end", 0, ()), out, 2.1, 0.1)
    a.on_frame(B, Progress(2, 0), out, 2.2, 0.2)  # (B holds the end: the founder writes it)
    assert [(r["kind"], r["view"], r.get("clock")) for r in lines(tmp_path / "out-a.jsonl")] == [
        ("view", 1, 1), ("message", 1, 2), ("view", 2, 3)]


def test_a_write_is_one_history_record_whose_events_are_served_and_read_back_one_by_one(tmp_path):
    # one record per write (its framing paid once), cut where a clean-up may cut; an event in the
    # middle of a record is served and read back like one that starts it
    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A)
    d.reconcile(out)
    d.deliver([view(1, 1, joined=(A, B, C))] + [msg(2 + j, 10 + j, pid=(A, B)[j % 2]) for j in range(12)], out, 10.0, 0.0)
    d.deliver([msg(14 + j, 30 + j) for j in range(3)] + [view(17, 2, removed=(C,))], out, 11.0, 0.0)
    assert len(read_log(tmp_path / "data" / "history.log").records) == 2
    _, answer = d.on_frame(C, CatchUp(1, 5, 2), out, 20.0, 1.0)
    served = [json.loads(r) for _, f in answer for r in f.records]
    assert [r["clock"] for r in served] == [15, 16, 17, 18, 19, 20, 21, 30, 31, 32]  # (up to view 2)
    d.hold = (1, 31, A)
    assert d._held_from() == 15  # (the record after message 31: 0 view, 1-12, 13 clock 30, 14 clock 31)
    index = (d.index.count, d.index.own, d.index.last, d.max_clock)
    d.close()
    out.close()
    again = Durable(tmp_path / "data", A)
    again.reconcile(OutputFile(tmp_path / "out.jsonl", A))
    assert (again.index.count, again.index.own, again.index.last, again.max_clock) == index
    _, answer = again.on_frame(C, CatchUp(1, 11, 2), out, 30.0, 2.0)
    assert [json.loads(r).get("clock") for _, f in answer for r in f.records] == [21, 30, 31, 32]
    again.close()


def test_a_clean_up_cuts_the_history_where_a_record_starts(tmp_path):
    out = OutputFile(tmp_path / "out.jsonl", A)
    d = Durable(tmp_path / "data", A, retain=200)  # (a mark every 2 events: records of 2 events at most)
    d.reconcile(out)
    d.deliver([view(1, 1, joined=(A, B, C))], out, 1.0, 0.0)
    k = 2
    for step in range(30):
        d.deliver([msg(k + j, k + j) for j in range(15)], out, 2.0 + step, 0.0)
        k += 15
    assert d.index.count <= 2 * 200 + 15 and d.history_has_base
    kept = read_log(tmp_path / "data" / "history.log")
    assert max(p.count(b"\n") + 1 for p in kept.records) <= 2
    d.close()
    out.close()
    again = Durable(tmp_path / "data", A, retain=200)
    again.reconcile(OutputFile(tmp_path / "out.jsonl", A))
    assert (again.index.count, again.index.last) == (d.index.count, d.index.last)
    again.close()


@pytest.mark.parametrize("seed", range(5))
def test_the_busy_path_of_a_view_s_messages_writes_what_the_general_path_writes(tmp_path, seed):
    import random

    rng = random.Random(seed)
    peers = []
    for name in ("fast", "general"):
        out = OutputFile(tmp_path / f"out-{name}.jsonl", A)
        d = Durable(tmp_path / name, A, retain=300)  # (a mark every 3 records: marks inside writes)
        d.reconcile(out)
        peers.append((d, out))
    peers[1][0].recovery.known = set()  # (a set to keep: the general path)
    k, clock, v = 1, 1, 1
    batches: list[list] = [[view(1, 1, joined=(A, B, C))]]
    for _ in range(60):
        batch: list = []
        if rng.random() < 0.1:
            v += 1
            batch.append(view(k, v))
            k += 1
        for _ in range(rng.choice([1, 2, 3, 7, 20])):
            batch.append(msg(k, clock, v, pid=rng.choice([A, B, C])))
            k, clock = k + 1, clock + rng.randint(1, 3)
        batches.append(batch)
    for n, batch in enumerate(batches):
        for d, out in peers:
            d.deliver(batch, out, 10.0 + n, 0.0)
    (fast, out_f), (general, out_g) = peers
    assert fast.written_ats == general.written_ats and fast.index.count == general.index.count
    assert (fast.index.own, fast.index.last, fast.max_clock, fast.last_key, fast.last_index) == \
        (general.index.own, general.index.last, general.max_clock, general.last_key, general.last_index)
    assert {w: (s.first, s.messages, s.skipped) for w, s in fast.index.views.items()} == \
        {w: (s.first, s.messages, s.skipped) for w, s in general.index.views.items()}
    assert [len(p) for p in read_log(tmp_path / "fast" / "history.log").records] == \
        [len(p) for p in read_log(tmp_path / "general" / "history.log").records]
    for d, out in peers:
        d.close()
        out.close()
    assert (tmp_path / "out-fast.jsonl").read_text() == (tmp_path / "out-general.jsonl").read_text()
