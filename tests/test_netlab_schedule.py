"""The lab's fault options, parsed into timed events, and the whole-order check of a restarted peer's
file (pure: no namespaces needed)."""

from __future__ import annotations

import pytest

from tom.errors import ConfigError
from tom.tools.netlab.__main__ import build_parser, check_numbers, make_schedule, normalize
from tom.tools.netlab.bpf import random_drop_program
from tom.tools.netlab.run import group_order, whole_order_problem
from tom.tools.netlab.schedule import (CutOneWay, Heal, Kill, LossOff, LossOn, Partition, Pause, Restart, Resume,
                                       Schedule, StartAgain, describe)


def events(*argv: str, peers: int = 5, duration: float = 20.0) -> list[tuple[float, object]]:
    args = build_parser().parse_args(normalize([*argv, "--peers", str(peers), "--duration", str(duration)]))
    return [(round(e.at, 6), e.action) for e in make_schedule(args).ordered()]


def test_partition_heal_loss_pause_kill_in_time_order() -> None:
    got = events("--partition", "1,2/3,4,5@30%", "--heal@60%", "--loss", "0.2:1-2@2s+10s",
                 "--pause", "3@40%", "--kill", "4@50%")
    link = frozenset({frozenset({1, 2})})
    assert got == [(2.0, LossOn(0, 0.2, link)), (6.0, Partition(((1, 2), (3, 4, 5)))), (8.0, Pause(3)),
                   (10.0, Resume(3)), (10.0, Kill(4)), (12.0, Heal()), (12.0, LossOff(0))]


def test_defaults_and_forms() -> None:
    all_links = events("--loss", "0.5", peers=3)
    assert all_links == [(0.0, LossOn(0, 0.5, frozenset({frozenset({1, 2}), frozenset({1, 3}),
                                                             frozenset({2, 3})})))]
    assert events("--loss", "1:3@1s", peers=3)[0][1] == LossOn(0, 1.0, frozenset({frozenset({1, 3}),
                                                                                  frozenset({2, 3})}))
    assert events("--partition", "1/2@5s+2s", "--partition", "2/1@60%", "--heal", "80%", peers=2) == [
        (5.0, Partition(((1,), (2,)))), (7.0, Heal()), (12.0, Partition(((2,), (1,)))), (16.0, Heal())]
    assert events("--kill", "2") == [(6.0, Kill(2))]
    assert events("--pause", "1@1s+3s") == [(1.0, Pause(1)), (4.0, Resume(1))]


def test_one_way_cuts_and_loss_rules_share_one_numbering() -> None:
    got = events("--loss", "0.1:1-2@1s+2s", "--cut-one-way", "4>2@25%+5s", "--cut-one-way", "1>3")
    assert got == [(1.0, LossOn(0, 0.1, frozenset({frozenset({1, 2})}))), (3.0, LossOff(0)),
                   (5.0, CutOneWay(1, 4, 2)), (6.0, CutOneWay(2, 1, 3)), (10.0, LossOff(1))]


