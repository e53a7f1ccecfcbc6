"""The driver's hold on a tool's terminal (tom.grade.driver.Tool), on real processes in a real pty."""

from __future__ import annotations

import sys

import trio

from tom.grade.driver import Tool
from tom.grade.prompts import DEFAULT_RULES


def test_what_a_tool_printed_before_it_ended_is_in_its_tail_even_if_nobody_read_it_yet(tmp_path, monkeypatch):
    """A tool that prints and ends at once can end before the driver's reader has taken its last lines
    from the terminal (fresh run 57: a tool's 'bye' missing from its verdict's tail). The reader here
    never runs, the worst case of that race: stopping the tool still takes what the terminal holds."""
    async def never_reads(self) -> None:
        await trio.sleep_forever()

    monkeypatch.setattr(Tool, "_read", never_reads)

    async def main() -> Tool:
        tool = Tool(f"{sys.executable} -c \"print('Loaded 3 neighbors'); print('bye')\"", tmp_path,
                    tmp_path / "terminal.log", 5000, DEFAULT_RULES)
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
