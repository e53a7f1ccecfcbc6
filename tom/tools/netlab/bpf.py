"""A classic BPF program (cBPF, as ``tc filter ... bpf bytecode`` takes it) that picks IPv4 packets
from given source addresses at random.

The lab's kernel has no netem, no tc actions and no u32 classifier, but it has the bpf classifier
(cls_bpf) and htb. In classic mode cls_bpf returns the program's value as a class id (0: no match).
The program returns ``classid`` for an IPv4 packet whose source is one of ``sources`` with
probability ``probability`` (the kernel's ``ld rand``, SKF_AD_RANDOM, an independent draw per
packet), else 0. The lab sends that class to a ``pfifo limit 0`` leaf, which drops all it gets.
Frames on a device with an Ethernet header and no VLAN tag are assumed (the lab's veth ports).
"""

from __future__ import annotations

import ipaddress

_LDH_ABS, _LD_ABS = 0x28, 0x20
_JEQ_K, _JGE_K = 0x15, 0x35
_RET_K = 0x06
_SKF_AD_RANDOM = 0xFFFFF000 + 56  # SKF_AD_OFF + SKF_AD_RANDOM
_ETHERTYPE_AT, _IPV4, _SOURCE_AT = 12, 0x0800, 26


def random_drop_program(sources: list[str], probability: float, classid: int) -> str:
    """The bytecode string: ``N,code jt jf k,...``."""
    if not sources or not 0 < probability <= 1:
        raise ValueError("need at least one source and a probability in (0, 1]")
    # (code, jump-true label, jump-false label, k); a label names a later instruction
    program: list[tuple[int, str | None, str | None, int]] = [
        (_LDH_ABS, None, None, _ETHERTYPE_AT),
        (_JEQ_K, None, "pass", _IPV4),
        (_LD_ABS, None, None, _SOURCE_AT),
    ]
    for address in sources:
        program.append((_JEQ_K, "draw", None, int(ipaddress.IPv4Address(address))))
    program.append((_RET_K, None, None, 0))
    labels = {"draw": len(program)}
    threshold = round(probability * 2 ** 32)
    if threshold < 2 ** 32:  # probability 1: every such packet, no draw
        program += [(_LD_ABS, None, None, _SKF_AD_RANDOM), (_JGE_K, "pass", None, threshold)]
    program.append((_RET_K, None, None, classid))
    labels["pass"] = len(program)
    program.append((_RET_K, None, None, 0))

    def offset(pc: int, label: str | None) -> int:
        return 0 if label is None else labels[label] - pc - 1

    body = [f"{code} {offset(pc, jt)} {offset(pc, jf)} {k}" for pc, (code, jt, jf, k) in enumerate(program)]
    return ",".join([str(len(body)), *body])
