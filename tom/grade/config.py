"""A class folder: one folder per student, each with an optional ``tom-grade.toml``.

``tom-grade.toml`` (every key optional)::

    run = "python3 {dir}/tool.py {neighbors} {output} {port}"   # replaces --run
    build = "javac -d {dir}/bin {dir}/*.java"                    # replaces --build ("" = no build)
    from = "localhost/127.0.0.1:{port}"   # the from the tool writes, when it does not print it
    [prompts]                             # driver rules: regex = answer (tom.grade.prompts)
    "(?i)which interface" = "{loopback}"
    [menu]                                # the menu's keys
    send = "1"
    status = "2"
    quit = "3"
    [output]
    line_regex = '^(?P<clock>\\d+) (?P<sender>\\S+) (?P<text>.*)$'

Placeholders in run and build: ``{dir}`` (the student's folder, absolute), ``{neighbors}``,
``{output}``, ``{port}``; each is put in shell-quoted.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .prompts import MenuKeys, PromptRule, rules_with
from .toolfile import DEFAULT_LINE, check_line_regex

TOML = "tom-grade.toml"
_KEYS = {"run", "build", "from", "prompts", "menu", "output"}


@dataclass(frozen=True)
class Submission:
    name: str
    folder: Path
    run: str
    build: str  # "" = nothing to build
    rules: tuple[PromptRule, ...]
    keys: MenuKeys
    line_regex: str
    origin: str | None  # a from template with {port}, or None: learn it from the tool


def fill(template: str, **values: str | int | Path) -> str:
    """``template`` with ``{name}`` replaced by the shell-quoted value (other braces left alone)."""
    out = template
    for name, value in values.items():
        out = out.replace("{" + name + "}", shlex.quote(str(value)))
    return out


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror or e}") from None


def load_submission(folder: Path, run: str | None, build: str | None) -> Submission:
    data = _read_toml(folder / TOML) if (folder / TOML).is_file() else {}
    where = folder / TOML
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(_KEYS))})")
    for key in ("run", "build", "from"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{where}: {key} must be a string")
    command = data.get("run", run)
    if not command:
        raise ConfigError(f"no run command for {folder.name}: give --run or run = \"...\" in its {TOML}")
    prompts = data.get("prompts", {})
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise ConfigError(f"{where}: [prompts] must map regular expressions to answer strings")
    try:
        rules = rules_with(prompts)
    except (re.error, ValueError) as e:
        raise ConfigError(f"{where}: [prompts]: {e}") from None
    menu = data.get("menu", {})
    if not isinstance(menu, dict) or set(menu) - {"send", "status", "quit"} or \
            not all(isinstance(v, str) and v for v in menu.values()):
        raise ConfigError(f"{where}: [menu] takes send, status and quit, each a non-empty string")
    output = data.get("output", {})
    line_regex = output.get("line_regex", DEFAULT_LINE) if isinstance(output, dict) else None
    if not isinstance(line_regex, str) or (isinstance(output, dict) and set(output) - {"line_regex"}):
        raise ConfigError(f"{where}: [output] takes line_regex, a string")
    try:
        check_line_regex(line_regex)
    except (re.error, ValueError) as e:
        raise ConfigError(f"{where}: [output] line_regex: {e}") from None
    origin = data.get("from")
    if origin is not None and "{port}" not in origin:
        raise ConfigError(f"{where}: from must hold {{port}} (e.g. \"localhost/127.0.0.1:{{port}}\")")
    return Submission(folder.name, folder.resolve(), command, data.get("build", build or ""), rules,
                      MenuKeys(**menu), line_regex, origin)


def load_class(folder: Path, run: str | None, build: str | None) -> list[Submission]:
    """Every student's folder under ``folder`` (sorted, hidden ones skipped); ConfigError in one line."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder (expected a folder with one folder per student)")
    students = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    if not students:
        raise ConfigError(f"no submissions in {folder}: expected one folder per student")
    return [load_submission(p, run, build) for p in students]
