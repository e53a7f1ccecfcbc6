"""`tom check --restart`: durable peers that crash at any point and start again from their data folders
(`tom.check.restart`). A restarted peer catches up and ends where the others do; three bugs planted in
the code ``tom peer`` runs (`tom.peer.processor.persist_then_send`, `tom.peer.durable.not_in_order`,
`tom.peer.durable.answer`) are each found with a short counterexample, and the unmodified code passes
the same configuration; a counterexample's three forms."""

from __future__ import annotations

import pytest

from tom.check import world as check_world
from tom.check.cli import main as check_main
from tom.check.explore import replay, search, shrink
from tom.check.trace import run_transcript, shiviz, transcript
from tom.check.world import Config, Step, World
from tom.peer import durable, processor

pytestmark = pytest.mark.pure  # (tom check walks and pickles the core: interpreted)


@pytest.fixture(autouse=True)
def fresh_cache():
    """Local steps are memoised per state: a planted bug must not meet the real code's results."""
    check_world._cache.clear()
    yield
    check_world._cache.clear()


ONE_MESSAGE_FROM_B = Config("lamport", 3, 1, senders=(2,), restart=(1,), ticks=0)
"""A restarted before B's message: it must catch it up (stuck peers see no time pass: `--ticks 0`)."""

ONE_MESSAGE_FROM_A = Config("lamport", 3, 1, senders=(1,), restart=(1,), ticks=0)
"""A restarted after its own message: it must not send it again."""

WHOLE_GROUP = Config("lamport", 3, 1, senders=(3,), crash=(1, 2, 3), restart=(1, 2), ticks=5)
"""Every peer may crash (inside a step too); A and B start again and found the group again."""
DELIVERED_AT_C = [Step.parse(s) for s in ("send 3", "deliver 3>1", "deliver 3>2", "deliver 1>3", "deliver 2>3")]
"""C's message delivered at C (A's and B's ACKs in), at nobody else yet."""
ALL_DOWN = DELIVERED_AT_C + [Step.parse(s) for s in ("crash 1 mid-step", "crash 2 mid-step", "crash 3", "restart 1",
                                                      "restart 2")]
"""... then A and B killed inside the step that took it (only with the bug is that another point than
after the step), C killed, A and B started again: every schedule of their founding from there."""


def test_a_restarted_peer_catches_up_what_it_missed_and_ends_with_the_others_file():
    world, _ = World.initial(ONE_MESSAGE_FROM_B)
    for step in ("send 2", "restart 1"):
        world, _ = world.successor(Step.parse(step))
    while (steps := world.steps()):
        world, _ = world.successor(steps[0])
    logs = world.logs
    assert logs[1] == logs[2] == logs[3]
    assert [e[3] for e in logs[1] if e[0] == "m"] == ["m2.1"]
    assert [e[1] for e in logs[1] if e[0] == "v"] == [1, 2]  # view 2 removes A's first run and admits its second
    core = world.locals[1].core()
    assert core.incarnation == 101 and core.check_shell.recovery.got >= 1  # caught up, from B


@pytest.mark.parametrize("config", [ONE_MESSAGE_FROM_B, ONE_MESSAGE_FROM_A], ids=["from B", "from A"])
def test_one_restart_of_three_peers_is_exhaustive_and_clean(config):
    r = search(config)
    assert r.exhaustive and r.found is None and r.terminal > r.tick_bounded


def _first_found(config, prefix=(), strategy="bfs"):
    r = search(config, strategy, max_states=200_000, prefix=list(prefix))
    assert r.found is not None, "the planted bug was not found"
    return shrink(config, r.found, budget=10)


def test_a_catch_up_that_skips_one_message_is_found(monkeypatch):
    served = durable.answer

    def skipping(records):  # (the member serving a catch-up leaves out the first message)
        k = next((i for i, r in enumerate(records) if '"kind":"message"' in r), None)
        return served(records if k is None else records[:k] + records[k + 1:])

    monkeypatch.setattr(durable, "answer", skipping)
    found = _first_found(ONE_MESSAGE_FROM_B)
    assert found.violation.name == "one sequence" and len(found.steps) <= 25
    assert Step.parse("restart 1") in found.steps


def test_the_de_dup_turned_off_sends_a_delivered_text_again_and_is_found(monkeypatch):
    monkeypatch.setattr(durable, "not_in_order", lambda accepted, base, own: list(accepted))
    found = _first_found(ONE_MESSAGE_FROM_A)
    assert found.violation.name == "no duplicate text" and len(found.steps) <= 35
    assert "m1.1 twice" in str(found.violation)


