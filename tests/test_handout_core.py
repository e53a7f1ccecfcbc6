"""The handout's wire on the pure core: the codec's edge cases and the handout's counting rule."""

from __future__ import annotations

import pytest

from tom.core.handout import BEFORE_JOIN, STALE_LATE_ACK, HandoutCore
from tom.errors import FrameError
from tom.codec.handout import (HAck, HHeartbeat, HJoin, HLeave, HMessage, format_frame, java_from, origin_pid,
                                parse_line)

A, B, C = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"
FA, FB, FC = "localhost/127.0.0.1:5000", "/127.0.0.1:5001", "127.0.0.1:5002"  # three forms of 'from'
NEIGHBORS = [A, B, C]


# -- the codec ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("line, frame", [
    ("MESSAGE-1234-10.0.0.2:5000-Text here", HMessage(1234, "10.0.0.2:5000", "Text here")),
    ("ACK-1234-10.0.0.2:5000", HAck(1234, "10.0.0.2:5000")),
    ("MESSAGE-1-localhost/127.0.0.1:27200-java 0 message 0", HMessage(1, "localhost/127.0.0.1:27200",
                                                                      "java 0 message 0")),
    ("MESSAGE-7-/127.0.0.1:5003-", HMessage(7, "/127.0.0.1:5003", "")),
    # the from ends at the first ':<digits>-': a host may hold '-' and '/', the text ':5-' and '-'
    ("MESSAGE-3-my-host/10.0.0.2:5000-a:5-b-c", HMessage(3, "my-host/10.0.0.2:5000", "a:5-b-c")),
    ("MESSAGE-3-h:5000-MESSAGE-4-h:5000-x", HMessage(3, "h:5000", "MESSAGE-4-h:5000-x")),
    ("ACK-9-my-host/10.0.0.2:5000", HAck(9, "my-host/10.0.0.2:5000")),
    ("JOIN-2-/10.0.0.2:5000", HJoin(2, "/10.0.0.2:5000")),
    ("LEAVE-2-10.0.0.2:5000", HLeave(2, "10.0.0.2:5000")),
    ("HEARTBEAT-40-10.0.0.2:5000", HHeartbeat(40, "10.0.0.2:5000")),
    ("MESSAGE-1-h:1-ünïcode ✓", HMessage(1, "h:1", "ünïcode ✓")),
])
def test_parse_and_format_round_trip(line, frame):
    assert parse_line(line) == frame
    assert format_frame(frame) == line


@pytest.mark.parametrize("line, says", [
    ("", "not a handout frame"),
    ("HELLO-1-h:1", "not a handout frame"),
    ("MESSAGE-x-h:1-t", "not a handout MESSAGE"),
    ("MESSAGE-1-h-t", "not a handout MESSAGE"),  # no port
    ("MESSAGE-1-h:1", "not a handout MESSAGE"),  # no text field
    ("ACK-1-h", "not a handout ACK"),
    ("ACK-1-h:1-extra", "not a handout ACK"),
    ("ACK--h:1", "not a handout ACK"),
    ("ACK-99999999999999999999-h:1", "not a handout ACK"),  # over 19 digits
    ("ACK-9999999999999999999-h:1", "bad clock"),  # over a Java long
    ("ACK-1-h:70000", "bad from"),
    ("JOIN-1-:5000", "not a handout JOIN"),
])
def test_bad_lines_are_named(line, says):
    with pytest.raises(FrameError, match=says):
        parse_line(line)


def test_a_text_with_a_line_break_is_refused():
    with pytest.raises(FrameError, match="line break"):
        HMessage(1, FA, "two\nlines")
    with pytest.raises(FrameError, match="line break"):
        HandoutCore(A, FA, NEIGHBORS).send("a\rb")


@pytest.mark.parametrize("origin, pid", [
    ("localhost/127.0.0.1:5003", "127.0.0.1:5003"), ("/127.0.0.1:5003", "127.0.0.1:5003"),
    ("127.0.0.1:5003", "127.0.0.1:5003"), ("localhost:5003", "127.0.0.1:5003"),
    ("my-host.lan/10.0.0.2:5000", "10.0.0.2:5000"), ("not an address:5", None),
])
def test_every_from_form_names_its_neighbor(origin, pid):
    assert origin_pid(origin) == pid


