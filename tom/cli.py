"""The ``tom`` command line: ``tom peer`` runs a peer, ``tom keys`` makes a closed group's credentials,
``tom verify`` checks output files with Spark."""

from __future__ import annotations

import argparse
import os
import signal
import logging
import sys
from pathlib import Path

from .errors import ConfigError, TomError


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is now (prompt_toolkit swaps it to print above the prompt)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def setup_logging(tag: str, verbose: bool) -> None:
    handler = _CurrentStderr()
    handler.setFormatter(logging.Formatter(f"tom[{tag}] %(levelname)s %(message)s"))
    root = logging.getLogger("tom")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


def _positive_port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"port must be 1..65535, got {text!r}")
    return int(text)


def _seconds(low: float, high: float):
    """An argparse type: seconds between ``low`` and ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected seconds between {low:g} and {high:g}, got {text!r}")
        return value

    return parse


def _count(low: int, high: int):
    """An argparse type: a whole number between ``low`` and ``high``."""

    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number between {low} and {high}, got {text!r}")
        return int(text)

    return parse


def _http_address(text: str) -> tuple[str, int]:
    """``--http [HOST:]PORT`` -> (host, port); loopback when no host is given; ``[v6]:PORT`` too."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected [HOST:]PORT with a port 0..65535, got {text!r}")
    return host, int(port)


