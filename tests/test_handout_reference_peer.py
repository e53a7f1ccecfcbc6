"""The handout's reference peer (tests/handout_peer/HandoutPeer.java) run against itself.

Three (or one) Java peers on 127.0.0.1, each told to listen on the IP literal
127.0.0.1, send messages through the stdin menu; the output files must then
hold the same messages in the same total order, each with n ACKs.
Plain synchronous tests: only subprocesses, files and loopback sockets.
"""

import time

import pytest

from handout_java import LINE, java_peer_classes, start_group, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def peer_classes(tmp_path_factory):
    return java_peer_classes(tmp_path_factory)

def check_same_total_order(peers, expected):
    """Every output file: all expected (from, text), n ACKs each, same order everywhere."""
    n = len(peers)
    orders = []
    for peer in peers:
        keys = []
        for line in peer.delivered():
            m = LINE.match(line)
            assert m, f"bad output line {line!r}"
            assert int(m.group(1)) == n, line
            keys.append((int(m.group(2)), m.group(3), m.group(4)))
        # the pending queue's order: by clock, ties by String.compareTo of the from
        # (ASCII here, so Python's str order is the same)
        assert keys == sorted(keys, key=lambda k: (k[0], k[1])), peer.output
        orders.append(keys)
    for order in orders[1:]:
        assert order == orders[0]
    assert sorted((f, t) for _, f, t in orders[0]) == sorted(expected)
    return orders[0]


def run_group(peer_classes, tmp_path, delays=None):
    peers = start_group(peer_classes, tmp_path, 3, delays)
    try:
        froms = [f"localhost/127.0.0.1:{p.port}" for p in peers]
        for peer, frm in zip(peers, froms):
            assert f"Sending messages from: {frm}" in peer.stdout()
        expected = []

        def send(i, text):
            peers[i].send(text)
            expected.append((froms[i], text))

        send(0, "hello from p0")
        # the same moment from every peer: equal clocks, ties broken by the from string
        for i in range(3):
            send(i, f"together {i}")
        send(1, "dashes-and:12-colons: 5-in the text")
        for i in (2, 0):
            send(i, f"again {i}")
        wait_for(
            lambda: all(len(p.delivered()) >= len(expected) for p in peers),
            "every message in every output file",
        )
        time.sleep(0.3)  # nothing more may arrive
        order = check_same_total_order(peers, expected)
        assert all(frm in froms for _, frm, _ in order)
        for peer in peers:
            assert "ignored bad line" not in peer.stderr_path.read_text("utf-8")
        return peers, order
    finally:
        for peer in peers:
            peer.stop()


def test_three_peers_agree_on_one_order(peer_classes, tmp_path):
    run_group(peer_classes, tmp_path)


def test_three_peers_agree_with_a_slow_sender(peer_classes, tmp_path):
    peers, _ = run_group(peer_classes, tmp_path, delays={1: 300})
    assert all(p.proc.returncode is not None for p in peers)


def test_single_peer_lists_itself_and_quits_cleanly(peer_classes, tmp_path):
    (peer,) = start_group(peer_classes, tmp_path, 1)
    try:
        peer.send("alone")
        frm = f"localhost/127.0.0.1:{peer.port}"
        wait_for(lambda: len(peer.delivered()) >= 1, "the delivery")
        assert peer.delivered() == [f"1 ACKs on MESSAGE-1-{frm}-alone"]
        peer.type("2")
        wait_for(lambda: "Logical clock time: 2" in peer.stdout(), "the status")
        assert f"Ready to send: MESSAGE-1-{frm}-alone" in peer.stdout()
        assert f"Delivered: MESSAGE-1-{frm}-alone" in peer.stdout()
        peer.type("3")
        assert peer.proc.wait(timeout=20) == 0
    finally:
        peer.stop()
