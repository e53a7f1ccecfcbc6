"""Rendering of a verification result: terminal summary (rich), report.json and report.html.

The result is the JSON-ready dict built by :func:`analysis.verify.verify`; nothing here touches Spark.
The HTML is self-contained: inline CSS and hand-written SVG, no script, no external resource.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from analysis import membership

CHECKS = (  # (key in result["checks"], title, what a row means)
    ("order", "order per peer", "record not after the previous one, or index gap/repeat"),
    ("common_order", "common order", "handout runs: the first line where a file stops being a "
                                     "prefix of every message sorted by (clock, from)"),
    ("duplicates", "duplicates", "a peer delivered the same (clock, pid) again"),
    ("fifo_reorders", "FIFO order", "an origin's message delivered before an earlier-sent one"),
    ("fifo_gaps", "FIFO gaps", "an origin's messages skipped between two delivered ones"),
    ("agreement", "agreement", "a message not delivered by exactly the peers that should have it"),
    ("divergence", "pairwise order", "first position where two peers' common messages differ"),
    ("conflicting_copies", "conflicting copies", "copies of one (clock, pid) with different content"),
    ("view_conflicts", "view conflicts", "peers recorded different members for one view"),
    ("numbering", "seq/vc numbers", "two messages of one view with the same seq (sequencer) or the "
                                    "same origin and vc[origin] (causal)"),
    ("causal", "causal order", "a peer delivered a message before a causal predecessor (both named)"),
    ("durable", "durable files", "a durable peer's file missing an event of the group's order with "
                                 "no gap record, or holding one twice"),
    ("clock", "clock condition", "a peer's own message sent after it delivered another, yet not after "
                                 "it in (clock, pid) order (both named)"),
)
VERDICT_STYLE = {"VERIFIED": "bold green", "VIOLATED": "bold red", "UNUSABLE INPUT": "bold yellow"}
VERDICT_COLOUR = {"VERIFIED": "#1a7f37", "VIOLATED": "#cf222e", "UNUSABLE INPUT": "#9a6700"}


def write(result: dict, report_dir: Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` into ``report_dir``; return both paths."""
    report_dir.mkdir(parents=True, exist_ok=True)
    json_path, html_path = report_dir / "report.json", report_dir / "report.html"
    json_path.write_text(json.dumps(result, indent=2, default=str, allow_nan=False) + "\n")
    html_path.write_text(render_html(result))
    return json_path, html_path


# --------------------------------------------------------------------------- terminal

def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def verdict_line(result: dict) -> str:
    """``VERIFIED (causal order)``: the verdict and the order checked (when one was determined)."""
    order = result.get("order")
    return f"{result['verdict']} ({order} order)" if order else result["verdict"]


def _message(m: dict | None) -> str:
    if not m:
        return "?"
    text = m.get("text")
    return f"({m['clock']}, {m['pid']})" + ("" if text is None else f" {json.dumps(text)[:80]}")


def _describe(row: dict) -> str:
    """One violation row as ``key=value`` text (nested structs flattened); a causal violation as a
    sentence naming the message and the predecessor it overtook."""
    if "overtook_note" in row:
        pred = _message(row["overtook"]) + f" ({row['overtook_note']})" if row["overtook"] \
            else row["overtook_note"]
        return (f"{row['peer']} delivered {_message(row['message'])} at index {row['index']} before "
                f"its causal predecessor {pred}; it had delivered {row['delivered']} of "
                f"{row['member']}'s messages of view {row['view']}, needed {row['needed']}")
    if "as_in" in row:
        return describe_departure(row)
    if "first_index" in row and "events" in row:
        return describe_durable(row)
    if "after_delivered_at" in row:
        return describe_clock(row)
    parts = []
    for k, v in row.items():
        if isinstance(v, dict):
            v = "(" + ", ".join(f"{ik}={iv}" for ik, iv in v.items()) + ")"
        elif isinstance(v, list) and len(v) > 6:
            v = "[" + ", ".join(map(str, v[:6])) + f", ... {len(v) - 6} more]"
        parts.append(f"{k}={v}")
    return " ".join(parts)


