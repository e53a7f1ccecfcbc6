"""The fenced shell blocks of the README and docs/, as tests/test_docs_commands.py runs them.

A block is shell when its info string is ``sh``, ``bash``, ``shell`` or ``console``. An unlabeled fence
holds output, a diagram or a frame's text; one whose first line starts with a command (see
:func:`looks_like_shell`) is a mistake the test names ("label it bash"), so that no command hides
from the run. In a ``console`` block only ``$ `` lines are commands (the rest is their output).

Markers, HTML comments the page does not show:

* before the fence, ``<!-- not run: REASON -->`` (REASON one of :data:`REASONS`, optionally followed
  by ``: why``): the block is not run here; its commands are still parsed and their flags checked;
* after the fence, any of: ``<!-- expect: TEXT -->`` (TEXT is in the block's output),
  ``<!-- expect-re: REGEX -->`` (REGEX matches it), ``<!-- expect-file: PATH -->`` (the block wrote
  PATH, relative to the folder it ran in), ``<!-- until: TEXT -->`` (the block runs until stopped,
  like a server: it is stopped once TEXT is in its output, and TEXT must come).
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SHELL_INFOS = frozenset({"sh", "bash", "shell", "console"})
REASONS = ("needs root", "a cluster", "a terminal", "minutes")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*([a-z-]+(?: [a-z]+)?):\s*(.*?)\s*-->\s*$")
COMMANDS = ("tom", "scripts/", "./scripts/", "sudo", "curl", "python", ".venv/", "git", "spark-submit", "pip")


@dataclass
class Block:
    path: str  # relative to the repo root
    line: int  # the opening fence's line, from 1
    info: str
    body: list[str]
    not_run: str | None = None  # the reason, when marked
    expects: list[str] = field(default_factory=list)
    expect_res: list[str] = field(default_factory=list)
    expect_files: list[str] = field(default_factory=list)
    until: str | None = None

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def shell(self) -> bool:
        return self.info in SHELL_INFOS

    def script(self) -> str:
        """What runs: the block as written (in a console block, its ``$ `` lines without the prompt)."""
        if self.info != "console":
            return "\n".join(self.body) + "\n"
        return "".join(line.split("$ ", 1)[1] + "\n" for line in self.body if line.lstrip().startswith("$ "))


def looks_like_shell(body: list[str]) -> bool:
    """Whether an unlabeled fence holds commands: its first line that is not blank or a comment starts
    with one of :data:`COMMANDS` or an environment assignment."""
    for line in body:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        return text.startswith(COMMANDS) or re.match(r"^[A-Z_][A-Z0-9_]*=\S", text) is not None
    return False


def doc_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def parse(root: Path, path: Path) -> list[Block]:
    """Every fenced block of one page, with its markers."""
    lines = path.read_text().split("\n")
    rel = str(path.relative_to(root))
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        block = Block(rel, i + 1, info, lines[i + 1:j])
        k = i - 1  # markers before the fence (blank lines between allowed)
        while k >= 0 and (not lines[k].strip() or MARKER.match(lines[k])):
            mk = MARKER.match(lines[k])
            if mk and mk.group(1) == "not run":
                block.not_run = mk.group(2)
            k -= 1
        k = j + 1  # markers after the fence
        while k < len(lines) and (not lines[k].strip() or MARKER.match(lines[k])):
            mk = MARKER.match(lines[k])
            if mk:
                kind, value = mk.groups()
                if kind == "expect":
                    block.expects.append(value)
                elif kind == "expect-re":
                    block.expect_res.append(value)
                elif kind == "expect-file":
                    block.expect_files.append(value)
                elif kind == "until":
                    block.until = value
            k += 1
        blocks.append(block)
        i = j + 1
    return blocks


def collect(root: Path) -> list[Block]:
    return [b for page in doc_files(root) for b in parse(root, page)]


def reason_of(marker: str) -> str:
    """The closed-list reason of a ``not run`` marker (what comes before an optional ``: why``)."""
    return marker.split(":", 1)[0].strip()


# --- the commands of a block, and their flags --------------------------------------------------------

OPERATORS = {";", "&&", "||", "|", "&", "(", ")", "|&", ";;"}
REDIRECTS = {"<", ">", ">>", "2>", "&>", "<<", "<<<", ">&", "<&"}


def commands(block: Block) -> list[tuple[int, list[str]]]:
    """``(line in the page, argv)`` of each simple command of the block, comments and prompts gone,
    continuation lines joined, environment assignments and ``sudo`` dropped, redirections removed."""
    out: list[tuple[int, list[str]]] = []
    logical: list[tuple[int, str]] = []
    pending, start = "", 0
    for n, raw in enumerate(block.body, block.line + 1):
        text = raw
        if block.info == "console":
            if not text.lstrip().startswith("$ "):
                continue
            text = text.split("$ ", 1)[1]
        if not pending:
            start = n
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        logical.append((start, pending + text))
        pending = ""
    if pending:
        logical.append((start, pending))
    for n, text in logical:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError:  # an unclosed quote: the whole line as one argv, for the flag check
            tokens = text.split()
        argv: list[str] = []
        skip_next = False
        for tok in [*tokens, ";"]:
            if skip_next:
                skip_next = False
                continue
            if tok in REDIRECTS or re.fullmatch(r"\d?[<>]+&?", tok):
                skip_next = True
                continue
            if tok in OPERATORS or set(tok) <= set(";&|()"):
                while argv and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]) or argv[0] == "sudo"):
                    argv.pop(0)
                if argv:
                    out.append((n, argv))
                argv = []
                continue
            argv.append(tok)
    return out


def flags_of(argv: list[str]) -> list[str]:
    """The long options a command line names (``--x=1`` as ``--x``)."""
    return [a.split("=", 1)[0] for a in argv if re.fullmatch(r"--[A-Za-z0-9][\w-]*(=.*)?", a)]


def help_command(argv: list[str], python: str) -> tuple[list[str], list[str]] | None:
    """``(the command that prints the parser's help, the arguments checked against it)`` for one of TOM's
    own commands, or None for a program that is not TOM's (curl, git, grep, tmux, ...)."""
    prog = argv[0]
    if prog == "tom" and len(argv) > 1 and not argv[1].startswith("-"):
        return [python, "-m", "tom.cli", argv[1], "--help"], argv[2:]
    if prog == "tom":
        return [python, "-m", "tom.cli", "--help"], argv[1:]
    if prog.startswith(("scripts/", "./scripts/")):
        name = prog.rsplit("/", 1)[1]
        if name in ("launch", "demo"):  # demo hands every option to the launcher
            return [python, "-m", "tom.tools.launch", "--help"], argv[1:]
        if name == "test":  # its arguments go to pytest
            return [python, "-m", "pytest", "--help"], argv[1:]
        return [prog.removeprefix("./"), "--help"], argv[1:]
    if os.path.basename(prog) in ("python", "python3") and len(argv) > 2 and argv[1] == "-m":
        module = argv[2]
        if module.split(".")[0] in ("tom", "analysis", "benchmarks", "pytest"):
            return [python, "-m", module, "--help"], argv[3:]
        return None
    if prog == "spark-submit":  # its own options, then the Python job's (analysis/verify.py) after it
        return ["spark-submit", "--help"], argv[1:]
    return None


def job_of_spark_submit(argv: list[str]) -> tuple[list[str], list[str]]:
    """``(spark-submit's own arguments, the job's: its .py file and what follows)``."""
    for i, a in enumerate(argv[1:], 1):
        if a.endswith(".py"):
            return argv[1:i], argv[i:]
    return argv[1:], []


@functools.lru_cache(maxsize=None)
def _help_text(cmd: tuple[str, ...], cwd: str, env_items: tuple[tuple[str, str], ...]) -> str:
    done = subprocess.run(list(cmd), cwd=cwd, env=dict(env_items), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def subcommands(text: str) -> set[str]:
    """The subcommands an argparse help names (``{peer,keys,...}``)."""
    found: set[str] = set()
    for group in re.findall(r"\{([\w,-]+)\}", text):
        found.update(group.split(","))
    return found


def known_flags(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[A-Za-z0-9][\w-]*", text))


def check_flags(block: Block, cwd: Path, env: dict[str, str]) -> list[str]:
    """One line per flag the block names that its command's parser lacks: ``page:line: CMD: --flag``."""
    problems = []
    items = tuple(sorted(env.items()))
    python = sys.executable
    for n, argv in commands(block):
        found = help_command(argv, python)
        if found is None:
            continue
        cmd, args = found
        if not flags_of(args):  # nothing to check (and a script like setup-venv has no --help)
            continue
        jobs: list[tuple[list[str], list[str]]] = []
        if argv[0] == "spark-submit":
            own, job = job_of_spark_submit(argv)
            jobs.append((cmd, own))
            if job:
                jobs.append(([python, job[0], "--help"], job[1:]))
        else:
            jobs.append((cmd, args))
        for help_cmd, checked in jobs:
            text = _help_text(tuple(help_cmd), str(cwd), items)
            words = [a for a in checked if not a.startswith("-")]
            if words and words[0] in subcommands(text) and help_cmd[-1] == "--help":
                help_cmd = [*help_cmd[:-1], words[0], "--help"]
                text = _help_text(tuple(help_cmd), str(cwd), items)
            if "usage" not in text.lower():
                problems.append(f"{block.path}:{n}: {shlex.join(help_cmd)} printed no usage: {text.strip()[:200]}")
                continue
            have = known_flags(text)
            for flag in flags_of(checked):
                if flag not in have:
                    problems.append(f"{block.path}:{n}: `{' '.join(argv[:2])}` has no option {flag}")
    return problems
