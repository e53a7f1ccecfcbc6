"""`tom peer --http` against real peer processes, with a real HTTP client (httpx): the status, sending
and seeing the delivery everywhere, the event stream in delivery order, the metrics parsed back with
prometheus_client's parser, the documented errors, and the bearer token of a closed group."""

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import httpx
import pytest
from httpx_sse import connect_sse
from prometheus_client.parser import text_string_to_metric_families

from procs import PeerProcs, free_ports, run_tom, wait_for, write_neighbors

pytestmark = pytest.mark.e2e

DEADLINE = 30.0


def formed(client: httpx.Client, url: str, n: int, headers=None) -> dict | None:
    st = client.get(f"{url}/api/status", headers=headers).json()
    view = st["view"]
    return st if view and len(view["members"]) == n and st["mode"] == "normal" else None


def events(es, kind: str, count: int) -> list[dict]:
    """The data of the next ``count`` events named ``kind`` (others skipped; bounded by the read timeout)."""
    got = []
    for sse in es.iter_sse():
        if sse.event == kind:
            got.append(json.loads(sse.data))
            if len(got) == count:
                break
    return got


def test_status_send_events_metrics_and_errors(tmp_path):
    with PeerProcs(tmp_path, 3, delay=0.05, http=True, secure=False) as group, \
            httpx.Client(timeout=10) as client:  # an open group: an open API (on loopback)
        urls = group.http_urls
        statuses = [wait_for(f"view of 3 at {u}", lambda u=u: formed(client, u, 3)) for u in urls]
        pids = [f"127.0.0.1:{p}" for p in group.ports]
        for i, st in enumerate(statuses):
            assert st["peer"] == pids[i] and st["order"] == "lamport"
            assert st["view"]["members"] == sorted(pids, key=lambda p: int(p.rsplit(":")[1])) and st["view"]["coordinator"] in pids
            assert isinstance(st["clock"], int) and st["clock"] >= 1
            assert st["pending"] == [] and st["pending_count"] == 0
            c = st["counters"]
            assert c["delivered"] >= 1 and c["premature_acks"] == c["released_behind_head"] == 0
            assert c["divergence_alarms"] == 0 and st["alarms"] == []
            assert st["unreachable"] == []  # (pairs that cannot reach each other: none here)
            rows = {r["pid"]: r for r in st["peers"]}
            assert rows[pids[i]]["connection"] == "self"
            for other in set(pids) - {pids[i]}:
                assert rows[other]["member"] and not rows[other]["suspected"]
                assert rows[other]["connection"] == "up" and isinstance(rows[other]["incarnation"], int)
                assert 0 <= rows[other]["last_heard_age"] < 5

        with connect_sse(client, "GET", f"{urls[2]}/api/events") as deliveries, \
                connect_sse(client, "GET", f"{urls[0]}/api/events?frames=1") as frames:
            assert deliveries.response.headers["content-type"].startswith("text/event-stream")
            sent = []
            for k in range(6):
                i = k % 2
                r = client.post(f"{urls[i]}/api/messages", json={"text": f"over http {k} - ünï\ncode"})
                assert r.status_code == 202, r.text
                body = r.json()
                assert body["pid"] == pids[i] and isinstance(body["clock"], int) and body["held"] is False
                sent.append((body["clock"], body["pid"], f"over http {k} - ünï\ncode"))
            streamed = events(deliveries, "deliver", 6)
            group.wait_delivered(6)
            # the stream says what the output file says, in the same (delivery) order
            recorded = [(r["index"], r["clock"], r["pid"], r["text"]) for r in group.messages(2)]
            assert [(d["index"], d["clock"], d["pid"], d["text"]) for d in streamed] == recorded
            assert sorted(recorded, key=lambda r: r[0]) == recorded
            assert {(c, p, t) for _, c, p, t in recorded} == set(sent)
            for i in range(3):
                assert [(r["clock"], r["pid"]) for r in group.messages(i)] == [(c, p) for _, c, p, _ in recorded]
            # with frames: our MESSAGEs go out with their clocks, and every other member's ACK comes back
            # (cumulative: a member's marks show as an ACK of the last of our messages they cover, so
            # one that took two of them in one step shows one ACK for both)
            mine = {c for c, p, _ in sent if p == pids[0]}
            out_msgs, acked = set(), dict.fromkeys(pids[1:], -1)
            for sse in frames.iter_sse():
                if sse.event != "frame":
                    continue
                f = json.loads(sse.data)
                assert isinstance(f["lamport"], int) and isinstance(f["t"], float)
                if f["dir"] == "out" and f["kind"] == "MESSAGE":
                    assert sorted(f["to"]) == sorted(pids[1:])
                    out_msgs.add(f["clock"])
                elif f["dir"] == "in" and f["kind"] == "ACK" and f["pid"] == pids[0]:
                    acked[f["from"]] = max(acked[f["from"]], f["clock"])
                if out_msgs >= mine and min(acked.values()) >= max(mine):
                    break
            assert out_msgs == mine

        def watchers() -> float:
            return next(s.value for m in text_string_to_metric_families(client.get(f"{urls[0]}/metrics").text)
                        for s in m.samples if s.name == "tom_event_watchers")
        wait_for("closed event streams forgotten", lambda: watchers() == 0, deadline=20)
        metrics = {m.name: m for m in text_string_to_metric_families(client.get(f"{urls[0]}/metrics").text)}
        value = {(s.name, tuple(sorted(s.labels.items()))): s.value for m in metrics.values() for s in m.samples}
        assert value[("tom_deliveries_total", ())] == len(group.records(0))  # views and 6 messages
        view_id = client.get(f"{urls[0]}/api/status").json()["view"]["id"]
        assert value[("tom_view_id", ())] == view_id >= 1 and value[("tom_view_members", ())] == 3
        assert value[("tom_frames_total", (("direction", "out"), ("kind", "MESSAGE")))] == 3 * 2  # to 2 peers each
        assert value[("tom_frames_total", (("direction", "in"), ("kind", "MESSAGE")))] == 3
        assert value[("tom_delivery_latency_seconds_count", ())] == 6
        assert value[("tom_pending_messages", ())] == 0
        assert value[("tom_unreachable_pairs", ())] == 0
        for other in pids[1:]:
            assert value[("tom_neighbor_connected", (("neighbor", other), ("state", "up")))] == 1
        assert metrics["tom_premature_acks"].type == "counter"

        # errors: one JSON line each, nothing sent
        def error(r, code):
            assert r.status_code == code, r.text
            assert isinstance(r.json()["error"], str) and "\n" not in r.json()["error"]
        post = f"{urls[1]}/api/messages"
        error(client.post(post, content=b"not json"), 400)
        error(client.post(post, json=["text"]), 400)
        error(client.post(post, json={"text": 5}), 400)
        error(client.post(post, json={"text": "   "}), 400)
        error(client.post(post, json={"text": "x" * 70000}), 413)
        error(client.post(post, json={"text": "\\" * 33000}), 413)  # escaped on the wire: twice the bytes
        error(client.post(post, content=b'{"text": "\\ud800"}'), 400)
        error(client.post(post, content=b'{"text": "' + b"x" * (1 << 20) + b'"}'), 413)
        assert client.get(f"{urls[1]}/api/nothing").status_code == 404
        assert client.get(f"{urls[1]}/api/status", headers={"Host": "evil.example"}).status_code == 400
        time.sleep(0.3)
        assert len(group.messages(1)) == 6
        page = client.get(urls[1] + "/")
        assert page.status_code == 200 and "space-time" in page.text
        assert client.get(urls[1] + "/static/dashboard.js").status_code == 200
        assert group.terminate() == [0, 0, 0], group.log_text()


