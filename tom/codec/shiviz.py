"""ShiViz's input format, and the vector clocks it needs: one writer for a replayed run (`tom replay
--shiviz`) and for the model checker's counterexamples (`tom check`).

The layout is GoVector's, which ShiViz reads unchanged: the parsing regular expression on the first
line, a blank line (no delimiter: one execution), then two lines an event::

    HOST {"HOST": 3, "OTHER": 1}
    what happened

Invariants of the clocks (`VectorClocks`): every event of a host adds one to the host's own entry
(its first event is 1); a receive first takes, entry by entry, the maximum of the host's clock and the
clock of the send it pairs with. So a receive's clock dominates its send's, and the order of a host's
events is the order of its own entry, which is what ShiViz checks.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable

SHIVIZ_REGEX = r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)"
"""The parsing regular expression ShiViz is given (first line of the file); ShiViz runs it over the whole
log with the ``m`` flag."""


class VectorClocks:
    """The vector clock of every host, advanced event by event; sends remembered by a key of the
    caller's choosing (a link and the frame's number on it, say) for the receive that pairs with them."""

    def __init__(self) -> None:
        self.clocks: dict[str, dict[str, int]] = {}
        self.sent: dict[Hashable, dict[str, int]] = {}

    def _tick(self, host: str) -> dict[str, int]:
        clock = dict(self.clocks.get(host, {}))
        clock[host] = clock.get(host, 0) + 1
        self.clocks[host] = clock
        return clock

    def local(self, host: str) -> dict[str, int]:
        """An event of ``host`` alone (a delivery, a timeout...): its clock."""
        return self._tick(host)

    def send(self, host: str, key: Hashable) -> dict[str, int]:
        """``host`` sends what ``key`` names: its clock, kept for the receive (a second send of the
        same key — a frame sent again after a reconnect — replaces the first)."""
        clock = self._tick(host)
        self.sent[key] = clock
        return clock

    def receive(self, host: str, key: Hashable | None) -> dict[str, int]:
        """``host`` receives what ``key`` names: the merge of its clock and the send's (a key never
        sent, or None, makes it a local event)."""
        sent = self.sent.get(key) if key is not None else None
        if sent:
            mine = dict(self.clocks.get(host, {}))  # a new dict: a clock handed out never changes
            for h, c in sent.items():
                if mine.get(h, 0) < c:
                    mine[h] = c
            self.clocks[host] = mine
        return self._tick(host)


def event_lines(host: str, clock: dict[str, int], what: str) -> list[str]:
    """The two lines of one event (``what`` on one line: line breaks become spaces)."""
    return [f"{host} {json.dumps(clock, sort_keys=True, separators=(',', ':'))}",
            what.replace("\r", " ").replace("\n", " ") or "-"]


def shiviz_log(events: Iterable[tuple[str, dict[str, int], str]]) -> str:
    """The whole file: the regular expression, a blank line, then each ``(host, clock, what)``."""
    lines = [SHIVIZ_REGEX, ""]
    for host, clock, what in events:
        lines += event_lines(host, clock, what)
    return "\n".join(lines) + "\n"
