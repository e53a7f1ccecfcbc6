"""Each rule's verdict from what its run showed (pure).

A judge reads `Evidence`: the tool's output file as it left it (parsed), what the scenario noted while
it ran (``marks``: the messages it made, what the tool had delivered at a critical moment, the frames
the tool sent) and how quitting went. It returns an `Outcome`: ``pass``, or ``fail`` with one line of
what was expected and one of what came. The output file's general checks (the same messages and order
as TOM's peers, each once, n ACKs) are the report's Spark job; a judge checks its own rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .toolfile import Delivered


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: str
    expected: str = ""
    got: str = ""
    detail: str = ""


PASS = Outcome("pass")


class Failed(Exception):
    """Raised by a scenario when what it waits for does not come: the run fails with this."""

    def __init__(self, expected: str, got: str, detail: str = "") -> None:
        super().__init__(f"expected {expected}; got {got}")
        self.outcome = Outcome("fail", expected, got, detail)


@dataclass
class Evidence:
    test: str
    tool_out: list[Delivered] | None  # None: the tool left no output file
    marks: dict[str, Any] = field(default_factory=dict)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)  # lines of tool.out that are no delivery
    quit_seconds: float | None = None  # from menu 3 to the end of the process; None: it did not end
    quit_limit: float = 5.0


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _listing(out: list[Delivered], limit: int = 6) -> str:
    if not out:
        return "tool.out has no delivery"
    shown = ", ".join(d.text for d in out[:limit])
    more = f" and {len(out) - limit} more" if len(out) > limit else ""
    return f"tool.out has {len(out)}: {shown}{more}"


def delivered_in_order(ev: Evidence, texts: list[str], why: str = "") -> Outcome | None:
    """None if the tool's file holds every one of ``texts`` in this order; else the failing Outcome."""
    messages = ev.marks.get("lines", {})
    expected = " then ".join(_short(messages.get(t, t), 80) for t in texts)
    if ev.tool_out is None:
        return Outcome("fail", f"{expected} in the tool's output file{why}", "no output file")
    where: dict[str, int] = {}
    for i, d in enumerate(ev.tool_out):
        where.setdefault(d.text, i)
    missing = [t for t in texts if t not in where]
    if missing:
        return Outcome("fail", f"{expected} delivered{why}",
                       f"{', '.join(missing)} not delivered ({_listing(ev.tool_out)})")
    for a, b in zip(texts, texts[1:]):
        if where[a] > where[b]:
            da, db = ev.tool_out[where[a]], ev.tool_out[where[b]]
            return Outcome("fail", f"{expected}{why}",
                           f"{b} at line {db.line_no} before {a} at line {da.line_no} ({_listing(ev.tool_out)})")
    return None


def judge_one_each_way(ev: Evidence) -> Outcome:
    return delivered_in_order(ev, ev.marks["order"]) or PASS


def judge_clock(ev: Evidence) -> Outcome:
    c = ev.marks["received_clock"]
    sent = ev.marks.get("tool_message")
    if sent is None:
        return Outcome("fail", f"a MESSAGE from the tool after menu 1 (it had received clock {c})", "none came")
    clock = ev.marks["tool_clock"]
    if clock <= c:
        return Outcome("fail", f"the tool's next MESSAGE with a clock > {c} (it had received "
                               f"{_short(ev.marks['received'], 80)})", _short(sent))
    return PASS


def judge_tie(ev: Evidence) -> Outcome:
    small, large = ev.marks["order"]
    return delivered_in_order(ev, [small, large], f" (same clock {ev.marks['clock']}: the smaller from "
                                                  f"{ev.marks['small_from']} first; the other reached the "
                                                  f"tool first)") or PASS


def judge_premature_ack(ev: Evidence) -> Outcome:
    text = ev.marks["message"]
    got = delivered_in_order(ev, [text], f" (another member's ACK reached the tool "
                                         f"{ev.marks.get('ack_lead', 0):.1f} s before the MESSAGE)")
    if got is not None and ev.tool_out is not None and text not in {d.text for d in ev.tool_out}:
        waited = ev.marks.get("waited", 0.0)
        return Outcome("fail", got.expected, f"nothing after {waited:.0f} s ({_listing(ev.tool_out)})",
                       "a tool that drops an ACK arriving before its MESSAGE never counts n ACKs for it")
    return got or PASS


