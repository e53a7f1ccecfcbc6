"""The status, in the terminal and in the API's snapshot, names the group's order and says what each
pending message waits for in it (Lamport: the missing ACKs, as always)."""

from rich.console import Console

from tom.web import snapshot
from tom.core import Core, Mode, PendingStatus, Status, View
from tom.codec.frames import Message
from tom.peer.ui import render_status

A, B, C = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"


def shown(status: Status) -> str:
    console = Console(width=200, record=True, force_terminal=False)
    for part in render_status(status, {}, 0.0):
        console.print(part)
    return console.export_text()


def status(order: str, pending: tuple[PendingStatus, ...]) -> Status:
    view = View(1, frozenset((A, B, C)), {A: 1, B: 1, C: 1}, A)
    return Status(A, Mode.NORMAL, 7, view, 3, pending, (), {}, 0.0, order=order)


def test_lamport_status_names_its_order_and_the_missing_acks():
    core = Core(A, [A, B, C])
    core.receive(B, Message(5, B, "hi"))
    core.ready()
    text = shown(core.status())
    assert "order: lamport" in text
    assert "missing ACKs from" in text and "MESSAGE-5-127.0.0.1:5001-hi" in text and C in text
    snap = snapshot.snapshot(core, {}, 0.0)
    assert snap["order"] == "lamport"
    (p,) = snap["pending"]
    assert p["missing"] == [C] and C in p["waits"] and p["seq"] is None


def test_sequencer_status_shows_each_message_s_number_and_what_it_waits_for():
    text = shown(status("sequencer", (
        PendingStatus(4, B, "first", (), (), "its turn: seq 3 is not delivered yet", 4),
        PendingStatus(5, C, "second", (), (), "a sequence number from 127.0.0.1:5000", None),
    )))
    assert "order: sequencer" in text and "seq" in text and "missing ACKs" not in text
    assert "its turn: seq 3 is not delivered yet" in text and "a sequence number from 127.0.0.1:5000" in text
    assert "none yet" in text


def test_causal_status_shows_the_predecessors_a_message_waits_for():
    text = shown(status("causal", (PendingStatus(4, B, "re: hi", (), (), f"1 message of {C} (it has 2 of 3)"),)))
    assert "order: causal" in text and "waits for" in text and f"1 message of {C} (it has 2 of 3)" in text
    assert "missing ACKs" not in text
