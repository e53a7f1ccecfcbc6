"""The one-pass proof against its oracle and the exact checks on seeded random runs of every order
(a class's text outputs and handout JSON Lines in the handout's order too), clean and tampered: the pipeline's facts equal the oracle's (tests/analysis/fold_oracle.py: the
summary and its facts computed again in plain Python from the narrow rows); each fault fires its
check in both (an order mark, a fingerprint mismatch); the proof settles every clean run, never
settles a run the exact checks find a violation in, and ``verify`` answers what the exact checks
answer."""

from __future__ import annotations

import json
import os
import random

import pytest

from analysis import facts, schema, verify
from tests.analysis import fold_oracle
from tests.analysis.conftest import PEERS, message
from tests.analysis.test_fast_path import write_case
from tests.analysis.test_handout import handout_record, text_output
from tests.analysis.test_one_pass_orders import needs_the_scan
from tests.analysis.test_orders import renumber, v2

pytestmark = pytest.mark.spark
ORDERS = ("lamport", "sequencer", "causal")
TAMPERS = ("swap", "drop", "duplicate", "text", "number")
SEEDS = tuple(range(1, 1 + int(os.environ.get("TOM_DIFFERENTIAL_SEEDS", "1"))))
"""Each case is a Spark verify: the suite keeps one seed per order and fault
(``TOM_DIFFERENTIAL_SEEDS=20`` runs twenty)."""
FIRES = {"drop": "mismatch", "duplicate": "mismatch", "text": "mismatch", "number": "mismatch"}
"""The check each fault must fire, in the pipeline and in the oracle alike: its view's fingerprints
mismatch. A swap fires an order mark where it breaks the order (a causal run may swap two
concurrent messages and stay healthy: then it fires nothing, and the exact checks agree)."""


def _pid_key(pid: str) -> tuple:
    host, _, port = pid.rpartition(":")
    return host.encode(), int(port)


def random_run(order: str, seed: int, n: int = 12) -> dict[str, list[dict]]:
    """A healthy static run of ``n`` messages from random origins: Lamport, every peer in
    ``(clock, pid)`` order; sequencer, every peer in one random order that keeps each origin's
    messages in the order sent (``seq`` its position); causal, each message's ``vc`` drawn between
    what its origin had already seen and everything sent so far, each peer delivering in its own
    random order that respects it."""
    rng = random.Random(seed)
    sent: list[tuple[int, str]] = []
    clock = {p: 0 for p in PEERS}
    vcs: dict[tuple[int, str], dict[str, int]] = {}
    seen = {p: {q: 0 for q in PEERS} for p in PEERS}  # what each origin had delivered when sending
    counts = {q: 0 for q in PEERS}
    for _ in range(n):
        origin = rng.choice(PEERS)
        clock[origin] = max(clock.values()) if rng.random() < 0.5 else clock[origin] + 1
        clock[origin] += 1
        key = (clock[origin], origin)
        for q in PEERS:  # the origin delivers some more of q's messages before sending
            if q != origin:
                seen[origin][q] = rng.randint(seen[origin][q], counts[q])
        counts[origin] += 1
        seen[origin][origin] = counts[origin]
        vcs[key] = {q: c for q, c in seen[origin].items() if c}
        sent.append(key)
    if order == "lamport":
        total = sorted(sent, key=lambda k: (k[0], *_pid_key(k[1])))
        return {p: renumber([message(p, 0, *k) for k in total]) for p in PEERS}
    if order == "sequencer":
        total = list(sent)  # the send order keeps each origin's clocks rising
        return {p: renumber([v2(message(p, 0, *k), seq=i + 1) for i, k in enumerate(total)])
                for p in PEERS}
    run = {}
    for p in PEERS:
        delivered = {q: 0 for q in PEERS}
        pending, out = list(sent), []
        while pending:
            ready = [k for k in pending if all(
                delivered[q] >= c - (q == k[1]) for q, c in vcs[k].items())]
            pick = rng.choice(ready)
            pending.remove(pick)
            delivered[pick[1]] += 1
            out.append(v2(message(p, 0, *pick), vc=vcs[pick]))
        run[p] = renumber(out)
    return run


def _moved(items: list, how: str, i: int, rng: random.Random) -> bool:
    """Swap item ``i`` with the next, drop it, or copy it further on, in place, for those three
    faults; False for the others."""
    if how == "swap":
        items[i], items[i + 1] = items[i + 1], items[i]
    elif how == "drop":
        del items[i]
    elif how == "duplicate":
        items.insert(rng.randrange(i + 1, len(items) + 1), items[i])
    else:
        return False
    return True


