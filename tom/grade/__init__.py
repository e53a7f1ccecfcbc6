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

from collections.abc import Iterable

TESTS: tuple[str, ...] = ("one-each-way", "clock", "tie", "premature-ack", "all-acks", "head", "cascade",
                          "sends-acks", "load", "quit")
"""The rule tests, in the order they run and are reported."""

EXTRAS: tuple[str, ...] = ("malformed",)
"""Optional tests (``--extras``)."""

GRADER_ERROR = "grader-error"
"""The verdict of a run the grader itself failed on (its folder unwritable, a bug of tom grade): the
tool's fault it is not; it scores as not passed, and tom grade and its report exit 1 to say so."""

GRADER_ERROR_DETAIL = "the grader failed on this run, not the tool: grade this test again"
"""What a grader-error run's ``detail`` begins with."""

VERDICTS: tuple[str, ...] = ("pass", "fail", "did-not-build", "did-not-start", "hung", "crashed", GRADER_ERROR)

PEERS_DISAGREE = "peers-disagree"
"""The report's verdict of a run whose TOM peers' files disagree: a grader bug, scored as not passed."""


def grader_faults(runs: Iterable[tuple[str, str]]) -> str:
    """What to say of the runs, ``(test, final verdict)``, that failed in the grader (:data:`GRADER_ERROR`,
    :data:`PEERS_DISAGREE`), or "" when none did."""
    failed = [(test, verdict) for test, verdict in runs if verdict in (GRADER_ERROR, PEERS_DISAGREE)]
    if not failed:
        return ""
    tests = ",".join(dict.fromkeys(test for test, _ in failed))
    kinds = ", ".join(sorted({verdict for _, verdict in failed}))
    return (f"{len(failed)} run{'s' if len(failed) > 1 else ''} failed in the grader, not in the tools "
            f"({kinds}), scored as not passed: grade again with --tests {tests}")