def test_a_closed_groups_api_needs_its_token_and_a_leaving_peer_refuses(tmp_path):
    with PeerProcs(tmp_path, 2, http=True) as group, httpx.Client(timeout=10) as client:  # with --keys
        urls = group.http_urls
        token_file = group.keys / "api-token"  # the keys folder's token, made by the first peer
        token = token_file.read_text().strip()
        assert len(token) >= 32 and stat.S_IMODE(token_file.stat().st_mode) == 0o600
        good = {"Authorization": f"Bearer {token}"}
        for path in ("/api/status", "/metrics", "/api/events"):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
                r = client.get(urls[0] + path, headers=headers)
                assert r.status_code == 401 and "token" in r.json()["error"], (path, headers)
                assert r.headers["www-authenticate"] == "Bearer"
        assert client.post(urls[0] + "/api/messages", json={"text": "no"}).status_code == 401
        # refused before its body came (a loaded machine sends it a moment later): the server cannot
        # read the next request on that connection, and says so, or the client's next one fails
        host, port = urls[0].removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            raw.sendall(f"POST /api/messages HTTP/1.1\r\nHost: {host}:{port}\r\n"
                        "Content-Type: application/json\r\nContent-Length: 20\r\n\r\n".encode())
            got = b""
            while b"\r\n\r\n" not in got and len(got) < 65536 and (chunk := raw.recv(65536)):
                got += chunk
        head = got.split(b"\r\n\r\n")[0].decode().lower()
        assert head.startswith("http/1.1 401") and "\r\nconnection: close" in head, head.splitlines()
        assert client.get(urls[0] + "/").status_code == 200  # the page holds no data
        for u in urls:  # both peers read the one token file
            wait_for("a view of 2", lambda u=u: formed(client, u, 2, good))
        r = client.post(urls[0] + "/api/messages", json={"text": "with a token"}, headers=good)
        assert r.status_code == 202
        group.wait_delivered(1)

        # a peer that is leaving refuses new messages: 503 with the terminal's one line
        group.procs[1].send_signal(signal.SIGSTOP)  # its leave cannot complete while the other is stopped
        try:
            group.procs[0].send_signal(signal.SIGTERM)
            wait_for("the leave", lambda: "leaving the group" in group.logs[0].read_text())
            r = wait_for("503", lambda: (x := client.post(urls[0] + "/api/messages", json={"text": "late"},
                                                          headers=good)).status_code == 503 and x)
            assert "leaving" in r.json()["error"]
        finally:
            group.procs[1].send_signal(signal.SIGCONT)