HANDOUT_ORDER = ("order: the handout's, (clock, from as written), from compared as a string "
                 "(Java's String.compareTo); a text output's peer is its file name")


def handout_lines(result: dict) -> list[str]:
    """What a handout run adds to the summary: its order, the peers not named after their file (TOM
    peers' JSON Lines), the files cut short. Empty for any other run."""
    if result.get("order") != "handout":
        return []
    lines = [HANDOUT_ORDER]
    for peer, files in (result.get("peer_files") or {}).items():
        if [f.rsplit("/", 1)[-1] for f in files] != [peer]:
            lines.append(f"peer {peer}: {', '.join(files)}")
    incomplete = result.get("incomplete") or []
    if incomplete:
        lines.append(f"incomplete files (cut short: a prefix of the common order, nothing missing "
                     f"before their last message): {len(incomplete)}")
        lines += [f"  {i['peer']}: {i['messages']} of {i['of']} messages ({', '.join(i['files'])})"
                  for i in incomplete]
    return lines


def describe_durable(row: dict) -> str:
    """A durable file's departure from the group's order, as a sentence naming file and index."""
    event = f"({row['clock']}, {row['pid']}) of view {row['view']}"
    if row["problem"] == "misplaced gap":
        follows = "nothing" if row["clock"] is None else f"({row['clock']}, {row['pid']})"
        return (f"{row['file']} ({row['peer']}): the gap record at index {row['index']} is followed "
                f"by {follows}, not by view {row['view']}'s record")
    if row["problem"] == "repeated":
        return (f"{row['file']} ({row['peer']}): index {row['index']} repeats {event}, "
                f"first at index {row['first_index']}")
    more = f" and {row['events'] - 1} more event(s) after it" if row["events"] > 1 else ""
    return (f"{row['file']} ({row['peer']}): before index {row['index']}, missing {event}{more} "
            f"of the group's order (no gap record)")


def describe_clock(row: dict) -> str:
    """A clock condition violation as a sentence naming the file and both messages."""
    return (f"{row['file']} ({row['peer']}): its ({row['clock']}, {row['pid']}) at index {row['index']}, "
            f"sent at {row['sent_at']:.6f}, is not after ({row['after_clock']}, {row['after_pid']}) at index "
            f"{row['after_index']}, which it delivered at {row['after_delivered_at']:.6f}")


def describe_gap(row: dict) -> str:
    """A recorded gap as one line: whose, from where to where, why."""
    return (f"peer {row['peer']}: a recorded gap of view {row['after_view']} message "
            f"{row['after_n']} .. view {row['view']}: {row.get('reason') or 'no reason given'} "
            f"({row['file']}, index {row['index']})")


def durable_lines(result: dict) -> list[str]:
    """What durable peers add to the summary: their files and their recorded gaps. Empty for a
    run without durable records."""
    lines = []
    durable = result.get("durable") or []
    if durable:
        lines.append(f"durable peers (tom peer --data): {len(durable)}: "
                     + ", ".join(f"{d['peer']} ({d['file']})" for d in durable[:10]))
    recorded = result.get("gaps") or []
    if recorded:
        lines.append(f"recorded gaps (allowed: events lost to a durable peer): {len(recorded)}")
        lines += [f"  {describe_gap(g)}" for g in recorded[:10]]
    return lines


def describe_departure(row: dict) -> str:
    """A file's first departure from a handout run's common order, as a sentence."""
    has = f"({row['has']['clock']}, {row['has']['from']})"
    where = f"{row['peer']} departs from the common order at line {row['line']} ({row['file']})"
    if row["expected"] is None:
        return f"{where}: has {has} past the common order's last message"
    belongs = f"({row['expected']['clock']}, {row['expected']['from']})"
    seen = f", as in {', '.join(row['as_in'])}" if row["as_in"] else ""
    return f"{where}: has {has} where {belongs} belongs{seen}"


