"""Durable peers (``tom peer --data DIR``) as a user runs them: real processes on loopback, SIGKILLed
and started again with the same command line; every output file is read start to end.

The promise checked (docs/guarantees.md, "Durable peers"): a durable member's file holds the group's
order from its first record to its last, each message once, the stretch it missed while it was away
written as caught-up records before anything of the view that admitted it again; and every text a peer
accepted is delivered once, even when the peer was killed right after accepting it.
"""

from __future__ import annotations

import json
import signal
import random
import time

import pytest

from procs import PeerProcs

pytestmark = pytest.mark.e2e


def group_order(records_by_peer: list[list[dict]]) -> list[tuple]:
    """The group's Lamport order of messages, from every file: (view, clock, pid) sorted, once each."""
    keys = {(r["view"], r["clock"], r["pid"]) for recs in records_by_peer for r in recs if r["kind"] == "message"}
    return sorted(keys)


def messages(recs: list[dict]) -> list[tuple]:
    return [(r["view"], r["clock"], r["pid"]) for r in recs if r["kind"] == "message"]


def assert_whole(recs: list[dict], order: list[tuple], who: str) -> None:
    """``recs`` (a durable peer's file) holds a contiguous stretch of ``order``, each message once."""
    mine = messages(recs)
    assert len(mine) == len(set(mine)), f"{who}: a message twice"
    start = order.index(mine[0])
    assert mine == order[start:start + len(mine)], f"{who}: not the group's order (a gap?)"
    indexes = [r["index"] for r in recs]
    assert indexes == list(range(1, len(recs) + 1)), f"{who}: indexes not 1..n"


def wait_until(check, deadline: float, what: str, procs: PeerProcs):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {deadline} s; logs: {procs.log_text()[-6000:]}")


def test_a_peer_killed_and_started_again_catches_up_what_the_group_delivered_meanwhile(tmp_path):
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    each = [("--data", str(tmp_path / f"data-{i}")) for i in range(3)]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        g.send(0, [f"a{k}" for k in range(20)])
        g.wait_delivered(20)
        g.procs[2].kill()
        g.procs[2].wait(10)
        # the group goes on without it: a view change, then messages it misses
        g.send(0, [f"b{k}" for k in range(30)])
        g.send(1, [f"c{k}" for k in range(30)])
        wait_until(lambda: len(g.messages(0)) >= 80 and len(g.messages(1)) >= 80, 30, "survivors deliver", g)
        g.group.start(2, g.procs[2])  # the same command line again
        g.send(1, ["after"])
        me = f"127.0.0.1:{g.ports[2]}"

        def admitted_at(recs: list[dict]) -> int | None:
            """Where the restarted peer wrote the view that admitted it again (after its first view)."""
            return next((k for k, r in enumerate(recs) if k > 0 and r["kind"] == "view" and me in r["joined"]
                         and not r.get("caught_up")), None)

        # "after" may be ordered before that view (sent while the group admitted the peer): then it is
        # caught up, and written a moment before the view is
        def delivered_and_admitted() -> bool:
            recs = g.records(2)
            return any(r.get("text") == "after" for r in recs) and admitted_at(recs) is not None

        wait_until(delivered_and_admitted, 40, "the restarted peer delivers and writes the view that admitted it again", g)
        recs = [g.records(i) for i in range(3)]
        order = group_order(recs)
        for i in range(3):
            assert_whole(recs[i], order, f"peer {i}")
        caught = [r for r in recs[2] if r.get("caught_up")]
        assert sum(r["kind"] == "message" for r in caught) >= 60
        assert any(r["kind"] == "view" for r in caught), "the view that removed it comes too"
        # caught up before the view that admitted it again
        admitted = admitted_at(recs[2])
        assert admitted is not None
        assert all(k < admitted for k, r in enumerate(recs[2]) if r.get("caught_up"))
        assert all(r.get("durable") for r in recs[2] if r["kind"] == "view")
        assert g.terminate() == [0, 0, 0]


