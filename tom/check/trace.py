"""A counterexample written three ways: a transcript (tests/testdata's block format, replayable with
``tom check --replay`` and runnable as a regression test), a ShiViz log (a vector clock per event,
GoVector's layout), and an HTML page that draws it as a Lamport space-time diagram step by step.

Transcript: peers are letters (``A`` = peer 1 = 127.0.0.1:5000, as in tests/testdata); the first
block names the configuration, then one block per step — the command, ``----``, what it made happen —
and a last ``check`` block whose expected output is what must hold (``ok``), so the file fails until
the bug is fixed (then rewrite the steps' outputs, as for any transcript, and read the diff).

Commands: ``static A B C order=O messages=M`` or ``group A B C order=O messages=M [crash=B]
[leave=C] [join=1] [cut=A,B/C] [cut-one-way=C>B] [false-suspicion]`` (the configuration; ``group``
when views and failure detection run), ``B <- A: FRAME`` (A's first in-flight frame reaches B),
``A send m1.1``, ``crash B``, ``cut``, ``heal``, ``join D``, ``C leave``, ``B timeout A`` (A's
suspicion timeout passed at B), ``B tick`` (a heartbeat period passed at B), ``restart A``,
``restart A mid-step``, ``crash A mid-step`` (durable peers: `tom.check.restart`), ``check``.
"""

from __future__ import annotations

import html
import json
import re

from ..codec.shiviz import SHIVIZ_REGEX, VectorClocks, shiviz_log
from .explore import Found, replay
from .world import HORIZON, Config, Event, Step

LETTERS = "ABCDEFGHIJ"


def letter(n: int) -> str:
    return LETTERS[n - 1]


def named(text: str) -> str:
    """Pids in ``text`` as peer letters."""
    return re.sub(r"127\.0\.0\.1:50(\d\d)", lambda m: LETTERS[int(m.group(1))], text)


def config_line(c: Config) -> str:
    peers = " ".join(letter(n) for n in range(1, c.peers + 1))
    words = ["group" if (c.faults or c.dynamic) else "static", peers, f"order={c.order}", f"messages={c.messages}"]
    if c.senders is not None:
        words.append("senders=" + ",".join(letter(n) for n in c.senders))
    for key, peers_of in (("crash", c.crash), ("leave", c.leave)):
        if peers_of:
            words.append(f"{key}=" + ",".join(letter(n) for n in peers_of))
    if c.restart:
        words.append("restart=" + ",".join(letter(n) for n in c.restart))
    if c.join:
        words.append(f"join={c.join}")
    if c.cut:
        words.append("cut=" + "/".join(",".join(letter(n) for n in sorted(side)) for side in c.cut))
    words += [f"cut-one-way={letter(a)}>{letter(b)}" for a, b in c.cut_one_way]
    if c.false_suspicion:
        words.append("false-suspicion")
    if c.ticks != 2:
        words.append(f"ticks={c.ticks}")
    if c.found:
        words.append("found")
    if c.heal_late:
        words.append("heal-late")
    if c.delay is not None:
        words += [f"delay={c.delay}", f"jitter={c.jitter}", f"horizon={c.horizon}"]
    if c.max_attempts is not None:
        words.append(f"attempts={c.max_attempts}")
    return " ".join(words)


FLAGS = ("false-suspicion", "found", "heal-late")
"""The words of a configuration line that name no peer and have no value."""


def parse_config(line: str) -> Config:
    words = line.split()
    if not words or words[0] not in ("static", "group"):
        raise ValueError(f"a transcript starts with 'static ...' or 'group ...', not {line!r}")
    peers = [w for w in words[1:] if "=" not in w and w not in FLAGS]
    opts: dict[str, str] = {}
    for key, value in (w.split("=", 1) for w in words[1:] if "=" in w):  # (a key given twice: both lists)
        opts[key] = f"{opts[key]},{value}" if key in opts and key != "cut-one-way" else value
    cut = None
    if "cut" in opts:
        cut = tuple(frozenset(LETTERS.index(x) + 1 for x in side.split(",")) for side in opts["cut"].split("/"))
    one_way = tuple((LETTERS.index(p[0]) + 1, LETTERS.index(p[2]) + 1) for p in
                    [v for k, v in (w.split("=", 1) for w in words if w.startswith("cut-one-way="))])
    return Config(order=opts.get("order", "lamport"), peers=len(peers), messages=int(opts.get("messages", "1")),
                  crash=tuple(LETTERS.index(x) + 1 for x in opts.get("crash", "").split(",") if x),
                  leave=tuple(LETTERS.index(x) + 1 for x in opts.get("leave", "").split(",") if x),
                  restart=tuple(LETTERS.index(x) + 1 for x in opts.get("restart", "").split(",") if x),
                  join=int(opts.get("join", "0")), cut=cut, cut_one_way=one_way,
                  false_suspicion="false-suspicion" in words, dynamic=words[0] == "group",
                  ticks=int(opts.get("ticks", "2")), found="found" in words, heal_late="heal-late" in words,
                  delay=int(opts["delay"]) if "delay" in opts else None, jitter=int(opts.get("jitter", "0")),
                  horizon=int(opts.get("horizon", str(HORIZON))),
                  max_attempts=int(opts["attempts"]) if "attempts" in opts else None,
                  senders=tuple(LETTERS.index(x) + 1 for x in opts["senders"].split(",")) if "senders" in opts
                  else None)


