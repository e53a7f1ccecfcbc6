"""Deterministic simulation: N cores over FIFO links with random delays agree on one total order."""

import os

import pytest

from simnet import Network, random_workload
from orders import check_causal, check_same_numbers, check_sequencer_numbers
from guarantees import first_seed
from tom.core import ORDERS

SEEDS = int(os.environ.get("TOM_SIM_SEEDS", "500"))


def run_seed(seed: int, order: str = "lamport") -> None:
    """One seeded static run in ``order``; the same seed draws the same group, delays and workload in
    every order."""
    import random

    rng = random.Random(seed)
    n = rng.randint(3, 7)
    net = Network.static(n, seed, max_delay=rng.choice([0.01, 0.5, 3.0]), batching=seed % 2 == 1, order=order)
    sent = random_workload(net, messages=rng.randint(1, 40), span=rng.choice([0.1, 5.0, 50.0]))
    net.run()
    where = f"{order} seed {seed}"
    expected = sorted(text for _, text in sent)
    sequences = {pid: [(d.clock, d.pid, d.text) for d in ds] for pid, ds in net.delivered.items()}
    first = next(iter(sequences.values()))
    for pid, seq in sequences.items():
        assert sorted(t for _, _, t in seq) == expected, f"{where}: {pid} did not deliver each message once"
        if order == "causal":
            check_causal(net.delivered[pid], where)
        else:
            assert seq == first, f"{where}: {pid} delivered in another order"
        if order == "sequencer":
            check_sequencer_numbers(net.delivered[pid], where)
        assert [d.index for d in net.delivered[pid]] == list(range(1, len(seq) + 1))
    if order == "sequencer":
        check_same_numbers(net.delivered, where)
    for core in net.cores.values():
        assert len(core.order) == 0, f"{where}: entries left pending"
        assert core.stats["divergence_alarms"] == 0, f"{where}: a false divergence alarm {core.divergence.alarms}"


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("chunk", range(5))
def test_random_schedules_agree(chunk, order):
    """Seeds are split in chunks so a failure names a small range; the message names order and seed."""
    for seed in range(chunk, SEEDS, 5):
        run_seed(seed, order)


def test_simulation_detects_a_non_fifo_network():
    """The checker can fail: with FIFO broken (a frame may overtake), some seed diverges or stalls."""
    def diverges_or_stalls(seed: int) -> bool:
        net = Network.static(4, seed, max_delay=3.0)
        net.fifo = False
        random_workload(net, messages=30, span=1.0)
        net.run()
        seqs = [[(d.clock, d.pid) for d in ds] for ds in net.delivered.values()]
        return any(s != seqs[0] for s in seqs) or any(len(c.order) for c in net.cores.values())

    assert first_seed(range(200), diverges_or_stalls) is not None
