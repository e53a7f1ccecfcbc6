"""The analysis package's tests. Under tests/ this package is the one named ``analysis``
(tests/conftest.py puts tests/ first on sys.path); its path also holds this checkout's analysis/, so
``analysis.<module>`` is this checkout's own in any checkout, whichever one an editable install names
(a git worktree's tests read the worktree's analysis/, not the main checkout's)."""

from pathlib import Path

__path__.append(str(Path(__file__).resolve().parents[2] / "analysis"))  # noqa: F821 -- a package's own