def test_java_from_is_what_java_prints():
    assert java_from("127.0.0.1", 5003) == "localhost/127.0.0.1:5003"
    assert java_from("10.0.0.2", 5003) == "/10.0.0.2:5003"
    assert java_from("0.0.0.0", 5003, "10.0.0.2") == "10.0.0.2:5003"
    assert java_from("0.0.0.0", 5003, "box/10.0.0.2:5003") == "box/10.0.0.2:5003"


# -- the rule ----------------------------------------------------------------------------------------
def lines(core: HandoutCore) -> list[tuple[str, tuple[str, ...]]]:
    return [(format_frame(s.frame), s.to) for s in core.ready().sends]


def delivered(core: HandoutCore) -> list[str]:
    return [f"{d.clock}-{d.origin}-{d.text}" for d in core.ready().deliveries]


def test_own_message_goes_to_every_neighbor_itself_included_and_waits_for_its_return():
    core = HandoutCore(A, FA, NEIGHBORS)
    core.send("hello")
    assert lines(core) == [(f"MESSAGE-1-{FA}-hello", (A, B, C))]
    assert core.backlog() == 0  # queued only when it comes back through the listener
    core.receive(parse_line(f"MESSAGE-1-{FA}-hello"))
    assert lines(core) == [(f"ACK-1-{FA}", (A, B, C))]  # acknowledged to everyone, itself too


def test_n_acks_own_included_then_delivery():
    core = HandoutCore(B, FB, NEIGHBORS)
    core.receive(HMessage(1, FA, "m"))
    for i in range(2):
        core.receive(HAck(1, FA))
        assert delivered(core) == []
        assert core.status().pending[0].acks == i + 1
    core.receive(HAck(1, FA))  # the third of n = 3 (one of them this peer's own ACK)
    out = core.ready().deliveries
    assert [(d.index, d.clock, d.origin, d.pid, d.text, d.acks) for d in out] == [(1, 1, FA, A, "m", 3)]


def test_premature_ack_reserves_the_entry_and_the_message_fills_it():
    core = HandoutCore(B, FB, NEIGHBORS)
    for _ in range(3):
        core.receive(HAck(4, FC))
    st = core.status()
    assert [(p.line, p.reserved, p.acks, p.needed) for p in st.pending] == [(f"ACK-4-{FC}", True, 3, 3)]
    assert delivered(core) == []  # no body yet
    core.receive(HMessage(4, FC, "late body"))
    assert delivered(core) == [f"4-{FC}-late body"]


def test_head_only_then_cascade():
    core = HandoutCore(A, FA, NEIGHBORS)
    core.receive(HMessage(1, FB, "head"))
    core.receive(HMessage(2, FC, "second"))
    core.receive(HMessage(3, FA, "third"))
    for _ in range(3):
        core.receive(HAck(2, FC))
        core.receive(HAck(3, FA))
    assert delivered(core) == []  # fully acknowledged, but behind the head
    core.receive(HAck(1, FB))
    core.receive(HAck(1, FB))
    assert delivered(core) == []
    core.receive(HAck(1, FB))
    assert delivered(core) == [f"1-{FB}-head", f"2-{FC}-second", f"3-{FA}-third"]


def test_ties_are_broken_by_from_as_written_as_java_compares_strings():
    # '/127...' < '127...' < 'localhost/...' as strings, whatever the ports
    core = HandoutCore(A, FA, NEIGHBORS)
    for f in (FA, FC, FB):
        core.receive(HMessage(5, f, f"from {f}"))
    for f in (FA, FC, FB):
        for _ in range(3):
            core.receive(HAck(5, f))
    assert delivered(core) == [f"5-{FB}-from {FB}", f"5-{FC}-from {FC}", f"5-{FA}-from {FA}"]


def test_lamport_clock_moves_on_receive():
    core = HandoutCore(A, FA, NEIGHBORS)
    core.receive(HMessage(10, FB, "x"))
    assert core.clock == 11
    assert format_frame(core.send("y")) == f"MESSAGE-12-{FA}-y"


