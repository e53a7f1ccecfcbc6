"""A seeded in-memory network of cores, for deterministic protocol tests.

Links are FIFO (a frame never overtakes an earlier one on the same link) with random per-frame delays
drawn from the seed; the whole run is a function of the seed, so a failing seed replays exactly.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from tom.core import Core, Delivery
from tom.codec.frames import Frame, format_frame, parse_frame


@dataclass
class Network:
    cores: dict[str, Core]
    rng: random.Random
    max_delay: float = 1.0
    now: float = 0.0
    wire: bool = True  # round-trip every frame through the text codec, as on a real link
    _events: list = field(default_factory=list)
    _seq: int = 0
    _link_free: dict = field(default_factory=dict)
    delivered: dict[str, list[Delivery]] = field(default_factory=dict)
    batching: random.Random | None = None  # if set: a core takes several frames before its sends go out
    _dirty: set = field(default_factory=set)

    @classmethod
    def of(cls, n: int, seed: int, max_delay: float = 1.0, batching: bool = False,
           order: str = "lamport") -> "Network":
        """``batching``: like the real processor, a core often handles several frames in one step
        (so its ACKs go out in runs, as ACKS frames); drawn from a stream of its own."""
        pids = [f"127.0.0.1:{5000 + i}" for i in range(n)]
        cores = {p: Core(p, pids, order=order) for p in pids}
        net = cls(cores, random.Random(seed), max_delay,
                  batching=random.Random(f"batching/{seed}") if batching else None)
        net.delivered = {p: [] for p in pids}
        return net

    def _step_done(self, pid: str) -> None:
        """A core handled an event: its step ends now, or (batching) maybe after more events."""
        if self.batching is None:
            self._flush(pid)
            return
        self._dirty.add(pid)
        if self.batching.random() < 0.3 or not self._events:
            for p in sorted(self._dirty):
                self._flush(p)
            self._dirty.clear()

    def _push(self, at: float, item: tuple) -> None:
        self._seq += 1
        heapq.heappush(self._events, (at, self._seq, item))

    def _flush(self, pid: str) -> None:
        ready = self.cores[pid].ready()
        self.delivered[pid].extend(ready.deliveries)
        for dests, frame in ready.sends:
            for t in dests:
                self.transmit(pid, t, frame)

    def transmit(self, src: str, dst: str, frame: Frame) -> None:
        """Schedule ``frame`` on link src->dst after a random delay, never before earlier frames."""
        at = max(self.now + self.rng.uniform(0, self.max_delay), self._link_free.get((src, dst), 0.0))
        self._link_free[(src, dst)] = at
        self._push(at, ("frame", src, dst, frame))

    def schedule_send(self, at: float, pid: str, text: str) -> None:
        self._push(at, ("send", pid, text))

    def run(self, max_events: int = 1_000_000) -> None:
        for _ in range(max_events):
            if not self._events:
                return
            self.now, _, item = heapq.heappop(self._events)
            if item[0] == "send":
                _, pid, text = item
                self.cores[pid].broadcast(text, sent_at=self.now)
                self._step_done(pid)
            else:
                _, src, dst, frame = item
                if self.wire:
                    frame = parse_frame(format_frame(frame))
                self.cores[dst].receive(src, frame)
                self._step_done(dst)
        raise AssertionError("simulation did not quiesce")


def random_workload(net: Network, messages: int, span: float) -> list[tuple[str, str]]:
    """Schedule ``messages`` sends at random peers and times in [0, span); return (pid, text) sent."""
    pids = sorted(net.cores)
    sent = []
    for i in range(messages):
        pid = net.rng.choice(pids)
        text = f"m{i} from {pid}"
        net.schedule_send(net.rng.uniform(0, span), pid, text)
        sent.append((pid, text))
    return sent
