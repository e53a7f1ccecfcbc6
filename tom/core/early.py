"""Frames of a view this peer has not installed yet: they wait, and are taken once it is (`Core._install`)
or once their sender's link is back (`Core.connected`).

Invariants: frames wait in the order they came, each with what its sender was then — the incarnation
it was connected as, and the view and group it had announced (a view's announcement precedes its
frames on a link, so that is the frame's view) —, at most `MAX_EARLY_FRAMES` of them (more: the link
is refused). A frame is taken only from the incarnation that sent it: one of a sender whose link is
down waits again (received, it is never sent again), one of an old incarnation is void.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mypy_extensions import mypyc_attr

from ..codec.frames import Frame
from ..errors import FrameError
from .peers import NO_INCARNATION, Peers
from .records import View

Early = tuple[str, int, "int | None", str, Frame]
"""A frame held for a view not installed yet: its sender, the sender's incarnation, the view and group it
had announced then (None: none), the frame."""

MAX_EARLY_FRAMES = 1_000_000
"""Frames of a view not installed yet, kept at most (more: the link is refused)."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class EarlyFrames:
    """The frames of a view not installed yet, in the order they came."""

    __slots__ = ("frames",)

    def __init__(self) -> None:
        self.frames: list[Early] = []

    def hold(self, src: str, frame: Frame, peers: Peers, incarnation: int | None = None) -> None:
        """Keep ``frame`` of ``src``, sent by the incarnation its link is connected as (or by
        ``incarnation``: a frame received before its link went down)."""
        if len(self.frames) >= MAX_EARLY_FRAMES:
            raise FrameError("too many frames waiting for a view")
        sender = peers.links.get(src, NO_INCARNATION) if incarnation is None else incarnation
        self.frames.append((src, sender, peers.views.get(src), peers.groups.get(src, ""), frame))

    def taken_back(self, frames: Sequence[tuple[str, Frame]], peers: Peers,
                   view: View) -> list[tuple[str, Frame]]:
        """Of the frames of members an attempt cut and the next one keeps (`ViewChange.take_back`), those
        to take now: the others' senders' links are down, so they wait here for the link to be back as
        the incarnation ``view`` has (received, a frame is never sent again)."""
        now = []
        for src, frame in frames:
            if src in peers.links:
                now.append((src, frame))
            else:
                self.hold(src, frame, peers, view.incarnations.get(src, NO_INCARNATION))
        return now

    def take(self, pid: str | None = None) -> list[Early]:
        """The frames waiting (of ``pid`` only, if given), taken out, in the order they came."""
        if pid is None:
            frames, self.frames = self.frames, []
            return frames
        frames = [e for e in self.frames if e[0] == pid]
        if frames:
            self.frames = [e for e in self.frames if e[0] != pid]
        return frames

    def replay(self, frames: list[Early], peers: Peers,
               static: bool) -> Iterator[tuple[str, tuple[int, str] | None, Frame]]:
        """Of ``frames``, those to take now, in order, each decided once the one before was taken: the
        frames of a sender connected as the incarnation that sent them (any, in a ``static`` group),
        each with the view and group its sender had announced if this peer forgot that meanwhile (a
        reconnect while joining: they looked stale), to be announced again first; the others wait
        again or are void."""
        for src, inc, view, group, frame in frames:
            if static or peers.links.get(src) == inc:
                yield src, (view, group) if view is not None and src not in peers.views else None, frame
            elif peers.incarnations.get(src) == inc:
                self.frames.append((src, inc, view, group, frame))
