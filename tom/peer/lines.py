"""The output file's lines: each delivered event as one schema-v2 JSON record (docs/output-format.md).

`record` and `handout_record` are the reference records; `lines` writes the same text as
``json.dumps(record(...), ensure_ascii=False, separators=(",", ":"))`` for a message, by hand (it runs
once per delivery; tested against the reference). Compiled with the core (`scripts/build-compiled`).
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Mapping, Sequence
from typing import Final, cast

from ..core import Delivery, ViewDelivery
from ..core.handout import HandoutDelivery
from ..core.vector import Vector

SCHEMA_VERSION: Final = 2
BYTES_PREFIX: Final = "tom-b64 "
"""A message text that carries bytes (the library's ``bytes`` payloads): this, then their base64. Its record
holds the base64 alone as ``text``, with ``"encoding": "base64"`` (docs/output-format.md, docs/design/wire.md)."""
LINE_BREAKS: Final = "\x85\u2028\u2029"  # raw, they would split a line for some readers
HEAD: Final = f'{{"v":{SCHEMA_VERSION},"kind":"message","index":'
encode_basestring: Final = json.encoder.encode_basestring  # what json.dumps(str) calls (C statics)
encode_basestring_ascii: Final = json.encoder.encode_basestring_ascii
_KEYS: Final[dict[tuple[str, ...], list[str]]] = {}  # a view's members -> their JSON keys, '"<pid>":' 


def record(d: Delivery | ViewDelivery, peer: str, delivered_at: float) -> dict:
    """The schema-v2 record of a delivered message or view change (docs/output-format.md)."""
    if type(d) is ViewDelivery:
        view: dict = {
            "v": SCHEMA_VERSION,
            "kind": "view",
            "index": d.index,
            "peer": peer,
            "clock": d.clock,
            "pid": d.pid,
            "delivered_at": round(delivered_at, 6),
            "view": d.view,
            "members": list(d.members),
            "joined": list(d.joined),
            "left": list(d.left),
            "removed": list(d.removed),
            "order": d.order,
        }
        if d.order == "sequencer":
            view["seq"] = 0  # a view record sorts before the view's first message, (view, 0)
        return view
    assert type(d) is Delivery
    raw = d.text.startswith(BYTES_PREFIX)  # bytes from the library: their base64, and what it is
    message: dict = {
        "v": SCHEMA_VERSION,
        "kind": "message",
        "index": d.index,
        "peer": peer,
        "clock": d.clock,
        "pid": d.pid,
        "text": d.text[len(BYTES_PREFIX):] if raw else d.text,
        **({"encoding": "base64"} if raw else {}),
        "sent_at": d.sent_at,
        "delivered_at": round(delivered_at, 6),
        "view": d.view,
    }
    if d.seq is not None:
        message["seq"] = d.seq
    if d.vc is not None:
        message["vc"] = dict(d.vc)
    return message


def handout_record(d: HandoutDelivery, peer: str, delivered_at: float) -> dict:
    """The record of a message delivered on the handout's wire: no send time (its frames carry none),
    the ``from`` as written, the ACKs it was released with, and ``"wire": "handout"``
    (docs/output-format.md)."""
    return {"v": SCHEMA_VERSION, "kind": "message", "index": d.index, "peer": peer, "clock": d.clock,
            "pid": d.pid, "from": d.origin, "text": d.text, "delivered_at": round(delivered_at, 6), "view": 1,
            "wire": "handout", "acks": d.acks}


def _quoted(quoted: dict[str, str], pid: str) -> str:
    q = quoted.get(pid)
    if q is None:
        q = quoted[pid] = json.dumps(pid)
    return q


def _vector_text(vc: object, quoted: dict[str, str]) -> str:
    """``vc``'s items as JSON writes them, without the braces: a core's `Vector` with no zero count by
    its view's keys written once, anything else item by item."""
    if isinstance(vc, Vector):  # (vc: object, as mypy does not know a registered Mapping)
        counts, members = vc.counts, vc.members
        keys = _KEYS.get(members)
        if keys is None:
            if len(_KEYS) >= 64:  # (one per view that ran lately)
                _KEYS.clear()
            keys = _KEYS[members] = [_quoted(quoted, member) + ":" for member in members]
        out: list[str] = []
        for k in range(len(counts)):
            c = counts[k]
            if c:
                out.append(f"{keys[k]}{c}")
        return ",".join(out)
    items = cast("Mapping[str, int]", vc).items()
    return ",".join([f"{_quoted(quoted, member)}:{count}" for member, count in items])


def _message_line(d: Delivery, peer_json: str, offset: int, stamp: str, quoted: dict[str, str], sent: str) -> str:
    pid = _quoted(quoted, d.pid)
    text = d.text
    encoding = ""
    if text.startswith(BYTES_PREFIX):  # bytes: their base64 alone, and what it is
        text, encoding = text[len(BYTES_PREFIX):], ',"encoding":"base64"'
    if text.isascii() or not any(c in text for c in LINE_BREAKS):
        text = encode_basestring(text)  # = json.dumps(text, ensure_ascii=False)
    else:
        text = encode_basestring_ascii(text)
    seq, vc = d.seq, d.vc
    if seq is None and vc is None:  # lamport
        tail = "}\n"
    elif vc is None:
        tail = f',"seq":{seq}}}\n'
    else:  # (pid -> int: what json.dumps(vc, separators=(",", ":")) writes)
        counts = _vector_text(vc, quoted)
        tail = f',"vc":{{{counts}}}}}\n' if seq is None else f',"seq":{seq},"vc":{{{counts}}}}}\n'
    return (f'{HEAD}{d.index + offset},"peer":{peer_json},"clock":{d.clock},"pid":{pid},'
            f'"text":{text}{encoding},"sent_at":{sent},"delivered_at":{stamp},"view":{d.view}{tail}')


def lines(deliveries: Sequence[Delivery | ViewDelivery | HandoutDelivery], peer: str, peer_json: str,
          offset: int, delivered_at: float, quoted: dict[str, str]) -> list[str]:
    """One line (with its newline) per delivery, indexes shifted by ``offset`` (an earlier run's
    records); ``quoted`` caches pids as JSON strings."""
    stamp = f"{delivered_at:.6f}".rstrip("0").rstrip(".")
    out: list[str] = []
    last_at, last_sent = -1.0, ""  # a run of messages shares its send time: written once (repr is dear)
    for d in deliveries:
        if type(d) is Delivery:
            at = d.sent_at
            if at is None:
                sent = "null"
            elif at == last_at and at != 0.0:  # (0.0 == -0.0, whose repr differs)
                sent = last_sent
            else:
                last_at, last_sent = at, repr(at)
                sent = last_sent
            out.append(_message_line(d, peer_json, offset, stamp, quoted, sent))
        elif type(d) is HandoutDelivery:
            rec = handout_record(d, peer, delivered_at)
            rec["index"] += offset
            out.append(json.dumps(rec, ensure_ascii=any(c in d.text for c in LINE_BREAKS),
                                  separators=(",", ":")) + "\n")
        else:
            assert type(d) is ViewDelivery
            view = record(d, peer, delivered_at)
            view["index"] += offset
            out.append(json.dumps(view, ensure_ascii=False, separators=(",", ":")) + "\n")
    return out


def tally(deliveries: Sequence[Delivery | ViewDelivery], me: str) -> tuple[bool, int, int]:
    """In one pass over ``deliveries``: whether a view is among them, how many messages are ``me``'s,
    and the highest clock (-1 if none)."""
    views, mine, top = False, 0, -1
    for d in deliveries:
        if type(d) is ViewDelivery:
            views = True
        elif d.pid == me:
            mine += 1
        if d.clock > top:
            top = d.clock
    return views, mine, top