def settle(g: PeerProcs, deadline: float = 60.0) -> None:
    """Until every peer delivers one same marker text (all three are members of one view again): a
    marker a second, each looked for every 0.05 s."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        marker = f"settle-{time.monotonic_ns()}"
        g.send(0, [marker])
        again = min(end, time.monotonic() + 1.0)
        while time.monotonic() < again:
            time.sleep(0.05)
            if all(any(r.get("text") == marker for r in g.records(i)) for i in range(3)):
                return
    raise AssertionError(f"no view of all three within {deadline} s: {g.log_text()[-6000:]}")


def kill_all_under_load(g: PeerProcs) -> None:
    """Once the three are one group: each fed 60 texts, and all three SIGKILLed at once while they run."""
    settle(g)
    for i in range(3):
        g.send(i, [f"p{i}-before-{k}" for k in range(60)])
    time.sleep(0.05)
    for p in g.procs:
        p.kill()
    for p in g.procs:
        p.wait(10)


def each_whole_and_each_text_once(g: PeerProcs) -> list[list[dict]]:
    """Every peer's file holds a stretch of the group's order (`assert_whole`), no text twice; the
    files' records."""
    recs = [g.records(i) for i in range(len(g.procs))]
    order = group_order(recs)
    for i, mine in enumerate(recs):
        assert_whole(mine, order, f"peer {i}")
        texts = [r["text"] for r in mine if r["kind"] == "message"]
        assert len(texts) == len(set(texts)), f"peer {i}: a text twice"
    return recs


def accepted_texts(folder) -> list[str]:
    from tom.durable.log import read_log

    return [json.loads(p)["text"] for p in read_log(folder / "accepted.log").records]


@pytest.mark.parametrize("seed", [1, 2])
def test_peers_killed_at_random_points_under_load_lose_nothing_and_deliver_each_accepted_text_once(tmp_path, seed):
    rng = random.Random(seed)
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    data = [tmp_path / f"data-{i}" for i in range(3)]
    each = [("--data", str(d)) for d in data]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        settle(g)  # a group of all three first
        for rnd in range(3):
            victim = rng.randrange(3)
            for again in range(2 if rng.random() < 0.5 else 1):  # the second time: during its rejoin or catch-up
                for i in range(3):
                    g.send(i, [f"p{i}-r{rnd}.{again}-{k}" for k in range(40)])
                time.sleep(rng.uniform(0.0, 0.01))  # killed with texts it accepted not delivered yet
                g.procs[victim].kill()
                g.procs[victim].wait(10)
                for i in set(range(3)) - {victim}:  # the group goes on meanwhile
                    g.send(i, [f"p{i}-r{rnd}.{again}-away-{k}" for k in range(30)])
                time.sleep(rng.uniform(0.2, 1.5))
                g.group.start(victim, g.procs[victim])
                time.sleep(rng.uniform(1.0, 3.0))
            settle(g)  # one down at a time: the other two are a majority of the view, and go on
        settle(g)
        want: set[str] = set()
        for d in data:
            want |= set(accepted_texts(d))
        wait_until(lambda: want <= {r.get("text") for i in range(3) for r in g.records(i)}, 30,
                   "every accepted text delivered", g)
        recs = each_whole_and_each_text_once(g)
        delivered = {r["text"] for r in recs[0] + recs[1] + recs[2] if r["kind"] == "message"}
        assert want <= delivered, f"accepted and never delivered: {sorted(want - delivered)[:5]}"
        assert g.terminate() == [0, 0, 0]


def test_a_durable_peer_beside_in_memory_members_is_told_none_hold_its_stretch_and_writes_a_gap(tmp_path):
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    each = [(), (), ("--data", str(tmp_path / "data-2"))]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        settle(g)
        g.procs[2].kill()
        g.procs[2].wait(10)
        g.send(0, [f"away-{k}" for k in range(10)])
        wait_until(lambda: sum(r.get("text", "").startswith("away") for r in g.records(0)) == 10, 30, "survivors", g)
        g.group.start(2, g.procs[2])
        settle(g)
        recs = g.records(2)
        gaps = [r for r in recs if r["kind"] == "gap"]
        assert len(gaps) == 1 and not any(r.get("text", "").startswith("away") for r in recs)
        nxt = recs[recs.index(gaps[0]) + 1]
        assert nxt["kind"] == "view" and nxt["view"] == gaps[0]["view"] and g.procs[0].running()
        assert "lost the group's events" in g.log_text()
        assert g.terminate() == [0, 0, 0]


