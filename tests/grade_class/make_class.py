"""Write a class folder of handout-tool submissions for `tom grade`: the subjects that prove grading works.

    python tests/grade_class/make_class.py OUT [--size 3|full|20] [--expected]

OUT/<student>/ gets one folder per student, each a normal submission with its own tom-grade.toml:
  size 3     java-ref, python-ref, python-premature-ack
  size full  both references, the 12 mutants (a Java and a Python one per rule) and the 4 broken ones (18)
  size 20    full, and one more copy of each reference under another student name
With --expected, also print (stdout, JSON) what each student should get: the test it must fail (a
mutant), none (a reference), or the verdicts a broken one may get.

Deterministic: the same size writes the same files, byte for byte. OUT may exist; the students'
folders in it are replaced, nothing else is touched.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mutants  # noqa: E402

SIZES = ("3", "full", "20")

JAVA_TOML = (
    "# A Java handout tool: compiled once into bin/, run with the handout's three arguments.\n"
    'build = "javac -d {dir}/bin {dir}/*.java"\n'
    'run = "java -cp {dir}/bin HandoutPeer {neighbors} {output} {port}"\n'
)
PYTHON_TOML = (HERE / "python_tool" / "tom-grade.toml").read_text(encoding="utf-8")

# A mutant's student name says what it gets wrong.
MUTANT_NAMES = {
    "premature-ack": "premature-ack",
    "cascade": "no-cascade",
    "tie": "ties-reversed",
    "clock": "clock-no-max",
    "all-acks": "n-minus-1-acks",
    "head": "no-head",
}

# A test a mutant fails besides its rule's, because that test's situation holds its rule's: the cascade
# needs complete messages behind an unacknowledged head (docs/grading.md, "The tests").
ALSO_FAILS = {"head": ("cascade",)}

# The verdicts a broken submission may get on every test (which one depends on what the grader sees
# first); never "pass".
BROKEN = {
    "broken-hangs": ("python", "hangs", ["hung", "did-not-start", "fail"],
                     "starts like figure 1, then never accepts a connection, never reads the menu again, "
                     "never quits, and ignores SIGTERM/SIGINT/SIGHUP"),
    "broken-exits": ("python", "exits", ["did-not-start", "crashed"],
                     "exits with status 1 at once"),
    "broken-traceback": ("python", "traceback", ["did-not-start", "crashed"],
                         "prints the address list, then raises TypeError on the answer (a traceback)"),
    "broken-no-compile": ("java", None, ["did-not-build"],
                          "the Java reference with a semicolon missing: javac fails"),
}


def students(size: str) -> list[str]:
    """The students of a class of that size, in a fixed order."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, not {size!r}")
    if size == "3":
        return ["java-ref", "python-ref", "python-premature-ack"]
    names = ["java-ref", "python-ref"]
    for tool in ("java", "python"):
        names += [f"{tool}-{MUTANT_NAMES[rule]}" for rule in mutants.RULES]
    names += list(BROKEN)
    if size == "20":
        names += ["java-ref-2", "python-ref-2"]
    return names


def describe(student: str) -> dict:
    """What a student's folder is: kind, tool, the rule it breaks, the verdicts it may get."""
    if student in BROKEN:
        tool, _, verdicts, what = BROKEN[student]
        return {"kind": "broken", "tool": tool, "fails": None, "verdicts": verdicts, "what": what}
    tool, _, rest = student.partition("-")
    if rest in ("ref", "ref-2"):
        return {"kind": "reference", "tool": tool, "fails": None, "verdicts": ["pass"],
                "what": "the unmutated tool"}
    rule = next(r for r, name in MUTANT_NAMES.items() if name == rest)
    return {"kind": "mutant", "tool": tool, "fails": rule, "verdicts": ["fail"], "what": mutants.WHAT[rule],
            "also_fails": list(ALSO_FAILS.get(rule, ())), "may_fail": ["load"]}


def sources(student: str) -> dict[str, str]:
    """The files of a student's folder, name -> text."""
    about = describe(student)
    tool = about["tool"]
    if student == "broken-no-compile":
        files = {"HandoutPeer.java": mutants.does_not_compile_source()}
    elif student in BROKEN:
        folder = BROKEN[student][1]
        files = {"tool.py": (HERE / "broken" / folder / "tool.py").read_text(encoding="utf-8")}
    elif about["kind"] == "mutant":
        name = "HandoutPeer.java" if tool == "java" else "tool.py"
        files = {name: mutants.mutant_source(tool, about["fails"])}
    else:
        name = "HandoutPeer.java" if tool == "java" else "tool.py"
        files = {name: mutants.original(tool)}
    files["tom-grade.toml"] = JAVA_TOML if tool == "java" else PYTHON_TOML
    rule = f"breaks the rule of the test '{about['fails']}'" if about["fails"] else about["kind"]
    files["ABOUT.txt"] = f"{student}: {rule}: {about['what']}.\nMade by tests/grade_class/make_class.py.\n"
    return files


def write_class(out: Path, size: str = "full") -> list[str]:
    """Write the class into out (created if missing); the students written."""
    names = students(size)
    files = {student: sources(student) for student in names}  # every mutant made before anything is written
    out.mkdir(parents=True, exist_ok=True)
    for student in names:
        folder = out / student
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        for name, text in files[student].items():
            (folder / name).write_text(text, encoding="utf-8")
    return names


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the class folder to write")
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--expected", action="store_true",
                        help="print what each student should get, as JSON")
    args = parser.parse_args(argv)
    try:
        names = write_class(args.out, args.size)
    except mutants.MutantError as e:
        print(f"make_class: {e}", file=sys.stderr)
        return 1
    if args.expected:
        print(json.dumps({name: describe(name) for name in names}, indent=2))
    else:
        print(f"wrote {len(names)} students into {args.out}: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
