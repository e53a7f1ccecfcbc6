"""Each rule's situation, made on purpose (``docs/grading.md`` tells each one in words).

The group is the tool T and two scripted peers, B and C, on three 5-digit loopback ports with
B < T < C, all writing the tool's from form; so "the smaller process identifier" is B's for every
reading. A scenario drives the tool (`Scene.tool_sends`), makes the scripted peers send, pauses, holds
and lets go the links between them and the tool, and notes in ``marks`` what its judge
(`judges.JUDGES`) needs. A wait that runs out raises `judges.Failed` naming what did not come.

Texts are a sender's letter and a number (``B1``, ``T2``): no space, no ``-``, nothing a menu rule
could take for a question.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Awaitable, Callable

import trio

from ..codec.handout import parse_line
from .driver import Tool
from .judges import Failed
from .stage import Stage
from .toolfile import Delivered, parse_output, printed_deliveries

WAIT = 10.0  # seconds for the tool to answer a frame (its MESSAGE, its ACK) or the group to deliver
SETTLE = 3.0  # seconds for the tool's deliveries to show (file or printed) before it is asked to quit
HOLD = 0.7  # seconds the scenario leaves a situation standing before it looks and lets go


class Scene:
    """What a scenario works with: the stage, the tool, a seeded random source and its marks."""

    def __init__(self, stage: Stage, tool: Tool, rng: random.Random, tool_out: Path, line_regex: str,
                 deadline: float = float("inf")) -> None:
        self.stage, self.tool, self.rng = stage, tool, rng
        self.deadline = deadline  # trio time when the test's time limit comes
        self.tool_out, self.line_regex = tool_out, line_regex
        self.marks: dict = {"lines": {}}
        self._count: dict[str, int] = {}

    # -- names and lines --------------------------------------------------------------------------
    def text(self, name: str) -> str:
        self._count[name] = self._count.get(name, 0) + 1
        return f"{name}{self._count[name]}"

    def origin(self, name: str) -> str:
        return self.stage.by_name[name].origin

    def key(self, text: str) -> tuple[int, str]:
        frame = parse_line(self.marks["lines"][text])
        return frame.key

    def ack_line(self, text: str) -> str:
        clock, origin = self.key(text)
        return f"ACK-{clock}-{origin}"

    def within(self, seconds: float) -> float:
        """``seconds``, cut so that a wait running out still leaves time to quit and judge before the
        test's time limit (a tool that stalls then fails the rule rather than being called hung)."""
        return max(1.0, min(seconds, self.deadline - trio.current_time() - 8.0))

    # -- doing ------------------------------------------------------------------------------------
    def peer_sends(self, name: str, clock: int | None = None) -> str:
        text = self.text(name)
        self.marks["lines"][text] = self.stage.send(name, text, clock)
        return text

    async def tool_sends(self) -> str:
        """Menu 1 with a new text; waits until its MESSAGE reached every scripted peer."""
        text = self.text("T")
        await self.tool.send(text)
        limit = self.within(WAIT)
        arrived = await self.stage.until(lambda: self._tool_message(text) is not None
                                         and all(self._tool_message(text, p.member.name)
                                                 for p in self.stage.peers), limit)
        if not arrived:
            raise Failed(f"the tool's MESSAGE with text {text} at every TOM peer after menu 1",
                         f"none after {limit:.0f} s" if self._tool_message(text) is None else
                         f"only at some after {limit:.0f} s")
        self.marks["lines"][text] = self._tool_message(text)
        return text

    def _tool_message(self, text: str, name: str | None = None) -> str | None:
        names = [name] if name else [p.member.name for p in self.stage.peers]
        for n in names:
            for line in self.stage.tool_lines(n):
                if line.startswith("MESSAGE-") and line.endswith("-" + text):
                    return line
        return None

    async def until(self, condition: Callable[[], bool], expected: str, limit: float = WAIT) -> None:
        limit = self.within(limit)
        if not await self.stage.until(condition, limit):
            raise Failed(expected, f"nothing after {limit:.0f} s")

    async def reached_tool(self, line: str, sender: str) -> None:
        await self.until(lambda: any(w == line and s == sender for _, s, w in self.stage.written_to_tool),
                         f"{line} from {self.origin(sender)} written to the tool")

    async def tool_acked(self, text: str, names: list[str] | None = None) -> None:
        """Wait for the tool's ACK of ``text`` at the scripted peers named (default: all)."""
        key = self.key(text)
        limit = self.within(WAIT)
        if not await self.stage.until(lambda: self.stage.acked_by_tool(key, names), limit):
            missing = [p.member.origin for p in self.stage.peers
                       if (names is None or p.member.name in names) and not self.stage.acked_by_tool(key, [p.member.name])]
            raise Failed(f"the tool's ACK of {self.marks['lines'][text]} at {', '.join(missing)}",
                         f"none after {limit:.0f} s")

    async def delivered_everywhere(self, texts: list[str], limit: float = WAIT) -> None:
        """Wait until every scripted peer delivered ``texts`` (so the tool acknowledged each)."""
        limit = self.within(limit)
        if await self.stage.until(lambda: self.stage.all_delivered(texts), limit):
            return
        for text in texts:
            key = self.key(text)
            for p in self.stage.peers:
                if not self.stage.acked_by_tool(key, [p.member.name]):
                    raise Failed(f"the tool's ACK of {self.marks['lines'][text]} at {p.member.origin}",
                                 f"none after {limit:.0f} s")
        late = [t for t in texts if not all(t in p.delivered_texts() for p in self.stage.peers)]
        raise Failed(f"{', '.join(late[:5])} delivered by TOM's peers (the tool's ACKs came)",
                     f"not after {limit:.0f} s")

    def live(self) -> list[Delivered]:
        """What the tool has delivered so far, as far as can be seen: its file or its printed lines."""
        from_file: list[Delivered] = []
        try:
            from_file = parse_output(self.tool_out.read_text("utf-8", errors="replace"), self.line_regex)[0]
        except OSError:
            pass
        printed = printed_deliveries(self.tool.screen)
        return from_file if len(from_file) >= len(printed) else printed

    async def tool_settles(self, texts: list[str], limit: float = SETTLE) -> float:
        """Give the tool up to ``limit`` s to show ``texts`` delivered; the seconds waited."""
        start = trio.current_time()
        await self.stage.until(lambda: set(texts) <= {d.text for d in self.live()}, limit)
        return trio.current_time() - start

    async def look_early(self) -> None:
        """After `HOLD` s, note what the tool has delivered by now (``early``)."""
        await trio.sleep(HOLD)
        self.marks["early"] = [d.text for d in self.live()]
        self.marks["early_at"] = self.stage.now()

    async def drain(self) -> None:
        """Each scripted peer sends one more message, one after the other, all links open: a tool that
        releases one ready message per ACK catches up on the ACKs they bring."""
        for p in self.stage.peers:
            text = self.peer_sends(p.member.name)
            await self.delivered_everywhere([text])

    async def settle_all(self) -> None:
        """At the end of a scenario: give the tool up to `SETTLE` s to show every message TOM's peers
        delivered (the output-file check compares its file with theirs), so that a run never ends
        between a peer's delivery and the tool's."""
        texts = {text for p in self.stage.peers for text in p.delivered_texts()}
        await self.tool_settles(sorted(texts))


