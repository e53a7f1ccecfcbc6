"""The whole report on a class folder written by hand: two students, three tests, two repeats, one
build failure, one run the ENGINE failed and one whose tool.out has a line out of place. The folder
is input for the report only (the ENGINE writes the real ones)."""

from __future__ import annotations

import csv
import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

pytest.importorskip("pyspark")

from test_grade_report_spark import spark  # noqa: E402,F401 -- the module's Spark session

from tom.grade import report  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("analysis-1")]  # (as test_grade_report_spark)

TOOL, P1, P2 = "localhost/127.0.0.1:6000", "localhost/127.0.0.1:6001", "localhost/127.0.0.1:6002"
PEERS = [{"from": P1, "port": 6001}, {"from": P2, "port": 6002}]
MSGS = [(1, TOOL, "hello"), (1, P1, "hi"), (2, P2, "a-b: c"), (3, TOOL, "bye")]
PLANTED_LINE = 3


def lines(msgs, n=3):
    return "".join(f"{n} ACKs on MESSAGE-{c}-{s}-{t}\n" for c, s, t in msgs)


def frames(msgs):
    out = []
    for i, (c, s, t) in enumerate(msgs):
        line = f"MESSAGE-{c}-{s}-{t}"
        if s == TOOL:
            out += [{"t": i + 0.1, "dir": "in", "peer": p, "other": TOOL, "line": line} for p in (P1, P2)]
        else:
            out.append({"t": i + 0.1, "dir": "out", "peer": s, "other": TOOL, "line": line})
        out += [{"t": i + 0.2, "dir": "out", "peer": p, "other": TOOL, "line": f"ACK-{c}-{s}"} for p in (P1, P2)]
    return [json.dumps(f) for f in out]


def write_run(out: Path, student, test, repeat, verdict="pass", tool_msgs=MSGS, **result):
    run = out / "runs" / student / test / str(repeat)
    (run / "peers").mkdir(parents=True)
    record = {"student": student, "test": test, "repeat": repeat, "verdict": verdict, "expected": "",
              "got": "", "detail": "", "seconds": 2.5, "tail": ["Delivered: MESSAGE-3-...", "bye"],
              "tool": {"from": TOOL, "port": 6000}, "peers": PEERS, **result}
    (run / "result.json").write_text(json.dumps(record))
    if verdict != "did-not-build":
        (run / "tool.out").write_text(lines(tool_msgs))
        for i in range(len(PEERS)):
            (run / "peers" / f"{i}.out").write_text(lines(MSGS))
        (run / "frames.jsonl").write_text("\n".join(frames(MSGS)) + "\n")
    return run


@pytest.fixture
def klass(tmp_path):
    """OUT of a graded class: ann builds (one-each-way passes twice, tie fails its second repeat by
    the ENGINE, cascade's first repeat has lines 3 and 4 of tool.out swapped); ben does not build."""
    out = tmp_path / "OUT"
    (out / "build").mkdir(parents=True)
    (out / "build" / "ann.json").write_text(json.dumps({"ok": True, "seconds": 1.2, "tail": []}))
    (out / "build" / "ben.json").write_text(json.dumps(
        {"ok": False, "seconds": 0.8, "tail": ["Main.java:3: error: ';' expected", "1 error"]}))
    for r in (1, 2):
        write_run(out, "ann", "one-each-way", r)
        write_run(out, "ben", "tie", r, verdict="did-not-build", expected="the submission builds",
                  got="javac failed")
    write_run(out, "ann", "tie", 1)
    write_run(out, "ann", "tie", 2, verdict="fail",
              expected=f"MESSAGE-1-{TOOL}-hello delivered before MESSAGE-1-{P1}-hi",
              got=f"MESSAGE-1-{P1}-hi first", detail="the smaller from first on a tie")
    write_run(out, "ann", "cascade", 1, tool_msgs=[MSGS[0], MSGS[1], MSGS[3], MSGS[2]])
    write_run(out, "ann", "cascade", 2)
    return out


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href"]


def links(path: Path) -> list[str]:
    parser = Links()
    parser.feed(path.read_text())
    return parser.hrefs