def build_parser() -> argparse.ArgumentParser:
    from .core import ORDERS, QUORUMS

    parser = argparse.ArgumentParser(prog="tom", description="Totally-ordered multicast: Lamport clocks, a sequencer, or "
                                                            "causal order.")
    sub = parser.add_subparsers(dest="command", required=True)

    peer = sub.add_parser("peer", help="run one peer",
                          description="Run one TOM peer: listen on PORT, connect to every neighbor, join the "
                                      "group (or form it), multicast what you type (or stdin lines with "
                                      "--no-ui, or FILE's lines with --input FILE) in one total order, append "
                                      "every delivered message and view change to OUTPUT as JSON Lines. quit, "
                                      "end of input or SIGTERM leave the group.")
    peer.epilog = (
        "A message's frame may take at most 65,536 bytes (MAX_FRAME_BYTES): about 65,400 bytes of UTF-8 "
        "text, fewer with backslashes or line breaks, which are escaped; a longer one is refused with one "
        "line and not sent. Exit status: 0 left the group, everything entered here delivered; 2 setup "
        "error (neighbors file, address, port, output, keys); 3 removed by the group (taken for failed), "
        "with --quorum none only (with a quorum a removed peer joins again); "
        "4 stopped with messages entered here not delivered (never admitted, or stopped before its "
        "leave); 5 the output file could not be written.")
    peer.add_argument("neighbors", type=Path, help="neighbors file: one host:port per line")
    peer.add_argument("output", type=Path, help="output file (JSON Lines, appended)")
    peer.add_argument("port", type=_positive_port, help="TCP port to listen on")
    peer.add_argument("--host", help="address to listen on (asked on a terminal if not given)")
    peer.add_argument("--name", help="address others reach this peer by, when --host is 0.0.0.0")
    peer.add_argument("--delay", type=_seconds(0, 60), default=0.0, metavar="SECONDS",
                      help="hold every outgoing frame this long (keeps each link's order)")
    peer.add_argument("--jitter", type=_seconds(0, 60), default=0.0, metavar="SECONDS",
                      help="add a random extra delay up to this much, each link its own, drawn again every 2 s "
                           "(never reorders a link): ACKs then overtake messages (premature ACKs)")
    peer.add_argument("--quorum", choices=QUORUMS, default="majority",
                      help="majority (default): a first group is founded only by a majority of the neighbors "
                           "file's peers (a peer alone waits); when a partition or failures leave fewer than a "
                           "majority of the view (or half without its smallest member), this side waits, holding "
                           "its messages, and rejoins the others when the network heals; so it does when the "
                           "members it reaches are fewer than a majority of the neighbors file (see "
                           "--last-man-standing); none: a peer alone founds a group, and each side goes on as a "
                           "group of its own (available, but two histories)")
    peer.add_argument("--last-man-standing", action="store_true",
                      help="with --quorum majority: let the group go on as it shrinks below a majority of the "
                           "neighbors file, each step a majority of the view before it (Corosync's name); "
                           "available, but a group founded by the file's other peers may then go on beside it")
    peer.add_argument("--order", choices=ORDERS, default="lamport",
                      help="how the group orders its messages, the same at every member (a neighbor of another "
                           "order is refused): lamport (default) delivers in one total order once every member "
                           "acknowledged; sequencer in one total order numbered by the view's coordinator (about 2n "
                           "frames a message instead of n*n); causal in an order that keeps cause before effect "
                           "(vector clocks; concurrent messages may be delivered in different orders)")
    peer.add_argument("--no-ui", action="store_true", help="headless: each stdin line is one message")
    peer.add_argument("--input", type=Path, metavar="FILE",
                      help="headless, reading FILE instead of stdin: each line is one message, and FILE is "
                           "followed as it grows (its end does not leave the group; SIGTERM does). With --data "
                           "the peer goes on after the last line it accepted; without it, it reads FILE from "
                           "its beginning each time it starts. A FILE replaced by another is read from its "
                           "beginning; one truncated in place is waited for")
    peer.add_argument("--static", action="store_true",
                      help="the handout's static group: every neighbor is a member from the start, no joins, "
                           "no failure detection (a neighbor that is not running blocks delivery)")
    peer.add_argument("--wire", choices=("tom", "handout"), default="tom",
                      help="tom (default): TOM's own protocol; handout: the SE424 handout's protocol as its "
                           "tool speaks it (MESSAGE-<clock>-<from>-<text>, ACK-<clock>-<from>, one line per "
                           "connection, ACKs counted), to sit in one group with a class's handout tools: "
                           "a static group (see --dynamic), plain TCP, the lamport order; no failure "
                           "detection, no joins, no HTTP API")
    peer.add_argument("--dynamic", action="store_true",
                      help="with --wire handout: the handout's extras, JOIN, LEAVE and HEARTBEAT (every "
                           "--heartbeat; --timeout of silence counts as a LEAVE)")
    peer.add_argument("--heartbeat", type=_seconds(0.05, 3600), default=1.0, metavar="SECONDS",
                      help="heartbeat period (default 1)")
    peer.add_argument("--timeout", type=_seconds(0.05, 3600), default=5.0, metavar="SECONDS",
                      help="silence after which a member is suspected (default 5); removal follows "
                           "after a further verification period")
    peer.add_argument("--keys", type=Path, metavar="DIR",
                      help="closed group: every link is mutual TLS 1.3 with the credentials in DIR (made by "
                           "tom keys); only members are accepted, each only as the pid its certificate names")
    peer.add_argument("--http", type=_http_address, metavar="[HOST:]PORT",
                      help="serve the dashboard (GET /), a JSON API (/api/status, /api/messages, /api/events) "
                           "and Prometheus metrics (/metrics) on this port, on loopback unless HOST is given")
    peer.add_argument("--api-token-file", type=Path, metavar="FILE",
                      help="with --http: require 'Authorization: Bearer <token>' with the token kept in FILE "
                           "(created, 0600, if missing); with --keys DIR the default is DIR/api-token")
    peer.add_argument("--ring", type=_count(0, 1_000_000), default=4000, metavar="EVENTS",
                      help="with --http: events of the recent past kept for a dashboard opened late "
                           "(frames, deliveries, views; default 4000, 0: none)")
    peer.add_argument("--trace", type=Path, metavar="FILE",
                      help="record every frame written and read, with its link, incarnations, number and time "
                           "(appended; for tom replay)")
    peer.add_argument("--trace-limit", type=_count(1, 1_000_000), default=512, metavar="MiB",
                      help="with --trace: stop recording past this size (default 512 MiB)")
    peer.add_argument("--step", action="store_true",
                      help="step mode, for a lab: every MESSAGE, ACK, MARKS, SEQ and RELAY received waits at a "
                           "gate, per link and in order, until released from the dashboard's Step panel or with "
                           "POST /api/gate/release (needs --http); failure detection is frozen for what is held")
    peer.add_argument("--data", type=Path, metavar="DIR",
                      help="a durable peer: keep what it delivered and accepted in DIR (created; one peer's "
                           "own). Started again with the same DIR after a crash or a leave, it catches up what "
                           "the group delivered meanwhile (written before anything new, marked caught_up) and "
                           "sends again what it had accepted and the group did not deliver")
    peer.add_argument("--fsync", choices=("always", "batch", "never"), default="batch",
                      help="with --data: when its writes reach the disk: always (each, before anything is "
                           "acknowledged, sent or shown on it), batch (default: every 0.1 s at most), never (the "
                           "kernel decides). Each survives a crash of the process (SIGKILL); only always "
                           "survives a power cut")
    peer.add_argument("--retain", type=_count(1, 10**9), default=1_000_000, metavar="EVENTS",
                      help="with --data: delivered events the data folder keeps at most for members that catch "
                           "up (default 1,000,000); a peer away for longer gets a gap record. What every peer of "
                           "the neighbors file holds already goes sooner")
    peer.add_argument("--retain-age", type=_seconds(1, 10**9), default=7 * 24 * 3600.0, metavar="SECONDS",
                      help="with --data: and for how long (default 604800: a week)")
    peer.add_argument("-v", "--verbose", action="store_true", help="log connections and more")

    keys = sub.add_parser("keys", help="create a closed group's credentials",
                          description="Create the credentials of a closed group in DIR: a group CA (ca.pem, "
                                      "ca.key) and, for every peer of the neighbors file, a certificate naming "
                                      "its host:port (HOST_PORT.pem) and its private key (HOST_PORT.key, mode "
                                      "600). Run again to add the peers that have none; existing ones are kept. "
                                      "Give each peer ca.pem and its own two files; ca.key stays with you.")
    keys.add_argument("neighbors", type=Path, help="neighbors file: one host:port per line")
    keys.add_argument("dir", type=Path, help="folder for the credentials (created, mode 700)")
    keys.add_argument("--force", action="store_true", help="start over: a new CA and new certificates for all")
    keys.add_argument("--days", type=int, default=825, help="validity of the peer certificates (default 825)")

    replay = sub.add_parser("replay", help="draw a finished run again (its traces and outputs), or write it for ShiViz",
                            description="Serve the dashboard over a finished run: the frame traces (tom peer --trace) "
                                        "and output files of RUN_DIR (scripts/launch and scripts/demo keep them in "
                                        "runs/<timestamp>/), with a time slider; no peer runs. With --shiviz, write "
                                        "the run in ShiViz's input format instead.")
    replay.add_argument("run", type=Path, metavar="RUN_DIR", help="the run's folder")
    replay.add_argument("--shiviz", type=Path, metavar="OUT.log",
                        help="write the run as a ShiViz log (vector clocks from the frames' send/receive pairs) and stop")
    replay.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    replay.add_argument("--port", type=_count(0, 65535), default=0, help="port to serve on (default: any free one)")

    sub.add_parser("check", help="explore every interleaving of a small group on the real core", add_help=False)
    sub.add_parser("grade", help="grade a class's handout tools, one rule at a time", add_help=False)
    verify = sub.add_parser("verify", help="verify output files with Spark", add_help=False)
    verify.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def ask_host(neighbors_path: Path, port: int) -> tuple[str, str | None]:
    """Ask on the terminal which address to listen on (and the 'from' name for 0.0.0.0)."""
    import socket

    choices = ["0.0.0.0", "127.0.0.1"]
    try:
        for ai in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            if ai[4][0] not in choices:
                choices.append(ai[4][0])
    except OSError:
        pass
    print("Choose an IP address to listen on:")
    for i, c in enumerate(choices):
        print(f"{i}: {c}")
    while True:
        answer = input(": ").strip()
        if answer.isdigit() and int(answer) < len(choices):
            host = choices[int(answer)]
            break
        print(f"type a number from 0 to {len(choices) - 1}")
    name = None
    if host == "0.0.0.0":
        name = input("Address to write in the 'from' field (as in the neighbors file): ").strip()
    return host, name


