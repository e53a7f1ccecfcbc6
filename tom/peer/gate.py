"""Step mode's gate (``tom peer --step``): what the links bring waits, link by link, until released.

The gate stands between the links and the processor: the listener and sender tasks hand it what they
would hand the processor's `Inbox` (it is their `EventSink`), and it hands the inbox what it lets
through. Each link has a FIFO queue of what came on it — its frames one by one (a batch is split, so
that each frame can be stepped) and its connection events — and the user releases heads of queues
(`Gate.release`, `Gate.release_all`, `Gate.release_random`; the HTTP API's ``/api/gate``).

Invariants:

* **A link stays FIFO.** Per link, what reaches the inbox is exactly what the link brought, in the order
  it came, each once: nothing reordered within a link, nothing dropped, nothing duplicated. To the
  core a gate is one more slow stretch of the link, so everything it sees could happen on a real
  network (and the protocol's reasoning that "links are FIFO" holds).
* **Only ordered frames are held** (`HELD_KINDS`: MESSAGE, RELAY, ACK, ACKS, MARKS, SEQ — what
  a lab steps). Everything else — heartbeats, membership frames, connection events — passes by itself
  once it is at the head of its link's queue, and never before. So a link's queue is empty or starts
  with a held frame, and that head is the only thing of the link that can be released.
* **Failure detection is frozen for what is held.** A batch that has to wait tells the core at once
  that its sender was heard (`Heard`, `tom.core.group.heard_at_gate`): liveness only — nothing it said
  is taken, a suspicion stays until the peer speaks —, so no member is suspected, let alone removed,
  because a student holds its frames. Its heartbeats still reach the core in their place, behind the
  ACKs before them, so the divergence check never sees a delivery claimed ahead of an acknowledgement
  it rests on (no false alarm), and a view change still waits for what is held (virtual synchrony
  needs those frames).
* **Bounded.** A link holds at most ``limit`` items; then its reader waits (backpressure, as for a
  full inbox) until a release makes room. ``release_all`` stops after ``MAX_RELEASE`` frames even if
  frames keep coming.
* Releases and arrivals are serialized (one lock): a frame that arrives while a release of its link is
  under way cannot overtake what the release hands on.
* A gate can be opened (`Gate.hold` with False: everything held goes on, oldest first, and what comes
  next passes) and closed again (what comes next is held): so a lab can let traffic run, or let only
  one peer hold, and start stepping at a moment it picks.

Off by default: a peer without ``--step`` hands its links the inbox itself, and no code of this
module runs on its path.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import trio

from ..codec.frames import Frame
from ..core.dispatch import ORDERED
from ..errors import UsageError
from .events import Connected, Disconnected, Event, EventSink, FramesIn, Heard

HELD_KINDS: frozenset[type[Frame]] = frozenset(ORDERED)
"""The frame kinds the gate holds: the ordered frames (`tom.core.dispatch.ORDERED`)."""

MAX_HELD = 10_000
"""Items (frames and connection events) one link's queue holds at most before its reader waits."""

MAX_RELEASE = 10_000
"""Frames one ``release_all`` hands on at most (frames may keep coming while it runs)."""


