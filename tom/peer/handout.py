"""A peer on the handout's wire (`tom peer --wire handout`): the process around `HandoutCore`.

Tasks in one nursery: the listener (`handout_net.serve_lines`), the sender (`handout_net.send_lines`),
the processor (below: the only caller of the core), a ticker (``--dynamic``), the UI. Start-up checks
are the ones of TOM's own wire (neighbors file, own address listed, output writable, port free), each
one line.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from ..core.handout import HandoutCore, HandoutDelivery, HandoutStatus
from ..errors import ConfigError, FrameError, OutputError
from .events import SendTexts
from ..codec.handout import format_frame, java_from, origin_pid, parse_line
from ..net.handout import LineIn, send_lines, serve_lines
from ..net.listener import open_listener
from ..codec.neighbors import load_neighbors
from .output import OutputFile
from ..net.ratelimit import LogLimiter, held_back

log = logging.getLogger("tom.handout")

CHANNEL_SIZE = 256
MAX_BACKLOG = 4096
BAD_LINES = LogLimiter()
DROPS = LogLimiter(5.0)  # per reason
DRAIN_LIMIT = 10.0  # seconds a quitting peer waits for its queued frames to go out

MENU = "Choose what to do:\n1. Send a new message:\n2. Print status\n3. Quit"


@dataclass(frozen=True)
class HandoutConfig:
    neighbors: Path
    output: Path
    port: int
    host: str
    name: str | None = None
    delay: float = 0.0
    interactive: bool = False
    dynamic: bool = False
    heartbeat: float = 1.0
    timeout: float = 5.0


@dataclass(frozen=True, slots=True)
class Quit:
    """The user quits."""


def status_lines(st: HandoutStatus) -> list[str]:
    """The status as the handout's figure 3 prints it, with what each entry still misses."""
    lines = [f"Logical clock time: {st.clock}", "Pending messages:"]
    for p in st.pending:
        missing = max(0, p.needed - p.acks)
        what = f"{p.acks} ACKs on {'(reserved) ' if p.reserved else ''}{p.line}"
        lines.append(f"{what}   [{missing} ACK{'s' if missing != 1 else ''} missing]" if missing else what)
    if not st.pending:
        lines.append("(none)")
    members = f"{len(st.members)} members: {', '.join(st.members)}" if st.dynamic else \
        f"static group of {len(st.members)}"
    extra = f"delivered: {st.delivered}; from: {st.origin}; {members}"
    if st.bad_lines:
        extra += f"; lines that are no handout frame: {st.bad_lines}"
    if st.dropped:
        extra += "; not queued: " + ", ".join(f"{k} {v}" for k, v in sorted(st.dropped.items()))
    lines.append(extra)
    return lines


