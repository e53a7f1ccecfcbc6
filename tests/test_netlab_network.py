"""The lab's network on its own (no peers): namespaces are made and removed, a partition cuts exactly
the links between sides and heal restores them, a loss rule drops about its share of one link's
packets and nothing elsewhere. Skipped, with the reason, where the lab cannot run (not root, ...)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tom.tools.netlab.network import LabNetwork, LabUnavailable, check_available

try:
    check_available()
except LabUnavailable as e:
    pytest.skip(f"network lab unavailable: {e}", allow_module_level=True)

PACKETS = 2000
RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
# room for every datagram even if this process is not scheduled for a while (a busy machine): a drop
# here would be the socket's, not the network's
s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
s.bind((sys.argv[1], 9000))
print("ready", flush=True)
s.settimeout(1.0)
n = 0
try:
    while True:
        s.recv(64)
        n += 1
except socket.timeout:
    print(n, flush=True)
"""
SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    try:
        s.sendto(b"x", (sys.argv[1], 9000))
    except OSError:  # no route / no ARP answer across a partition
        pass
    if i % 100 == 99:
        time.sleep(0.002)
"""


def received(net: LabNetwork, src: int, dst: int, packets: int = PACKETS) -> int:
    """How many of ``packets`` UDP datagrams peer ``src`` sends to peer ``dst`` arrive."""
    rx = subprocess.Popen([*net.enter(str(dst)), sys.executable, "-c", RECEIVER, net.address(dst)],
                          stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        subprocess.run([*net.enter(str(src)), sys.executable, "-c", SENDER, net.address(dst), str(packets)], check=True,
                       timeout=30)
        return int(rx.communicate(timeout=30)[0].strip())
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


@pytest.fixture
def net():
    lab = LabNetwork(3)
    try:
        lab.create()
        yield lab
    finally:
        holders = [p.pid for p in lab.holders.values()]
        lab.destroy()
        assert holders and not any(os.path.exists(f"/proc/{pid}/ns/net") for pid in holders)


def test_partition_cuts_only_between_sides_and_heal_restores(net: LabNetwork) -> None:
    assert received(net, 1, 2) == PACKETS
    net.partition(((1, 2), (3,)))
    assert received(net, 1, 2) == PACKETS
    # few datagrams: each one sent towards an address that cannot answer ARP waits for it
    assert received(net, 1, 3, 30) == 0
    assert received(net, 3, 2, 30) == 0
    net.heal()
    assert received(net, 3, 1) == PACKETS


def test_loss_drops_its_share_on_its_link_only(net: LabNetwork) -> None:
    net.loss_on(0, 0.2, frozenset({frozenset({1, 2})}))
    got = received(net, 1, 2), received(net, 2, 1)
    # 2000 draws at p = 0.2: 400 +- 18 dropped; these bounds are 5 standard deviations wide
    assert all(PACKETS * 0.71 < n < PACKETS * 0.89 for n in got), got
    assert received(net, 1, 3) == PACKETS
    assert sum(net.drops().values()) == 2 * PACKETS - sum(got)
    net.loss_off(0)
    assert received(net, 1, 2) == PACKETS


def test_the_lab_leaves_its_own_namespace_alone() -> None:
    before = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    lab = LabNetwork(2)
    try:
        lab.create()
        lab.partition(((1,), (2,)))
        lab.loss_on(0, 0.5, frozenset({frozenset({1, 2})}))
        assert subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout == before
    finally:
        lab.destroy()
    assert subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout == before
