"""The driver's hold on a tool's terminal (tom.grade.driver.Tool), on real processes in a real pty."""

from __future__ import annotations

import sys

import trio

from tom.grade.driver import Tool
from tom.grade.prompts import DEFAULT_RULES


def _tool(command: str, folder) -> Tool:
    """A tool run in ``folder`` with the default rules, its terminal logged there."""
    return Tool(command, folder, folder / "terminal.log", 5000, DEFAULT_RULES)


def test_what_a_tool_printed_before_it_ended_is_in_its_tail_even_if_nobody_read_it_yet(tmp_path, monkeypatch):
    """A tool that prints and ends at once can end before the driver's reader has taken its last lines
    from the terminal (fresh run 57: a tool's 'bye' missing from its verdict's tail). The reader here
    never runs, the worst case of that race: stopping the tool still takes what the terminal holds."""
    async def never_reads(self) -> None:
        await trio.sleep_forever()

    monkeypatch.setattr(Tool, "_read", never_reads)

    async def main() -> Tool:
        tool = _tool(f"{sys.executable} -c \"print('Loaded 3 neighbors'); print('bye')\"", tmp_path)
        async with trio.open_nursery() as nursery:
            await tool.spawn(nursery)
            with trio.fail_after(30):
                await tool.process.wait()
            await tool.stop()
            nursery.cancel_scope.cancel()
        return tool

    tool = trio.run(main)
    assert tool.exited and tool.tail()[-2:] == ["Loaded 3 neighbors", "bye"]
    assert "bye" in (tmp_path / "terminal.log").read_text()


def test_a_terminal_held_open_past_the_stop_frees_its_fd_for_the_next_run(tmp_path):
    """A tool whose process outside its group still holds the terminal (``setsid``: the stop's kill
    of the group misses it) keeps the driver's reader waiting on the pty when stop() closes it. The
    fd number goes to whatever this process opens next, as to another run of `tom grade --jobs N`:
    the reader must be woken and gone by then, or that run's wait on the fd fails (fresh runs 57
    and 59: a run 'crashed', the grader's own ExceptionGroup)."""
    import os
    import signal
    import socket

    pidfile = tmp_path / "held.pid"

    async def main() -> None:
        tool = _tool(f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 30' & echo started; sleep 30", tmp_path)
        async with trio.open_nursery() as nursery:
            await tool.spawn(nursery)
            with trio.fail_after(30):
                while "started" not in tool.screen or not pidfile.exists() or not pidfile.read_text().strip():
                    await trio.sleep(0.05)
            master = tool._master
            await tool.stop()
            a, b = socket.socketpair()  # the lowest free fd numbers: the terminal's among them
            try:
                assert master in (a.fileno(), b.fileno())
                b.send(b"x")
                with trio.fail_after(5):
                    await trio.lowlevel.wait_readable(a)  # no other waiter on this fd
            finally:
                a.close()
                b.close()
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    finally:
        if pidfile.exists() and pidfile.read_text().strip():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_tool_stopped_before_the_reader_first_ran_ends_the_reader_quietly(tmp_path):
    """A tool that ends at once (`true`) can be seen ended and stopped before the driver's reader task
    has run at all: stop() closes the terminal, and the reader's first wait must not be on the closed
    fd (it was: 'file descriptor cannot be a negative integer (-1)', the run's nursery failed and the
    tool, graded grader-error, had done nothing wrong; `tom grade --run true` met it 1 run in 2)."""
    import time

    async def main() -> Tool:
        tool = _tool("true", tmp_path)
        async with trio.open_nursery() as nursery:
            await tool.spawn(nursery)
            deadline = time.monotonic() + 30
            while tool.process.poll() is None and time.monotonic() < deadline:  # no checkpoint: the
                time.sleep(0.01)                                                 # reader has not run
            await tool.stop()
            await trio.sleep(0.1)  # the reader's first turn, on a closed terminal
            nursery.cancel_scope.cancel()
        return tool

    tool = trio.run(main)
    assert tool.process.returncode == 0
