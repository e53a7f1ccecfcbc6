"""A peer process: configuration, start-up checks, and the nursery that runs the four tasks.

Start-up checks run before anything binds or connects, each failing with one ConfigError line:
neighbors file, own pid in it, keys (with --keys), output path writable, data folder (with --data),
input file readable (with --input), port free.
"""

from __future__ import annotations

import gc
import logging
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..core import Core, Delivery, Timing, ViewDelivery, notices
from ..core.group import persisting
from ..core.notices import Notice
from .events import EventSink, LeaveGroup, SendDirect, SendTexts
from ..errors import ConfigError, OutputError, UsageError
from ..net.keys import load_group_keys
from ..net.frametrace import FrameTrace
from ..net.links import MAX_BACKOFF, Link
from ..net.listener import listener, open_listener
from ..codec.neighbors import load_neighbors
from .output import NoOutput, OutputFile
from .durable import Durable
from .inputfile import InputFile, follow
from .pathtrace import TRACE
from ..codec.pid import make_pid, pid_key, split_pid
from .processor import Inbox, processor, ticker
from ..net.sender import Router, sender
from .ui import TerminalUI, headless

if TYPE_CHECKING:
    from .gate import Gate

log = logging.getLogger("tom.peer.process")

CHANNEL_SIZE = 256
MAX_BACKLOG = 4096  # undelivered messages above which stdin (or --input) is not read (headless)

# exit statuses (docs/peer.md and `tom peer --help` list them)
EXIT_OK = 0  # left (or stopped) with every message entered here delivered and recorded
EXIT_CONFIG = 2  # setup error: one line, nothing started
EXIT_REMOVED = 3  # the group removed this peer (it was taken for failed)
EXIT_UNDELIVERED = 4  # stopped with messages entered here not delivered (never admitted, forced stop)
EXIT_OUTPUT = 5  # the output file could not be written (e.g. a full disk): this peer left the group


@dataclass(frozen=True)
class PeerConfig:
    neighbors: Path
    output: Path | None  # the JSON Lines output file; None: no file (an embedded peer's program has the events)
    port: int
    host: str
    name: str | None = None
    delay: float = 0.0
    interactive: bool = False
    static: bool = False
    heartbeat: float = 1.0
    timeout: float = 5.0
    leave_timeout: float = 15.0
    jitter: float = 0.0
    keys: Path | None = None  # the group's keys folder: every link is mutual TLS (see tom.net.keys)
    http: tuple[str, int] | None = None  # --http: serve the API and dashboard on (host, port)
    api_token: Path | None = None  # require the bearer token kept in this file (created if missing)
    order: str = "lamport"  # the group's delivery order (`tom.core.ORDERS`); every member runs the same
    quorum: str = "majority"  # `tom.core.QUORUMS`: wait for a primary component, or go on regardless
    last_man_standing: bool = False  # a group may shrink below a majority of the neighbors file
    ring: int = 4000  # --ring: events of the recent past the dashboard's feed keeps (`tom.web.eventfeed`)
    trace: Path | None = None  # --trace: every frame written and read goes to this file (`tom.net.frametrace`)
    trace_limit: int = 512 * 1024 * 1024  # --trace-limit, in bytes
    embedded: bool = False  # run inside another program (`tom.library`): no signal handlers, no prints
    # on stdout, the process's garbage collector left as it is
    step: bool = False  # --step: the links' ordered frames wait at a gate until released (`tom.peer.gate`)
    data: Path | None = None  # --data: the data folder of a durable peer (`tom.peer.durable`)
    fsync: str = "batch"  # --fsync: when the data folder's writes reach the disk
    retain: int = 1_000_000  # --retain: delivered events the data folder keeps
    retain_age: float = 7 * 24 * 3600.0  # --retain-age, seconds
    input: Path | None = None  # --input: read the messages from this file, followed as it grows (headless)


# young collections every 50,000 net allocations instead of 700, full ones a hundred times rarer: a
# peer under load makes and drops frames and deliveries by the hundred thousand, nearly all without
# cycles, and the default thresholds spent 12-14 % of its busy time collecting (docs/design/performance.md)
GC_THRESHOLDS = (50_000, 50, 1000)


