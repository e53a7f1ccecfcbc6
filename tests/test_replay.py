"""`tom replay`: a run read back from its frame traces and outputs (`tom.replay.run`), its causal order and
send/receive pairs, its ShiViz log (checked by ShiViz's own regular expression in JavaScript), and the
frame trace itself (`tom.net.frametrace`): bounded, and a failing disk ends it with one line."""

import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from procs import PeerProcs, run_tom
from shiviz_js import SHIVIZ_CHECK
from tom.codec.shiviz import shiviz_log
from tom.net.frametrace import FrameTrace
from tom.replay.feed import dashboard_events, shiviz_events
from tom.replay.run import FrameEvent, RunError, load_run

A, B = "127.0.0.1:1", "127.0.0.1:2"
NODE = shutil.which("node") or shutil.which("nodejs")


def write_trace(path: Path, peer: str, inc: int, records: list[tuple]) -> None:
    """A trace in `tom.net.frametrace`'s format: records ``(kind, fields..., [lines])``."""
    out = [json.dumps({"trace": 1, "peer": peer, "incarnation": inc, "order": "lamport", "delay": 0.0, "t": 0.0})]
    for kind, *fields in records:
        lines = fields.pop() if kind in ("O", "I") else []
        out.append(" ".join(map(str, (kind, *fields, *((len(lines),) if kind in ("O", "I") else ())))))
        out += lines
    path.write_text("\n".join(out) + "\n")


def test_a_frame_sent_again_after_a_reconnect_pairs_with_its_last_send_and_clocks_may_disagree(tmp_path):
    """A writes ACK #1 twice (the first connection broke before B had it) and B reads it once; B's wall
    clock runs 10 s behind A's. The receive pairs with the second send, and comes after it."""
    write_trace(tmp_path / "a.trace", A, 10, [
        ("O", 100.0, 100.0, B, 20, 1, ["ACK-3-127.0.0.1:1"]),
        ("D", 101.0, B),
        ("O", 102.0, 102.0, B, 20, 1, ["ACK-3-127.0.0.1:1"]),
        ("O", 102.5, 102.5, B, 20, 2, ["RECEIVED-5", "ACK-4-127.0.0.1:1"]),
    ])
    write_trace(tmp_path / "b.trace", B, 20, [
        ("I", 92.1, A, 10, 1, ["ACK-3-127.0.0.1:1", "ACK-4-127.0.0.1:1"]),
    ])
    run = load_run(tmp_path)
    assert run.peers == [A, B] and run.problems == []
    frames = [e for e in run.events if isinstance(e, FrameEvent)]
    assert [(e.peer, e.dir, e.n) for e in frames if e.peer == A] == [(A, "out", 1), (A, "out", 1), (A, "out", 2)]
    assert [(e.peer, e.dir, e.n) for e in frames if e.peer == B] == [(B, "in", 1), (B, "in", 2)]  # (RECEIVED: control)
    sends = [run.events.index(e) for e in frames if e.peer == A]
    receives = [run.events.index(e) for e in frames if e.peer == B]
    assert run.pairs == {receives[0]: sends[1], receives[1]: sends[2]}
    assert all(run.pairs[r] < r for r in receives)  # B's clock, 10 s behind, does not put them first


def test_the_shiviz_log_of_a_run_puts_every_receive_after_its_send(tmp_path):
    test_a_frame_sent_again_after_a_reconnect_pairs_with_its_last_send_and_clocks_may_disagree(tmp_path)
    run = load_run(tmp_path)
    events = list(shiviz_events(run))
    clocks = {what: clock for _, clock, what in events}
    assert clocks["receive from 127.0.0.1:1 #1: ACK-3-127.0.0.1:1"][A] == 2  # the second send's
    assert shiviz_log(events).splitlines()[:3] == [r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)", "",
                                                   '127.0.0.1:1 {"127.0.0.1:1":1}']


def test_a_folder_without_a_run_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(RunError, match="no frame trace"):
        load_run(tmp_path)
    done = run_tom("replay", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    done = run_tom("replay", str(tmp_path / "nope"))
    assert done.returncode == 2 and "not a folder" in done.stderr


def test_the_trace_is_bounded_and_ends_with_one_line(tmp_path, caplog):
    trace = FrameTrace(tmp_path / "t.trace", A, 1, "lamport", limit=2000)
    with caplog.at_level(logging.WARNING, "tom.net.frametrace"):
        for n in range(1, 100):
            trace.sent(B, 2, n, b"ACK-%d-127.0.0.1:1\n" % n)
    trace.close()
    text = (tmp_path / "t.trace").read_text()
    assert len(text) < 2000 + 300 and text.splitlines()[-1].startswith("E ") and text.endswith(" limit\n")
    assert [r.message for r in caplog.records] == [
        f"the trace {tmp_path / 't.trace'} reached its limit of 0 MiB (--trace-limit): no more frames recorded"]


def test_a_full_disk_ends_the_trace_with_one_line_and_nothing_else(caplog):
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full to play a full disk")
    trace = FrameTrace(Path("/dev/full"), A, 1, "lamport")
    with caplog.at_level(logging.WARNING, "tom.net.frametrace"):
        for n in range(1, 5):
            trace.sent(B, 2, n, b"ACK-1-127.0.0.1:1\n" * 50_000)  # past the buffer: the write fails
        trace.flush()
        trace.close()
    assert not trace.open
    assert len(caplog.records) == 1 and "No space left on device" in caplog.records[0].message


@pytest.mark.e2e
def test_a_real_run_replays_with_every_receive_paired_and_shiviz_reads_it(tmp_path):
    """Three real peers with --trace, a message from each: every frame read pairs with a frame written,
    the replay's events are those the dashboard draws, and ShiViz's regular expression (in node)
    reads the log with consistent vector clocks."""
    each = [("--trace", str(tmp_path / f"{i}.trace")) for i in range(3)]
    with PeerProcs(tmp_path, 3, delay=0.02, secure=False, each=each) as group:
        for i in range(3):
            group.send(i, [f"hello from {i}"])
        group.wait_delivered(3)
        time.sleep(0.3)
        assert group.terminate() == [0, 0, 0]
    run = load_run(tmp_path)
    assert len(run.traces) == 3 and len(run.outputs) == 3 and run.problems == []
    receives = [i for i, e in enumerate(run.events) if isinstance(e, FrameEvent) and e.dir == "in"]
    assert receives and all(i in run.pairs and run.pairs[i] < i for i in receives)
    events, left = dashboard_events(run)
    delivered = [e["data"]["text"] for e in events if e["name"] == "deliver"]
    assert left == 0 and sorted(delivered) == sorted([f"hello from {i}" for i in range(3)] * 3)
    out = tmp_path / "run.shiviz.log"
    done = run_tom("replay", str(tmp_path), "--shiviz", str(out))
    assert done.returncode == 0, done.stderr
    if NODE is None:
        pytest.skip("nodejs not found: the ShiViz log is checked with ShiViz's JavaScript regular expression")
    script = tmp_path / "check.js"
    script.write_text(SHIVIZ_CHECK)
    checked = subprocess.run([NODE, str(script), str(out)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    counts = json.loads(checked.stdout)
    assert counts["events"] == len(run.events) and counts["receives"] == len(receives)
