"""One run of one test for one student: its folder, its ports, the tool and the stage, its verdict.

Order of events: the scripted peers listen; the neighbors file is written (the tool first, then B and
C); the tool starts in its pty and is answered until its menu shows (`START_LIMIT`) and until it
listens on its port (`LISTEN_LIMIT`): else *did-not-start*. Its from is read from its ``... from:
<from>`` line (or ``from`` in tom-grade.toml, or ``127.0.0.1:PORT``); the peers take the same form.
The scenario runs under the test's time limit (else *hung*); an exit the driver did not ask for is
*crashed*; a rule's wait that ran out is *fail*, or *hung* when the tool then does not end within
`QUIT_LIMIT` of menu 3 either; a set-up the grader could not make (no pty; a scripted peer's port taken
between its choice and its bind `SETUP_TRIES` times in a row) is *grader-error*. Then menu 3
(`QUIT_LIMIT`), the process group is killed whatever it does, and so is anything of this user's left
listening on the tool's port; the tool's output file is read as it left
it and the rule's judge gives the verdict.
"""

from __future__ import annotations

import errno
import json
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import trio

from . import GRADER_ERROR, GRADER_ERROR_DETAIL, ports
from .config import Submission, fill
from .driver import Tool, ToolError
from .judges import JUDGES, Evidence, Failed, Outcome
from .rules import SCENARIOS, Scene
from .stage import Stage
from .toolfile import DEFAULT_LINE, Delivered, parse_output

START_LIMIT = 20.0
LISTEN_LIMIT = 10.0
QUIT_LIMIT = 5.0
PEERS = 2
SETUP_TRIES = 3
"""Choices of the scripted peers' ports before a port taken at its bind fails the run."""


@dataclass(frozen=True)
class TrialSpec:
    submission: Submission
    test: str
    repeat: int
    folder: Path  # OUT/runs/<student>/<test>/<repeat>
    seed: int
    time_limit: float
    start_limit: float = START_LIMIT


def learn_origin(screen: str, port: int, template: str | None) -> tuple[str, str]:
    """The tool's from and where it was found."""
    if template:
        return template.replace("{port}", str(port)), "tom-grade.toml"
    found = re.findall(r"(?i)\bfrom\b[^\n]*?(\S+:" + str(port) + r")(?!\d)", screen)
    if found:
        return found[-1].strip("'\"[]()<>,;"), "its terminal"
    return f"127.0.0.1:{port}", "default (the tool printed no 'from ...:PORT' line)"


def _result(spec: TrialSpec, outcome: Outcome, seconds: float, tail: list[str], stage: Stage | None,
            tool_port: int) -> dict:
    result = {
        "student": spec.submission.name, "test": spec.test, "repeat": spec.repeat,
        "verdict": outcome.verdict, "expected": outcome.expected, "got": outcome.got, "detail": outcome.detail,
        "seconds": round(seconds, 3), "tail": tail,
        "tool": {"from": stage.tool.origin if stage else "", "port": tool_port},
        "peers": [{"from": p.member.origin, "port": p.member.port} for p in stage.peers] if stage else [],
    }
    if spec.submission.line_regex != DEFAULT_LINE:  # the student's [output] line_regex: the report's file check reads it
        result["line_regex"] = spec.submission.line_regex
    return result