def _early(ev: Evidence, what: str, after: str | None = None) -> Outcome | None:
    """The ``held`` message was seen delivered while ``what`` (and, with ``after``, before ``after``)."""
    early = ev.marks.get("early") or []
    held = ev.marks["held"]
    if held in early and (after is None or after not in early or early.index(after) > early.index(held)):
        return Outcome("fail", f"{held} not delivered while {what}",
                       f"{held} delivered before it (seen in its output at {ev.marks.get('early_at', 0):.1f} s)")
    return None


def judge_all_acks(ev: Evidence) -> Outcome:
    first, later = ev.marks["order"]
    return (_early(ev, f"one member's ACK of it was withheld")
            or delivered_in_order(ev, [first, later], f" ({later} had n-1 ACKs until {first} and the last "
                                                      f"ACK came)")
            or PASS)


def judge_head(ev: Evidence) -> Outcome:
    head, later = ev.marks["order"]
    return (_early(ev, f"the head {head} waited for an ACK", head)
            or delivered_in_order(ev, [head, later], f" ({later} had all its ACKs behind the unacknowledged "
                                                     f"head {head})")
            or PASS)


def judge_cascade(ev: Evidence) -> Outcome:
    texts = ev.marks["order"]
    out = {d.text for d in ev.tool_out or []}
    missing = [t for t in texts if t not in out]
    if ev.tool_out is None or missing:
        return Outcome("fail", f"{', '.join(texts)} all delivered once the head's last ACK came (no frame "
                               f"reached the tool after it)",
                       "no output file" if ev.tool_out is None else
                       f"{', '.join(missing)} still undelivered after {ev.marks.get('waited', 0):.0f} s "
                       f"({_listing(ev.tool_out)})",
                       "a tool that releases one ready message per ACK leaves the rest of the cascade waiting")
    return PASS


def judge_sends_acks(ev: Evidence) -> Outcome:
    counts: dict[str, dict[str, int]] = ev.marks["acks"]  # peer from -> message text -> ACKs from the tool
    for peer, per in counts.items():
        for text, n in per.items():
            if n != 1:
                line = ev.marks["lines"].get(text, text)
                return Outcome("fail", f"one ACK of {_short(line, 90)} from the tool at {peer}",
                               f"{n} ACKs" if n else "none")
    return delivered_in_order(ev, ev.marks["order"], " (n ACKs each, the tool's own included)") or PASS


def judge_load(ev: Evidence) -> Outcome:
    order: list[str] = ev.marks["order"]  # as TOM's peers delivered them
    if ev.tool_out is None:
        return Outcome("fail", f"{len(order)} messages in the tool's output file", "no output file")
    got = [d.text for d in ev.tool_out]
    have = set(got)
    missing = [t for t in order if t not in have]
    if missing:
        return Outcome("fail", f"all {len(order)} messages delivered", f"{len(missing)} missing (first: "
                       f"{missing[0]}; tool.out has {len(got)} lines)")
    wanted = set(order)
    mine = [d for d in ev.tool_out if d.text in wanted]
    for i, (d, t) in enumerate(zip(mine, order)):
        if d.text != t:
            return Outcome("fail", f"delivery {i + 1} is {t} (the order of TOM's peers)",
                           f"{d.text} at line {d.line_no}")
    return PASS


def judge_quit(ev: Evidence) -> Outcome:
    if ev.quit_seconds is None:
        return Outcome("fail", f"the process ends within {ev.quit_limit:.0f} s of menu 3",
                       f"still running after {ev.quit_limit:.0f} s (stopped)")
    return delivered_in_order(ev, ev.marks["order"], " in the file it left") or PASS


def judge_malformed(ev: Evidence) -> Outcome:
    return delivered_in_order(ev, ev.marks["order"], " (after malformed lines it should ignore)") or PASS


JUDGES: dict[str, Callable[[Evidence], Outcome]] = {
    "one-each-way": judge_one_each_way, "clock": judge_clock, "tie": judge_tie,
    "premature-ack": judge_premature_ack, "all-acks": judge_all_acks, "head": judge_head,
    "cascade": judge_cascade, "sends-acks": judge_sends_acks, "load": judge_load, "quit": judge_quit,
    "malformed": judge_malformed,
}
