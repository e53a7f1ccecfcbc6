"""Scenario transcripts: readable protocol stories on the pure core, one file per scenario in
``tests/testdata/*.txt`` (etcd-io/raft's ``interaction_test.go`` style).

A file is blocks separated by blank lines; ``#`` lines are comments. A block is one command, then a
line ``----``, then exactly what the command must produce. Peers are named by capital letters
(``A`` = 127.0.0.1:5000, ``B`` = 127.0.0.1:5001, ...), in commands, frames and output alike.

Commands:
    static A B C             every named peer starts as a member of the static group A B C
    group A B C              every named peer starts in view 1 of a dynamic group A B C (founded by A),
                             connected to the others; failure detection on (heartbeat 1 s, timeout 5 s)
    group A B C order=causal the same, in another order (lamport, the default; sequencer; causal)
    C crash A                C's connection to A is gone (A crashed)
    B tick 6.5               time passes at B: it is now 6.5 s
    C <- B: ACK-1-A          peer C receives, from B, a frame in wire syntax
    A send hello             peer A multicasts ``hello``
    C status                 peer C's pending queue, in order
Each command prints what the core then hands out: ``X -> A B: FRAME`` per send, ``X delivers #i (c, P)
text`` per delivery (with ``seq=N`` or ``vc=A:1,B:2`` in the other orders), ``X notice NAME`` per
notice, or ``ok`` if nothing.

``TOM_REWRITE=1 pytest tests/test_transcripts.py`` rewrites the expected output from what the core
does now (then read the diff before you commit it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tom.core import Core, Timing
from tom.codec.frames import Heartbeat, Install, format_frame, parse_frame

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


class Transcript:
    def __init__(self) -> None:
        self.cores: dict[str, Core] = {}

    def run(self, command: str) -> list[str]:
        words = command.split()
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
        else:
            raise ValueError(f"unknown command {command!r}")
        return self.output(me, core)

    @staticmethod
    def output(me: str, core: Core) -> list[str]:
        ready = core.ready()
        lines = [f"{me} -> {' '.join(map(named, dests))}: {named(format_frame(frame))}" for dests, frame in ready.sends]
        for d in ready.deliveries:
            if hasattr(d, "text"):
                extra = "" if d.seq is None else f" seq={d.seq}"
                if d.vc is not None:
                    extra = " vc=" + ",".join(f"{named(p)}:{c}" for p, c in d.vc.items())
                lines.append(f"{me} delivers #{d.index} ({d.clock}, {named(d.pid)}) {d.text}{extra}")
            else:
                lines.append(f"{me} delivers #{d.index} view {d.view} {' '.join(map(named, d.members))}")
        lines += [f"{me} notice {n.tag}" for n in ready.notices]
        lines += [f"{me} ALARM {named(repr(a))}" for a in ready.alarms]
        return lines or ["ok"]


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


@pytest.mark.parametrize("path", sorted(DATA.glob("*.txt")), ids=lambda p: p.stem)
def test_transcript(path):
    blocks = parse(path.read_text())
    t = Transcript()
    got = [(c, cmd, t.run(cmd)) for c, cmd, _ in blocks]
    if os.environ.get("TOM_REWRITE"):
        path.write_text(render(got))
        return
    for (_, cmd, want), (_, _, have) in zip(blocks, got):
        assert have == want, f"{path.name}: after {cmd!r}\nwant:\n" + "\n".join(want) + "\nhave:\n" + "\n".join(have)


def test_transcripts_exist_and_can_fail():
    assert len(list(DATA.glob("*.txt"))) >= 3
    t = Transcript()
    t.run("static A B")
    assert t.run("A send x") != ["ok"]  # a real output, which a wrong expectation would not match
