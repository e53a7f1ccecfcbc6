"""The promise at the edges, with real `tom peer` processes on loopback: an over-long message, a full
disk, a peer nobody admits, a member missing from a neighbors file, a bad host, a divergent peer."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import pytest

from procs import free_ports, run_tom
from tom.tools.peers import PeerCommand, PeerGroup, PeerProcess

pytestmark = pytest.mark.e2e

FAST = ("--heartbeat", "0.2", "--timeout", "1.5")


class Group:
    """Headless peers, each with its own neighbors file and output; all killed (by pid) at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: PeerGroup[int] = PeerGroup(grace=0)  # by port
        self.logs: dict[int, Path] = {}
        self.outputs: dict[int, Path] = {}

    def start(self, port: int, neighbors: list[int], *extra: str, output: str | None = None,
              fast: bool = True) -> None:
        nb = self.tmp / f"neighbors-{port}.txt"
        nb.write_text("".join(f"127.0.0.1:{p}\n" for p in neighbors))
        self.outputs[port] = Path(output) if output else self.tmp / f"out-{port}.jsonl"
        self.logs[port] = self.tmp / f"log-{port}.txt"
        cmd = PeerCommand(nb, self.outputs[port], port, extra=(*(FAST if fast else ()), *extra))
        self.logs[port].unlink(missing_ok=True)  # the log of this start only
        self.procs.start(port, PeerProcess(cmd.argv(), self.logs[port]))

    def send(self, port: int, lines: list[str]) -> None:
        assert self.procs[port].send(lines), f"{port} reads no more input"

    def log(self, port: int) -> str:
        return self.logs[port].read_text(errors="replace")

    def records(self, port: int) -> list[dict]:
        out = self.outputs[port]
        if not out.exists() or not out.is_file():
            return []
        return [json.loads(x) for x in out.read_text().splitlines() if x.strip()]

    def messages(self, port: int) -> list[tuple]:
        return [(r["clock"], r["pid"], r["text"]) for r in self.records(port) if r["kind"] == "message"]

    def wait(self, what, deadline: float = 40.0, why: str = "") -> None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if what():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out: {why}\n" + "\n".join(f"--- {p}\n{self.log(p)}" for p in self.logs))

    def exit(self, port: int, sig=signal.SIGTERM, timeout: float = 20.0) -> int:
        p = self.procs[port]
        if p.poll() is None:
            p.send_signal(sig)
        return p.wait(timeout)

    def __enter__(self) -> "Group":
        return self

    def __exit__(self, *exc) -> None:
        self.procs.stop()


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and "KeyError" not in text, text


def test_an_over_long_message_is_refused_in_one_line_and_the_group_goes_on(tmp_path):
    ports = free_ports(3)
    with Group(tmp_path) as g:
        for p in ports:
            g.start(p, ports)
        g.wait(lambda: all(any(r["kind"] == "view" and len(r["members"]) == 3 for r in g.records(p)) for p in ports),
               why="the group of three formed")
        emoji = "\U0001F600" * 16384  # passes a limit counted in characters; its frame is ~65.6 KB
        g.send(ports[0], ["before", emoji, "after"])
        g.send(ports[1], [f"b{i}" for i in range(200)])
        g.wait(lambda: all(len(g.messages(p)) == 202 for p in ports), why="202 messages everywhere")
        assert g.messages(ports[0]) == g.messages(ports[1]) == g.messages(ports[2])
        assert emoji not in {t for _, _, t in g.messages(ports[0])}
        log = g.log(ports[0])
        assert log.count("message not sent: its frame would take") == 1, log
        assert [g.exit(p) for p in ports] == [0, 0, 0]
        for p in ports:
            no_traceback(g.log(p))
            assert "rejected frame" not in g.log(p) and "link fault" not in g.log(p)


def test_a_full_disk_is_one_line_a_clean_leave_and_exit_5_and_the_others_lose_nothing(tmp_path):
    ports = free_ports(3)
    with Group(tmp_path) as g:
        g.start(ports[0], ports)
        g.start(ports[1], ports)
        g.start(ports[2], ports, output="/dev/full")
        g.wait(lambda: all(any(r["kind"] == "view" and len(r["members"]) == 3 for r in g.records(p))
                           for p in ports[:2]), why="the group of three formed")
        g.send(ports[0], [f"a{i}" for i in range(50)])
        g.send(ports[2], [f"c{i}" for i in range(5)])
        assert g.procs[ports[2]].wait(30) == 5
        log = g.log(ports[2])
        no_traceback(log)
        assert log.count("cannot write /dev/full: No space left on device") == 1, log
        g.wait(lambda: all(any(r["kind"] == "view" and r["left"] == [f"127.0.0.1:{ports[2]}"] for r in g.records(p))
                           for p in ports[:2]), why="the others deliver its leave")
        assert g.messages(ports[0]) == g.messages(ports[1])
        assert {t for _, _, t in g.messages(ports[0])} >= {f"a{i}" for i in range(50)}
        assert [g.exit(p) for p in ports[:2]] == [0, 0]