def api_token_file(args: argparse.Namespace) -> Path | None:
    """The file of the token the HTTP API requires: --api-token-file, else the keys folder's (a closed
    group, --keys DIR), else none (an open group's API is open, on loopback by default)."""
    if args.api_token_file is not None:
        if args.http is None:
            raise ConfigError("--api-token-file guards the HTTP API: give --http too")
        return args.api_token_file
    keys = getattr(args, "keys", None)  # tom peer --keys DIR (closed groups)
    if keys is not None and args.http is not None:
        from .web.apitoken import token_path

        return token_path(keys)
    return None


def run_peer(args: argparse.Namespace) -> int:
    import trio

    from .peer.process import Peer, PeerConfig, guess_host
    from .codec.neighbors import load_neighbors

    interactive = not args.no_ui and args.input is None and sys.stdin.isatty() and sys.stdout.isatty()
    setup_logging(str(args.port), args.verbose)
    from .build import describe

    logging.getLogger("tom").debug("build: %s", describe())
    host, name = args.host, args.name
    if host is None:
        if interactive:
            load_neighbors(args.neighbors)  # a bad file fails before we ask anything
            host, name = ask_host(args.neighbors, args.port)
        else:
            host = guess_host(load_neighbors(args.neighbors), args.port)
            if host is None:
                raise ConfigError("cannot tell which neighbors entry is this peer: give --host")
    if args.timeout <= args.heartbeat:
        raise ConfigError("--timeout must be longer than --heartbeat")
    if args.wire == "handout":
        return run_handout(args, host, name, interactive)
    if args.dynamic:
        raise ConfigError("--dynamic is for --wire handout (TOM's own wire is dynamic unless --static)")
    if args.data is not None:
        if args.static:
            raise ConfigError("--data is for a dynamic group: a --static group takes no member back, so a "
                              "restarted peer has nothing to catch up in")
    if args.step and args.http is None:
        raise ConfigError("--step holds every received frame until it is released through the HTTP API or "
                          "the dashboard: give --http too")
    peer = Peer(PeerConfig(args.neighbors, args.output, args.port, host, name, args.delay, interactive,
                           args.static, args.heartbeat, args.timeout, jitter=args.jitter, keys=args.keys,
                           http=args.http, api_token=api_token_file(args), order=args.order,
                           quorum=args.quorum, last_man_standing=args.last_man_standing, ring=args.ring,
                           trace=args.trace, trace_limit=args.trace_limit * 1024 * 1024,
                           step=args.step, data=args.data, fsync=args.fsync, input=args.input,
                           retain=args.retain, retain_age=args.retain_age))

    def late_signal(signum, frame) -> None:
        # a SIGINT/SIGTERM while the peer is not listening for one: before it started, stop at once;
        # after its receiver closed (it is shutting down anyway), ignore it, so the exit status stays
        if not peer.signals_taken:
            raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, late_signal)
    try:
        trio.run(peer.run)
    except BaseExceptionGroup as group:  # a TomError raised in one of the peer's tasks
        errors, rest = group.split(TomError)
        if errors is None or rest is not None:
            raise
        while isinstance(errors, BaseExceptionGroup):
            errors = errors.exceptions[0]
        raise errors from None
    finally:
        # done, however it ended: a signal now must not replace the exit status (at its exit Python
        # puts back the default action of a signal that has a Python handler: it would end the process)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
    return peer.exit_code


