"""Which scripted frame may go now (tom.grade.links): pauses, barriers, the calm rule, FIFO per link."""

from tom.grade.links import Switchboard

TOOL_FROM = "localhost/127.0.0.1:20001"
B_FROM = "localhost/127.0.0.1:20000"


def board():
    return Switchboard("T", TOOL_FROM, calm_wait=1.0)


def test_a_link_sends_its_head_only_and_in_order():
    sb = board()
    link = sb.queue("B", "C", "MESSAGE-1-x:1-a", 0.0)
    sb.queue("B", "C", "MESSAGE-2-x:1-b", 0.0)
    assert sb.blocked(link, 0.0) is None
    assert sb.sent(link) == "MESSAGE-1-x:1-a"
    assert sb.sent(link) == "MESSAGE-2-x:1-b"
    assert sb.blocked(link, 0.0) == "empty"


def test_pause_and_barriers_hold_the_head_and_everything_behind_it():
    sb = board()
    link = sb.queue("C", "T", f"MESSAGE-5-{B_FROM}-x", 0.0)
    sb.queue("C", "T", f"ACK-5-{B_FROM}", 0.0)
    sb.pause("C", "T")
    assert sb.blocked(link, 0.0) == "paused"
    sb.resume("C", "T")
    sb.hold("C", "T", r"^ACK-")
    assert sb.blocked(link, 0.0) is None
    sb.sent(link)
    assert sb.blocked(link, 0.0).startswith("held")
    sb.lift("C", "T")
    assert sb.blocked(link, 0.0) is None


def test_calm_an_ack_waits_for_its_message_to_reach_the_tool():
    sb = board()
    ack = sb.queue("C", "T", f"ACK-5-{B_FROM}", 0.0)
    assert sb.blocked(ack, 0.0) == "waits for its MESSAGE to reach the tool"
    message = sb.queue("B", "T", f"MESSAGE-5-{B_FROM}-x", 0.0)
    sb.sent(message)
    assert sb.blocked(ack, 0.0) is None


def test_calm_off_lets_a_premature_ack_go():
    sb = board()
    ack = sb.queue("C", "T", f"ACK-5-{B_FROM}", 0.0)
    ack.calm = False
    assert sb.blocked(ack, 0.0) is None


def test_calm_an_ack_of_the_tools_own_message_waits_for_the_tools_ack_or_a_while():
    sb = board()
    ack = sb.queue("B", "T", f"ACK-1-{TOOL_FROM}", 10.0)
    assert sb.blocked(ack, 10.5) is not None
    assert sb.blocked(ack, 11.0) is None  # calm_wait passed
    sb2 = board()
    ack2 = sb2.queue("B", "T", f"ACK-1-{TOOL_FROM}", 10.0)
    sb2.heard_from_tool(f"ACK-1-{TOOL_FROM}")
    assert sb2.blocked(ack2, 10.0) is None


def test_a_line_that_is_no_frame_is_not_held_by_calm():
    sb = board()
    assert sb.blocked(sb.queue("B", "T", "HELLO", 0.0), 0.0) is None
