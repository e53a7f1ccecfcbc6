"""The mutants of the two handout tools, one per rule, made by exact string replacement.

Each mutant is the unmutated source with a few replacements, each `old` text occurring exactly once in
that source (else `MutantError`): a mutant can never silently equal its original, and an edit of the
original that moves a mutated line makes this script fail at once instead of producing a healthy
"mutant".

    python tests/grade_class/mutants.py            # check every replacement still applies
    python tests/grade_class/mutants.py java tie   # print one mutant's source

The rules are the names of `tom grade`'s tests (see /work/contract/grade-contract.md): each mutant
should fail the test of its rule and pass every other rule test.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

SOURCES: dict[str, Path] = {
    "java": HERE.parent / "handout_peer" / "HandoutPeer.java",
    "python": HERE / "python_tool" / "tool.py",
}

RULES = ("premature-ack", "cascade", "tie", "clock", "all-acks", "head")

# What each mutant does, for the README and the folders' ABOUT.txt.
WHAT = {
    "premature-ack": "drops an ACK that comes before its MESSAGE (\"Got an ACK without a message\"), "
                     "so that message never reaches n ACKs",
    "cascade": "releases at most one ready message per received frame instead of every ready one",
    "tie": "breaks ties on the clock the wrong way: the larger from first",
    "clock": "does not advance its clock past a received one: on a MESSAGE clock = clock + 1, not max + 1",
    "all-acks": "delivers a message once n - 1 ACKs came (as if the sender did not ACK its own message), "
                "still writing 'n ACKs' in its line, and ignores the late last ACK",
    "head": "delivers any entry that has its MESSAGE and all its ACKs, not only the head",
}

Replacement = tuple[str, str]

MUTANTS: dict[str, dict[str, list[Replacement]]] = {
    "java": {
        "premature-ack": [(
            "            if (e == null) { // premature ACK: reserve the entry until the MESSAGE arrives\n"
            "                e = new Entry(msgClock, msgFrom);\n"
            "                pending.put(key, e);\n"
            "            }\n",
            "            if (e == null) {\n"
            "                System.err.println(\"Got an ACK without a message: ACK-\" + msgClock + \"-\" + msgFrom);\n"
            "                return;\n"
            "            }\n",
        )],
        "cascade": [(
            "            while (!pending.isEmpty()) {\n"
            "                Entry head = pending.firstEntry().getValue();\n",
            "            if (!pending.isEmpty()) {\n"
            "                Entry head = pending.firstEntry().getValue();\n",
        )],
        "tie": [(
            "return c != 0 ? c : from.compareTo(o.from);",
            "return c != 0 ? c : o.from.compareTo(from);",
        )],
        "clock": [(
            "clock = Math.max(clock, msgClock) + 1;",
            "clock = clock + 1;",
        )],
        # n - 1 ACKs are enough (as if the sender did not ACK its own message, the handout's "If we
        # didn't do that"); the line written says n, the number the handout says a delivered message has;
        # the late last ACK of a message already output is ignored. So only the waiting is wrong.
        "all-acks": [
            ("head.acks < neighbors.size()) return;",
             "head.acks < neighbors.size() - 1) return;"),
            ("                String line = head.describe();\n",
             "                String line = neighbors.size() + \" ACKs on \" + head.message();\n"),
            ("    final TreeMap<Key, Entry> pending = new TreeMap<>();\n",
             "    final TreeMap<Key, Entry> pending = new TreeMap<>();\n"
             "    final Set<Key> delivered = new HashSet<>(); // their last ACK comes late: ignore it\n"),
            ("            Key key = new Key(msgClock, msgFrom);\n",
             "            Key key = new Key(msgClock, msgFrom);\n"
             "            if (delivered.contains(key)) return;\n"),
            ("                pending.pollFirstEntry();\n",
             "                delivered.add(pending.pollFirstEntry().getKey());\n"),
        ],
        "head": [(
            "            while (!pending.isEmpty()) {\n"
            "                Entry head = pending.firstEntry().getValue();\n"
            "                if (head.text == null || head.acks < neighbors.size()) return;\n"
            "                pending.pollFirstEntry();\n",
            "            for (Iterator<Entry> it = pending.values().iterator(); it.hasNext(); ) {\n"
            "                Entry head = it.next();\n"
            "                if (head.text == null || head.acks < neighbors.size()) continue;\n"
            "                it.remove();\n",
        )],
    },
    "python": {
        "premature-ack": [(
            "        if entry is None:\n"
            "            # a premature ACK: reserve the entry, its MESSAGE fills it in later\n"
            "            entry = self._insert(key)\n",
            "        if entry is None:\n"
            "            print(f\"Got an ACK without a message: ACK-{clock}-{sender}\", file=sys.stderr)\n"
            "            return []\n",
        )],
        "cascade": [(
            "        while self.order and self._ready(self.order[0]):\n",
            "        if self.order and self._ready(self.order[0]):\n",
        )],
        "tie": [(
            "    return a[1] < b[1]\n",
            "    return a[1] > b[1]\n",
        )],
        "clock": [(
            "self.clock = max(self.clock, clock) + 1",
            "self.clock = self.clock + 1",
        )],
        "all-acks": [
            ("entry.acks >= self.n\n",
             "entry.acks >= self.n - 1\n"),
            ("            self.output.write(entry.line() + \"\\n\")\n",
             "            self.output.write(f\"{self.pending.n} ACKs on MESSAGE-{entry.clock}-{entry.sender}-{entry.text}\\n\")\n"),
            ("        self.order = []  # the keys, sorted with comes_before\n",
             "        self.order = []  # the keys, sorted with comes_before\n"
             "        self.delivered = set()  # their last ACK comes late: ignore it\n"),
            ("        entry = self.entries.get(key)\n"
             "        if entry is None:\n"
             "            # a premature ACK",
             "        if key in self.delivered:\n"
             "            return []\n"
             "        entry = self.entries.get(key)\n"
             "        if entry is None:\n"
             "            # a premature ACK"),
            ("        return self.entries.pop(key)\n",
             "        self.delivered.add(key)\n"
             "        return self.entries.pop(key)\n"),
        ],
        "head": [(
            "        while self.order and self._ready(self.order[0]):\n"
            "            delivered.append(self._pop(self.order[0]))\n",
            "        for key in list(self.order):\n"
            "            if self._ready(key):\n"
            "                delivered.append(self._pop(key))\n",
        )],
    },
}

# The Java reference with one semicolon missing: a submission that does not compile.
DOES_NOT_COMPILE: list[Replacement] = [(
    "    long clock = 0;\n",
    "    long clock = 0\n",
)]


class MutantError(Exception):
    """A replacement's `old` text is not in the source exactly once."""


