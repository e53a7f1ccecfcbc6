"""The examples as a newcomer runs them: the replicated key-value store (three processes from one
command, HTTP PUTs on every member, the same store everywhere) and the ordered chat (two members, the
same lines in the same order)."""

from __future__ import annotations

import os
import random
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from members import wait_until

from tom.tools.peers import port_range

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent


def free_run(count: int, spacing: int = 1000) -> int:
    """A base port such that base..base+count-1 and the same plus ``spacing`` are free on loopback, all
    of them in the ports `tom.tools.peers.free_ports` picks from (this worker's, below the ephemeral
    range)."""
    low, high = port_range()
    for _ in range(200):
        base = random.randrange(low, high - spacing - count + 2)
        ports = [base + i for i in range(count)] + [base + spacing + i for i in range(count)]
        try:
            socks = []
            for p in ports:
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free run of ports")


def run_kv_store(python: str, cwd: Path) -> subprocess.CompletedProcess:
    base = free_run(3)
    return subprocess.run([python, str(REPO / "examples" / "kv_store.py"), "--check", "--group-port", str(base),
                           "--http-port", str(base + 1000)], capture_output=True, text=True, timeout=180,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def check_kv_output(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    stores = [ln.split(": ", 1)[1] for ln in done.stdout.splitlines() if ln.startswith("member ") and "{" in ln]
    assert len(stores) == 3 and len(set(stores)) == 1, done.stdout
    assert '"key0": "overwritten at member 2"' in stores[0]
    assert "every member holds the same store" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_kv_store_example_keeps_one_store_in_three_processes(tmp_path):
    check_kv_output(run_kv_store(sys.executable, tmp_path))


def test_the_chat_example_shows_the_same_lines_in_the_same_order(tmp_path):
    base = free_run(2)
    neighbors = tmp_path / "neighbors.txt"
    neighbors.write_text(f"127.0.0.1:{base}\n127.0.0.1:{base + 1}\n")
    script = str(REPO / "examples" / "chat.py")
    names = ["alice", "bob"]
    procs = [subprocess.Popen([sys.executable, script, str(neighbors), f"127.0.0.1:{base + i}", name],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=tmp_path) for i, name in enumerate(names)]
    shown: list[list[str]] = [[], []]
    readers = [threading.Thread(target=lambda p=p, into=into: into.extend(p.stdout), daemon=True)
               for p, into in zip(procs, shown)]
    for r in readers:
        r.start()
    try:
        wait_until(lambda: all(any("2 in the room" in ln for ln in s) for s in shown))  # both admitted
        for k in range(3):
            for p, name in zip(procs, names):
                p.stdin.write(f"line {k} of {name}\n")
                p.stdin.flush()
        wait_until(lambda: all(sum(": line " in ln for ln in s) == 6 for s in shown))
        procs[1].stdin.close()  # bob leaves: alice sees it
        wait_until(lambda: any(" left: 1 in the room" in ln for ln in shown[0]))
        procs[0].stdin.close()
        for p in procs:
            p.wait(30)
        errors = [p.stderr.read() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    lines = [[ln for ln in s if ": line " in ln] for s in shown]
    assert lines[0] == lines[1], shown
    assert f"-- 127.0.0.1:{base + 1} left: 1 in the room\n" in shown[0]
    assert all("Traceback" not in err for err in errors), errors


def test_the_readme_s_replicated_dict_three_members_then_a_fourth_that_joins_with_the_state(tmp_path):
    """The README's ten lines as a newcomer runs them: three processes share the dict, a fourth starts
    later and takes the group's state, and every one prints the same content."""
    readme = (REPO / "README.md").read_text()
    code = readme[readme.index("import sys, tom"):]
    code = code[:code.index("```")]
    base = free_run(4)
    for i in range(4):
        code = code.replace(f"127.0.0.1:{7000 + i}", f"127.0.0.1:{base + i}")
    script = tmp_path / "dict.py"
    script.write_text(code)

    def start(i: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(script), str(i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=tmp_path)

    shown: list[bytes] = []

    def prompted(count: int, deadline: float = 60.0) -> None:
        """Until the first ``count`` processes ask for Enter: each wrote, and its write was delivered
        to it (what they printed so far kept in ``shown``)."""
        shown.extend(b"" for _ in range(count - len(shown)))
        end = time.monotonic() + deadline
        with selectors.DefaultSelector() as sel:
            for i, p in enumerate(procs[:count]):
                sel.register(p.stdout.fileno(), selectors.EVENT_READ, i)
            while not all(b"written: " in out for out in shown):
                assert time.monotonic() < end, f"not all of {count} asked for Enter within {deadline} s: {shown}"
                for key, _ in sel.select(timeout=0.5):
                    chunk = os.read(key.fd, 4096)
                    shown[key.data] += chunk
                    if not chunk:
                        sel.unregister(key.fd)

    procs = [start(i) for i in range(3)]
    try:
        prompted(3)  # the three found the group and write
        procs.append(start(3))
        prompted(4)  # the fourth joins, takes the state, writes
        time.sleep(1.5)  # what the fourth wrote, delivered to it, reaches the others
        outs = [p.communicate("\n", timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    outs = [(before.decode() + out, err) for before, (out, err) in zip(shown, outs)]
    printed = [out.split("written: ", 1)[-1].strip() for out, _ in outs]
    assert len(set(printed)) == 1, outs
    assert all(f"hello from 127.0.0.1:{base + i}" in printed[0] for i in range(4)), outs


def test_the_durable_kv_store_example_keeps_every_key_when_all_three_are_killed(tmp_path):
    base = free_run(3)
    done = subprocess.run([sys.executable, str(REPO / "examples" / "kv_store.py"), "--data", str(tmp_path / "kv"),
                           "--check", "--group-port", str(base), "--http-port", str(base + 1000)],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    before = [ln.split(": ", 1)[1] for ln in done.stdout.splitlines()
              if ln.startswith("member ") and "{" in ln and "again" not in ln]
    after = [ln.split(": ", 1)[1] for ln in done.stdout.splitlines() if "killed and started again: " in ln]
    assert len(before) == 3 and len(after) == 3 and len(set(before + after)) == 1, done.stdout
    assert '"key0": "overwritten at member 2"' in after[0]
    assert "every key is back after all three were killed" in done.stdout
    assert all((tmp_path / "kv" / f"member-{i}" / "group" / "history.log").exists() for i in range(3))
    assert "Traceback" not in done.stderr


def test_the_kv_store_example_with_a_port_in_use_says_so_in_one_line_and_stops(tmp_path):
    """A member whose group port is taken stops with one line naming the port, no traceback, and the
    launcher stops naming that member (its wait for the HTTP faces ends when a member does)."""
    base = free_run(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + 1))
        taken.listen()
        done = subprocess.run([sys.executable, str(REPO / "examples" / "kv_store.py"), "--check", "--group-port",
                               str(base), "--http-port", str(base + 1000)], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"kv_store: member 1: port {base + 1} on 127.0.0.1 is already in use" in done.stderr
    assert "kv_store: member 1 stopped (exit 2) before its HTTP face served" in done.stderr
