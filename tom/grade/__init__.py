"""`tom grade`: grade a class's handout tools, one rule of the handout at a time.

The engine starts each student's tool in a
pseudo-terminal beside TOM's scripted handout peers, makes each rule's situation happen on purpose,
judges what it can see and writes one run folder per (student, test, repeat):
``docs/grading.md`` and the contract (``result.json``, ``frames.jsonl``, ...) say what is in it.

Modules: `prompts` (the driver's rules, pure), `driver` (the tool in a pty), `links` (which scripted
frame may reach whom now, pure), `stage` (TOM's scripted peers on loopback), `toolfile` (a tool's output
lines), `judges` (each rule's verdict from its evidence, pure), `rules` (each rule's situation),
`trial` (one run of one test), `runner` (builds and trials, side by side), `config` (the class folder and
tom-grade.toml), `ports`, `cli`; then the class report: `report` (verdicts merged with the Spark job's
output-file checks, ``analysis/grade.py``; points, grades.csv/json, the HTML pages) and `diagram` (a
run's space-time diagram).
"""

from __future__ import annotations

TESTS: tuple[str, ...] = ("one-each-way", "clock", "tie", "premature-ack", "all-acks", "head", "cascade",
                          "sends-acks", "load", "quit")
"""The rule tests, in the order they run and are reported."""

EXTRAS: tuple[str, ...] = ("malformed",)
"""Optional tests (``--extras``)."""

VERDICTS: tuple[str, ...] = ("pass", "fail", "did-not-build", "did-not-start", "hung", "crashed")
