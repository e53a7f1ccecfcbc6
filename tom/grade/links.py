"""Which of the scripted peers' frames may go now, and to whom (pure: no I/O, time passed in).

Every frame a TOM peer sends to another member waits in the `Link` from that peer to that member, in
the order it was sent: a link only ever sends its head, so each sender's frames reach each member in
order (the handout's rule is safe only over FIFO links, and its tools send one connection at a time).
A test's script decides what the head may do:

* ``paused``: nothing goes;
* ``barriers``: regular expressions; a head that matches one waits (and so does all behind it) until
  the script lifts it;
* the *calm* rule, on links to the tool unless the script turns it off: an ACK of a message waits
  until that MESSAGE was written to the tool (so no premature ACK reaches the tool by accident: only
  the premature-ack test makes one), and a TOM peer's ACK of the tool's own message waits until the
  tool's own ACK of it was seen (it has its message back), or ``calm_wait`` seconds.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from ..codec.handout import HAck, HMessage, parse_line
from ..errors import FrameError

Key = tuple[int, str]


@dataclass
class Link:
    src: str  # a TOM peer's name
    dst: str  # a member's name (the tool's included)
    queue: deque[tuple[str, float]] = field(default_factory=deque)  # (line, when it was queued)
    paused: bool = False
    barriers: list[re.Pattern[str]] = field(default_factory=list)
    calm: bool = True
    sent: int = 0

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}"


def _frame_key(line: str) -> tuple[str, Key] | None:
    try:
        frame = parse_line(line)
    except FrameError:
        return None
    kind = "MESSAGE" if isinstance(frame, HMessage) else "ACK" if isinstance(frame, HAck) else "OTHER"
    return kind, frame.key


class Switchboard:
    """The links between TOM's scripted peers and the members, and what the calm rule knows."""

    def __init__(self, tool: str, tool_origin: str, calm_wait: float = 1.0) -> None:
        self.tool, self.tool_origin, self.calm_wait = tool, tool_origin, calm_wait
        self.links: dict[tuple[str, str], Link] = {}
        self.at_tool: set[Key] = set()  # MESSAGEs written to the tool
        self.tool_acked: set[Key] = set()  # keys whose ACK from the tool a TOM peer received

    def link(self, src: str, dst: str) -> Link:
        key = (src, dst)
        if key not in self.links:
            self.links[key] = Link(src, dst)
        return self.links[key]

    def queue(self, src: str, dst: str, line: str, now: float) -> Link:
        link = self.link(src, dst)
        link.queue.append((line, now))
        return link

    def blocked(self, link: Link, now: float) -> str | None:
        """Why ``link``'s head cannot go now (None: it can; "empty": nothing to send)."""
        if not link.queue:
            return "empty"
        if link.paused:
            return "paused"
        line, queued = link.queue[0]
        for barrier in link.barriers:
            if barrier.search(line):
                return f"held at {barrier.pattern!r}"
        if link.dst == self.tool and link.calm:
            parsed = _frame_key(line)
            if parsed is not None and parsed[0] == "ACK":
                key = parsed[1]
                if key[1] == self.tool_origin:
                    if key not in self.tool_acked and now - queued < self.calm_wait:
                        return "waits for the tool's own ACK of its message"
                elif key not in self.at_tool:
                    return "waits for its MESSAGE to reach the tool"
        return None

    def sent(self, link: Link) -> str:
        """The head of ``link`` went out: take it off and learn from it."""
        line, _ = link.queue.popleft()
        link.sent += 1
        if link.dst == self.tool:
            parsed = _frame_key(line)
            if parsed is not None and parsed[0] == "MESSAGE":
                self.at_tool.add(parsed[1])
        return line

    def heard_from_tool(self, line: str) -> None:
        parsed = _frame_key(line)
        if parsed is not None and parsed[0] == "ACK":
            self.tool_acked.add(parsed[1])

    # the script's verbs -------------------------------------------------------------------------
    def pause(self, src: str, dst: str) -> None:
        self.link(src, dst).paused = True

    def resume(self, src: str, dst: str) -> None:
        self.link(src, dst).paused = False

    def hold(self, src: str, dst: str, pattern: str) -> None:
        self.link(src, dst).barriers.append(re.compile(pattern))

    def lift(self, src: str, dst: str, pattern: str | None = None) -> None:
        link = self.link(src, dst)
        link.barriers = [] if pattern is None else [b for b in link.barriers if b.pattern != pattern]

    def idle(self) -> bool:
        return all(not link.queue for link in self.links.values())
