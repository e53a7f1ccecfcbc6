"""``scripts/netlab``: run a TOM group in network namespaces under a fault schedule, then verify."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from ...errors import ConfigError, TomError
from .network import LabNetwork, check_available
from .run import LabConfig, LabRun, console
from .schedule import Schedule

EPILOG = """\
WHEN is 30% (of --duration) or 12s (after the workload starts); +FOR a length, like +2s.
Peers are numbered 1..N; peer i is 10.77.0.i:5000 in a network namespace of its own.
examples:
  scripts/netlab --peers 5 --partition 1,2/3,4,5@30% --heal 60%
  scripts/netlab --loss 0.2:1-2@10%+10s --pause 3@40%+2s --kill 5@70%
  scripts/netlab --peers 4 --restart 2@30%+3s
Peers are durable (tom peer --data <run folder>/data-<i>) unless --no-data.
Exit status: 0 verified, 1 not verified or not everything delivered, 2 cannot run (not root, no
namespaces, bad option)."""


class Stopped(Exception):
    """SIGTERM or SIGHUP: stop the run as Ctrl-C does."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="netlab", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Run a TOM group of N peers, each in its own network namespace on a private switch,\n"
                    "apply a fault schedule (partitions, packet loss, pauses, kills, restarts), stop, remove the\n"
                    "namespaces and verify the output files with Spark. Needs root.")
    p.add_argument("--peers", type=int, default=5, metavar="N", help="group size (default 5)")
    p.add_argument("--duration", type=float, default=20.0, metavar="SECONDS",
                   help="length of the workload (default 20); fault times are relative to it")
    p.add_argument("--rate", type=float, default=10.0, help="messages per second per peer (default 10)")
    p.add_argument("--messages", type=int, metavar="N", help="messages per peer (sets --rate to N/--duration)")
    p.add_argument("--seed", type=int, default=1, help="workload seed (the packet loss draws are the kernel's)")
    faults = p.add_argument_group("faults (each may be repeated)")
    faults.add_argument("--partition", action="append", default=[], metavar="SIDES[@WHEN][+FOR]",
                        help="cut the switch into sides, like 1,2/3,4,5@30%% (every peer on one side; "
                             "default at 30%%); +FOR heals after FOR")
    faults.add_argument("--heal", action="append", default=[], metavar="WHEN",
                        help="every peer on one switch again, like 60%% (also --heal@60%%)")
    faults.add_argument("--loss", action="append", default=[], metavar="P[:LINKS][@WHEN][+FOR]",
                        help="drop each IPv4 packet on LINKS (1-2,2-3 or 3: every link of peer 3; default "
                             "every link) with probability P, both ways, from WHEN (default 0%%) for FOR "
                             "(default to the end), like 0.2:1-2@10%%+10s")
    faults.add_argument("--cut-one-way", action="append", default=[], metavar="A>B[@WHEN][+FOR]",
                        help="peer A's packets no longer reach peer B, while B's still reach A, like "
                             "4>2@30%% (default at 30%%, to the end; +FOR mends it after FOR)")
    faults.add_argument("--pause", action="append", default=[], metavar="PEER[@WHEN][+FOR]",
                        help="SIGSTOP a peer, SIGCONT after FOR (default 2s); default at 40%%")
    faults.add_argument("--kill", action="append", default=[], metavar="PEER[@WHEN]",
                        help="SIGKILL a peer; default at 30%%")
    faults.add_argument("--restart", action="append", default=[], metavar="PEER[@WHEN][+AFTER]",
                        help="SIGKILL a durable peer, then start it again AFTER later (default 2s) with the "
                             "same command line in its namespace (its output file, its data folder): it "
                             "catches up what the group delivered meanwhile, and its workload goes on after "
                             "the lines it had accepted; default at 30%% (not with --no-data)")
    peer = p.add_argument_group("peers")
    peer.add_argument("--insecure", action="store_true", help="plain TCP (default: mutual TLS, keys made for the run)")
    peer.add_argument("--no-data", action="store_true",
                      help="crash-stop peers, without a data folder (default: durable peers, each with "
                           "tom peer --data <run folder>/data-<i>)")
    peer.add_argument("--quorum", metavar="MODE", help="passed to tom peer as --quorum MODE")
    peer.add_argument("--last-man-standing", action="store_true",
                      help="passed to tom peer: a group may shrink below a majority of the neighbors file")
    peer.add_argument("--timeout", metavar="SECONDS", help="passed to tom peer (default: the peer's, 5)")
    peer.add_argument("--heartbeat", metavar="SECONDS", help="passed to tom peer (default: the peer's, 1)")
    run = p.add_argument_group("run")
    run.add_argument("--keep", type=Path, metavar="DIR",
                     help="keep the run's files (outputs, logs, workloads, keys, verifier report) in DIR "
                          "(default: a temporary folder, removed at the end)")
    run.add_argument("--settle", type=float, default=10.0, metavar="SECONDS",
                     help="after the workload, stop once nothing was delivered for this long (default 10)")
    run.add_argument("--deadline", type=float, default=60.0, metavar="SECONDS",
                     help="after the workload, stop after this long in any case (default 60)")
    run.add_argument("--no-verify", action="store_true", help="skip the Spark verification")
    return p


