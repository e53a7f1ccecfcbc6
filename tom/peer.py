"""A peer process: configuration, start-up checks, and the nursery that runs the four tasks.

Start-up checks run before anything binds or connects, each failing with one ConfigError line:
neighbors file, own pid in it, output path writable, port free.
"""

from __future__ import annotations

import logging
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from .core import Core
from .errors import ConfigError
from .links import Link
from .listener import listener, open_listener
from .neighbors import load_neighbors
from .output import OutputFile
from .pid import make_pid, split_pid
from .processor import processor
from .sender import sender
from .ui import TerminalUI, headless

log = logging.getLogger("tom.peer")

CHANNEL_SIZE = 256


@dataclass(frozen=True)
class PeerConfig:
    neighbors: Path
    output: Path
    port: int
    host: str
    name: str | None = None
    delay: float = 0.0
    interactive: bool = False


def own_pid(cfg: PeerConfig, neighbors: list[str]) -> str:
    """This peer's pid: ``host:port``, or ``name:port`` when listening on every address."""
    if cfg.host in ("0.0.0.0", "::"):
        if not cfg.name:
            raise ConfigError("listening on all addresses: give the address others know this peer by (--name)")
        me = make_pid(cfg.name, cfg.port)
    else:
        me = make_pid(cfg.host, cfg.port)
    if me not in neighbors:
        raise ConfigError(f"{cfg.neighbors}: this peer ({me}) is not in the neighbors file")
    return me


def guess_host(neighbors: list[str], port: int) -> str | None:
    """The host of the single neighbors entry on ``port`` that is an address of this machine."""
    local = {"127.0.0.1", "localhost", "[::1]"}
    try:
        local |= {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        pass
    hosts = [h for h, p in map(split_pid, neighbors) if p == port and (h in local or h.startswith("127."))]
    return hosts[0] if len(hosts) == 1 else None


class Peer:
    """Everything one running peer holds; `run` serves until the UI quits or a signal arrives."""

    def __init__(self, cfg: PeerConfig) -> None:
        self.cfg = cfg
        self.neighbors = load_neighbors(cfg.neighbors)
        self.me = own_pid(cfg, self.neighbors)
        self.incarnation = time.time_ns() // 1000
        self.core = Core(self.me, self.neighbors)
        self.links = {p: Link(p) for p in self.neighbors if p != self.me}
        self.output = OutputFile(cfg.output, self.me)
        self.port: int | None = None

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
            ui = TerminalUI(self.me, self.core.status, self.links, in_tx) if cfg.interactive else None
            async with trio.open_nursery() as nursery:
                self.port = await nursery.start(listener, listeners, self.me, self.incarnation, self.links, in_tx)
                nursery.start_soon(sender, out_rx, self.me, self.incarnation, self.links, in_tx, cfg.delay)
                nursery.start_soon(processor, self.core, in_rx, out_tx, self.output,
                                   ui.on_deliver if ui else None)
                nursery.start_soon(self._stop_on_signal, nursery.cancel_scope)
                print(f"Loaded {len(self.neighbors)} neighbors", flush=True)
                print(f"Started to listen on {cfg.host}:{self.port}; sending messages from: {self.me}", flush=True)
                task_status.started(self.port)
                if ui is not None:
                    await ui.run()
                    nursery.cancel_scope.cancel()
                else:
                    await headless(in_tx)
                    log.info("end of input: still serving the group until stopped")
        finally:
            self.output.close()
            log.info("stopped with %d messages delivered", self.output.written)

    async def _stop_on_signal(self, scope: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for sig in signals:
                log.info("%s: shutting down", signal.Signals(sig).name)
                scope.cancel()
                return
