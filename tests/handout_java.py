"""The handout's reference peer (tests/handout_peer/HandoutPeer.java), compiled and run from tests.

`java_peer_classes` compiles it (skipping, with the reason, where there is no JDK); `JavaPeer` runs one
process with its stdin menu; `wait_for` is a bounded poll. Ports come from `procs.free_ports` (outside
the ephemeral range, so no outgoing connection takes one meanwhile).
"""

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from procs import free_ports

SOURCE = Path(__file__).parent / "handout_peer" / "HandoutPeer.java"
LINE = re.compile(r"^(\d+) ACKs on MESSAGE-(\d+)-(.*?:\d+)-(.*)$")


def java_peer_classes(tmp_path_factory):
    javac = shutil.which("javac")
    java = shutil.which("java")
    if javac is None or java is None:
        pytest.skip("javac not found: the handout reference peer needs a JDK 17+ on PATH")
    out = tmp_path_factory.mktemp("handout_peer_classes")
    done = subprocess.run(
        [javac, "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return java, out


class JavaPeer:
    """One HandoutPeer process; stdout and stderr go to files so no pipe can fill up."""

    def __init__(self, java, classes, workdir, name, neighbors, port, delay=None, output=None):
        self.port = port
        self.output = output or workdir / f"{name}.out"
        self.stdout_path = workdir / f"{name}.stdout"
        self.stderr_path = workdir / f"{name}.stderr"
        cmd = [java]
        if delay is not None:
            cmd.append(f"-Ddelay={delay}")
        cmd += ["-cp", str(classes), "HandoutPeer", str(neighbors), str(self.output), str(port)]
        self._stdout = open(self.stdout_path, "wb")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=self._stdout, stderr=self._stderr
        )

    def type(self, *lines):
        self.proc.stdin.write("".join(line + "\n" for line in lines).encode("utf-8"))
        self.proc.stdin.flush()

    def send(self, text):
        self.type("1", text)

    def stdout(self):
        return self.stdout_path.read_text("utf-8", errors="replace")

    def delivered(self):
        if not self.output.exists():
            return []
        return self.output.read_text("utf-8").splitlines()

    def stop(self):
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
        finally:
            for f in (self.proc.stdin, self._stdout, self._stderr):
                try:
                    f.close()
                except OSError:
                    pass


def wait_for(predicate, what, timeout=30.0, step=0.1):
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / step) + 1):
        if predicate():
            return
        if time.monotonic() > deadline:
            break
        time.sleep(step)
    assert predicate(), f"timed out after {timeout} s waiting for {what}"


def start_group(peer_classes, tmp_path, count, delays=None):
    java, classes = peer_classes
    ports = free_ports(count)
    neighbors = tmp_path / "neighbors.txt"
    neighbors.write_text(
        "# the group, every peer listed once (itself included)\n\n"
        + "".join(f"127.0.0.1:{p}\n" for p in ports)
    )
    delays = delays or {}
    peers = []
    try:
        for i, port in enumerate(ports):
            peers.append(JavaPeer(java, classes, tmp_path, f"p{i}", neighbors, port, delays.get(i)))
        for peer in peers:
            peer.type("127.0.0.1")
        for peer in peers:
            wait_for(lambda: "Started outgoing messages processor." in peer.stdout(), "startup")
    except BaseException:
        for peer in peers:
            peer.stop()
        raise
    return peers


