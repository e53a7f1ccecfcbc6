"""The package as a user installs it: a wheel built from this tree and installed into a fresh venv
without PySpark runs a group of peers, carries the dashboard, and its ``tom verify`` says in one line
what to install (the extra ``verify``). Also the same one line from this tree when PySpark is hidden.

The wheel test downloads the package's dependencies from PyPI (CI reaches the package registries);
where pip cannot, it is skipped and says why."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import pytest

from tom.extras import VERIFY_MISSING, verifier_missing
from tom.tools.peers import PeerCommand, PeerGroup, PeerProcess, free_ports, write_neighbors

REPO = Path(__file__).resolve().parent.parent


def test_the_verifier_s_extra_is_found_here():
    assert verifier_missing() is None  # the README's setup installs tom[verify]


def test_the_tests_of_the_wheel_run_on_one_worker():
    import inspect
    users = [f for name, f in globals().items() if name.startswith("test_") and "wheel_venv" in inspect.signature(f).parameters]
    assert len(users) == 3
    for test in users:
        assert [m.args for m in getattr(test, "pytestmark", []) if m.name == "xdist_group"] == [("wheel",)], test.__name__


def test_tom_verify_without_pyspark_is_one_line(tmp_path):
    """PySpark hidden from this tree's interpreter: one line, exit 2."""
    hide = ("import sys\n"
            "sys.modules['pyspark'] = None  # what an interpreter without PySpark finds\n"
            "from tom.cli import main\n"
            "sys.exit(main(['verify', sys.argv[1]]))\n")
    done = subprocess.run([sys.executable, "-c", hide, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, cwd=REPO, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    assert done.stderr == f"tom: error: {VERIFY_MISSING}\n"
    assert done.stdout == ""


def _source_copy(dest: Path) -> Path:
    """The files a wheel is built from, without this tree's compiled modules and build leftovers."""
    skip = shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info", "build")
    for folder in ("tom", "analysis"):
        shutil.copytree(REPO / folder, dest / folder, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    return dest


def _pip(python: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


ON_ONE_WORKER = pytest.mark.xdist_group("wheel")
"""The mark of every test that uses :func:`wheel_venv`: they run on one worker, which builds the wheel
and its venv once (a module's fixture is made once per worker that runs a test of it: about 11 CPU-s
each, pip's download and install)."""


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the python of a fresh venv with it installed, and no PySpark)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = _source_copy(tmp / "src")
    venv.create(tmp / "venv", with_pip=True)
    python = tmp / "venv" / "bin" / "python"
    built = _pip(python, "wheel", "--no-deps", "--wheel-dir", str(tmp / "dist"), str(src))
    if built.returncode != 0:
        if "Could not find a version" in built.stderr or "connection" in built.stderr.lower():
            pytest.skip(f"cannot build the wheel here (no package index for its build backend): "
                        f"{built.stderr.strip().splitlines()[-1]}")
        raise AssertionError(f"pip wheel failed:\n{built.stdout}\n{built.stderr}")
    wheel = next((tmp / "dist").glob("tom-*.whl"))
    installed = _pip(python, "install", str(wheel))
    if installed.returncode != 0:
        if "Could not find a version" in installed.stderr or "connection" in installed.stderr.lower():
            pytest.skip(f"cannot install the wheel's dependencies here (no package index): "
                        f"{installed.stderr.strip().splitlines()[-1]}")
        raise AssertionError(f"pip install of the wheel failed:\n{installed.stdout}\n{installed.stderr}")
    return wheel, python


@pytest.mark.e2e
@ON_ONE_WORKER
def test_the_wheel_carries_the_dashboard_the_verifier_sources_and_the_grade_points(wheel_venv):
    wheel, _ = wheel_venv
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"tom/web/dashboard/index.html", "tom/web/dashboard/dashboard.js", "tom/extras.py",
            "analysis/verify.py", "analysis/java/OrderMark.java",
            "tom/grade/points.toml", "tom/grade/report.py", "analysis/grade.py"} <= names  # tom grade's report
    assert not [n for n in names if n.endswith(".so")]  # the wheel is the pure build
    requires = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    lines = [ln for ln in requires.splitlines() if ln.startswith("Requires-Dist: pyspark")]
    assert lines and all("extra ==" in ln for ln in lines), lines  # PySpark only with an extra


@pytest.mark.e2e
@ON_ONE_WORKER
def test_the_installed_wheel_without_pyspark_runs_a_group_and_says_what_verify_needs(wheel_venv, tmp_path):
    _, python = wheel_venv
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('pyspark'))"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert probe.stdout.strip() == "None"

    tom = python.parent / "tom"
    done = subprocess.run([str(tom), "verify", str(tmp_path)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr == f"tom: error: {VERIFY_MISSING}\n"

    ports = free_ports(2)
    neighbors = write_neighbors(tmp_path / "neighbors.txt", (f"127.0.0.1:{p}" for p in ports))
    outputs = [tmp_path / f"out-{p}.jsonl" for p in ports]
    group: PeerGroup[int] = PeerGroup(grace=5)
    try:
        for i, port in enumerate(ports):
            argv = PeerCommand(neighbors, outputs[i], port, python=str(python)).argv()
            # cwd outside this tree: ``-m tom`` must import the installed wheel, not the checkout
            group.start(i, PeerProcess(argv, tmp_path / f"log-{port}.txt", cwd=tmp_path))
        group.wait_ready(timeout=30)
        assert group[0].send(["hello from the wheel"])
        end = time.monotonic() + 30
        while time.monotonic() < end:
            texts = [[ln for ln in o.read_text().splitlines() if "hello from the wheel" in ln] if o.exists() else []
                     for o in outputs]
            if all(texts):
                break
            time.sleep(0.1)
        else:
            logs = "\n".join(p.read_text() for p in tmp_path.glob("log-*.txt"))
            raise AssertionError(f"the wheel's peers did not both deliver the message; logs:\n{logs}")
        version = subprocess.run([str(python), "-c", "import tom.build as b; print(b.describe())"],
                                 capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert "interpreted" in version.stdout, version
    finally:
        group.stop()


@pytest.mark.e2e
@ON_ONE_WORKER
def test_the_installed_wheel_runs_the_kv_store_example(wheel_venv, tmp_path):
    from test_examples import check_kv_output, run_kv_store

    _, python = wheel_venv
    check_kv_output(run_kv_store(str(python), tmp_path))  # cwd outside the checkout: the wheel's tom
