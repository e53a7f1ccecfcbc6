"""The shape of the core, held against the code: its import rules, no import cycle, its dispatch
table, small parts, and strict types (docs/design/architecture.md)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tom.codec.frames import Frame, Hello
from tom.core import HANDLERS, Core, Mode
from tom.core.dispatch import IGNORE, ORDERED, TABLE, Admit
from tom.errors import FrameError

ROOT = Path(__file__).resolve().parent.parent
CORE_FILES = sorted((ROOT / "tom" / "core").glob("*.py"))


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The modules ``path`` imports, relative imports resolved (``from . import x`` names ``pkg.x``)."""
    tree = ast.parse(path.read_text())
    package = module_of(path) if path.name == "__init__.py" else module_of(path).rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{alias.name}" for alias in node.names)
    return out


def tom_modules() -> dict[str, Path]:
    return {module_of(p): p for p in (ROOT / "tom").rglob("*.py")}


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_the_core_imports_no_io_clock_randomness_or_screen(path):
    banned = ("tom.net", "tom.peer", "tom.web", "tom.tools", "tom.check", "trio", "socket", "time",
              "random", "prompt_toolkit", "rich", "asyncio", "threading", "os", "sys")
    bad = sorted(m for m in imports(path) if any(m == b or m.startswith(b + ".") for b in banned))
    assert not bad, f"{path.name} imports {bad}"


def test_the_codec_stands_below_the_core_and_the_verifier_reads_files_only():
    for path in (ROOT / "tom" / "codec").glob("*.py"):
        assert not [m for m in imports(path) if m.startswith("tom.core")], path
    for path in (ROOT / "analysis").rglob("*.py"):
        assert not [m for m in imports(path) if m == "tom" or m.startswith("tom.")], path
    for path in (ROOT / "tom" / "net").glob("*.py"):
        assert not [m for m in imports(path) if m.startswith("tom.web")], path


def test_no_import_cycle_in_tom():
    modules = tom_modules()
    graph = {name: {m for m in imports(path) if m in modules and m != name} for name, path in modules.items()}
    # a package's __init__ re-exports its modules: an edge into a package is an edge into its face
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1 and not (node.startswith(nxt + ".") or nxt.startswith(node + ".")):
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_no_class_in_the_core_but_the_orchestrator_is_over_400_lines():
    for path in CORE_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name != "Core":
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 400, f"{path.name}: {node.name} has {lines} lines"


def test_the_orchestrator_is_at_most_700_lines():
    """`Core` applies what its parts decide (docs/design/architecture.md, "Inside the core"): the decisions
    live in the parts, so the class that holds them stays small."""
    tree = ast.parse((ROOT / "tom" / "core" / "group.py").read_text())
    core = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Core")
    lines = core.end_lineno - core.lineno + 1
    assert lines <= 700, f"group.py: Core has {lines} lines"


def test_the_parts_are_held_not_inherited():
    assert Core.__bases__ == (object,)
    core = Core("127.0.0.1:5000", ["127.0.0.1:5000", "127.0.0.1:5001"])
    for name in ("traffic", "out", "peers", "detector", "change", "founding", "divergence"):
        part = getattr(core, name)
        assert not isinstance(part, Core)
        assert not any(value is core for value in (getattr(part, s, None) for s in getattr(part, "__slots__", ())))


def test_every_row_of_the_dispatch_table_names_core_methods():
    from tom.core.group import BESIDE

    for key, row in TABLE.items():
        for kind, entry in row.items():
            name = entry.name if isinstance(entry, Admit) else entry
            if name in BESIDE:  # a function beside Core, named without the leading _ of a method
                assert not name.startswith("_") and not isinstance(entry, Admit)
                continue
            assert callable(getattr(Core, name, None)), f"{key} {kind.__name__}: no Core.{name}"
    assert set(HANDLERS) == set(TABLE)
    in_a_view = TABLE[(False, Mode.NORMAL)]
    assert all(isinstance(in_a_view[kind], Admit) for kind in ORDERED)
    assert all(TABLE[(False, mode)] for mode in Mode)  # every mode of a dynamic peer has its row
    assert IGNORE == "_ignore"


def test_a_frame_kind_no_mode_takes_is_refused_in_one_line():
    core = Core("127.0.0.1:5000", ["127.0.0.1:5000", "127.0.0.1:5001"])
    with pytest.raises(FrameError, match="unexpected Hello from 127.0.0.1:5001"):
        core.receive("127.0.0.1:5001", Hello("127.0.0.1:5001", 1))
    assert issubclass(Hello, Frame)


def test_strict_types_on_the_core_and_the_frames():
    if shutil.which("mypy", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mypy is not installed in this environment (it is in the test extras)")
    paths = ["tom/core", "tom/codec/frames.py"]
    ignores = sum(p.read_text().count("type: ignore") for p in CORE_FILES + [ROOT / "tom/codec/frames.py"])
    # (6 of them: `trusted_message`'s direct stores into a frozen message, what the compiled build is for)
    assert ignores <= 7, f"{ignores} type: ignore in the core and the frames"
    # (modules the core imports only for type checkers, e.g. the library names of tom/__init__.py, are
    # followed silently: their own strictness is not this test's)
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent",
                          *paths], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_order_implements_the_whole_order_interface():
    """`tom.core.ordering.Order` is the interface as a base class (so the compiled core calls an order
    through its vtable): its methods that only raise NotImplementedError must each be overridden by
    every order a group can run, so none is ever reached."""
    import ast

    from tom.core.order import ORDER_CLASSES

    tree = ast.parse((ROOT / "tom/core/ordering.py").read_text())
    (base,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Order"]
    abstract = [f.name for f in base.body if isinstance(f, ast.FunctionDef)
                and any(isinstance(s, ast.Raise) and "NotImplementedError" in ast.unparse(s) for s in f.body)]
    assert len(abstract) >= 19
    for order, cls in ORDER_CLASSES.items():
        missing = [name for name in abstract if name not in vars(cls)]
        assert not missing, f"the {order} order leaves {missing} to the base class"