def print_summary(result: dict, console: Console, rows_per_check: int = 3) -> None:
    """Verdict first, then counts, then the first violations of each check."""
    verdict = result["verdict"]
    console.print(verdict_line(result), style=VERDICT_STYLE[verdict], markup=False)
    for problem in result.get("problems", []):
        console.print(f"  {problem}", markup=False)
    for skipped in result.get("skipped", []):
        console.print(skipped, markup=False)
    for line in handout_lines(result):
        console.print(line, markup=False)
    counts = result.get("counts")
    bad = result.get("bad_lines", {"count": 0, "first": []})
    files = result.get("file_summaries", [])
    if files:
        torn = sum(f["torn_last_line"] for f in files)
        console.print(f"{len(files)} files, {sum(f['lines'] for f in files):,} lines, "
                      f"{bad['count']:,} unreadable ({torn} torn last lines)", markup=False)
    if counts:
        console.print(f"{counts['records']:,} records from {counts['peers']} peers: "
                      f"{counts['messages']:,} distinct messages, {counts['views']:,} views",
                      markup=False)
    for b in bad["first"][:rows_per_check]:
        console.print(f"  unreadable {b['file']}:{b['line']}: {b['problem']}", markup=False)
    for line in durable_lines(result):
        console.print(line, markup=False)
    rejoined = result.get("rejoins") or []
    if rejoined:
        console.print(f"removed and admitted again (cut off by a partition, or restarted): "
                      f"{len(rejoined)}", markup=False)
        for row in rejoined[:rows_per_check]:
            console.print(f"  {membership.describe(row)}", markup=False)
    found = result.get("checks")
    if found:
        table = Table(show_edge=False, pad_edge=False, box=None)
        table.add_column("check")
        table.add_column("violations", justify="right")
        table.add_column("meaning", style="dim")
        for key, title, meaning in CHECKS:
            if key not in found:
                continue
            count = found[key]["count"]
            table.add_row(title, f"[red]{count:,}[/]" if count else "0", meaning)
        console.print(table)
        for key, title, _ in CHECKS:
            c = found.get(key)
            if not c or not c["count"]:
                continue
            console.print(f"[bold]{title}[/] (first {min(rows_per_check, len(c['first']))} "
                          f"of {c['count']:,}):")
            for row in c["first"][:rows_per_check]:
                console.print(f"  {_describe(row)}", markup=False)
    overall = result.get("latency", {}).get("overall")
    if overall and overall.get("count"):
        console.print(f"latency over {overall['count']:,} deliveries: p50 {_ms(overall['p50'])}, "
                      f"p95 {_ms(overall['p95'])}, p99 {_ms(overall['p99'])}, "
                      f"max {_ms(overall['max'])}", markup=False)
    total = result.get("timing", {}).get("total_s")
    if total is not None:
        console.print(f"checked in {total:.1f} s", markup=False)