def command(step: Step, events: list[Event]) -> str:
    k = step.kind
    if k == "deliver":
        text = next((e.note.split(": ", 1)[1] for e in events if e.note.startswith("<- ")), "")
        return f"{letter(step.b)} <- {letter(step.a)}: {named(text)}"
    if k == "send":
        text = next((e.note[5:] for e in events if e.note.startswith("send ")), "")
        return f"{letter(step.a)} send {text}"
    if k == "timeout":
        return f"{letter(step.b)} timeout {letter(step.a)}"
    if k == "leave":
        return f"{letter(step.a)} leave"
    if k == "tick":
        return f"{letter(step.a)} tick" if step.a else "tick"
    if k in ("crash", "join"):
        return f"{k} {letter(step.a)}" + (" mid-step" if step.b else "")
    if k == "restart":
        return f"restart {letter(step.a)}" + (" mid-step" if step.b else "")
    return k


def parse_command(line: str) -> Step:
    words = line.split()
    if len(words) >= 3 and words[1] == "<-":
        return Step("deliver", LETTERS.index(words[2].rstrip(":")) + 1, LETTERS.index(words[0]) + 1)
    if len(words) >= 2 and words[1] == "send":
        return Step("send", LETTERS.index(words[0]) + 1)
    if len(words) == 3 and words[1] == "timeout":
        return Step("timeout", LETTERS.index(words[2]) + 1, LETTERS.index(words[0]) + 1)
    if len(words) == 2 and words[1] in ("leave", "tick"):
        return Step(words[1], LETTERS.index(words[0]) + 1)
    if len(words) == 2 and words[0] in ("crash", "join"):
        return Step(words[0], LETTERS.index(words[1]) + 1)
    if words[:1] in (["restart"], ["crash"]) and len(words) == 3 and words[2] == "mid-step":
        return Step(words[0], LETTERS.index(words[1]) + 1, 1)
    if words[:1] == ["restart"] and len(words) == 2:
        return Step("restart", LETTERS.index(words[1]) + 1)
    if words in (["cut"], ["heal"], ["tick"]):
        return Step(words[0])
    raise ValueError(f"not a transcript command: {line!r}")


def outputs(events: list[Event]) -> list[str]:
    lines = []
    for e in events:
        if not e.peer:  # (the timed mode's tick: the time it is now)
            lines.append(e.note)
            continue
        me = letter(e.peer)
        if e.note == "crash":
            lines.append(f"{me} stops")
        elif e.note == "crash mid-step":
            lines.append(f"{me} stops inside its last step, after its first frame went out: its disk as it was then")
        elif e.note.startswith("restart"):
            lines.append(f"{me} stops and starts again from its data folder"
                         + (" (killed inside its last step, after its first frame went out)" if "mid" in e.note else ""))
        for dests, text in e.sends:
            lines.append(f"{me} -> {' '.join(letter(d) for d in dests)}: {named(text)}")
        for d in e.deliveries:
            lines.append(f"{me} delivers {named(_letters_in(d))}")
    return lines or ["ok"]


def _letters_in(described: str) -> str:
    """``(1, 2) m2.1`` -> ``(1, B) m2.1``; ``view 2 1 3`` -> ``view 2 A C``."""
    if described.startswith("view "):
        _, v, *members = described.split()
        return f"view {v} " + " ".join(letter(int(m)) for m in members)
    return re.sub(r"^\((\d+), (\d+)\)", lambda m: f"({m.group(1)}, {letter(int(m.group(2)))})", described)