def tamper(run: dict[str, list[dict]], how: str, seed: int) -> dict[str, list[dict]]:
    """One fault in one peer's file (``number``: a copy's ``seq`` or ``vc``, or for a Lamport run
    its clock)."""
    rng = random.Random(seed * 7919 + TAMPERS.index(how))
    peer = rng.choice(PEERS)
    recs = [dict(r) for r in run[peer]]
    i = rng.randrange(len(recs) - 1)
    if _moved(recs, how, i, rng):
        pass
    elif how == "text":
        recs[i]["text"] = "tampered"
    elif "seq" in recs[i]:
        recs[i]["seq"] += 1
    elif "vc" in recs[i]:
        recs[i]["vc"] = dict(recs[i]["vc"], **{recs[i]["pid"]: recs[i]["vc"][recs[i]["pid"]] + 1})
    else:
        recs[i]["clock"] += 1
    return dict(run, **{peer: renumber(recs)})


def _cases():
    for order in ORDERS:
        for seed in SEEDS:
            yield order, seed, None
            for how in TAMPERS:
                yield order, seed, how


def _signals(got, peers: list[str]) -> dict:
    """What the one pass decides on, from facts of either implementation: per-peer order marks,
    view conflicts, mismatched views, the run's messages."""
    views = got.view_members()
    fingerprints = got.view_fingerprints()
    messages, mismatched, partial = got.messages_and_faults(peers)
    return {"marks": {p["peer"]: (p["disorder"], p["index_faults"]) for p in got.peers()
                      if p["disorder"] or p["index_faults"]},
            "view_conflicts": [v["view"] for v in views if v["variants"] > 1],
            "mismatch": sorted(v["view"] for v in facts.fingerprint_mismatches(fingerprints, views,
                                                                                 peers)),
            "messages": messages, "crash_prefixes": partial,
            "claims": got.claims(),
            "fingerprints": sorted((f["peer"], f["view"], *(f[c] for c in facts.FINGERPRINT))
                                   for f in fingerprints)}


@pytest.mark.parametrize(("order", "seed", "how"), list(_cases()))
def test_the_one_pass_proof_agrees_with_its_oracle_and_the_exact_checks(spark, tmp_path, order,
                                                                         seed, how):
    needs_the_scan(spark, order)
    run = random_run(order, seed)
    if how is not None:
        run = tamper(run, how, seed)
    files = write_case(tmp_path / "run", run)
    full = verify.verify(spark, files).as_json()
    if full["proof"] == "exact checks":  # verify ran them: that report is theirs
        exact = full
    else:
        exact = verify.Report([])
        verify._verify_exact(spark, files, verify.FIRST_ROWS, exact, lambda name: None)
        exact = exact.as_json()
    assert exact["order"] == order
    if how is None:
        assert exact["verdict"] == "VERIFIED", exact["checks"]
    if how in FIRES:
        assert exact["verdict"] == "VIOLATED"  # each is a fault in any order

    narrow = schema.narrow_records(schema.read_records(spark, files))
    pipeline = verify._summary_facts(spark, narrow, files, verify.FIRST_ROWS, verify.Report([]), order)
    oracle = fold_oracle.SummaryFold(fold_oracle.run_summary(fold_oracle.narrow_rows(narrow),
                                                             order=order))
    peers = sorted(PEERS)
    signals = _signals(pipeline, peers)
    assert signals == _signals(oracle, peers)
    fired = {"marks": bool(signals["marks"]), "mismatch": bool(signals["mismatch"])}
    if how in FIRES:
        assert fired[FIRES[how]], signals
    if how == "swap":
        assert fired["marks"] == (exact["verdict"] == "VIOLATED"), signals
    if how is None:
        assert not any(fired.values()), signals

    result = verify.Report([])
    settled = verify._verify_fast(spark, files, verify.FIRST_ROWS, result, lambda name: None,
                                  order=order)
    assert settled == (not any(fired.values())), result.as_json()
    if settled:
        assert result.verdict.value == exact["verdict"] == "VERIFIED"
    assert full["verdict"] == exact["verdict"] and full["proof"] == ("one pass" if settled else "exact checks")


# --------------------------------------------------------------------------- a class's run