def run_handout(args: argparse.Namespace, host: str, name: str | None, interactive: bool) -> int:
    """``tom peer --wire handout``: refuse what that wire cannot do, one line each; then run."""
    from .peer.handout import HandoutConfig, run_handout_peer

    refused = [(args.keys is not None, "--keys (the handout's wire is plain TCP)"),
               (args.order != "lamport", f"--order {args.order} (the handout's wire runs the lamport order)"),
               (args.jitter > 0, "--jitter (it would reorder frames; --delay keeps the order)"),
               (args.http is not None, "--http (the dashboard and API are TOM's wire's)"),
               (args.trace is not None, "--trace (it records TOM's links)"),
               (args.api_token_file is not None, "--api-token-file"),
               (args.step, "--step (step mode is TOM's wire's)"),
               (args.data is not None, "--data (the handout's tools keep nothing to catch up from)"),
               (args.input is not None, "--input (its peer reads stdin or the terminal)"),
               (args.static and args.dynamic, "--static together with --dynamic")]
    for bad, what in refused:
        if bad:
            raise ConfigError(f"--wire handout takes no {what}")
    cfg = HandoutConfig(args.neighbors, args.output, args.port, host, name, args.delay, interactive,
                        args.dynamic, args.heartbeat, args.timeout)
    return run_handout_peer(cfg)


