"""The pure, sans-IO core of a peer: frames and elapsed time in, frames to send and events to deliver
out. Read it a file at a time:

* `modes` — where a peer stands in its group (joining, normal, flushing, ...) and the legal changes;
* `clock` — the Lamport clock;
* `queue` — the pending queue, in ``(clock, pid)`` order;
* `records` — what the core hands out: deliveries, view events, status, divergence alarms, `Ready`;
* `group` — `Core`: the delivery rule, views and the flush, failure detection, the divergence check.
"""

from .clock import LamportClock
from .group import NO_INCARNATION, ORDERS, QUORUMS, Core, check_text, has_quorum
from .modes import TRANSITIONS, Mode
from .queue import Entry, PendingQueue
from .records import Delivery, Divergence, PendingStatus, Ready, Status, Timing, View, ViewDelivery

__all__ = [
    "NO_INCARNATION", "ORDERS", "QUORUMS", "TRANSITIONS", "Core", "Delivery", "Divergence", "Entry", "LamportClock", "Mode",
    "PendingQueue", "PendingStatus", "Ready", "Status", "Timing", "View", "ViewDelivery", "check_text", "has_quorum",
]