def normalize(argv: list[str]) -> list[str]:
    """``--heal@60%`` is ``--heal 60%``."""
    out = []
    for arg in argv:
        if arg.startswith("--heal@"):
            out += ["--heal", arg[len("--heal@"):]]
        else:
            out.append(arg)
    return out


def make_schedule(args: argparse.Namespace) -> Schedule:
    schedule = Schedule(args.peers, args.duration)
    for flag in ("partition", "heal", "loss", "cut_one_way", "pause", "kill", "restart"):
        for text in getattr(args, flag):
            getattr(schedule, flag)(text)
    return schedule


def check_numbers(args: argparse.Namespace) -> None:
    if not 2 <= args.peers <= 64:
        raise ConfigError(f"--peers {args.peers}: the lab runs 2..64 peers")
    if not 1 <= args.duration <= 3600:
        raise ConfigError(f"--duration {args.duration:g}: give 1..3600 seconds")
    if args.messages is not None:
        if not 1 <= args.messages <= 1_000_000:
            raise ConfigError(f"--messages {args.messages}: give 1..1000000")
        args.rate = args.messages / args.duration
    if args.restart and args.no_data:
        raise ConfigError("--restart needs durable peers: leave out --no-data")
    if not 0 < args.rate <= 10_000:
        raise ConfigError(f"--rate {args.rate:g}: give more than 0 and at most 10000 messages a second")
    if not 0 < args.settle <= 600 or not 0 < args.deadline <= 3600:
        raise ConfigError("--settle and --deadline take 0..600 and 0..3600 seconds")


def peer_args(args: argparse.Namespace) -> list[str]:
    extra = []
    for flag in ("quorum", "timeout", "heartbeat"):
        if getattr(args, flag) is not None:
            extra += [f"--{flag}", getattr(args, flag)]
    if args.last_man_standing:
        extra.append("--last-man-standing")
    return extra


def run_dir_for(keep: Path | None) -> Path:
    if keep is None:
        return Path(tempfile.mkdtemp(prefix="tom-netlab-"))
    if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise ConfigError(f"--keep {keep}: give a new or empty folder")
    keep.mkdir(parents=True, exist_ok=True)
    return keep


def _stop(signum, frame) -> None:
    raise Stopped


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(normalize(sys.argv[1:] if argv is None else argv))
    net = run = run_dir = None
    code = 2
    old = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        check_numbers(args)
        events = make_schedule(args).ordered()
        check_available()
        run_dir = run_dir_for(args.keep)
        config = LabConfig(args.peers, args.duration, args.rate, events, run_dir, args.seed, not args.insecure,
                           peer_args(args), args.settle, args.deadline, durable=not args.no_data)
        started = time.monotonic()
        net = LabNetwork(args.peers)
        net.create()
        made = time.monotonic()
        console.print(f"netlab: {args.peers} namespaces on a private switch (10.77.0.1-{args.peers}:5000), "
                      f"made in {made - started:.2f} s; "
                      + ("plain TCP" if args.insecure else "mutual TLS")
                      + ("; crash-stop peers" if args.no_data else "; durable peers (data-<i>/)")
                      + f"; files in {run_dir}")
        run = LabRun(config, net)
        run.start()
        formed = time.monotonic()
        console.print(f"group of {args.peers} formed in {formed - made:.1f} s")
        how = run.drive()
        ran = time.monotonic()
        run.stop()
        drops = net.drops()
        net.destroy()
        console.print(f"workload and faults: {ran - formed:.1f} s ({how}); peers stopped and namespaces "
                      f"removed in {time.monotonic() - ran:.1f} s; load average {os.getloadavg()[0]:.2f}")
        codes = run.processes.returncodes()
        console.print("peer exit statuses: " + "  ".join(f"{i}:{c}" for i, c in codes.items()))
        if drops:
            console.print(f"packets dropped by the loss rules: {sum(drops.values()):,}")
        run.report()
        run.write_timeline(how)
        code = 0
        if how != "complete":
            console.print(f"[red]not every survivor delivered every survivor's messages ({how})[/]")
            code = 1
        if run.broken_restarts:
            console.print(f"[red]restarted peers {','.join(map(str, run.broken_restarts))}: the file does not "
                          f"hold the group's whole order (see above)[/]")
            code = 1
        if run.exited:  # not killed by the lab: what they were given after they stopped is lost
            console.print(f"[red]peers {','.join(map(str, sorted(run.exited)))} stopped during the run (exit "
                          f"statuses {','.join(str(c) for _, c in sorted(run.exited.items()))})[/]")
            code = 1
        if not args.no_verify:
            from ..launch import run_verifier

            files = [run.output(i) for i in run.pids if run.output(i).exists()]
            code = max(code, run_verifier(run_dir, files))
        return code
    except TomError as e:
        print(f"netlab: error: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, Stopped):
        print("netlab: stopped; peers stopped and namespaces removed", file=sys.stderr)
        return 130
    finally:
        if run is not None and run.processes.running():
            run.stop()
        if net is not None:
            net.destroy()
        for s, handler in old.items():
            signal.signal(s, handler)
        if run_dir is not None and args.keep is None:
            shutil.rmtree(run_dir, ignore_errors=True)
        elif run_dir is not None:
            print(f"netlab: the run's files are in {run_dir}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