def test_a_group_killed_as_a_whole_and_started_again_goes_on_with_its_group_and_view_numbering(tmp_path):
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    data = [tmp_path / f"data-{i}" for i in range(3)]
    each = [("--data", str(d)) for d in data]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        kill_all_under_load(g)
        before = [g.records(i) for i in range(3)]
        last_view = max(r["view"] for recs in before for r in recs)
        groups = {json.loads((d / "identity.json").read_text())["group"] for d in data}
        for i in (2, 0):  # in another order, and one later
            g.group.start(i, g.procs[i])
            time.sleep(0.5)
        time.sleep(3.0)
        g.group.start(1, g.procs[1])
        settle(g)
        recs = [g.records(i) for i in range(3)]
        order = group_order(recs)
        for i in range(3):
            assert_whole(recs[i], order, f"peer {i}")
        refounded = [r for r in recs[0] if r["kind"] == "view" and r["view"] > last_view and not r.get("caught_up")]
        assert refounded and refounded[0]["view"] == last_view + 1, "the view numbering goes on"
        assert len(groups) == 1 and {json.loads((d / "identity.json").read_text())["group"] for d in data} == groups
        want = set().union(*(accepted_texts(d) for d in data))
        wait_until(lambda: want <= {r.get("text") for r in g.records(0)}, 30, "every accepted text delivered", g)
        assert g.terminate() == [0, 0, 0]


def test_a_majority_killed_at_once_comes_back_with_the_survivor_and_the_group_goes_on(tmp_path):
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    data = [tmp_path / f"data-{i}" for i in range(3)]
    each = [("--data", str(d)) for d in data]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        settle(g)
        for i in range(3):
            g.send(i, [f"p{i}-before-{k}" for k in range(60)])
        time.sleep(0.02)
        for i in (1, 2):  # a majority of the view, at once: the survivor has no quorum
            g.procs[i].kill()
        for i in (1, 2):
            g.procs[i].wait(10)
        g.send(0, [f"p0-alone-{k}" for k in range(10)])  # held by the survivor meanwhile
        time.sleep(2.0)
        for i in (1, 2):
            g.group.start(i, g.procs[i])
        settle(g)
        recs = [g.records(i) for i in range(3)]
        order = group_order(recs)
        for i in range(3):
            assert_whole(recs[i], order, f"peer {i}")
        assert "founding the group again" in g.log_text()
        want = set().union(*(accepted_texts(d) for d in data))
        wait_until(lambda: want <= {r.get("text") for r in g.records(0)}, 30, "every accepted text delivered", g)
        texts = [r["text"] for r in g.records(0) if r["kind"] == "message"]
        assert len(texts) == len(set(texts))
        assert g.terminate() == [0, 0, 0]


@pytest.mark.parametrize("order", ["sequencer", "causal"])
def test_in_the_other_orders_a_restarted_peer_catches_up_each_message_once(tmp_path, order):
    extra = ("--heartbeat", "0.2", "--timeout", "1", "--order", order)
    data = [tmp_path / f"data-{i}" for i in range(3)]
    each = [("--data", str(d)) for d in data]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        settle(g)
        for i in range(3):
            g.send(i, [f"p{i}-a-{k}" for k in range(40)])
        time.sleep(0.01)
        v = max(range(3), key=lambda i: g.ports[i])  # not the view's coordinator (the sequencer)
        g.procs[v].kill()  # mid-load: it may have delivered some of the view's messages in its own order
        g.procs[v].wait(10)
        for i in set(range(3)) - {v}:
            g.send(i, [f"p{i}-away-{k}" for k in range(40)])
        time.sleep(1.0)
        g.group.start(v, g.procs[v])
        settle(g)
        want = set().union(*(accepted_texts(d) for d in data))
        wait_until(lambda: all(want <= {r.get("text") for r in g.records(i)} for i in range(3)), 30,
                   "every accepted text delivered everywhere", g)
        for i in range(3):
            texts = [r["text"] for r in g.records(i) if r["kind"] == "message"]
            assert len(texts) == len(set(texts)), f"peer {i}: a text twice"
        assert any(r.get("caught_up") for r in g.records(v))
        if order == "sequencer":  # (the sequencer lived: the restarted file keeps (view, seq) increasing)
            keys = [(r["view"], r["seq"]) for r in g.records(v) if r["kind"] == "message"]
            assert keys == sorted(keys)
        assert g.terminate() == [0, 0, 0]


