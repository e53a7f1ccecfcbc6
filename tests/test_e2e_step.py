"""Step mode (``tom peer --step``) on real peer processes: the HTTP API of the gate and its errors,
frames held longer than the failure timeout (nobody removed, no divergence alarm), and, in a real
headless Chromium (Debian's, through Playwright), a premature ACK made on purpose from the dashboard's
Step panel, then the delivery the Lamport order predicts. Screenshots: test-artifacts/step-*.png."""

from __future__ import annotations

import re
import subprocess
import sys
import shutil
import time
from pathlib import Path

import httpx
import pytest
import trio

from procs import PeerProcs, free_ports, run_tom, wait_for, write_neighbors

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"  # git-ignored
DEADLINE = 30.0


def by_port(pids):
    return sorted(pids, key=lambda p: int(p.rsplit(":")[1]))


def formed(client: httpx.Client, url: str, n: int) -> dict | None:
    st = client.get(f"{url}/api/status").json()
    view = st["view"]
    return st if view and len(view["members"]) == n and st["mode"] == "normal" else None


def head_of(client: httpx.Client, url: str, src: str) -> dict | None:
    """The head held on ``src``'s link at the peer serving ``url`` (None while it holds nothing)."""
    for link in client.get(f"{url}/api/gate").json()["links"]:
        if link["from"] == src:
            return link["head"]
    return None


def release_everything(client: httpx.Client, urls: list[str], rounds: int = 30) -> None:
    """Release all at every peer until no gate holds anything (what one lets through makes ACKs the
    others then hold); bounded."""
    for _ in range(rounds):
        held = [u for u in urls if client.get(f"{u}/api/gate").json()["held"]]
        if not held:
            return
        for u in held:
            client.post(f"{u}/api/gate/release", json={"all": True})
        time.sleep(0.2)
    raise AssertionError("the gates still hold frames after 30 rounds of release-all")


def test_held_past_the_timeout_nobody_is_removed_no_alarm_and_the_api_answers(tmp_path):
    """A 0.5 s timeout, frames held for 4 s: no suspicion, no view change, no divergence alarm; then
    released, the message is delivered everywhere. And the API's errors, one JSON line each."""
    with PeerProcs(tmp_path, 3, http=True, secure=False,
                   extra=("--step", "--heartbeat", "0.1", "--timeout", "0.5")) as group, \
            httpx.Client(timeout=10) as client:
        urls = group.http_urls
        for u in urls:
            wait_for(f"view of 3 at {u}", lambda u=u: formed(client, u, 3))
        views = {client.get(f"{u}/api/status").json()["view"]["id"] for u in urls}
        pids = [f"127.0.0.1:{p}" for p in group.ports]
        sent = client.post(f"{urls[0]}/api/messages", json={"text": "held a while"}).json()
        for u in urls[1:]:
            head = wait_for("the MESSAGE held", lambda u=u: head_of(client, u, pids[0]))
            assert head["frame"] == "MESSAGE" and head["shows"][0] == {
                "kind": "MESSAGE", "clock": sent["clock"], "pid": pids[0], "text": "held a while"}
        time.sleep(4.0)  # eight timeouts, with the peers' heartbeats queued behind what is held
        for u in urls:
            st = client.get(f"{u}/api/status").json()
            assert st["view"]["id"] in views and len(st["view"]["members"]) == 3
            assert not any(p["suspected"] for p in st["peers"]), st["peers"]
            assert st["counters"]["divergence_alarms"] == 0
        assert client.get(f"{urls[1]}/api/status").json()["gate"]["held"] >= 1
        assert re.search(r"^tom_gate_held_frames [1-9]", client.get(f"{urls[1]}/metrics").text, re.M)
        assert group.messages(0) == []  # nothing delivered while held

        # the errors
        r = client.post(f"{urls[0]}/api/gate/release", json={"from": pids[1]})
        assert r.status_code == 409 and "nothing from" in r.json()["error"]
        r = client.post(f"{urls[0]}/api/gate/release", json={"from": "127.0.0.1:1"})
        assert r.status_code == 400 and "not a neighbor" in r.json()["error"]
        r = client.post(f"{urls[0]}/api/gate/release", json={"everything": True})
        assert r.status_code == 400 and r.json()["error"].startswith("expected one of")
        r = client.post(f"{urls[0]}/api/gate/release", content=b"{")
        assert r.status_code == 400 and "not JSON" in r.json()["error"]

        release_everything(client, urls)
        group.wait_delivered(1)
        for i in range(3):
            assert [m["text"] for m in group.messages(i)] == ["held a while"]
        for u in urls:
            st = client.get(f"{u}/api/status").json()
            assert st["view"]["id"] in views and st["counters"]["divergence_alarms"] == 0
        r = client.post(f"{urls[0]}/api/gate/release", json={"random": True})
        assert r.status_code == 409 and r.json() == {"error": "nothing is held"}

        # opened, the gates let a message through at once; closed again, they hold the next
        for u in urls:
            assert client.post(f"{u}/api/gate/hold", json={"on": False}).json() == {
                "holding": False, "released": 0, "held": 0}
        assert client.get(f"{urls[1]}/api/status").json()["gate"]["holding"] is False
        client.post(f"{urls[1]}/api/messages", json={"text": "through an open gate"})
        group.wait_delivered(2)
        for u in urls:
            assert client.post(f"{u}/api/gate/hold", json={"on": True}).json()["holding"] is True
        r = client.post(f"{urls[0]}/api/gate/hold", json={"on": "yes"})
        assert r.status_code == 400 and r.json()["error"].startswith('expected {"on": true}')
        client.post(f"{urls[1]}/api/messages", json={"text": "held again"})
        wait_for("the MESSAGE held again", lambda: head_of(client, urls[0], pids[1]))
        assert len(group.messages(0)) == 2


