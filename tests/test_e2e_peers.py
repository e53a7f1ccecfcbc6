"""Real `tom peer` processes on loopback: ordering, hostile input, clean shutdown, clear errors."""

import random
import socket

import pytest

from procs import PeerProcs, free_ports, run_tom, write_neighbors

pytestmark = pytest.mark.e2e


def garbage_attack(port: int, rng: random.Random) -> None:
    """Throw garbage at a peer: random bytes, malformed frames, an unknown peer, bad UTF-8."""
    payloads = [
        bytes(rng.getrandbits(8) for _ in range(2000)),
        b"MESSAGE-notaclock-127.0.0.1:1-x\nACK-\n\n-----\n",
        b"HELLO-127.0.0.1:1-5\nACK-1-127.0.0.1:1\nMESSAGE-1-127.0.0.1:1-hi\n",
        b"\xff\xfe\xfd\n",
        b"X" * 70000 + b"\n",
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ]
    for data in payloads:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            try:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                s.settimeout(5)
                while s.recv(4096):
                    pass
            except OSError:
                pass


def test_three_peers_deliver_everything_in_one_order_despite_garbage(tmp_path):
    """The plain protocol (--insecure) survives garbage: its parser is what a secured group's members
    run behind TLS too."""
    rng = random.Random(7)
    with PeerProcs(tmp_path, 3, delay=0.05, secure=False) as group:
        for i in range(3):
            group.send(i, [f"peer{i} message {k} - with: dashes \\ and ünïcode" for k in range(50)])
        garbage_attack(group.ports[1], rng)
        group.wait_delivered(150)
        codes = group.terminate()
        assert codes == [0, 0, 0], group.log_text()
        seqs = [[(r["clock"], r["pid"], r["text"]) for r in group.messages(i)] for i in range(3)]
        assert seqs[0] == seqs[1] == seqs[2]
        assert len(set(seqs[0])) == 150
        for i in range(3):
            recs = group.records(i)
            assert [r["index"] for r in recs] == list(range(1, len(recs) + 1))
            assert {r["peer"] for r in recs} == {f"127.0.0.1:{group.ports[i]}"}
            assert all(r["delivered_at"] >= r["sent_at"] for r in recs if r["kind"] == "message")
            views = [r for r in recs if r["kind"] == "view"]
            assert views[0]["members"] == sorted(f"127.0.0.1:{p}" for p in group.ports), views[0]
            assert recs[-1] is views[-1] and recs[0]["peer"] in views[-1]["left"], \
                "SIGTERM: the peer's last record is its own leave"
        # left at once, or one after the other: each leave view is the same record at every peer that
        # delivered it (the view a peer leaves in is never decided by itself alone)
        last_views = {}
        for i in range(3):
            for r in group.records(i):
                if r["kind"] == "view":
                    same = {k: v for k, v in r.items() if k not in ("index", "peer", "delivered_at")}
                    assert last_views.setdefault(r["view"], same) == same, (i, r)
        mine = [t for _, pid, t in seqs[0] if pid.endswith(str(group.ports[0]))]
        assert mine == [f"peer0 message {k} - with: dashes \\ and ünïcode" for k in range(50)]
        assert "rejected" in group.log_text()


def test_delay_makes_premature_acks_and_blocking_visible_but_order_holds(tmp_path):
    with PeerProcs(tmp_path, 4, delay=0.2) as group:
        for i in range(4):
            group.send(i, [f"p{i}-{k}" for k in range(10)])
        group.wait_delivered(40)
        assert group.terminate() == [0, 0, 0, 0]
        seqs = [[(r["clock"], r["pid"]) for r in group.messages(i)] for i in range(4)]
        assert len(seqs[0]) == 40
        assert all(s == seqs[0] for s in seqs)


def test_output_keeps_hostile_text_exactly(tmp_path):
    texts = ["a-b-c", "MESSAGE-1-127.0.0.1:9-fake", "back\\slash\\n", "tab\there", "emoji 🚀", "ACK-5-1.2.3.4:5"]
    with PeerProcs(tmp_path, 2) as group:
        group.send(0, texts)
        group.wait_delivered(len(texts))
        group.terminate()
        assert [r["text"] for r in group.messages(1)] == texts


def one_line_error(result, *needles):
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_neighbors_line_names_file_and_line(tmp_path):
    nb = tmp_path / "nb.txt"
    nb.write_text("127.0.0.1:5000\n# comment\nnot-an-address\n")
    one_line_error(run_tom("peer", str(nb), str(tmp_path / "o"), "5000", "--host", "127.0.0.1", "--no-ui"),
                   f"{nb}:3")


def test_missing_neighbors_file(tmp_path):
    one_line_error(run_tom("peer", str(tmp_path / "none.txt"), str(tmp_path / "o"), "5000", "--no-ui"),
                   "not found")


def test_own_address_not_in_file(tmp_path):
    nb = write_neighbors(tmp_path / "nb.txt", [5000, 5001])
    one_line_error(run_tom("peer", str(nb), str(tmp_path / "o"), "5009", "--host", "127.0.0.1", "--no-ui"),
                   "127.0.0.1:5009", "not in the neighbors file")


def test_unwritable_output(tmp_path):
    nb = write_neighbors(tmp_path / "nb.txt", [5000])
    one_line_error(run_tom("peer", str(nb), str(tmp_path / "no" / "dir" / "o"), "5000", "--host", "127.0.0.1",
                           "--no-ui"), "cannot write the output file")


def test_port_in_use(tmp_path):
    port = free_ports(1)[0]
    nb = write_neighbors(tmp_path / "nb.txt", [port])
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        one_line_error(run_tom("peer", str(nb), str(tmp_path / "o"), str(port), "--host", "127.0.0.1", "--no-ui"),
                       "already in use")
