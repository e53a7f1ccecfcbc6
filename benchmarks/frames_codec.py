"""The wire codec on its own: ns per `parse_frame` and `format_frame` call, per frame kind.

The mix is what a busy group sends most: a message with the sender's marks riding on it (and its causal
form, with a vector), MARKS, ACK, ACKS, SEQ and HEARTBEAT with its digest. Every pid is known (parsed once before timing), as on a link
after its first frame. ``table`` is the parse through the codec's table alone, without a fast path: a
fast path is worth keeping only where ``parse`` beats it clearly. Best of ``--repeat`` runs.

Run: ``python -m benchmarks.frames_codec [--repeat R] [--number N]`` (a few seconds).
"""

from __future__ import annotations

import argparse
import time
import timeit
from collections.abc import Callable

from tom.codec import frames
from tom.codec.frames import format_frame, parse_frame

A, B = "127.0.0.1:5000", "10.0.0.2:5001"
MIX = {
    "MESSAGE+marks": "MESSAGE@1763766000.123456+1041,998,1203-1042-127.0.0.1:5000-the quick brown fox, message 1042",
    "CMESSAGE+marks": "CMESSAGE@1763766000.123456+1041,998,1203-1042-127.0.0.1:5000-1041,998,1202-the quick brown fox",
    "MARKS": "MARKS-1041,998,1203",
    "ACK": "ACK-1042-127.0.0.1:5000",
    "ACKS": "ACKS-1042,1043,1044,1045,1046-127.0.0.1:5000",
    "SEQ": "SEQ-5120-1042,1043,1044-10.0.0.2:5001",
    "HEARTBEAT": "HEARTBEAT-3-5119-9f3c2a61-1044-10.0.0.2:5001",
}


def best_ns(call: Callable[[object], object], arg: object, number: int, repeat: int) -> float:
    timer = timeit.Timer("call(arg)", timer=time.process_time, globals={"call": call, "arg": arg})
    return min(timer.repeat(repeat, number)) / number * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--number", type=int, default=2_000)
    args = ap.parse_args()
    table = frames._parse_by_table
    print(f"{'kind':<15}{'parse':>9}{'table':>9}{'format':>9}   (ns per call)")
    for kind, line in MIX.items():
        frame = parse_frame(line)
        assert format_frame(frame) == line and table(line) == frame, kind
        parse, general, fmt = (best_ns(f, x, args.number, args.repeat)
                               for f, x in ((parse_frame, line), (table, line), (format_frame, frame)))
        print(f"{kind:<15}{parse:>9.0f}{general:>9.0f}{fmt:>9.0f}")


if __name__ == "__main__":
    main()