def _ack_pattern(line: str) -> str:
    return "^" + re.escape(line) + "$"


# -- the rules --------------------------------------------------------------------------------------

async def one_each_way(s: Scene) -> None:
    t1 = await s.tool_sends()
    await s.delivered_everywhere([t1])
    b1 = s.peer_sends("B")
    await s.delivered_everywhere([b1])
    s.marks["order"] = [t1, b1]
    await s.tool_settles([t1, b1])


async def clock(s: Scene) -> None:
    c = 500 + s.rng.randrange(500)
    b1 = s.peer_sends("B", clock=c)
    await s.delivered_everywhere([b1])
    s.marks.update(received_clock=c, received=s.marks["lines"][b1])
    try:
        t1 = await s.tool_sends()
    except Failed:
        s.marks["tool_message"] = None
        return
    line = s.marks["lines"][t1]
    s.marks.update(tool_message=line, tool_clock=parse_line(line).clock)
    # the run ends with the tool's message delivered too, where it can be (TOM's peers may not deliver
    # a message whose clock is below what they delivered): the judge decides on the clock alone
    await s.stage.until(lambda: s.stage.all_delivered([t1]), s.within(SETTLE))
    await s.tool_settles([b1, t1])


async def tie(s: Scene) -> None:
    board = s.stage.board
    assert board is not None
    c = 20 + s.rng.randrange(20)
    for a, b in (("B", "C"), ("C", "B"), ("B", "T"), ("C", "T")):
        board.pause(a, b)
    b1 = s.peer_sends("B", clock=c)
    c1 = s.peer_sends("C", clock=c)
    # the larger from reaches the tool first, each MESSAGE alone (its sender's ACK held behind it)
    for name, text in (("C", c1), ("B", b1)):
        board.hold(name, "T", r"^ACK-")
        board.resume(name, "T")
        await s.reached_tool(s.marks["lines"][text], name)
        await s.tool_acked(text)
    # then the smaller from's ACKs first, so it is complete at the tool before the other: only the
    # tie decides the order (a tool that takes whichever is complete first is not caught here)
    board.lift("B", "T")
    await s.reached_tool(s.ack_line(b1), "B")
    board.resume("B", "C")
    board.lift("C", "T")
    await s.reached_tool(s.ack_line(b1), "C")
    board.resume("C", "B")
    await s.delivered_everywhere([b1, c1])
    s.marks.update(order=[b1, c1], clock=c, small_from=s.origin("B"))
    await s.tool_settles([b1, c1])


