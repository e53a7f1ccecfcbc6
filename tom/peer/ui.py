"""The UI task: an interactive terminal (prompt_toolkit + rich), or headless lines from stdin.

Interactive: the handout's menu (1 send, 2 status, 3 quit) and direct commands (``send TEXT``,
``status``, ``quit``, ``help``). prompt_toolkit runs in a worker thread inside ``patch_stdout`` so that
deliveries and tables print above the line being typed. Headless: every non-empty stdin line is one
message; end of input leaves the peer serving the others until it is stopped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import trio
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..build import describe
from ..core import Delivery, Status, ViewDelivery, check_text
from ..errors import UsageError
from ..codec.pid import pid_key
from .events import EventSink, SendTexts
from .processor import divergence_line
from ..net.links import Link
from .pathtrace import TRACE
from ..web.snapshot import waits_line

MENU = "Choose what to do:\n1. Send a new message\n2. Print status\n3. Quit\n(or: send TEXT | status | quit | help)"
HELP_LINE = "Commands: 1 or send TEXT, 2 or status, 3 or quit, help."


def parse_command(line: str) -> tuple[str, str]:
    """Map a typed line to ``(command, argument)``: send, status, quit, help, ask-text, empty, unknown.
    The text of ``send TEXT`` is everything after the first space, exactly as typed."""
    stripped = line.strip()
    word, _, rest = stripped.partition(" ")
    word = word.lower()
    if not stripped:
        return ("empty", "")
    if word in ("1", "send", "s"):
        text = line.lstrip().partition(" ")[2]
        return ("send", text) if rest else ("ask-text", "")
    if word in ("2", "status", "st") and not rest:
        return ("status", "")
    if word in ("3", "quit", "q", "exit") and not rest:
        return ("quit", "")
    if word in ("help", "?", "h", "menu") and not rest:
        return ("help", "")
    return ("unknown", stripped)


def render_status(status: Status, links: dict[str, Link], now: float) -> list:
    """Rich renderables for the status: clock, view and connections, the pending queue."""
    view = status.view
    where = f"view {view.id} ({len(view.members)} members)" if view is not None else "no view yet"
    head = (f"[bold]{status.me}[/]  order: [bold]{status.order}[/]  Lamport clock: [bold cyan]{status.clock}[/]  "
            f"delivered: {status.delivered}  {where}  [dim]{status.mode}; {describe()}[/]")
    stats = status.stats or {}
    if status.order != "sequencer" and stats:
        head += (f"\npremature ACKs (an ACK before its message): [bold]{stats.get('premature_acks', 0)}[/]  "
                 f"released behind a blocked head: [bold]{stats.get('released_behind_head', 0)}[/]")
    if status.no_quorum is not None:
        head += (f"\n[bold red]no quorum[/]: {status.no_quorum[0]} of {status.no_quorum[1]} members reachable; "
                 f"waiting (messages entered here are held)")
    if status.unreachable:
        head += "\n[bold red]unreachable[/]: " + "; ".join(f"{r} cannot reach {t}" for r, t in status.unreachable)
    members = Table(title="Peers", title_justify="left", box=None, pad_edge=False)
    for col in ("peer", "member", "connection", "incarnation", "frames in", "frames out", "queued", "last heard",
                "round trip"):
        members.add_column(col)
    trips = status.round_trips or {}
    in_view = set(view.members) if view is not None else set()
    for pid in sorted([status.me, *links], key=pid_key):
        member = "[green]yes[/]" if pid in in_view else "[dim]no[/]"
        if pid in status.suspected:
            member = "[red]suspected[/]"
        if pid == status.me:
            members.add_row(pid, member, "[dim]this peer[/]", "", "", "", "", "", "")
            continue
        link = links[pid]
        state = {"up": "[green]up[/]", "connecting": "[yellow]connecting[/]"}.get(link.state, "[red]down[/]")
        heard = status.last_heard.get(pid)
        age = "never" if heard is None else f"{max(0.0, status.now - heard):.1f}s ago"
        rtt = trips.get(pid)
        members.add_row(pid, member, state, str(link.incarnation or ""), str(link.frames_in), str(link.frames_out),
                        str(link.queued), age, "" if rtt is None else f"{rtt:.1f}s")
    pending = Table(title=f"Pending messages ({len(status.pending)})", title_justify="left", box=None,
                    pad_edge=False)
    lamport = status.order == "lamport"
    sequencer = status.order == "sequencer"
    columns = ("#", "frame", "ACKs", "missing ACKs from") if lamport else \
        ("#", "frame", "seq", "waits for") if sequencer else ("#", "frame", "waits for")
    for col in columns:
        pending.add_column(col, overflow="fold")
    n = len(in_view)
    for i, p in enumerate(status.pending[:50], 1):
        frame = escape(f"MESSAGE-{p.clock}-{p.pid}-{p.text}") if p.text is not None else \
            f"[yellow](reserved by an early ACK)[/] {p.clock}-{p.pid}"
        if lamport:
            pending.add_row(str(i), frame, f"{len(p.acks)}/{n}", ", ".join(p.missing) or "[green]none[/]")
        elif sequencer:
            pending.add_row(str(i), frame, "[dim]none yet[/]" if p.seq is None else str(p.seq), escape(waits_line(p)))
        else:
            pending.add_row(str(i), frame, escape(waits_line(p)))
    if len(status.pending) > 50:
        pending.caption = f"... and {len(status.pending) - 50} more"
    if not status.pending:
        pending.caption = "(none)"
    parts = [head, members, pending]
    if status.alarms:
        last = status.alarms[-1]
        parts.insert(1, f"[bold red]{escape(divergence_line(status.me, last))}[/] ({len(status.alarms)} alarm(s))")
    return parts


def delivery_line(d: Delivery | ViewDelivery) -> str:
    if type(d) is ViewDelivery:
        change = ", ".join(f"{what} {', '.join(pids)}" for what, pids in
                           (("joined:", d.joined), ("left:", d.left), ("removed:", d.removed)) if pids)
        return f"[magenta]view {d.view}[/] #{d.index} members: {', '.join(d.members) or '(none)'} [dim]{change}[/]"
    return f"[green]delivered[/] #{d.index} [dim]({d.clock}, {d.pid})[/] {escape(d.text)}"


class TerminalUI:
    """The interactive terminal; `run` returns when the user quits."""

    def __init__(self, me: str, status: Callable[[], Status], links: dict[str, Link],
                 send: EventSink, catching_up: Callable[[], str | None] = lambda: None) -> None:
        self.me, self.status, self.links, self.send = me, status, links, send
        self.catching_up = catching_up  # a durable peer's catch-up under way ("catching up k of n ...")
        self.console: Console | None = None

    def on_deliver(self, deliveries: list[Delivery | ViewDelivery]) -> None:
        if self.console is None:
            return
        for d in deliveries[:20]:
            self.console.print(delivery_line(d), markup=True, highlight=False)
        if len(deliveries) > 20:
            self.console.print(f"[dim]... and {len(deliveries) - 20} more delivered[/]")

    async def run(self) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        session: PromptSession = PromptSession()
        with patch_stdout(raw=True):
            self.console = Console(file=sys.stdout, force_terminal=True, highlight=False)
            self.console.print(MENU)
            try:
                await self._loop(session)
            finally:
                self.console = None

    async def _ask(self, session, prompt: str) -> str:
        return await trio.to_thread.run_sync(lambda: session.prompt(prompt), abandon_on_cancel=True)

    async def _loop(self, session) -> None:
        console = self.console
        assert console is not None
        while True:
            try:
                line = await self._ask(session, f"{self.me}: ")
            except (EOFError, KeyboardInterrupt):
                return
            command, arg = parse_command(line)
            if command == "ask-text":
                try:
                    arg = await self._ask(session, "Enter the message to send: ")
                except (EOFError, KeyboardInterrupt):
                    continue
                command = "send"
            if command == "send":
                try:
                    check_text(self.me, arg)
                except UsageError as e:
                    console.print(f"[red]{escape(str(e))}[/]", highlight=False)
                    continue
                taken, box = trio.Event(), []

                def on_sent(result: object) -> None:
                    box.append(result)
                    taken.set()

                await self.send.send(SendTexts([arg], on_sent))
                with trio.move_on_after(5.0):
                    await taken.wait()  # (with --data: on the disk first, so `sending:` means accepted)
                if box and isinstance(box[0], UsageError):
                    console.print(f"[red]{escape(str(box[0]))}[/]", highlight=False)
                    continue
                console.print(f"[dim]sending:[/] {escape(arg)}", highlight=False)
            elif command == "status":
                catching_up = self.catching_up()
                if catching_up is not None:
                    console.print(f"[bold yellow]{escape(catching_up)}[/]", highlight=False)
                for part in render_status(self.status(), self.links, trio.current_time()):
                    console.print(part)
            elif command == "quit":
                console.print("Leaving the group ..." if self.status().view is not None else "Bye.")
                return
            elif command == "help":
                console.print(MENU)
            elif command == "unknown":
                console.print(f"[red]unknown command[/] {arg!r}. {HELP_LINE}", highlight=False)


def _sendable(me: str, texts: list[str]) -> list[str]:
    """``texts`` without those that cannot be sent, each of which gets one line on stderr."""
    ok = []
    for text in texts:
        try:
            check_text(me, text)
        except UsageError as e:
            print(f"tom: {e}", file=sys.stderr, flush=True)
        else:
            ok.append(text)
    return ok


async def headless(send: EventSink, me: str, fd: int = 0,
                   busy: Callable[[], bool] = lambda: False) -> None:
    """Send each non-empty line of ``fd`` as one message, in order; return at end of input.

    A line is everything before its ``\\n`` but for the ``\\r`` of a CRLF line ending; text that is not
    UTF-8 is decoded with replacement characters. A line over the size limit gets one line on stderr
    and is not sent. While ``busy()`` (too much undelivered already), stdin is not read: a fast
    producer then waits in its pipe instead of growing this peer's queues and every message's latency
    without bound.
    """
    pending = b""
    while True:
        while busy():
            await trio.sleep(0.002)
        chunk = await trio.to_thread.run_sync(os.read, fd, 65536, abandon_on_cancel=True)
        if TRACE is not None:
            TRACE.note("stdin")
        if not chunk:
            break
        data = pending + chunk
        lines = data.split(b"\n")
        pending = lines.pop()
        texts = [t for t in (_line_text(ln) for ln in lines) if t]
        texts = _sendable(me, texts) if any(len(t) > 8000 for t in texts) else texts
        if texts:
            await send.send(SendTexts(texts))
    tail = _line_text(pending)
    if tail and _sendable(me, [tail]):
        await send.send(SendTexts([tail]))


def _line_text(line: bytes) -> str:
    return (line[:-1] if line.endswith(b"\r") else line).decode("utf-8", "replace")
