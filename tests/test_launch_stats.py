"""The launch script's line on what the delay made happen speaks the run's order."""

from tom.tools.launch import stats_line


def test_the_stats_line_names_what_each_order_waits_for():
    assert stats_line("lamport", 3, 7) == ("premature ACKs (an ACK before its message): 3; messages held "
                                           "behind a blocked head, then released with it: 7")
    assert stats_line("sequencer", 0, 7) == "messages held behind a missing sequence number, then released with it: 7"
    assert stats_line("causal", 1, 2).endswith("behind a missing causal predecessor, then released with it: 2")