async def premature_ack(s: Scene) -> None:
    board = s.stage.board
    assert board is not None
    board.pause("B", "T")
    board.link("C", "T").calm = False  # C's ACK may overtake B's MESSAGE: that is the test
    b1 = s.peer_sends("B")
    await s.reached_tool(s.ack_line(b1), "C")
    acked_at = s.stage.now()
    await trio.sleep(HOLD)
    board.resume("B", "T")
    await s.reached_tool(s.marks["lines"][b1], "B")
    s.marks.update(message=b1, ack_lead=s.stage.now() - acked_at)
    await s.delivered_everywhere([b1])
    s.marks["waited"] = await s.tool_settles([b1], SETTLE + 2)


async def all_acks(s: Scene) -> None:
    board = s.stage.board
    assert board is not None
    for b in ("T", "B"):
        board.pause("C", b)
    c1 = s.peer_sends("C", clock=5)  # sent before C hears of B1, held from everyone
    b1 = s.peer_sends("B", clock=10)  # reaches the tool with B's ACK; C's ACK waits behind C1
    await s.tool_acked(b1, ["B"])
    await s.look_early()  # b1 has n-1 ACKs at the tool now
    ack_b1 = s.ack_line(b1)
    board.hold("C", "T", _ack_pattern(ack_b1))  # C1 and its ACKs first, C's ACK of B1 last
    for b in ("T", "B"):
        board.resume("C", b)
    await s.tool_acked(c1)
    await s.reached_tool(s.ack_line(c1), "B")
    await trio.sleep(HOLD)
    board.lift("C", "T")
    await s.delivered_everywhere([c1, b1])
    s.marks.update(order=[c1, b1], held=b1)
    await s.drain()
    await s.tool_settles([c1, b1])


async def head(s: Scene) -> None:
    board = s.stage.board
    assert board is not None
    board.pause("B", "C")  # C hears of B1 only at the end: its ACK of B1 is the head's last
    b1 = s.peer_sends("B", clock=5)
    await s.tool_acked(b1, ["B"])
    c1 = s.peer_sends("C", clock=8)
    await s.tool_acked(c1)
    await s.reached_tool(s.ack_line(c1), "B")
    await s.look_early()  # c1 has all its ACKs behind the head b1 now
    board.resume("B", "C")
    await s.delivered_everywhere([b1, c1])
    s.marks.update(order=[b1, c1], held=c1)
    await s.drain()
    await s.tool_settles([b1, c1])


