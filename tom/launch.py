"""Launch every local peer of a neighbors file: in tmux panes, or headless with a generated workload.

Headless runs keep everything under ``runs/<timestamp>/``: the neighbors file used, one workload and one
log and one output file per peer, and the verifier's report. A run waits until every message is
delivered at every peer (or a deadline), stops the peers with SIGTERM, then runs the Spark verifier.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .errors import ConfigError, TomError
from .neighbors import load_neighbors
from .pid import split_pid

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


def peer_command(neighbors: Path, output: Path, pid: str, delay: float, headless: bool) -> list[str]:
    host, port = split_pid(pid)
    cmd = [sys.executable, "-m", "tom", "peer", str(neighbors), str(output), str(port), "--host", host.strip("[]")]
    if delay:
        cmd += ["--delay", str(delay)]
    if headless:
        cmd.append("--no-ui")
    return cmd


def launch_tmux(neighbors: Path, peers: list[str], run_dir: Path, delay: float, attach: bool) -> int:
    """One tmux window split in one pane per peer, each running `tom peer` with its terminal UI."""
    if shutil.which("tmux") is None:
        raise ConfigError("tmux is not installed (apt-get install tmux), or use --messages for a headless run")
    session = f"tom-{run_dir.name}"
    cmds = [shlex.join(peer_command(neighbors, run_dir / f"out-{split_pid(p)[1]}.jsonl", p, delay, False))
            for p in peers]
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "60", cmds[0]], check=True)
    for cmd in cmds[1:]:
        subprocess.run(["tmux", "split-window", "-t", session, cmd], check=True)
        subprocess.run(["tmux", "select-layout", "-t", session, "tiled"], check=True)
    subprocess.run(["tmux", "set-option", "-t", session, "remain-on-exit", "on"], check=False)
    console.print(f"tmux session [bold]{session}[/]: {len(peers)} peers; outputs in {run_dir}")
    if attach and sys.stdin.isatty():
        return subprocess.run(["tmux", "attach", "-t", session]).returncode
    console.print(f"attach with: tmux attach -t {session}")
    return 0


@dataclass
class Counter:
    """Counts the lines of a growing file without re-reading it."""

    path: Path
    offset: int = 0
    lines: int = 0

    def update(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return self.lines
        self.offset += len(data)
        self.lines += data.count(b"\n")
        return self.lines


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
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def output(self, pid: str) -> Path:
        return self.run_dir / f"out-{split_pid(pid)[1]}.jsonl"

    def start(self) -> None:
        for pid in self.peers:
            port = split_pid(pid)[1]
            log = open(self.run_dir / f"log-{port}.txt", "wb")
            self.procs[pid] = subprocess.Popen(
                peer_command(self.neighbors, self.output(pid), pid, self.delay, True),
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 20
        while time.monotonic() < end:
            logs = [(self.run_dir / f"log-{split_pid(p)[1]}.txt").read_text(errors="replace") for p in self.peers]
            if all("Started to listen" in t for t in logs):
                return
            dead = [p for p, proc in self.procs.items() if proc.poll() is not None]
            if dead:
                raise ConfigError(f"peer {dead[0]} exited at start: see {self.run_dir}/log-{split_pid(dead[0])[1]}.txt")
            time.sleep(0.05)
        raise ConfigError("peers did not start listening within 20 s")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def drive(self) -> bool:
        """Feed the workload at the configured rate; return True once all is delivered everywhere."""
        workload = make_workload(self.peers, self.messages, self.seed)
        for pid, texts in workload.items():
            (self.run_dir / f"workload-{split_pid(pid)[1]}.txt").write_text("".join(t + "\n" for t in texts))
        total = self.messages * len(self.peers)
        counters = {pid: Counter(self.output(pid)) for pid in self.peers}
        sent = 0
        start = time.monotonic()
        end = start + self.deadline
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as progress:
            tasks = {pid: progress.add_task(f"delivered at {pid}", total=total) for pid in self.peers}
            while time.monotonic() < end:
                due = self.messages if self.rate <= 0 else min(self.messages, int((time.monotonic() - start) * self.rate) + 1)
                if due > sent:
                    for pid in self.peers:
                        stdin = self.procs[pid].stdin
                        assert stdin is not None
                        stdin.write("".join(t + "\n" for t in workload[pid][sent:due]).encode())
                        stdin.flush()
                    sent = due
                done = True
                for pid, counter in counters.items():
                    n = counter.update()
                    progress.update(tasks[pid], completed=n)
                    done &= n >= total
                if done:
                    return True
                if any(p.poll() is not None for p in self.procs.values()):
                    console.print("[red]a peer exited during the run[/]")
                    return False
                time.sleep(0.05)
        console.print(f"[red]deadline of {self.deadline:.0f} s passed before every message was delivered[/]")
        return False


def run_verifier(run_dir: Path, files: list[Path]) -> int:
    from analysis.verify import main as verify_main

    return verify_main([*map(str, files), "--report-dir", str(run_dir)])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launch", description="Start every local peer of a neighbors file.")
    p.add_argument("neighbors", type=Path)
    p.add_argument("--messages", type=int, default=0, metavar="N",
                   help="headless: send N generated messages per peer, then verify (default: tmux panes)")
    p.add_argument("--rate", type=float, default=0.0, help="messages per second per peer (0: as fast as possible)")
    p.add_argument("--delay", type=float, default=0.0, help="artificial delay of every frame, seconds")
    p.add_argument("--seed", type=int, default=1, help="workload seed")
    p.add_argument("--deadline", type=float, default=300.0, help="seconds to wait for delivery everywhere")
    p.add_argument("--runs", type=Path, default=Path("runs"), help="folder for run folders (default runs/)")
    p.add_argument("--no-verify", action="store_true", help="skip the Spark verification")
    p.add_argument("--no-attach", action="store_true", help="tmux mode: do not attach")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        peers = local_peers(load_neighbors(args.neighbors))
        if not peers:
            raise ConfigError(f"{args.neighbors}: no entry names a local address")
        run_dir = args.runs / time.strftime("%Y%m%d-%H%M%S")
        suffix = 1
        while run_dir.exists():
            run_dir = args.runs / f"{time.strftime('%Y%m%d-%H%M%S')}-{suffix}"
            suffix += 1
        run_dir.mkdir(parents=True)
        neighbors = run_dir / "neighbors.txt"
        shutil.copyfile(args.neighbors, neighbors)
        if args.messages <= 0:
            return launch_tmux(neighbors, peers, run_dir, args.delay, not args.no_attach)
        run = HeadlessRun(neighbors, peers, run_dir, args.messages, args.rate, args.delay, args.seed, args.deadline)
        console.print(f"run folder: [bold]{run_dir}[/] — {len(peers)} peers × {args.messages} messages, "
                      f"delay {args.delay}s, rate {args.rate or 'max'}/s, seed {args.seed}")
        try:
            run.start()
            complete = run.drive()
        finally:
            run.stop()
        codes = {pid: proc.returncode for pid, proc in run.procs.items()}
        if any(codes.values()):
            console.print(f"[yellow]peer exit codes: {codes}[/]")
        if args.no_verify:
            return 0 if complete else 1
        code = run_verifier(run_dir, [run.output(p) for p in peers])
        return code if complete else max(code, 1)
    except TomError as e:
        console.print(f"launch: error: {e}")
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