def test_a_peer_that_left_cleanly_and_is_started_again_catches_up_the_same_way(tmp_path):
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    each = [("--data", str(tmp_path / f"data-{i}")) for i in range(3)]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        settle(g)
        g.procs[2].send_signal(signal.SIGTERM)  # it leaves the group
        assert g.procs[2].wait(20) == 0
        g.send(0, [f"while-gone-{k}" for k in range(25)])
        wait_until(lambda: sum(r.get("text", "").startswith("while-gone") for r in g.records(1)) == 25, 30,
                   "the others deliver", g)
        g.group.start(2, g.procs[2])
        settle(g)
        recs = [g.records(i) for i in range(3)]
        order = group_order(recs)
        assert_whole(recs[2], order, "the peer that left")
        assert sum(1 for r in recs[2] if r.get("caught_up") and r.get("text", "").startswith("while-gone")) == 25
        assert g.terminate() == [0, 0, 0]


def history_records(folder) -> int:
    from tom.durable.history import events
    from tom.durable.log import read_log

    return len(events(read_log(folder / "history.log"))[0])


def test_members_clean_up_what_every_peer_holds_and_a_peer_killed_meanwhile_still_catches_up_in_full(tmp_path):
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    each = [("--data", str(tmp_path / f"data-{i}")) for i in range(3)]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        settle(g)
        g.send(0, [f"a{k}" for k in range(12000)])
        g.wait_delivered(12000)
        # every peer told the others how far it got: each folder keeps a small part, not the 1,000,000
        # events of the default --retain (it cuts 10,000 records at least)
        wait_until(lambda: all(history_records(tmp_path / f"data-{i}") < 4000 for i in range(3)), 30,
                   "the folders cleaned up", g)
        g.procs[2].kill()
        g.procs[2].wait(10)
        g.send(1, [f"b{k}" for k in range(3000)])
        wait_until(lambda: sum(r.get("text", "").startswith("b") for r in g.records(0)) == 3000, 60, "survivors", g)
        time.sleep(2.5)  # (reports go on while peer 2 is away: they must not let its stretch go)
        g.group.start(2, g.procs[2])
        settle(g)
        recs = [g.records(i) for i in range(3)]
        order = group_order(recs)
        for i in range(3):
            assert_whole(recs[i], order, f"peer {i}")
        assert not any(r["kind"] == "gap" for r in recs[2])
        assert sum(r.get("text", "").startswith("b") and r.get("caught_up", False) for r in recs[2]) == 3000
        assert g.terminate() == [0, 0, 0]


def test_a_durable_peer_beside_in_memory_members_cleans_up_as_they_need_nothing(tmp_path):
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    each = [(), (), ("--data", str(tmp_path / "data-2"))]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        settle(g)
        g.send(0, [f"a{k}" for k in range(12000)])
        g.wait_delivered(12000)
        wait_until(lambda: history_records(tmp_path / "data-2") < 4000, 30, "the folder cleaned up", g)
        assert g.terminate() == [0, 0, 0]


