"""The bench's reference row (``scripts/bench --peers-compare``): a PySyncObj that cannot be installed
is one line, and the bench goes on to print what it measured."""

from __future__ import annotations

import pytest

from benchmarks.raft_compare import Unavailable, ensure_venv


def test_an_uninstallable_reference_is_one_line(tmp_path):
    with pytest.raises(Unavailable) as raised:
        ensure_venv(tmp_path, "pysyncobj===not a version")  # pip refuses it before any download
    line = str(raised.value)
    assert "\n" not in line
    assert line.startswith("cannot install pysyncobj===not a version into ")
    assert "Traceback" not in line
    assert not (tmp_path / ".venv-pysyncobj" / ".installed").exists()