# --------------------------------------------------------------------------- HTML / SVG

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1f2328;padding:0 1em}
h1{margin:.2em 0}.verdict{color:#fff;padding:.2em .6em;border-radius:6px}
table{border-collapse:collapse;margin:.5em 0 1.2em}td,th{padding:.2em .7em;border-bottom:1px solid #d0d7de;
text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#cf222e;font-weight:600}code{font-size:12px}svg{background:#fff;border:1px solid #d0d7de}
small{color:#59636e}
"""
_PALETTE = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#0a7e8c", "#bf3989", "#6e7781")


def _e(x) -> str:
    return html.escape(str(x))


def _table(headers: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(
        f'<td class="n">{_e(v)}</td>' if i in numeric else f"<td>{_e(v)}</td>"
        for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def histogram_svg(hist: dict, width: int = 760, height: int = 240) -> str:
    """Bars of the latency histogram; the last bar (hatched) counts everything >= ``high``."""
    counts = hist["counts"]
    if not counts or not any(counts):
        return "<p><small>no latency to draw</small></p>"
    left, bottom, top, right = 60, 40, 12, 12
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(counts)
    bar_w = plot_w / len(counts)
    low, high, bins = hist["low"], hist["high"], hist["bins"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="latency histogram">',
             '<defs><pattern id="hatch" width="4" height="4" patternUnits="userSpaceOnUse">'
             '<path d="M0,4 l4,-4" stroke="#0969da" stroke-width="1"/></pattern></defs>']
    for i, c in enumerate(counts):
        if not c:
            continue
        h = plot_h * c / peak
        x, y = left + i * bar_w, top + plot_h - h
        fill = "url(#hatch)" if i == bins else "#0969da"
        title = (f"&gt;= {high * 1000:.2f} ms: {c:,}" if i == bins else
                 f"{(low + i * (high - low) / bins) * 1000:.2f}-"
                 f"{(low + (i + 1) * (high - low) / bins) * 1000:.2f} ms: {c:,}")
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 1):.1f}" '
                     f'height="{h:.1f}" fill="{fill}"><title>{title}</title></rect>')
    axis_y = top + plot_h
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="#333"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{axis_y}" stroke="#333"/>')
    for k in range(5):
        v = low + (high - low) * k / 4
        x = left + plot_w * (k / 4) * bins / (bins + 1)
        parts.append(f'<text x="{x:.1f}" y="{axis_y + 16}" font-size="11" text-anchor="middle">'
                     f'{v * 1000:.2f} ms</text>')
    parts.append(f'<text x="{left - 6}" y="{top + 10}" font-size="11" text-anchor="end">{peak:,}</text>')
    parts.append(f'<text x="{left - 6}" y="{axis_y}" font-size="11" text-anchor="end">0</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 6}" font-size="12" '
                 f'text-anchor="middle">delivered_at - sent_at</text></svg>')
    return "".join(parts)


LABEL_CHAR_W = 6.2  # px per character of an 10 px monospace-ish label (an upper bound, for placing)
LABEL_ROWS = 3  # rows of labels above a lane; a label that finds no free row is left to its tooltip


class _LabelRows:
    """Where labels go without overlapping: per lane, rows of occupied x-intervals; a label takes the
    first row (nearest its lane) where it fits, or none."""

    def __init__(self) -> None:
        self.rows: dict[str, list[list[tuple[float, float]]]] = {}

    def place(self, lane: str, x1: float, x2: float) -> int | None:
        rows = self.rows.setdefault(lane, [[] for _ in range(LABEL_ROWS)])
        for r, taken in enumerate(rows):
            if all(x2 + 2 < a or x1 - 2 > b for a, b in taken):
                taken.append((x1, x2))
                return r
        return None


def spacetime_svg(diagram: list[dict], peers: list[str], width: int = 1000,
                  divergence: dict | None = None) -> str:
    """Lamport space-time diagram: a line per peer, an arrow per delivery from the origin's send.

    x is wall-clock time (``sent_at``, ``delivered_at``) over the drawn messages; each send is a dot on
    the origin's line labelled with its clock. Labels never overlap: each takes the first free row
    above its lane (`_LabelRows`), and one that finds none is left to the dot's tooltip. With
    ``divergence`` (a first-divergence row: ``peer_a, peer_b, position, at_a, at_b``), the two
    deliveries that differ are ringed in red and named under the diagram.
    """
    if not diagram:
        return "<p><small>no message to draw</small></p>"
    lines = list(peers) + sorted({m["pid"] for m in diagram} - set(peers))
    row_h, left, right, top = 64, 150, 20, 40
    height = top + row_h * max(len(lines) - 1, 1) + 40
    times = [m["sent_at"] for m in diagram] + [d["delivered_at"] for m in diagram
                                               for d in m["deliveries"]]
    t0, t1 = min(times), max(times)
    span = (t1 - t0) or 1.0

    def x(t: float) -> float:
        return left + (width - left - right) * (t - t0) / span

    def y(peer: str) -> float:
        return top + row_h * lines.index(peer)

    origins = sorted({m["pid"] for m in diagram})
    colour = {o: _PALETTE[i % len(_PALETTE)] for i, o in enumerate(origins)}
    wrong: dict[tuple[str, int, str], str] = {}  # (peer, clock, pid) delivered at the divergence -> note
    if divergence:
        for side in ("a", "b"):
            at = divergence.get(f"at_{side}") or {}
            if at.get("clock") is not None:
                wrong[(divergence[f"peer_{side}"], at["clock"], at["pid"])] = (
                    f"{divergence[f'peer_{side}']} delivered ({at['clock']}, {at['pid']}) as #{at.get('index')}")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="space-time diagram">',
             '<defs><marker id="arrow" viewBox="0 0 6 6" refX="6" refY="3" markerWidth="6" '
             'markerHeight="6" orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#57606a"/></marker></defs>']
    for p in lines:
        parts.append(f'<line x1="{left}" y1="{y(p)}" x2="{width - right}" y2="{y(p)}" '
                     f'stroke="#8c959f" stroke-width="1.5"/>')
        parts.append(f'<text x="{left - 8}" y="{y(p) + 4}" font-size="12" text-anchor="end">'
                     f'{_e(p)}</text>')
    labels = _LabelRows()
    rings = []
    for m in sorted(diagram, key=lambda m: m["sent_at"]):
        sx, sy, c = x(m["sent_at"]), y(m["pid"]), colour[m["pid"]]
        for d in m["deliveries"]:
            if d["peer"] not in lines:
                continue
            dx, dy = x(d["delivered_at"]), y(d["peer"])
            note = wrong.get((d["peer"], m["clock"], m["pid"]))
            if note is not None:
                rings.append(f'<circle class="divergence" cx="{dx:.1f}" cy="{dy:.1f}" r="7" fill="none" '
                             f'stroke="#cf222e" stroke-width="2.5"><title>first divergence: {_e(note)}</title></circle>')
            if d["peer"] == m["pid"] and abs(dx - sx) < 1:
                continue
            parts.append(f'<line x1="{sx:.1f}" y1="{sy:.1f}" x2="{dx:.1f}" y2="{dy:.1f}" '
                         f'stroke="{c}" stroke-opacity=".55" marker-end="url(#arrow)">'
                         f'<title>({m["clock"]}, {_e(m["pid"])}) at {_e(d["peer"])}: index '
                         f'{d["index"]}</title></line>')
        parts.append(f'<circle cx="{sx:.1f}" cy="{sy:.1f}" r="3" fill="{c}"><title>({m["clock"]}, '
                     f'{_e(m["pid"])}) sent</title></circle>')
        text = str(m["clock"])
        w = LABEL_CHAR_W * len(text)
        row = labels.place(m["pid"], sx - w / 2, sx + w / 2)
        if row is not None:
            parts.append(f'<text class="clock-label" x="{sx:.1f}" y="{sy - 6 - 11 * row:.1f}" font-size="10" '
                         f'text-anchor="middle" fill="{c}">{text}</text>')
    parts += rings
    bottom = height - 4
    if divergence:
        named = "; ".join(sorted(wrong.values()))
        drawn = "" if rings else " (after the messages drawn here)"
        parts.append(f'<text class="divergence-note" x="{left}" y="{bottom}" font-size="11" fill="#cf222e">'
                     f'first divergence, position {divergence.get("position")}: {_e(named)}{drawn}</text>')
    else:
        parts.append(f'<text x="{width - right}" y="{bottom}" font-size="11" text-anchor="end">'
                     f'time →  ({span * 1000:.1f} ms shown)</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(result: dict) -> str:
    """The whole report page as one self-contained HTML string."""
    verdict = result["verdict"]
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>TOM verification: "
           f"{_e(verdict)}</title><style>{_CSS}</style></head><body>",
           f"<h1><span class='verdict' style='background:{VERDICT_COLOUR[verdict]}'>"
           f"{_e(verdict_line(result))}</span></h1>"]
    for p in result.get("problems", []):
        out.append(f"<p class='bad'>{_e(p)}</p>")
    for skipped in result.get("skipped", []):
        out.append(f"<p><small>{_e(skipped)}</small></p>")
    notes = handout_lines(result) + durable_lines(result)
    if notes:
        out.append("<p>" + "<br>".join(_e(line) for line in notes) + "</p>")
    counts = result.get("counts")
    if counts:
        out.append(f"<p>{counts['records']:,} records from {counts['peers']} peers · "
                   f"{counts['messages']:,} distinct messages · {counts['views']:,} views · "
                   f"checked in {result['timing'].get('total_s', 0):.1f} s</p>")
    rejoined = result.get("rejoins") or []
    if rejoined:
        out.append("<h2>Removed and admitted again</h2><p><small>Cut off by a partition (or restarted); "
                   "checked like a crashed member up to its cut, like a joiner from its return.</small></p>")
        out.append("<ul>" + "".join(f"<li>{_e(membership.describe(r))}</li>" for r in rejoined) + "</ul>")
    found = result.get("checks")
    if found:
        out.append("<h2>Checks</h2>")
        rows = [[title, found[k]["count"], meaning] for k, title, meaning in CHECKS if k in found]
        out.append(_table(["check", "violations", "meaning"], rows, {1}))
    diagram = result.get("diagram")
    if diagram:
        out.append(f"<h2>First {len(diagram)} messages</h2><p><small>One line per peer; each "
                   "message goes from its origin's send (dot, labelled with its Lamport clock) "
                   "to its delivery at every peer. Hover for details.</small></p>")
        div = (found or {}).get("divergence") or {}
        out.append(spacetime_svg(diagram, result.get("peers", []),
                                 divergence=(div.get("first") or [None])[0] if div.get("count") else None))
    lat = result.get("latency")
    if lat and lat["overall"].get("count"):
        out.append("<h2>Latency</h2>")
        out.append(histogram_svg(lat["histogram"]))
        rows = [[r["peer"] or "all", f"{r['count']:,}", _ms(r["p50"]), _ms(r["p95"]), _ms(r["p99"]),
                 _ms(r["max"])] for r in lat["per_peer"] + [dict(lat["overall"], peer="all")]]
        out.append(_table(["peer", "messages", "p50", "p95", "p99", "max"], rows, {1, 2, 3, 4, 5}))
    if found:
        for key, title, _ in CHECKS:
            c = found.get(key)
            if c and c["count"] and c["first"]:
                out.append(f"<h3 class='bad'>{_e(title)}: first {len(c['first'])} of {c['count']:,}</h3>")
                out.append("<ul>" + "".join(f"<li><code>{_e(_describe(r))}</code></li>"
                                            for r in c["first"]) + "</ul>")
    files = result.get("file_summaries", [])
    if files:
        out.append("<h2>Inputs</h2>")
        out.append(_table(["file", "lines", "records", "unreadable", "torn last line"],
                          [[f["path"], f"{f['lines']:,}", f"{f['records']:,}", f["bad_lines"],
                            "yes" if f["torn_last_line"] else ""] for f in files], {1, 2, 3}))
        for b in result.get("bad_lines", {}).get("first", []):
            out.append(f"<p><small>{_e(b['file'])}:{_e(b['line'])}: {_e(b['problem'])} — "
                       f"<code>{_e(b['excerpt'])}</code></small></p>")
    out.append("</body></html>\n")
    return "".join(out)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
