"""The in-memory network the simulations and transcripts run on (simnet.py): its faults do what they
say, and a run is a function of its seed."""

from guarantees import check
from simnet import Network, random_scenario


def texts(net: Network, pid: str) -> list[str]:
    return [d.text for d in net.delivered[pid] if hasattr(d, "text")]


def test_a_seed_replays_exactly():
    def run():
        net = random_scenario(7, partitions=True)
        return [(n.pid, n.incarnation, n.gone, list(n.delivered)) for n in net.history], net.log

    assert run() == run()


def test_an_isolated_static_peer_holds_everyone_back_until_the_heal():
    net = Network.static(3, seed=1, max_delay=0.1)
    a, b, c = net.pids
    net.isolate(c)
    net.schedule_send(0.0, a, "x")
    net.run()
    assert [texts(net, p) for p in net.pids] == [[], [], []]  # C's ACK is missing everywhere
    net.heal()
    net.run()
    assert [texts(net, p) for p in net.pids] == [["x"], ["x"], ["x"]]


def test_a_dropping_link_loses_frames_and_mends():
    net = Network.static(2, seed=1, max_delay=0.1)
    a, b = net.pids
    net.drop(a, b)
    net.schedule_send(0.0, a, "lost")
    net.run()
    assert texts(net, b) == [] and len(net.cores[a].order) == 1  # A waits for B's ACK
    net.drop(a, b, 0)
    net.schedule_send(net.now, a, "kept")
    net.run()
    # B never knew of the lost one, and its mark for the second covers the first: the two disagree
    # (why no link of TOM may lose a frame)
    assert texts(net, b) == ["kept"] and texts(net, a) == ["lost", "kept"]


def test_a_held_link_keeps_its_frames_in_order_until_released():
    net = Network.static(2, seed=1, max_delay=0.1)
    a, b = net.pids
    net.hold(a, b)
    for i, at in enumerate((0.0, 0.01, 0.02)):
        net.schedule_send(at, a, f"m{i}")
    net.run()
    assert texts(net, b) == []
    net.release(a, b)
    net.run()
    assert texts(net, a) == texts(net, b) == ["m0", "m1", "m2"]


def test_a_cut_tells_both_cores_and_a_heal_reconnects_them():
    net = Network.fixed(3)
    for pid in net.pids:
        net.start(pid)
    net.run(5, exact=True)
    a, b, c = net.pids
    net.cut(a, b)
    assert b not in net.cores[a].peers.links and a not in net.cores[b].peers.links and c in net.cores[a].peers.links
    net.send(a, "hello")
    net.run(6, exact=True)
    assert [texts(net, p) for p in net.pids] == [[], [], []] and net.now == 6  # the frame to B waits
    net.heal()
    net.run(8, exact=True)
    assert [texts(net, p) for p in net.pids] == [["hello"]] * 3
    check(net)


def test_without_randomness_a_run_is_the_same_every_time():
    def run():
        net = Network.fixed(4, latency=0.2)
        for pid in net.pids:
            net.start(pid)
        net.run(3, exact=True)
        net.isolate(net.pids[3])
        net.send(net.pids[0], "hello")
        net.run(20, exact=True)
        return net.pids, {p: list(ds) for p, ds in net.delivered.items()}

    pids, first = run()
    assert first == run()[1]
    assert [d.removed for d in first[pids[0]] if hasattr(d, "removed")][-1] == (pids[3],)


def test_every_frame_crosses_the_wire_as_text_and_each_text_is_parsed_once(monkeypatch):
    """A frame reaches its receiver as the codec parses its text (``wire``), and a text is parsed once
    per network: a broadcast reaches each member as one text, an idle peer's heartbeats repeat."""
    import simnet

    parsed: list[str] = []
    real = simnet.parse_frame
    monkeypatch.setattr(simnet, "parse_frame", lambda text: parsed.append(text) or real(text))
    net = Network.static(3, seed=1, max_delay=0.1)
    a, b, c = net.pids
    net.schedule_send(0.0, a, "x")
    net.run()
    assert [texts(net, p) for p in net.pids] == [["x"], ["x"], ["x"]]
    message = [t for t in parsed if str(t).startswith("MESSAGE")]
    assert len(message) == 1 and len(parsed) == len(set(parsed))  # A's MESSAGE went to B and C: one parse
    assert net.over_the_wire(real(message[0])) is net.over_the_wire(real(message[0]))