def test_a_peer_nobody_admits_says_why_keeps_its_messages_and_exits_4(tmp_path):
    """D (the smallest port, so it dials the others) is listed by B only: A and C refuse it, B accepts
    it, but A coordinates and cannot reach it."""
    d, a, b, c = sorted(free_ports(4))
    with Group(tmp_path) as g:
        g.start(a, [a, b, c])
        g.start(b, [a, b, c, d])
        g.start(c, [a, b, c])
        g.wait(lambda: all(any(r["kind"] == "view" and len(r["members"]) == 3 for r in g.records(p)) for p in (a, b, c)),
               why="the group of three formed")
        g.start(d, [a, b, c, d])
        g.send(d, ["from d 1", "from d 2"])
        g.wait(lambda: "not admitted to the group" in g.log(d), deadline=30, why="D says it is not admitted")
        line = next(x for x in g.log(d).splitlines() if "not admitted to the group" in x)
        assert f"127.0.0.1:{a} refuses it: 127.0.0.1:{d} is not in 127.0.0.1:{a}'s neighbors file" in line, line
        assert f"127.0.0.1:{c} refuses it" in line and f"connected to 127.0.0.1:{b}" in line, line
        assert "2 messages entered here wait" in line, line
        assert g.exit(d) == 4
        log = g.log(d)
        no_traceback(log)
        assert ("2 messages entered at this peer were not delivered here before it stopped (it was never "
                "admitted to the group)") in log, log
        assert "left the group" not in log
        assert all(not g.messages(p) for p in (a, b, c))
        assert [g.exit(p) for p in (a, b, c)] == [0, 0, 0]


def test_a_member_missing_from_a_neighbors_file_is_a_warning_not_a_traceback(tmp_path):
    """A (the coordinator) and D list each other, B does not list D. Before issue 25 A admitted D, and
    B's sender was asked to send to a pid it had no link for (a warning); now A does not admit D, since
    B reports no link to it (`tom.core.reach`): A says so in one line, B keeps serving, nobody raises."""
    a, b, d = sorted(free_ports(3))
    with Group(tmp_path) as g:
        g.start(a, [a, b, d], "-v")
        g.start(b, [a, b], "-v")
        g.wait(lambda: all(any(r["kind"] == "view" and len(r["members"]) == 2 for r in g.records(p)) for p in (a, b)),
               why="A and B formed a group")
        g.start(d, [a, b, d], "-v")
        line = f"127.0.0.1:{b} cannot reach 127.0.0.1:{d}: not admitting it"
        g.wait(lambda: line in g.log(a), deadline=30, why="A says B cannot reach D")
        g.send(b, ["still alive"])
        g.wait(lambda: all(any(m[2] == "still alive" for m in g.messages(p)) for p in (a, b)), deadline=20,
               why="A and B deliver B's message")
        assert g.procs[b].poll() is None
        for p in (a, b, d):
            no_traceback(g.log(p))
        assert g.log(a).count(line) == 1, g.log(a)


def test_a_forced_stop_delivers_nothing_more_and_reports_what_it_leaves_undelivered(tmp_path):
    """A and B are frozen (SIGSTOP) so C's messages cannot complete; C is asked to leave, then stopped by
    a second signal: it delivers nothing beyond the rule (its file is a prefix of what the others deliver
    once they run again) and says how many of its messages it leaves undelivered (exit 4)."""
    a, b, c = sorted(free_ports(3))
    with Group(tmp_path) as g:
        for p in (a, b, c):
            g.start(p, [a, b, c], fast=False)  # A and B are frozen for less than the 5 s timeout
        g.wait(lambda: all(any(r["kind"] == "view" and len(r["members"]) == 3 for r in g.records(p)) for p in (a, b, c)),
               why="the group of three formed")
        g.send(a, [f"a{i}" for i in range(20)])
        g.wait(lambda: all(len(g.messages(p)) == 20 for p in (a, b, c)), why="the first 20 delivered")
        for p in (a, b):
            g.procs[p].send_signal(signal.SIGSTOP)
        try:
            g.send(c, [f"c{i}" for i in range(10)])
            time.sleep(0.5)
            g.procs[c].send_signal(signal.SIGTERM)
            time.sleep(0.5)
            assert g.exit(c) == 4
        finally:
            for p in (a, b):
                g.procs[p].send_signal(signal.SIGCONT)
        log = g.log(c)
        no_traceback(log)
        assert "SIGTERM: stopping" in log and "10 messages entered at this peer were not delivered here" in log, log
        mine = g.messages(c)
        assert len(mine) == 20
        g.wait(lambda: all(any(r["kind"] == "view" and r["removed"] == [f"127.0.0.1:{c}"] for r in g.records(p))
                           for p in (a, b)), why="A and B remove C")
        assert g.messages(a) == g.messages(b) and g.messages(a)[:len(mine)] == mine
        assert [g.exit(p) for p in (a, b)] == [0, 0]


