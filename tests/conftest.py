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


CONNECT_CONF = {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}
"""The session's Spark Connect server: a few hundred records in two partitions, a small heap."""


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """``(URL, None)`` of a Spark Connect server for this process's tests (one per xdist worker,
    :func:`analysis.connect_server.local_connect_server`: started on first use, the start bounded in
    time, stopped by its pid at the end of the session), or ``(None, why not)``."""
    try:
        from analysis.connect_server import local_connect_server
    except ImportError as exc:  # (no PySpark)
        yield None, f"no PySpark ({exc})"
        return
    server = local_connect_server(tmp_path_factory.mktemp("connect-server"), cores=2, conf=CONNECT_CONF)
    try:
        url = server.__enter__()
    except Exception as exc:  # noqa: BLE001 -- ConnectServerUnavailable, or whatever stopped the start
        yield None, str(exc)
        return
    try:
        yield url, None
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def spark_remote(connect_server, monkeypatch):
    """``SPARK_REMOTE`` set, for the test's subprocesses, to this process's Spark Connect server
    (:func:`connect_server`), so that the `tom verify` they run starts no JVM of its own and runs on
    one the verifies before warmed (about 15 s for a few hundred records against about 35 s, on a
    2-core machine unloaded); the URL. None, with ``SPARK_REMOTE`` left unset, when no server could
    be had (the reason printed): the verifies start their own local Spark, as without this fixture.
    A test using it builds no Spark session in its own process meanwhile (it would be a Connect one)."""
    url, why = connect_server
    if url is None:
        print(f"no Spark Connect server ({why}): the verifies start their own Spark")
        return None
    monkeypatch.setenv("SPARK_REMOTE", url)
    return url