async def cascade(s: Scene) -> None:
    board = s.stage.board
    assert board is not None
    board.pause("B", "C")
    b1 = s.peer_sends("B", clock=5)
    await s.tool_acked(b1, ["B"])
    behind = [s.peer_sends("C", clock=8) for _ in range(3)]
    for text in behind:
        await s.tool_acked(text)
        await s.reached_tool(s.ack_line(text), "B")
    await trio.sleep(HOLD)
    board.resume("B", "C")  # C acknowledges B1: the head's last ACK, the last frame the tool gets
    await s.reached_tool(s.ack_line(b1), "C")
    released = len(s.stage.written_to_tool)
    await s.delivered_everywhere([b1, *behind])
    s.marks.update(order=[b1, *behind])
    s.marks["waited"] = await s.tool_settles([b1, *behind], SETTLE + 2)
    s.marks["frames_after_release"] = len(s.stage.written_to_tool) - released


async def sends_acks(s: Scene) -> None:
    b1 = s.peer_sends("B")
    await s.delivered_everywhere([b1])
    t1 = await s.tool_sends()
    await s.delivered_everywhere([t1])
    await trio.sleep(HOLD)  # a second ACK, if any, would come now
    acks: dict[str, dict[str, int]] = {}
    for p in s.stage.peers:
        lines = s.stage.tool_lines(p.member.name)
        acks[p.member.origin] = {t: lines.count(s.ack_line(t)) for t in (b1, t1)}
    s.marks.update(acks=acks, order=[b1, t1])
    await s.tool_settles([b1, t1])


LOAD_MESSAGES = 300
LOAD_TOOL_SHARE = 0.2
LOAD_WAIT = 40.0


async def load(s: Scene) -> None:
    plan = [("T" if s.rng.random() < LOAD_TOOL_SHARE else s.rng.choice("BC"), s.rng.uniform(0, 0.03))
            for _ in range(LOAD_MESSAGES)]
    sent: list[str] = []

    async def peers() -> None:
        for name, gap in plan:
            if name != "T":
                await trio.sleep(gap)
                sent.append(s.peer_sends(name))

    async def tool() -> None:
        for name, gap in plan:
            if name == "T":
                await trio.sleep(gap)
                text = s.text("T")
                await s.tool.send(text)
                sent.append(text)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(peers)
        nursery.start_soon(tool)
    want = len(plan)

    def everyone_has_all() -> bool:
        return all(len(p.deliveries) >= want for p in s.stage.peers)

    limit = s.within(LOAD_WAIT)
    if not await s.stage.until(everyone_has_all, limit):
        least = min(len(p.deliveries) for p in s.stage.peers)
        raise Failed(f"all {want} messages delivered by TOM's peers (the tool acknowledging each)",
                     f"{least} after {limit:.0f} s")
    order = s.stage.peers[0].delivered_texts()
    s.marks.update(order=order, sent=len(sent))
    await s.tool_settles(order, SETTLE + 2)


async def quit_(s: Scene) -> None:
    t1 = await s.tool_sends()
    await s.delivered_everywhere([t1])
    s.marks["order"] = [t1]
    await s.tool_settles([t1])


MALFORMED_LINES = ("HELLO", "MESSAGE-x-127.0.0.1:1-bad clock", "ACK-", "MESSAGE-3", "ACK-7-nowhere",
                   "MESSAGE-99999999999999999999999-127.0.0.1:1-too big", "\u00e9\u00e8-not-a-frame", "")


async def malformed(s: Scene) -> None:
    for line in MALFORMED_LINES:
        s.stage.send_raw("B", line)
    b1 = s.peer_sends("B")
    await s.delivered_everywhere([b1])
    t1 = await s.tool_sends()
    await s.delivered_everywhere([t1])
    s.marks["order"] = [b1, t1]
    await s.tool_settles([b1, t1])


SCENARIOS: dict[str, Callable[[Scene], Awaitable[None]]] = {
    "one-each-way": one_each_way, "clock": clock, "tie": tie, "premature-ack": premature_ack,
    "all-acks": all_acks, "head": head, "cascade": cascade, "sends-acks": sends_acks, "load": load,
    "quit": quit_, "malformed": malformed,
}
