"""What a user may multicast: the limits a text must keep to become one frame."""

from __future__ import annotations

from ..codec.frames import MAX_FRAME_BYTES, message_frame_bytes
from ..errors import UsageError


def check_text(me: str, text: str, order: str = "lamport") -> None:
    """UsageError, in one line, if ``text`` cannot be multicast by ``me`` in a group of ``order``: its
    frame could exceed MAX_FRAME_BYTES (at any clock, with any vector), or it is not valid Unicode."""
    if type(text) is not str:
        raise UsageError("a message text must be a string")
    try:
        size = message_frame_bytes(me, text, vector=order == "causal")
    except UnicodeEncodeError:
        raise UsageError("message not sent: its text is not valid Unicode (a lone surrogate)") from None
    if size > MAX_FRAME_BYTES:
        raise UsageError(f"message not sent: its frame would take {size:,} bytes, over the limit of "
                         f"{MAX_FRAME_BYTES:,} (about {MAX_FRAME_BYTES - size + len(text.encode()):,} bytes "
                         f"of UTF-8 text; backslashes and line breaks count twice)")
