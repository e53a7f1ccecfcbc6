"""`tom check`'s transcripts (tests/testdata/check/*.txt): schedules the model checker found, replayed
on the real core through the checker's world. Every step must do what the file says, and the last
block, ``check``, must find every invariant holding. A counterexample `tom check` writes
(``tom-check/counterexample.txt``) becomes one of these by copying it here once the bug is fixed
(``TOM_REWRITE=1`` records the fixed core's outputs; read the diff before committing it).

The files here are the schedules that found the six planted bugs of tests/test_check.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tom.check import world as check_world
from tom.check.trace import run_transcript

DATA = Path(__file__).parent / "testdata" / "check"


@pytest.mark.parametrize("path", sorted(DATA.glob("*.txt")), ids=lambda p: p.stem)
def test_check_transcript(path):
    check_world._cache.clear()
    text = path.read_text()
    rows = run_transcript(text)
    if os.environ.get("TOM_REWRITE"):
        head = text.split("\n\n", 1)[0]  # the comments and the configuration block
        path.write_text("\n\n".join([head] + ["\n".join([cmd, "----", *got]) for cmd, _, got in rows]) + "\n")
        return
    for cmd, want, got in rows:
        assert got == want, f"{path.name}: after {cmd!r}\nwant:\n" + "\n".join(want) + "\nhave:\n" + "\n".join(got)


def test_there_are_check_transcripts_and_a_wrong_one_fails():
    files = sorted(DATA.glob("*.txt"))
    assert len(files) >= 6
    text = files[0].read_text().replace("\ncheck\n----\nok", "\ncheck\n----\nsomething else")
    assert any(got != want for _, want, got in run_transcript(text))
