"""The handout's extras on real processes: three `tom peer --wire handout --dynamic` peers and a
scripted client that speaks raw lines (JOIN, ACK, LEAVE; never a HEARTBEAT). The ACK count a message
needs follows the joined set: the client's JOIN makes the next message wait for its ACK, its LEAVE
takes it out again, and when it goes silent it is dropped after --timeout."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from handout_java import wait_for
from procs import free_ports, tom_cmd

pytestmark = pytest.mark.e2e

HEARTBEAT, TIMEOUT = 0.2, 3.0  # a busy CI machine must not make a live peer look silent


class ScriptedClient:
    """Listens on its port (so the peers' frames to it are taken, read and kept) and sends raw lines,
    one connection each, as the handout's base tool does."""

    def __init__(self, port: int) -> None:
        self.port, self.lines, self._stop = port, [], threading.Event()
        self.server = socket.create_server(("127.0.0.1", port))
        self.server.settimeout(0.1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(2.0)
                data = b""
                try:
                    while chunk := conn.recv(65536):
                        data += chunk
                except OSError:
                    pass
                self.lines.extend(data.decode().splitlines())

    def send(self, ports: list[int], line: str) -> None:
        for port in ports:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(line.encode() + b"\n")

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.server.close()


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(ln) for ln in text[:text.rfind("\n") + 1].splitlines()]


def test_ack_count_follows_join_leave_and_silence(tmp_path):
    *ports, client_port = free_ports(4)
    neighbors = tmp_path / "neighbors.txt"
    neighbors.write_text("".join(f"127.0.0.1:{p}\n" for p in [*ports, client_port]))
    outputs = [tmp_path / f"out-{p}.jsonl" for p in ports]
    logs = [tmp_path / f"log-{p}.txt" for p in ports]
    client = ScriptedClient(client_port)
    procs = []
    me = f"127.0.0.1:{client_port}"
    try:
        for port, out, log in zip(ports, outputs, logs):
            procs.append(subprocess.Popen(
                tom_cmd("peer", str(neighbors), str(out), str(port), "--host", "127.0.0.1", "--no-ui",
                        "--wire", "handout", "--dynamic", "--heartbeat", str(HEARTBEAT), "--timeout",
                        str(TIMEOUT)),
                stdin=subprocess.PIPE, stdout=open(log, "wb"), stderr=subprocess.STDOUT))
        wait_for(lambda: all(f"127.0.0.1:{q} joined" in log.read_text()
                             for log, p in zip(logs, ports) for q in ports if q != p), "the three to join")

        def send(i: int, text: str) -> None:
            procs[i].stdin.write(f"{text}\n".encode())  # type: ignore[union-attr]
            procs[i].stdin.flush()  # type: ignore[union-attr]

        def delivered(text: str) -> list[dict]:
            return [r for out in outputs for r in records(out) if r["text"] == text]

        send(0, "three members")
        wait_for(lambda: len(delivered("three members")) == 3, "the first message")
        assert {r["acks"] for r in delivered("three members")} == {3}

        client.send(ports, f"JOIN-100-{me}")
        wait_for(lambda: all(f"{me} joined at clock 100" in log.read_text() for log in logs), "the JOIN")
        send(1, "needs the client's ACK")
        wait_for(lambda: any(ln.startswith("MESSAGE-") and ln.endswith("-needs the client's ACK")
                             for ln in client.lines), "the message at the client")
        time.sleep(0.5)
        assert delivered("needs the client's ACK") == []  # 3 ACKs of the 4 it needs
        line = next(ln for ln in client.lines if ln.endswith("-needs the client's ACK"))
        clock, origin = re.match(r"MESSAGE-(\d+)-(.+?:\d+)-", line).groups()  # type: ignore[union-attr]
        assert int(clock) > 100
        client.send(ports, f"ACK-{clock}-{origin}")
        wait_for(lambda: len(delivered("needs the client's ACK")) == 3, "the message after the client's ACK")
        assert {r["acks"] for r in delivered("needs the client's ACK")} == {4}

        client.send(ports, f"LEAVE-150-{me}")
        wait_for(lambda: all(f"{me} left" in log.read_text() for log in logs), "the LEAVE")
        send(2, "after the leave")
        wait_for(lambda: len(delivered("after the leave")) == 3, "a message needing 3 ACKs again")

        client.send(ports, f"JOIN-200-{me}")  # joins again, then stays silent: no HEARTBEAT
        wait_for(lambda: all(f"{me} joined at clock 200" in log.read_text() for log in logs), "the second JOIN")
        send(0, "the client is silent")
        wait_for(lambda: all(f"{me} silent for" in log.read_text() for log in logs), "the silence taken as a LEAVE",
                 timeout=10)
        wait_for(lambda: len(delivered("the client is silent")) == 3, "the message after the client is dropped")
        assert {r["acks"] for r in delivered("the client is silent")} == {3}
        orders = [[(r["clock"], r["from"]) for r in records(out)] for out in outputs]
        assert orders[0] == orders[1] == orders[2] and len(orders[0]) == 4
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            p.stdin.close()  # type: ignore[union-attr]
        client.close()
    for log in logs:
        assert "Traceback" not in log.read_text()



@pytest.mark.parametrize("extra, says", [
    (("--keys", "keys"), "--wire handout takes no --keys"),
    (("--order", "sequencer"), "--wire handout takes no --order sequencer"),
    (("--jitter", "0.1"), "--wire handout takes no --jitter"),
    (("--http", "0"), "--wire handout takes no --http"),
    (("--static", "--dynamic"), "--wire handout takes no --static together with --dynamic"),
])
def test_what_the_handout_wire_cannot_do_is_refused_with_one_line(tmp_path, extra, says):
    from procs import run_tom

    (port,) = free_ports(1)
    neighbors = tmp_path / "n.txt"
    neighbors.write_text(f"127.0.0.1:{port}\n")
    done = run_tom("peer", str(neighbors), str(tmp_path / "o.jsonl"), str(port), "--host", "127.0.0.1",
                   "--no-ui", "--wire", "handout", *extra)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"tom: error: {says}" + done.stderr.strip().split(says, 1)[1]]
    assert "Traceback" not in done.stderr


def test_dynamic_needs_the_handout_wire(tmp_path):
    from procs import run_tom

    (port,) = free_ports(1)
    neighbors = tmp_path / "n.txt"
    neighbors.write_text(f"127.0.0.1:{port}\n")
    done = run_tom("peer", str(neighbors), str(tmp_path / "o.jsonl"), str(port), "--host", "127.0.0.1",
                   "--no-ui", "--dynamic")
    assert done.returncode == 2 and "--dynamic is for --wire handout" in done.stderr, done.stderr