def test_without_step_there_is_no_gate(tmp_path):
    with PeerProcs(tmp_path, 1, http=True, secure=False) as group, httpx.Client(timeout=10) as client:
        url = group.http_urls[0]
        st = wait_for("status", lambda: client.get(f"{url}/api/status").json())
        assert st["gate"] is None
        for r in (client.get(f"{url}/api/gate"), client.post(f"{url}/api/gate/release", json={"all": True}),
                  client.post(f"{url}/api/gate/hold", json={"on": False})):
            assert r.status_code == 404 and r.json()["error"].startswith("step mode is off")


def test_step_needs_the_http_api_and_tom_s_wire(tmp_path):
    port = free_ports(1)[0]
    neighbors = write_neighbors(tmp_path / "n.txt", [port])
    for extra, says in ((), "give --http too"), (("--wire", "handout"), "--wire handout takes no --step"):
        r = run_tom("peer", str(neighbors), str(tmp_path / "o.jsonl"), str(port), "--host", "127.0.0.1",
                    "--no-ui", "--step", *extra)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr


async def test_step_off_the_links_hand_the_inbox_their_events_themselves(tmp_path, monkeypatch):
    """Without --step the listener and the sender get the processor's inbox itself (today's path, no
    call more per frame); with it, the gate."""
    from tom.peer import process
    from tom.peer.gate import Gate
    from tom.peer.processor import Inbox

    seen: list = []
    real_listener, real_sender = process.listener, process.sender

    async def listener(*args, **kwargs):
        seen.append(args[4])
        await real_listener(*args, **kwargs)

    async def sender(*args, **kwargs):
        seen.append(args[3])
        await real_sender(*args, **kwargs)

    monkeypatch.setattr(process, "listener", listener)
    monkeypatch.setattr(process, "sender", sender)
    for step in (False, True):
        seen.clear()
        port = free_ports(1)[0]
        neighbors = write_neighbors(tmp_path / f"n-{step}.txt", [port])
        peer = process.Peer(process.PeerConfig(neighbors, None, port, "127.0.0.1", static=True, embedded=True,
                                               step=step))

        async def front():
            await trio.sleep(0.1)

        with trio.fail_after(10):
            await peer.run(front=front)
        kinds = {type(x) for x in seen}
        assert len(seen) == 2 and kinds == ({Gate} if step else {Inbox})
        assert (peer.gate is not None) is step


