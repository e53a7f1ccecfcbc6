"""``scripts/core-diff``: proof that a rewritten `Core` behaves exactly as an older one.

The old core is a git revision's ``tom/`` exported into a temporary directory as the package
``tom_old`` (`load_old`), so that both cores live in one process. Only the public surface of `Core` is
relied on: its constructor and ``Core.joining``, the inputs (``receive``, ``tick``, ``broadcast``,
``leave``, ``connected``, ``disconnected``), ``ready``, the queries (``status``, ``backlog``,
``undelivered_own``), the attributes ``mode``, ``view``, ``suspected``, ``leaving``, ``now``,
``no_quorum``, ``delivered``, ``clock``, ``stats``, and the codec's ``format_frame``/``parse_frame``.

`PairedCore` holds an old and a new core and feeds every call to both (frames go to the old one as
text parsed by its own codec). At every ``ready`` it compares what the two hand out — the sends
(destinations and frame text, in order), the deliveries, notices and alarms — and the public state;
every call also compares return values and the types of raised exceptions. Any difference raises
`CoreMismatch`, whose message shows the inputs of the step and a diff.

Two modes (``scripts/core-diff --help``):

* ``check``: each configuration of `tom.check.table` (and any ``--config``) is explored three times:
  by the old revision's own ``tom_old.check`` on the old core, by the working tree's ``tom.check`` on
  the new core (to the same number of states when the first run was bounded, so the counts must be
  equal), and by the working tree's ``tom.check`` with paired cores, so that every explored step
  compares the two cores.
* ``sweep``: the randomized sweeps of ``tests/test_dynamic.py`` and ``tests/test_simulation.py``, seed
  by seed, in one subprocess per tree (`tom.check.sweeps`); the failing seeds of each tree and the
  seeds whose deliveries differ between trees.

Exit status: 0 identical, 1 a mismatch, 2 a usage error.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import difflib
import enum
import importlib
import io
import json
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from ..codec import frames as new_frames
from ..core import Core as NewCore

OLD = "tom_old"
"""The package name the old revision is imported under."""

REPO = Path(__file__).resolve().parents[2]
"""The working tree this module is in: its ``tom/`` is the new core."""

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2


class CoreMismatch(Exception):
    """The old and the new core did something different; the message is the step and its diff."""


# -- the old revision as a package of its own ----------------------------------------------------

_loaded: dict[str, str] = {}  # package -> what it was loaded from


def load_old(source: str, repo: Path = REPO, package: str = OLD) -> ModuleType:
    """Import ``tom/`` of git revision ``source`` of ``repo`` (or of the directory ``source``) as
    ``package``, beside the working tree's ``tom``; loaded once per process.

    TOM imports itself relatively, so renaming the top package is enough, with two textual fixes made
    on the copy: absolute ``from tom...`` imports, and ``startswith("tom.")`` (the check's set walker
    in ``world.py``, which must walk the old package's objects). ValueError if ``source`` is neither."""
    key = str(source)
    if package in sys.modules:
        if _loaded.get(package) != key:
            raise ValueError(f"{package} is already loaded from {_loaded.get(package)}, not {key}")
        return sys.modules[package]
    tmp = Path(tempfile.mkdtemp(prefix="core-diff-"))
    atexit.register(shutil.rmtree, tmp, True)
    dest = tmp / package
    path = Path(source)
    if path.is_dir():
        tree = path / "tom" if (path / "tom" / "__init__.py").is_file() else path
        shutil.copytree(tree, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        run = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", f"{source}^{{commit}}", "tom"],
                             capture_output=True)
        if run.returncode != 0:
            raise ValueError(f"cannot export tom/ of {source!r}: {run.stderr.decode().strip()}")
        with tarfile.open(fileobj=io.BytesIO(run.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        (tmp / "tom").rename(dest)
    _rename_package(dest, package)
    sys.path.insert(0, str(tmp))
    importlib.invalidate_caches()
    module = importlib.import_module(package)
    _loaded[package] = key
    return module


_FROM_TOM = re.compile(r"^(\s*)from tom(\.|\s)", re.M)
_IMPORT_TOM = re.compile(r"^\s*import tom\b", re.M)
_WALKER = re.compile(r"""startswith\((["'])tom\.""")


def _rename_package(root: Path, package: str) -> None:
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        part = path.relative_to(root).parts[0]
        if _IMPORT_TOM.search(text) and part in ("core", "codec", "check", "errors.py", "__init__.py"):
            raise ValueError(f"{path}: 'import tom...' cannot be renamed to {package}; use 'from tom... import'")
        new = _WALKER.sub(rf"startswith(\g<1>{package}.", _FROM_TOM.sub(rf"\g<1>from {package}\g<2>", text))
        if new != text:
            path.write_text(new, encoding="utf-8")


def _side(package: str) -> SimpleNamespace:
    """What a side offers: its Core, Frame, codec, and its check's ``freeze`` (None if it has none)."""
    core = importlib.import_module(f"{package}.core")
    frames = importlib.import_module(f"{package}.codec.frames")
    try:
        freeze = importlib.import_module(f"{package}.check.world").freeze
    except (ImportError, AttributeError):
        freeze = None
    return SimpleNamespace(package=package, Core=core.Core, Frame=frames.Frame, format=frames.format_frame,
                           parse=frames.parse_frame, freeze=freeze)


_sides: dict[str, SimpleNamespace] = {}


def side(package: str) -> SimpleNamespace:
    s = _sides.get(package)
    if s is None:
        s = _sides[package] = _side(package)
    return s


NEW = __name__.split(".")[0]


# -- values as plain data, and new values for the old core ------------------------------------------

_ATOMS = frozenset({str, int, float, bool, type(None)})


def _by_key(item: tuple) -> str:
    return repr(item[0])


def plain(value: Any, s: SimpleNamespace) -> Any:
    """``value`` as plain, comparable data: frames as their text, records as (name, (field, value)...),
    enums as their value, dicts and sets sorted (so two sides' objects compare by content)."""
    t = type(value)
    if t in _ATOMS:
        return value
    if t is tuple or t is list:
        if all(type(v) in _ATOMS for v in value):
            return tuple(value)
        return tuple([plain(v, s) for v in value])
    if t is dict:
        if all(type(k) is str and type(v) in _ATOMS for k, v in value.items()):
            return ("dict",) + tuple(sorted(value.items()))
        items = sorted(value.items(), key=_by_key)
        return ("dict",) + tuple([(plain(k, s), plain(v, s)) for k, v in items])
    if t is set or t is frozenset:
        if all(type(v) is str for v in value):
            return ("set",) + tuple(sorted(value))
        return ("set",) + tuple(sorted((plain(v, s) for v in value), key=repr))
    names = _FIELDS.get(t)
    if names is None:
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, s.Frame):
            return "FRAME " + s.format(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            names = _FIELDS[t] = tuple(f.name for f in dataclasses.fields(value))
        elif isinstance(value, MutableMapping) or t.__name__ == "mappingproxy":
            return plain(dict(value), s)
        elif t.__name__ == "LamportClock":
            return ("clock", value.time)
        else:
            return ("object", t.__name__)
    return (t.__name__,) + tuple([(n, plain(getattr(value, n), s)) for n in names])


_FIELDS: dict[type, tuple[str, ...]] = {}  # a record type (not a frame) -> its fields


def to_old(value: Any) -> Any:
    """A value of the new side as the old side takes it: frames formatted by the new codec and parsed
    by the old one; TOM records and enums rebuilt from the old package's class of the same name."""
    t = type(value)
    if value is None or t in (str, int, float, bool, bytes):
        return value
    if isinstance(value, new_frames.Frame):
        return side(OLD).parse(new_frames.format_frame(value))
    if t in (list, tuple, set, frozenset):
        return t(to_old(v) for v in value)
    if t is dict:
        return {to_old(k): to_old(v) for k, v in value.items()}
    if t.__module__.split(".")[0] == NEW and (isinstance(value, enum.Enum) or dataclasses.is_dataclass(value)):
        cls = _old_class(t)
        if isinstance(value, enum.Enum):
            return cls(value.value)
        return cls(**{f.name: to_old(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init})
    if t.__module__.split(".")[0] == NEW:
        raise TypeError(f"cannot hand a {t.__qualname__} to the old core")
    return value


def _old_class(t: type) -> type:
    module = importlib.import_module(OLD + t.__module__[len(NEW):])
    cls = getattr(module, t.__qualname__, None) or getattr(importlib.import_module(f"{OLD}.core"), t.__name__, None)
    if cls is None:
        raise TypeError(f"the old core has no {t.__qualname__}")
    return cls


# -- the paired core -----------------------------------------------------------------------------

_STATE = ("mode", "view", "delivered", "clock", "now", "no_quorum", "leaving", "suspected", "stats")
# (status() repeats some of them: compared twice, so that a status() that stops saying one is seen)
_QUERIES = ("backlog", "undelivered_own", "status")
_MISSING = "<missing>"


def _shown(value: Any) -> str:
    """A plain value (`plain`) as text: a record as ``Name(field=value, ...)``."""
    if isinstance(value, str):
        return value
    if (type(value) is tuple and value and type(value[0]) is str and value[0] not in ("dict", "set", "clock", "object")
            and all(type(p) is tuple and len(p) == 2 and type(p[0]) is str for p in value[1:])):
        return f"{value[0]}(" + ", ".join(f"{k}={_shown(v) if type(v) is tuple else repr(v)}" for k, v in value[1:]) + ")"
    return repr(value)


def _args(args: tuple, kwargs: dict) -> str:
    def one(v: Any) -> str:
        return repr(new_frames.format_frame(v)) if isinstance(v, new_frames.Frame) else repr(v)
    return ", ".join([one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()])


def _diff(label: str, old: Any, new: Any) -> list[str]:
    if old == new:
        return []
    if isinstance(old, list) and isinstance(new, list):
        lines = difflib.unified_diff([_shown(x) for x in old], [_shown(x) for x in new], "old", "new",
                                     lineterm="", n=3)
        return [f"  {label}:"] + [f"    {line}" for line in lines]
    return [f"  {label}:", f"    old: {_shown(old)}", f"    new: {_shown(new)}"]


def _outcome(call) -> tuple[Any, BaseException | None]:
    try:
        return call(), None
    except Exception as e:  # compared, then the new side's is raised again
        return None, e


class _Mirrored(MutableMapping):
    """A dict attribute of both cores (``last_heard``, ``stats``, ...): read from the new one, written
    to both, so that a caller poking at it (the check's world does) changes both alike."""

    __slots__ = ("old", "new")

    def __init__(self, old: dict | None, new: dict) -> None:
        self.old, self.new = old, new

    def __getitem__(self, key: Any) -> Any:
        return self.new[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.new[key] = value
        if self.old is not None:
            self.old[to_old(key)] = to_old(value)

    def __delitem__(self, key: Any) -> None:
        del self.new[key]
        if self.old is not None:
            self.old.pop(to_old(key), None)

    def __iter__(self) -> Iterator:
        return iter(self.new)

    def __len__(self) -> int:
        return len(self.new)


class _Part:
    """A part both cores hold (``detector``): its attributes read from the new core's, its dicts
    mirrored (`_Mirrored`). An old core from before the parts holds their attributes itself."""

    __slots__ = ("old", "new")

    def __init__(self, old: Any, new: Any) -> None:
        self.old, self.new = old, new

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.new, name)
        if type(value) is dict:
            old = getattr(self.old, name, None)
            return _Mirrored(old if type(old) is dict else None, value)
        return value


_PARTS = ("detector",)
"""The parts the check's world reaches into (`tom.check.world`: who was heard when)."""


def _forwarded(name: str):
    def call(self: "PairedCore", *args: Any, **kwargs: Any) -> Any:
        return self._call(name, args, kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``Core.{name}`` on both cores: the new one's result, once both compare."
    return call


class PairedCore:
    """An old and a new core fed the same calls; every ``ready`` compares them (`CoreMismatch`).

    Built like a `Core` (``PairedCore(...)``, ``PairedCore.joining(...)``) with the new side's
    arguments, it answers with the new side's values, so it stands in for a `Core` wherever one is
    driven. A call or attribute it does not know is forwarded: methods run on both and compare, dict
    attributes are mirrored (`_Mirrored`), anything else is read from the new core. Pickled, it is
    the two cores frozen each by its own tree's ``tom.check.world.freeze`` (canonical bytes)."""

    __slots__ = ("old", "new", "inputs")
    steps = 0  # ready() calls compared in this process (a run that compares none proved nothing)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._build("Core", args, kwargs)

    @classmethod
    def joining(cls, *args: Any, **kwargs: Any) -> "PairedCore":
        self = cls.__new__(cls)
        self._build("Core.joining", args, kwargs)
        return self

    def _build(self, what: str, args: tuple, kwargs: dict) -> None:
        object.__setattr__(self, "inputs", [f"{what}({_args(args, kwargs)})"])
        old_args, old_kwargs = to_old(args), to_old(kwargs)

        def make(core: Any, args: tuple, kwargs: dict) -> Any:
            return core.joining(*args, **kwargs) if what == "Core.joining" else core(*args, **kwargs)

        old, old_error = _outcome(lambda: make(side(OLD).Core, old_args, old_kwargs))
        new, new_error = _outcome(lambda: make(NewCore, args, kwargs))
        self._check_errors(what, old_error, new_error)
        if new_error is not None:
            raise new_error
        object.__setattr__(self, "old", old)
        object.__setattr__(self, "new", new)

    # -- what the shell calls: forwarded as called, compared (`_call`) ---------------------------
    receive = _forwarded("receive")
    broadcast = _forwarded("broadcast")
    tick = _forwarded("tick")
    leave = _forwarded("leave")
    connected = _forwarded("connected")
    disconnected = _forwarded("disconnected")
    status = _forwarded("status")
    backlog = _forwarded("backlog")
    undelivered_own = _forwarded("undelivered_own")

    def drop_caches(self) -> None:
        """Forget both cores' caches (`tom check`'s freeze): a core without `Core.drop_caches` (a
        revision before it) has its two caches, ``_fast`` and its order's ``_blocker``, reset by hand."""
        for core in (self.old, self.new):
            drop = getattr(core, "drop_caches", None)
            if drop is not None:
                drop()
                continue
            core._fast = None
            if getattr(core.order, "_blocker", None) is not None:
                core.order._blocker = None

    def ready(self) -> Any:
        """Both cores' `Ready`, compared (sends, deliveries, notices, alarms, then the public state);
        the new core's is returned."""
        old, old_error = _outcome(self.old.ready)
        new, new_error = _outcome(self.new.ready)
        self._check_errors("ready()", old_error, new_error)
        if new_error is not None:
            raise new_error
        o, n = side(OLD), side(NEW)
        lines = []
        for part, a, b in (("sends", self._sends(old, o), self._sends(new, n)),
                           ("deliveries", [plain(d, o) for d in old.deliveries], [plain(d, n) for d in new.deliveries]),
                           ("notices", [_notice(x, o) for x in old.notices], [_notice(x, n) for x in new.notices]),
                           ("alarms", [plain(a, o) for a in old.alarms], [plain(a, n) for a in new.alarms])):
            lines += _diff(part, a, b)
        state_old, state_new = _state(self.old, o), _state(self.new, n)
        for name in state_new:
            lines += _diff(name, state_old.get(name, _MISSING), state_new[name])
        PairedCore.steps += 1
        if lines:
            raise CoreMismatch(self._header("ready() handed out something else") + "\n".join(lines))
        self.inputs.clear()
        return new

    @staticmethod
    def _sends(ready: Any, s: SimpleNamespace) -> list[str]:
        return [f"{','.join(dests)} <- {s.format(frame)}" for dests, frame in ready.sends]

    # -- the rest: forwarded -----------------------------------------------------------------------
    def _call(self, name: str, args: tuple, kwargs: dict) -> Any:
        self.inputs.append(f"{name}({_args(args, kwargs)})")
        old_args, old_kwargs = to_old(args), to_old(kwargs)
        old, old_error = _outcome(lambda: getattr(self.old, name)(*old_args, **old_kwargs))
        new, new_error = _outcome(lambda: getattr(self.new, name)(*args, **kwargs))
        self._check_errors(f"{name}()", old_error, new_error)
        if new_error is not None:
            raise new_error
        a, b = plain(old, side(OLD)), plain(new, side(NEW))
        if a != b:
            raise CoreMismatch(self._header(f"{name}() returned something else") + "\n".join(_diff("returned", a, b)))
        return new

    def _check_errors(self, what: str, old: BaseException | None, new: BaseException | None) -> None:
        if (old is None) != (new is None) or (old is not None and type(old).__name__ != type(new).__name__):
            def shown(e: BaseException | None) -> str:
                return "returned normally" if e is None else f"raised {type(e).__name__}: {e}"
            raise CoreMismatch(self._header(f"{what} raised differently")
                               + f"  old: {shown(old)}\n  new: {shown(new)}")

    def _header(self, what: str) -> str:
        new = getattr(self, "new", None)
        me = getattr(new, "me", "?")
        steps = "\n".join(f"    {line}" for line in self.inputs) or "    (none)"
        return f"core mismatch at {me}: {what}\n  inputs since the last ready():\n{steps}\n"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in PairedCore.__slots__:
            raise AttributeError(name)
        value = getattr(self.new, name)
        if name in _PARTS:
            return _Part(getattr(self.old, name, self.old), value)
        if callable(value) and not isinstance(value, type):
            return lambda *args, **kwargs: self._call(name, args, kwargs)
        if type(value) is dict:
            old = getattr(self.old, name, None)
            return _Mirrored(old if type(old) is dict else None, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in PairedCore.__slots__:
            object.__setattr__(self, name, value)
            return
        if hasattr(self.old, name):
            setattr(self.old, name, to_old(value))
        if hasattr(self.new, name) or not hasattr(self.old, name):
            setattr(self.new, name, value)

    def __reduce__(self) -> tuple:
        return (_thaw_pair, (_frozen(side(OLD), self.old), _frozen(side(NEW), self.new)))


def _frozen(s: SimpleNamespace, core: Any) -> bytes:
    return s.freeze(core)[0] if s.freeze is not None else pickle.dumps(core, 5)


def _thaw_pair(old: bytes, new: bytes) -> PairedCore:
    pair = PairedCore.__new__(PairedCore)
    object.__setattr__(pair, "old", pickle.loads(old))
    object.__setattr__(pair, "new", pickle.loads(new))
    object.__setattr__(pair, "inputs", [])
    return pair


def _notice(notice: Any, s: SimpleNamespace) -> Any:
    """A notice as today's string: a typed notice's ``tag`` is it."""
    return plain(getattr(notice, "tag", notice), s)


def _state(core: Any, s: SimpleNamespace) -> dict[str, Any]:
    """The public state of ``core``, plain (``status()`` field by field)."""
    out: dict[str, Any] = {}
    for name in _STATE:
        value = getattr(core, name, _MISSING)
        if name == "suspected" and value is _MISSING and hasattr(core, "detector"):
            value = core.detector.suspected  # (a property of `Core` before it held its parts openly)
        if name == "clock":
            value = getattr(value, "time", value)
        out[name] = plain(value, s)
    for name in _QUERIES:
        value, error = _outcome(getattr(core, name))
        if error is not None:
            out[f"{name}()"] = f"raised {type(error).__name__}"
        elif name == "status" and dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                out[f"status().{f.name}"] = plain(getattr(value, f.name), s)
        else:
            out[f"{name}()"] = plain(value, s)
    return out


# -- check: the table's configurations, old alone, new alone, paired ------------------------------

@dataclasses.dataclass
class Row:
    order: str
    name: str
    old: Any = None  # the old revision's search Result
    new: Any = None
    paired: Any = None
    steps: int = 0  # core steps the paired run compared
    problems: list[str] = dataclasses.field(default_factory=list)  # differences
    notes: list[str] = dataclasses.field(default_factory=list)  # what was not compared, and why
    mismatch: str = ""  # a CoreMismatch's message
    seconds: float = 0.0


def _clear_caches(*modules: ModuleType) -> None:
    for module in modules:
        cache = getattr(module, "_cache", None)
        if isinstance(cache, dict):
            cache.clear()


def _verdict(result: Any) -> str:
    if result is None:
        return "-"
    return "no violation" if result.found is None else f"VIOLATION: {result.found.violation.name}"


def _how(result: Any) -> str:
    return "exhaustive" if result.exhaustive else f"bounded ({result.bound})"


def compare_config(order: str, name: str, kwargs: dict, seconds: float) -> Row:
    """One configuration: the old revision's own search on the old core, bounded by ``seconds``; the
    working tree's on the new core and on paired cores, to the same number of states when the first
    was bounded (each capped at a multiple of ``seconds``, said if hit)."""
    from . import explore, world

    old_check = SimpleNamespace(explore=importlib.import_module(f"{OLD}.check.explore"),
                                world=importlib.import_module(f"{OLD}.check.world"))
    row = Row(order, name)
    started = time.perf_counter()

    def run(label: str, search, config_of, **bounds) -> Any:
        try:
            return search(config_of(order=order, **kwargs), "dfs", **bounds)
        except CoreMismatch as e:
            row.mismatch = str(e)
        except Exception as e:  # a search that breaks is a difference, not the end of the table
            row.problems.append(f"the {label} search raised {type(e).__name__}: {e}")
        return None

    _clear_caches(old_check.world, world)
    row.old = run("old", old_check.explore.search, old_check.world.Config, time_limit=seconds)
    if row.old is None:
        return row
    cap = None if row.old.exhaustive or row.old.found is not None else row.old.states
    _clear_caches(old_check.world)
    row.new = run("new", explore.search, world.Config, time_limit=2 * seconds, max_states=cap)
    _clear_caches(world)
    original = world.Core
    world.Core = PairedCore  # type: ignore[misc, assignment]
    PairedCore.steps = 0
    try:
        row.paired = run("paired", explore.search, world.Config, time_limit=6 * seconds, max_states=cap)
    finally:
        world.Core = original  # type: ignore[misc]
        row.steps = PairedCore.steps
        _clear_caches(world)
    row.seconds = time.perf_counter() - started
    _judge(row, cap)
    return row


def _judge(row: Row, cap: int | None) -> None:
    """What in ``row`` shows a difference (``row.problems``)."""
    old, new, paired = row.old, row.new, row.paired
    if row.mismatch:
        row.problems.append("paired cores differ")
    if row.steps == 0:
        row.problems.append("no core step was compared (the world did not build its cores from world.Core)")
    fields = ("states",) if cap is not None else ("states", "transitions", "depth", "terminal", "tick_bounded")
    for label, other in (("new", new), ("paired", paired)):
        if other is None:
            continue  # (it raised: said already)
        if cap is not None and other.states < cap and "time limit" in other.bound:
            row.notes.append(f"{label} hit its time cap at {other.states:,} states: counts not compared")
            continue
        for f in fields:
            if getattr(old, f) != getattr(other, f):
                row.problems.append(f"{f}: old {getattr(old, f):,}, {label} {getattr(other, f):,}")
        if _verdict(old) != _verdict(other):
            row.problems.append(f"verdict: old {_verdict(old)}, {label} {_verdict(other)}")
        elif old.found is not None and [str(s) for s in old.found.steps] != [str(s) for s in other.found.steps]:
            row.problems.append(f"{label} found the violation along another path")


def _rate(result: Any) -> str:
    return "-" if result is None else f"{result.rate:,.0f}"


def _states(result: Any) -> str:
    return "-" if result is None else f"{result.states:,}"


def print_check_header(against: str, seconds: float) -> None:
    print(f"# core-diff check: old = {against} (tom_old.check), new = working tree {REPO}; "
          f"{seconds:g} s per configuration for the old search, load {os.getloadavg()[0]:.2f}\n", flush=True)
    print("| order | configuration | states old | new | paired | states/s old | new | paired "
          "| search | verdict | steps compared |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |", flush=True)


def print_row(row: Row) -> None:
    how = "-" if row.old is None else _how(row.old)
    if row.old is not None and not row.old.exhaustive and row.old.found is None:
        how = f"bounded (old: {row.old.bound}; new, paired: to the same states)"
    verdict = f"MISMATCH: {'; '.join(row.problems)}" if row.problems else f"identical, {_verdict(row.old)}"
    if row.notes:
        verdict += f" ({'; '.join(row.notes)})"
    print(f"| {row.order} | {row.name} | {_states(row.old)} | {_states(row.new)} | {_states(row.paired)} | "
          f"{_rate(row.old)} | {_rate(row.new)} | {_rate(row.paired)} | {how} | {verdict} | {row.steps:,} |",
          flush=True)


def configurations(rows: list[int] | None, extra: list[str]) -> list[tuple[str, dict]]:
    """The table's configurations (`tom.check.table.CONFIGS`, those numbered in ``rows`` if given) and
    each ``extra`` one, written as ``tom check`` options (order aside)."""
    from . import cli, table

    out: list[tuple[str, dict]] = [(n, dict(kw)) for i, (n, kw) in enumerate(table.CONFIGS, 1)  # type: ignore[call-overload]
                                   if not rows or i in rows]
    for text in extra:
        args = cli.build_parser().parse_args(shlex.split(text))
        config = cli.config_of(args)
        kwargs = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name != "order"}
        out.append((config.describe().partition(", ")[2], kwargs))
    return out


def check_main(args: argparse.Namespace) -> int:
    try:
        load_old(args.against)
    except ValueError as e:
        print(f"core-diff: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    from ..core import ORDERS

    orders = args.only or list(ORDERS)
    print_check_header(args.against, args.seconds)
    started = time.perf_counter()
    rows = []
    for order in orders:
        for name, kwargs in configurations(args.rows, args.config):
            row = compare_config(order, name, kwargs, args.seconds)
            print_row(row)
            rows.append(row)
    bad = [r for r in rows if r.problems]
    for r in bad:
        if r.mismatch:
            print(f"\n## {r.order}, {r.name}\n\n```\n{r.mismatch}\n```")
    steps = sum(r.steps for r in rows)
    print(f"\n{len(rows)} configurations in {time.perf_counter() - started:.0f} s, {steps:,} core steps compared: "
          + (f"MISMATCH in {len(bad)}" if bad else "old and new identical"))
    return EXIT_MISMATCH if bad else EXIT_OK


# -- sweep: the tests' randomized sweeps, per tree ----------------------------------------------

SWEEP_WORKER = Path(__file__).with_name("sweeps.py")


def run_sweeps(trees: list[Path], multiplier: float, sweeps: str, orders: str, jobs: int,
               paired: str = "") -> list[dict]:
    """Each tree's sweeps in a process of its own (`tom.check.sweeps`), ``jobs`` at a time."""
    tmp = Path(tempfile.mkdtemp(prefix="core-diff-sweeps-"))
    atexit.register(shutil.rmtree, tmp, True)
    outs = [tmp / f"{i}.json" for i in range(len(trees))]
    waiting = list(zip(trees, outs))
    running: list[tuple[Path, subprocess.Popen]] = []
    failed: list[str] = []
    while waiting or running:
        while waiting and len(running) < jobs:
            tree, out = waiting.pop(0)
            cmd = [sys.executable, "-P", str(SWEEP_WORKER), str(tree), str(out), "--multiplier", str(multiplier),
                   "--sweeps", sweeps, "--orders", orders] + (["--paired", paired] if paired else [])
            running.append((tree, subprocess.Popen(cmd, cwd=tree)))
        tree, proc = running.pop(0)
        if proc.wait() != 0:
            failed.append(f"{tree}: the sweep process exited with {proc.returncode}")
    if failed:
        raise RuntimeError("; ".join(failed))
    return [json.loads(out.read_text(encoding="utf-8")) for out in outs]


def _seed_order(key: str) -> tuple:
    """``12`` before ``100``; ``dynamic:9`` by its kind, then its number."""
    m = re.match(r"(?:([a-z-]+):)?(\d+)", key)
    return (m.group(1) or "", int(m.group(2)), key) if m else ("", 0, key)


def _seeds(keys: list[str]) -> str:
    return " ".join(sorted(keys, key=_seed_order)) if keys else "-"


def sweep_report(runs: list[dict]) -> int:
    """The failing seeds of each tree per sweep and order, and (two trees or more) the seeds whose
    outcome differs from the first tree's: a failure, or what the peers delivered."""
    names = [Path(r["tree"]).name or r["tree"] for r in runs]
    known = {(o, str(s)) for r in runs for o, s, _ in r["known"]}
    head = " | ".join(f"failing in {n}" for n in names)
    print(f"\n| sweep | order | seeds | {head} |" + (" differ (failure or deliveries) |" if len(runs) > 1 else ""))
    print("| --- | --- | ---: |" + " --- |" * len(runs) + (" --- |" if len(runs) > 1 else ""))
    differing = 0
    first = runs[0]["sweeps"]
    for sweep, per_order in first.items():
        for order, base in per_order.items():
            cells, diff = [], []
            for r in runs:
                mine = r["sweeps"].get(sweep, {}).get(order)
                if mine is None:
                    cells.append("(not run)")
                    diff.append("(not run)")
                    continue
                bad = [k for k, v in mine["results"].items() if "failed" in v]
                cells.append(_seeds([k + ("*" if (order, k.rpartition(":")[2]) in known and sweep in ("founding", "regressions")
                                          and (sweep == "founding" or k.startswith("founding:")) else "")
                                     for k in bad]))
                if r is not runs[0]:
                    keys = set(base["results"]) | set(mine["results"])
                    diff += [k for k in keys if base["results"].get(k) != mine["results"].get(k)]
            seeds = max(r["sweeps"].get(sweep, {}).get(order, {}).get("seeds", 0) for r in runs)
            line = f"| {sweep} | {order} | {seeds:,} | " + " | ".join(cells) + " |"
            if len(runs) > 1:
                differing += len(diff)
                line += f" {_seeds(sorted(set(diff)))} |"
            print(line)
    print("\n(* a known limit: test_dynamic.FOUNDING_KNOWN, an xfail)")
    for r, name in zip(runs, names):
        total = sum(v["seconds"] for per in r["sweeps"].values() for v in per.values())
        n = sum(v["seeds"] for per in r["sweeps"].values() for v in per.values())
        print(f"{name}: {n:,} seeds in {total:.0f} s ({r['tree']})")
    mismatches = [(sweep, order, key, v["mismatch"]) for r in runs for sweep, per in r["sweeps"].items()
                  for order, res in per.items() for key, v in res["results"].items() if "mismatch" in v]
    for sweep, order, key, text in mismatches[:3]:
        print(f"\n## {sweep} {order} seed {key}\n\n```\n{text}\n```")
    if runs[0].get("paired"):
        print(("MISMATCH: " if mismatches else "identical: ")
              + f"{len(mismatches)} seed(s) where the paired cores differ (against {runs[0]['paired']})")
    if len(runs) < 2:
        return EXIT_MISMATCH if mismatches else EXIT_OK
    if differing or mismatches:
        print(f"MISMATCH: {differing} seed(s) fail differently or deliver differently between the trees")
        return EXIT_MISMATCH
    print("identical: the same failing seeds, and the same deliveries in every seed")
    return EXIT_OK


def sweep_main(args: argparse.Namespace) -> int:
    trees = [Path(t).resolve() for t in args.tree]
    for t in trees:
        if not (t / "tom" / "__init__.py").is_file() or not any((t / "tests" / f).is_file()
                                                                 for f in ("simnet.py", "dynsim.py")):
            print(f"core-diff: error: {t} is not a TOM tree (tom/ and tests/simnet.py or tests/dynsim.py)",
                  file=sys.stderr)
            return EXIT_USAGE
    started = time.perf_counter()
    print(f"# core-diff sweep: multiplier {args.multiplier:g}, trees {', '.join(map(str, trees))}, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    try:
        runs = run_sweeps(trees, args.multiplier, args.sweeps, ",".join(args.only or []), args.jobs, args.paired or "")
    except RuntimeError as e:
        print(f"core-diff: error: {e}", file=sys.stderr)
        return EXIT_MISMATCH
    code = sweep_report(runs)
    print(f"({time.perf_counter() - started:.0f} s in all)")
    return code


# -- the command line ----------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    from ..core import ORDERS

    p = argparse.ArgumentParser(prog="scripts/core-diff", description=(
        "Prove that the working tree's core behaves as an older revision's. Exit status: 0 identical, "
        "1 a mismatch, 2 a usage error."))
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check", help="explore tom check's configurations with old, new and paired cores",
                       description="Each configuration of scripts/check's table (and each --config): the old "
                                   "revision's own search on the old core, the working tree's on the new core, "
                                   "and the working tree's on paired cores comparing every step.")
    c.add_argument("--against", required=True, metavar="REV", help="git revision of the old core (e.g. main)")
    c.add_argument("--seconds", type=float, default=600.0,
                   help="time bound of the old search per configuration, as scripts/check's (default 600); "
                        "the new and paired searches go to the same number of states (capped at 2x and 6x)")
    c.add_argument("--only", choices=ORDERS, action="append", help="this order only (repeatable)")
    c.add_argument("--rows", type=int, nargs="*", help="the table's rows (1-based) to run (default all)")
    c.add_argument("--config", action="append", default=[], metavar="'TOM CHECK OPTIONS'",
                   help="one more configuration, as tom check's options (e.g. '--peers 2 --found')")
    s = sub.add_parser("sweep", help="run the tests' randomized sweeps seed by seed in each tree",
                       description="The dynamic, no-quorum, partition, edge, founding and simulation sweeps of "
                                   "tests/test_dynamic.py and tests/test_simulation.py, and the seeds they name, "
                                   "seed by seed in each --tree; the failing seeds of each, and the seeds that "
                                   "differ between trees.")
    s.add_argument("--tree", action="append", required=True, metavar="PATH",
                   help="a TOM tree (a worktree of the old revision, '.'); give two to compare")
    s.add_argument("--multiplier", type=float, default=1.0,
                   help="seeds as a multiple of the tests' counts (TOM_DYN_SEEDS and siblings; default 1)")
    s.add_argument("--sweeps", default="all", help="comma-separated, of dynamic, no-quorum, partition, edge, "
                   "founding, simulation, regressions (the worker's list: tom/check/sweeps.py), or all")
    s.add_argument("--only", choices=ORDERS, action="append", help="this order only (repeatable)")
    s.add_argument("--jobs", type=int, default=1, help="trees swept at once (default 1)")
    s.add_argument("--paired", metavar="REV", help="also compare, at every step of every seed, each tree's core "
                   "with git revision REV's (paired cores; the tree must hold tom/check/differential.py)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.mode == "check":
        return check_main(args)
    return sweep_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
