"""scripts/test's interpreted pass: which test files it runs, and which of them run beside the main
pass in the idle scheduling class (``sims``; ``once``: only their tests marked ``pure``) or after it
(``timed``). A test marked ``pure`` is skipped on the compiled build saying it runs in that pass, so
its file must be in one of the three lists and it must not be deselected there; a file run beside the
main pass may be starved for minutes, so nothing in it may bound anything by wall-clock time."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE = re.compile(r"^(@pytest\.mark\.pure\b|pytestmark = .*pytest\.mark\.pure\b)", re.M)
WALL_CLOCK = ("import time", "from time", "time_limit", "budget=", "hypothesis", "trio", "subprocess",
              "perf_counter", "monotonic")


def _array(name: str) -> list[str]:
    """The files of the bash array ``name=( ... )`` in scripts/test."""
    found = re.search(rf"^{name}=\(([^)]*)\)", (ROOT / "scripts" / "test").read_text(), re.M)
    assert found, f"scripts/test has no array {name}"
    return found.group(1).split()


def _pure_files() -> dict[str, str]:
    """Each test file with a test marked ``pure`` -> its text."""
    return {f"tests/{p.name}": text for p in sorted((ROOT / "tests").glob("test_*.py"))
            if PURE.search(text := p.read_text())}


def test_each_file_with_a_pure_test_runs_in_the_interpreted_pass_once():
    sims, once, timed = _array("sims"), _array("once"), _array("timed")
    assert len(set(sims + once + timed)) == len(sims + once + timed)
    for path in sims + once + timed:
        assert (ROOT / path).is_file(), path
    missing = sorted(set(_pure_files()) - set(sims) - set(once) - set(timed))
    assert not missing, f"marked pure (skipped on the compiled build) but not in scripts/test's interpreted pass: {missing}"


def test_a_pure_test_is_not_one_the_interpreted_pass_deselects():
    """The interpreted pass runs ``-m "not e2e and not spark"``: a test marked pure and e2e or spark
    would be skipped on the compiled build and deselected on the interpreted one."""
    for path, text in _pure_files().items():
        whole = re.search(r"^pytestmark = (.*)$", text, re.M)
        for decorators in re.findall(r"((?:^@.*\n)+)def test", text, re.M):
            marks = decorators + (whole.group(1) if whole else "")
            if "pytest.mark.pure" in marks:
                assert "mark.e2e" not in marks and "mark.spark" not in marks, (path, decorators)


def test_the_files_run_beside_the_main_pass_read_no_clock():
    for path in _array("sims") + _array("once"):
        text = (ROOT / path).read_text()
        used = [word for word in WALL_CLOCK if word in text]
        assert not used, f"{path} is run in the idle class beside the main pass but uses {used}"
