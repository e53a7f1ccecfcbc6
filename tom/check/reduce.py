"""Partial-order reduction for `tom check` (``--reduce``): expand a persistent set of a state's steps
instead of all of them, where the peers fall apart into parts that cannot reach each other.

A step belongs to one peer: ``deliver A>B``, ``tick B``, ``timeout X@B``, ``send B`` and ``leave B``
to B. It reads and writes only B's core, time, tick count and log, the head of one link into B and
the tails of B's links out, and reads the fault state (who crashed, the cut). Steps of two peers
therefore commute, with one exception: A's step can append a frame that B can take, enabling a step
of B that does not commute with B's others. Where a cut separates the peers that does not happen:

    A set X of peers is *closed* when no running peer outside X can get a frame to a peer of X
    (every link from outside into X is cut). Then, while no fault step (crash, cut, heal, join) can
    be taken, the steps of X enabled in a state are a *persistent set*: no sequence of steps of
    peers outside X can enable a step of X or change what one does.

`persistent` returns the enabled steps of the smallest closed set with a step (every step when there
is a fault step, when the peers are not cut apart, or when the smallest set is all of them). With
``heal_late`` the heal is enabled once nothing but ticks is left, so the set must hold a step other
than a tick (that step stays enabled whatever the others do, so the heal stays disabled).

What this keeps (Godefroid, *Partial-Order Methods for the Verification of Concurrent Systems*, ch.
4): a search that expands persistent sets reaches every terminal state the full search reaches, and
each path to one is the full search's path with independent steps swapped, so every step, and what it
rejects, is taken as it was. The invariants are about the delivery logs, which only grow: once broken
they stay broken up to the terminal states (the state graph has no cycles: each step consumes a frame,
a tick or a fault, or grows a log or a clock), so a violation the full search finds, this finds. The
sequencer order exempts a peer that fails *later* from agreement, so there a broken state can mend:
`persistent` reduces nothing in that order.
"""

from __future__ import annotations

from .world import Step, World

_FAULTS = frozenset({"crash", "cut", "heal", "join"})


def owner(step: Step) -> int:
    """The peer whose state ``step`` changes."""
    return step.b if step.kind in ("deliver", "timeout") else step.a


def closed_sets(world: World) -> list[frozenset[int]]:
    """For each running peer, the smallest closed set holding it (see the module docstring)."""
    running = [n for n in sorted(world.locals) if n not in world.crashed]
    reaches = {b: [a for a in running if a != b and not world.blocked(a, b)] for b in running}
    out: list[frozenset[int]] = []
    for n in running:
        todo, got = [n], {n}
        while todo:
            for a in reaches[todo.pop()]:
                if a not in got:
                    got.add(a)
                    todo.append(a)
        out.append(frozenset(got))
    return out


def persistent(world: World, steps: list[Step]) -> list[Step]:
    """A persistent subset of ``steps`` (the enabled steps of ``world``), in their order."""
    config = world.config
    if not world.cut_on or config.order == "sequencer" or len(steps) < 2:
        return steps
    if any(s.kind in _FAULTS for s in steps):
        return steps
    best: list[Step] | None = None
    for group in sorted(set(closed_sets(world)), key=sorted):
        mine = [s for s in steps if owner(s) in group]
        if not mine or len(mine) == len(steps):
            continue
        if config.heal_late and all(s.kind == "tick" for s in mine):
            continue
        if best is None or len(mine) < len(best):
            best = mine
    return steps if best is None else best
