"""Launch every local peer of a neighbors file: in tmux panes, or headless with a generated workload.

Every run keeps everything under ``runs/<timestamp>/`` (``runs/latest`` links to the newest): the neighbors file used, the group's keys
(``keys/``, unless ``--insecure``), one workload and one log and one output file per peer, each
peer's data folder (``data-<port>/``: durable peers, `tom peer --data`, where the peer accepts it), and
the verifier's report. A run waits until every message is delivered at every peer (or a deadline),
stops the peers with SIGTERM, then runs the Spark verifier.

A peer restarted by the chaos (``--restart``) is killed and started again with its very command line
(`tom.tools.peers.start_again`); its feed goes on after the lines its data folder accepted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..web.apitoken import load_or_create_token, token_path
from ..errors import ConfigError, TomError
from ..net.keys import create_keys
from ..codec.neighbors import load_neighbors
from ..codec.pid import split_pid
from .peers import LineTail, NotReady, PeerCommand, PeerExited, PeerGroup, PeerProcess, start_again

console = Console(stderr=True, highlight=False)
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "0.0.0.0"}


def local_peers(neighbors: list[str]) -> list[str]:
    """The neighbors this machine can run: loopback entries (and this host's own names)."""
    import socket

    local = set(LOCAL_HOSTS)
    try:
        local |= {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        pass
    return [p for p in neighbors if split_pid(p)[0] in local or split_pid(p)[0].startswith("127.")]


def make_workload(peers: list[str], messages: int, seed: int) -> dict[str, list[str]]:
    """Reproducible texts per peer: the same seed gives the same workload."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "lamport", "clock", "order", "ack", "tick", "view", "-", ":"]
    return {
        pid: [f"{pid} #{k} " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
              for k in range(messages)]
        for pid in peers
    }


def http_address(pid: str, offset: int) -> tuple[str, int] | None:
    """Where the peer ``pid`` serves its API and dashboard: its own loopback host, port + ``offset``
    (None when ``offset`` is 0: no --http)."""
    if not offset:
        return None
    host, port = split_pid(pid)
    host = host.strip("[]")
    if not (host.startswith("127.") or host == "::1"):
        host = "127.0.0.1"
    if not 0 < port + offset < 65536:
        raise ConfigError(f"--http-offset {offset}: port {port + offset} of {pid} is out of range")
    return host, port + offset


def group_url(peers: list[str], offset: int, keys: Path | None = None) -> str:
    """The one page that shows every peer side by side: the first peer's dashboard, told the others'.

    For a closed group (its keys folder ``keys``) the API's token (``keys/api-token``, created here
    if missing, before any peer starts) rides in the URL's fragment, which no server sees."""
    addrs = [http_address(p, offset) for p in peers]
    hosts = [f"[{h}]:{port}" if ":" in h else f"{h}:{port}" for h, port in addrs]  # type: ignore[misc]
    token = load_or_create_token(token_path(keys)) if keys is not None else None
    return f"http://{hosts[0]}/?peers={','.join(hosts)}" + (f"#token={token}" if token else "")


def peer_command(neighbors: Path, output: Path, pid: str, delay: float, headless: bool,
                 jitter: float = 0.0, keys: Path | None = None, http_offset: int = 0,
                 order: str = "lamport", wire: str = "tom", trace: bool = False, step: bool = False,
                 durable: bool = False) -> list[str]:
    """The command line of the local peer ``pid`` of a launched group; with ``trace``, its frame trace
    goes beside its output (`trace_path`); ``step``: tom peer --step; ``durable``: tom peer --data
    with its data folder beside its output (`data_path`)."""
    host, port = split_pid(pid)
    served = None
    http = http_address(pid, http_offset)
    if http is not None:
        served = f"[{http[0]}]:{http[1]}" if ":" in http[0] else f"{http[0]}:{http[1]}"
    return PeerCommand(neighbors, output, port, host, order=order, wire=wire, keys=keys, http=served, delay=delay,
                       jitter=jitter, headless=headless, trace=trace_path(output.parent, pid) if trace else None,
                       data=data_path(output.parent, pid) if durable else None,
                       extra=("--step",) if step else ()).argv()


def trace_path(run_dir: Path, pid: str) -> Path:
    """Where a launched peer's frame trace goes: ``<run>/<port>.trace`` (never read as an output)."""
    return run_dir / f"{split_pid(pid)[1]}.trace"


def data_path(run_dir: Path, pid: str) -> Path:
    """A launched durable peer's data folder: ``<run>/data-<port>/`` (made by the peer)."""
    return run_dir / f"data-{split_pid(pid)[1]}"


def takes_data(order: str, wire: str) -> bool:
    """Whether `tom peer` accepts --data in a group of this order and wire."""
    return wire == "tom"


def launch_tmux(neighbors: Path, peers: list[str], run_dir: Path, delay: float, attach: bool,
                jitter: float = 0.0, keys: Path | None = None, http_offset: int = 0, order: str = "lamport",
                wire: str = "tom", trace: bool = False, step: bool = False, durable: bool = False) -> int:
    """One tmux window split in one pane per peer, each running `tom peer` with its terminal UI (``step``:
    in step mode, each holding what it receives until released from the dashboard)."""
    if shutil.which("tmux") is None:
        raise ConfigError("tmux is not installed (apt-get install tmux), or use --messages for a headless run")
    session = f"tom-{run_dir.name}"
    cmds = [shlex.join(peer_command(neighbors, run_dir / f"out-{split_pid(p)[1]}.jsonl", p, delay, False, jitter,
                                    keys, http_offset, order, wire, trace, step, durable)) for p in peers]
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "60", cmds[0]], check=True)
    for cmd in cmds[1:]:
        subprocess.run(["tmux", "split-window", "-t", session, cmd], check=True)
        subprocess.run(["tmux", "select-layout", "-t", session, "tiled"], check=True)
    subprocess.run(["tmux", "set-option", "-t", session, "remain-on-exit", "on"], check=False)
    console.print(f"tmux session [bold]{session}[/]: {len(peers)} peers, {order} order; outputs in {run_dir}"
                  + (" (durable peers: data-<port>/ there)" if durable else ""))
    if trace:
        console.print(f"frame traces in {run_dir}: afterwards, [bold]tom replay {run_dir}[/] draws the run again")
    if http_offset:
        url = group_url(peers, http_offset, keys)
        subprocess.run(["tmux", "set-option", "-t", session, "status-right-length", "150"], check=False)
        subprocess.run(["tmux", "set-option", "-t", session, "status-right", url], check=False)
        console.print(f"group dashboard: [bold]{url}[/]", soft_wrap=True)
        if step:
            console.print("step mode: every peer holds the MESSAGE, ACK and SEQ frames it receives; open the "
                          "dashboard and release them from its Step panel, one link head at a time")
    if attach and sys.stdin.isatty():
        return subprocess.run(["tmux", "attach", "-t", session]).returncode
    console.print(f"attach with: tmux attach -t {session}")
    return 0


