"""A space-time diagram of one graded run, as an SVG string: a pure function of frames.jsonl.

One vertical line per process (the tool first, then TOM's peers, then any other name a frame
mentions), time going down. Each record of frames.jsonl takes a row of its own, in time order
(rows, not seconds: a burst of frames stays readable); the seconds are written left of each row and
the frame's line, shortened, right of the last process line, in the arrow's colour.
An ``out`` record starts an arrow at its TOM peer, an ``in`` record ends one there. When both ends
are TOM peers, an ``out`` is paired with the first later ``in`` of the same line at the other end and
drawn as one solid arrow. An end TOM does not observe (the tool's, or an ``in`` that never came) is
drawn dashed to or from that process's line one row away: its time there is unknown.
MESSAGE frames are blue, ACKs green, anything else grey. At most :data:`MAX_FRAMES` records are
drawn, with a note saying how many were left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape

MAX_FRAMES = 200
LABEL_CHARS = 60
LABELS_WIDTH = 430
ROW = 22
COLUMN = 210
LEFT = 70
TOP = 56
COLORS = {"MESSAGE": "#1f5fbf", "ACK": "#2e8b3e"}
OTHER_COLOR = "#777777"


def shorten(line: str, limit: int = LABEL_CHARS) -> str:
    """``line`` cut to ``limit`` characters with an ellipsis when longer."""
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _color(line: str) -> str:
    return COLORS.get(line.split("-", 1)[0], OTHER_COLOR)


def _processes(frames: Sequence[Mapping], tool: str, peers: Iterable[str]) -> list[str]:
    names = [tool, *peers]
    for f in frames:
        for name in (f.get("peer"), f.get("other")):
            if isinstance(name, str) and name not in names:
                names.append(name)
    return list(dict.fromkeys(names))


def _pairs(frames: Sequence[Mapping], peers: set[str]) -> dict[int, int]:
    """out index -> in index, for frames between two TOM peers (the first later unpaired ``in`` at
    the other end, from this sender, with the same line)."""
    taken: set[int] = set()
    paired: dict[int, int] = {}
    for i, f in enumerate(frames):
        if f.get("dir") != "out" or f.get("other") not in peers or f.get("other") == f.get("peer"):
            continue
        for j in range(i + 1, len(frames)):
            g = frames[j]
            if (j not in taken and g.get("dir") == "in" and g.get("peer") == f.get("other")
                    and g.get("other") == f.get("peer") and g.get("line") == f.get("line")):
                taken.add(j)
                paired[i] = j
                break
    return paired


def svg(frames: Sequence[Mapping], tool: str, peers: Sequence[str], *, ident: str = "d",
        max_frames: int = MAX_FRAMES) -> str:
    """The SVG of ``frames`` (frames.jsonl's records) between the tool (its ``from``: ``tool``) and
    TOM's peers (their ``from``s: ``peers``). ``ident`` prefixes the ids inside the SVG, so several
    diagrams can sit on one page."""
    ordered = sorted(frames, key=lambda f: float(f.get("t", 0.0)))
    left_out = max(0, len(ordered) - max_frames)
    ordered = ordered[:max_frames]
    names = _processes(ordered, tool, peers)
    x = {name: LEFT + COLUMN * i + COLUMN // 2 for i, name in enumerate(names)}
    paired = _pairs(ordered, set(peers))
    ends = set(paired.values())
    rows = len(ordered) + 2
    labels_x = LEFT + COLUMN * len(names) + 10
    width = labels_x + LABELS_WIDTH
    height = TOP + ROW * rows + (30 if left_out else 10)
    y = lambda r: TOP + ROW * (r + 1)  # noqa: E731
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spacetime" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
        "<defs>",
        *(f'<marker id="{ident}-{k}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
          f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{c}"/></marker>'
          for k, c in (*COLORS.items(), ("other", OTHER_COLOR))),
        "</defs>",
    ]
    for name in names:
        role = "tool" if name == tool else ("TOM peer" if name in peers else "?")
        out.append(f'<text x="{x[name]}" y="18" text-anchor="middle" font-weight="bold">{escape(role)}</text>')
        out.append(f'<text x="{x[name]}" y="34" text-anchor="middle">{escape(shorten(name, 30))}'
                   f"<title>{escape(name)}</title></text>")
        dash = ' stroke-dasharray="2,3"' if name == tool else ""
        out.append(f'<line x1="{x[name]}" y1="{TOP}" x2="{x[name]}" y2="{y(rows - 1)}" '
                   f'stroke="#333" stroke-width="{2 if name == tool else 1}"{dash}/>')
    for r, f in enumerate(ordered):
        out.append(f'<text x="{LEFT - 8}" y="{y(r) + 4}" text-anchor="end" fill="#999">'
                   f'{float(f.get("t", 0.0)):.3f}</text>')
    for r, f in enumerate(ordered):
        line = str(f.get("line", ""))
        color = _color(line)
        if r in ends:  # the arrival of a frame drawn from its send
            out.append(f'<text x="{labels_x}" y="{y(r) + 4}" fill="{color}" opacity="0.5">'
                       f"{escape(shorten(line))}</text>")
            continue
        marker = f"url(#{ident}-{line.split('-', 1)[0] if color != OTHER_COLOR else 'other'})"
        peer, other = f.get("peer"), f.get("other")
        if peer not in x or other not in x:
            continue
        if r in paired:  # both ends seen by TOM: solid, at their times
            x1, y1, x2, y2, dashed = x[peer], y(r), x[other], y(paired[r]), False
        elif f.get("dir") == "out":  # the far end unobserved: dashed, one row later
            x1, y1, x2, y2, dashed = x[peer], y(r), x[other], y(r) + ROW * 0.8, True
        else:
            x1, y1, x2, y2, dashed = x[other], y(r) - ROW * 0.8, x[peer], y(r), True
        if peer == other:  # a process sending to itself: a small loop
            shape = (f'<path d="M{x[peer]},{y(r)} c 40,0 40,{ROW * 0.8} 0,{ROW * 0.8}" fill="none" '
                     f'stroke="{color}" marker-end="{marker}">', "</path>")
        else:
            dash = ' stroke-dasharray="5,3"' if dashed else ""
            shape = (f'<line x1="{x1}" y1="{y1:.1f}" x2="{x2}" y2="{y2:.1f}" stroke="{color}" '
                     f'stroke-width="1.3"{dash} marker-end="{marker}">', "</line>")
        title = _title(f, ordered[paired[r]] if r in paired else None)
        out.append(f"{shape[0]}<title>{escape(title)}</title>{shape[1]}")
        out.append(f'<text x="{labels_x}" y="{y(r) + 4}" fill="{color}">{escape(shorten(line))}</text>')
    if left_out:
        out.append(f'<text x="{LEFT}" y="{height - 10}" fill="#b00">{left_out} later frames not '
                   f"drawn (first {max_frames} of {max_frames + left_out})</text>")
    out.append("</svg>")
    return "\n".join(out)


def _title(f: Mapping, end: Mapping | None) -> str:
    way = "to" if f.get("dir") == "out" else "from"
    sent = f"t={float(f.get('t', 0.0)):.3f}s {f.get('dir')} at {f.get('peer')} ({way} {f.get('other')})"
    if end is not None:
        sent += f", in at {end.get('peer')} t={float(end.get('t', 0.0)):.3f}s"
    return f"{f.get('line', '')}\n{sent}"
