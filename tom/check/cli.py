"""``tom check``: explore every interleaving of a small group on the real core (`tom.check.explore`).

Exit status, as `tom verify`'s: 0 no violation found, 1 a violation, 2 a usage error; 130 stopped by
Ctrl-C (what was explored by then is reported).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console

from .world import ATTEMPTS, HORIZON, TICK_SECONDS, Config

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse's own exit status for usage errors)
        self.print_usage(sys.stderr)
        print(f"tom check: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _peer_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected peer numbers like 1,2 — got {text!r}") from None


def _cut(text: str) -> tuple[frozenset[int], ...]:
    sides = text.split("/")
    if len(sides) < 2:
        raise argparse.ArgumentTypeError(f"expected sides like 1,2/3 — got {text!r}")
    return tuple(frozenset(_peer_list(side)) for side in sides)


def _one_way(text: str) -> tuple[int, int]:
    a, sep, b = text.partition(">")
    if not sep or not a.isdigit() or not b.isdigit():
        raise argparse.ArgumentTypeError(f"expected A>B (A's frames no longer reach B) — got {text!r}")
    return int(a), int(b)


def build_parser() -> argparse.ArgumentParser:
    from ..core import ORDERS

    p = _Parser(prog="tom check", description=(
        "Explore every interleaving of a small group's real protocol core (frames on FIFO links, local "
        "sends, faults, timeouts) and check the order's invariants at every state. Exit status: 0 no "
        "violation found, 1 a violation (a shrunk counterexample is written), 2 usage error, 130 stopped by "
        "Ctrl-C (what was explored by then is reported)."))
    p.add_argument("--order", choices=ORDERS, default="lamport")
    p.add_argument("--peers", type=int, default=3, metavar="N", help="peers 1..N in view 1 (default 3)")
    p.add_argument("--messages", type=int, default=1, metavar="M", help="messages each peer sends (default 1)")
    p.add_argument("--senders", type=_peer_list, metavar="PEERS",
                   help="only these peers send (e.g. 1,3; default every peer)")
    p.add_argument("--crash", type=_peer_list, default=[], metavar="PEER",
                   help="this peer may crash (1,2: each), once (with --restart: before its restart or after it)")
    p.add_argument("--restart", type=_peer_list, default=[], metavar="PEER",
                   help="every peer keeps a data folder (tom peer --data), and this one (1,2: each) may crash at "
                        "any point and start again from it, once (with --crash PEER too: also after a crash)")
    p.add_argument("--join", type=int, default=0, metavar="K", help="K new peers (N+1..N+K) may start and join")
    p.add_argument("--leave", type=_peer_list, default=[], metavar="PEER", help="this peer may leave")
    p.add_argument("--cut", type=_cut, metavar="A,B/C", help="a partition between the sides, once, healed later")
    p.add_argument("--cut-one-way", type=_one_way, action="append", default=[], metavar="A>B",
                   help="A's frames no longer reach B, once, healed later")
    p.add_argument("--heal-late", action="store_true",
                   help="the cut heals only once nothing but time passing is left (every schedule of the "
                        "partition, then of what follows the heal; not heals in between)")
    p.add_argument("--false-suspicion", action="store_true",
                   help="a member may also be suspected while it is alive and reachable")
    p.add_argument("--found", action="store_true",
                   help="start with no group: the founding handshake forms view 1 (default: view 1 installed)")
    p.add_argument("--ticks", type=int, default=None, metavar="K",
                   help="heartbeat periods a stuck peer may see pass (default 2, 5 with --found; a state left stuck only for "
                        "want of more is not judged for liveness, and the search says how many)")
    timed = p.add_argument_group("timed mode", (
        "time is global, in ticks of 0.5 s (half a heartbeat period): a frame sent at tick t arrives at "
        "tick t+K (t+K..t+K+J with --jitter), links FIFO; time advances a tick at every peer only when no "
        "frame is overdue, and stops when nothing but heartbeats would happen (no --ticks, no timeout steps: "
        "the clock suspects the silent)"))
    timed.add_argument("--delay", type=int, metavar="K", help="every frame takes K ticks (K=3: 1.5 s)")
    timed.add_argument("--jitter", type=int, default=0, metavar="J",
                       help="a frame takes K..K+J ticks, each a schedule of its own (default 0)")
    timed.add_argument("--horizon", type=int, default=HORIZON, metavar="T",
                       help=f"time stops at tick T (default {HORIZON}: {HORIZON * TICK_SECONDS:g} s); states it cuts "
                            "off are counted, their liveness not judged")
    p.add_argument("--max-attempts", type=int, metavar="N",
                   help=f"progress: a peer's founding attempts, or one view change's rounds, past N without a "
                        f"decision is a violation (livelock), found without waiting for a terminal state "
                        f"(default {ATTEMPTS} with --delay, none without)")
    p.add_argument("--dynamic", action="store_true",
                   help="views and failure detection even without a fault (default: a static group)")
    p.add_argument("--strategy", choices=("bfs", "dfs", "random"), default="dfs")
    p.add_argument("--depth", type=int, metavar="D", help="explore at most D steps deep")
    p.add_argument("--time-limit", type=float, metavar="S", help="stop after S seconds (bounded search)")
    p.add_argument("--max-states", type=int, metavar="N", help="stop after N distinct states")
    p.add_argument("--seed", type=int, default=1, help="seed of --strategy random")
    p.add_argument("--out", type=Path, default=Path("tom-check"),
                   help="where a counterexample goes (default tom-check/)")
    p.add_argument("--no-shrink", action="store_true", help="write the first counterexample as found")
    p.add_argument("--replay", type=Path, metavar="FILE", help="replay a transcript and check it")
    p.add_argument("--from", dest="start", metavar="FILE[:N]",
                   help="explore from where a transcript's first N steps lead (default: all of them), in "
                        "its configuration (the configuration options are then not taken)")
    return p


def config_of(args: argparse.Namespace) -> Config:
    n = args.peers
    if not 1 <= n <= 6:
        raise ValueError("--peers must be 1..6 (the state space of more is out of reach)")
    if not 0 <= args.messages <= 5:
        raise ValueError("--messages must be 0..5")
    everyone = set(range(1, n + args.join + 1))
    named = list(args.crash) + list(args.leave) + list(args.senders or []) + list(args.restart)
    if args.cut:
        named += [p for side in args.cut for p in side]
    named += [p for pair in args.cut_one_way for p in pair]
    bad = [p for p in named if p not in everyone]
    if bad:
        raise ValueError(f"peer {bad[0]} is not one of 1..{n + args.join}")
    if args.delay is None and (args.jitter or args.horizon != HORIZON):
        raise ValueError("--jitter and --horizon are the timed mode's: give --delay too")
    if args.delay is not None and not (0 <= args.delay and 0 <= args.jitter and 1 <= args.horizon):
        raise ValueError("--delay and --jitter must be 0 or more, --horizon 1 or more")
    if args.restart and args.delay is not None:
        raise ValueError("--restart is not explored in the timed mode (--delay) yet")
    if args.max_attempts is not None and args.max_attempts < 1:
        raise ValueError("--max-attempts must be 1 or more")
    if args.cut and sorted(p for side in args.cut for p in side) != sorted(set(p for side in args.cut for p in side)):
        raise ValueError("--cut: a peer is on two sides")
    return Config(order=args.order, peers=n, messages=args.messages, crash=tuple(args.crash), join=args.join,
                  leave=tuple(args.leave), restart=tuple(args.restart), cut=args.cut, cut_one_way=tuple(args.cut_one_way),
                  false_suspicion=args.false_suspicion, dynamic=args.dynamic, heal_late=args.heal_late,
                  senders=tuple(args.senders) if args.senders else None,
                  ticks=args.ticks if args.ticks is not None else 5 if args.found else 2, found=args.found,
                  delay=args.delay, jitter=args.jitter, horizon=args.horizon,
                  max_attempts=args.max_attempts if args.max_attempts is not None
                  else ATTEMPTS if args.delay is not None else None)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(highlight=False, soft_wrap=True)
    try:
        return _main(args, console)
    except KeyboardInterrupt:  # (outside the search itself, which reports what it explored)
        console.print("tom check: stopped (Ctrl-C)", markup=False)
        return EXIT_INTERRUPTED


def _main(args: argparse.Namespace, console: Console) -> int:
    if args.replay is not None:
        return replay_file(args.replay, console)
    prefix: list = []
    try:
        if args.start is not None:
            config, prefix = start_of(args.start, args)
        else:
            config = config_of(args)
    except (OSError, ValueError) as e:
        console.print(f"tom check: error: {e}", markup=False)
        return EXIT_USAGE
    from .explore import search, shrink

    if prefix:
        console.print(f"from: {args.start}, after its first {len(prefix)} steps", markup=False)
    console.print(f"checking: {config.describe()}; strategy {args.strategy}"
                  + ("" if config.timed else f", ticks {config.ticks}")
                  + (f", depth {args.depth}" if args.depth else "")
                  + (f", time limit {args.time_limit:g} s" if args.time_limit else ""), markup=False)
    progress = _Progress(console) if console.is_terminal else None
    try:
        result = search(config, args.strategy, depth=args.depth, time_limit=args.time_limit,
                        max_states=args.max_states, seed=args.seed, progress=progress.update if progress else None,
                        prefix=prefix)
    finally:
        if progress is not None:
            progress.stop()
    how = ("exhaustive" if result.exhaustive else f"bounded by {result.bound}" if result.bound
           else "stopped at the first violation")
    if result.exhaustive and result.horizon_cut:
        how = f"exhaustive up to the horizon (tick {config.horizon})"
    quiescent = result.terminal - result.tick_bounded - result.horizon_cut
    console.print(f"{result.states:,} distinct states, {result.transitions:,} transitions, depth {result.depth}, "
                  f"{result.terminal:,} terminal states"
                  + (f" ({result.tick_bounded:,} of them stuck for want of ticks: liveness not judged there)"
                     if result.tick_bounded else "")
                  + (f" ({result.horizon_cut:,} of them cut off by the horizon, tick {config.horizon}: liveness not "
                     f"judged there)" if config.timed else "")
                  + (f", {quiescent:,} quiescent ({100 * quiescent / result.terminal:.1f}% of terminal states)"
                     if result.terminal else "")
                  + f", {result.elapsed:.1f} s ({result.rate:,.0f} states/s); {how}", markup=False)
    if result.found is None:
        console.print(f"[bold green]NO VIOLATION[/] ({how})")
        return EXIT_INTERRUPTED if "Ctrl-C" in (result.bound or "") else EXIT_OK
    found = result.found
    console.print(f"[bold red]VIOLATION[/] {found.violation}", highlight=False)
    from .explore import replay

    _, events, _ = replay(config, found.steps)
    found.events = events
    console.print(f"first counterexample: {len(found.steps)} steps", markup=False)
    final = found
    if not args.no_shrink:
        started = time.perf_counter()
        final = shrink(config, found)
        console.print(f"shrunk to {len(final.steps)} steps in {time.perf_counter() - started:.1f} s", markup=False)
    for i, step in enumerate(final.steps, 1):
        from .trace import command

        console.print(f"  {i:3}. {command(step, final.events[i - 1])}", markup=False)
    paths = write_counterexample(config, final, args.out)
    console.print("written: " + ", ".join(str(p) for p in paths), markup=False)
    return EXIT_VIOLATION


def write_counterexample(config: Config, found, out: Path) -> list[Path]:
    from .trace import page, shiviz, transcript

    out.mkdir(parents=True, exist_ok=True)
    files = [(out / "counterexample.txt", transcript(config, found)),
             (out / "counterexample.html", page(config, found)),
             (out / "counterexample.shiviz.log", shiviz(config, found))]
    for path, text in files:
        path.write_text(text, encoding="utf-8")
    return [p for p, _ in files]


# what --from takes from the transcript: options that would change the group are refused with it
_GROUP_OPTIONS = ("order", "peers", "messages", "senders", "crash", "restart", "join", "leave", "cut", "cut_one_way",
                  "false_suspicion", "found", "dynamic", "delay", "jitter", "horizon", "max_attempts")


def start_of(spec: str, args: argparse.Namespace | None = None) -> tuple[Config, list]:
    """``FILE[:N]``: a transcript's configuration and its first ``N`` steps (all without ``:N``), each
    checked to be enabled where it comes (ValueError otherwise, or for a bad ``N``). From ``args``,
    ``--heal-late`` and ``--ticks`` apply to that configuration; an option that would change the
    group is a ValueError."""
    from dataclasses import replace

    from .explore import replay
    from .trace import parse_command, parse_transcript

    if args is not None:
        defaults = build_parser().parse_args([])
        for name in _GROUP_OPTIONS:
            if getattr(args, name) != getattr(defaults, name):
                raise ValueError(f"--from takes the group from its transcript: --{name.replace('_', '-')} cannot change it")

    name, _, count = spec.rpartition(":")
    if not count.isdigit():  # (no ":N": every step; a ":" may be part of the path)
        name, count = spec, ""
    config, blocks = parse_transcript(Path(name).read_text(encoding="utf-8"))
    steps = [parse_command(cmd) for cmd, _ in blocks if cmd != "check"]
    n = int(count) if count else len(steps)
    if not 0 <= n <= len(steps):
        raise ValueError(f"{name}: it has {len(steps)} steps, not {n}")
    steps = steps[:n]
    if args is not None:
        config = replace(config, heal_late=config.heal_late or args.heal_late,
                         ticks=config.ticks if args.ticks is None else args.ticks)
    replay(config, steps)  # (raises ValueError: a step not enabled where it comes)
    return config, steps


def replay_file(path: Path, console: Console) -> int:
    from .trace import run_transcript

    try:
        rows = run_transcript(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        console.print(f"tom check: error: {path}: {e}", markup=False)
        return EXIT_USAGE
    verdict = EXIT_OK
    differs = 0
    for cmd, want, got in rows:
        if cmd == "replay":
            console.print(f"tom check: error: {path}: {got[0]}", markup=False)
            return EXIT_USAGE
        console.print(cmd, markup=False)
        for line in got:
            console.print(f"  {line}", markup=False)
        if cmd == "check" and got != ["ok"]:
            verdict = EXIT_VIOLATION
        elif cmd != "check" and got != want:
            differs += 1
    if differs:
        console.print(f"{differs} step(s) did something else than the transcript says (the core changed)",
                      markup=False)
    console.print("[bold red]VIOLATION[/]" if verdict else "[bold green]NO VIOLATION[/]")
    return verdict


class _Progress:
    """A rich status line on a terminal: states, transitions, depth, states/s."""

    def __init__(self, console: Console) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=console, transient=True)
        self.task = self.progress.add_task("exploring", total=None)
        self.progress.start()

    def update(self, result) -> None:
        self.progress.update(self.task, description=f"{result.states:,} states, {result.transitions:,} transitions, "
                                                    f"depth {result.depth}, {result.rate:,.0f} states/s")

    def stop(self) -> None:
        self.progress.stop()
