"""`tom grade`'s input: one clear line for what is wrong, no traceback; tom-grade.toml read as documented."""

import pytest

from tom.cli import main
from tom.grade.config import fill, load_class


def run(capsys, *argv):
    code = main(["grade", *argv])
    return code, capsys.readouterr().err


def test_a_missing_folder(capsys, tmp_path):
    code, err = run(capsys, str(tmp_path / "nope"), "--run", "x")
    assert code == 2 and err.count("\n") == 1 and "no such folder" in err


def test_no_submissions(capsys, tmp_path):
    code, err = run(capsys, str(tmp_path), "--run", "x")
    assert code == 2 and "no submissions" in err


def test_no_run_command(capsys, tmp_path):
    (tmp_path / "alice").mkdir()
    code, err = run(capsys, str(tmp_path))
    assert code == 2 and "no run command for alice" in err


@pytest.mark.parametrize("toml, says", [
    ("run = \n", "tom-grade.toml"),
    ("runn = 'x'\n", "unknown key 'runn'"),
    ("[prompts]\n'(' = '1'\n", "[prompts]"),
    ("[output]\nline_regex = '^(?P<clock>\\\\d+)$'\n", "named groups"),
    ("from = '127.0.0.1'\n", "{port}"),
])
def test_a_bad_toml_is_one_line(capsys, tmp_path, toml, says):
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "tom-grade.toml").write_text(toml)
    code, err = run(capsys, str(tmp_path), "--run", "x")
    assert code == 2 and err.count("\n") == 1 and says in err, err


def test_an_unknown_test(capsys, tmp_path):
    (tmp_path / "alice").mkdir()
    code, err = run(capsys, str(tmp_path), "--run", "x", "--tests", "tie,nope")
    assert code == 2 and "unknown test 'nope'" in err


def test_toml_overrides(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "tom-grade.toml").write_text(
        'run = "python3 {dir}/t.py {neighbors} {output} {port}"\nbuild = ""\nfrom = "127.0.0.1:{port}"\n'
        '[prompts]\n"(?i)interface" = "{loopback}"\n[menu]\nsend = "s"\n')
    a, b = load_class(tmp_path, "java -cp {dir} Main", "javac {dir}/*.java")
    assert a.run == "java -cp {dir} Main" and a.build == "javac {dir}/*.java"
    assert b.build == "" and b.run.startswith("python3") and b.origin == "127.0.0.1:{port}"
    assert b.rules[0].pattern == "(?i)interface" and b.keys.send == "s"


def test_fill_quotes_each_value():
    assert fill("java -cp {dir}/bin M {port}", dir="/a b", port=5) == "java -cp '/a b'/bin M 5"
