"""The library face (`tom.open_group`): members inside one trio program, on real TCP links on
loopback, deliver the same events in the same order; a member that leaves is a view change at the
others; bad arguments are one ConfigError before anything binds; sending after leaving is refused."""

from __future__ import annotations

import base64
import json

import pytest
import trio

import tom
from tom.errors import ConfigError, UsageError
from members import FAST
from tom.tools.peers import free_ports

pytestmark = pytest.mark.e2e


async def collect(group: tom.Group, messages: int, into: list) -> None:
    """Read the group's events into ``into`` until ``messages`` messages were delivered."""
    async for event in group:
        into.append(event)
        if sum(isinstance(e, tom.Delivered) for e in into) == messages:
            return


@pytest.mark.parametrize("order", ["lamport", "sequencer", "causal"])
async def test_three_members_in_one_program_deliver_the_same_events_in_the_same_order(order, tmp_path):
    members = [f"127.0.0.1:{p}" for p in free_ports(3)]
    seen: list[list] = [[], [], []]
    with trio.fail_after(60):
        async with tom.open_group(members, members[0], order=order, output=tmp_path / "out0.jsonl",
                                  **FAST) as a, \
                tom.open_group(members, members[1], order=order, **FAST) as b, \
                tom.open_group(members, members[2], order=order, **FAST) as c:
            groups = [a, b, c]
            assert [g.me for g in groups] == members
            async with trio.open_nursery() as nursery:
                for g, into in zip(groups, seen):
                    nursery.start_soon(collect, g, 15, into)
                while any(len(g.members) < 3 for g in groups):  # every member admitted
                    await trio.sleep(0.05)
                sent = []
                for k in range(5):
                    for g in groups:
                        sent.append(await g.send(f"{g.me} says {k}"))
    messages = [[(e.clock, e.origin, e.payload) for e in s if isinstance(e, tom.Delivered)] for s in seen]
    if order == "causal":  # the same set, each origin's in its sending order
        assert all(sorted(m) == sorted(messages[0]) for m in messages)
        for m in messages:
            for who in members:
                assert [p for _, o, p in m if o == who] == [f"{who} says {k}" for k in range(5)]
    else:
        assert messages[0] == messages[1] == messages[2]
    assert len(messages[0]) == 15
    assert {(s.clock, s.origin) for s in sent if s is not None} <= {(c, o) for c, o, _ in messages[0]}
    for me, s in zip(members, seen):
        assert isinstance(s[0], tom.ViewChanged) and me in s[0].members  # the view it was admitted in
        assert [e.index for e in s] == list(range(s[0].index, s[0].index + len(s)))  # each event once
    records = [json.loads(ln) for ln in (tmp_path / "out0.jsonl").read_text().splitlines()]
    assert [(r["clock"], r["pid"], r["text"]) for r in records if r["kind"] == "message"][:15] == messages[0]


async def test_a_member_that_leaves_is_a_view_change_at_the_others_and_can_send_no_more():
    members = [f"127.0.0.1:{p}" for p in free_ports(3)]
    with trio.fail_after(60):
        async with tom.open_group(members, members[0], **FAST) as a, \
                tom.open_group(members, members[1], **FAST) as b:
            async with tom.open_group(members, members[2], **FAST) as c:
                while any(len(g.members) < 3 for g in (a, b, c)):
                    await trio.sleep(0.05)
                await c.send("last words")
            with pytest.raises(UsageError):
                await c.send("too late")
            got = []
            async for event in a:
                got.append(event)
                if isinstance(event, tom.ViewChanged) and members[2] in event.left:
                    break
            assert "last words" in [e.payload for e in got if isinstance(e, tom.Delivered)]
            assert set(got[-1].members) == set(members[:2]) and got[-1].removed == ()
        events = [e async for e in a]  # the member has stopped: the iteration ends
        assert all(e.index > got[-1].index for e in events)


@pytest.mark.parametrize("kwargs, says", [
    ({"order": "fifo"}, "order must be one of"),
    ({"quorum": "most"}, "quorum must be one of"),
    ({"heartbeat": 0}, "heartbeat must be a positive number"),
    ({"me": "127.0.0.1:1"}, "is not in the neighbors"),
])
async def test_a_bad_argument_is_one_config_error_before_anything_binds(kwargs, says):
    members = [f"127.0.0.1:{p}" for p in free_ports(2)]
    me = kwargs.pop("me", members[0])
    with pytest.raises(ConfigError, match=says):
        async with tom.open_group(members, me, **kwargs):
            raise AssertionError("opened")


async def test_an_exception_in_the_block_comes_out_as_itself_and_the_member_leaves():
    members = [f"127.0.0.1:{p}" for p in free_ports(1)]
    with trio.fail_after(30):
        with pytest.raises(KeyError, match="mine"):
            async with tom.open_group(members, members[0], static=True, **FAST) as g:
                raise KeyError("mine")
        assert all(isinstance(e, (tom.Delivered, tom.ViewChanged)) for e in [e async for e in g])  # it ends
    with pytest.raises(UsageError):
        await g.send("after")


async def test_a_payload_is_a_str_or_bytes_and_comes_out_as_sent(tmp_path):
    members = [f"127.0.0.1:{p}" for p in free_ports(1)]
    blob = bytes(range(256)) * 3
    with trio.fail_after(30):
        async with tom.open_group(members, members[0], static=True, output=tmp_path / "out.jsonl", **FAST) as g:
            with pytest.raises(TypeError, match="a payload is a str or bytes"):
                await g.send(42)  # type: ignore[arg-type]
            with pytest.raises(UsageError, match="the form of bytes"):
                await g.send("tom-b64 AAAA")  # a text in the bytes form would come out as bytes
            with pytest.raises(UsageError):
                await g.send("x" * 70_000)  # over the frame's limit: refused, one line
            with pytest.raises(UsageError):
                await g.send(b"x" * 50_000)  # so are bytes whose base64 is
            assert await g.send("alone") is not None
            assert await g.send(blob) is not None
            got = []
            async for event in g:
                if isinstance(event, tom.Delivered):
                    got.append(event.payload)
                    if len(got) == 2:
                        break
    assert got == ["alone", blob]
    records = [json.loads(ln) for ln in (tmp_path / "out.jsonl").read_text().splitlines()]
    messages = [r for r in records if r["kind"] == "message"]
    assert "encoding" not in messages[0] and messages[0]["text"] == "alone"
    assert messages[1]["encoding"] == "base64" and base64.b64decode(messages[1]["text"]) == blob


async def test_a_durable_member_has_a_text_on_its_disk_when_send_returns(tmp_path):
    from tom.durable.log import read_log

    members = [f"127.0.0.1:{p}" for p in free_ports(3)]
    with trio.fail_after(60):
        async with tom.open_group(members, members[0], **FAST) as a, \
                tom.open_group(members, members[1], **FAST) as b, \
                tom.open_group(members, members[2], data=tmp_path / "data", **FAST) as c:
            while any(len(g.members) < 3 for g in (a, b, c)):
                await trio.sleep(0.05)
            await c.send("kept")
            accepted = [json.loads(p)["text"] for p in read_log(tmp_path / "data" / "accepted.log").records]
            assert accepted == ["kept"]
    with pytest.raises(ConfigError, match="fsync"):
        async with tom.open_group(members, members[0], data=tmp_path / "d2", fsync="sometimes"):
            pass