class HandoutPeer:
    """One running peer of a handout group; `run` serves until the user quits (or it is stopped)."""

    def __init__(self, cfg: HandoutConfig) -> None:
        self.cfg = cfg
        self.neighbors = load_neighbors(cfg.neighbors, file_order=True)
        if cfg.host in ("0.0.0.0", "::") and not cfg.name:
            raise ConfigError("listening on all addresses: give the address to write in 'from' (--name)")
        self.origin = java_from(cfg.host, cfg.port, cfg.name)
        me = origin_pid(self.origin)
        if me is None:
            raise ConfigError(f"--name {cfg.name!r} names no IP:PORT")
        if me not in self.neighbors:
            raise ConfigError(f"{cfg.neighbors}: this peer ({me}, from {self.origin}) is not in the neighbors file")
        self.me = me
        self.core = HandoutCore(me, self.origin, self.neighbors, dynamic=cfg.dynamic, heartbeat=cfg.heartbeat,
                                timeout=cfg.timeout)
        self.output = OutputFile(cfg.output, me)
        self.exit_code = 0
        self._scope: trio.CancelScope | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        cfg = self.cfg
        try:
            listeners = await open_listener(cfg.host, cfg.port)
        except BaseException:
            self.output.close()
            raise
        try:
            in_tx, in_rx = trio.open_memory_channel(CHANNEL_SIZE)
            out_tx, out_rx = trio.open_memory_channel(CHANNEL_SIZE)
            self._in_tx = in_tx
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                port = await nursery.start(serve_lines, listeners, in_tx)
                self._sender_done = trio.Event()
                nursery.start_soon(self._send, out_rx)
                nursery.start_soon(self._process, in_rx, out_tx)
                if cfg.dynamic:
                    nursery.start_soon(self._tick, in_tx)
                nursery.start_soon(self._stop_on_signal)
                mode = "dynamic group (JOIN, LEAVE, HEARTBEAT)" if cfg.dynamic else "static group"
                print(f"Loaded {len(self.neighbors)} neighbors", flush=True)
                if self.output.resumed:
                    log.info("%s", self.output.resumed)
                print(f"Started to listen on {cfg.host}:{port}; handout wire, {mode}, plain TCP", flush=True)
                print(f"Sending messages from: {self.origin}", flush=True)
                task_status.started(port)
                if cfg.dynamic:
                    await in_tx.send(_Join())
                if cfg.interactive:
                    await self._terminal(in_tx)
                else:
                    from .ui import headless

                    await headless(in_tx, self.me, busy=lambda: self.core.backlog() > MAX_BACKLOG)
                    if not cfg.dynamic:
                        log.info("end of input: still serving the group until stopped")
                        await trio.sleep_forever()
                    log.info("end of input: leaving the group")
                await self._quit(in_tx)
        finally:
            self.output.close()
            core = self.core
            log.info("stopped with %d events delivered; premature ACKs: %d; deliveries released behind a late "
                     "head: %d; %d pending", self.output.written, core.premature_acks, core.released_behind_head,
                     core.backlog())

    async def _quit(self, in_tx: trio.MemorySendChannel) -> None:
        """Send LEAVE (dynamic), let queued frames go out (bounded), then stop."""
        await in_tx.send(Quit())
        with trio.move_on_after(DRAIN_LIMIT):
            await self._sender_done.wait()
        self.stop()

    def stop(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def _send(self, out_rx: trio.MemoryReceiveChannel) -> None:
        try:
            await send_lines(out_rx, self.neighbors, self.cfg.delay,
                             lambda pid: not self.cfg.dynamic or pid in self.core.joined)
        finally:
            self._sender_done.set()

    async def _tick(self, in_tx: trio.MemorySendChannel) -> None:
        try:
            while True:
                await trio.sleep(self.cfg.heartbeat / 4)
                await in_tx.send(_Tick())
        except trio.BrokenResourceError:
            pass  # the processor has stopped: the peer is quitting

    async def _process(self, in_rx: trio.MemoryReceiveChannel, out_tx: trio.MemorySendChannel) -> None:
        core = self.core
        async with in_rx:
            async for event in in_rx:
                now = trio.current_time()
                t = type(event)
                quitting = False
                if t is LineIn:
                    try:
                        frame = parse_line(event.line)
                    except FrameError as e:
                        core.bad_line()
                        held = BAD_LINES.allow(event.address)
                        if held is not None:
                            log.warning("ignored a line from %s: %s: %r%s", event.address, e, event.line[:120],
                                        held_back(held))
                    else:
                        core.receive(frame, now)
                elif t is SendTexts:
                    for text in event.texts:
                        try:
                            sent = core.send(text)
                        except FrameError as e:
                            log.warning("%s", e)
                            sent = e
                        if event.on_sent is not None:
                            event.on_sent(sent)
                elif t is _Tick:
                    core.tick(now)
                elif t is _Join:
                    core.join()
                elif t is Quit:
                    core.leave()
                    quitting = True
                ready = core.ready()
                for send in ready.sends:
                    await out_tx.send((format_frame(send.frame), send.to))
                if ready.deliveries and self.output.failed is None:
                    try:
                        self.output.write(ready.deliveries, time.time())
                    except OutputError as e:
                        log.error("%s: nothing more is recorded here", e)
                        self.exit_code = 5
                    else:
                        self._show(ready.deliveries)
                for line in ready.notices:
                    log.info("%s", line)
                for reason, line in ready.drops:
                    held = DROPS.allow(reason)
                    if held is not None:
                        log.warning("%s%s", line, held_back(held))
                if quitting:
                    await out_tx.aclose()  # the sender finishes what is queued, then ends
                    return

    def _show(self, deliveries: list[HandoutDelivery]) -> None:
        for d in deliveries[:20]:
            print(f"Delivered: MESSAGE-{d.clock}-{d.origin}-{d.text} ({d.acks} ACKs)", flush=True)
        if len(deliveries) > 20:
            print(f"... and {len(deliveries) - 20} more delivered", flush=True)

    async def _terminal(self, in_tx: trio.MemorySendChannel) -> None:
        """The handout's menu on a terminal: 1 send, 2 status, 3 quit (also: send TEXT, status, quit)."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.patch_stdout import patch_stdout

        from .ui import parse_command

        session: PromptSession = PromptSession()

        async def ask(prompt: str) -> str:
            return await trio.to_thread.run_sync(lambda: session.prompt(prompt), abandon_on_cancel=True)

        with patch_stdout(raw=True):
            print(MENU, flush=True)
            while True:
                try:
                    line = await ask(": ")
                except (EOFError, KeyboardInterrupt):
                    return
                command, arg = parse_command(line)
                if command == "ask-text":
                    try:
                        arg = await ask("Enter the message to send : ")
                    except (EOFError, KeyboardInterrupt):
                        continue
                    command = "send"
                if command == "send":  # a text the wire cannot carry is refused by the core, with a log line
                    box: list = []
                    taken = trio.Event()
                    await in_tx.send(SendTexts([arg], lambda sent: (box.append(sent), taken.set())))
                    with trio.move_on_after(5):
                        await taken.wait()
                    if box and not isinstance(box[0], FrameError):
                        print(f"Ready to send: {format_frame(box[0])}", flush=True)
                elif command == "status":
                    print("\n".join(status_lines(self.core.status())), flush=True)
                elif command == "quit":
                    return
                elif command == "help":
                    print(MENU, flush=True)
                elif command == "unknown":
                    print(f"unknown command {arg!r}: 1, 2 or 3 (or send TEXT, status, quit)", flush=True)

    async def _stop_on_signal(self) -> None:
        """SIGINT/SIGTERM: stop (a static group has nothing to leave; dynamic: LEAVE first, bounded)."""
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for sig in signals:
                log.info("%s: stopping", signal.Signals(sig).name)
                if self.cfg.dynamic and not self.core.left:
                    with trio.move_on_after(2.0):  # LEAVE to the others first, bounded
                        await self._quit(self._in_tx)
                self.stop()
                return


@dataclass(frozen=True, slots=True)
class _Tick:
    pass


@dataclass(frozen=True, slots=True)
class _Join:
    pass


def run_handout_peer(cfg: HandoutConfig) -> int:
    """Run a handout-wire peer to its end; its exit status."""
    peer = HandoutPeer(cfg)
    trio.run(peer.run)
    return peer.exit_code


__all__ = ["HandoutConfig", "HandoutPeer", "run_handout_peer", "status_lines"]
