"""The floor of TOM's light-load path on this machine: bare trio peers that make the same two hops.

One message at a time, a Lamport-order peer delivers a message once it has the message and every
other member's ACK of it: two hops (the message, then the ACKs), each a write on a loopback socket, a
process woken by the kernel, a read and a parse. A floor peer does exactly that and nothing else: it
reads its texts from stdin, writes ``M <clock> <origin> <sent_at> <text>`` to every other member,
answers a message with ``A <clock> <origin>`` to every other member, and writes one JSON line to its
output (the fields the bench reads of a TOM peer's output) once it has the message and the ACKs of
every member but itself and the origin. No pending queue, no marks, no timers, no digest, no status.

``scripts/bench --floor`` runs a group of these beside TOM's light-load groups, taking turns with them
one message at a time (`benchmarks.peers.light_together`), so ``TOM's p50 - the floor's p50`` is what
TOM's own work adds to a message's path at that moment on that machine.

Invariants: loopback only (the neighbors file's addresses); every loop waits on a socket or stdin and
ends when they close; a peer exits on SIGTERM (the default action) or when its stdin closes and the
bench stops it. Messages must be sent one at a time (each after the previous one is delivered
everywhere): the floor has no ordering rule, and its Lamport clocks then increase with the sends.

Run (by the bench): ``python -m benchmarks.floor_mesh NEIGHBORS OUTPUT PORT``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import trio

HOST = "127.0.0.1"


class FloorPeer:
    def __init__(self, members: list[str], me: str, output: Path) -> None:
        self.me = me
        self.others = [m for m in members if m != me]
        self.out = open(output, "a", encoding="utf-8")
        self.streams: dict[str, trio.SocketStream] = {}  # outgoing, by member
        self.clock = 0
        self.pending: dict[tuple[int, str], dict] = {}
        self.delivered: set[tuple[int, str]] = set()

    async def multicast(self, line: bytes, skip: str | None = None) -> None:
        for member, stream in self.streams.items():
            if member != skip:
                await stream.send_all(line)

    async def own(self, text: str) -> None:
        self.clock += 1
        sent_at = time.time()
        key = (self.clock, self.me)
        self.pending[key] = {"text": text, "sent_at": sent_at, "acks": set()}
        await self.multicast(f"M {self.clock} {self.me} {sent_at!r} {text}\n".encode())
        self.check(key)

    async def on_line(self, sender: str, line: str) -> None:
        kind, clock_s, origin, *rest = line.split(" ", 4)
        clock = int(clock_s)
        self.clock = max(self.clock, clock)
        if (clock, origin) in self.delivered:
            return
        entry = self.pending.setdefault((clock, origin), {"text": None, "sent_at": 0.0, "acks": set()})
        if kind == "M":
            entry["sent_at"] = float(rest[0])
            entry["text"] = rest[1] if len(rest) > 1 else ""
            await self.multicast(f"A {clock} {origin}\n".encode())
        else:
            entry["acks"].add(sender)
        self.check((clock, origin))

    def check(self, key: tuple[int, str]) -> None:
        entry = self.pending.get(key)
        if entry is None:  # delivered while we were writing
            return
        need = len(self.others) - (0 if key[1] == self.me else 1)
        if entry["text"] is None or len(entry["acks"]) < need:
            return
        del self.pending[key]
        self.delivered.add(key)
        self.out.write(json.dumps({"kind": "message", "clock": key[0], "pid": key[1], "peer": self.me,
                                   "text": entry["text"], "view": 0, "sent_at": entry["sent_at"],
                                   "delivered_at": time.time()}) + "\n")
        self.out.flush()


async def read_lines(stream, handle) -> None:
    buf = b""
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            await handle(line.decode())


async def main(neighbors: Path, output: Path, port: int) -> None:
    members = [line.strip() for line in neighbors.read_text().splitlines() if line.strip()]
    me = f"{HOST}:{port}"
    peer = FloorPeer(members, me, output)
    ready = trio.Event()

    async def serve(stream: trio.SocketStream) -> None:
        hello = b""
        while not hello.endswith(b"\n"):
            data = await stream.receive_some(1)
            if not data:
                return
            hello += data
        sender = hello.decode().strip()
        await ready.wait()
        await read_lines(stream, lambda line: peer.on_line(sender, line))

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(port, host=HOST)
        nursery.start_soon(trio.serve_listeners, serve, listeners)
        for member in peer.others:
            host, _, p = member.rpartition(":")
            for _ in range(200):  # bounded: 10 s for every member to listen
                try:
                    stream = await trio.open_tcp_stream(host, int(p))
                    break
                except OSError:
                    await trio.sleep(0.05)
            else:
                sys.exit(f"floor peer {me}: {member} does not answer")
            await stream.send_all(f"{me}\n".encode())
            peer.streams[member] = stream
        ready.set()
        print(f"floor peer {me}: connected to {len(peer.streams)} members", flush=True)
        await read_lines(trio.lowlevel.FdStream(os.dup(0)), peer.own)
        await trio.sleep_forever()  # stdin closed: stay a member until the bench stops us


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