def test_the_report_of_a_class(klass, spark, capsys):
    assert report.build(klass) == 0
    printed = capsys.readouterr().out.splitlines()

    with open(klass / "grades.csv") as f:
        rows = list(csv.reader(f))
    assert rows == [["student", "one-each-way", "tie", "cascade", "total"],
                    ["ann", "1", "0.5", "1", "2.5"],
                    ["ben", "0", "0", "0", "0"]]

    grades = json.loads((klass / "grades.json").read_text())
    assert grades["file_check"] == "ran" and grades["spark_seconds"] > 0
    assert grades["max_total"] == 4
    ann = grades["students"]["ann"]["tests"]
    assert [r["verdict"] for r in ann["tie"]["runs"]] == ["pass", "fail"]
    assert ann["tie"]["runs"][1]["got"] == f"MESSAGE-1-{P1}-hi first"   # the ENGINE's words kept
    planted = ann["cascade"]["runs"][0]
    assert (planted["engine_verdict"], planted["verdict"]) == ("pass", "fail")
    assert planted["file_check"]["line"] == PLANTED_LINE
    assert planted["expected"] == f"tool.out line {PLANTED_LINE}: 3 ACKs on MESSAGE-2-{P2}-a-b: c"
    assert planted["got"] == f"tool.out line {PLANTED_LINE}: 3 ACKs on MESSAGE-3-{TOOL}-bye"
    assert ann["cascade"]["pass_rate"] == 0.5 and ann["cascade"]["score"] == 1
    ben = grades["students"]["ben"]
    assert ben["did_not_build"] and ben["total"] == 0
    assert {r["verdict"] for t in ben["tests"].values() for r in t["runs"]} == {"did-not-build"}

    index = klass / "index.html"
    pages = {unquote(h).split("#")[0] for h in links(index) if h.startswith("students/")}
    assert pages == {"students/ann.html", "students/ben.html"}
    assert all((klass / p).is_file() for p in pages)
    ann_page = (klass / "students" / "ann.html").read_text()
    assert ann_page.count("<svg") == 2                              # tie #2 and cascade #1
    assert f"tool.out line {PLANTED_LINE}:" in ann_page and "../index.html" in links(klass / "students/ann.html")
    ben_page = (klass / "students" / "ben.html").read_text()
    assert "<svg" not in ben_page and "&#x27;;&#x27; expected" in ben_page

    assert printed[0].startswith("ann: 2.5/4  ") and "cascade 1/2 (fail)" in printed[0]
    assert printed[1] == "ben: 0/4  did not build"
    assert printed[-1] == f"report: {index}"


def test_a_students_line_form_is_used_for_their_file(tmp_path, spark):
    out = tmp_path / "OUT"
    run = write_run(out, "cy", "tie", 1)
    (run / "tool.out").write_text("".join(f"{s} said {t} at {c}\n" for c, s, t in MSGS))
    form = r"^(?P<sender>\S+) said (?P<text>.*) at (?P<clock>\d+)$"
    assert report.build(out, line_regex={"cy": form}) == 0
    grades = json.loads((out / "grades.json").read_text())
    assert grades["students"]["cy"]["tests"]["tie"]["runs"][0]["verdict"] == "pass"
    assert report.build(out) == 0  # read in the handout's form, the same file is wrong at line 1
    grades = json.loads((out / "grades.json").read_text())
    assert grades["students"]["cy"]["tests"]["tie"]["runs"][0]["expected"].startswith("tool.out line 1:")


def test_the_report_command_scores_a_graded_folder_again_with_other_points(klass, spark, capsys):
    points = klass.parent / "my-points.toml"
    points.write_text("[points]\none-each-way = 2\ntie = 2\ncascade = 4\n")
    assert report.main([str(klass), "--points", str(points)]) == 0
    with open(klass / "grades.csv") as f:
        assert list(csv.reader(f))[1:] == [["ann", "2", "1", "2", "5"], ["ben", "0", "0", "0", "0"]]
    assert capsys.readouterr().out.splitlines()[0].startswith("ann: 5/8")