def run_keys(args: argparse.Namespace) -> int:
    from .net.keys import create_keys, file_stem
    from .codec.neighbors import load_neighbors

    if not 1 <= args.days <= 36500:
        raise ConfigError(f"--days must be 1..36500, got {args.days}")
    pids = load_neighbors(args.neighbors)
    created = create_keys(pids, args.dir, force=args.force, days=args.days)
    for pid in pids:
        what = "created" if pid in created else "kept"
        print(f"{pid}: {args.dir / file_stem(pid)}.pem, .key ({what})")
    print(f"group CA: {args.dir / 'ca.pem'}; give each peer ca.pem and its own .pem and .key, keep ca.key")
    return 0


def run_verify(argv: list[str]) -> int:
    """``tom verify``: the Spark verifier (`analysis.verify`), or one line when PySpark is missing."""
    from .extras import verifier_missing

    if why := verifier_missing():
        print(f"tom: error: {why}", file=sys.stderr)
        return 2
    from analysis.verify import main as verify_main

    return verify_main(argv)


def run_replay(args: argparse.Namespace) -> int:
    """``tom replay RUN_DIR [--shiviz OUT.log]``."""
    from .replay.run import FrameEvent, RunError, load_run

    try:
        run = load_run(args.run)
    except (RunError, OSError) as e:
        raise ConfigError(str(e) if isinstance(e, RunError) else f"{args.run}: {e.strerror or e}") from None
    for problem in run.problems[:5]:
        print(f"tom replay: {problem}", file=sys.stderr)
    if len(run.problems) > 5:
        print(f"tom replay: ... and {len(run.problems) - 5} more such lines", file=sys.stderr)
    frames = sum(1 for e in run.events if isinstance(e, FrameEvent))
    if not run.traces:
        print(f"tom replay: {args.run} holds no frame trace (tom peer --trace): deliveries only", file=sys.stderr)
    if args.shiviz is not None:
        from .codec.shiviz import shiviz_log
        from .replay.feed import shiviz_events

        try:
            args.shiviz.write_text(shiviz_log(shiviz_events(run)), encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot write {args.shiviz}: {e.strerror or e}") from None
        print(f"wrote {len(run.events)} events of {len(run.peers)} peers ({frames} frames) to {args.shiviz}: "
              f"open it in ShiViz (its first line is the parsing regular expression)")
        return 0
    import trio

    from .replay.server import make_replay_app
    from .web.api import open_http_socket, serve_http, url_host

    sock = open_http_socket(args.host, args.port)
    url = f"http://{url_host(args.host)}:{sock.getsockname()[1]}/?replay"
    app = make_replay_app(run, args.host)
    print(f"Replaying {args.run}: {len(run.peers)} peers, {run.order} order, {frames} frames, "
          f"{len(run.events) - frames} deliveries and views", flush=True)
    print(f"Dashboard on {url}  (Ctrl-C stops)", flush=True)
    try:
        trio.run(serve_http, app, sock)
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    whole_process = argv is None
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["verify"]:  # the verifier parses its own arguments (--help included)
        return run_verify(argv[1:])
    if argv[:1] == ["check"]:  # so does the model checker
        from . import COMPILED_OK

        if COMPILED_OK and whole_process:
            # it walks and pickles the core's Python objects: on the interpreted build (tom/build.py)
            os.execve(sys.executable, [sys.executable, "-m", "tom", *argv], {**os.environ, "TOM_PURE": "1"})
        from .check.cli import main as check_main

        return check_main(argv[1:])
    if argv[:1] == ["grade"]:  # so does the grader
        from .grade.cli import main as grade_main

        return grade_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "peer":
            return run_peer(args)
        if args.command == "keys":
            return run_keys(args)
        if args.command == "verify":
            return run_verify(args.args)
        if args.command == "replay":
            return run_replay(args)
    except TomError as e:
        print(f"tom: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
