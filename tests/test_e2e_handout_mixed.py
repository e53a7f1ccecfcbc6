"""A class's group: the handout's reference peer (Java, tests/handout_peer/) and TOM peers on the
handout's wire in one static group, real processes on loopback. They deliver one identical order
(messages sent at the same moment: equal clocks; a TOM peer with --delay: premature ACKs), and
`tom verify` grades everybody's files: VERIFIED; two adjacent lines swapped in a reference file:
VIOLATED naming it; a reference file cut short: VERIFIED, the file named incomplete."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handout_java import JavaPeer, java_peer_classes, wait_for
from procs import free_ports, tom_cmd
from tests.spark_java import spark_java

pytestmark = pytest.mark.e2e

TEXT_LINE = re.compile(r"^(\d+) ACKs on MESSAGE-(\d+)-(.+?:\d+)-(.*)$")


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    return java_peer_classes(tmp_path_factory)


class TomHandoutPeer:
    """A `tom peer --wire handout --no-ui` process: each stdin line is one message."""

    def __init__(self, neighbors: Path, output: Path, log: Path, port: int, delay: float = 0.0) -> None:
        self.port, self.output, self.log = port, output, log
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            tom_cmd("peer", str(neighbors), str(output), str(port), "--host", "127.0.0.1", "--no-ui",
                    "--wire", "handout", "--delay", str(delay)),
            stdin=subprocess.PIPE, stdout=self._log, stderr=subprocess.STDOUT)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{text}\n".encode())
        self.proc.stdin.flush()

    def started(self) -> bool:
        return self.log.exists() and "Sending messages from" in self.log.read_text(errors="replace")

    def delivered(self) -> list[tuple[int, str, str]]:
        if not self.output.exists():
            return []
        text = self.output.read_text()
        return [(r["clock"], r["from"], r["text"]) for r in
                map(json.loads, text[:text.rfind("\n") + 1].splitlines())]

    def stop(self) -> int | None:
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
        finally:
            for f in (self.proc.stdin, self._log):
                try:
                    f.close()  # type: ignore[union-attr]
                except OSError:
                    pass
        return self.proc.returncode


def java_delivered(peer: JavaPeer) -> list[tuple[int, str, str]]:
    out = []
    for line in peer.delivered():
        m = TEXT_LINE.match(line)
        assert m, f"{peer.output}: not an output line: {line!r}"
        out.append((int(m[2]), m[3], m[4]))
    return out


def run_class(classes, tmp_path: Path, java_count: int, tom_count: int, tom_delay: float = 0.0):
    """Start the mixed group, send from everyone (the first round at the same moment), wait until
    every output holds every message; return (class folder, ordered messages, java peers, tom peers)."""
    java, java_classes = classes
    ports = free_ports(java_count + tom_count)
    neighbors = tmp_path / "neighbors.txt"
    neighbors.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
    folder = tmp_path / "class"
    folder.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    javas: list[JavaPeer] = []
    toms: list[TomHandoutPeer] = []
    try:
        for i, port in enumerate(ports[:java_count]):
            javas.append(JavaPeer(java, java_classes, logs, f"student{i}", neighbors, port,
                                  output=folder / f"student{i}.txt"))
        for i, port in enumerate(ports[java_count:]):
            toms.append(TomHandoutPeer(neighbors, folder / f"tom-{port}.jsonl", logs / f"tom-{port}.log", port,
                                       delay=tom_delay if i == 0 else 0.0))
        for peer in javas:
            peer.type("127.0.0.1")
        for peer in javas:
            wait_for(lambda: "Started outgoing messages processor." in peer.stdout(), "a reference peer's start")
        for peer in toms:
            wait_for(peer.started, "a TOM peer's start")
        everyone = [*javas, *toms]
        expected = []
        for i, peer in enumerate(everyone):  # the same moment: every first message has clock 1
            peer.send(f"hello from {i}")
            expected.append(f"hello from {i}")
        for rnd in range(3):
            for i, peer in enumerate(everyone):
                text = f"round {rnd}-{i}: a-b:1-c"
                peer.send(text)
                expected.append(text)
        n = len(expected)

        def outputs():
            return [java_delivered(p) for p in javas] + [p.delivered() for p in toms]

        wait_for(lambda: all(len(o) >= n for o in outputs()), "every message at every peer", timeout=60)
        time.sleep(0.5)  # nothing more may arrive
        orders = outputs()
        for order in orders:
            assert order == orders[0]
        assert sorted(t for _, _, t in orders[0]) == sorted(expected)
        assert orders[0] == sorted(orders[0], key=lambda m: (m[0], m[1]))  # (clock, from as written)
        froms = {f for _, f, _ in orders[0]}
        assert froms == {f"localhost/127.0.0.1:{p}" for p in ports}
        return folder, orders[0], javas, toms
    finally:
        for peer in javas:
            peer.stop()
        for peer in toms:
            assert peer.stop() in (0, -15), peer.log.read_text(errors="replace")
        for peer in toms:
            log = peer.log.read_text(errors="replace")
            assert "Traceback" not in log and "ignored a line" not in log, log


def verify(folder: Path, report: Path) -> tuple[int, str, dict]:
    done = subprocess.run(tom_cmd("verify", str(folder), "--report-dir", str(report)), capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = done.stdout + done.stderr
    rep = json.loads((report / "report.json").read_text()) if (report / "report.json").exists() else {}
    return done.returncode, out, rep


def test_two_reference_peers_and_one_tom_peer_with_delay(classes, tmp_path):
    run_class(classes, tmp_path, java_count=2, tom_count=1, tom_delay=0.2)


@pytest.mark.spark
@pytest.mark.skipif(not spark_java(), reason="Spark needs Java 17+")
def test_one_reference_peer_and_two_tom_peers_then_verify_the_class(classes, tmp_path, spark_remote):
    folder, order, _, _ = run_class(classes, tmp_path, java_count=1, tom_count=2, tom_delay=0.1)
    (folder / "teacher-notes.log").write_text("started the run at 10:00\nnothing to see here\n")
    code, out, rep = verify(folder, tmp_path / "report-ok")
    assert code == 0 and "VERIFIED" in out, out
    assert rep["counts"]["peers"] == 3, rep["counts"]

    student = folder / "student0.txt"
    lines = student.read_text().splitlines()

    swapped = tmp_path / "swapped"
    shutil.copytree(folder, swapped)
    bad = lines[:]
    k = next(i for i in range(2, len(bad) - 1) if bad[i] != bad[i + 1])
    bad[k], bad[k + 1] = bad[k + 1], bad[k]
    (swapped / "student0.txt").write_text("\n".join(bad) + "\n")
    code, out, rep = verify(swapped, tmp_path / "report-swapped")
    assert code == 1 and "VIOLATED" in out, out
    assert "student0" in out, out

    cut = tmp_path / "cut"
    shutil.copytree(folder, cut)
    (cut / "student0.txt").write_text("\n".join(lines[:len(lines) - 3]) + "\n")
    code, out, rep = verify(cut, tmp_path / "report-cut")
    assert code == 0 and "VERIFIED" in out, out
    assert "student0" in out and "incomplete" in out, out
    assert f"{len(lines) - 3} of {len(lines)}" in out, out