def shoot(page, tmp_path: Path, name: str) -> None:
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    ARTIFACTS.mkdir(exist_ok=True)  # a copy where the next person looks, as pytest rotates its tmp folders
    shutil.copyfile(shot, ARTIFACTS / name)
    assert shot.stat().st_size > 20000


def open_group_page(browser, group: PeerProcs):
    """The group page of ``group`` (a closed one: the token in the fragment), once it shows 3 members
    and the Step panel: ``(page, token, {pid: index}, page errors)``."""
    deadline = time.monotonic() + 20
    while not (group.keys / "api-token").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    token = (group.keys / "api-token").read_text().strip()
    pid_of = {f"127.0.0.1:{p}": i for i, p in enumerate(group.ports)}
    hosts = [group.http_urls[pid_of[p]].removeprefix("http://") for p in by_port(pid_of)]
    page = browser.new_page(viewport={"width": 1400, "height": 1300})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"http://{hosts[0]}/?peers={','.join(hosts)}#token={token}")
    page.wait_for_selector('body[data-streams="3"]', timeout=20000)
    page.wait_for_function(
        "[...document.querySelectorAll('.peer-card')].every(c => c.textContent.includes('3 members'))",
        timeout=30000)
    page.wait_for_selector("#step:not([hidden])", timeout=10000)
    assert page.locator(".step-peer").count() == 3
    return page, token, pid_of, errors


def send_from_page(page, lanes: tuple[str, ...], sends) -> dict[str, tuple[int, str]]:
    """Type each ``(pid, text)`` of ``sends`` into the send box from that peer, in order: text -> (clock, pid)."""
    clocks = {}
    for who, text in sends:
        page.select_option("#send-peer", str(lanes.index(who)))
        page.fill("#send-text", text)
        page.press("#send-text", "Enter")
        page.wait_for_function("document.getElementById('send-result').textContent.startsWith('sent as')")
        found = re.match(r"sent as \((\d+), (.+)\)", page.locator("#send-result").inner_text())
        assert found and found.group(2) == who
        clocks[text] = (int(found.group(1)), who)
        page.evaluate("document.getElementById('send-result').textContent = ''")
    return clocks


def lamport_order(clocks: dict[str, tuple[int, str]]) -> list[str]:
    """The texts in the order the Lamport order delivers them: by (clock, pid)."""
    return [t for t, (clock, pid) in sorted(clocks.items(), key=lambda kv: (kv[1][0], int(kv[1][1].rsplit(":")[1])))]


def link(at: str, src: str) -> str:
    """The Step panel's row of ``src``'s link at peer ``at``."""
    return f'.step-link[data-at="{at}"][data-from="{src}"]'


