"""Durable input as a user runs it, with real peer processes on loopback: peers reading their messages
from a growing file (``--input FILE`` with ``--data DIR``) and a client posting with an
``Idempotency-Key`` (``--http``), each peer SIGKILLed and started again with the same command line.

The promise checked: every line of every input file is delivered once at every member, and a POST
sent again with the same key is delivered once, across the restart."""

from __future__ import annotations

import time
from collections import Counter

import httpx
import pytest

from procs import PeerProcs, free_ports, run_tom, wait_for, write_neighbors

pytestmark = pytest.mark.e2e

EXTRA = ("--heartbeat", "0.2", "--timeout", "1")


def texts(g: PeerProcs, i: int) -> list[str]:
    return [r["text"] for r in g.messages(i)]


def until(g: PeerProcs, what: str, check, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {deadline} s; logs: {g.log_text()[-8000:]}")


def append(path, lines: list[str]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(f"{line}\n" for line in lines))


def test_every_line_of_every_input_file_is_delivered_once_everywhere_across_a_kill(tmp_path):
    inputs = [tmp_path / f"in-{i}.txt" for i in range(3)]
    for path in inputs:
        path.write_text("")
    each = [("--data", str(tmp_path / f"data-{i}"), "--input", str(inputs[i])) for i in range(3)]
    with PeerProcs(tmp_path, 3, secure=False, extra=EXTRA, each=each) as g:
        written: list[str] = []
        for rnd in range(30):
            batch = [[f"in{i}-{rnd}-{k}" for k in range(20)] for i in range(3)]
            for i in range(3):
                append(inputs[i], batch[i])
                written += batch[i]
            if rnd == 5:
                until(g, "the first lines delivered", lambda: all(len(texts(g, i)) >= 60 for i in range(3)))
            if rnd == 12:  # killed while its file grows: some lines read and accepted, some not yet
                g.procs[2].kill()
                g.procs[2].wait(10)
            if rnd == 20:
                g.group.start(2, g.procs[2])  # the same command line again
            time.sleep(0.05)
        until(g, "every line delivered everywhere", lambda: all(len(texts(g, i)) >= len(written) for i in range(3)),
              deadline=90)
        time.sleep(1.0)  # (a line twice would show by now)
        for i in range(3):
            counts = Counter(texts(g, i))
            twice = [t for t, n in counts.items() if n > 1]
            assert not twice, f"peer {i}: delivered twice: {twice[:5]}"
            assert set(counts) == set(written), f"peer {i}: missing {sorted(set(written) - set(counts))[:5]}"
        assert "going on after the last line it accepted" in g.logs[2].read_text()
        assert g.terminate() == [0, 0, 0]


def test_input_setup_errors_are_one_line(tmp_path):
    port = free_ports(1)[0]
    neighbors = write_neighbors(tmp_path / "n.txt", [port])
    base = ("peer", str(neighbors), str(tmp_path / "o.jsonl"), str(port), "--host", "127.0.0.1")
    r = run_tom(*base, "--input", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"tom: error: --input {tmp_path / 'missing.txt'}: cannot read it: No such file or directory"]
    (tmp_path / "in.txt").write_text("")
    r = run_tom(*base, "--input", str(tmp_path / "in.txt"), "--wire", "handout")
    assert r.returncode == 2 and "--wire handout takes no --input" in r.stderr
    r = run_tom("peer", "--help")
    assert "--input FILE" in r.stdout and "from its beginning" in " ".join(r.stdout.split())


def test_a_post_sent_again_with_its_idempotency_key_is_delivered_once_across_a_kill(tmp_path):
    each = [("--data", str(tmp_path / f"data-{i}")) for i in range(3)]
    with PeerProcs(tmp_path, 3, secure=False, http=True, extra=EXTRA, each=each) as g, \
            httpx.Client(timeout=10) as client:
        url = g.http_urls[0]

        def post(text: str, key: str) -> httpx.Response:
            return client.post(f"{url}/api/messages", json={"text": text}, headers={"Idempotency-Key": key})

        wait_for("a view of 3", lambda: (v := client.get(f"{url}/api/status").json()["view"]) and
                 len(v["members"]) == 3)
        first = post("pay 10", "order-1")
        assert first.status_code == 202 and first.json().get("replayed") is not True, first.text
        again = post("pay 10", "order-1")
        assert again.status_code == 202 and again.json()["replayed"] is True
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["clock"] == first.json()["clock"]
        other = post("pay 99", "order-1")
        assert other.status_code == 422 and "order-1" in other.json()["error"]
        assert "\n" not in other.json()["error"]
        assert post("pay 20", "order-2").status_code == 202
        g.wait_delivered(2)

        g.restart(0)  # SIGKILL, then the same command line
        later = wait_for("the restarted peer's API", lambda: (r := post("pay 10", "order-1")).status_code == 202 and r)
        assert later.json()["replayed"] is True
        assert post("pay 99", "order-2").status_code == 422
        assert post("pay 30", "order-3").status_code == 202
        until(g, "pay 30 delivered everywhere", lambda: all("pay 30" in texts(g, i) for i in range(3)))
        time.sleep(1.0)
        for i in range(3):
            assert Counter(texts(g, i)) == {"pay 10": 1, "pay 20": 1, "pay 30": 1}, f"peer {i}: {texts(g, i)}"
        bad = client.post(f"{url}/api/messages", json={"text": "x"}, headers={"Idempotency-Key": ""})
        assert bad.status_code == 400 and "Idempotency-Key" in bad.json()["error"]
        assert g.terminate() == [0, 0, 0]