def transcript(config: Config, found: Found, title: str = "") -> str:
    """The counterexample as a transcript (see the module docstring)."""
    blocks = []
    head = [f"# tom check counterexample: {found.violation}", f"# configuration: {config.describe()}"]
    if title:
        head.insert(0, f"# {title}")
    blocks.append("\n".join([*head, config_line(config), "----", "ok"]))
    for step, events in zip(found.steps, found.events):
        blocks.append("\n".join([command(step, events), "----", *outputs(events)]))
    blocks.append("\n".join(["# must hold (fails until the bug is fixed): every invariant", "check", "----", "ok"]))
    return "\n\n".join(blocks) + "\n"


def parse_transcript(text: str) -> tuple[Config, list[tuple[str, list[str]]]]:
    """The configuration and the ``(command, expected lines)`` blocks after it."""
    blocks = []
    for chunk in re.split(r"\n\s*\n", text.strip()):
        body = [ln for ln in chunk.splitlines() if not ln.startswith("#")]
        if not body:
            continue
        if len(body) < 2 or body[1] != "----":
            raise ValueError(f"expected ---- after {body[0]!r}")
        blocks.append((body[0], body[2:]))
    if not blocks:
        raise ValueError("an empty transcript")
    return parse_config(blocks[0][0]), blocks[1:]


def run_transcript(text: str) -> list[tuple[str, list[str], list[str]]]:
    """Replay a transcript: ``(command, expected, got)`` per block; the ``check`` block gets the
    verdict (``ok`` or the violation)."""
    config, blocks = parse_transcript(text)
    steps = [parse_command(cmd) for cmd, _ in blocks if cmd != "check"]
    try:
        _, events, violation = replay(config, steps)
    except ValueError as e:
        return [("replay", ["ok"], [str(e)])]
    out, i = [], 0
    for cmd, want in blocks:
        if cmd == "check":
            out.append((cmd, want, ["ok"] if violation is None else [str(violation)]))
            continue
        got = outputs(events[i]) if i < len(events) else ["(not reached: the run broke an invariant before)"]
        out.append((cmd, want, got))
        i += 1
    return out


# -- ShiViz ---------------------------------------------------------------------------------------
def shiviz(config: Config, found: Found) -> str:
    """The counterexample in ShiViz's format (`tom.codec.shiviz`, the writer `tom replay --shiviz` uses):
    a step is one event at its peer; a delivered frame is the receive of the k-th frame sent on its
    link (FIFO links)."""
    clocks = VectorClocks()
    sent: dict[tuple[int, int], int] = {}  # frames sent on a link so far
    taken: dict[tuple[int, int], int] = {}  # frames delivered from it so far
    out = []
    for step, events in zip(found.steps, found.events):
        for e in events:
            if not e.peer:  # (the timed mode's tick: no peer's event)
                continue
            host = letter(e.peer)
            what = e.note or "step"
            if step.kind == "deliver" and e.peer == step.b and e.note.startswith("<- "):
                link = (step.a, step.b)
                k = taken.get(link, 0)
                taken[link] = k + 1
                clock = clocks.receive(host, (link, k))  # (a frame of the start, --found's first Joins: none)
                what = f"receive from {letter(step.a)}: {named(e.note.split(': ', 1)[1])}"
            else:
                clock = None
            for dests, _ in e.sends:
                for d in dests:
                    link = (e.peer, d)
                    k = sent.get(link, 0)
                    sent[link] = k + 1
                    if clock is None:
                        clock = clocks.send(host, (link, k))
                    else:  # one event: the step's sends carry its clock
                        clocks.sent[(link, k)] = clock
            if clock is None:
                clock = clocks.local(host)
            if e.deliveries:
                what += "; delivers " + "; ".join(named(_letters_in(d)) for d in e.deliveries)
            out.append((host, dict(clock), what))
    return shiviz_log(out)


