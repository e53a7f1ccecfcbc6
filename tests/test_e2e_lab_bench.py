"""The lab bench in a real headless Chromium (Debian's package, driven by Playwright): a dashboard
opened late starts from each peer's ring of recent events, and a finished run is drawn again by
`tom replay` from its frame traces and outputs, no peer running. Screenshots are kept in
test-artifacts/ for a person to look at."""

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from procs import PeerProcs

pytestmark = pytest.mark.e2e

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"  # git-ignored
MESSAGES = 30


def keep(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    return path


def drawn_texts(page) -> set[str]:
    return set(page.eval_on_selector_all("#diagram .msg-arrow", "els => els.map(e => e.dataset.text)"))


def listed_texts(page, i: int) -> list[str]:
    return page.eval_on_selector_all(f".peer-card:nth-child({i + 1}) .delivery", "els => els.map(e => e.dataset.text)")


def test_a_page_opened_after_30_messages_shows_them_all_and_a_replay_draws_the_same(tmp_path, browser):
    texts = [f"m{k:02d} from {k % 3}" for k in range(MESSAGES)]
    each = [("--trace", str(tmp_path / f"peer{i}.trace")) for i in range(3)]
    with PeerProcs(tmp_path, 3, delay=0.05, http=True, secure=False, each=each) as group:
        deadline = time.monotonic() + 30  # the view first: messages sent before it would leave as one burst
        while not all(any(r["kind"] == "view" and len(r["members"]) == 3 for r in group.records(i)) for i in range(3)):
            assert time.monotonic() < deadline, group.log_text()
            time.sleep(0.1)
        for k, text in enumerate(texts):  # nobody watches: the rings keep it
            group.send(k % 3, [text])
            time.sleep(0.03)
        group.wait_delivered(MESSAGES)
        time.sleep(0.5)
        page = browser.new_page(viewport={"width": 1500, "height": 1300})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        hosts = [u.removeprefix("http://") for u in group.http_urls]
        page.goto(f"{group.http_urls[0]}/?peers={','.join(hosts)}")
        page.wait_for_selector('body[data-streams="3"]', timeout=20000)
        page.wait_for_function(f"document.getElementById('diagram').dataset.messages === '{MESSAGES}'", timeout=20000)
        page.wait_for_function(f"document.querySelectorAll('.peer-card .delivery').length === {3 * MESSAGES}",
                               timeout=20000)
        assert drawn_texts(page) == set(texts)  # every message, each an arrow to the two others
        for i in range(3):  # the list agrees with the output file, newest first
            assert listed_texts(page, i)[::-1] == [r["text"] for r in group.messages(i)]
        assert page.locator("#diagram .deliver").count() == 3 * MESSAGES
        # a click on a message lists its frames: its send, each receipt, the ACKs, every delivery
        arrow = page.locator(f'#diagram .msg-arrow[data-text="{texts[4]}"]').first
        arrow.dispatch_event("mousedown")  # (a click at its middle may land on an arrow drawn over it)
        arrow.dispatch_event("mouseup")
        page.wait_for_function(f"document.getElementById('details').textContent.includes('{texts[4]}')")
        details = page.locator("#details").inner_text()
        assert texts[4] in details and details.count("delivered at") == 3 and "MESSAGE sent by" in details
        keep(page, "dashboard-late.png")
        # zoom in: fewer messages in view; "newest" follows again
        for _ in range(6):
            page.click("#zoom-in")
        page.wait_for_function(f"Number(document.getElementById('diagram').dataset.messages) < {MESSAGES}")
        page.click("#zoom-fit")
        page.wait_for_function(f"document.getElementById('diagram').dataset.messages === '{MESSAGES}'")
        assert errors == []
        live = {i: [r["text"] for r in group.messages(i)] for i in range(3)}
        assert group.terminate() == [0, 0, 0]
    for i in range(3):  # the run folder: outputs, traces and logs side by side
        (tmp_path / f"peer{i}.trace").rename(tmp_path / f"{i}.trace")
    served = subprocess.Popen([sys.executable, "-m", "tom", "replay", str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 30
        while "Dashboard on" not in line and time.monotonic() < deadline:
            line = served.stdout.readline()
        url = re.search(r"http://\S+", line).group(0)
        page = browser.new_page(viewport={"width": 1500, "height": 1300})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_selector('body[data-replay="loaded"]', timeout=20000)
        page.wait_for_function(f"document.getElementById('diagram').dataset.messages === '{MESSAGES}'", timeout=20000)
        assert drawn_texts(page) == set(texts)
        for i in range(3):
            assert listed_texts(page, i)[::-1] == live[i]
        keep(page, "replay-end.png")
        page.fill("#replay-time", "0")  # the slider back to the start: nothing delivered yet
        page.dispatch_event("#replay-time", "input")
        page.wait_for_function("document.querySelectorAll('.peer-card .delivery').length === 0")
        keep(page, "replay-start.png")
        assert errors == []
    finally:
        served.terminate()
        served.wait(10)
