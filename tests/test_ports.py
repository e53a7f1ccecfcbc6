"""The ports the tools and the tests pick for peers: outside the kernel's ephemeral range (the local ends
of outgoing connections), and, for the suite's xdist workers, from a range of each worker's own, so that
two workers never pick the same port and a peer never finds its port taken by another's."""

from __future__ import annotations

import os
from collections import deque

import pytest
from procs import worker_port_range
from test_examples import free_run

from tom.errors import TomError
from tom.tools import peers
from tom.tools.peers import PORT_RANGE, free_ports, port_range


@pytest.fixture(autouse=True)
def nothing_handed_out(monkeypatch):
    """Each test starts with no port given lately (the tests narrow the range to a few ports)."""
    monkeypatch.setattr(peers, "_HANDED_OUT", deque(maxlen=512))


def ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return int(f.read().split()[0])


def test_by_default_the_ports_lie_below_the_ephemeral_range(monkeypatch):
    monkeypatch.delenv(PORT_RANGE, raising=False)
    low, high = port_range()
    assert 1024 <= low < high < ephemeral_low()
    assert all(low <= p <= high for p in free_ports(20))


def test_the_environment_narrows_the_range(monkeypatch):
    monkeypatch.setenv(PORT_RANGE, "25100-25119")
    assert port_range() == (25100, 25119)
    ports = free_ports(10)
    assert len(set(ports)) == 10 and all(25100 <= p <= 25119 for p in ports)


@pytest.mark.parametrize("value", ["25100", "x-y", "25119-25100", "80-90", "25100-70000"])
def test_a_malformed_range_is_one_line_naming_it(monkeypatch, value):
    monkeypatch.setenv(PORT_RANGE, value)
    with pytest.raises(TomError) as err:
        port_range()
    assert str(err.value) == f"{PORT_RANGE}={value!r} is not LOW-HIGH, two ports from 1024 to 65535, LOW first"


def test_the_workers_ranges_share_no_port_and_stay_below_the_ephemeral_range(monkeypatch):
    monkeypatch.setenv(PORT_RANGE, "25100-25119")  # a worker's own range does not shrink the next split
    for count in (1, 2, 4, 8):
        ranges = [tuple(map(int, worker_port_range(i, count).split("-"))) for i in range(count)]
        assert all(low <= high for low, high in ranges)
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))
        assert ranges[0][0] == 20000 and ranges[-1][1] < ephemeral_low()
        if count <= 4:  # as many as scripts/test runs: room for free_run's spacing
            assert all(high - low >= 2000 for low, high in ranges)


def test_an_xdist_worker_picks_from_its_own_range():
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        pytest.skip("the suite runs without xdist workers here (-n 0): no worker has a range")
    count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    assert os.environ[PORT_RANGE] == worker_port_range(int(worker.removeprefix("gw")), count)


def test_a_run_of_ports_for_the_examples_lies_in_the_range(monkeypatch):
    monkeypatch.setenv(PORT_RANGE, "25100-26200")
    for _ in range(50):
        base = free_run(3)
        assert 25100 <= base and base + 1000 + 2 <= 26200


def test_ports_handed_out_lately_are_not_handed_out_again_before_they_are_bound(monkeypatch):
    """Groups started one after another pick their ports before their peers bind them: 20 calls of 10
    from a range of 400 ports (a repeat all but certain by chance) share none."""
    monkeypatch.setenv(PORT_RANGE, "25100-25499")
    ports = [p for _ in range(20) for p in free_ports(10)]
    assert len(set(ports)) == 200


def test_tom_grade_picks_its_groups_ports_from_the_workers_range(monkeypatch):
    """`tom grade` starts its scripted peers and the student's tool on ports of its own: within a
    worker's range too, or another worker's group found its port taken ('Address already in use',
    a tool graded did-not-start)."""
    from tom.grade import ports as grade_ports

    monkeypatch.setattr(grade_ports, "_given", {})
    monkeypatch.setenv(PORT_RANGE, "23000-23040")
    for _ in range(5):
        got = grade_ports.allocate(4)
        assert all(23000 <= p <= 23040 for p in got), got
        grade_ports._given.clear()