def test_a_premature_ack_stepped_from_the_dashboard(tmp_path, browser):
    """Three peers A < B < C in step mode, a closed group. C multicasts "from C", then A "from A":
    the same Lamport clock, so the order puts A's first (pid breaks the tie), although C's was sent
    first. From the page: at B, A's MESSAGE is released; B acknowledges it, and at C that ACK waits
    on B's link while A's MESSAGE waits on A's — released first, it is a premature ACK (C's counter
    shows it; a wire-v2 ACK is a cumulative mark: it counts on arrival and reserves no entry). A's
    MESSAGE released at C, C delivers it at once (every member holds it), while C's own waits. Then
    everything is released: every peer delivers A's message, then C's, as predicted, and every output
    file agrees. The peers record frame traces: `tom replay` of the run shows the same premature ACK at
    C, the gate's releases being when C's core took the frames."""
    traces = [("--trace", str(tmp_path / f"{i}.trace")) for i in range(3)]
    with PeerProcs(tmp_path, 3, http=True, extra=("--step",), each=traces) as group:
        page, token, pid_of, errors = open_group_page(browser, group)
        a, b, c = by_port(pid_of)
        clocks = send_from_page(page, (a, b, c), ((c, "from C"), (a, "from A")))  # C's first
        predicted = lamport_order(clocks)
        assert predicted == ["from A", "from C"]  # same clock, or A's lower: A's first either way

        page.wait_for_selector(f'{link(b, a)} .step-head[data-frame="MESSAGE"]', timeout=10000)
        page.wait_for_selector(f'{link(c, a)} .step-head[data-frame="MESSAGE"]', timeout=10000)
        shoot(page, tmp_path, "step-1-held.png")

        page.click(f"{link(b, a)} button.step-release")  # B takes A's MESSAGE, and acknowledges it
        page.wait_for_selector(f"{link(c, b)} .step-item.ack.ahead", timeout=10000)  # B's ACK, held at C
        assert "from A" in page.locator(f"{link(c, a)} .step-head").inner_text()  # A's MESSAGE, still held
        shoot(page, tmp_path, "step-2-ack-ahead-of-its-message.png")

        page.click(f"{link(c, b)} button.step-release")  # the ACK first: a premature ACK at C
        card_c = f'.peer-card[data-pid="{c}"]'
        page.wait_for_function(
            "sel => { const c = document.querySelector(sel); return c && "
            "/premature ACKs\\s*1/.test(c.querySelector('.counters').textContent) }",
            arg=card_c, timeout=10000)
        assert group.messages(pid_of[c]) == []
        shoot(page, tmp_path, "step-3-premature-ack.png")

        page.click(f"{link(c, a)} button.step-release")  # then A's MESSAGE: every member holds it at C now
        # the delivery that follows at C is A's message, the Lamport head, while C's own (sent first,
        # not acknowledged by anyone yet) waits
        page.wait_for_function(
            "sel => [...document.querySelectorAll(sel + ' .delivery')].map(d => d.dataset.text).join('|') === 'from A'",
            arg=card_c, timeout=10000)
        assert [m["text"] for m in group.messages(pid_of[c])] == ["from A"]
        assert group.messages(pid_of[a]) == [] and group.messages(pid_of[b]) == []
        shoot(page, tmp_path, "step-4-head-delivered-at-c.png")
        page.click("#step-all-everywhere")
        group.wait_delivered(2)
        for p in (a, b, c):
            assert [m["text"] for m in group.messages(pid_of[p])] == predicted
            assert [(m["clock"], m["pid"]) for m in group.messages(pid_of[p])] == [clocks[t] for t in predicted]
        for p in (a, b, c):
            page.wait_for_function(
                f"[...document.querySelectorAll('.peer-card[data-pid=\"{p}\"] .delivery')].map(d => d.dataset.text)"
                f".reverse().join('|') === {'|'.join(predicted)!r}", timeout=10000)
        page.wait_for_function("document.body.dataset.stepHeld === '0'", timeout=15000)
        status = httpx.get(f"{group.http_urls[pid_of[c]]}/api/status",
                           headers={"Authorization": f"Bearer {token}"}).json()
        assert status["counters"]["premature_acks"] == 1 and status["counters"]["divergence_alarms"] == 0
        time.sleep(0.5)
        shoot(page, tmp_path, "step-5-delivered.png")
        assert errors == []
        assert group.terminate() == [0, 0, 0]
    served = subprocess.Popen([sys.executable, "-m", "tom", "replay", str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        line = wait_for("the replay's URL", lambda: (lambda ln: ln if "Dashboard on" in ln else None)(
            served.stdout.readline()))
        page = browser.new_page(viewport={"width": 1400, "height": 1300})
        page.goto(re.search(r"http://\S+", line).group(0))
        page.wait_for_selector('body[data-replay="loaded"]', timeout=20000)
        card_c = f'.peer-card[data-pid="{c}"]'
        assert re.search(r"premature ACKs\s*1", page.locator(f"{card_c} .counters").inner_text())
        assert re.search(r"premature ACKs\s*0", page.locator(f'.peer-card[data-pid="{a}"] .counters').inner_text())
        shoot(page, tmp_path, "step-6-replayed.png")
    finally:
        served.terminate()
        served.wait(10)


def test_a_late_head_and_its_cascade_stepped_from_the_dashboard(tmp_path, browser):
    """B and C multicast at the same clock: B's goes first in the order. Stepped from the page so that
    at A C's message is complete (A holds it and every member's ACK of it) while B's, the head, still
    lacks C's ACK: C's message waits behind the late head. Releasing that one ACK delivers both at
    once at A — the cascade, counted as released behind the head — and the order is the predicted one
    everywhere."""
    with PeerProcs(tmp_path, 3, http=True, extra=("--step",)) as group:
        page, token, pid_of, errors = open_group_page(browser, group)
        a, b, c = by_port(pid_of)
        clocks = send_from_page(page, (a, b, c), ((b, "from B"), (c, "from C")))
        predicted = lamport_order(clocks)
        assert predicted == ["from B", "from C"]

        def release(at: str, src: str, head: str) -> None:
            """Wait until ``src``'s link at ``at`` shows ``head`` first (a frame name and a text in its
            line), then click its release button."""
            frame, _, text = head.partition(" ")
            page.wait_for_function(
                "([sel, frame, text]) => { const h = document.querySelector(sel + ' .step-head');"
                " return h && h.dataset.frame === frame && h.textContent.includes(text) }",
                arg=[link(at, src), frame, text], timeout=10000)
            page.click(f"{link(at, src)} button.step-release")

        release(b, c, "MESSAGE from C")  # B acknowledges C's message
        release(c, b, "MESSAGE from B")  # C acknowledges B's message
        b_port, c_port = b.rsplit(":")[1], c.rsplit(":")[1]
        release(a, b, "MESSAGE from B")
        release(a, b, f"MARKS ACK of ({clocks['from C'][0]}, {c_port})")  # B's ACK of C's message
        release(a, c, "MESSAGE from C")
        # at A: C's message is complete, B's (the head) lacks C's ACK, which waits on C's link
        card_a = f'.peer-card[data-pid="{a}"]'
        page.wait_for_selector(f'{link(a, c)} .step-head[data-frame="MARKS"]', timeout=10000)
        assert f"ACK of ({clocks['from B'][0]}, {b_port})" in page.locator(f"{link(a, c)} .step-head").inner_text()
        page.wait_for_function("sel => document.querySelectorAll(sel + ' table.pending tr').length === 3",
                               arg=card_a, timeout=10000)
        assert group.messages(pid_of[a]) == []
        shoot(page, tmp_path, "step-cascade-1-late-head.png")

        release(a, c, f"MARKS ACK of ({clocks['from B'][0]}, {b_port})")  # the head's last ACK
        page.wait_for_function(
            "sel => /released behind head\\s*1/.test(document.querySelector(sel + ' .counters').textContent)",
            arg=card_a, timeout=10000)
        assert [m["text"] for m in group.messages(pid_of[a])] == predicted  # both at once, in order
        shoot(page, tmp_path, "step-cascade-2-released.png")

        page.click("#step-all-everywhere")
        group.wait_delivered(2)
        for p in (a, b, c):
            assert [m["text"] for m in group.messages(pid_of[p])] == predicted
        status = httpx.get(f"{group.http_urls[pid_of[a]]}/api/status",
                           headers={"Authorization": f"Bearer {token}"}).json()
        assert status["counters"]["released_behind_head"] == 1 and status["counters"]["divergence_alarms"] == 0
        assert errors == []
