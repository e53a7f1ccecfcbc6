"""A totally ordered chat: every member prints the same lines in the same order.

    python examples/chat.py neighbors/three.txt 127.0.0.1:5000 alice     # and bob, carol on 5001, 5002

Type a line and Enter to say it; end with Ctrl-D (leaves the group) or Ctrl-C. Joins and leaves
show where they happened among the lines, the same at every member.
"""

from __future__ import annotations

import sys

import trio

import tom
from tom.errors import TomError


async def chat(neighbors: str, me: str, name: str) -> None:
    async with tom.open_group(neighbors, me) as group:
        async def show() -> None:
            async for event in group:
                if isinstance(event, tom.Delivered):
                    print(event.payload, flush=True)
                else:
                    who = ", ".join(event.joined) + " joined" if event.joined else ", ".join(event.left) + " left"
                    print(f"-- {who}: {len(event.members)} in the room", flush=True)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(show)
            stdin = trio.lowlevel.FdStream(0)
            buffer = b""
            while data := await stdin.receive_some():
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        await group.send(f"{name}: {line.decode(errors='replace')}")
            nursery.cancel_scope.cancel()  # end of input: leave the group


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    try:
        trio.run(chat, *sys.argv[1:])
    except KeyboardInterrupt:
        pass
    except TomError as e:
        print(f"chat: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
