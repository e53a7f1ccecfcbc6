"""A one-way cut in the network lab (issue 25, hole 2): four peers in their own network namespaces;
then every packet from D to B is dropped at the switch (D still reaches A and C, B still reaches D).
B stops hearing D and tells the coordinator A, which removes D; the group goes on and the logs name
the pair. Skipped, with the reason, where the lab cannot run (not root, no namespaces)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tom.tools.netlab.network import LabNetwork, LabUnavailable, check_available
from tom.tools.peers import PeerCommand, PeerGroup, PeerProcess, write_neighbors

try:
    check_available()
    UNAVAILABLE = None
except LabUnavailable as e:
    UNAVAILABLE = str(e)

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(UNAVAILABLE is not None,
                                                  reason=f"network lab unavailable: {UNAVAILABLE}")]

PORT = 7100
FAST = ("--heartbeat", "0.2", "--timeout", "1.5")


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def wait(what, deadline: float, why: str, logs: dict[int, Path]) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if what():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out: {why}\n" + "\n".join(f"--- {i}\n{p.read_text(errors='replace')[-3000:]}"
                                                            for i, p in logs.items()))


def test_a_one_way_cut_removes_the_peer_one_member_cannot_hear(tmp_path: Path) -> None:
    with LabNetwork(4) as net:
        net.create()
        pids = {i: f"{net.address(i)}:{PORT}" for i in range(1, 5)}
        neighbors = write_neighbors(tmp_path / "neighbors.txt", pids.values())
        outs = {i: tmp_path / f"out-{i}.jsonl" for i in pids}
        logs = {i: tmp_path / f"log-{i}.txt" for i in pids}
        with PeerGroup(grace=0) as group:
            for i in pids:
                cmd = PeerCommand(neighbors, outs[i], PORT, host=net.address(i), extra=FAST)
                group.start(i, PeerProcess(cmd.argv(), logs[i], prefix=net.enter(str(i))))
            group.wait_ready(timeout=30)

            def members(i: int) -> set[str]:
                views = [r for r in records(outs[i]) if r["kind"] == "view"]
                return set(views[-1]["members"]) if views else set()

            wait(lambda: all(members(i) == set(pids.values()) for i in pids), 30, "the group of 4 formed", logs)
            net.cut_one_way(1, src=4, dst=2)  # D's packets never reach B
            sent = []
            for k in range(10):
                for i in (1, 2, 3):
                    text = f"{i}-{k}"
                    sent.append(text)
                    assert group[i].send([text])
                time.sleep(0.2)
            a, b, d = pids[1], pids[2], pids[4]
            wait(lambda: all(d not in members(i) for i in (1, 2, 3)), 40, "A, B and C removed D", logs)
            wait(lambda: all({r["text"] for r in records(outs[i]) if r["kind"] == "message"} >= set(sent)
                             for i in (1, 2, 3)), 30, "A, B and C delivered everything", logs)
            log_a, log_b = logs[1].read_text(), logs[2].read_text()
            assert f"{b} cannot reach {d}: removing {d}" in log_a, log_a
            assert f"{b} cannot reach {d}: telling {a}" in log_b, log_b
            for i in pids:
                assert "Traceback" not in logs[i].read_text()
