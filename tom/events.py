"""What the tasks tell the processor over its (bounded) incoming channel."""

from __future__ import annotations

from dataclasses import dataclass

from .frames import Frame


@dataclass(frozen=True, slots=True)
class FramesIn:
    """Frames read, in order, from the connection of member ``src``."""

    src: str
    frames: list[Frame]


@dataclass(frozen=True, slots=True)
class SendTexts:
    """The local user multicasts ``texts``, in order."""

    texts: list[str]


Event = FramesIn | SendTexts
