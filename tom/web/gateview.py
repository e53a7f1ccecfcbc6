"""Step mode's gate as plain data, for ``/api/gate``, the status and the dashboard's Step panel.

A held frame is shown as the diagram draws it (``shows``: a MESSAGE with its text, an ACK per clock of an
ACK or ACKS, for marks an ACK of the last message of each origin they cover, a SEQ per number), with
its wire line; an ACK of a message this peer has not received yet is marked ``ahead`` (releasing it
now makes a premature ACK). What passes by itself at the head (heartbeats, membership frames,
connection events) is shown by name only. Like `tom.web.snapshot`, nothing here keeps a reference
into the peer: every call builds fresh JSON-able data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..codec.frames import Ack, Acks, Frame, Marks, Message, Relay, Seq, format_frame
from ..core import Core
from ..peer.events import Connected, Disconnected, FramesIn
from ..peer.gate import Gate, Waiting

QUEUE_SHOWN = 20
"""Items of a link's queue listed (the head first); ``waiting`` counts them all."""
LINE_SHOWN = 300
"""Characters of a frame's wire line shown."""

Received = Callable[[str, int], bool]
"""Whether this peer has received the message ``(pid, clock)`` from its origin."""


def received_by(core: Core) -> Received:
    """`Received` for ``core`` now: its own messages, and those up to its mark of each origin."""
    me, out = core.me, core.out
    index, holding = dict(out.index), list(out.holding)

    def received(pid: str, clock: int) -> bool:
        i = index.get(pid)
        return pid == me or (i is not None and i < len(holding) and holding[i] >= clock)

    return received


def frame_items(frame: Frame, members: tuple[str, ...], sender: str,
                received: Received | None = None) -> list[dict[str, Any]]:
    """What a diagram draws for ``frame`` from ``sender``: one dict per arrow (``kind``, ``clock``,
    ``pid``, and a MESSAGE's ``text``, a SEQ's ``seq``, an ACK's ``ahead``)."""
    t = type(frame)

    def ack(clock: int, pid: str) -> dict[str, Any]:
        item: dict[str, Any] = {"kind": "ACK", "clock": clock, "pid": pid}
        if received is not None:
            item["ahead"] = not received(pid, clock)
        return item

    if t is Ack:
        return [ack(frame.clock, frame.pid)]  # type: ignore[attr-defined]
    if t is Acks:
        return [ack(c, frame.pid) for c in frame.clocks]  # type: ignore[attr-defined]
    if t is Seq:
        return [{"kind": "SEQ", "clock": c, "pid": frame.pid, "seq": frame.first + i}  # type: ignore[attr-defined]
                for i, c in enumerate(frame.clocks)]  # type: ignore[attr-defined]
    items: list[dict[str, Any]] = []
    if t is Message or t is Relay:
        items.append({"kind": "MESSAGE" if t is Message else "RELAY", "clock": frame.clock,  # type: ignore[attr-defined]
                      "pid": frame.pid, "text": frame.text})  # type: ignore[attr-defined]
    marks = getattr(frame, "marks", None) if t is Message or t is Marks else None
    if marks is not None and len(marks) == len(members):
        items.extend(ack(clock, pid) for pid, clock in zip(members, marks) if clock and pid != sender)
    return items


def waiting_dict(w: Waiting, src: str, members: tuple[str, ...], received: Received | None) -> dict[str, Any]:
    """One item of a link's queue: a held frame in full, anything else by name."""
    e = w.event
    if type(e) is Connected:
        return {"frame": "connected", "passes": True}
    if type(e) is Disconnected:
        return {"frame": "disconnected", "passes": True}
    frame = e.frames[0]  # type: ignore[union-attr]
    line = format_frame(frame)
    name = line.split("-", 1)[0].split("@", 1)[0].split("+", 1)[0]
    if not w.held:
        return {"frame": name, "passes": True}
    return {"frame": name, "passes": False, "shows": frame_items(frame, members, src, received),
            "line": line if len(line) <= LINE_SHOWN else line[:LINE_SHOWN - 1] + "…"}


def gate_summary(gate: Gate | None) -> dict[str, Any] | None:
    """For the status: ``{"held": N, "links": L, "holding": bool}`` (frames held, links holding any, whether
    it holds what comes), None when step mode is off."""
    if gate is None:
        return None
    return {"held": gate.held(), "links": sum(1 for _ in gate.heads()), "holding": gate.holding}


def gate_view(gate: Gate, core: Core) -> dict[str, Any]:
    """The gate of ``core``'s peer: per link holding something, the source, the frames held, the head
    shown in full and the first QUEUE_SHOWN items of its queue."""
    members = core.member_order
    received = received_by(core)
    links = []
    for src, queue in gate.heads():
        shown = [waiting_dict(w, src, members, received) for w in list(queue)[:QUEUE_SHOWN]]
        links.append({"from": src, "held": sum(1 for w in queue if w.held), "waiting": len(queue),
                      "head": shown[0], "queue": shown})
    return {"peer": core.me, "held": sum(link["held"] for link in links), "released": gate.released,
            "holding": gate.holding, "links": links}


def released_view(src: str, frame: Frame, core: Core) -> dict[str, Any]:
    """A frame just released from ``src``, shown as a held frame is (without ``ahead``: it is taken)."""
    return waiting_dict(Waiting(0, FramesIn(src, [frame])), src, core.member_order, None)


class GateControl:
    """What the HTTP API may do with a peer's gate: look (`view`, `summary`) and release. Every answer
    is plain data; the frames go on through the gate (to the processor), never to the core directly."""

    def __init__(self, gate: Gate, core: Core, neighbors: frozenset[str]) -> None:
        self._gate, self._core, self.neighbors = gate, core, neighbors

    def view(self) -> dict[str, Any]:
        return gate_view(self._gate, self._core)

    def summary(self) -> dict[str, Any] | None:
        return gate_summary(self._gate)

    async def release(self, src: str) -> dict[str, Any]:
        """Release ``src``'s head (NothingHeld if none)."""
        frame = await self._gate.release(src)
        return {"released": 1, "from": src, "frame": released_view(src, frame, self._core), "held": self._gate.held()}

    async def release_random(self) -> dict[str, Any]:
        """Release the head of a link drawn at random (NothingHeld if nothing is held)."""
        src, frame = await self._gate.release_random()
        return {"released": 1, "from": src, "frame": released_view(src, frame, self._core), "held": self._gate.held()}

    async def hold(self, on: bool) -> dict[str, Any]:
        """Close the gate (``on``) or open it, releasing what it holds."""
        n = await self._gate.hold(on)
        return {"holding": on, "released": n, "held": self._gate.held()}

    async def release_all(self) -> dict[str, Any]:
        """Release everything held, oldest first (bounded: `tom.peer.gate.MAX_RELEASE`)."""
        n = await self._gate.release_all()
        return {"released": n, "held": self._gate.held()}