def test_a_full_disk_stops_the_peer_with_exit_5_and_with_room_again_it_recovers_as_after_a_crash(tmp_path):
    """Peer 2's data folder on a small ext4 file system of its own (a loop device): it fills up under
    load, the peer says so in one line and exits 5; with room again, the same command line recovers it:
    its file the group's whole order, every text it accepted delivered once."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        pytest.skip("needs root and mkfs.ext4 to mount a small file system of its own (CI runs as root)")
    image, small = tmp_path / "small.img", tmp_path / "small"
    small.mkdir()
    subprocess.run(["truncate", "-s", "24M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    if subprocess.run(["mount", "-o", "loop", str(image), str(small)]).returncode != 0:
        pytest.skip("cannot mount a loop device here")
    try:
        filler = small / "filler"
        room = os.statvfs(small).f_bavail * os.statvfs(small).f_frsize
        with open(filler, "wb") as f:
            f.write(b"\0" * max(0, room - 200_000))  # (about 200 KB left for peer 2's folder)
            f.flush()
            os.fsync(f.fileno())
        extra = ("--heartbeat", "0.2", "--timeout", "1")
        data = [tmp_path / "data-0", tmp_path / "data-1", small / "data-2"]
        each = [("--data", str(d)) for d in data]
        with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
            settle(g)
            pad = "x" * 400  # (texts of 400 bytes, in three logs: the room lasts a few hundred)
            for k in range(40):
                for i in range(3):
                    lines = [f"p{i}-{k}-{j}-{pad}" for j in range(50)]
                    if i == 2:  # (it may stop, its disk full, between a look and the write: that is the test)
                        g.procs[2].send(lines)
                    elif g.procs[i].running():
                        g.send(i, lines)
                if not g.procs[2].running():
                    break
                time.sleep(0.1)
            assert g.procs[2].wait(30) == 5, g.log_text()[-3000:]
            log = g.procs[2].log.read_text()
            assert log.count("No space left on device") == 1 and "Traceback" not in log, log[-2000:]
            filler.unlink()  # room again
            g.group.start(2, g.procs[2])  # the same command line
            settle(g)
            want = set().union(*(accepted_texts(d) for d in data))
            wait_until(lambda: all(want <= {r.get("text") for r in g.records(i)} for i in range(3)), 60,
                       "every accepted text delivered everywhere", g)
            recs = [g.records(i) for i in range(3)]
            order = group_order(recs)
            for i in range(3):
                assert_whole(recs[i], order, f"peer {i}")
            assert g.terminate() == [0, 0, 0]
    finally:
        subprocess.run(["umount", "-l", str(small)])


DIE_DECIDING = '''\
"""Planted in a test's peers: the first peer to decide how a group founded again ends its last view
dies right there (before it answers or writes anything of it): the file named by TOM_TEST_DIE_ONCE
says it happened."""
import os

from tom.peer import durable

_decide = durable.Durable._extension


def _extension(self, offered):
    flag = os.environ.get("TOM_TEST_DIE_ONCE")
    if flag:
        try:
            fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return _decide(self, offered)
        os.write(fd, self.me.encode())
        os.close(fd)
        os._exit(9)
    return _decide(self, offered)


durable.Durable._extension = _extension
'''


def test_a_founder_that_dies_as_it_decides_how_the_last_view_ends_loses_nothing(tmp_path):
    """The whole group killed under load and started again; the founder of the view it founds dies at
    the point where it decided how view 1 ends, before it answered or wrote. The other two write
    nothing of the new view until the view change that removes it names who ends view 1 instead; the
    founder, started again, catches up: every file whole, every accepted text once."""
    import os
    from pathlib import Path

    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(DIE_DECIDING)
    flag = tmp_path / "died"
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, TOM_TEST_DIE_ONCE=str(flag),
               PYTHONPATH=os.pathsep.join(p for p in (str(plant), str(root), os.environ.get("PYTHONPATH", "")) if p))
    extra = ("--heartbeat", "0.2", "--timeout", "1")
    data = [tmp_path / f"data-{i}" for i in range(3)]
    each = [("--data", str(d)) for d in data]
    with PeerProcs(tmp_path, 3, secure=False, extra=extra, each=each) as g:
        for proc in g.procs:
            proc.env = env
        kill_all_under_load(g)
        for i in range(3):
            g.group.start(i, g.procs[i])
        wait_until(flag.exists, 30, "the founder decides", g)
        founder = [f"127.0.0.1:{port}" for port in g.ports].index(flag.read_text())
        g.procs[founder].wait(10)
        others = [i for i in range(3) if i != founder]
        marker = "after-the-founder-died"
        g.send(others[0], [marker])
        wait_until(lambda: all(any(r.get("text") == marker for r in g.records(i)) for i in others), 40,
                   "the other two go on", g)
        assert "before it ended view" in g.log_text()
        g.group.start(founder, g.procs[founder])  # (the plant is spent: it decides no more)
        settle(g)
        each_whole_and_each_text_once(g)
        want = set().union(*(accepted_texts(d) for d in data))
        wait_until(lambda: want <= {r.get("text") for r in g.records(0)}, 30, "every accepted text delivered", g)
        assert g.terminate() == [0, 0, 0]
