"""A SparkSession for kraftcheck's jobs, with Spark's console noise kept out of kraftcheck's output.

Under `spark-submit` the session already running is used as it is (and left running). Otherwise a
new one is started against `master` (`local[*]`, `local[N]`, `spark://HOST:PORT`, ...): its JVM's
output goes to `spark.log` in the work directory, its driver binds loopback unless the
environment names another address (SPARK_LOCAL_IP), and its executors run this Python
(PYSPARK_PYTHON, unless set): on a cluster, a Python with kraftcheck installed, which is checked
before any work. A local --spark-dir and a spark:// master's address are checked before Spark
starts, so that either fails in a line, at once, not in a Java traceback or after a minute.
"""

import argparse
import contextlib
import logging
import os
import secrets
import socket
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from conformance.outputs import OutputError, unwritable
from model.config import ConfigError


# Keyed data is spread over one partition per core: measured on 2 cores (check --config
# faults, 2026-12-02), 2 partitions beat 4 by 19 %: each search task removes the duplicates among
# its own successors only, so more tasks send more copies to the states' owners.
PARTITIONS_PER_CORE = 1


class SparkOptions(NamedTuple):
    """Where and how a job runs on Spark (`--spark-master`, `--spark-partitions`, `--spark-dir`)."""

    master: str = "local[*]"
    partitions: int | None = None  # default: PARTITIONS_PER_CORE per core of the cluster
    work: str | None = None  # a directory every executor reaches; default: a temporary one here


def spark_options(args: argparse.Namespace) -> SparkOptions | None:
    """The Spark options of a command's arguments, None for the in-process engine."""
    if args.engine != "spark":
        for flag, value in (("--spark-master", args.spark_master != "local[*]"), ("--spark-partitions", args.spark_partitions), ("--spark-dir", args.spark_dir)):
            if value:
                raise ConfigError(f"{flag} needs --engine spark")
        return None
    if args.spark_partitions is not None and not 1 <= args.spark_partitions <= 100_000:
        raise ConfigError(f"--spark-partitions must be between 1 and 100000, got {args.spark_partitions}")
    if not args.spark_master.strip():
        raise ConfigError("--spark-master must not be empty")
    if args.spark_dir is not None:
        _check_spark_dir(args.spark_dir)
    return SparkOptions(args.spark_master, args.spark_partitions, args.spark_dir)


def _check_spark_dir(directory: str) -> None:
    """Refuse a local --spark-dir (a path, or a file: URL) that cannot take a new subdirectory,
    before Spark starts: Spark would fail later with a Java traceback. Another file system's URL
    (hdfs://...) is left to Spark, whose failure to write there is reported as such."""
    if not directory.strip():
        raise ConfigError("--spark-dir must not be empty")
    parts = urllib.parse.urlsplit(directory)
    if parts.scheme not in ("", "file"):
        return
    problem = unwritable(Path(parts.path if parts.scheme else directory))
    if problem:
        raise OutputError(f"--spark-dir {directory}: {problem}")


