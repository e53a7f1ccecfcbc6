"""`tom check`'s transcripts (tests/testdata/check/*.txt): schedules the model checker found, replayed
on the real core through the checker's world. Every step must do what the file says, and the last
block, ``check``, must find every invariant holding. A counterexample `tom check` writes
(``tom-check/counterexample.txt``) becomes one of these by copying it here once the bug is fixed
(``TOM_REWRITE=1`` records the fixed core's outputs; read the diff before committing it).

The files here are the schedules that found the seven planted bugs of tests/test_check.py, and the
holes of the real core that the checker reaches (`HOLES`): strict expected failures whose ``check``
block says what must hold (``ok``) while the core breaks it. Every step before it must still do what
the file says (a drift there is a plain failure: record the steps again); only the verdict of the
``check`` block is expected to fail, so a fix makes the test pass, which strict xfail reports: move
the file out of `HOLES` then. ``TOM_REWRITE=1`` keeps a hole's ``check`` block as written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holes import HoleStillOpen, transcript_params
from tom.check import world as check_world
from tom.check.trace import run_transcript

pytestmark = pytest.mark.pure  # (tom check walks and pickles the core: interpreted)

DATA = Path(__file__).parent / "testdata" / "check"

# holes of today's core the checker reaches (issue 25): file stem -> the reason of the strict xfail
HOLES = {
}


@pytest.mark.parametrize("path", transcript_params(sorted(DATA.glob("*.txt")), HOLES))
def test_check_transcript(path):
    check_world._cache.clear()
    text = path.read_text()
    rows = run_transcript(text)
    hole = path.stem in HOLES
    if os.environ.get("TOM_REWRITE"):
        head = text.split("\n\n", 1)[0]  # the comments and the configuration block
        # (a hole's check block says what must hold: it is kept as written)
        kept = [(cmd, want if hole and cmd == "check" else got) for cmd, want, got in rows]
        path.write_text("\n\n".join([head] + ["\n".join([cmd, "----", *out]) for cmd, out in kept]) + "\n")
        if not hole:
            return
        rows = run_transcript(path.read_text())  # (a hole still fails as expected)
    for cmd, want, got in rows:
        if hole and cmd == "check" and got != want:
            raise HoleStillOpen(f"{path.name}: {got[0]}")
        assert got == want, f"{path.name}: after {cmd!r}\nwant:\n" + "\n".join(want) + "\nhave:\n" + "\n".join(got)


def test_there_are_check_transcripts_and_a_wrong_one_fails():
    files = sorted(DATA.glob("*.txt"))
    assert len(files) >= 6
    text = files[0].read_text().replace("\ncheck\n----\nok", "\ncheck\n----\nsomething else")
    assert any(got != want for _, want, got in run_transcript(text))