class NothingHeld(UsageError):
    """A release found nothing held (on that link, or at all)."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """One item in a link's queue: ``event`` (a FramesIn of one frame, or a connection event), and
    ``arrival``, its number in the order everything came to the gate (for `Gate.release_all`)."""

    arrival: int
    event: Event

    @property
    def frame(self) -> Frame | None:
        """The frame, if the item is one."""
        e = self.event
        return e.frames[0] if type(e) is FramesIn else None

    @property
    def held(self) -> bool:
        """Whether it waits for a release (else it passes by itself at the head)."""
        e = self.event
        return type(e) is FramesIn and type(e.frames[0]) in HELD_KINDS


class Gate:
    """The per-link queues between the links and ``inbox``; an `EventSink` for the link tasks."""

    def __init__(self, inbox: EventSink, rng: random.Random | None = None, limit: int = MAX_HELD,
                 on_pass: Callable[[str, int], None] | None = None) -> None:
        self.inbox = inbox
        self.on_pass = on_pass  # told (link, how many frames) as a link's frames go on to the inbox (--trace)
        self.rng = rng if rng is not None else random.Random()
        self.limit = limit
        self.queues: dict[str, deque[Waiting]] = {}
        self.released = 0  # frames released by hand so far (release, release_all, release_random)
        self.holding = True  # False: open, everything passes (`hold`)
        self._arrivals = 0
        self._lock = trio.Lock()
        self._room = trio.Event()  # set when a release made room in some queue

    # -- what the links hand in ------------------------------------------------------------------

    async def send(self, event: Event) -> None:
        """Take ``event`` from a link task: pass it on if its link has nothing waiting and it is not held,
        else queue it (its frames one by one, the first held frame and everything after it)."""
        src = _source(event)
        if src is None:  # (not a link's event: the link tasks send none, but pass it on unchanged)
            await self.inbox.send(event)
            return
        while len(self.queues.get(src, ())) >= self.limit:
            self._room = trio.Event() if self._room.is_set() else self._room
            await self._room.wait()
        async with self._lock:
            queue = self.queues.setdefault(src, deque())
            if type(event) is not FramesIn:
                if queue:
                    queue.append(self._waiting(event))
                else:
                    await self.inbox.send(event)
                return
            frames = event.frames  # type: ignore[union-attr]
            cut = 0 if queue else _first_held(frames) if self.holding else len(frames)
            if cut:
                await self._hand_on(FramesIn(src, frames[:cut]) if cut < len(frames) else event)
            if cut < len(frames):
                for frame in frames[cut:]:
                    queue.append(self._waiting(FramesIn(src, [frame])))
                await self.inbox.send(Heard(src))

    def _waiting(self, event: Event) -> Waiting:
        self._arrivals += 1
        return Waiting(self._arrivals, event)

    # -- what the user releases --------------------------------------------------------------------

    def held(self) -> int:
        """Frames held now, on every link."""
        return sum(1 for queue in self.queues.values() for w in queue if w.held)

    def heads(self) -> Iterator[tuple[str, deque[Waiting]]]:
        """``(link, queue)`` for every link holding something, in the order the links first came."""
        return ((src, q) for src, q in self.queues.items() if q)

    async def release(self, src: str) -> Frame:
        """Hand on the frame at the head of ``src``'s queue, then whatever follows it that is not held;
        the frame released. NothingHeld if that link holds nothing."""
        async with self._lock:
            return await self._release(src)

    async def release_all(self, limit: int = MAX_RELEASE) -> int:
        """Release until nothing is held (at most ``limit`` frames), oldest head first — in the order
        the frames came to the gate, as if it had let each through when it came; how many."""
        async with self._lock:
            return await self._release_oldest(limit)

    async def hold(self, on: bool) -> int:
        """Close the gate (``on``: what comes next is held) or open it (everything held goes on, oldest
        first, and what comes next passes); the frames released by opening it."""
        async with self._lock:
            self.holding = on
            if on:
                return 0
            # everything: nothing can come meanwhile (arrivals wait for the lock)
            return await self._release_oldest(sum(len(q) for q in self.queues.values()))

    async def release_random(self) -> tuple[str, Frame]:
        """Release the head of one link drawn at random among those holding something: ``(link, frame)``.
        NothingHeld if nothing is held."""
        async with self._lock:
            links = sorted(src for src, _ in self.heads())
            if not links:
                raise NothingHeld("nothing is held")
            src = self.rng.choice(links)
            return src, await self._release(src)

    async def _release_oldest(self, limit: int) -> int:
        """Release the oldest head, again, until nothing is held or ``limit`` frames went; how many."""
        n = 0
        while n < limit:
            oldest = min(self.heads(), key=lambda item: item[1][0].arrival, default=None)
            if oldest is None:
                break
            await self._release(oldest[0])
            n += 1
        return n

    async def _release(self, src: str) -> Frame:
        queue = self.queues.get(src)
        if not queue:
            raise NothingHeld(f"nothing from {src} is held")
        head = queue.popleft()
        frame = head.frame
        assert frame is not None and head.held, "a queue starts with a held frame"
        self.released += 1
        await self._pass_heads(src, queue, [frame])
        self._room.set()
        return frame

    async def _pass_heads(self, src: str, queue: deque[Waiting], frames: list[Frame]) -> None:
        """Hand on ``frames`` (just released) with what is not held at the head of ``src``'s queue after
        them: consecutive frames in one batch, in order."""
        while queue and not queue[0].held:
            event = queue.popleft().event
            if type(event) is FramesIn:
                frames.extend(event.frames)
                continue
            if frames:
                await self._hand_on(FramesIn(src, frames))
                frames = []
            await self.inbox.send(event)
        if frames:
            await self._hand_on(FramesIn(src, frames))

    async def _hand_on(self, event: FramesIn) -> None:
        """Frames of a link go on to the core (told to ``on_pass`` first: the trace's moment for them)."""
        if self.on_pass is not None:
            self.on_pass(event.src, len(event.frames))
        await self.inbox.send(event)


def _source(event: Event) -> str | None:
    """The link an event of a link task belongs to."""
    t = type(event)
    if t is FramesIn:
        return event.src  # type: ignore[union-attr]
    if t is Connected or t is Disconnected:
        return event.pid  # type: ignore[union-attr]
    return None


def _first_held(frames: list[Frame]) -> int:
    """The index of the first frame of ``frames`` the gate holds (``len(frames)`` if none)."""
    for i, frame in enumerate(frames):
        if type(frame) in HELD_KINDS:
            return i
    return len(frames)