def tune_collector() -> None:
    """Set this process's garbage-collection thresholds for a peer (`GC_THRESHOLDS`)."""
    gc.set_threshold(*GC_THRESHOLDS)


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
    """Everything one running peer holds; `run` serves until it has left the group (or is stopped).

    Its front-end is the terminal (``cfg.interactive``), stdin or ``cfg.input`` (headless) or, for a program that embeds
    the peer (`tom.library`), the ``front`` coroutine given to `run`, with ``on_deliver`` hearing every
    batch of recorded deliveries. ``neighbors``, when given, stands for the neighbors file."""

    def __init__(self, cfg: PeerConfig, neighbors: list[str] | None = None) -> None:
        self.cfg = cfg
        self.neighbors = list(neighbors) if neighbors is not None else load_neighbors(cfg.neighbors)
        self.me = own_pid(cfg, self.neighbors)
        self.keys = load_group_keys(cfg.keys, self.me) if cfg.keys is not None else None
        self.incarnation = time.time_ns() // 1000
        # a peer alone forms a group only after a smaller neighbor's re-dial (backing off up to
        # MAX_BACKOFF) had its chance to reach it: else a peer started late next to a running group
        # could form a group of its own
        form_after = max(2.5 * cfg.heartbeat, MAX_BACKOFF + 0.5)
        timing = Timing(heartbeat=cfg.heartbeat, suspect_after=cfg.timeout,
                        verify_after=max(cfg.heartbeat, cfg.timeout / 5), form_after=form_after,
                        admit_after=form_after + cfg.timeout + 2.5 * cfg.heartbeat)
        self.output: OutputFile | NoOutput = OutputFile(cfg.output, self.me) if cfg.output is not None else NoOutput()
        self.durable: Durable | None = None
        if cfg.data is not None:
            try:
                self.durable = Durable(cfg.data, self.me, cfg.fsync, 2 * cfg.timeout, cfg.retain, cfg.retain_age,
                                       order=cfg.order, peers=self.neighbors)
            except BaseException:
                self.output.close()
                raise
            try:
                self.durable.reconcile(self.output)
            except OutputError as e:
                self.durable.close()
                self.output.close()
                raise ConfigError(str(e)) from None
        self.input: InputFile | None = None
        if cfg.input is not None:  # (with a data folder: from past the last line accepted)
            try:
                self.input = InputFile(cfg.input, self.durable.input_at if self.durable is not None else None)
            except BaseException:
                if self.durable is not None:
                    self.durable.close()
                self.output.close()
                raise
        if cfg.static:
            self.core = Core(self.me, self.neighbors, order=cfg.order)
        else:
            self.core = Core.joining(self.me, self.incarnation, timing, order=cfg.order, quorum=cfg.quorum,
                                     expected=self.neighbors, last_man_standing=cfg.last_man_standing,
                                     resume=self.durable.resume if self.durable is not None else (0, ""))
            if self.durable is not None:  # (its clock goes on after every clock it delivered)
                self.core.clock.time = self.durable.max_clock
                if cfg.order == "lamport":  # (the order that delivers only what every member holds)
                    persisting(self.core)
        self.links = {p: Link(p) for p in self.neighbors if p != self.me}
        self.trace = self._open_trace() if cfg.trace is not None else None
        self.on_deliver: Callable[[list[Delivery | ViewDelivery]], None] | None = None
        self.on_stop: Callable[[], None] | None = None  # called once the peer has stopped
        self.on_direct: Callable[[str, str], None] | None = None  # (src, text) of a direct text
        self.port: int | None = None
        self.exit_code = 0
        self._scope: trio.CancelScope | None = None
        self._leave_requested = False
        self.signals_taken = False
        self.feed = None  # an EventFeed while --http serves
        self.gate: Gate | None = None  # step mode's gate, once running with --step
        self.http_url: str | None = None

    async def run(self, *, front: Callable[[], Awaitable[None]] | None = None,
                  task_status=trio.TASK_STATUS_IGNORED) -> None:
        cfg = self.cfg
        if not cfg.embedded:
            tune_collector()
        channel, in_rx = trio.open_memory_channel(CHANNEL_SIZE)
        in_tx = self._in = Inbox(channel)
        # what the links bring: to the inbox itself, or, in step mode, through the gate
        links_in: EventSink = in_tx if not cfg.step else self._open_gate(in_tx)
        try:
            listeners = await open_listener(cfg.host, cfg.port)
        except BaseException:
            self._close_files()
            raise
        http = None
        if cfg.http is not None:
            try:
                http = self._open_http()
            except BaseException:
                for lst in listeners:
                    await lst.aclose()
                self._close_files()
                raise
        self.core.now = self.core.started_at = trio.current_time()
        try:
            durable = self.durable
            ui = TerminalUI(self.me, self.core.status, self.links, in_tx,
                            durable.status if durable is not None else lambda: None) if cfg.interactive else None
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                self._nursery = nursery
                self.port = await nursery.start(partial(listener, order=cfg.order), listeners, self.me,
                                                self.incarnation, self.links, links_in, self.keys)
                nursery.start_soon(sender, self.me, self.incarnation, self.links, links_in, self.keys, cfg.order)
                nursery.start_soon(processor, self.core, in_rx, Router(self.links, cfg.delay, cfg.jitter), self.output,
                                   ui.on_deliver if ui else self.on_deliver, self._on_notice, self._on_output_error,
                                   self.feed, in_tx, self.durable)
                if http is not None:
                    nursery.start_soon(*http)
                nursery.start_soon(ticker, in_tx, cfg.heartbeat / 4)
                if self.trace is not None:
                    nursery.start_soon(self._flush_trace)
                mode = "static group" if cfg.static else "joining the group"
                mode += f", {cfg.order} order"
                mode += ", secured: mutual TLS" if self.keys else ", not secured"
                mode += ", step mode: received frames wait to be released" if cfg.step else ""
                if self.output.resumed:
                    log.info("%s", self.output.resumed)
                for line in self.durable.said if self.durable is not None else ():
                    log.info("%s", line)
                if self.input is not None:
                    for line in self.input.said:
                        log.warning("%s", line)
                    if self.input.offset:
                        log.info("--input %s: going on after the last line it accepted (byte %d)", cfg.input,
                                 self.input.offset)
                if cfg.embedded:
                    log.info("listening on %s:%s as %s (%s)", cfg.host, self.port, self.me, mode)
                else:
                    nursery.start_soon(self._stop_on_signal)
                    print(f"Loaded {len(self.neighbors)} neighbors", flush=True)
                    print(f"Started to listen on {cfg.host}:{self.port}; sending messages from: {self.me} ({mode})",
                          flush=True)
                    if cfg.http is not None:
                        print(f"Dashboard and API on {self.http_url}", flush=True)
                task_status.started(self.port)
                if front is not None:
                    await front()
                elif ui is not None:
                    await ui.run()
                elif self.input is not None:  # (its end is not the end of the input: until stopped)
                    await follow(in_tx, self.me, self.input, busy=self._busy)
                else:
                    await headless(in_tx, self.me, busy=self._busy)
                    if cfg.static:
                        log.info("end of input: still serving the group until stopped")
                        await trio.sleep_forever()
                    log.info("end of input: leaving the group")
                await self.leave()
        finally:
            self._close_files()
            if self.on_stop is not None:
                self.on_stop()
            if TRACE is not None:
                TRACE.save()
            self._report_undelivered()
            st = self.core.stats
            log.info("stopped with %d events delivered; premature ACKs: %d; deliveries released behind a "
                     "late head: %d", self.output.written, st.get("premature_acks", 0),
                     st.get("released_behind_head", 0))
            log.info("sent on the links: %d frames, %d bytes", sum(link.frames_out for link in self.links.values()),
                     sum(link.bytes_out for link in self.links.values()))

    def _busy(self) -> bool:
        """Too much entered here is not delivered yet (in the core, or waiting in the data folder for
        this peer to be admitted): headless input is not read meanwhile."""
        return self.core.backlog() + (self.durable.held if self.durable is not None else 0) > MAX_BACKLOG

    def _close_files(self) -> None:
        self.output.close()
        if self.input is not None:
            self.input.close()
        if self.durable is not None:
            self.durable.close()
        if self.trace is not None:
            self.trace.close()

    def _open_trace(self) -> FrameTrace:
        """The --trace file, opened for appending and given to every link; ConfigError if it cannot be."""
        cfg = self.cfg
        try:
            trace = FrameTrace(cfg.trace, self.me, self.incarnation, cfg.order, cfg.trace_limit,  # type: ignore[arg-type]
                               cfg.delay)
        except OSError as e:
            raise ConfigError(f"cannot write the trace {cfg.trace}: {e.strerror or e}") from None
        for link in self.links.values():
            link.trace = trace
        return trace

    async def _flush_trace(self) -> None:
        """Write the trace's buffer out twice a second (a peer killed at once loses half a second of it)."""
        while self.trace is not None and self.trace.open:
            await trio.sleep(0.5)
            self.trace.flush()

    def _open_gate(self, inbox: Inbox) -> Gate:
        """Step mode: the gate the links hand their events to (imported here: a peer without --step
        loads none of it)."""
        from .gate import Gate

        self.gate = Gate(inbox, on_pass=self.trace.passed if self.trace is not None else None)
        return self.gate

    def _open_http(self):
        """Bind the --http socket (a ConfigError line if impossible) and build the app; return the
        task that serves it. Imported here: a peer without --http loads none of it."""
        from ..web import snapshot
        from ..web.apitoken import load_or_create_token
        from ..web.eventfeed import EventFeed
        from ..web.api import PeerHandle, make_app, open_http_socket, serve_http, url_host

        host, port = self.cfg.http  # type: ignore[misc]
        token = load_or_create_token(self.cfg.api_token) if self.cfg.api_token is not None else None
        sock = open_http_socket(host, port)
        self.http_url = f"http://{url_host(host)}:{sock.getsockname()[1]}/"
        core, links = self.core, self.links
        self.feed = EventFeed(self.me, lambda: snapshot.lamport(core), lambda: snapshot.counters(core), time.time,
                              lambda: core.member_order, self.cfg.ring)
        control = None
        if self.cfg.step:
            from ..web.gateview import GateControl

            assert self.gate is not None, "the gate is opened before the HTTP side"
            control = GateControl(self.gate, core, frozenset(links))
        durable = self.durable
        handle = PeerHandle(self.me, lambda: {**snapshot.snapshot(core, links, trio.current_time()),
                                              "gate": control.summary() if control is not None else None,
                                              "catching_up": durable.status() if durable is not None else None},
                            self._send_one, lambda: snapshot.backlog(core) > MAX_BACKLOG, self.feed, token, control)
        app = make_app(handle, host)
        # the web stack adds some 14,000 long-lived objects (modules, routes, classes) that every full
        # garbage collection would walk again and again under load: move them out of its way
        if not self.cfg.embedded:
            gc.freeze()
        return serve_http, app, sock

    async def _send_one(self, text: str, key: str | None = None):
        """Multicast ``text`` through the processor, under idempotency key ``key`` if given; what became
        of it (see `SendTexts.on_sent`)."""
        return await self._answer(lambda on_sent: SendTexts([text], on_sent, keys=[key] if key is not None else None))

    async def send_direct(self, dest: str, text: str) -> None:
        """Send ``text`` to member ``dest`` alone, through the processor (`Core.direct`); UsageError if
        refused (``dest`` is not a neighbor, this peer itself, or the text is too long)."""
        if dest not in self.links:
            raise UsageError(f"{dest} is not one of this peer's neighbors")
        refused = await self._answer(lambda on_sent: SendDirect(dest, text, on_sent))
        if isinstance(refused, UsageError):
            raise refused

    async def _answer(self, event: Callable[[Callable[[object], None]], SendTexts | SendDirect]) -> object:
        """Hand the processor ``event(on_sent)`` and wait for what its step says through ``on_sent``."""
        done, box = trio.Event(), []

        def on_sent(result: object) -> None:
            box.append(result)
            done.set()

        await self._in.send(event(on_sent))
        await done.wait()
        return box[0]

    async def leave(self) -> None:
        """Leave the group and wait (bounded) until the leave is delivered; then stop."""
        if self.cfg.static or self.core.mode in ("left", "removed"):
            self.stop()
            return
        if not self._leave_requested:
            self._leave_requested = True
            await self._in.send(LeaveGroup())
        with trio.move_on_after(self.cfg.leave_timeout):
            await trio.sleep_forever()  # ended by the "left" notice
        log.warning("leave not delivered within %.0f s: stopping anyway (nothing more is delivered)",
                    self.cfg.leave_timeout)
        self.stop()

    def stop(self) -> None:
        """Stop now: the tasks are cancelled and nothing more is delivered (pending entries stay
        pending: a stop never releases them)."""
        if self._scope is not None:
            self._scope.cancel()

    def _report_undelivered(self) -> None:
        """At exit: one line and EXIT_UNDELIVERED if messages entered here were never delivered."""
        lost = self.core.undelivered_own()
        if lost:
            where = "" if self.core.view is not None else " (it was never admitted to the group)"
            log.error("%d message%s entered at this peer %s not delivered here before it stopped%s", lost,
                      "s" if lost != 1 else "", "were" if lost != 1 else "was", where)
            if self.exit_code == EXIT_OK:
                self.exit_code = EXIT_UNDELIVERED

    def _on_output_error(self, error: OutputError) -> None:
        """The output cannot be written: say so once, and leave the group (the others lose nothing;
        this peer records and shows nothing more)."""
        log.error("%s: leaving the group (nothing more is recorded here)", error)
        self.exit_code = EXIT_OUTPUT
        if not self._leave_requested:
            self._nursery.start_soon(self.leave)

    def _on_notice(self, notice: Notice) -> None:
        if type(notice) is notices.DirectText:
            if self.on_direct is not None:
                self.on_direct(notice.src, notice.text)
            else:
                log.warning("a direct text from %s, and no program here to take it: dropped", notice.src)
            return
        if type(notice) is notices.NotAdmitted:
            log.warning("%s", self.not_admitted_line(notice.unreachable))
            return
        if type(notice) is notices.Unreachable:
            # at the reporter ("telling" the coordinator) and at the coordinator (what it does about it)
            log.warning("%s cannot reach %s: %s", notice.reporter, notice.target, notice.action)
            return
        if type(notice) is notices.NoFoundingQuorum:
            log.warning("%s", self.founding_line())
            return
        if type(notice) is notices.NoQuorum:
            held = self.core.backlog()
            log.warning("no quorum: %d of %d members reachable; waiting (nothing is delivered here until a "
                        "majority of the view, and of the neighbors file, is back; messages entered here are held%s)", notice.reachable,
                        notice.members, f", {held} now" if held else "")
            return
        if type(notice) is notices.QuorumBack:
            log.info("quorum again: delivering")
            return
        if type(notice) is notices.Rejoining and not self.core.founding.rejoining:
            log.warning("no quorum, and members of the view restarted from their data: founding the group again "
                        "with them")
            return
        if type(notice) is notices.Rejoining:
            held = self.core.backlog() + len(self.core.held.resubmit)
            log.warning("cut off: the group went on without this peer (a partition): joining it again as a "
                        "new member%s", f"; {held} message{'s' if held != 1 else ''} entered here will be sent "
                        "again unless the group delivered them" if held else "")
            return
        if type(notice) is notices.Left:
            if self.core.view is None:
                log.info("stopped before it was admitted to the group")
            else:
                log.info("left the group")
        elif type(notice) is notices.Removed:
            log.error("this peer was removed from the group (it was taken for failed): stopping")
            self.exit_code = EXIT_REMOVED
        self._nursery.start_soon(self._drain_then_stop)

    def _founding_parts(self) -> list[str]:
        """The founding under way and the round trips, as `not_admitted_line` says them."""
        founding, trips, now = self.core.founding, self.core.detector.trips, self.core.now
        parts = []
        if founding.proposing is not None:
            proposal, promised, _ = founding.proposing
            missing = [p for p, _ in proposal.members if p not in promised]
            parts.append(f"founding attempt {proposal.attempt}: no promise yet from {', '.join(missing)}"
                         if missing else f"founding attempt {proposal.attempt}: every founder promised")
        elif founding.promise is not None and founding.promise[3] > now:
            parts.append(f"promised {founding.promise[0]}'s founding attempt {founding.promise[2]}; "
                         "waiting for its INSTALL")
        if founding.attempts > 1:
            parts.append(f"{founding.attempts - 1} founding attempt{'s' if founding.attempts > 2 else ''} "
                         "failed for want of time; each waits twice as long as the one before")
        rtts = [f"{p} {rtt:.1f} s" for p in self.links if (rtt := trips.of(p)) is not None]
        parts.append(f"round trips: {', '.join(rtts)}" if rtts else "no round trip measured yet")
        return parts

    def founding_line(self) -> str:
        """Why no group was founded yet: too few of the neighbors file's peers are here."""
        here, expected = self.core.founding.short or (1, len(self.neighbors))
        need = f"{expected // 2 + 1}" if expected % 2 else \
            f"{expected // 2 + 1}, or {expected // 2} with {min(self.neighbors, key=pid_key)}"
        return (f"no group yet: {here} of the {expected} peers of the neighbors file here, and founding one "
                f"needs {need} (a primary component; --quorum none founds one with whoever is here); waiting")

    def not_admitted_line(self, unreachable: tuple[str, ...] = ()) -> str:
        """Why this peer is still outside the group, as far as it can tell: which members cannot reach
        it (``unreachable``, as the group's coordinator says), which neighbors connected, which refused
        it (and why), which never answered; the founding under way (whose promise is missing, how many
        attempts failed) and the round trips measured. The neighbors files are named only when a
        neighbor refused this peer or never answered."""
        waited = trio.current_time() - self.core.started_at
        up = [p for p, link in self.links.items() if link.stream is not None]
        refused = {p: link.refused for p, link in self.links.items() if link.refused and not link.mismatch}
        other_order = [link.mismatch for link in self.links.values() if link.mismatch and link.stream is None]
        silent = [p for p in self.links if p not in up and p not in refused and not self.links[p].mismatch]
        in_group = any(v > 0 for v in self.core.peers.views.values())  # (a neighbor announced a view)
        parts = [f"not admitted to the group after {waited:.0f} s: "
                 + (f"no member adds {self.me}" if in_group else "no group founded yet")]
        if unreachable:
            parts.append(f"the coordinator does not admit it: {', '.join(unreachable)} cannot reach it")
        if other_order:
            parts.extend(other_order)
        if refused:
            parts.append("; ".join(f"{p} refuses it: {why}" for p, why in refused.items()))
        if up:
            parts.append(f"connected to {', '.join(up)}")
        if silent:
            parts.append(f"never connected with {', '.join(silent)}")
        parts.extend(self._founding_parts())
        hint = f"is {self.me} in every member's neighbors file?" if refused or silent else "waiting"
        if self.core.founding.short is not None:
            hint = self.founding_line()
        waiting = self.core.backlog()
        tail = f" {waiting} message{'s' if waiting != 1 else ''} entered here wait{'s' if waiting == 1 else ''}." \
            if waiting else ""
        return f"{parts[0]} ({'; '.join(parts[1:])}): {hint}{tail}" if len(parts) > 1 else f"{parts[0]}: {hint}{tail}"

    async def _drain_then_stop(self, limit: float = 3.0) -> None:
        """Stop once the last frames (e.g. the FLUSHED and ACKs of our own leave) are written, within
        ``limit``. (Nothing depends on it for agreement: the view a
        peer leaves in is decided by a remaining member, see `Core._coordinator`.)"""
        last = self.core.last_install
        # when everyone leaves, the last one coordinates: it waits (bounded) for the others to go first,
        # which they do once its INSTALL has reached them
        others = set(last.left) - {self.me} if last is not None and last.coordinator == self.me else set()
        with trio.move_on_after(limit):
            while (any(link.buffer and link.stream is not None for link in self.links.values())
                   or any(self.links[p].stream is not None for p in others if p in self.links)):
                await trio.sleep(0.02)
            await trio.sleep(0.2)  # let the neighbors read them before our sockets close
        self.stop()

    async def _stop_on_signal(self) -> None:
        """First SIGINT/SIGTERM: leave the group (bounded); a second one, or a static group: stop."""
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            self.signals_taken = True  # from now on the peer answers signals itself (see cli.run_peer)
            async for sig in signals:
                name = signal.Signals(sig).name
                if self.cfg.static or self._leave_requested:
                    log.info("%s: stopping", name)
                    self.stop()
                    return
                log.info("%s: leaving the group (send it again to stop at once)", name)
                self._leave_requested = True
                await self._in.send(LeaveGroup())
                break
            with trio.move_on_after(self.cfg.leave_timeout):
                async for sig in signals:
                    log.info("%s: stopping", signal.Signals(sig).name)
                    self.stop()
                    return
            log.warning("leave not delivered within %.0f s: stopping anyway (nothing more is delivered)",
                        self.cfg.leave_timeout)
            self.stop()
