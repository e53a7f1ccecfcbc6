"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright without any
browser download): the group page of a closed group of 3 real peers (its token in the URL's fragment)
shows the 3 members, a message typed into the send
box is delivered at every peer and drawn in the space-time diagram. The screenshot is kept in
test-artifacts/dashboard.png for a person to look at."""

import shutil
import time
from pathlib import Path

import pytest

from procs import PeerProcs

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"  # git-ignored


def test_group_page_shows_members_sends_and_draws(tmp_path, browser):
    with PeerProcs(tmp_path, 3, delay=0.2, http=True) as group:  # a closed group: the API needs the token
        hosts = [u.removeprefix("http://") for u in group.http_urls]
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        deadline = time.monotonic() + 20
        while not (group.keys / "api-token").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        token = (group.keys / "api-token").read_text().strip()
        page.goto(f"{group.http_urls[0]}/?peers={','.join(hosts)}#token={token}")
        page.wait_for_selector('body[data-streams="3"]', timeout=20000)
        page.wait_for_function("document.querySelectorAll('.peer-card .lamport').length === 3", timeout=20000)
        page.wait_for_function(
            "[...document.querySelectorAll('.peer-card')].every(c => c.textContent.includes('3 members'))",
            timeout=30000)
        pids = sorted(f"127.0.0.1:{p}" for p in group.ports)
        cards = page.locator(".peer-card .pid").all_inner_texts()
        assert sorted(cards) == pids
        lanes = page.locator("#diagram .lane-label").all_text_contents()
        assert lanes == sorted(pids, key=lambda p: int(p.rsplit(":")[1]))

        text = "hello from the browser"
        page.select_option("#send-peer", "1")
        page.fill("#send-text", text)
        page.press("#send-text", "Enter")
        page.wait_for_function("document.getElementById('send-result').textContent.startsWith('sent as')")
        # delivered at every peer: in every card, and in every output file
        page.wait_for_function(
            f"[...document.querySelectorAll('.peer-card')].every(c => c.querySelector('.delivery[data-text=\"{text}\"]'))",
            timeout=20000)
        group.wait_delivered(1)
        for i in range(3):
            assert [r["text"] for r in group.messages(i)] == [text]
        # drawn: one MESSAGE arrow to each other member, a delivery mark on all three lines
        page.wait_for_function(
            f"document.querySelectorAll('#diagram .msg-arrow[data-text=\"{text}\"]:not(.partial)').length === 2 &&"
            f"document.querySelectorAll('#diagram .deliver').length === 3 &&"
            f"document.querySelectorAll('#diagram .ack-arrow[data-text=\"{text}\"]').length >= 4",
            timeout=20000)
        for k in range(3):  # a little traffic from everyone, to show more of the algorithm
            page.select_option("#send-peer", str(k))
            page.fill("#send-text", f"message {k} from the page")
            page.press("#send-text", "Enter")
            time.sleep(0.15)
        group.wait_delivered(4)
        time.sleep(1.0)
        shot = tmp_path / "dashboard.png"
        page.screenshot(path=str(shot), full_page=True)
        ARTIFACTS.mkdir(exist_ok=True)  # a copy where the next person looks, as pytest rotates its tmp folders
        shutil.copyfile(shot, ARTIFACTS / "dashboard.png")
        print(f"dashboard screenshot: {ARTIFACTS / 'dashboard.png'}")
        assert shot.stat().st_size > 20000
        assert errors == []


def test_the_sequencer_order_is_drawn_with_its_sequence_numbers(tmp_path, browser):
    """In the sequencer order a message waits for its number: the diagram draws a SEQ arrow from the
    sequencer (the smallest pid) to each other member, labelled with the number."""
    with PeerProcs(tmp_path, 3, delay=0.1, http=True, secure=False, extra=("--order", "sequencer")) as group:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        hosts = [u.removeprefix("http://") for u in group.http_urls]
        page.goto(f"{group.http_urls[0]}/?peers={','.join(hosts)}")
        page.wait_for_selector('body[data-streams="3"]', timeout=20000)
        page.wait_for_function(
            "[...document.querySelectorAll('.peer-card')].every(c => c.textContent.includes('3 members'))",
            timeout=30000)
        text = "numbered by the sequencer"
        page.select_option("#send-peer", "2")
        page.fill("#send-text", text)
        page.press("#send-text", "Enter")
        group.wait_delivered(1)
        page.wait_for_function(
            f"document.querySelectorAll('#diagram .seq-arrow[data-text=\"{text}\"]:not(.partial)').length === 2 &&"
            f"document.querySelectorAll('#diagram .msg-arrow[data-text=\"{text}\"]:not(.partial)').length === 2 &&"
            f"document.querySelectorAll('#diagram .deliver').length === 3",
            timeout=20000)
        assert page.locator("#diagram .seq-label").all_text_contents() == ["seq 1"]
        assert [r.get("seq") for r in group.messages(0)] == [1]
        time.sleep(0.5)
        shot = tmp_path / "dashboard-sequencer.png"
        page.screenshot(path=str(shot), full_page=True)
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copyfile(shot, ARTIFACTS / "dashboard-sequencer.png")
        assert errors == []