@pytest.mark.parametrize("argv, says", [
    (["--cut-one-way", "2>2"], "cuts a peer from itself"),
    (["--cut-one-way", "2>9"], "not a peer number 1..5"),
    (["--cut-one-way", "2-3"], "not understood"),
    (["--partition", "1,2/3"], "peers 4,5 are on no side"),
    (["--partition", "1,2/2,3,4,5"], "named on two sides"),
    (["--partition", "1,2,3,4,5"], "at least two sides"),
    (["--partition", "1,2/3,4,6"], "not a peer number 1..5"),
    (["--heal", "50%"], "no partition before it"),
    (["--loss", "1.5"], "probability must be in (0, 1]"),
    (["--loss", "0.2:1-1"], "joins a peer to itself"),
    (["--loss", "0.2@90%+5s"], "ends after the workload"),
    (["--kill", "2@120%"], "after the workload ends"),
    (["--kill", "2@soon"], "not understood"),
    (["--kill", "2@1s", "--pause", "2@2s"], "killed before it is paused"),
    (["--kill", "1", "--kill", "2", "--kill", "3", "--kill", "4", "--kill", "5"], "must survive"),
    (["--restart", "9"], "not a peer number 1..5"),
    (["--restart", "2@soon"], "not understood"),
    (["--restart", "2>3"], "not understood"),
    (["--restart", "2@90%+5s"], "ends after the workload"),
    (["--kill", "2@1s", "--restart", "2@2s"], "killed before it is paused, killed or restarted again"),
    (["--pause", "2@1s+3s", "--restart", "2@2s"], "peer 2 is restarted at 2s while it is paused"),
    (["--restart", "2@1s+3s", "--pause", "2@2s"], "peer 2 is paused at 2s while it is down for a restart"),
    (["--restart", "2@1s+3s", "--kill", "2@2s"], "peer 2 is killed at 2s while it is down for a restart"),
    (["--restart", "2@1s+3s", "--restart", "2@3s"], "peer 2 is restarted at 3s while it is down for a restart"),
])
def test_bad_schedules_are_one_clear_error(argv: list[str], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        events(*argv)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_schedule_keeps_the_command_lines_order_on_ties() -> None:
    s = Schedule(3, 10.0)
    s.partition("1/2,3@5s")
    s.heal("5s")
    assert [type(e.action) for e in s.ordered()] == [Partition, Heal]


def test_drop_program_jumps_land_inside_it() -> None:
    for sources, p in ((["10.77.0.1"], 0.2), (["10.77.0.1", "10.77.0.9", "10.77.0.3"], 1.0)):
        count, *insns = random_drop_program(sources, p, 0x10002).split(",")
        assert int(count) == len(insns)
        for pc, insn in enumerate(insns):
            code, jt, jf, _k = map(int, insn.split())
            if code in (0x15, 0x35):
                assert pc + 1 + max(jt, jf) < len(insns)
        assert insns[-1] == "6 0 0 0" and "6 0 0 65538" in insns
    assert "4294963256" not in random_drop_program(["10.77.0.1"], 1.0, 0x10002)  # p = 1: no draw


def test_restart_kills_then_starts_again_after_two_seconds_by_default() -> None:
    assert events("--restart", "2") == [(6.0, Restart(2)), (8.0, StartAgain(2))]
    assert events("--restart", "3@1s+4s", "--restart", "1@25%") == [
        (1.0, Restart(3)), (5.0, StartAgain(3)), (5.0, Restart(1)), (7.0, StartAgain(1))]
    assert "SIGKILL peer 2" in describe(Restart(2)) and "started again" in describe(StartAgain(2))


def test_one_peer_takes_faults_one_after_another_and_a_restarted_peer_is_no_killed_one() -> None:
    # a pause, then a restart once it is resumed, then a kill once it runs again: no overlap (at one
    # instant the end of a fault comes first, whatever the options' order)
    assert events("--kill", "2@5s", "--restart", "2@3s+2s", "--pause", "2@1s+2s") == [
        (1.0, Pause(2)), (3.0, Resume(2)), (3.0, Restart(2)), (5.0, StartAgain(2)), (5.0, Kill(2))]
    # four of five killed and the fifth restarted: it comes back, so one peer survives
    got = events("--kill", "1", "--kill", "2", "--kill", "3", "--kill", "4", "--restart", "5@1s")
    assert [a for _, a in got][:2] == [Restart(5), StartAgain(5)]


def test_restart_needs_durable_peers() -> None:
    args = build_parser().parse_args(["--restart", "2", "--no-data"])
    with pytest.raises(ConfigError, match="--restart needs durable peers"):
        check_numbers(args)
    check_numbers(build_parser().parse_args(["--restart", "2"]))  # durable by default


def message(view: int, clock: int, pid: str, index: int, **more) -> dict:
    return {"kind": "message", "view": view, "clock": clock, "pid": pid, "index": index, **more}


def test_the_whole_order_check_names_a_gap_a_duplicate_and_a_hole_in_the_numbering() -> None:
    a = [message(1, 1, "p1", 1), message(1, 2, "p2", 2), message(2, 3, "p1", 3)]
    b = [message(1, 1, "p1", 1), message(1, 2, "p2", 2, caught_up=True), message(2, 3, "p1", 3)]
    order = group_order([a, b])
    assert order == [(1, 1, "p1"), (1, 2, "p2"), (2, 3, "p1")]
    assert whole_order_problem(b, order) is None
    assert "differ from message 2" in whole_order_problem([a[0], {**a[2], "index": 2}], order)
    assert "twice" in whole_order_problem([*a, {**a[2], "index": 4}], order)
    assert "1..n" in whole_order_problem([a[0], a[1], {**a[2], "index": 5}], order)
    gap = {"kind": "gap", "index": 2, "reason": "no member still holds them"}
    assert "no member still holds them" in whole_order_problem([a[0], gap], order)