# -- HTML -----------------------------------------------------------------------------------------
def page(config: Config, found: Found) -> str:
    """A self-contained page: the counterexample on a Lamport space-time diagram (a line per peer,
    an arrow per delivered frame), drawn up to the step chosen with the slider or the arrow keys."""
    peers = sorted({e.peer for ev in found.events for e in ev if e.peer} | set(range(1, config.peers + 1)))
    sends: dict[tuple[int, int], list[int]] = {}
    items = []
    for i, (step, events) in enumerate(zip(found.steps, found.events)):
        for e in events:
            if step.kind == "deliver" and e.peer == step.b and e.note.startswith("<- "):
                queue = sends.get((step.a, step.b))
                j = queue.pop(0) if queue else 0
                items.append({"step": i, "kind": "arrow", "from": step.a, "at": j, "to": step.b,
                              "label": named(e.note.split(": ", 1)[1])[:48]})
            for dests, _ in e.sends:
                for d in dests:
                    sends.setdefault((e.peer, d), []).append(i)
            for d in e.deliveries:
                items.append({"step": i, "kind": "deliver", "peer": e.peer, "label": named(_letters_in(d))})
            if e.note in ("crash", "crash mid-step") or step.kind in ("timeout", "leave", "join") or e.note.startswith("restart"):
                items.append({"step": i, "kind": "mark", "peer": e.peer, "label": command(step, events)})
    data = json.dumps({"peers": [letter(p) for p in peers], "ids": peers, "steps": len(found.steps),
                       "items": items, "commands": [command(s, ev) for s, ev in zip(found.steps, found.events)]})
    title = html.escape(f"tom check: {found.violation}")
    return _PAGE.replace("__TITLE__", title).replace("__CONFIG__", html.escape(config.describe())) \
        .replace("__DATA__", data.replace("</", "<\\/"))


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font:14px system-ui,sans-serif;margin:20px;color:#222}
#cmd{font-family:monospace;white-space:pre;background:#f4f4f4;padding:6px;min-height:1.2em}
svg text{font:11px monospace}
</style></head><body>
<h1 style="font-size:18px">__TITLE__</h1>
<p>__CONFIG__ &mdash; step <span id="n">0</span> of <span id="total"></span>
<input id="slider" type="range" min="0" value="0" style="width:50%"> (arrow keys step)</p>
<div id="cmd"></div>
<svg id="d" xmlns="http://www.w3.org/2000/svg"></svg>
<script>
const D = __DATA__;
const S = document.getElementById('slider'), svg = document.getElementById('d');
const X0 = 60, DX = 220, Y0 = 40, DY = 26;
S.max = D.steps; document.getElementById('total').textContent = D.steps; S.value = D.steps;
function x(p){ return X0 + DX * D.ids.indexOf(p); }
function y(step){ return Y0 + DY * (step + 1); }
function el(tag, attrs, text){ const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]); if (text) e.textContent = text; svg.appendChild(e); return e; }
function draw(){
  const upto = +S.value; svg.innerHTML = '';
  svg.setAttribute('width', X0 + DX * D.ids.length); svg.setAttribute('height', y(D.steps) + 40);
  el('defs', {}).innerHTML = '<marker id="a" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z"/></marker>';
  D.ids.forEach((p, i) => { el('line', {x1:x(p), y1:Y0-10, x2:x(p), y2:y(D.steps)+10, stroke:'#999'});
                            el('text', {x:x(p)-4, y:Y0-16}, D.peers[i]); });
  for (const it of D.items) { if (it.step >= upto) continue;
    if (it.kind === 'arrow') { el('line', {x1:x(it.from), y1:y(it.at), x2:x(it.to), y2:y(it.step), stroke:'#2a6',
                                          'marker-end':'url(#a)'});
      el('text', {x:(x(it.from)+x(it.to))/2 - 60, y:(y(it.at)+y(it.step))/2 - 3, fill:'#2a6'}, it.label); }
    else if (it.kind === 'deliver') { el('circle', {cx:x(it.peer), cy:y(it.step), r:4, fill:'#c22'});
      el('text', {x:x(it.peer)+8, y:y(it.step)+4, fill:'#c22'}, 'delivers ' + it.label); }
    else { el('rect', {x:x(it.peer)-5, y:y(it.step)-5, width:10, height:10, fill:'#e90'});
      el('text', {x:x(it.peer)+8, y:y(it.step)+4, fill:'#e90'}, it.label); } }
  document.getElementById('n').textContent = upto;
  document.getElementById('cmd').textContent = upto ? D.commands[upto-1] : '(the start: view 1 of every peer)';
}
S.oninput = draw;
document.onkeydown = e => { if (e.key === 'ArrowRight') S.value = +S.value + 1; if (e.key === 'ArrowLeft') S.value = +S.value - 1; draw(); };
draw();
</script></body></html>
"""

__all__ = ["transcript", "run_transcript", "shiviz", "page", "SHIVIZ_REGEX"]
