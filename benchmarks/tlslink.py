"""One link on loopback, in clear and under TLS: the cost of security where it is paid.

Three ways to carry a link, each in a fresh connection in one process (both ends), in turn, ``--rounds``
times: a plain `trio.SocketStream`; `trio.SSLStream` (TLS through memory BIOs); `tom.net.tlsstream`'s
`TlsSocketStream` (OpenSSL on the socket, what secured peers use on TCP). Figures: the round trip of
one frame-sized line (send, echo, receive; median of ``--lines``) and bulk echo bandwidth (256 KiB
batches, as a link writer sends them). Peers' figures are in ``scripts/bench``; this one isolates
the link from the protocol and from the other processes, so its small differences can be seen.

Run: ``.venv/bin/python -m benchmarks.tlslink [--lines N] [--rounds R]``. Loopback only; every
connection is closed and every task ends within the run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import trio

from tom.net.keys import create_keys, load_group_keys
from tom.net.tlsstream import TlsSocketStream

A, B = "127.0.0.1:5000", "127.0.0.1:5001"
LINE = b"MESSAGE@1763766000.125-12345-127.0.0.1:5000-hello world\n"
BULK = LINE * (256 * 1024 // len(LINE))


async def wrap(stream: trio.SocketStream, how: str, keys, server_side: bool) -> trio.abc.Stream:
    ctx = keys.server if server_side else keys.client
    if how == "trio.SSLStream":
        tls = trio.SSLStream(stream, ctx, server_side=server_side)
    elif how == "TlsSocketStream":
        tls = TlsSocketStream.wrap(stream, ctx, server_side)
    else:
        return stream
    await tls.do_handshake()
    return tls


async def measure(how: str, keys_a, keys_b, lines: int) -> tuple[float, float]:
    """(median round trip in seconds, bulk echo bytes per second) over one fresh connection."""
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listener.socket.getsockname()[1]

    async def echo(task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        stream = await wrap(await listener.accept(), how, keys_b, True)
        async with stream:
            while data := await stream.receive_some(65536):
                await stream.send_all(data)

    async with listener, trio.open_nursery() as nursery:
        await nursery.start(echo)
        with trio.fail_after(60):
            stream = await wrap(await trio.open_tcp_stream("127.0.0.1", port), how, keys_a, False)
            rtts = []
            for _ in range(lines):
                t = time.perf_counter()
                await stream.send_all(LINE)
                got = 0
                while got < len(LINE):
                    got += len(await stream.receive_some(65536))
                rtts.append(time.perf_counter() - t)
            t = time.perf_counter()
            for _ in range(40):
                await stream.send_all(BULK)
                got = 0
                while got < len(BULK):
                    got += len(await stream.receive_some(65536))
            rate = 40 * len(BULK) / (time.perf_counter() - t)
            await stream.aclose()
    return statistics.median(rtts), rate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks.tlslink", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=3000, help="round trips per measure (default 3000)")
    ap.add_argument("--rounds", type=int, default=3, help="measures per way, taken in turn (default 3)")
    args = ap.parse_args(argv)
    if not 1 <= args.lines <= 1_000_000 or not 1 <= args.rounds <= 100:
        ap.error("--lines 1..1000000, --rounds 1..100")
    ways = ["plain", "trio.SSLStream", "TlsSocketStream"]
    with tempfile.TemporaryDirectory(prefix="tom-tlslink-") as tmp:
        create_keys([A, B], Path(tmp))
        keys_a, keys_b = load_group_keys(Path(tmp), A), load_group_keys(Path(tmp), B)
        results: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
        for _ in range(args.rounds):
            for way in ways:
                results[way].append(trio.run(measure, way, keys_a, keys_b, args.lines))
    print(f"{'link':>16} | {'round trip us (median of rounds)':>32} | {'bulk echo MB/s':>14}")
    for way in ways:
        rtt = statistics.median(r for r, _ in results[way])
        rate = statistics.median(b for _, b in results[way])
        print(f"{way:>16} | {1e6 * rtt:32.1f} | {rate / 1e6:14.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
