"""The driver's rules: which question a tool is asking on its terminal and what to type (pure).

A rule is a regular expression over the tool's terminal output and an answer template. The driver
waits until the tool's output goes quiet, finds the rule whose match comes *last* in the text it has not
answered yet (the question the tool is waiting on is the last one it printed), and types the answer.
Templates may use:

* ``{loopback}``: the index of ``127.0.0.1`` in a printed list of addresses (a line such as
  ``1: localhost/127.0.0.1``), or ``127.0.0.1`` typed out when no such line is there;
* ``{ip}`` (``127.0.0.1``), ``{port}`` (the tool's port);
* ``{menu}``: the menu key of what the driver wants now (``1`` send, ``2`` status, ``3`` quit; see
  `MenuKeys`); a rule with ``{menu}`` is *the menu*: while the driver wants nothing it means "ready";
* ``{text}``: the text of the message being sent (after ``{menu}`` chose "send").

An answer that needs ``{menu}`` or ``{text}`` when the driver has none to give is not typed.

The defaults follow the handout's figure 1 (``Choose an IP address to listen on :`` and its list, the
``from`` question when ``0.0.0.0`` is chosen, ``1. Send a new message: 2. Print status 3. Quit``, ``Enter
the message to send :``). A student's ``tom-grade.toml`` adds rules (``[prompts]``, regex = answer), which
are tried before the defaults and replace a default with the same regex; ``[menu]`` changes the keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

LOOPBACK = "127.0.0.1"

_FIELD = re.compile(r"\{(\w+)\}")
KNOWN_FIELDS = frozenset({"loopback", "ip", "port", "menu", "text"})


@dataclass(frozen=True, slots=True)
class PromptRule:
    """When ``pattern`` matches the unanswered output, type ``answer`` (a template, see the module)."""

    pattern: str
    answer: str

    def __post_init__(self) -> None:
        re.compile(self.pattern)  # re.error for a bad regex
        unknown = set(_FIELD.findall(self.answer)) - KNOWN_FIELDS
        if unknown:
            raise ValueError(f"unknown field {{{sorted(unknown)[0]}}} in answer {self.answer!r} "
                             f"(known: {', '.join(sorted(KNOWN_FIELDS))})")

    @property
    def is_menu(self) -> bool:
        return "{menu}" in self.answer

    @property
    def wants_text(self) -> bool:
        return "{text}" in self.answer


DEFAULT_RULES: tuple[PromptRule, ...] = (
    # "Choose an IP address to listen on :" then "0: /0.0.0.0", "1: localhost/127.0.0.1", ...
    PromptRule(r"(?i)(address|\bip\b)[^\n]*\blisten|\blisten[^\n]*(address|\bip\b)", "{loopback}"),
    # "Enter the IP to write in the from field :" (only when 0.0.0.0 was chosen)
    PromptRule(r"(?i)\bfrom\b[^\n]*\b(field|name)\b|\bip\b[^\n]*\bfrom\b", "{ip}"),
    # "1. Send a new message:" "2. Print status" "3. Quit" then ": "
    PromptRule(r"(?i)\bquit\b", "{menu}"),
    # "Enter the message to send : "
    PromptRule(r"(?i)(enter|type)[^\n]*\b(message|text)\b|\bmessage to send\b", "{text}"),
)


@dataclass(frozen=True, slots=True)
class MenuKeys:
    send: str = "1"
    status: str = "2"
    quit: str = "3"


@dataclass(frozen=True, slots=True)
class Decision:
    """The question found last in the output: ``rule``, ``end`` (where its match ends) and ``answer``
    (None: the driver has nothing to type for it now)."""

    rule: PromptRule
    end: int
    answer: str | None


def rules_with(extra: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> tuple[PromptRule, ...]:
    """A student's rules first, then the defaults whose regex they do not replace."""
    pairs = list(extra.items()) if isinstance(extra, Mapping) else list(extra)
    own = tuple(PromptRule(p, a) for p, a in pairs)
    replaced = {r.pattern for r in own}
    return own + tuple(r for r in DEFAULT_RULES if r.pattern not in replaced)


def loopback_choice(text: str, ip: str = LOOPBACK) -> str:
    """The index printed beside ``ip`` in a list of addresses in ``text``, else ``ip`` itself."""
    line = re.compile(r"^[ \t>*-]*\[?(\d+)\]?[ \t]*[:.)\]-][^\n]*?(?<![\d.])" + re.escape(ip) + r"(?![\d.])",
                      re.MULTILINE)
    found = line.findall(text)
    return found[-1] if found else ip


def decide(text: str, rules: Iterable[PromptRule], fill: Mapping[str, str]) -> Decision | None:
    """The rule matched last in ``text`` (ties: the earlier rule), with its answer filled from ``fill``
    (``loopback`` is computed from ``text``); None when no rule matches."""
    best: tuple[int, int, PromptRule] | None = None
    for order, rule in enumerate(rules):
        for m in re.finditer(rule.pattern, text):
            key = (m.end(), -order)
            if best is None or key > best[:2]:
                best = (m.end(), -order, rule)
    if best is None:
        return None
    end, _, rule = best
    values = dict(fill)
    values.setdefault("ip", LOOPBACK)
    values["loopback"] = loopback_choice(text, values["ip"])
    needed = set(_FIELD.findall(rule.answer))
    if any(values.get(name) is None for name in needed):
        return Decision(rule, end, None)
    return Decision(rule, end, _FIELD.sub(lambda m: str(values[m[1]]), rule.answer))


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def plain(text: str) -> str:
    """Terminal text without ANSI escapes, with CR LF as LF and lone CRs dropped."""
    return _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "")


def tail_lines(text: str, n: int = 20) -> list[str]:
    """The last ``n`` non-empty lines of a terminal transcript, escapes removed."""
    lines = [line.rstrip() for line in plain(text).split("\n")]
    return [line for line in lines if line.strip()][-n:]