def test_http_setup_errors_are_one_line(tmp_path):
    port, http_port = free_ports(2)
    neighbors = write_neighbors(tmp_path / "n.txt", [port])
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", http_port))
        busy.listen()
        r = run_tom("peer", str(neighbors), str(tmp_path / "o.jsonl"), str(port), "--host", "127.0.0.1",
                    "--no-ui", "--http", str(http_port))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"tom: error: --http: port {http_port} on 127.0.0.1 is already in use"]
    r = run_tom("peer", str(neighbors), str(tmp_path / "o.jsonl"), str(port), "--host", "127.0.0.1",
                "--no-ui", "--http", "nope")
    assert r.returncode == 2 and "expected [HOST:]PORT" in r.stderr and "Traceback" not in r.stderr
    r = run_tom("peer", str(neighbors), str(tmp_path / "o.jsonl"), str(port), "--host", "127.0.0.1",
                "--no-ui", "--api-token-file", str(tmp_path / "t"))
    assert r.returncode == 2 and "give --http too" in r.stderr


def test_without_http_nothing_listens_but_the_peer(tmp_path):
    if shutil.which("ss") is None:
        pytest.skip("needs ss (iproute2) to list listening sockets")
    with PeerProcs(tmp_path, 1) as group:
        time.sleep(0.5)
        out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
        pid = str(group.procs[0].pid)
        ports = {line.split()[3].rsplit(":", 1)[1] for line in out.splitlines() if f"pid={pid}," in line}
        assert ports == {str(group.ports[0])}
        assert "Dashboard" not in group.logs[0].read_text()
    assert os.path.exists(group.logs[0])


def test_launch_prints_one_url_for_the_group(tmp_path):
    """scripts/launch's tmux mode (on a tmux server of the test's own) starts a closed group (keys in the
    run folder) with --http everywhere and prints one URL, with the token in its fragment, whose peers all
    answer to that token."""
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    offset = 1000
    for _ in range(20):  # peer ports whose port + offset is free too
        ports = free_ports(3)
        if all(free(p + offset) for p in ports):
            break
    neighbors = write_neighbors(tmp_path / "n.txt", ports)
    env = dict(os.environ, TMUX_TMPDIR=str(tmp_path))  # an isolated tmux server, killed below
    try:
        r = subprocess.run([sys.executable, "-m", "tom.tools.launch", str(neighbors), "--no-attach", "--runs",
                            str(tmp_path / "runs"), "--http-offset", str(offset)],
                           capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        urls = re.findall(r"group dashboard: (http://\S+)", r.stdout + r.stderr)
        assert len(urls) == 1, r.stderr
        url = httpx.URL(urls[0])
        hosts = url.params["peers"].split(",")
        assert sorted(hosts) == sorted(f"127.0.0.1:{p + offset}" for p in ports) and url.port == int(hosts[0][10:])
        assert url.fragment.startswith("token=")
        auth = {"Authorization": f"Bearer {url.fragment.removeprefix('token=')}"}
        with httpx.Client(timeout=10) as client:
            wait_for("401 without the token", lambda: client.get(f"http://{hosts[0]}/api/status").status_code == 401)
            for h in hosts:
                st = wait_for(f"a view of 3 at {h}", lambda h=h: formed(client, f"http://{h}", 3, auth))
                assert st["peer"] == f"127.0.0.1:{int(h.rsplit(':')[1]) - offset}"
            assert "space-time" in client.get(str(url)).text
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True, timeout=10)


def free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
