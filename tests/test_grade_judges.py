"""Each rule's judge (tom.grade.judges) on tiny evidence: it passes the right thing and names the wrong one."""

from tom.grade.judges import JUDGES, Evidence
from tom.grade.toolfile import Delivered

B, C, T = "localhost/127.0.0.1:20000", "localhost/127.0.0.1:20002", "localhost/127.0.0.1:20001"


def out(*items):
    return [Delivered(clock, sender, text, 3, i) for i, (clock, sender, text) in enumerate(items, 1)]


def judge(test, tool_out, **marks):
    marks.setdefault("lines", {})
    return JUDGES[test](Evidence(test, tool_out, marks))


def test_one_each_way():
    assert judge("one-each-way", out((1, T, "T1"), (3, B, "B1")), order=["T1", "B1"]).verdict == "pass"
    bad = judge("one-each-way", out((1, T, "T1")), order=["T1", "B1"])
    assert bad.verdict == "fail" and "B1 not delivered" in bad.got
    assert judge("one-each-way", None, order=["T1", "B1"]).got == "no output file"


def test_clock():
    marks = dict(received_clock=800, received=f"MESSAGE-800-{B}-B1")
    assert judge("clock", [], tool_message=f"MESSAGE-802-{T}-T1", tool_clock=802, **marks).verdict == "pass"
    bad = judge("clock", [], tool_message=f"MESSAGE-2-{T}-T1", tool_clock=2, **marks)
    assert bad.verdict == "fail" and "> 800" in bad.expected and bad.got.startswith("MESSAGE-2-")
    assert judge("clock", [], tool_message=None, **marks).got == "none came"


def test_tie():
    marks = dict(order=["B1", "C1"], clock=20, small_from=B)
    assert judge("tie", out((20, B, "B1"), (20, C, "C1")), **marks).verdict == "pass"
    bad = judge("tie", out((20, C, "C1"), (20, B, "B1")), **marks)
    assert bad.verdict == "fail" and "C1 at line 1 before B1 at line 2" in bad.got


def test_premature_ack():
    assert judge("premature-ack", out((1, B, "B1")), message="B1", ack_lead=0.7).verdict == "pass"
    bad = judge("premature-ack", out(), message="B1", ack_lead=0.7, waited=5.0)
    assert bad.verdict == "fail" and bad.got.startswith("nothing after 5 s")


def test_all_acks():
    good = out((5, C, "C1"), (10, B, "B1"))
    assert judge("all-acks", good, order=["C1", "B1"], held="B1", early=[]).verdict == "pass"
    early = judge("all-acks", good, order=["C1", "B1"], held="B1", early=["B1"], early_at=1.4)
    assert early.verdict == "fail" and "B1 delivered before it" in early.got
    swapped = judge("all-acks", out((10, B, "B1"), (5, C, "C1")), order=["C1", "B1"], held="B1", early=[])
    assert swapped.verdict == "fail"


def test_head():
    good = out((5, B, "B1"), (8, C, "C1"))
    assert judge("head", good, order=["B1", "C1"], held="C1", early=[]).verdict == "pass"
    # delivered early but after its head (a tool counting n-1 ACKs): not this rule's fault
    assert judge("head", good, order=["B1", "C1"], held="C1", early=["B1", "C1"]).verdict == "pass"
    assert judge("head", good, order=["B1", "C1"], held="C1", early=["C1"]).verdict == "fail"


def test_cascade():
    all4 = out((5, B, "B1"), (8, C, "C1"), (9, C, "C2"), (10, C, "C3"))
    assert judge("cascade", all4, order=["B1", "C1", "C2", "C3"]).verdict == "pass"
    bad = judge("cascade", all4[:1], order=["B1", "C1", "C2", "C3"], waited=5.0)
    assert bad.verdict == "fail" and bad.got.startswith("C1, C2, C3 still undelivered")


def test_sends_acks():
    good = {B: {"B1": 1, "T1": 1}, C: {"B1": 1, "T1": 1}}
    both = out((1, B, "B1"), (3, T, "T1"))
    assert judge("sends-acks", both, acks=good, order=["B1", "T1"]).verdict == "pass"
    bad = judge("sends-acks", both, acks={**good, C: {"B1": 1, "T1": 0}}, order=["B1", "T1"])
    assert bad.verdict == "fail" and bad.got == "none" and C in bad.expected
    twice = judge("sends-acks", both, acks={**good, B: {"B1": 2, "T1": 1}}, order=["B1", "T1"])
    assert twice.got == "2 ACKs"


def test_load():
    order = ["B1", "T1", "C1"]
    assert judge("load", out((1, B, "B1"), (2, T, "T1"), (3, C, "C1")), order=order).verdict == "pass"
    assert "missing" in judge("load", out((1, B, "B1")), order=order).got
    bad = judge("load", out((1, B, "B1"), (3, C, "C1"), (2, T, "T1")), order=order)
    assert bad.verdict == "fail" and bad.expected.startswith("delivery 2 is T1")


def test_quit():
    ev = Evidence("quit", out((1, T, "T1")), {"order": ["T1"], "lines": {}}, quit_seconds=0.2)
    assert JUDGES["quit"](ev).verdict == "pass"
    ev.quit_seconds = None
    assert JUDGES["quit"](ev).got.startswith("still running")