def test_an_ack_sent_before_its_message_is_durable_is_found(monkeypatch):
    def send_then_persist(ready, d, route, now, fail):
        if ready.sends:
            route(ready.sends)
        if d is not None:
            d.persist(ready.persist)
            d.sync(now)

    monkeypatch.setattr(processor, "persist_then_send", send_then_persist)
    found = _first_found(WHOLE_GROUP, ALL_DOWN, "dfs")
    assert found.violation.name == "one sequence" and len(found.steps) <= 45
    assert "(2, 3) m3.1" in str(found.violation)  # C delivered it; A and B founded view 2 without it


def test_without_the_bug_no_crash_falls_between_an_ack_and_its_message_on_the_disk():
    world, _ = replay(WHOLE_GROUP, DELIVERED_AT_C)[:2]
    assert Step.parse("crash 1 mid-step") not in world.steps()  # (persisted before the ACK went: no such point)


def test_the_unmodified_code_passes_the_whole_group_configuration_bounded():
    r = search(WHOLE_GROUP, "dfs", max_states=30_000, prefix=list(DELIVERED_AT_C))
    assert r.found is None and r.states >= 30_000


FOUNDER_DIES = Config("lamport", 3, 1, senders=(3,), crash=(1, 3), restart=(1, 2), ticks=5)
"""The whole group down (C, which alone delivered its message, stays down); A and B start again and
found view 2, A the founder; A may crash again (a peer crashes once: before its restart or after)."""
FOUNDER_DIES_C_BACK = Config("lamport", 3, 1, senders=(3,), crash=(1, 3), restart=(1, 2, 3), ticks=5)
"""... and C may start again too."""
ALL_RESTARTED = DELIVERED_AT_C + [Step.parse(s) for s in ("crash 3", "restart 1", "restart 2")]


def test_a_founder_that_dies_before_it_ends_the_last_view_loses_nothing_exhaustive():
    """Found by this model (37 steps): B, whose founder A died before answering, released view 2 without
    C's message, which B's pending.log held. B now writes nothing until a view names who ends view 1."""
    r = search(FOUNDER_DIES, "dfs", prefix=list(ALL_RESTARTED))
    assert r.exhaustive and r.found is None and r.terminal > 0


def _steps(text: str) -> list[Step]:
    """``"deliver 1>2*3, crash 1"``: steps, a run of one written once with its count."""
    out: list[Step] = []
    for part in text.split(", "):
        step, _, count = part.partition("*")
        out += [Step.parse(step)] * int(count or 1)
    return out


FOUNDED_BY_A_THEN_A_DIES = _steps(
    "send 3, crash 3, restart 1, restart 2, tick 2*5, tick 1*4, restart 3, tick 3*5, deliver 3>2*7, deliver 3>1*7, "
    "deliver 2>3, deliver 2>1, tick 1, deliver 2>1*6, deliver 1>3*4, deliver 3>1, deliver 1>2*8, deliver 2>1, "
    "deliver 1>3, crash 1")
"""A, B and C all start again and found view 2, A the founder; B and C ask A last, and A crashes
before it answers (a counterexample of the model before the view change's coordinator took over)."""


def test_when_a_view_change_removes_the_founder_its_coordinator_ends_the_last_view_exhaustive():
    r = search(FOUNDER_DIES_C_BACK, "bfs", prefix=FOUNDED_BY_A_THEN_A_DIES)
    assert r.exhaustive and r.found is None and r.terminal > r.tick_bounded


def test_a_restart_counterexample_is_written_three_ways_and_replays(monkeypatch, tmp_path):
    monkeypatch.setattr(durable, "not_in_order", lambda accepted, base, own: list(accepted))
    found = _first_found(ONE_MESSAGE_FROM_A)
    text = transcript(ONE_MESSAGE_FROM_A, found)
    assert "restart=A" in text and "\nrestart A\n----\nA stops and starts again from its data folder" in text
    rows = run_transcript(text)
    assert rows[-1][0] == "check" and rows[-1][2][0].startswith("no duplicate text")
    assert all(want == got for cmd, want, got in rows if cmd != "check")
    assert "restart" in shiviz(ONE_MESSAGE_FROM_A, found)
    path = tmp_path / "c.txt"
    path.write_text(text)
    assert check_main(["--replay", str(path)]) == 1


def test_restart_steps_parse_back():
    for text in ("restart 1", "restart 2 mid-step", "crash 3 mid-step"):
        assert str(Step.parse(text)) == text
    _, events, v = replay(ONE_MESSAGE_FROM_A, [Step.parse("send 1"), Step.parse("restart 1")])
    assert v is None and events[1][0].note == "restart"