def test_a_late_ack_does_not_block_the_queue():
    core = HandoutCore(A, FA, NEIGHBORS)
    core.receive(HMessage(1, FB, "a"))
    for _ in range(3):
        core.receive(HAck(1, FB))
    assert delivered(core) == [f"1-{FB}-a"]
    core.receive(HAck(1, FB))  # a fourth (a repeated ACK): must not reserve an entry nobody fills
    core.receive(HMessage(2, FC, "b"))
    for _ in range(3):
        core.receive(HAck(2, FC))
    assert delivered(core) == [f"2-{FC}-b"]
    assert core.status().dropped == {STALE_LATE_ACK: 1}


def test_a_message_behind_a_delivered_one_is_reported_not_queued():
    core = HandoutCore(A, FA, NEIGHBORS)
    core.receive(HMessage(5, FB, "a"))
    for _ in range(3):
        core.receive(HAck(5, FB))
    core.ready()
    core.receive(HMessage(2, FC, "too late"))
    ready = core.ready()
    assert ready.deliveries == [] and core.backlog() == 0
    assert [r for r, line in ready.drops if "arrived after" in line] == ["late-message"]


def test_a_duplicate_message_is_not_queued_twice():
    core = HandoutCore(A, FA, NEIGHBORS)
    core.receive(HMessage(1, FB, "a"))
    core.receive(HMessage(1, FB, "a"))
    assert core.backlog() == 1 and core.status().dropped == {"duplicate-message": 1}


def test_membership_frames_in_a_static_group_are_reported():
    core = HandoutCore(A, FA, NEIGHBORS)
    core.receive(HJoin(1, FB))
    assert core.status().dropped == {"membership-in-static": 1}
    assert core.needed(5) == 3


# -- dynamic: JOIN, LEAVE, HEARTBEAT -----------------------------------------------------------------
def test_dynamic_ack_count_follows_the_joined_set():
    core = HandoutCore(A, FA, NEIGHBORS, dynamic=True, now=0.0)
    core.join()
    assert lines(core) == [(f"JOIN-1-{FA}", (A, B, C))]
    assert core.needed(2) == 1  # alone
    core.receive(HJoin(3, FB), now=0.1)
    assert lines(core) == [(f"JOIN-1-{FA}", (B,))]  # answered with our own join clock
    assert core.needed(3) == 1 and core.needed(4) == 2  # B counts for messages sent after it joined
    core.receive(HJoin(3, FB), now=0.2)
    assert lines(core) == []  # an idempotent JOIN is not answered again
    core.receive(HMessage(5, FB, "m"), now=0.3)
    core.receive(HAck(5, FB))
    assert delivered(core) == []
    core.receive(HAck(5, FB))
    assert delivered(core) == [f"5-{FB}-m"]
    core.receive(HLeave(9, FB), now=0.4)
    assert core.needed(20) == 1


def test_dynamic_a_silent_member_counts_as_left_after_the_timeout():
    core = HandoutCore(A, FA, NEIGHBORS, dynamic=True, heartbeat=1.0, timeout=5.0, now=0.0)
    core.join()
    core.receive(HJoin(2, FC), now=0.0)
    core.ready()
    core.receive(HMessage(3, FA, "waits for C"), now=0.5)
    core.receive(HAck(3, FA))
    core.tick(1.0)
    beats = [ln for ln, _ in lines(core) if ln.startswith("HEARTBEAT")]
    assert beats == [f"HEARTBEAT-4-{FA}"]
    core.receive(HHeartbeat(3, FC), now=3.0)
    core.tick(7.9)
    assert C in core.joined and delivered(core) == []
    core.tick(8.0)  # 5 s after C's last heartbeat
    assert C not in core.joined
    assert delivered(core) == [f"3-{FA}-waits for C"]  # needs one ACK now, its own


def test_dynamic_messages_from_before_the_join_are_acknowledged_not_delivered():
    core = HandoutCore(A, FA, NEIGHBORS, dynamic=True)
    core.receive(HMessage(7, FB, "old"))  # clock 8 now
    core.join()  # joins at 9
    core.receive(HMessage(8, FC, "before the join"))
    out = lines(core)
    assert (f"ACK-8-{FC}", (A, B, C)) in out
    assert core.backlog() == 0 and core.status().dropped[BEFORE_JOIN] == 2


def test_dynamic_a_stranger_is_named_and_ignored():
    core = HandoutCore(A, FA, NEIGHBORS, dynamic=True)
    core.join()
    core.receive(HJoin(2, "/10.9.9.9:4000"))
    assert core.status().dropped == {"stranger": 1} and set(core.joined) == {A}
