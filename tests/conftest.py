import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_collection_modifyitems(config, items):
    """On the compiled build, a test marked ``pure`` (it patches or walks the core's Python objects,
    which compiled modules do not let it) is skipped saying so; scripts/test runs it again with
    TOM_PURE=1."""
    import pytest

    from tom import build

    if not build.compiled():
        return
    skip = pytest.mark.skip(reason="patches or walks the core's Python objects: runs in the interpreted pass "
                                   "(TOM_PURE=1, scripts/test)")
    for item in items:
        if item.get_closest_marker("pure") is not None:
            item.add_marker(skip)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def browser():
    """Debian's headless Chromium driven by Playwright (no browser download); skipped with the reason when
    it is not installed (scripts/test installs it when it runs as root with apt)."""
    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium (scripts/test installs it when run as root with apt)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()