def apply(source: str, replacements: list[Replacement], what: str = "mutant") -> str:
    """`source` with every (old, new) applied; each old must occur exactly once, and differ from new."""
    if not replacements:
        raise MutantError(f"{what}: no replacements")
    for old, new in replacements:
        count = source.count(old)
        if count != 1:
            raise MutantError(f"{what}: expected exactly one occurrence, found {count}, of:\n{old}")
        if old == new:
            raise MutantError(f"{what}: a replacement that changes nothing:\n{old}")
        source = source.replace(old, new)
    return source


def original(tool: str) -> str:
    return SOURCES[tool].read_text(encoding="utf-8")


def mutant_source(tool: str, rule: str) -> str:
    return apply(original(tool), MUTANTS[tool][rule], f"{tool} {rule}")


def does_not_compile_source() -> str:
    return apply(original("java"), DOES_NOT_COMPILE, "java does-not-compile")


def check_all() -> int:
    """Make every mutant once; the number made."""
    made = 0
    for tool, table in MUTANTS.items():
        if set(table) != set(RULES):
            raise MutantError(f"{tool}: rules {sorted(table)} are not {sorted(RULES)}")
        for rule in RULES:
            mutant_source(tool, rule)
            made += 1
    does_not_compile_source()
    return made + 1


def main(argv: list[str]) -> int:
    if not argv:
        print(f"{check_all()} sources made, every replacement found exactly once")
        return 0
    if len(argv) == 2 and argv[0] in MUTANTS and argv[1] in RULES:
        sys.stdout.write(mutant_source(argv[0], argv[1]))
        return 0
    print(f"usage: mutants.py [{'|'.join(MUTANTS)} {'|'.join(RULES)}]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
