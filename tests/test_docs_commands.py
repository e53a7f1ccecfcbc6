"""Every fenced shell block of README.md and docs/**/*.md, run as written (tests/docblocks.py finds them).

The rule: a block is run when its info string is ``sh``, ``bash``, ``shell`` or ``console`` (in a
console block only its ``$ `` lines); an unlabeled fence whose first line is a command fails here
(label it ``bash``), so no command escapes the run. Each block is one test, ``page:line``.

A block runs as written, with ``bash -e -o pipefail``, from a fresh copy of the repo (the sources, the
compiled build if there is one; never ``.git``, ``.venv`` or ``runs/``) whose ``.venv`` is this suite's
virtualenv (a folder of links to it, stamped as installed for this ``pyproject.toml``, so
``scripts/setup-venv`` finds it made), with ``.venv/bin`` first on PATH, stdin at its end, its own tmux
server, in its own session under a time limit; at the end its process group, its tmux server and
whatever still runs in the copy are stopped. The blocks that bind the group's fixed ports (the sample
neighbors files' 5000-5004, the dashboards' 8000-8004: `binds_fixed_ports`) run one at a time: one
xdist group, and a file lock against another pytest on this machine. The others run in a group per
page, in the page's order (a page's blocks may share files: grading.md's class in /tmp), beside them.
The output must hold each ``<!-- expect: TEXT -->`` (whitespace-insensitive, rich wraps lines),
match each ``<!-- expect-re: REGEX -->``, and each ``<!-- expect-file: PATH -->`` must be written;
``<!-- until: TEXT -->`` marks a block that runs until stopped (a server): it is stopped once TEXT
shows. Every block, run or not, has its commands' long options checked against the real parser
(``--help`` of the command, in a copy like the above); a block marked ``<!-- not run: REASON -->``
(needs root, a cluster, a terminal, minutes) is only checked so, and few may be marked (no more than
today; the goal, a fifth of the blocks: `NOT_RUN_TODAY`).

A block whose commands verify (a launch, ``tom verify``, ``analysis.verify``, ``tom grade``, a score
again with ``tom.grade.report``) verifies on the suite's Spark Connect server (``SPARK_REMOTE``,
`conftest.connect_server`: one JVM, warmed by the verifies before) instead of starting a JVM of its
own; the README's demo starts its own, as a user's first run does, and so does a block that names a
master, a server or spark-submit itself, or runs in a network namespace of its own (`on_shared_spark`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from docblocks import REASONS, Block, check_flags, collect, looks_like_shell, reason_of

REPO = Path(__file__).resolve().parents[1]
BLOCKS = collect(REPO)
SHELL = [b for b in BLOCKS if b.shell]
TIME_LIMIT = 300.0
LOCK = Path(tempfile.gettempdir()) / "tom-docs-commands.lock"
LEFT_OUT = shutil.ignore_patterns(".git", ".venv", ".venv-*", "runs", "build", "__pycache__", ".pytest_cache",
                                  ".mypy_cache", ".hypothesis", "*.egg-info", "test-artifacts", "tom-check",
                                  "tom-verify", "keys", "class")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

pytestmark = pytest.mark.e2e

FIXED_PORTS = ("neighbors/", "scripts/demo", "localhost:800")
"""What a block names when it binds the group's fixed ports: a sample neighbors file (a launch, a
peer), the demo (a launch of neighbors/four.txt), a dashboard's port."""


def binds_fixed_ports(block: Block) -> bool:
    """Whether ``block`` binds the group's fixed ports (:data:`FIXED_PORTS`); the others take free
    ports (tom grade, the benchmarks) or none."""
    text = "\n".join(block.body)
    return any(w in text for w in FIXED_PORTS)


def xdist_group(block: Block) -> str:
    """The xdist group ``block`` runs in: every block that binds the fixed ports in one, one after
    another; the others in one per page, in the page's order."""
    return "docs-ports" if binds_fixed_ports(block) else f"docs-{block.path.replace('/', '-')}"


