"""Scenario transcripts: readable protocol stories on the pure core, one file per scenario in
``tests/testdata/*.txt`` (etcd-io/raft's ``interaction_test.go`` style).

A file is blocks separated by blank lines; ``#`` lines are comments. A block is one command, then a
line ``----``, then exactly what the command must produce. Peers are named by capital letters
(``A`` = 127.0.0.1:5000, ``B`` = 127.0.0.1:5001, ...), in commands, frames and output alike.

Cores by hand (every frame is handed over by a command):
    static A B C             every named peer starts as a member of the static group A B C
    group A B C              every named peer starts in view 1 of a dynamic group A B C (founded by A),
                             connected to the others; failure detection on (heartbeat 1 s, timeout 5 s)
    group A B C order=causal the same, in another order (lamport, the default; sequencer; causal)
    C crash A                C's connection to A is gone (A crashed)
    B tick 6.5               time passes at B: it is now 6.5 s
    C <- B: ACK-1-A          peer C receives, from B, a frame in wire syntax
    A send hello             peer A multicasts ``hello``
    C status                 peer C's pending queue, in order
Each prints what the core then hands out: ``X -> A B: FRAME`` per send, ``X delivers #i (c, P) text``
per delivery (with ``seq=N`` or ``vc=A:1,B:2`` in the other orders), ``X delivers #i view N A B``
per view (and who ``joined``, ``left``, was ``removed``), ``X notice NAME`` per notice, or ``ok``.

Cores on a network (`simnet.Network.fixed`: frames flow by themselves, FIFO, each after its link's
latency; nothing is random; time passes in ticks of 0.25 s, and every live core is ticked):
    network A B C D          the peers of the network (none runs yet); options: order=, quorum=none,
                             expected (they know each other's pids, as from a neighbors file),
                             last-man-standing (a group may shrink below a majority of them),
                             latency=0.01 (seconds per frame)
    start A B                processes start, and dial every live peer (a restart if one runs)
    run 12.5                 the clock runs to 12.5 s; ``run 12.5 trace`` also shows every frame
                             taken but heartbeats (``trace=all``: those too)
    A send hello             A multicasts ``hello``
    leave A / crash A        A asks to leave / A's process dies (its frames in flight are lost)
    cut A B                  the connection A-B is down (frames wait; both are told) until ``heal``
    isolate A                every connection of A is down until ``heal``
    partition A B | C D      every connection between the two sides is down until ``heal``
    heal                     every connection that is down comes back; what waited goes
    break A B                the connection A-B drops and comes back 1 s later (what was in flight
                             waits for it)
    hold A B / release A B   frames from A to B wait (the connection stays up) / go, in order
    latency A B 2            frames from A to B take 2 s from now on
    views                    each peer's view (number, group, members) and mode
    check                    the guarantees of dynamic groups (`guarantees.check`): ``ok``, or the first
                             one broken
Output: ``T X delivers ...`` per delivery and ``T X notice NAME`` per notice, ``T`` the time, and with
``trace`` ``T X <- Y: FRAME`` per frame taken.

``TOM_REWRITE=1 pytest tests/test_transcripts.py`` rewrites the expected output from what the core
does now (then read the diff before you commit it).

Known holes (`HOLES`, issue 25): stories the core does not get right yet, each a strict expected
failure whose ``check`` blocks say what must hold (``ok``). Every other block must do what the file
says (a drift is a plain failure: record it again); only a ``check`` verdict is expected to differ, so
a fix makes the test pass, which strict xfail reports: take the story out of `HOLES` then. A rewrite
keeps a hole's ``check`` blocks as written. A frame a core refuses during a ``run`` (`FrameError`,
a bug in the sender) stops the run and is shown as ``refused: ...``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from holes import HoleStillOpen, transcript_params
from guarantees import check
from simnet import Network, tag
from tom.core import Core, Timing, ViewDelivery
from tom.codec.frames import Heartbeat, Install, format_frame, parse_frame
from tom.errors import FrameError

DATA = Path(__file__).parent / "testdata"
NAMES = "ABCDEFG"


def pid(name: str) -> str:
    return f"127.0.0.1:{5000 + NAMES.index(name)}"


def inc(name: str) -> int:
    return NAMES.index(name) + 1  # an incarnation per peer


def named(text: str) -> str:
    """Pids in ``text`` replaced by peer names."""
    return re.sub(r"127\.0\.0\.1:50(\d\d)", lambda m: NAMES[int(m.group(1))], text)


def pids(text: str) -> str:
    """Peer names in a frame replaced by pids (a name is a lone capital letter after ``-`` or ``"``)."""
    return re.sub(r'(?<=[-"])([A-G])(?=[-"/]|$)', lambda m: pid(m.group(1)), text)


def describe(me: str, d) -> str:
    """A delivery, as a transcript shows it."""
    if isinstance(d, ViewDelivery):
        line = f"{me} delivers #{d.index} view {d.view} {' '.join(map(named, d.members))}"
        for what in ("joined", "left", "removed"):
            if getattr(d, what):
                line += f" {what} {' '.join(map(named, getattr(d, what)))}"
        return line
    extra = "" if d.seq is None else f" seq={d.seq}"
    if d.vc is not None:
        extra = " vc=" + ",".join(f"{named(p)}:{c}" for p, c in d.vc.items())
    return f"{me} delivers #{d.index} ({d.clock}, {named(d.pid)}) {d.text}{extra}"


def ready_lines(me: str, ready) -> list[str]:
    """What a core handed out in a step, but its sends."""
    return ([describe(me, d) for d in ready.deliveries] + [f"{me} notice {tag(n)}" for n in ready.notices]
            + [f"{me} ALARM {named(repr(a))}" for a in ready.alarms])


class Transcript:
    def __init__(self) -> None:
        self.cores: dict[str, Core] = {}  # cores by hand
        self.net: Network | None = None  # or cores on a network
        self.lines: list[str] = []  # what the network's cores did during a command
        self.trace = ""  # frames shown during a run: "" none, "trace" but heartbeats, "trace=all"

    def run(self, command: str) -> list[str]:
        words = command.split()
        if words[0] == "network" or self.net is not None and words[0] not in self.cores:
            return self.on_network(command, words)
        order = "lamport"
        if words[0] in ("static", "group") and words[-1].startswith("order="):
            order = words.pop()[len("order="):]
        if words[0] == "static":
            for name in words[1:]:
                self.cores[name] = Core(pid(name), [pid(n) for n in words[1:]], order=order)
            return ["ok"]
        if words[0] == "group":
            members = tuple((pid(n), inc(n)) for n in words[1:])
            founding = Install(1, 0, members[0][0], 0, members, tuple(p for p, _ in members), (), (),
                               group=f"{members[0][0]}/1")
            for name in words[1:]:
                core = self.cores[name] = Core.joining(pid(name), inc(name), Timing(), order=order)
                for other in words[1:]:
                    if other != name:
                        core.connected(pid(other), inc(other))
                core.receive(pid(words[1]), founding) if name != words[1] else core._install(founding)
                for other in words[1:]:  # each member announces the view it installed
                    if other != name:
                        core.receive(pid(other), Heartbeat(1))
                core.ready()
            return ["ok"]
        me, verb = words[0], words[1]
        core = self.cores[me]
        if verb == "<-":
            src, _, frame = command.partition(": ")
            core.receive(pid(src.split()[-1]), parse_frame(pids(frame.strip())))
        elif verb == "send":
            core.broadcast(command.split(" send ", 1)[1])
        elif verb == "crash":
            core.disconnected(pid(words[2]))
        elif verb == "tick":
            core.tick(float(words[2]))
        elif verb == "status":
            return self.status(me, core)
        else:
            raise ValueError(f"unknown command {command!r}")
        ready = core.ready()
        lines = [f"{me} -> {' '.join(map(named, dests))}: {named(format_frame(frame))}" for dests, frame in ready.sends]
        return lines + ready_lines(me, ready) or ["ok"]

    @staticmethod
    def status(me: str, core: Core) -> list[str]:
        st = core.status()
        lines = []
        for p in st.pending:
            if st.order != "lamport":
                body = "(no text yet)" if p.text is None else repr(p.text)
                lines.append(f"{me} pending ({p.clock}, {named(p.pid)}) {body}; waits for {named(p.waits)}")
                continue
            body = "reserved by early ACKs" if p.text is None else repr(p.text)
            lines.append(f"{me} pending ({p.clock}, {named(p.pid)}) {body}; ACKs {' '.join(map(named, p.acks))}; "
                         f"missing {' '.join(map(named, p.missing)) or '-'}")
        return lines or [f"{me} pending none"]

    # -- cores on a network ----------------------------------------------------------------------

    def on_network(self, command: str, words: list[str]) -> list[str]:
        verb = words[0]
        if verb == "network":
            self.start_network(words[1:])
            return ["ok"]
        net = self.net
        assert net is not None, f"{command!r}: no network yet"
        self.lines = []
        if verb == "run":
            self.trace = words[2] if len(words) > 2 else ""
            try:
                net.run(until=float(words[1]), exact=True)
            except FrameError as e:  # (a hole: the run cannot go on)
                self.lines.append(f"{net.now:.2f} refused: {named(str(e))}")
            self.trace = ""
        elif verb == "start":
            for name in words[1:]:
                net.start(pid(name))
        elif verb in ("crash", "leave"):
            getattr(net, verb)(pid(words[1]))
        elif verb == "cut":
            net.cut(pid(words[1]), pid(words[2]))
        elif verb == "isolate":
            net.isolate(*map(pid, words[1:]))
        elif verb == "partition":
            side, rest = command[len("partition"):].split("|")
            assert sorted(side.split() + rest.split()) == sorted(self.names), f"{command!r}: not every peer"
            net.isolate(*map(pid, side.split()))
        elif verb == "heal":
            net.heal()
        elif verb == "break":
            net.break_link(pid(words[1]), pid(words[2]))
        elif verb in ("hold", "release"):
            getattr(net, verb)(pid(words[1]), pid(words[2]))
        elif verb == "latency":
            net.latency[(pid(words[1]), pid(words[2]))] = float(words[3])
        elif verb == "views":
            return [self.view_of(name) for name in self.names]
        elif verb == "check":
            try:
                check(net)
            except AssertionError as e:
                return [named(str(e).split(f"; {net.order} seed")[0])]
            return ["ok"]
        elif len(words) > 2 and words[1] == "send":
            net.send(pid(verb), command.split(" send ", 1)[1])
        elif len(words) == 2 and words[1] == "status":
            return self.status(verb, net.nodes[pid(verb)].core)
        else:
            raise ValueError(f"unknown command {command!r}")
        return self.lines or ["ok"]

    def start_network(self, options: list[str]) -> None:
        self.names = [w for w in options if len(w) == 1]
        assert "".join(self.names) == NAMES[:len(self.names)], "the peers are A, B, C, ... in order"
        settings = dict(w.split("=") for w in options if "=" in w)
        net = self.net = Network.fixed(len(self.names), latency=float(settings.get("latency", 0.01)),
                                       order=settings.get("order", "lamport"),
                                       quorum=settings.get("quorum", "majority"), expected="expected" in options,
                                       last_man_standing="last-man-standing" in options)
        net.on_step = lambda node, ready: self.lines.extend(
            f"{net.now:.2f} {line}" for line in ready_lines(named(node.pid), ready))
        net.on_receive = self.received

    def received(self, src: str, dst: str, frame) -> None:
        if self.trace == "trace=all" or self.trace == "trace" and type(frame) is not Heartbeat:
            self.lines.append(f"{self.net.now:.2f} {named(dst)} <- {named(src)}: {named(format_frame(frame))}")

    def view_of(self, name: str) -> str:
        node = self.net.nodes.get(pid(name))
        if node is None:
            return f"{name} not started"
        if not node.alive:
            return f"{name} {node.gone}"
        st = node.core.status()
        if st.view is None:
            return f"{name} {st.mode}, in no view"
        members = " ".join(named(p) for p in sorted(st.view.members, key=lambda p: NAMES.index(named(p))))
        return f"{name} {st.mode} in view {st.view.id} of group {named(st.view.group)}: {members}"


def parse(text: str) -> list[tuple[list[str], str, list[str]]]:
    """Blocks of ``(comments before, command, expected lines)``."""
    blocks, comments = [], []
    for chunk in re.split(r"\n\s*\n", text.strip()):
        lines = chunk.splitlines()
        lead = [ln for ln in lines if ln.startswith("#")]
        body = [ln for ln in lines if not ln.startswith("#")]
        if not body:
            comments += lead
            continue
        assert body[1] == "----", f"expected ---- after {body[0]!r}"
        blocks.append((comments + lead, body[0], body[2:]))
        comments = []
    return blocks


def render(blocks) -> str:
    return "\n\n".join("\n".join([*c, cmd, "----", *out]) for c, cmd, out in blocks) + "\n"


# the holes of issue 25 told as stories (see the module docstring): file stem -> why it fails
HOLES = {
}


@pytest.mark.parametrize("path", transcript_params(sorted(DATA.glob("*.txt")), HOLES))
def test_transcript(path):
    blocks = parse(path.read_text())
    t = Transcript()
    got = [(c, cmd, t.run(cmd)) for c, cmd, _ in blocks]
    hole = path.stem in HOLES
    if os.environ.get("TOM_REWRITE"):
        # (a hole's check blocks say what must hold: kept as written)
        path.write_text(render([(c, cmd, want if hole and cmd == "check" else have)
                                for (c, cmd, have), (_, _, want) in zip(got, blocks)]))
        if not hole:
            return
        blocks = parse(path.read_text())
    for (_, cmd, want), (_, _, have) in zip(blocks, got):
        if hole and cmd == "check" and have != want:
            raise HoleStillOpen(f"{path.name}: {have[0]}")
        assert have == want, f"{path.name}: after {cmd!r}\nwant:\n" + "\n".join(want) + "\nhave:\n" + "\n".join(have)


def test_transcripts_exist_and_can_fail():
    assert len(list(DATA.glob("*.txt"))) >= 3
    t = Transcript()
    t.run("static A B")
    assert t.run("A send x") != ["ok"]  # a real output, which a wrong expectation would not match


def numbers_by_view_number(peers: dict, where: str) -> None:
    """The sequencer check as it was before seed 324: a view known by its number alone."""
    owner: dict[tuple, tuple] = {}
    for deliveries in peers.values():
        view = 1
        for d in deliveries:
            if isinstance(d, ViewDelivery):
                view = d.view
            else:
                assert owner.setdefault((view, d.seq), (d.clock, d.pid)) == (d.clock, d.pid), \
                    f"number {d.seq} given twice; {where}"


# a story whose fix is a patch away: with the fix taken out again, its `check` says what broke
WITHOUT_FIX = {
    "founding_promised_elsewhere_founds_no_rival": (
        "tom.core.founding.Founding.possibly_in_another", lambda self, members, me: False, "two groups at once: "),
    "sequencer_crashed_sequencer_numbers_reused": (
        "guarantees.settled", lambda deliveries: deliveries, "number 1 given twice"),
    "sequencer_two_groups_each_with_a_view_1": (
        "guarantees.check_same_numbers", numbers_by_view_number, "number 1 given twice"),
}


@pytest.mark.pure
@pytest.mark.parametrize("name", sorted(WITHOUT_FIX))
def test_a_bug_story_breaks_without_its_fix(name, monkeypatch):
    target, patch, broken = WITHOUT_FIX[name]
    monkeypatch.setattr(target, patch)
    t = Transcript()
    for _, command, _ in parse((DATA / f"{name}.txt").read_text()):
        out = t.run(command)
    assert command == "check" and out[0].startswith(broken), out