class SparkRun(NamedTuple):
    session: object  # the pyspark.sql.SparkSession
    work: str  # this run's checkpoints and tables: a directory (or URL) every executor can reach
    partitions: int  # how many partitions keyed data is spread over


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no Java, no pyspark, a master that does not answer, executors
    that cannot run kraftcheck) or a job failed; the message says why."""


EXECUTOR_WAIT_SECONDS = 120.0  # how long the first job may wait for an executor (a cluster's start in seconds)
MASTER_CONNECT_SECONDS = 3.0  # how long a standalone master may take to accept a connection


def check_master_reachable(master: str) -> None:
    """Refuse a standalone master (spark://HOST:PORT, several separated by commas for high
    availability) none of whose addresses accepts a connection. Spark's client would try to
    register three times, 20 s apart (fixed in Spark, no setting shortens it), then report a
    consequence such as a stopped SparkContext. Other masters (local[N], yarn, k8s://...) pass."""
    if not master.startswith("spark://"):
        return
    failures = []
    for address in master.removeprefix("spark://").split(","):
        try:
            parts = urllib.parse.urlsplit(f"//{address}")
            host, port = parts.hostname, parts.port
        except ValueError:
            host = port = None
        if not host or port is None:
            raise ConfigError(f"--spark-master {master}: expected spark://HOST:PORT, or several HOST:PORT separated by commas")
        try:
            with socket.create_connection((host, port), timeout=MASTER_CONNECT_SECONDS):
                return
        except TimeoutError:
            failures.append((address, f"no answer within {MASTER_CONNECT_SECONDS:.0f} s"))
        except OSError as error:
            failures.append((address, (error.strerror or str(error)).lower()))
    reasons = failures[0][1] if len(failures) == 1 else "; ".join(f"{address}: {reason}" for address, reason in failures)
    raise SparkUnavailable(f"cannot reach the Spark master {master}: {reasons}")


def _log_tail(log: Path, lines: int = 3) -> str:
    """The last errors and warnings of Spark's log (not its stack traces), one per line."""
    if not log.exists():
        return ""
    found = [line for line in log.read_text(errors="replace").splitlines() if " ERROR " in line or " WARN " in line]
    return "".join(f"\n  {line}" for line in found[-lines:])


def _killed_reason(log: Path) -> str | None:
    """Why Spark stopped kraftcheck's application itself (every master unresponsive, the master
    removing it), from Spark's log: the job that fails afterwards names only a consequence."""
    if not log.exists():
        return None
    marker = "Application has been killed. Reason: "
    reasons = [line.split(marker, 1)[1].strip() for line in log.read_text(errors="replace").splitlines() if marker in line]
    return reasons[0] if reasons else None


def _message(error: BaseException) -> str:
    """A Spark or Py4J error in one line: the first line of what Java or the executor said."""
    try:
        java = getattr(error, "java_exception", None)  # a Py4JJavaError: Java's own message says more than Py4J's
        text = java.toString() if java is not None else str(error)
    except Exception:  # noqa: BLE001 - a Py4J error whose JVM is gone cannot describe itself
        text = ""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if "Traceback (most recent call last):" in text:  # an executor's Python raised: say what, not only that
        frames = text.rsplit("Traceback (most recent call last):", 1)[1].splitlines()
        raised = next((line.strip() for line in frames if line.strip() and not line[0].isspace()), "")
        first = f"{first.removesuffix(':')}: {raised}" if raised and raised not in first else first
    return first or type(error).__name__


def _check_executors(context, master: str, log: Path) -> None:
    """Fail early and clearly when no executor comes (a master that does not answer, a cluster
    without free workers) or the executors' Python cannot import kraftcheck, rather than hang or
    fail with a remote traceback in the middle of a job."""
    answers: list = []

    def probe(_: int) -> str:
        """Run on an executor (shipped by value: it must not need kraftcheck to be unpickled there)."""
        import sys

        try:
            import model.cluster  # noqa: F401  (kraftcheck's model, with its libraries)
        except Exception as error:  # noqa: BLE001 - reported on the driver, with what the executor lacks
            return f"{sys.executable}: {type(error).__name__}: {error}"
        return ""

    def ask() -> None:
        try:
            context.setJobGroup("kraftcheck-executors", "can the executors run kraftcheck?")
            slices = context.defaultParallelism
            answers.append(context.parallelize(range(slices), slices).map(probe).collect())
        except Exception as error:  # noqa: BLE001 - reported below, on the caller's thread
            answers.append(error)

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(EXECUTOR_WAIT_SECONDS)
    if not answers:
        context.cancelJobGroup("kraftcheck-executors")
        raise SparkUnavailable(f"no executor answered within {EXECUTOR_WAIT_SECONDS:.0f} s at {master}: is the master reachable, with free workers?" + _log_tail(log))
    if isinstance(answers[0], Exception):
        cause = _killed_reason(log) or _message(answers[0])
        raise SparkUnavailable(f"Spark could not run a job at {master}: {cause}" + _log_tail(log))
    problems = sorted(set(answers[0]) - {""})
    if problems:
        raise SparkUnavailable(
            "the executors' Python cannot run kraftcheck (install kraftcheck and its dependencies there, or set PYSPARK_PYTHON; see docs/guide/spark.md): " + "; ".join(problems)
        )


def _set_checkpoint_dir(context, shared: str) -> None:
    """Checkpoints go under `shared`; a --spark-dir Spark cannot write in (an unknown scheme, a
    file system that does not answer) is named with Java's reason, not a Py4J traceback."""
    from py4j.protocol import Py4JError

    try:
        context.setCheckpointDir(f"{shared}/checkpoints")
    except Py4JError as error:
        raise SparkUnavailable(f"Spark cannot create {shared}/checkpoints: {_message(error)}") from None


def spark_error(error: BaseException) -> str | None:
    """A Spark or Py4J error in one line, None for any other error: the command line's last
    resort for one raised outside a job. Only a module already imported can have raised it, so
    the command line need not import pyspark to tell."""
    loaded = [getattr(sys.modules[module], name) for module, name in (("py4j.protocol", "Py4JError"), ("pyspark.errors", "PySparkException")) if module in sys.modules]
    return _message(error) if isinstance(error, tuple(loaded)) else None


class _QuietPy4J(logging.Filter):
    """Py4J logs on the root logger itself (logging.exception), with a traceback, when an interrupt
    cuts a call to the JVM short; kraftcheck reports the interrupt its own way."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


@contextlib.contextmanager
def _py4j_quiet() -> Iterator[None]:
    """Py4J's own logging silenced for a session's whole life, its stop included: an interrupt that
    cuts a call or the gateway's shutdown short makes Py4J log a traceback on the root logger and
    on its own loggers ("Exception occurred while shutting down connection"). Every failure
    reaches kraftcheck as an exception, which it reports its own way."""
    root, py4j = logging.getLogger(), logging.getLogger("py4j")
    quiet, level = _QuietPy4J(), py4j.level
    root.addFilter(quiet)
    py4j.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        root.removeFilter(quiet)
        py4j.setLevel(level)


def raised_while_interrupted(error: BaseException) -> bool:
    """Py4J, closing its sockets after an interrupt cut a call short, can fail itself ("Gateway must
    be connected to send cancel cmd."): that error is the interrupt's, which it carries as context."""
    context = error.__context__
    while context is not None:
        if isinstance(context, KeyboardInterrupt):
            return True
        context = context.__context__
    return False


@contextlib.contextmanager
def _failures_explained(log: Path | None) -> Iterator[None]:
    """A Spark job that fails (an executor's Python raising, Java refusing) ends the command with
    a SparkUnavailable naming the cause and the end of Spark's log, not a Py4J traceback."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        yield
    except (Py4JError, PySparkException) as error:
        if raised_while_interrupted(error):
            raise KeyboardInterrupt from None
        raise SparkUnavailable(f"a Spark job failed: {_message(error)}" + (_log_tail(log) if log else "")) from None


@contextlib.contextmanager
def spark_session(options: SparkOptions, app: str = "kraftcheck") -> Iterator[SparkRun]:
    """A SparkSession for the duration of the block, stopped afterwards unless it was already running.

    `work` is where a cluster's executors share files (a shared or distributed file system: a
    run writes a new subdirectory there and leaves it); by default a local temporary directory,
    removed afterwards, which serves `local[N]` and a cluster on this machine.
    """
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession
    except ImportError as error:
        raise SparkUnavailable(f"pyspark is not installed ({error}); install it with pip install pyspark") from None
    master, partitions, work = options
    active = SparkSession.getActiveSession()
    with _py4j_quiet(), tempfile.TemporaryDirectory(prefix="kraftcheck-spark-") as temporary:
        work_dir = Path(temporary)
        shared = f"{work.rstrip('/')}/kraftcheck-{os.getpid()}-{secrets.token_hex(4)}" if work else str(work_dir / "shared")
        if active is not None:
            context = active.sparkContext
            _set_checkpoint_dir(context, shared)
            with _failures_explained(None):
                yield SparkRun(active, shared, partitions or PARTITIONS_PER_CORE * context.defaultParallelism)
            return
        check_master_reachable(master)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # what executors run; pyspark reads it, not the configuration
        host = os.environ["SPARK_LOCAL_IP"]
        conf = (
            SparkConf()
            .setMaster(master)
            .setAppName(app)
            .set("spark.driver.host", host)
            .set("spark.driver.bindAddress", host)
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.local.dir", str(work_dir / "local"))
            .set("spark.python.worker.reuse", "true")
            .set("spark.executorEnv.SPARK_LOCAL_IP", host)
        )
        log = work_dir / "spark.log"
        try:
            with open(log, "wb") as sink:
                gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink})
            context = SparkContext(conf=conf, gateway=gateway)
        except Exception as error:  # the JVM did not start, or the master did not answer
            raise SparkUnavailable(f"Spark did not start against {master}: {_message(error)}" + _log_tail(log)) from None
        try:
            context.setLogLevel("ERROR")
            _set_checkpoint_dir(context, shared)
            _check_executors(context, master, log)
            with _failures_explained(log):
                yield SparkRun(SparkSession(context), shared, partitions or PARTITIONS_PER_CORE * context.defaultParallelism)
        finally:
            context.stop()
            gateway.shutdown()
            SparkContext._gateway = SparkContext._jvm = None  # the next session starts a JVM of its own
            process = getattr(gateway, "proc", None)
            if process is not None:
                with contextlib.suppress(Exception):
                    process.stdin.close()
                    process.wait(timeout=10)
