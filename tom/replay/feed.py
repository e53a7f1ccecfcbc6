"""A read-back run as the dashboard's events and as a ShiViz log.

`dashboard_events` gives the events a live peer's ``/api/events`` would have streamed (`tom.web.eventfeed`:
the same ``frame`` arrows, ``deliver`` and ``view`` events, with the same fields), each tagged with its
peer, so that the dashboard draws a finished run as it drew the live one. `shiviz_events` gives one
ShiViz event per frame sent, frame received and delivery, with vector clocks from the send/receive pairs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..codec.frames import Message
from ..codec.pid import pid_key
from ..codec.shiviz import VectorClocks
from ..web.eventfeed import WATCHED, arrows
from .run import Delivered, FrameEvent, Run

MAX_REPLAY_EVENTS = 200_000
"""Events a replay page is given at most (the first ones of the run; the page says how many were left)."""


def dashboard_events(run: Run, limit: int = MAX_REPLAY_EVENTS) -> tuple[list[dict[str, Any]], int]:
    """``([{"peer", "name", "data"}], events left out)`` in the run's causal order."""
    members: dict[str, tuple[str, ...]] = {}  # each peer's view, in pid order (what marks' positions name)
    everyone = tuple(sorted(run.peers, key=pid_key))
    out: list[dict[str, Any]] = []
    left = 0
    for n, e in enumerate(run.events, 1):
        if len(out) >= limit:
            left += 1
            continue
        if type(e) is Delivered:
            r = e.record
            if r.get("kind") == "view":
                members[e.peer] = tuple(sorted(r.get("members", ()), key=pid_key))
                data = {k: r.get(k) for k in ("index", "clock", "pid", "view", "members", "joined", "left",
                                              "removed", "order")}
                for k in ("members", "joined", "left", "removed"):
                    data[k] = data[k] or []
                name = "view"
            else:
                data = {k: r.get(k) for k in ("index", "clock", "pid", "text", "view", "sent_at")}
                data["released"] = False
                for k in ("seq", "vc"):
                    if k in r:
                        data[k] = r[k]
                name = "deliver"
            data.update(t=e.t, n=n)
            out.append({"peer": e.peer, "name": name, "data": data})
            continue
        view = members.get(e.peer, everyone)
        for frame in e.frames:
            if type(frame) not in WATCHED:
                continue
            for kind, clock, pid, extra in arrows(frame, view, e.link if e.dir == "in" else None):
                data = {"dir": e.dir, "kind": kind, "clock": clock, "pid": pid, "lamport": None, "t": e.t, "n": n,
                        "link": e.link, "number": e.n, **extra}
                if e.dir == "in":
                    data["from"] = e.link
                else:
                    data["to"] = [e.link]
                out.append({"peer": e.peer, "name": "frame", "data": data})
    return out, left


def _described(e: FrameEvent) -> str:
    """A frame event in words, for ShiViz: direction, link, number, and the frame as on the wire."""
    arrow = f"send to {e.link}" if e.dir == "out" else f"receive from {e.link}"
    frame = e.frames[0] if e.frames else None
    if type(frame) is Message and len(e.frames) == 1:
        what = f"MESSAGE ({frame.clock}, {frame.pid}) {frame.text!r}"
    elif e.frames and all(type(f) is Message for f in e.frames) and len(e.frames) > 1:
        what = f"{len(e.frames)} MESSAGES ({e.frames[0].clock}..{e.frames[-1].clock}, {e.frames[0].pid})"  # type: ignore[attr-defined]
    else:
        what = e.line if len(e.line) <= 160 else e.line[:157] + "..."
    return f"{arrow} #{e.n}: {what}"


def shiviz_events(run: Run) -> Iterator[tuple[str, dict[str, int], str]]:
    """``(host, vector clock, what)`` for every event of the run, in its causal order."""
    clocks = VectorClocks()
    for i, e in enumerate(run.events):
        if type(e) is Delivered:
            r = e.record
            if r.get("kind") == "view":
                what = f"install view {r.get('view')} #{r.get('index')}: {len(r.get('members') or ())} members"
            else:
                what = f"deliver #{r.get('index')}: ({r.get('clock')}, {r.get('pid')}) {r.get('text')!r}"
            yield e.peer, clocks.local(e.peer), what
        elif e.dir == "out":
            yield e.peer, clocks.send(e.peer, i), _described(e)
        else:
            yield e.peer, clocks.receive(e.peer, run.pairs.get(i)), _described(e)

