"""TOM's scripted handout peers: the rest of the tool's group, on loopback (a thin trio shell).

Each scripted peer is a correct handout peer (`tom.core.handout.HandoutCore`: ACK counting, premature
ACKs reserved, head-only delivery and the cascade) with a listener on its own port; the tool's frames
come in there (one line per connection, as the handout's tools send; a connection holding several
lines is read line by line too). What a scripted peer sends goes through `links.Switchboard`, whose
links the test's script pauses, holds and lets go: to the tool, one TCP connection per frame, each link
one connection at a time (so each sender's frames reach the tool in order); between scripted peers, in
memory. A peer's frames to itself are taken at once and not recorded.

Every frame a scripted peer sends or receives is appended to ``frames.jsonl`` as it happens; the
peers' deliveries go to ``peers/<i>.out`` in the handout's line form when the stage closes.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

import trio

from ..codec.handout import HandoutFrame, format_frame, parse_line
from ..core.handout import HandoutCore, HandoutDelivery
from ..errors import FrameError
from .links import Link, Switchboard

LOOPBACK = "127.0.0.1"
TOOL = "T"
PEER_NAMES = "BCDEFGHIJKLMNOPQRSUVWXYZ"


@dataclass
class Member:
    name: str
    port: int
    origin: str = ""  # the from it writes

    @property
    def pid(self) -> str:
        return f"{LOOPBACK}:{self.port}"


def origin_like(tool_origin: str, tool_port: int, port: int) -> str:
    """The tool's from form with ``port`` in place of its own (``127.0.0.1:PORT`` if it names no port)."""
    suffix = f":{tool_port}"
    if tool_origin.endswith(suffix):
        return tool_origin[: -len(suffix)] + f":{port}"
    return f"{LOOPBACK}:{port}"


@dataclass
class ScriptedPeer:
    index: int  # 1, 2, ...: peers/<index>.out
    member: Member
    core: HandoutCore | None = None
    deliveries: list[tuple[float, HandoutDelivery]] = field(default_factory=list)
    from_tool: list[tuple[float, str]] = field(default_factory=list)  # lines the tool sent it

    def delivered_texts(self) -> list[str]:
        return [d.text for _, d in self.deliveries]