async def run_trial(spec: TrialSpec) -> dict:
    """Run the test, write its folder (result.json last) and return the result."""
    if spec.folder.exists():
        shutil.rmtree(spec.folder)
    spec.folder.mkdir(parents=True)
    sub = spec.submission
    rng = random.Random(f"{spec.seed}:{sub.name}:{spec.test}:{spec.repeat}")
    neighbors = spec.folder / "neighbors.txt"
    output = spec.folder / "tool.out"
    tool_port = 0
    started = trio.current_time()
    notes: list[str] = []
    outcome: Outcome | None = None
    quit_seconds: float | None = None
    stage: Stage | None = None
    tool: Tool | None = None
    scene: Scene | None = None
    async with trio.open_nursery() as nursery:
        try:
            stage = await _open_stage(spec.folder, nursery)
            tool_port = stage.tool.port
            command = fill(sub.run, dir=sub.folder, neighbors=neighbors.resolve(), output=output.resolve(),
                           port=tool_port)
            neighbors.write_text(stage.neighbors_text())
            tool = Tool(command, sub.folder, spec.folder / "terminal.log", tool_port, sub.rules, sub.keys)
            await tool.spawn(nursery)
            deadline = trio.current_time() + spec.time_limit
            with trio.CancelScope(deadline=deadline) as limit:
                outcome, scene = await _play(spec, stage, tool, rng, output, notes, deadline)
            if limit.cancelled_caught:
                outcome = Outcome("hung", f"the test done within its time limit ({spec.time_limit:.0f} s)",
                                  "still going when the limit came", "; ".join(notes))
            if outcome is None and not tool.exited:
                with trio.move_on_after(QUIT_LIMIT + 2):
                    try:
                        quit_seconds = await tool.quit(QUIT_LIMIT)
                    except ToolError as e:
                        notes.append(f"quitting: {e.got}")
                if quit_seconds is None:
                    notes.append(f"it did not end within {QUIT_LIMIT:.0f} s of menu 3: stopped")
            elif outcome is not None and outcome.verdict == "fail" and not tool.exited:
                # a wait of the rule ran out: a tool that does not end on menu 3 either is stuck
                with trio.move_on_after(QUIT_LIMIT + 2):
                    try:
                        quit_seconds = await tool.quit(QUIT_LIMIT)
                    except ToolError:
                        pass
                if quit_seconds is None and not tool.exited:
                    outcome = Outcome("hung", outcome.expected, f"{outcome.got}; then it did not end within "
                                      f"{QUIT_LIMIT:.0f} s of menu 3", outcome.detail)
        except OSError as e:  # the grader's set-up: a scripted peer's port taken meanwhile, the pty, ...
            outcome = Outcome(GRADER_ERROR, "the grader to set the test up", f"{type(e).__name__}: {e}",
                              GRADER_ERROR_DETAIL)
        finally:
            with trio.CancelScope(shield=True):
                if tool is not None:
                    await tool.stop()
                killed = ports.kill_listeners(tool_port) if tool_port else []
                if killed:
                    notes.append(f"killed pids {killed} left listening on port {tool_port}")
                if stage is not None:
                    stage.close()
            nursery.cancel_scope.cancel()
    if stage is not None:
        notes.extend(stage.problems)
        if stage.origin_seen and stage.tool.origin and stage.origin_seen != stage.tool.origin:
            notes.append(f"its MESSAGEs carry the from {stage.origin_seen}, not {stage.tool.origin} as read "
                         f"from its terminal: set from in its tom-grade.toml")
    if outcome is None:
        assert scene is not None
        tool_out: list[Delivered] | None = None
        bad: list[tuple[int, str]] = []
        if output.exists():
            tool_out, bad = parse_output(output.read_text("utf-8", errors="replace"), sub.line_regex)
        evidence = Evidence(spec.test, tool_out, scene.marks, bad, quit_seconds, QUIT_LIMIT)
        outcome = JUDGES[spec.test](evidence)
    detail = "\n".join(filter(None, [outcome.detail, *notes]))
    outcome = Outcome(outcome.verdict, outcome.expected, outcome.got, detail)
    result = _result(spec, outcome, trio.current_time() - started, tool.tail() if tool else [], stage, tool_port)
    (spec.folder / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


async def _open_stage(folder: Path, nursery: trio.Nursery) -> Stage:
    """The scripted peers listening, on ports chosen free, the tool's between theirs (B < T < C). A port
    another program took between its choice and its bind is chosen again, up to `SETUP_TRIES` times;
    then the OSError is the run's (*grader-error*)."""
    for attempt in range(1, SETUP_TRIES + 1):
        group = ports.allocate(PEERS + 1)
        stage = Stage(folder, group[1], [group[0], group[2]])
        try:
            await stage.open(nursery)
            return stage
        except OSError as e:
            if e.errno != errno.EADDRINUSE or attempt == SETUP_TRIES:
                raise
    raise AssertionError("unreachable")


async def _play(spec: TrialSpec, stage: Stage, tool: Tool, rng: random.Random, output: Path,
                notes: list[str], deadline: float) -> tuple[Outcome | None, Scene | None]:
    """Start-up, then the scenario; an Outcome when it ended the run before judging."""
    sub = spec.submission
    try:
        await tool.start(spec.start_limit)
        listen_limit = min(LISTEN_LIMIT, spec.start_limit)
        if not await stage.until(lambda: ports.listening(tool.port) or tool.exited, listen_limit):
            return Outcome("did-not-start", f"the tool listening on port {tool.port} after its menu",
                           f"not listening after {listen_limit:.0f} s"), None
        if tool.exited:
            raise ToolError("crashed", f"it ended right after its menu showed ({tool.exit_line()})")
        origin, where = learn_origin(tool.screen, tool.port, sub.origin)
        if not where.startswith("its"):
            notes.append(f"from: {origin} ({where})")
        stage.begin(origin)
        scene = Scene(stage, tool, rng, output, sub.line_regex, deadline)
        crashed = False
        try:
            async with trio.open_nursery() as watch:
                async def on_exit() -> None:
                    nonlocal crashed
                    assert tool.process is not None
                    await tool.process.wait()
                    if not tool.quitting:
                        crashed = True
                        watch.cancel_scope.cancel()

                watch.start_soon(on_exit)
                await SCENARIOS[spec.test](scene)
                await scene.settle_all()
                watch.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            raise _sole(group) from None
        if crashed:
            raise ToolError("crashed", f"it ended during the test ({tool.exit_line()})")
        return None, scene
    except ToolError as e:
        expected = {"did-not-start": "the menu of the handout's figure 1",
                    "crashed": "the tool running until menu 3"}.get(e.verdict, "")
        return Outcome(e.verdict, expected, e.got), None
    except Failed as f:
        if tool.exited and not tool.quitting:
            return Outcome("crashed", "the tool running until menu 3", f"it ended during the test "
                                                                        f"({tool.exit_line()})"), None
        return f.outcome, None


def _sole(group: BaseExceptionGroup) -> BaseException:
    """The one exception a nursery wrapped (a scenario's Failed or ToolError), else the group."""
    leaves = list(_leaves(group))
    return leaves[0] if len(leaves) == 1 else group


def _leaves(error: BaseException):  # type: ignore[no-untyped-def]
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error