class Counter:
    """Counts, per origin, the message records of a growing output file without re-reading it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines = LineTail(path)
        self.by_origin: dict[str, int] = {}
        self.messages = 0
        self.views = 0
        self.at_join: dict[str, int] = {}  # peer -> messages delivered here before it joined

    def update(self) -> int:
        lines = self.lines.new_lines()
        if lines is None:
            return self.messages
        for line in lines:
            if b'"kind":"view"' in line:
                self.views += 1
                try:
                    for pid in json.loads(line)["joined"]:
                        self.at_join[pid] = self.messages
                except (ValueError, KeyError, TypeError):
                    pass
                continue
            if b'"kind":"message"' not in line:
                continue
            try:
                origin = json.loads(line)["pid"]
            except (ValueError, KeyError):
                continue
            self.by_origin[origin] = self.by_origin.get(origin, 0) + 1
            self.messages += 1
        return self.messages


@dataclass
class Chaos:
    """Faults to inject during a headless run, each at a fraction of the workload."""

    kill: str | None = None  # SIGKILL at 30 %
    pause: str | None = None  # SIGSTOP for `pause_for` seconds at 40 %
    join_late: str | None = None  # started at 50 %
    leave: str | None = None  # its input ends (it leaves) at 60 %
    pause_for: float = 2.0
    restart: str | None = None  # SIGKILL at 30 %, started again `restart_after` seconds later
    restart_after: float = 2.0

    def roles(self) -> list[str]:
        return [x for x in (self.kill, self.pause, self.join_late, self.leave, self.restart) if x]

    def __bool__(self) -> bool:
        return bool(self.roles())


@dataclass
class Restart:
    """When the restarted peer was killed and started again (wall clock, as the output files')."""

    killed_at: float
    started_at: float | None = None


@dataclass
class HeadlessRun:
    neighbors: Path
    peers: list[str]
    run_dir: Path
    messages: int
    rate: float
    delay: float
    seed: int
    deadline: float
    chaos: Chaos = field(default_factory=Chaos)
    jitter: float = 0.0
    keys: Path | None = None  # the group's keys folder (secured), or None (plain)
    http_offset: int = 0
    order: str = "lamport"
    wire: str = "tom"  # tom, or handout (a static group: no view records)
    trace: bool = False  # each peer records its frame trace beside its output
    durable: bool = False  # each peer keeps a data folder in the run folder (tom peer --data)
    killed_at: float | None = None
    restart: Restart | None = None
    processes: PeerGroup[str] = field(default_factory=PeerGroup)  # by pid; the late joiner last

    def output(self, pid: str) -> Path:
        return self.run_dir / f"out-{split_pid(pid)[1]}.jsonl"

    def log(self, pid: str) -> Path:
        return self.run_dir / f"log-{split_pid(pid)[1]}.txt"

    def start(self, pids: list[str] | None = None) -> None:
        pids = [p for p in self.peers if p != self.chaos.join_late] if pids is None else pids
        for pid in pids:
            command = peer_command(self.neighbors, self.output(pid), pid, self.delay, True, self.jitter, self.keys,
                                   self.http_offset, self.order, self.wire, self.trace, durable=self.durable)
            self.processes.start(pid, PeerProcess(command, self.log(pid)))
        try:
            self.processes.wait_ready(pids, timeout=20)
        except PeerExited as e:
            raise ConfigError(f"peer {e.key} exited at start: see {self.log(str(e.key))}") from None
        except NotReady:
            raise ConfigError("peers did not start listening within 20 s") from None

    def stop(self) -> None:
        self.processes.stop(grace=20)

    def data(self, pid: str) -> Path:
        return data_path(self.run_dir, pid)

    def _feed(self, pid: str, lines: list[str]) -> None:
        if lines:
            self.processes[pid].send(lines)  # a peer gone (killed) takes no more

    def drive(self) -> bool:
        """Feed the workload at the configured rate, inject the faults; True once every survivor
        delivered every message of every peer that did not crash."""
        workload = make_workload(self.peers, self.messages, self.seed)
        for pid, texts in workload.items():
            (self.run_dir / f"workload-{split_pid(pid)[1]}.txt").write_text("".join(t + "\n" for t in texts))
        chaos = self.chaos
        counters = {pid: Counter(self.output(pid)) for pid in self.peers}
        sent = {pid: 0 for pid in self.peers}
        # the workload (and the faults, timed on it) starts once the group has formed: messages sent
        # before would only wait for it, and their latency would measure the forming
        formed_by = time.monotonic() + (30 if self.wire == "tom" else 0)  # the handout's group is static
        while time.monotonic() < formed_by and not all(counters[p].update() >= 0 and counters[p].views
                                                       for p in self.processes):
            time.sleep(0.05)
        started_at = {pid: time.monotonic() for pid in self.processes}
        done_events: set[str] = set()
        paused_until = 0.0
        restart_at = 0.0  # when the restarted peer, killed, is started again (0: not down)
        span = self.messages / self.rate if self.rate > 0 else 1.0
        start = time.monotonic()
        end = start + self.deadline

        def due(pid: str, now: float) -> int:
            if pid not in started_at:
                return 0
            if self.rate <= 0:
                return self.messages
            return min(self.messages, int((now - started_at[pid]) * self.rate) + 1)

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as progress:
            total = self.messages * len(self.peers)
            tasks = {pid: progress.add_task(f"delivered at {pid}", total=total) for pid in self.peers}
            while time.monotonic() < end:
                now = time.monotonic()
                phase = (now - start) / span
                for pid in list(self.processes):
                    n = due(pid, now)
                    if pid == chaos.restart and restart_at:
                        continue  # down: its feed waits
                    if n > sent[pid]:
                        self._feed(pid, workload[pid][sent[pid]:n])
                        sent[pid] = n
                if chaos.kill and phase >= 0.3 and "kill" not in done_events:
                    done_events.add("kill")
                    self.processes[chaos.kill].kill()
                    self.killed_at = time.time()
                    progress.console.print(f"[red]chaos[/]: SIGKILL {chaos.kill}")
                if chaos.restart and phase >= 0.3 and "restart" not in done_events:
                    done_events.add("restart")
                    self.processes[chaos.restart].kill()
                    self.restart = Restart(time.time())
                    restart_at = now + chaos.restart_after
                    progress.console.print(f"[red]chaos[/]: SIGKILL {chaos.restart}, started again in "
                                           f"{chaos.restart_after:g} s")
                if restart_at and now >= restart_at and self.restart is not None:
                    restart_at = 0.0
                    restarted: str = chaos.restart  # type: ignore[assignment]
                    accepted = start_again(self.processes, restarted, self.data(restarted))
                    if accepted is not None:
                        sent[restarted] = accepted
                    self.restart.started_at = time.time()
                    progress.console.print(f"[red]chaos[/]: {restarted} starts again (it had accepted "
                                           f"{sent[restarted]} of its lines)")
                if chaos.pause and phase >= 0.4 and "pause" not in done_events:
                    done_events.add("pause")
                    self.processes[chaos.pause].pause()
                    paused_until = now + chaos.pause_for
                    progress.console.print(f"[yellow]chaos[/]: SIGSTOP {chaos.pause} for {chaos.pause_for:g} s")
                if paused_until and now >= paused_until:
                    paused_until = 0.0
                    self.processes[chaos.pause].resume()  # type: ignore[index]
                    progress.console.print(f"[yellow]chaos[/]: SIGCONT {chaos.pause}")
                if chaos.join_late and phase >= 0.5 and "join" not in done_events:
                    done_events.add("join")
                    self.start([chaos.join_late])
                    started_at[chaos.join_late] = time.monotonic()
                    progress.console.print(f"[green]chaos[/]: {chaos.join_late} starts and joins")
                if chaos.leave and phase >= 0.6 and "leave" not in done_events \
                        and sent[chaos.leave] >= self.messages:
                    done_events.add("leave")
                    self.processes[chaos.leave].close_input()  # end of input: it leaves the group
                    progress.console.print(f"[blue]chaos[/]: {chaos.leave} leaves (end of input)")
                survivors = [p for p in self.processes if p not in (chaos.kill, chaos.leave, chaos.join_late)]
                origins = [p for p in self.processes if p != chaos.kill]
                complete = all(sent[p] >= self.messages for p in origins) and \
                    (not chaos.join_late or chaos.join_late in self.processes) and \
                    (not chaos.restart or ("restart" in done_events and not restart_at)) and \
                    (not chaos.leave or ("leave" in done_events and not self.processes[chaos.leave].running()))
                for pid, counter in counters.items():
                    counter.update()
                    progress.update(tasks[pid], completed=counter.messages)
                    if pid in survivors:
                        complete &= all(counter.by_origin.get(o, 0) >= self.messages for o in origins)
                late = chaos.join_late
                if complete and late:  # the late joiner has what the others delivered since it joined
                    joiner = counters[late]
                    complete = joiner.by_origin.get(late, 0) >= self.messages and all(
                        late in counters[p].at_join and
                        counters[p].messages - counters[p].at_join[late] == joiner.messages
                        for p in survivors)
                if complete:
                    return True
                gone = [p for p, proc in self.processes.items() if not proc.running()
                        and p not in (chaos.kill, chaos.leave) and not (p == chaos.restart and restart_at)]
                if gone:
                    progress.console.print(f"[red]peer {gone[0]} exited during the run[/]: see {self.log(gone[0])}")
                    return False
                time.sleep(0.05)
        console.print(f"[red]deadline of {self.deadline:.0f} s passed before every message was delivered[/]")
        return False


STATS = re.compile(r"premature ACKs: (\d+); deliveries released behind a late head: (\d+)")


def stats_line(order: str, premature: int, released: int) -> str:
    """What the delay made happen, in the terms of the run's order (the sequencer has no ACKs)."""
    held = {"lamport": "a blocked head", "sequencer": "a missing sequence number",
            "causal": "a missing causal predecessor"}.get(order, "a blocked head")
    line = f"messages held behind {held}, then released with it: {released:,}"
    if order == "sequencer":
        return line
    return f"premature ACKs (an ACK before its message): {premature:,}; {line}"


def report_stats(run: "HeadlessRun") -> None:
    """One line on what the delay made happen, from the peers' last log lines."""
    premature = released = 0
    for pid in run.processes:
        found = STATS.findall(run.log(pid).read_text(errors="replace"))
        if found:
            premature += int(found[-1][0])
            released += int(found[-1][1])
    console.print(stats_line(run.order, premature, released))
    if run.killed_at is not None:
        report_crash(run)
    if run.restart is not None and run.restart.started_at is not None:
        console.print(restart_line(run))


def report_crash(run: "HeadlessRun") -> None:
    """How long the survivors took to remove the killed peer, and the longest delivery pause."""
    killed, at = run.chaos.kill, run.killed_at
    removal, pauses = [], []
    for pid in run.processes:
        if pid in (killed, run.chaos.join_late) or not run.output(pid).exists():
            continue
        times = []
        with open(run.output(pid), encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("kind") == "view" and killed in rec.get("removed", ()):
                    removal.append(rec["delivered_at"] - at)
                elif rec.get("kind") == "message":
                    times.append(rec["delivered_at"])
        after = [t for t in times if t >= at]
        if after:
            pauses.append(max(b - a for a, b in zip([at] + after, after)))
    if removal:
        console.print(f"crash of {killed}: removed by the survivors {min(removal):.2f}-{max(removal):.2f} s after "
                      f"SIGKILL; longest pause in deliveries after it: {max(pauses, default=0):.2f} s")


@dataclass(frozen=True)
class RestartSeen:
    """What the output files say of one restart of the peer ``pid`` (wall-clock times, as the files')."""

    admitted: float | None  # the first view that admitted it again, as the others installed it
    whole: float | None  # its own file: the view that admitted it again, after its catch-up
    caught_up: int  # caught-up records in its file


def restart_seen(pid: str, started: float, own: Iterable[dict], others: Iterable[Iterable[dict]]) -> RestartSeen:
    """Read a restart of ``pid``, started again at ``started``, from its own records and the others'.
    Until ``whole`` its file lacks the stretch the group delivered while it was away: it writes nothing
    of the new view before its catch-up."""
    admitted = whole = None
    for recs in others:
        for rec in recs:
            if rec.get("kind") == "view" and pid in rec.get("joined", ()) and rec["delivered_at"] >= started:
                at = rec["delivered_at"]
                admitted = at if admitted is None else min(admitted, at)
                break
    caught = 0
    for rec in own:
        if rec.get("caught_up"):
            caught += 1
        elif rec.get("kind") == "view" and pid in rec.get("joined", ()) and rec["delivered_at"] >= started:
            whole = rec["delivered_at"] if whole is None else whole
    return RestartSeen(admitted, whole, caught)


def restart_line(run: "HeadlessRun") -> str:
    """One line on the restarted peer: when it was killed, started and admitted again, what it caught up,
    and when its file held the group's whole order again."""
    pid, restart = run.chaos.restart, run.restart
    assert pid is not None and restart is not None and restart.started_at is not None
    killed, started = restart.killed_at, restart.started_at
    others = [records(run.output(o)) for o in run.processes if o != pid and run.output(o).exists()]
    seen = restart_seen(pid, started, records(run.output(pid)), others)
    clock = time.strftime("%H:%M:%S", time.localtime(killed)) + f".{int(killed % 1 * 1000):03d}"
    line = f"restart of {pid}: SIGKILL at {clock}, started again {started - killed:.1f} s later, "
    line += (f"admitted again {seen.admitted - killed:.2f} s after the SIGKILL; " if seen.admitted is not None
             else "not seen admitted again; ")
    line += f"{seen.caught_up} event(s) caught up"
    if seen.whole is not None:
        line += f"; its file held the group's whole order again {seen.whole - killed:.2f} s after the SIGKILL"
    return line


def records(path: Path) -> list[dict]:
    """The records of an output file (lines that are not JSON objects skipped)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def run_verifier(run_dir: Path, files: list[Path]) -> int:
    from ..extras import verifier_missing

    if why := verifier_missing():
        console.print(f"launch: not verified: {why}")
        return 2
    from analysis.verify import main as verify_main

    return verify_main([*map(str, files), "--report-dir", str(run_dir)])


def build_parser() -> argparse.ArgumentParser:
    from ..core import ORDERS

    p = argparse.ArgumentParser(prog="launch", description="Start every local peer of a neighbors file.")
    p.add_argument("neighbors", type=Path)
    p.add_argument("--order", choices=ORDERS, default="lamport",
                   help="the group's order, given to every peer (tom peer --order; default lamport)")
    p.add_argument("--messages", type=int, default=0, metavar="N",
                   help="headless: send N generated messages per peer, then verify (default: tmux panes)")
    p.add_argument("--rate", type=float, default=0.0, help="messages per second per peer (0: as fast as possible)")
    p.add_argument("--delay", type=float, default=0.0, help="artificial delay of every frame, seconds")
    p.add_argument("--jitter", type=float, default=0.0,
                   help="random extra delay per link, up to this many seconds, drawn again every 2 s (keeps "
                        "each link FIFO; ACKs overtake messages: premature ACKs)")
    p.add_argument("--seed", type=int, default=1, help="workload seed")
    p.add_argument("--deadline", type=float, default=300.0, help="seconds to wait for delivery everywhere")
    p.add_argument("--runs", type=Path, default=Path("runs"),
                   help="folder for run folders, one per run named by its start time; RUNS/latest links to the "
                        "newest (default runs/)")
    p.add_argument("--no-verify", action="store_true", help="skip the Spark verification")
    p.add_argument("--no-attach", action="store_true", help="tmux mode: do not attach")
    p.add_argument("--insecure", action="store_true",
                   help="plain TCP, no keys, an API without a token (default: a closed group, mutual TLS with "
                        "keys made in the run folder); the course's protocol is --wire handout")
    p.add_argument("--http-offset", type=int, default=3000, metavar="N",
                   help="serve each peer's dashboard and API on its port + N (default 3000: 5000 -> 8000) and "
                        "print one URL for the whole group")
    p.add_argument("--no-http", action="store_true", help="start the peers without --http")
    p.add_argument("--no-trace", action="store_true",
                   help="do not record the peers' frame traces (by default each peer writes <port>.trace in "
                        "the run folder, for tom replay)")
    p.add_argument("--step", action="store_true",
                   help="step mode, for a lab (tmux only): every peer holds the ordered frames it receives "
                        "(tom peer --step) until they are released, link head by link head, from the group "
                        "dashboard's Step panel")
    p.add_argument("--wire", choices=("tom", "handout"), default="tom",
                   help="handout: the peers speak the SE424 handout's protocol (tom peer --wire handout): a "
                        "static group on plain TCP, the lamport order, no dashboard")
    p.add_argument("--no-data", action="store_true",
                   help="crash-stop peers: without a data folder each (by default, on TOM's wire, every "
                        "peer is durable: tom peer --data <run>/data-<port>, so a peer killed and started again "
                        "with its command line catches up what it missed; --wire handout runs without)")
    chaos = p.add_argument_group("chaos (headless runs; each takes a port or host:port of the neighbors file)")
    chaos.add_argument("--kill", metavar="PEER", help="SIGKILL this peer at 30%% of the workload")
    chaos.add_argument("--pause", metavar="PEER", help="SIGSTOP this peer for --pause-for seconds at 40%%")
    chaos.add_argument("--pause-for", type=float, default=2.0, metavar="SECONDS")
    chaos.add_argument("--join-late", metavar="PEER", help="start this peer only at 50%% of the workload")
    chaos.add_argument("--leave", metavar="PEER", help="end this peer's input (it leaves) at 60%%")
    chaos.add_argument("--restart", metavar="PEER",
                       help="SIGKILL this durable peer at 30%% and start it again 2 s later with the same "
                            "command line (its output file and data folder): it catches up what the group "
                            "delivered meanwhile, its workload goes on after the lines it had accepted, and "
                            "the run waits until its file holds the group's whole order (not with --no-data "
                            "or --wire handout)")
    return p


def link_latest(run_dir: Path) -> None:
    """Point ``latest`` beside ``run_dir`` at it (replaced in one step; a filesystem without links: none)."""
    latest = run_dir.parent / "latest"
    fresh = run_dir.parent / f".latest-{os.getpid()}"
    try:
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(fresh, latest)
    except OSError:
        fresh.unlink(missing_ok=True)


def pick(peers: list[str], what: str | None, flag: str) -> str | None:
    """The local peer named by ``what`` (a port or a host:port of the neighbors file)."""
    if what is None:
        return None
    matches = [p for p in peers if p == what or str(split_pid(p)[1]) == what]
    if len(matches) != 1:
        raise ConfigError(f"{flag} {what}: not one of the local peers {', '.join(peers)}")
    return matches[0]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        peers = local_peers(load_neighbors(args.neighbors))
        if not peers:
            raise ConfigError(f"{args.neighbors}: no entry names a local address")
        if args.step and (args.messages > 0 or args.no_http or args.wire == "handout"):
            raise ConfigError("--step is for a group stepped by hand from the dashboard: without --messages, "
                              "--no-http or --wire handout")
        durable = takes_data(args.order, args.wire) and not args.no_data
        if args.restart is not None and not durable:
            raise ConfigError("--restart needs durable peers: TOM's wire, without --no-data")
        run_dir = args.runs / time.strftime("%Y%m%d-%H%M%S")
        suffix = 1
        while run_dir.exists():
            run_dir = args.runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{suffix}"
            suffix += 1
        run_dir.mkdir(parents=True)
        link_latest(run_dir)
        neighbors = run_dir / "neighbors.txt"
        shutil.copyfile(args.neighbors, neighbors)
        keys = None
        if args.wire == "handout":
            if args.order != "lamport" or args.jitter:
                raise ConfigError("--wire handout runs the lamport order without --jitter (it would reorder frames)")
            notes = [] if args.insecure else ["plain TCP, not a closed group"]
            if not args.no_http:
                notes.append("no dashboard")
            if notes:
                console.print(f"--wire handout: the handout's protocol: {' and '.join(notes)}")
            args.insecure, args.no_http, args.no_trace = True, True, True
        if not args.insecure:
            keys = run_dir / "keys"
            create_keys(load_neighbors(neighbors), keys)
        http_offset = 0 if args.no_http else args.http_offset
        if http_offset:
            group_url(peers, http_offset)  # a port out of range fails here, before anything starts
        if args.messages <= 0:
            return launch_tmux(neighbors, peers, run_dir, args.delay, not args.no_attach, args.jitter, keys,
                               http_offset, args.order, args.wire, not args.no_trace, args.step, durable)
        chaos = Chaos(pick(peers, args.kill, "--kill"), pick(peers, args.pause, "--pause"),
                      pick(peers, args.join_late, "--join-late"), pick(peers, args.leave, "--leave"),
                      args.pause_for, pick(peers, args.restart, "--restart"))
        if chaos and args.wire == "handout":
            raise ConfigError("chaos needs TOM's wire: the handout's static group has no failure detection and "
                              "no joins (a stopped peer blocks every delivery)")
        if chaos and args.rate <= 0:
            raise ConfigError("chaos needs a paced workload: give --rate")
        roles = chaos.roles()
        if len(set(roles)) != len(roles):
            raise ConfigError("give each chaos role to a different peer")
        run = HeadlessRun(neighbors, peers, run_dir, args.messages, args.rate, args.delay, args.seed,
                          args.deadline, chaos, args.jitter, keys, http_offset, args.order, wire=args.wire,
                          trace=not args.no_trace, durable=durable)
        console.print(f"run folder: [bold]{run_dir}[/] — {len(peers)} peers × {args.messages} messages, "
                      f"{args.order} order{', the handout wire' if args.wire == 'handout' else ''}, "
                      f"delay {args.delay}s, rate {args.rate or 'max'}/s, seed {args.seed}, "
                      + ("plain TCP (--insecure)" if keys is None else "secured (mutual TLS, keys in the run folder)")
                      + (", durable peers (data-<port>/ in the run folder)" if durable else ""))
        if http_offset:
            console.print(f"group dashboard (while the run lasts): [bold]{group_url(peers, http_offset, keys)}[/]",
                          soft_wrap=True)
        try:
            run.start()
            complete = run.drive()
        finally:
            run.stop()
        report_stats(run)
        if run.trace:
            console.print(f"frame traces in {run_dir}: [bold]tom replay {run_dir}[/] draws the run again "
                          f"(--shiviz OUT.log writes it for ShiViz)")
        codes = run.processes.returncodes()
        if any(codes.values()):
            console.print(f"[yellow]peer exit codes: {codes}[/]")
        if args.no_verify:
            return 0 if complete else 1
        code = run_verifier(run_dir, [run.output(p) for p in peers if run.output(p).exists()])
        return code if complete else max(code, 1)
    except TomError as e:
        console.print(f"launch: error: {e}")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
