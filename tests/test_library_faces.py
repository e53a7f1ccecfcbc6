"""The library's other faces, on real members on loopback: the blocking one (`tom.GroupThread`) from
plain threads, the asyncio one (`tom.AsyncioGroup`) from an asyncio program, and replicated objects
(`tom.Replicated`, ``@tom.replicated``, the batteries) shared by three members in one process."""

from __future__ import annotations

import asyncio
import threading

import pytest

import tom
from members import FAST, members, started, wait_until
from tom.errors import ConfigError, UsageError

pytestmark = pytest.mark.e2e


def test_blocking_members_on_threads_deliver_the_same_order_and_call_back_in_it():
    group = members(3)
    called: list[list[str]] = [[], [], []]
    threads = [tom.GroupThread(group, me, on_event=lambda e, i=i: called[i].append(getattr(e, "payload", "view")),
                               **FAST) for i, me in enumerate(group)]
    try:
        wait_until(lambda: all(len(t.members) == 3 for t in threads))
        senders = [threading.Thread(target=lambda t=t: [t.send(f"{t.me}:{k}") for k in range(10)]) for t in threads]
        for s in senders:
            s.start()
        for s in senders:
            s.join(30)
        seen = []
        for t in threads:
            got = []
            while len(got) < 30:
                event = t.get(timeout=30)
                assert event is not None, f"{t.me} got {len(got)} of 30"
                if isinstance(event, tom.Delivered):
                    got.append((event.clock, event.origin, event.payload))
            seen.append(got)
        assert seen[0] == seen[1] == seen[2]
        for i, t in enumerate(threads):  # the callback saw the same messages first, in the same order
            assert [p for p in called[i] if p != "view"][:30] == [p for _, _, p in seen[i]]
    finally:
        for t in threads:
            t.close()
    with pytest.raises(UsageError):
        threads[0].send("after close")
    rest = list(threads[0])  # the iterator ends once the member stopped: what was left unread
    assert all(isinstance(e, (tom.Delivered, tom.ViewChanged)) for e in rest)
    assert threads[0].get(timeout=5) is None


def test_a_blocking_member_with_a_bad_argument_raises_in_the_caller():
    with pytest.raises(ConfigError, match="order must be one of"):
        tom.GroupThread(members(1), "127.0.0.1:1", order="fifo")


def test_asyncio_members_send_and_iterate():
    group = members(2)

    async def main() -> list[list[str]]:
        async with tom.AsyncioGroup(group, group[0], **FAST) as a, tom.AsyncioGroup(group, group[1], **FAST) as b:
            while len(a.members) < 2 or len(b.members) < 2:
                await asyncio.sleep(0.05)
            for k in range(5):
                await a.send(f"a{k}")
                await b.send(f"b{k}")

            async def read(g) -> list[str]:
                got = []
                async for event in g:
                    if isinstance(event, tom.Delivered):
                        got.append(event.payload)
                        if len(got) == 10:
                            return got
                return got

            return await asyncio.wait_for(asyncio.gather(read(a), read(b)), 30)

    first, second = asyncio.run(main())
    assert first == second and sorted(first) == sorted([f"a{k}" for k in range(5)] + [f"b{k}" for k in range(5)])


class Inventory(tom.Replicated):
    def __init__(self, neighbors, me, **options):
        super().__init__(neighbors, me, **options)
        self.stock: dict[str, int] = {}

    @tom.replicated
    def add(self, item: str, n: int) -> int:
        self.stock[item] = self.stock.get(item, 0) + n
        return self.stock[item]

    @tom.replicated
    def take(self, item: str, n: int) -> int:
        if self.stock.get(item, 0) < n:
            raise ValueError(f"only {self.stock.get(item, 0)} {item}")
        self.stock[item] -= n
        return self.stock[item]


def test_a_replicated_object_applies_every_call_everywhere_in_order_and_returns_its_result():
    group = members(3)
    objs = started([Inventory(group, me, **FAST) for me in group], size=3)
    try:
        results: list[list[int]] = [[], [], []]

        def work(i: int) -> None:
            for _ in range(20):
                results[i].append(objs[i].add("apple", 1))

        workers = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert sorted(r for rs in results for r in rs) == list(range(1, 61))  # each result is one step of the order
        wait_until(lambda: all(o.stock.get("apple") == 60 for o in objs))
        with pytest.raises(ValueError, match="only 60 apple"):
            objs[1].take("apple", 61)
        assert objs[2].take("apple", 10) == 50
        wait_until(lambda: all(o.stock == {"apple": 50} for o in objs))
    finally:
        for o in objs:
            o.close()


def test_the_batteries_counter_dict_and_locks():
    group = members(2)
    counters = started([tom.ReplCounter(group, me, **FAST) for me in group], size=2)
    try:
        assert counters[0].inc() in (1, 2)
        assert counters[1].add(10) >= 11
        wait_until(lambda: counters[0].value == counters[1].value == 11)
    finally:
        for c in counters:
            c.close()

    group = members(2)
    with tom.ReplDict(group, group[0], **FAST) as d0, tom.ReplDict(group, group[1], **FAST) as d1:
        assert d0.wait_admitted(30) and d1.wait_admitted(30)
        wait_until(lambda: len(d0.members) == len(d1.members) == 2)
        d0.set("a", {"x": 1})
        d1.update({"b": [1, 2], "c": None})
        assert d0.pop("c", "gone") in (None, "gone")
        wait_until(lambda: d0.copy() == d1.copy() == {"a": {"x": 1}, "b": [1, 2]})
        assert "a" in d1 and d1["b"] == [1, 2] and len(d1) == 2 and sorted(d1) == ["a", "b"]

    group = members(3)
    locks = started([tom.ReplLockManager(group, me, **FAST) for me in group], size=3)
    try:
        assert locks[0].try_acquire("printer") is True
        assert locks[1].try_acquire("printer") is False
        assert locks[0].try_acquire("printer") is True  # already ours
        assert locks[1].release("printer") is False
        locks[0].close()  # leaving frees its locks, everywhere at the same place of the order
        wait_until(lambda: locks[1].owner("printer") is None and locks[2].owner("printer") is None)
        assert locks[2].try_acquire("printer") is True
        wait_until(lambda: locks[1].owner("printer") == group[2])
    finally:
        for lk in locks:
            lk.close()


def test_a_callback_that_raises_stops_the_member_with_one_error_line(caplog):
    import logging

    group = members(1)

    def bad(event):
        raise ValueError("the program's bug")

    with caplog.at_level(logging.ERROR, logger="tom.group_thread"):
        with tom.GroupThread(group, group[0], on_event=bad, static=True, **FAST) as g:
            g.send("hello")
            assert g.get(timeout=30) is None  # the member stopped: the iteration ends
    lines = [r.getMessage() for r in caplog.records if r.name == "tom.group_thread"]
    assert len(lines) == 1 and "ValueError: the program's bug" in lines[0] and group[0] in lines[0]
