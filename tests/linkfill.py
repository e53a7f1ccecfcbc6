"""Fill a link's socket: due batches pushed with no writer running, until the socket takes no more."""

import trio


def push_until_blocked(link, batches: int = 2000, per_batch: int = 50, size: int = 1000) -> list[bytes]:
    """Every frame pushed on ``link`` (``batches`` at most, of ``per_batch`` frames of ``size`` bytes of
    text), in order; the last batch is the first one the socket did not take whole (it waits in the
    link's buffer for the writer)."""
    sent: list[bytes] = []
    for k in range(batches):
        batch = [f"MESSAGE-{k * per_batch + i}-127.0.0.1:5000-{'y' * size}\n".encode() for i in range(per_batch)]
        sent += batch
        now = trio.current_time()
        link.push_many(now, batch, now)
        if link.buffer:
            break
    assert link.buffer, "the socket took everything at once: nothing left for the writer"
    return sent
