"""Idempotency keys (``Idempotency-Key`` on ``POST /api/messages``): the key map alone
(`tom.peer.idempotency.IdempotencyKeys`), then through the processor's `apply` on a real core, in
memory and with a data folder on the real disk, before and after a restart."""

from __future__ import annotations

import json

import pytest

from tom.codec.frames import Message
from tom.core import Core
from tom.durable.log import read_log
from tom.errors import KeyConflict, UsageError
from tom.peer.durable import Durable
from tom.peer.events import Replayed, SendTexts
from tom.peer.idempotency import MAX_KEYS, IdempotencyKeys
from tom.peer.processor import apply

A, B = "127.0.0.1:5001", "127.0.0.1:5002"


def test_a_known_key_with_the_same_text_is_a_replay_and_with_another_text_a_conflict():
    keys = IdempotencyKeys()
    assert keys.check("k1", "hello") is None  # unknown: accept it
    keys.add("k1", "hello")
    assert keys.check("k1", "hello") == Replayed(None)
    keys.sent("k1", 7)  # the core gave it clock 7: a replay says so
    assert keys.check("k1", "hello") == Replayed(7)
    conflict = keys.check("k1", "hello!")
    assert isinstance(conflict, KeyConflict) and isinstance(conflict, UsageError)
    assert "k1" in str(conflict) and "\n" not in str(conflict)
    assert keys.check("k2", "hello") is None  # the same text under another key is another message


def test_the_map_keeps_the_last_keys_only():
    keys = IdempotencyKeys(bound=3)
    for k in range(5):
        keys.add(f"k{k}", f"t{k}")
    assert len(keys) == 3
    assert keys.check("k0", "t0") is None and keys.check("k1", "t1") is None  # forgotten, oldest first
    assert [keys.check(f"k{k}", f"t{k}") for k in (2, 3, 4)] == [Replayed(None)] * 3
    assert MAX_KEYS == 100_000


def send(core: Core, texts, keys, durable=None, keymap=None, inputs=None) -> list:
    got: list = []
    apply(core, SendTexts(list(texts), got.append, keys=list(keys), inputs=inputs), 0.0, durable, keymap)
    return got


def test_the_processor_multicasts_a_keyed_text_once_and_refuses_its_key_for_another_text():
    core = Core(A, [A, B])  # a static group: a text is multicast at once
    keymap = IdempotencyKeys()
    first = send(core, ["hello"], ["k1"], keymap=keymap)
    assert len(first) == 1 and isinstance(first[0], Message)
    assert send(core, ["hello"], ["k1"], keymap=keymap) == [Replayed(first[0].clock)]
    conflict = send(core, ["other"], ["k1"], keymap=keymap)
    assert len(conflict) == 1 and isinstance(conflict[0], KeyConflict)
    mixed = send(core, ["a", "hello", "b", "a"], ["ka", "k1", None, "ka"], keymap=keymap)
    assert isinstance(mixed[0], Message) and mixed[1] == Replayed(first[0].clock) and isinstance(mixed[2], Message)
    assert mixed[3] == Replayed(mixed[0].clock)  # the same key twice in one batch: once
    texts = [m.text for _, m in core.ready().sends]
    assert texts == ["hello", "a", "b"]


def test_a_text_the_core_refuses_leaves_its_key_free():
    core = Core(A, [A, B])
    keymap = IdempotencyKeys()
    core.leave()
    assert isinstance(send(core, ["x"], ["k"], keymap=keymap)[0], UsageError)
    assert keymap.check("k", "x") is None


def test_a_durable_peer_records_the_key_with_its_text_and_knows_it_after_a_restart(tmp_path):
    core = Core(A, [A, B])
    d = Durable(tmp_path / "data", A)
    d.unsent = []  # (as once admitted and caught up: the core takes texts at once)
    first = send(core, ["hello", "plain"], ["k1", None], durable=d, keymap=d.keys)
    assert isinstance(first[0], Message) and isinstance(first[1], Message)
    d.close()
    payloads = [json.loads(p) for p in read_log(tmp_path / "data" / "accepted.log").records]
    assert payloads == [{"text": "hello", "key": "k1"}, {"text": "plain"}]
    d = Durable(tmp_path / "data", A)
    assert d.keys.check("k1", "hello") == Replayed(None)  # rebuilt from accepted.log (no clock known)
    assert send(core, ["hello"], ["k1"], durable=d, keymap=d.keys) == [Replayed(None)]
    assert isinstance(send(core, ["bye"], ["k1"], durable=d, keymap=d.keys)[0], KeyConflict)
    assert send(core, ["new"], ["k2"], durable=d, keymap=d.keys) == [None]  # waits until caught up
    d.close()
    texts = [json.loads(p)["text"] for p in read_log(tmp_path / "data" / "accepted.log").records]
    assert texts == ["hello", "plain", "new"]  # accepted once each


def test_the_durable_map_is_rebuilt_bounded(tmp_path):
    d = Durable(tmp_path / "data", A)
    d.accept([f"t{k}" for k in range(5)], [f"k{k}" for k in range(5)])
    d.close()
    d = Durable(tmp_path / "data", A, keys_bound=2)
    assert len(d.keys) == 2 and d.keys.check("k4", "t4") == Replayed(None) and d.keys.check("k2", "t2") is None
    d.close()


@pytest.mark.parametrize("bad", ["", "x" * 256, "caf\u00e9", "a b\x01"])
def test_the_api_refuses_a_key_that_is_not_one(bad):
    from tom.web.api import key_refusal

    assert key_refusal(bad) is not None


def test_the_api_takes_an_ordinary_key():
    from tom.web.api import key_refusal

    assert key_refusal("3f2a9c1e-7b44-4d0e-9a51-2b8f0c6d1e77") is None
