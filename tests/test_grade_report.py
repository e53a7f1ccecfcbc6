"""The report of `tom grade` without Spark: the points table, merging verdicts, scoring, the
space-time diagram."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from tom.grade import diagram, report

T, P1, P2 = "localhost/127.0.0.1:6000", "localhost/127.0.0.1:6001", "localhost/127.0.0.1:6002"


# --------------------------------------------------------------------------- points

def test_default_points_are_the_contracts():
    points = report.load_points()
    assert list(points)[:10] == ["one-each-way", "clock", "tie", "premature-ack", "all-acks", "head",
                                 "cascade", "sends-acks", "load", "quit"]
    assert (points["premature-ack"], points["cascade"], points["tie"]) == (2, 2, 1)


def test_a_teachers_points_file_replaces_the_defaults(tmp_path):
    path = tmp_path / "points.toml"
    path.write_text("[points]\ntie = 3\nclock = 0.5\n")
    assert report.load_points(path) == {"tie": 3.0, "clock": 0.5}
    path.write_text("[points]\ntie = -1\n")
    with pytest.raises(ValueError, match="tie"):
        report.load_points(path)


def test_tests_come_in_the_points_order_then_by_name():
    assert report.test_order({"b": 1, "a": 1, "c": 1}, {"a", "b", "z", "y"}) == ["b", "a", "y", "z"]


# --------------------------------------------------------------------------- merging

def result(verdict="pass", **kw):
    return {"student": "ann", "test": "tie", "repeat": 1, "verdict": verdict, "expected": "", "got": "",
            "detail": "", "seconds": 1.0, "tail": ["bye"], "tool": {"from": T, "port": 6000},
            "peers": [{"from": P1, "port": 6001}, {"from": P2, "port": 6002}], **kw}


def check(ok=True, line_no=None, expected=None, found=None, reason=None):
    return SimpleNamespace(ok=ok, line_no=line_no, expected=expected, found=found, reason=reason,
                           tool_messages=2, peer_messages=3)


def test_the_engines_verdict_wins_unless_it_is_pass():
    run = report.merge(result("hung", expected="an exit", got="still running"),
                       check(False, 2, "x", "y", "out of order"))
    assert (run["verdict"], run["expected"], run["got"]) == ("hung", "an exit", "still running")
    assert run["file_check"]["line"] == 2
    assert report.merge(result(), check())["verdict"] == "pass"
    assert report.merge(result(), None)["verdict"] == "pass"  # the file check did not run


def test_a_pass_with_a_wrong_file_fails_naming_the_line():
    run = report.merge(result(), check(False, 3, "3 ACKs on MESSAGE-2-a:1-x", "missing", "missing"))
    assert run["verdict"] == "fail"
    assert run["expected"] == "tool.out line 3: 3 ACKs on MESSAGE-2-a:1-x"
    assert run["got"] == "tool.out line 3: missing"
    assert run["detail"].startswith("missing (tool.out holds 2 message lines, the TOM peers delivered 3)")


def test_peers_that_disagree_are_flagged_as_the_graders_fault():
    run = report.merge(result(), check(False, None, None, None, "peers disagree (a grader bug: ...)"))
    assert run["verdict"] == report.PEERS_DISAGREE and "grader bug" in run["detail"]


# --------------------------------------------------------------------------- scoring

def runs_of(*verdicts):
    return [report.merge(result(v, repeat=i + 1), None) for i, v in enumerate(verdicts)]


def test_a_test_scores_points_times_pass_rate_and_the_total_sums():
    graded = report.grade(["ann"], {("ann", "tie"): runs_of("pass", "fail", "pass"),
                                    ("ann", "cascade"): runs_of("pass", "pass", "pass")},
                          {}, {"tie": 1, "cascade": 2}, ["tie", "cascade"])
    tie, cascade = graded["ann"]["tests"]["tie"], graded["ann"]["tests"]["cascade"]
    assert (tie["score"], tie["pass_rate"], tie["passed"], tie["repeats"]) == (0.67, 0.6667, 2, 3)
    assert cascade["score"] == 2 and graded["ann"]["total"] == 2.67


def test_a_missing_run_counts_as_not_passed_and_a_failed_build_scores_nothing():
    graded = report.grade(["ann", "bob"], {("ann", "tie"): runs_of("pass", "pass"),
                                           ("bob", "tie"): runs_of("pass")},
                          {"ann": {"ok": False, "seconds": 1, "tail": ["error: ';' expected"]},
                           "bob": {"ok": True, "seconds": 1, "tail": []}},
                          {"tie": 1}, ["tie"])
    assert graded["ann"]["did_not_build"] and graded["ann"]["total"] == 0
    assert [r["verdict"] for r in graded["ann"]["tests"]["tie"]["runs"]] == ["did-not-build"] * 2
    assert graded["ann"]["tests"]["tie"]["runs"][0]["tail"] == ["error: ';' expected"]
    assert [r["verdict"] for r in graded["bob"]["tests"]["tie"]["runs"]] == ["pass", report.NO_RESULT]
    assert graded["bob"]["total"] == 0.5


# --------------------------------------------------------------------------- the diagram

def frame(t, d, peer, other, line):
    return {"t": t, "dir": d, "peer": peer, "other": other, "line": line}


FRAMES = [
    frame(0.10, "in", P1, T, f"MESSAGE-1-{T}-hello"),
    frame(0.12, "out", P1, T, f"ACK-1-{T}"),
    frame(0.13, "out", P1, P2, f"ACK-1-{T}"),
    frame(0.14, "in", P2, P1, f"ACK-1-{T}"),
    frame(0.20, "out", P2, P2, "MESSAGE-2-x:1-<b>&"),
]


def parsed(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, or this raises


def test_the_diagram_is_svg_with_a_line_per_process_and_an_arrow_per_frame():
    svg = diagram.svg(FRAMES, T, [P1, P2])
    root = parsed(svg)
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{ns}line")
    lifelines = [ln for ln in lines if ln.get("x1") == ln.get("x2")]
    arrows = [ln for ln in lines if ln.get("marker-end")]
    assert len(lifelines) == 3
    # the in from the tool, the out to the tool, the P1 -> P2 pair drawn once; the self-send a loop
    assert len(arrows) == 3 and len(root.findall(f"{ns}path")) == 1
    assert sum(ln.get("stroke-dasharray") is not None for ln in arrows) == 2  # the tool's ends
    assert "&lt;b&gt;&amp;" in svg and "tool" in svg


def test_a_paired_frame_goes_from_the_out_row_to_the_in_row():
    root = parsed(diagram.svg(FRAMES[2:4], T, [P1, P2]))
    (arrow,) = [ln for ln in root.iter("{http://www.w3.org/2000/svg}line") if ln.get("marker-end")]
    assert float(arrow.get("y2")) > float(arrow.get("y1")) and arrow.get("stroke-dasharray") is None
    assert float(arrow.get("x2")) > float(arrow.get("x1"))  # P1's column is left of P2's


def test_a_long_run_is_capped_with_a_note():
    many = [frame(i / 100, "in", P1, T, f"MESSAGE-{i}-{T}-m{i}") for i in range(250)]
    svg = diagram.svg(many, T, [P1, P2], max_frames=200)
    assert "50 later frames not drawn (first 200 of 250)" in svg
    assert svg.count("marker-end") == 200
    parsed(svg)


def test_labels_are_shortened():
    assert diagram.shorten("x" * 100, 10) == "x" * 9 + "\u2026"
    assert diagram.shorten("short") == "short"


def test_the_report_command_refuses_a_folder_tom_grade_did_not_fill(tmp_path, capsys):
    assert report.main([str(tmp_path)]) == 2
    assert "not a folder that `tom grade` filled" in capsys.readouterr().err


def test_an_unreachable_spark_connect_server_is_one_line_not_a_wait(tmp_path, monkeypatch):
    import socket
    import time

    from tom.grade import report
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SPARK_REMOTE", f"sc://127.0.0.1:{port}")
    started = time.monotonic()
    checks, info = report.file_checks(tmp_path, [{"student": "s", "test": "t", "repeat": 1, "peers": []}], {})
    assert checks == {} and info["file_check"].startswith(f"not run: cannot connect to sc://127.0.0.1:{port}")
    assert time.monotonic() - started < 60  # (the Connect client itself retries for minutes)
