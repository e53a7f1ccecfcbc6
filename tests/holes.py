"""Known holes told as transcripts: a strict expected failure that may fail only at its ``check`` block.

Each transcript test keeps a table of its holes (file stem -> why it fails). Every step before the
``check`` block must still do what the file says (a drift there is a plain failure: record the steps
again); the ``check`` block's verdict raises `HoleStillOpen`, the one failure the xfail expects. A fix
makes the test pass, which strict xfail reports: take the file out of the table then.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest


class HoleStillOpen(Exception):
    """A known hole's ``check`` block found a guarantee broken, every other block as recorded."""


def transcript_params(paths: list[Path], holes: Mapping[str, str]) -> list[Any]:
    """One pytest parameter per transcript, those in ``holes`` marked as their strict expected failure."""
    return [pytest.param(p, id=p.stem, marks=pytest.mark.xfail(strict=True, raises=HoleStillOpen, reason=holes[p.stem]))
            if p.stem in holes else pytest.param(p, id=p.stem) for p in paths]