class Stage:
    """The scripted peers of one test. ``open`` them (listeners up), start the tool, then ``begin``
    with the tool's from; the script uses `send`, the switchboard's verbs and `until`."""

    def __init__(self, folder: Path, tool_port: int, peer_ports: list[int], *, calm_wait: float = 1.0) -> None:
        self.folder = folder
        self.tool = Member(TOOL, tool_port)
        self.peers = [ScriptedPeer(i + 1, Member(PEER_NAMES[i], port)) for i, port in enumerate(peer_ports)]
        self.members = [self.tool] + [p.member for p in self.peers]  # the neighbors file's order
        self.by_name = {m.name: m for m in self.members}
        self.by_pid = {m.pid: m for m in self.members}
        self.calm_wait = calm_wait
        self.board: Switchboard | None = None
        self.t0 = trio.current_time()
        self._changed = trio.Event()
        self._early: list[tuple[ScriptedPeer, str]] = []  # tool frames before `begin`
        self._frames: TextIO | None = None
        self.written_to_tool: list[tuple[float, str, str]] = []  # (t, sender name, line)
        self.problems: list[str] = []
        self.origin_seen: str | None = None  # the from the tool's own MESSAGEs carry
        self._nursery: trio.Nursery | None = None

    # -- set-up ------------------------------------------------------------------------------------
    def peer(self, name: str) -> ScriptedPeer:
        return next(p for p in self.peers if p.member.name == name)

    def neighbors_text(self) -> str:
        return "".join(f"{m.pid}\n" for m in self.members)

    async def open(self, nursery: trio.Nursery) -> None:
        """Listen on every scripted peer's port and open frames.jsonl; when a port is taken, OSError
        with nothing left open or started."""
        bound: list[list[trio.SocketListener]] = []
        try:
            for peer in self.peers:
                bound.append(await trio.open_tcp_listeners(peer.member.port, host=LOOPBACK))
        except OSError:
            for listeners in bound:
                for listener in listeners:
                    await listener.aclose()
            raise
        self._nursery = nursery
        self._frames = open(self.folder / "frames.jsonl", "w", encoding="utf-8")
        for peer, listeners in zip(self.peers, bound):
            nursery.start_soon(self._serve_all, peer, listeners)

    async def _serve_all(self, peer: ScriptedPeer, listeners: list[trio.SocketListener]) -> None:
        async def handler(stream: trio.SocketStream) -> None:
            await self._serve(peer, stream)
        await trio.serve_listeners(handler, listeners)

    def begin(self, tool_origin: str) -> None:
        """The tool's from is known: make the peers' cores (same from form) and start the links."""
        assert self._nursery is not None
        self.tool.origin = tool_origin
        for peer in self.peers:
            peer.member.origin = origin_like(tool_origin, self.tool.port, peer.member.port)
        pids = [m.pid for m in self.members]
        for peer in self.peers:
            peer.core = HandoutCore(peer.member.pid, peer.member.origin, pids)
        self.board = Switchboard(TOOL, tool_origin, self.calm_wait)
        for peer in self.peers:
            for m in self.members:
                if m is not peer.member:
                    self._nursery.start_soon(self._pump, self.board.link(peer.member.name, m.name))
        early, self._early = self._early, []
        for peer, line in early:
            self._take(peer, line)
        self.notify()

    def close(self) -> None:
        """Write peers/<i>.out and close frames.jsonl (the tasks are the nursery's to cancel)."""
        out = self.folder / "peers"
        out.mkdir(exist_ok=True)
        for peer in self.peers:
            (out / f"{peer.index}.out").write_text(
                "".join(f"{d.acks} ACKs on MESSAGE-{d.clock}-{d.origin}-{d.text}\n" for _, d in peer.deliveries),
                encoding="utf-8")
        if self._frames is not None:
            self._frames.close()
            self._frames = None

    # -- time and waiting --------------------------------------------------------------------------
    def now(self) -> float:
        return trio.current_time() - self.t0

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, condition: Callable[[], bool], limit: float) -> bool:
        """Wait until ``condition()`` holds (True) or ``limit`` seconds pass (False)."""
        with trio.move_on_after(limit):
            while not condition():
                with trio.move_on_after(0.05):
                    await self._changed.wait()
            return True
        return condition()

    # -- the scripted peers' side -----------------------------------------------------------------
    def send(self, name: str, text: str, clock: int | None = None) -> str:
        """Scripted peer ``name`` multicasts ``text`` (with ``clock`` if given: its clock jumps to
        ``clock - 1`` first); returns the MESSAGE line."""
        peer = self.peer(name)
        assert peer.core is not None, "begin() first"
        if clock is not None:
            peer.core.clock = max(peer.core.clock, clock - 1)
        frame = peer.core.send(text)
        self._route(peer)
        return format_frame(frame)

    def send_raw(self, name: str, line: str) -> None:
        """Scripted peer ``name`` sends ``line`` as it is to the tool (the malformed test)."""
        assert self.board is not None
        self.board.queue(name, TOOL, line, self.now())
        self.notify()

    def _route(self, peer: ScriptedPeer) -> None:
        assert peer.core is not None and self.board is not None
        local: deque[str] = deque()
        while True:
            ready = peer.core.ready()
            now = self.now()
            for d in ready.deliveries:
                peer.deliveries.append((now, d))
            for send in ready.sends:
                line = format_frame(send.frame)
                for pid in send.to:
                    if pid == peer.member.pid:
                        local.append(line)
                    elif pid in self.by_pid:
                        self.board.queue(peer.member.name, self.by_pid[pid].name, line, now)
            if not local:
                break
            self._feed(peer, local.popleft())
        self.notify()

    def _feed(self, peer: ScriptedPeer, line: str) -> None:
        assert peer.core is not None
        try:
            frame: HandoutFrame = parse_line(line)
        except FrameError:
            peer.core.bad_line()
            return
        peer.core.receive(frame, self.now())

    def _record(self, direction: str, peer: Member, other: str, line: str) -> None:
        if self._frames is not None:
            self._frames.write(json.dumps({"t": round(self.now(), 4), "dir": direction, "peer": peer.origin
                                           or peer.pid, "other": other, "line": line}) + "\n")
            self._frames.flush()

    async def _pump(self, link: Link) -> None:
        assert self.board is not None
        board = self.board
        src = self.peer(link.src)
        dst = self.by_name[link.dst]
        while True:
            while board.blocked(link, self.now()) is not None:
                with trio.move_on_after(0.05):
                    await self._changed.wait()
            line = link.queue[0][0]
            if dst is self.tool:
                if not await self._write_to_tool(line):
                    self.problems.append(f"{src.member.origin} could not reach the tool on port "
                                         f"{self.tool.port}: {line} not sent")
                    return
                board.sent(link)
                self.written_to_tool.append((self.now(), link.src, line))
                self._record("out", src.member, self.tool.origin, line)
                self.notify()
            else:
                board.sent(link)
                self._record("out", src.member, dst.origin, line)
                target = self.peer(dst.name)
                self._record("in", dst, src.member.origin, line)
                self._feed(target, line)
                self._route(target)

    async def _write_to_tool(self, line: str) -> bool:
        data = (line + "\n").encode("utf-8")
        for _ in range(50):
            try:
                with trio.fail_after(5):
                    stream = await trio.open_tcp_stream(LOOPBACK, self.tool.port)
                    async with stream:
                        await stream.send_all(data)
                        try:
                            await stream.send_eof()
                        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                            pass
                return True
            except (OSError, trio.BrokenResourceError, trio.TooSlowError):
                await trio.sleep(0.2)
        return False

    # -- the tool's side --------------------------------------------------------------------------
    async def _serve(self, peer: ScriptedPeer, stream: trio.SocketStream) -> None:
        buffer = b""
        async with stream:
            with trio.move_on_after(30):
                while True:
                    try:
                        data = await stream.receive_some(65536)
                    except (trio.BrokenResourceError, OSError):
                        break
                    if not data:
                        break
                    buffer += data
                    while b"\n" in buffer:
                        raw, buffer = buffer.split(b"\n", 1)
                        self._from_tool(peer, raw)
            if buffer.strip():
                self._from_tool(peer, buffer)

    def _from_tool(self, peer: ScriptedPeer, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        if peer.core is None:
            self._early.append((peer, line))
            return
        self._take(peer, line)

    def _take(self, peer: ScriptedPeer, line: str) -> None:
        assert self.board is not None
        now = self.now()
        peer.from_tool.append((now, line))
        self._record("in", peer.member, self.tool.origin, line)
        self.board.heard_from_tool(line)
        if line.startswith("MESSAGE-") and self.origin_seen is None:
            try:
                self.origin_seen = parse_line(line).origin
            except FrameError:
                pass
        self._feed(peer, line)
        self._route(peer)

    # -- what the script asks ---------------------------------------------------------------------
    def tool_lines(self, name: str) -> list[str]:
        return [line for _, line in self.peer(name).from_tool]

    def reached_tool(self, line: str) -> bool:
        return any(written == line for _, _, written in self.written_to_tool)

    def all_delivered(self, texts: list[str]) -> bool:
        return all(set(texts) <= set(p.delivered_texts()) for p in self.peers)

    def acked_by_tool(self, key: tuple[int, str], names: list[str] | None = None) -> bool:
        """Every scripted peer named (default: all) has received the tool's ACK of ``key``."""
        line = f"ACK-{key[0]}-{key[1]}"
        return all(line in self.tool_lines(p.member.name) for p in self.peers
                   if names is None or p.member.name in names)
