"""The lab's network: one private network namespace per peer, wired to a switch in a hub namespace.

Layout (addresses 10.77.0.0/24, private to these namespaces)::

    peer i's namespace: eth0 10.77.0.i/24  <--veth-->  hub namespace: port p<i> on bridge br0

Every namespace is held open by a ``sleep`` process started as
``setpriv --pdeathsig KILL unshare --net sleep infinity``: the namespace lives exactly as long as that
process (and the peer started in it); killing the holders removes the namespaces, their veth pairs and
bridges. Nothing is created in the namespace the lab was started in, nothing is registered under
/run/netns, and the holders die with the lab even if it is killed (parent-death signal).

Faults, at layer 2 in the hub:

- partition: each side's ports move to a bridge of their own (br1, br2, ...); heal moves every port
  back to br0. Frames between sides have no path; TCP sees silence, as with a cut cable.
- loss: an htb qdisc on a hub port (egress, towards its peer) with one class whose leaf is
  ``pfifo limit 0`` (it drops every packet it gets) and a classic-BPF classifier (see ``bpf.py``)
  that sends each IPv4 packet from the chosen sources to that class with probability P: independent
  random drops of packets in flight, which neither endpoint's TCP sees as a local error. ARP and
  other non-IPv4 frames pass.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from ...errors import ConfigError
from .bpf import random_drop_program

TOOLS = ("ip", "tc", "unshare", "nsenter", "setpriv", "sleep")
SUBNET = "10.77.0"
DROP_CLASS = 0x10002  # 1:2, the class whose leaf drops everything


class LabUnavailable(ConfigError):
    """The lab cannot run here (not root, no network namespaces, a tool missing)."""


def check_available() -> None:
    """Raise LabUnavailable (one line) unless this process can create and wire network namespaces."""
    if os.geteuid() != 0:
        raise LabUnavailable("the network lab needs root to create network namespaces (run it as root)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise LabUnavailable(f"the network lab needs {', '.join(missing)} (iproute2, util-linux, coreutils)")
    if not os.path.exists("/proc/self/ns/net"):
        raise LabUnavailable("this kernel has no network namespaces (/proc/self/ns/net is missing)")
    # a throw-away namespace with a veth pair and a bridge: gone when the command ends
    try:
        probe = subprocess.run(["unshare", "--net", "ip", "-batch", "-"], capture_output=True, text=True, timeout=20,
                               input="link add probe0 type veth peer name probe1\nlink add probebr type bridge\n")
    except subprocess.TimeoutExpired:
        raise LabUnavailable("cannot create a network namespace: unshare did not finish within 20 s") from None
    if probe.returncode:
        reason = (probe.stderr.strip().splitlines() or ["no reason given"])[0]
        raise LabUnavailable(f"cannot create a network namespace with a veth pair and a bridge: {reason}")


def _run(cmd: list[str], script: str | None = None) -> None:
    try:
        done = subprocess.run(cmd, input=script, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"network lab: {' '.join(cmd[:4])} did not finish within 20 s") from None
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no message)"]
        raise ConfigError(f"network lab: {cmd[3] if cmd[0] == 'nsenter' else cmd[0]} failed: {lines[0]}")


class LabNetwork:
    """Namespaces for ``peers`` peers and a hub, created by :meth:`create`, gone after :meth:`destroy`.

    Invariant: every process this object started is in ``holders`` until it is reaped; :meth:`destroy`
    kills and reaps them all, each by its pid, and may be called any number of times."""

    def __init__(self, peers: int) -> None:
        if not 1 <= peers <= 250:
            raise ConfigError(f"--peers {peers}: the lab runs 1..250 peers")
        self.peers = peers
        self.holders: dict[str, subprocess.Popen] = {}  # "hub" or "1".."N" -> its sleep process
        self.bridges = 0  # side bridges made so far (br1 .. br<bridges>), kept until the end
        self.loss_ports: dict[int, set[int]] = {}  # loss rule -> hub ports that carry its filter
        self.shaped: set[int] = set()  # hub ports with the htb qdisc

    def address(self, peer: int) -> str:
        return f"{SUBNET}.{peer}"

    def enter(self, name: str) -> list[str]:
        """The command prefix that runs a program in namespace ``name`` ("hub" or a peer number), dying
        with the lab (parent-death signal SIGKILL)."""
        return ["setpriv", "--pdeathsig", "KILL", "nsenter", f"--net=/proc/{self.holders[name].pid}/ns/net", "--"]

    def _hub(self, tool: str, lines: list[str]) -> None:
        _run(["nsenter", f"--net=/proc/{self.holders['hub'].pid}/ns/net", "--", tool, "-batch", "-"],
             "\n".join(lines) + "\n")

    def _hold(self, name: str) -> None:
        proc = subprocess.Popen(["setpriv", "--pdeathsig", "KILL", "unshare", "--net", "sleep", "infinity"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                process_group=0)
        self.holders[name] = proc
        own = os.readlink("/proc/self/ns/net")
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if proc.poll() is not None:
                reason = (proc.stderr.read().decode(errors="replace").strip().splitlines() or ["no reason given"])[0]
                raise LabUnavailable(f"cannot create a network namespace: {reason}")
            try:
                if os.readlink(f"/proc/{proc.pid}/ns/net") != own:
                    return
            except OSError:
                pass
            time.sleep(0.01)
        raise LabUnavailable("cannot create a network namespace: unshare did not finish within 10 s")

    def create(self) -> None:
        """The hub with switch br0 and, per peer, a namespace with eth0 (10.77.0.i/24) on port p<i>."""
        self._hold("hub")
        for i in range(1, self.peers + 1):
            self._hold(str(i))
        lines = ["link add br0 type bridge", "link set br0 up"]
        for i in range(1, self.peers + 1):
            lines += [f"link add p{i} type veth peer name eth0 netns {self.holders[str(i)].pid}",
                      f"link set p{i} master br0", f"link set p{i} up"]
        self._hub("ip", lines)
        for i in range(1, self.peers + 1):
            _run([*self.enter(str(i))[3:], "ip", "-batch", "-"],
                 f"addr add {self.address(i)}/24 dev eth0\nlink set eth0 up\nlink set lo up\n")

    def partition(self, sides: tuple[tuple[int, ...], ...]) -> None:
        """Each side on a switch of its own (br1, br2, ...); the sides cannot reach each other."""
        lines = []
        for s, side in enumerate(sides, 1):
            if s > self.bridges:
                lines += [f"link add br{s} type bridge", f"link set br{s} up"]
            lines += [f"link set p{i} master br{s}" for i in side]
        self._hub("ip", lines)
        self.bridges = max(self.bridges, len(sides))

    def heal(self) -> None:
        """Every port back on br0."""
        self._hub("ip", [f"link set p{i} master br0" for i in range(1, self.peers + 1)])

    def loss_on(self, key: int, probability: float, links: frozenset) -> None:
        """Drop each IPv4 packet crossing one of ``links`` (pairs of peers) with ``probability``, in
        both directions: on hub port p<j> (towards peer j) the packets from j's partners on those links."""
        sources: dict[int, list[str]] = {}
        for link in links:
            a, b = sorted(link)
            sources.setdefault(a, []).append(self.address(b))
            sources.setdefault(b, []).append(self.address(a))
        self._drop(key, probability, sources)

    def cut_one_way(self, key: int, src: int, dst: int) -> None:
        """Drop every IPv4 packet from peer ``src`` to peer ``dst``: a one-way cut (``dst`` stops
        hearing ``src``; over TCP, ``src`` still gets what ``dst`` sends first, never its ACKs).
        `loss_off` with the same ``key`` mends it."""
        self._drop(key, 1.0, {dst: [self.address(src)]})

    def _drop(self, key: int, probability: float, sources: dict[int, list[str]]) -> None:
        """On hub port p<j>, drop with ``probability`` the packets from ``sources[j]`` (rule ``key``)."""
        lines = []
        for port, addresses in sorted(sources.items()):
            if port not in self.shaped:
                # unclassified packets go out htb's direct queue, unshaped; class 1:2's leaf drops all
                lines += [f"qdisc add dev p{port} root handle 1: htb",
                          f"class add dev p{port} parent 1: classid 1:2 htb rate 8kbit",
                          f"qdisc add dev p{port} parent 1:2 handle 2: pfifo limit 0"]
                self.shaped.add(port)
            program = random_drop_program(sorted(addresses), probability, DROP_CLASS)
            lines.append(f'filter add dev p{port} parent 1: pref {10 + key} bpf bytecode "{program}" classid 1:2')
        self._hub("tc", lines)
        self.loss_ports[key] = set(sources)

    def loss_off(self, key: int) -> None:
        ports = self.loss_ports.pop(key, set())
        if ports:
            self._hub("tc", [f"filter del dev p{port} parent 1: pref {10 + key}" for port in sorted(ports)])

    def drops(self) -> dict[int, int]:
        """Packets dropped so far by the loss rules, per hub port (from tc's statistics)."""
        counts = {}
        for port in sorted(self.shaped):
            out = subprocess.run(["nsenter", f"--net=/proc/{self.holders['hub'].pid}/ns/net", "--",
                                  "tc", "-s", "qdisc", "show", "dev", f"p{port}"],
                                 capture_output=True, text=True, timeout=10).stdout
            block = out.split("qdisc pfifo 2:", 1)[-1]
            found = block.split("dropped ", 1)[-1].split(",", 1)[0]
            counts[port] = int(found) if found.isdigit() else 0
        return counts

    def destroy(self) -> None:
        """Kill every holder by its pid and reap it: the namespaces, veths and bridges go with them."""
        for proc in self.holders.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.holders.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
            if proc.stderr is not None:
                proc.stderr.close()
        self.holders.clear()

    def __enter__(self) -> "LabNetwork":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()