CLASS_FROMS = ("10.0.0.2:5000", "10.0.0.10:5000", "10.0.0.3:5001", "127.0.0.1:5002")
"""Origins as a class's tools write them: as strings "10.0.0.10" sorts before "10.0.0.2", the
reverse of TOM's pid order, and the handout's order compares them as written."""
CLASS_FILES = ("alice.txt", "bob.txt", "p2.jsonl")


def random_class(seed: int, n: int = 12) -> dict[str, list[tuple[int, str, str]]]:
    """A healthy class run: ``n`` distinct ``(clock, from)`` with texts holding the wire's dashes
    and colons, every file (two tools' text outputs, a TOM peer's handout JSON Lines) delivering
    all of them sorted by ``(clock, from as written)``."""
    rng = random.Random(seed)
    keys: set[tuple[int, str]] = set()
    while len(keys) < n:
        keys.add((rng.randint(1, n // 2), rng.choice(CLASS_FROMS)))
    msgs = [(c, o, f"m{i}-{rng.randint(0, 99)}: x") for i, (c, o) in enumerate(sorted(keys))]
    return {f: list(msgs) for f in CLASS_FILES}


def tamper_class(run: dict[str, list[tuple]], how: str, seed: int) -> dict[str, list[tuple]]:
    """One fault in one file (``number``: a message's clock)."""
    rng = random.Random(seed * 7919 + TAMPERS.index(how))
    name = rng.choice(CLASS_FILES)
    msgs = list(run[name])
    i = rng.randrange(len(msgs) - 1)
    if _moved(msgs, how, i, rng):
        pass
    elif how == "text":
        msgs[i] = (msgs[i][0], msgs[i][1], "tampered")
    else:
        msgs[i] = (msgs[i][0] + 1, *msgs[i][1:])
    return dict(run, **{name: msgs})


def write_class_run(folder, run: dict[str, list[tuple]]):
    folder.mkdir()
    for name, msgs in run.items():
        if name.endswith(".txt"):
            (folder / name).write_text(text_output(msgs, acks=name == "alice.txt"))
        else:
            (folder / name).write_text("".join(
                json.dumps(handout_record("127.0.0.1:5002", i + 1, c, o, t)) + "\n"
                for i, (c, o, t) in enumerate(msgs)))
    return folder


@pytest.mark.parametrize(("seed", "how"), [(s, h) for s in SEEDS for h in (None, *TAMPERS)])
def test_the_one_pass_proof_of_a_class_agrees_with_its_oracle_and_the_exact_checks(spark, tmp_path,
                                                                                  seed, how):
    """A class's text outputs and handout JSON Lines, clean and tampered: as for TOM's runs above,
    in the handout's order."""
    run = random_class(seed)
    if how is not None:
        run = tamper_class(run, how, seed)
    folder = write_class_run(tmp_path / "class", run)
    inputs = schema.resolve_inputs(spark, [str(folder)])
    files, texts = inputs.files, inputs.texts
    full = verify.verify(spark, [str(folder)]).as_json()
    if full["proof"] == "exact checks":  # verify ran them: that report is theirs
        exact = full
    else:
        exact = verify.Report([])
        verify._verify_exact(spark, files, verify.FIRST_ROWS, exact, lambda name: None, texts=texts)
        exact = exact.as_json()
    assert exact["order"] == "handout"
    assert exact["verdict"] == ("VERIFIED" if how is None else "VIOLATED"), exact["checks"]

    narrow = schema.narrow_parsed(verify._parsed_inputs(spark, files, texts))
    pipeline = verify._summary_facts(spark, narrow, files, verify.FIRST_ROWS, verify.Report([]),
                                     "handout", texts)
    oracle = fold_oracle.SummaryFold(fold_oracle.run_summary(fold_oracle.narrow_rows(narrow),
                                                             order="handout"))
    peers = sorted(p["peer"] for p in oracle.peers())
    assert len(peers) == len(CLASS_FILES)
    signals = _signals(pipeline, peers)
    assert signals == _signals(oracle, peers)
    fired = {"marks": bool(signals["marks"]), "mismatch": bool(signals["mismatch"])}
    if how == "swap":
        assert fired["marks"], signals
    elif how is not None:
        assert fired[FIRES[how]], signals
    else:
        assert not any(fired.values()), signals

    result = verify.Report([])
    settled = verify._verify_fast(spark, files, verify.FIRST_ROWS, result, lambda name: None,
                                  order="handout", texts=texts)
    assert settled == (how is None), result.as_json()
    assert full["verdict"] == exact["verdict"] and full["proof"] == ("one pass" if settled else "exact checks")
