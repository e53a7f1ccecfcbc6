"""Shared suspicions end to end (issue 25, hole 2): real peer processes whose neighbors files differ.

A, B, C run a group; D starts, listed by A's and C's files but not by B's (B refuses its connection).
Before, A admitted D, B never heard it, and every message waited for an ACK across the missing link
(the issue: 2, 0 and 2 of 90 messages in 40 s). Now A admits D only once every member reports a link to
it (SEES): the group goes on without D, and the logs say who cannot reach whom."""

from __future__ import annotations

import time

import httpx
import pytest

from procs import free_ports
from test_e2e_edges import Group, no_traceback

pytestmark = pytest.mark.e2e


def test_a_joiner_one_member_has_no_link_to_is_not_admitted_and_the_group_goes_on(tmp_path):
    a, b, c, d = sorted(free_ports(4))  # A, the smallest, coordinates
    (http,) = free_ports(1)
    pb, pd = (f"127.0.0.1:{p}" for p in (b, d))
    with Group(tmp_path) as g:
        g.start(a, [a, b, c, d], "--http", str(http))
        g.start(b, [a, b, c])
        g.start(c, [a, b, c, d])
        g.wait(lambda: all(any(r["kind"] == "view" and len(r["members"]) == 3 for r in g.records(p))
                           for p in (a, b, c)), why="A, B and C formed a group")
        g.start(d, [a, b, c, d])
        time.sleep(1.0)  # D connected to A and C, and asks to join
        sent = []
        for k in range(10):
            for p in (a, b, c):
                sent.append(f"{p}-{k}")
                g.send(p, [f"{p}-{k}"])
            time.sleep(0.1)
        g.wait(lambda: all({m[2] for m in g.messages(p)} >= set(sent) for p in (a, b, c)), deadline=30,
               why=f"A, B and C deliver all {len(sent)} messages")
        line = f"{pb} cannot reach {pd}: not admitting it"
        g.wait(lambda: line in g.log(a), deadline=20, why="A says B cannot reach D")
        g.wait(lambda: "not admitted to the group" in g.log(d), deadline=30, why="D says it is not admitted")
        said = next(x for x in g.log(d).splitlines() if "not admitted to the group" in x)
        assert f"{pb} cannot reach it" in said and f"never connected with {pb}" in said, said
        for p in (a, b, c):
            views = [r for r in g.records(p) if r["kind"] == "view"]
            assert all(pd not in r["members"] for r in views), views
        assert not g.messages(d)
        with httpx.Client(timeout=10) as client:
            assert [pb, pd] in client.get(f"http://127.0.0.1:{http}/api/status").json()["unreachable"]
            assert "tom_unreachable_pairs 1.0" in client.get(f"http://127.0.0.1:{http}/metrics").text
        assert g.log(a).count(line) == 1, g.log(a)  # one line per pair while it lasts
        for p in (a, b, c, d):
            no_traceback(g.log(p))
        assert [g.exit(p) for p in (a, b, c)] == [0, 0, 0]
