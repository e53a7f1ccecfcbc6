"""The interactive terminal as a person uses it: a real tmux pane, keys typed, the screen read."""

import re
import shutil
import subprocess
import time
import uuid

import pytest

from procs import free_ports, make_keys, tom_cmd, write_neighbors

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


class Tmux:
    def __init__(self) -> None:
        self.socket = f"tom-test-{uuid.uuid4().hex[:8]}"

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=10).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-J", "-S", "-200", "-t", "ui")

    def alive(self) -> bool:
        return "ui" in self.run("list-sessions")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "ui", *keys)

    def wait_for(self, text: str, deadline: float = 15.0) -> str:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared on screen:\n{self.screen()}")


def test_type_a_message_ask_status_and_quit(tmp_path):
    ports = free_ports(2)
    nb = write_neighbors(tmp_path / "nb.txt", ports)
    keys = make_keys(tmp_path / "keys", ports)
    out_a, out_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    other = subprocess.Popen(tom_cmd("peer", str(nb), str(out_b), str(ports[1]), "--host", "127.0.0.1",
                                     "--no-ui", "--keys", str(keys)), stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmux = Tmux()
    try:
        cmd = " ".join(tom_cmd("peer", str(nb), str(out_a), str(ports[0]), "--host", "127.0.0.1", "--keys",
                               str(keys)))
        tmux.run("new-session", "-d", "-s", "ui", "-x", "150", "-y", "50", cmd)
        tmux.wait_for("Choose what to do")
        tmux.wait_for("connected")
        tmux.keys("1", "Enter")
        tmux.wait_for("Enter the message to send")
        tmux.keys("Hello world!", "Enter")
        screen = tmux.wait_for("delivered #2")
        # #1 is the view of the two peers: view 1 when they found the group together, a later one when
        # B, started first, formed a group alone before A was up (seen under coverage's slowdown)
        first = re.search(r"view \d+ #1 members: (.*)", screen)
        assert first and f"127.0.0.1:{ports[0]}" in first.group(1) and f"127.0.0.1:{ports[1]}" in first.group(1), screen
        tmux.keys("send second - one", "Enter")
        tmux.wait_for("delivered #3")
        tmux.keys("2", "Enter")
        screen = tmux.wait_for("Lamport clock")
        assert "Pending messages" in screen and f"127.0.0.1:{ports[1]}" in screen
        assert "up" in screen
        tmux.keys("bogus", "Enter")
        tmux.wait_for("unknown command")
        tmux.keys("3", "Enter")
        end = time.monotonic() + 10
        while tmux.alive() and time.monotonic() < end:
            time.sleep(0.1)
        assert not tmux.alive(), "quit did not end the peer"
        assert '"left":["127.0.0.1:%d"]' % ports[0] in out_a.read_text().splitlines()[-1], "quit leaves the group"
        texts = [line for line in out_a.read_text().splitlines() if '"kind":"message"' in line]
        assert len(texts) == 2 and '"text":"Hello world!"' in texts[0] and '"text":"second - one"' in texts[1]
    finally:
        tmux.run("kill-server")
        other.kill()
        other.wait(5)


def test_the_handout_wire_menu_send_status_and_quit(tmp_path):
    """`--wire handout` in a real terminal: the handout's menu; a message that waits for a neighbor
    that is not running shows in status as the handout's figure 3 prints it, with what it misses;
    quit stops the peer."""
    ports = free_ports(2)
    nb = write_neighbors(tmp_path / "nb.txt", ports)
    out = tmp_path / "a.jsonl"
    tmux = Tmux()
    try:
        cmd = " ".join(tom_cmd("peer", str(nb), str(out), str(ports[0]), "--host", "127.0.0.1", "--wire",
                               "handout"))
        tmux.run("new-session", "-d", "-s", "ui", "-x", "150", "-y", "50", cmd)
        tmux.wait_for("Sending messages from: localhost/127.0.0.1:")
        tmux.wait_for("3. Quit")
        tmux.keys("1", "Enter")
        tmux.wait_for("Enter the message to send")
        tmux.keys("Hello world!", "Enter")
        tmux.wait_for(f"Ready to send: MESSAGE-1-localhost/127.0.0.1:{ports[0]}-Hello world!")
        end = time.monotonic() + 10
        while time.monotonic() < end:  # its own copy comes back and is acknowledged by itself: 1 of 2
            tmux.keys("2", "Enter")
            time.sleep(0.3)
            if f"1 ACKs on MESSAGE-1-localhost/127.0.0.1:{ports[0]}-Hello world!   [1 ACK missing]" in tmux.screen():
                break
        screen = tmux.screen()
        assert "Logical clock time: 2" in screen, screen
        assert f"1 ACKs on MESSAGE-1-localhost/127.0.0.1:{ports[0]}-Hello world!   [1 ACK missing]" in screen, screen
        assert f"cannot reach 127.0.0.1:{ports[1]}" in screen, screen  # one line, retried
        tmux.keys("3", "Enter")
        end = time.monotonic() + 15
        while tmux.alive() and time.monotonic() < end:
            time.sleep(0.1)
        assert not tmux.alive(), tmux.screen()
    finally:
        tmux.run("kill-server")
