"""TOM: totally-ordered multicast between peers with Lamport clocks.

The pure core and the frame codec may run compiled (mypyc, `scripts/setup-venv`): each compiled
module is an extension beside its source. They run only all together, and only when every one is
at least as new as its source; otherwise, or with ``TOM_PURE=1`` in the environment, every module
is imported from its source (`tom.build` says which build runs and why).
"""

from __future__ import annotations

import os as _os
import sys as _sys
from typing import TYPE_CHECKING as _TYPE_CHECKING
from collections.abc import Sequence as _Sequence
from importlib.machinery import ModuleSpec as _ModuleSpec
from importlib.machinery import EXTENSION_SUFFIXES as _EXT, SOURCE_SUFFIXES as _SRC, FileFinder as _FileFinder
from importlib.machinery import SourceFileLoader as _SourceFileLoader

__version__ = "0.1.0"


COMPILED_SOURCES = ("codec/pid.py", "codec/frames.py", "peer/lines.py", "peer/pending.py", "core/*.py")
"""What `scripts/build-compiled` compiles, beside this file; ``core/notices.py`` stays interpreted (mypyc
takes its ``ClassVar`` tags for dataclass fields)."""


def compiled_sources() -> list[str]:
    """The source files of the compiled build, as paths."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    found = []
    for pattern in COMPILED_SOURCES:
        folder, name = pattern.split("/")
        if name != "*.py":
            found.append(_os.path.join(here, folder, name))
            continue
        try:
            names = sorted(_os.listdir(_os.path.join(here, folder)))
        except OSError:
            continue
        found += [_os.path.join(here, folder, n) for n in names if n.endswith(".py") and n != "notices.py"]
    return found


def _compiled_state(runtime: str | None) -> tuple[bool, str]:
    """Whether the compiled modules may be used (``runtime``: their shared runtime, if any), and why not:
    every source of the build must have its extension, none older than the source."""
    if _os.environ.get("TOM_PURE"):
        return False, "TOM_PURE is set"
    found = stale = missing = 0
    for source in compiled_sources():
        stem = source[:-3]
        built = [stem + suffix for suffix in _EXT if _os.path.exists(stem + suffix)]
        if not built:
            missing += 1
            continue
        found += 1
        try:
            if _os.stat(source).st_mtime > _os.stat(built[0]).st_mtime:
                stale += 1
        except OSError:
            stale += 1
    if not found or runtime is None:
        return False, "not built"
    if stale or missing:
        why = [f"is older than {stale} source file(s)"] if stale else []
        why += [f"lacks {missing} module(s)"] if missing else []
        return False, f"the compiled build {' and '.join(why)}: scripts/setup-venv rebuilds it"
    return True, ""


def _runtime() -> str | None:
    """The compiled modules' shared runtime (beside the package, where scripts/build-compiled puts it)."""
    top = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    for suffix in _EXT:
        path = _os.path.join(top, "tom_mypyc__mypyc" + suffix)
        if _os.path.exists(path):
            return path
    return None


_RUNTIME = _runtime()
COMPILED_OK, PURE_WHY = _compiled_state(_RUNTIME)


class _SourceOnly:
    """Import every ``tom.*`` module from its source (the compiled build is off: `_compiled_state`)."""

    @staticmethod
    def find_spec(name: str, path: _Sequence[str] | None = None, target: object = None) -> _ModuleSpec | None:
        if not name.startswith("tom.") or not path:
            return None
        for entry in path:
            spec = _FileFinder(entry, (_SourceFileLoader, _SRC)).find_spec(name)
            if spec is not None:
                return spec
        return None


if not COMPILED_OK:
    _sys.meta_path.insert(0, _SourceOnly)
elif _RUNTIME is not None and "tom_mypyc__mypyc" not in _sys.modules:  # (importable wherever the package is, not only from its top)
    from importlib.util import module_from_spec as _module_from_spec, spec_from_file_location as _spec_from_file

    _spec = _spec_from_file("tom_mypyc__mypyc", _RUNTIME)
    if _spec is not None and _spec.loader is not None:
        _runtime_module = _module_from_spec(_spec)
        _sys.modules["tom_mypyc__mypyc"] = _runtime_module
        _spec.loader.exec_module(_runtime_module)


if _TYPE_CHECKING:  # what type checkers see of the names `__getattr__` imports on first use
    from .group_thread import AsyncioGroup, GroupThread
    from .library import Delivered, Group, GroupEvent, Sent, ViewChanged, open_group
    from .replication import CALL_PREFIX, ReplCounter, ReplDict, ReplLockManager, Replicated, replicated

_LIBRARY = {
    "library": ("Delivered", "Group", "GroupEvent", "Sent", "ViewChanged", "open_group"),
    "group_thread": ("AsyncioGroup", "GroupThread"),
    "replication": ("CALL_PREFIX", "ReplCounter", "ReplDict", "ReplLockManager", "Replicated", "replicated"),
}
_HOME = {name: module for module, names in _LIBRARY.items() for name in names}
__all__ = ["COMPILED_OK", "__version__", *_HOME]


def __getattr__(name: str) -> object:
    """The library's names (`tom.library`, `tom.group_thread`, `tom.replication`), imported on first use:
    ``import tom`` stays light for the compiled core and the command line."""
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module 'tom' has no attribute {name!r}")
