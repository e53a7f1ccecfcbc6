import fcntl
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def _groups(item) -> set:
    """The names of ``item``'s xdist groups."""
    return {m.args[0] for m in item.iter_markers("xdist_group") if m.args}


def _run_first(item) -> int:
    """Where ``item`` goes in the order the workers take the tests (scripts/test: xdist's loadgroup,
    in collection order): the verifier's two groups first (two workers compute on them for the first
    minutes), then the docs' blocks on the fixed ports and the installed wheel's tests (one worker
    builds the wheel once, tests/test_packaging.py: a group of long tests that mostly wait, which a
    worker must not take near the end), then the rest (`_spread`)."""
    groups = _groups(item)
    if groups & {"analysis-1", "analysis-2"}:
        return 0
    if groups & {"docs-ports", "wheel"}:
        return 1
    return 2


def _kind(item) -> int:
    """Among the rest: an end-to-end test (it mostly waits on timers), a docs' block, or a test that
    computes."""
    if item.get_closest_marker("e2e") is not None:
        return 0
    return 1 if any(str(g).startswith("docs-") for g in _groups(item)) else 2


LONG_SPAN = 0.8


def _spread(items: list) -> list:
    """``items`` in the order the workers take them: by `_run_first`; the rest with its three `_kind`s
    spread evenly over each other, each in its own order (the end-to-end tests that wait on timers
    beside the tests that compute: on two cores, while a worker waits another takes its core, and no
    stretch of the run has every worker waiting), the end-to-end tests and the docs' blocks over the
    first `LONG_SPAN` of it (they take up to a minute or so each: the run ends on short tests, which
    keep every worker busy to the end)."""
    rank = {id(item): _run_first(item) for item in items}
    kinds = {id(item): _kind(item) for item in items if rank[id(item)] == 2}
    counts = [list(kinds.values()).count(kind) for kind in range(3)]
    seen = [0, 0, 0]
    place = {}
    for key, kind in kinds.items():  # (in the items' order)
        place[key] = ((seen[kind] + 0.5) / counts[kind] * (1.0 if kind == 2 else LONG_SPAN), kind)
        seen[kind] += 1
    return sorted(items, key=lambda item: (rank[id(item)], place.get(id(item), (0.0, 0))))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The order the workers take the tests in (:func:`_spread`). On the compiled
    build, a test marked ``pure`` (it patches or walks the core's Python objects, which compiled
    modules do not let it) is skipped saying so; scripts/test runs it again with TOM_PURE=1."""
    import pytest

    from tom import build

    items[:] = _spread(items)
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


CONNECT_DIR = "TOM_TEST_CONNECT_DIR"
"""The environment variable naming the folder of the suite's one Spark JVM (:func:`suite_spark`: its
``spark.json``, the id of its process group, its log), made by the pytest process that runs the session (xdist's
controller, or the only process) and inherited by the workers."""


def pytest_configure(config):
    """An xdist worker picks the ports of its peers from a range of its own (`procs.worker_port_range`),
    its children too (``TOM_PORT_RANGE``). The process that runs the session (not an xdist worker, not
    a pytest run inside another's test) owns the folder of the suite's Spark JVM (:func:`suite_spark`). With
    ``TOM_TEST_USAGE`` set, each test's costs are recorded (:mod:`usage`)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        from procs import worker_port_range

        from tom.tools.peers import PORT_RANGE
        index = int(workerinput["workerid"].removeprefix("gw"))
        os.environ[PORT_RANGE] = worker_port_range(index, int(workerinput["workercount"]))
    if os.environ.get("TOM_TEST_USAGE"):
        from usage import Recorder
        worker = workerinput["workerid"] if workerinput is not None else "main"
        config.pluginmanager.register(Recorder(os.environ["TOM_TEST_USAGE"], worker), "tom-usage")
    if workerinput is None and CONNECT_DIR not in os.environ:
        folder = tempfile.mkdtemp(prefix="tom-test-connect-")
        os.environ[CONNECT_DIR] = folder
        config._tom_connect_dir = folder


def pytest_unconfigure(config):
    """Its owner stops the suite's Spark JVM, if a worker started it, by its process group, once every
    worker is done."""
    folder = getattr(config, "_tom_connect_dir", None)
    if folder is None:
        return
    pgid = Path(folder, "pgid")
    if pgid.exists():
        from analysis.connect_server import stop_group
        stop_group(int(pgid.read_text()))
    shutil.rmtree(folder, ignore_errors=True)
    os.environ.pop(CONNECT_DIR, None)


@pytest.fixture(scope="session")
def suite_spark():
    """``(spark.json, None)`` of the suite's one Spark JVM (:mod:`suite_spark`: the analysis tests'
    local Spark and the Spark Connect server in one driver), or ``(None, why not)``.

    One for all the workers: the first test to need it starts it, under a file lock the others wait
    on (the start is bounded in time), and writes its process group to :data:`CONNECT_DIR`; the
    session's owner stops it (:func:`pytest_unconfigure`). One JVM warms up instead of one per
    worker and one for Connect. A start that failed is not tried again: its reason is kept."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        yield None, f"no PySpark ({exc})"
        return
    import suite_spark
    folder = Path(os.environ[CONNECT_DIR])
    with open(folder / "lock", "a") as lock:  # (closing it releases the lock)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "spark.json").exists() and not (folder / "failed").exists():
            from analysis.connect_server import ConnectServerUnavailable
            try:
                proc, info = suite_spark.start(folder / "spark")
            except ConnectServerUnavailable as exc:
                (folder / "failed").write_text(str(exc))
            else:
                (folder / "pgid").write_text(str(proc.pid))
                (folder / "spark.json").write_text(json.dumps(info))
    if (folder / "spark.json").exists():
        yield json.loads((folder / "spark.json").read_text()), None
    else:
        yield None, (folder / "failed").read_text()


@pytest.fixture(scope="session")
def connect_server(suite_spark):
    """``(URL, None)`` of the suite's Spark Connect server (on :func:`suite_spark`'s JVM), or
    ``(None, why not)``. Every verify after the first runs on a warm JVM."""
    info, why = suite_spark
    return (info["url"], None) if info is not None else (None, why)


@pytest.fixture
def spark_remote(connect_server, monkeypatch):
    """``SPARK_REMOTE`` set, for the test's subprocesses, to the suite's Spark Connect server
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