def make_copy(dest: Path) -> Path:
    """A fresh copy of the repo at ``dest`` with this suite's venv as its ``.venv``."""
    shutil.copytree(REPO, dest, ignore=LEFT_OUT, symlinks=True)
    venv = dest / ".venv"
    venv.mkdir()
    for entry in Path(sys.prefix).iterdir():
        if not entry.name.startswith("."):
            (venv / entry.name).symlink_to(entry)
    stamp = hashlib.sha256((dest / "pyproject.toml").read_bytes()).hexdigest()
    (venv / ".tom-installed").write_text(stamp + "\n")
    return dest


def block_env(copy: Path, tmux_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "VIRTUAL_ENV", "TMUX",
                        "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")}
    env["PATH"] = f"{copy / '.venv' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    env["PYTHONPATH"] = str(copy)  # the `tom` entry point runs the copy's package, not the installed one
    env["TMUX_TMPDIR"] = str(tmux_dir)
    return env


@pytest.fixture(scope="module")
def help_copy(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """One copy for the parsers' --help (scripts/* run setup-venv: never in the repo itself)."""
    copy = make_copy(tmp_path_factory.mktemp("docs-help") / "repo")
    tmux = tmp_path_factory.mktemp("docs-help-tmux")
    return copy, block_env(copy, tmux)


@contextlib.contextmanager
def ports_lock() -> Iterator[None]:
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def processes_in(folder: Path) -> list[int]:
    """Processes whose working directory is inside ``folder`` (started by a block, even in a session of
    their own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == str(folder) or cwd.startswith(f"{folder}/"):
            found.append(int(entry.name))
    return found


def stop_all(proc: subprocess.Popen, copy: Path, env: dict[str, str]) -> None:
    """The block's tmux server, its process group, and anything still running in its copy: SIGTERM,
    then SIGKILL."""
    subprocess.run(["tmux", "kill-server"], env=env, capture_output=True, timeout=30, check=False)
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        for pid in processes_in(copy):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            proc.poll()  # reap the shell: a zombie still counts in its group
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                if not processes_in(copy):
                    return
            time.sleep(0.2)


def squeeze(text: str) -> str:
    return " ".join(ANSI.sub("", text).split())


def run_block(block: Block, copy: Path, env: dict[str, str]) -> tuple[int | None, str, float]:
    """``(exit status or None when stopped, output, seconds)``."""
    started = time.monotonic()
    proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", block.script()], cwd=copy, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stdout.read1(65536), b"")),
                              daemon=True)
    reader.start()
    code: int | None = None
    try:
        while True:
            code = proc.poll()
            if code is not None:
                break
            if block.until and squeeze(block.until) in squeeze(b"".join(chunks).decode(errors="replace")):
                break
            if time.monotonic() - started > TIME_LIMIT:
                break
            time.sleep(0.2)
        if code is not None and not block.until:  # let background jobs finish writing what they printed
            time.sleep(0.2)
    finally:
        stop_all(proc, copy, env)
        reader.join(timeout=5)
    return code, b"".join(chunks).decode(errors="replace"), time.monotonic() - started


def test_no_unlabeled_shell_fence():
    unlabeled = [b.id for b in BLOCKS if not b.info and looks_like_shell(b.body)]
    assert not unlabeled, f"fences holding commands without a label (make them ```bash): {unlabeled}"


@pytest.mark.xdist_group("docs-ports")
def test_the_blocks_keep_their_xdist_groups(request):
    """Under ``--dist loadgroup`` (scripts/test) the blocks of a group are one work unit, sent to
    one worker: xdist marks it by a suffix of the node id, which pytest 9.2 no longer lets it write
    (pytest-dev/pytest-xdist#1386), and the blocks were then spread over the workers, each waiting
    on the other's port lock. pyproject.toml keeps pytest below 9.2 until xdist writes it again."""
    if not getattr(request.config.option, "loadgroup", False):  # (no such option without xdist's -n)
        pytest.skip("not under pytest-xdist's --dist loadgroup (scripts/test runs it so)")
    assert request.node.nodeid.endswith("@docs-ports"), (
        f"{request.node.nodeid}: xdist did not group the docs' blocks; pytest {pytest.__version__}")


def test_the_blocks_that_bind_the_fixed_ports_are_told_apart():
    ports = {b.id for b in SHELL if binds_fixed_ports(b)}
    assert {"README.md:3", "README.md:27", "README.md:70", "README.md:179", "docs/http-api.md:16",
            "docs/step-mode.md:15", "docs/verifier.md:13"} <= ports
    assert not ports & {"README.md:165", "docs/grading.md:15", "docs/design/performance.md:348",
                        "docs/model-checking.md:8", "docs/design/testing.md:9"}


def test_markers_name_a_reason_of_the_closed_list():
    wrong = [f"{b.id}: {b.not_run}" for b in SHELL if b.not_run and reason_of(b.not_run) not in REASONS]
    assert not wrong, f"not-run reasons outside {REASONS}: {wrong}"


NOT_RUN_TODAY = 8
"""The blocks marked not run (8 of 45, 18 %: the benchmarks at full size, scripts/core-diff, netlab as
root, a cluster, the whole suite). At most a fifth of the blocks: this number only goes down."""


def test_few_blocks_are_not_run_and_never_more_than_today():
    marked = [b.id for b in SHELL if b.not_run]
    assert len(marked) <= max(len(SHELL) // 5, NOT_RUN_TODAY), (
        f"{len(marked)} of {len(SHELL)} blocks are not run (at most {NOT_RUN_TODAY} today, a fifth the goal): {marked}")


OWN_SPARK = ("README.md:3",)
"""Blocks that start their own Spark whatever they hold: the demo, a user's first command."""


def on_shared_spark(block: Block) -> bool:
    """Whether ``block`` verifies on the suite's Spark Connect server (module docstring)."""
    text = "\n".join(block.body)
    return (block.id not in OWN_SPARK and any(w in text for w in ("scripts/launch", "verify", "tom grade",
                                                                    "tom.grade.report"))
            and not any(w in text for w in ("--master", "--remote", "SPARK_REMOTE", "spark-submit", "--no-connect",
                                            "bench-verify", "unshare")))


@pytest.mark.parametrize(("body", "shared"), [
    ("scripts/launch neighbors/three.txt --messages 50", True),
    ("tom grade /tmp/class --out /tmp/grades", True),
    ("python -m tom.grade.report /tmp/grades --points /tmp/my-points.toml", True),
    ("./scripts/demo", False),  # README.md:3, a user's first run
    ("scripts/bench-verify --sizes 10000 --no-small --no-connect", False),
    ("unshare --net sh -c 'exec tom grade /tmp/class --out /tmp/grades'", False),
    ("SPARK_REMOTE=sc://127.0.0.1:15002 tom verify runs/x", False),
])
def test_the_blocks_that_verify_share_the_suites_spark(body, shared):
    assert on_shared_spark(Block("docs/x.md", 1, "sh", [body])) is shared


@pytest.mark.parametrize("block", [pytest.param(b, marks=pytest.mark.xdist_group(xdist_group(b))) for b in SHELL],
                         ids=[b.id for b in SHELL])
def test_block(block: Block, help_copy, tmp_path, request):
    copy, env = help_copy
    problems = check_flags(block, copy, env)
    assert not problems, "\n".join(problems)
    if block.not_run:
        return
    copy = make_copy(tmp_path / "repo")
    tmux = tmp_path / "tmux"
    tmux.mkdir()
    env = block_env(copy, tmux)
    if on_shared_spark(block):
        url, why = request.getfixturevalue("connect_server")
        if url is not None:
            env["SPARK_REMOTE"] = url
        else:
            print(f"no Spark Connect server ({why}): the block's verifies start their own Spark")
    with ports_lock() if binds_fixed_ports(block) else contextlib.nullcontext():
        code, out, took = run_block(block, copy, env)
    shown = f"{block.id} ({took:.1f} s), its output:\n{out[-6000:]}"
    if block.until:
        assert squeeze(block.until) in squeeze(out), f"never printed {block.until!r}: {shown}"
    else:
        assert code is not None, f"still running after {TIME_LIMIT:.0f} s: {shown}"
        assert code == 0, f"exit status {code}: {shown}"
    flat = squeeze(out)
    for text in block.expects:
        assert squeeze(text) in flat, f"the page promises {text!r}: {shown}"
    for pattern in block.expect_res:
        assert re.search(pattern, flat), f"the page promises /{pattern}/: {shown}"
    for name in block.expect_files:
        assert (copy / name).exists(), f"the page promises the file {name}: {shown}"