def test_signals_during_shutdown_do_not_change_the_exit_status(tmp_path):
    """SIGTERM again and again (the first leaves, the second stops): the peer ends with its own exit
    status, never killed by a signal that came while it was shutting down."""
    (port,) = free_ports(1)
    codes = []
    with Group(tmp_path) as g:
        for attempt in range(3):
            (tmp_path / f"out-{port}.jsonl").unlink(missing_ok=True)  # (a view in it is of this start's)
            g.start(port, [port])
            g.wait(lambda: any(r["kind"] == "view" for r in g.records(port)) or "Started" in g.log(port),
                   why="the peer started")
            time.sleep(0.5 + attempt * 0.7)
            p = g.procs[port]
            end = time.monotonic() + 10
            while p.poll() is None and time.monotonic() < end:
                p.send_signal(signal.SIGTERM)
                time.sleep(0.003)
            codes.append(p.wait(10))
            no_traceback(g.log(port))
    assert all(c in (0, 130) for c in codes), codes


def test_a_host_the_wire_cannot_carry_is_refused_at_start_with_file_and_line(tmp_path):
    nb = tmp_path / "n.txt"
    nb.write_text("127.0.0.1:5000\nhost+x:5001\n")
    r = run_tom("peer", str(nb), str(tmp_path / "o.jsonl"), "5000", "--host", "127.0.0.1", "--no-ui")
    assert r.returncode == 2
    assert r.stderr.startswith(f"tom: error: {nb}:2: bad host 'host+x'") and r.stderr.count("\n") == 1, r.stderr


def _fake_member(port: int, real: int, heartbeats: list[bytes], deadline: float = 20.0) -> bytes:
    """A scripted static member on ``port``: takes the real peer's connection, sends one MESSAGE, then
    ``heartbeats``; returns what it received."""
    srv = socket.create_server(("127.0.0.1", port))
    srv.settimeout(deadline)
    try:
        conn, _ = srv.accept()
    finally:
        srv.close()
    with conn:
        conn.settimeout(deadline)
        got = b""
        while b"\n" not in got:  # its HELLO
            got += conn.recv(4096)
        me = f"127.0.0.1:{port}"
        conn.sendall(f"HELLO-{me}-1-lamportruns\nRESUME-0\n".encode())  # wire v3, as TOM speaks it
        while b"RESUME" not in got:
            got += conn.recv(4096)
        conn.sendall(f"MESSAGE-1-{me}-hello\n".encode())
        end = time.monotonic() + deadline
        while b"MARKS-" not in got and time.monotonic() < end:  # its cumulative ACK of the message
            got += conn.recv(4096)
        for hb in heartbeats:
            conn.sendall(hb)
            time.sleep(0.3)
        return got


def test_a_divergent_member_is_named_within_seconds(tmp_path):
    """A static group of two, one of them scripted: after one delivered message it reports a digest
    that is not the real peer's — the real peer logs it as a divergence, naming both and the position."""
    real, fake = sorted(free_ports(2))
    nb = tmp_path / "n.txt"
    nb.write_text(f"127.0.0.1:{real}\n127.0.0.1:{fake}\n")
    log = tmp_path / "log.txt"
    import threading

    result = {}
    t = threading.Thread(target=lambda: result.update(got=_fake_member(
        fake, real, [f"HEARTBEAT-1-1-00000000-1-127.0.0.1:{fake}\n".encode()] * 3)))
    t.start()
    time.sleep(0.2)
    p = PeerProcess(PeerCommand(nb, tmp_path / "o.jsonl", real, extra=("--static",)).argv(), log).start()
    try:
        t.join(30)
        end = time.monotonic() + 10
        while "DIVERGENCE" not in log.read_text() and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        p.stop(grace=10)
    text = log.read_text()
    lines = [x for x in text.splitlines() if "DIVERGENCE" in x]
    assert len(lines) == 1, text  # one alarm per peer and view, however often it is repeated
    assert (f"127.0.0.1:{fake} and this peer (127.0.0.1:{real}) delivered different messages in view 1: "
            f"their digests differ after message 1 of the view") in lines[0]
    no_traceback(text)


def test_a_peer_alone_founds_no_group_until_a_majority_of_its_file_is_there(tmp_path):
    """With a quorum (the default) a peer started alone waits and says why; the second of three
    founds the group with it, and what the first took in meanwhile is delivered at both."""
    a, b, c = sorted(free_ports(3))
    with Group(tmp_path) as g:
        g.start(a, [a, b, c])
        g.send(a, ["entered while alone"])
        g.wait(lambda: "no group yet" in g.log(a), deadline=20, why="A says why it founds no group")
        line = next(x for x in g.log(a).splitlines() if "no group yet" in x)
        assert "1 of the 3 peers of the neighbors file here, and founding one needs 2" in line, line
        time.sleep(1.0)
        assert g.records(a) == []
        g.start(b, [a, b, c])
        g.wait(lambda: all(g.messages(p) for p in (a, b)), deadline=30, why="A and B founded a group")
        for p in (a, b):
            views = [r for r in g.records(p) if r["kind"] == "view"]
            assert views[0]["members"] == [f"127.0.0.1:{a}", f"127.0.0.1:{b}"], views
            assert [m[2] for m in g.messages(p)] == ["entered while alone"]
        no_traceback(g.log(a))
        assert [g.exit(p) for p in (a, b)] == [0, 0]
