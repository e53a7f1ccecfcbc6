"""Which build of TOM runs: the core and codec compiled by mypyc, or all of it interpreted."""

from __future__ import annotations

import importlib.machinery

from . import PURE_WHY


def compiled() -> bool:
    """Whether the core and the codec run compiled (their modules are extensions)."""
    from .core import lamport

    return any(str(lamport.__file__).endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)


def describe() -> str:
    """One phrase for ``tom peer -v``, ``status`` and ``/metrics``: ``compiled (mypyc)`` or
    ``interpreted (<why>)``."""
    if compiled():
        return "compiled (mypyc)"
    return f"interpreted ({PURE_WHY or 'the compiled modules were not loaded'})"
