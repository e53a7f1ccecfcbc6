"""The pure, sans-IO core of a peer: frames and elapsed time in, frames to send and events to deliver
out. Read it a file at a time:

* `group` — `Core`, the orchestrator: inputs, the mode, the (mode, frame kind) -> handler table
  (`HANDLERS`), the view; it drives the parts below;
* `order` — the `Order` Protocol, and the orders: `lamport`, `sequencer`, `causal` (with `queue`, the
  pending queue in ``(clock, pid)`` order, and `marks`, wire v2's cumulative ACKs as received);
* `outbox` — the step's frames, deliveries and notices, and this peer's marks;
* `detector` — failure detection; `quorum` — the quorum and coordinator rules (pure functions);
* `viewchange` — the flush under way; `founding` — the founding handshake of a first group;
* `divergence` — digests of what was delivered, compared with the others' (`digest`);
* `modes` — where a peer stands in its group and the legal changes; `clock` — the Lamport clock;
* `records` and `notices` — what the core hands out: deliveries, view events, status, alarms,
  notices, `Ready`;
* `handout` — the handout's own delivery rule (`HandoutCore`), for its wire.
"""

from .clock import LamportClock
from . import notices
from .group import HANDLERS, QUORUMS, Core
from .modes import TRANSITIONS, Mode
from .order import ORDERS, Order
from .peers import NO_INCARNATION
from .quorum import has_quorum
from .queue import Entry, PendingQueue
from .texts import check_text
from .records import Delivery, Divergence, PendingStatus, Ready, Status, Timing, View, ViewDelivery

__all__ = [
    "HANDLERS", "Order", "notices", "NO_INCARNATION", "ORDERS", "QUORUMS", "TRANSITIONS", "Core", "Delivery", "Divergence", "Entry", "LamportClock", "Mode",
    "PendingQueue", "PendingStatus", "Ready", "Status", "Timing", "View", "ViewDelivery", "check_text", "has_quorum",
]
