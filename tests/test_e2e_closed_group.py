"""A secured group of real peers under attack from a stranger on loopback: nothing gets in.

The stranger knows everything but the group's keys: the pids, the protocol, and it holds certificates
for the same pids from its own CA. It sends HELLO lines for members, junk and forged MESSAGE frames in
clear, tries TLS with its certificates, listens on a port of the neighbors file for members to dial,
and runs a peer without keys. The members deliver every message, in one order, and notice nothing but
(rate-limited) log lines.
"""

import random
import socket
import ssl
import subprocess
import threading
import time

import pytest

from procs import PeerProcs, free_ports, make_keys, tom_cmd

pytestmark = pytest.mark.e2e


def plaintext_attack(port: int, members: list[str], rng: random.Random) -> bytes:
    """What a member answers to HELLOs claiming other members, forged frames and junk, in clear."""
    lines = [f"HELLO-{m}-{rng.randint(1, 10**16)}\n".encode() for m in members]
    lines += [f"MESSAGE-{rng.randint(1, 10**6)}-{m}-INJECTED\n".encode() for m in members]
    lines += [b"RESUME-0\n", bytes(rng.getrandbits(8) for _ in range(300)) + b"\n"]
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(b"".join(lines))
            s.shutdown(socket.SHUT_WR)
            while data := s.recv(4096):
                answer += data
        except OSError:
            pass
    return answer


def tls_attack(port: int, strangers, impersonated: str) -> str:
    """A TLS client with the other CA's certificate for a member: how far it got."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # the stranger trusts anyone
    stem = impersonated.replace(":", "_")
    ctx.load_cert_chain(strangers / f"{stem}.pem", strangers / f"{stem}.key")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw) as s:
                s.sendall(f"HELLO-{impersonated}-1\nRESUME-0\nMESSAGE-1-{impersonated}-INJECTED\n".encode())
                data = s.recv(4096)  # TLS 1.3: the server's verdict on our certificate comes now
                return f"answered {data!r}" if data else "closed"
        except (ssl.SSLError, OSError) as e:
            return f"refused: {e.__class__.__name__}"


class FakeNeighbor(threading.Thread):
    """Listens on a neighbors-file port the members dial, and keeps every byte they send."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_server(("127.0.0.1", port))
        self.sock.settimeout(0.2)
        self.received: list[bytes] = []
        self.done = threading.Event()

    def run(self) -> None:
        end = time.monotonic() + 120
        while not self.done.is_set() and time.monotonic() < end:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                data = b""
                try:
                    while len(data) < 65536 and (chunk := conn.recv(4096)):
                        data += chunk
                except OSError:
                    pass
                self.received.append(data)
        self.sock.close()


def test_a_secured_group_lets_nothing_in(tmp_path):
    rng = random.Random(8)
    ports = sorted(free_ports(5))
    plain_port, member_ports, fake_port = ports[0], ports[1:4], ports[4]
    members = [f"127.0.0.1:{p}" for p in member_ports]
    strangers = make_keys(tmp_path / "strangers", ports)  # the same pids, another CA
    fake = FakeNeighbor(fake_port)
    fake.start()
    try:
        with PeerProcs(tmp_path, 3, ports=member_ports, everyone=ports) as group:
            group.wait_delivered(0)
            for i in range(3):
                group.send(i, [f"m{i} {k}" for k in range(60)])
            answers, verdicts = [], []
            for round_ in range(4):
                for i, port in enumerate(member_ports):
                    others = [m for m in members if m != members[i]]
                    answers.append(plaintext_attack(port, others, rng))
                    verdicts.append(tls_attack(port, strangers, others[round_ % 2]))
                for i in range(3):
                    group.send(i, [f"m{i} r{round_} {k}" for k in range(60)])
                time.sleep(0.3)
            dialled = list(fake.received)  # by members only: the intruder below dials it too
            intruder = subprocess.run(
                tom_cmd("peer", str(group.neighbors), str(tmp_path / "plain.jsonl"), str(plain_port), "--host",
                        "127.0.0.1", "--no-ui"), capture_output=True, text=True, timeout=30, stdin=subprocess.PIPE)
            group.wait_delivered(3 * 300)
            assert group.terminate() == [0, 0, 0], group.log_text()
            logs = group.log_text()
            seqs = [[(r["clock"], r["pid"], r["text"]) for r in group.messages(i)] for i in range(3)]
            views = [[r for r in group.records(i) if r["kind"] == "view"] for i in range(3)]
    finally:
        fake.done.set()
        fake.join(5)

    assert seqs[0] == seqs[1] == seqs[2] and len(set(seqs[0])) == 900
    assert {pid for _, pid, _ in seqs[0]} == set(members)
    assert not any("INJECTED" in t for _, _, t in seqs[0])
    for v in views:  # formed by the three, nobody removed, nobody joined but members
        assert v[0]["members"] == members and not any(r["removed"] for r in v), v
        assert all(set(r["members"]) <= set(members) for r in v)
    assert "replaced an older connection" not in logs and "removed" not in logs
    assert all(a.startswith(b"TOM-TLS-REQUIRED") for a in answers), answers
    assert all(v.startswith(("refused", "closed")) for v in verdicts), verdicts
    # the members dialled the fake neighbor, in TLS only: it never saw a HELLO (nor an incarnation)
    assert dialled and all(d[:1] == b"\x16" and b"HELLO-" not in d for d in dialled), dialled
    # the peer without keys stopped with one line; the group only logged it
    assert intruder.returncode == 2, intruder.stderr
    err = [ln for ln in intruder.stderr.splitlines() if ln.startswith("tom: ")]
    assert len(err) == 1 and "the group is secured" in err[0], intruder.stderr
    assert "plaintext connection refused" in logs
    # rejections are logged, but rate-limited: far fewer lines than attempts
    rejected = [ln for ln in logs.splitlines() if "rejected a connection" in ln or "handshake failed" in ln]
    assert 0 < len(rejected) <= 3 * 12, "\n".join(rejected)
