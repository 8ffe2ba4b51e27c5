"""A SparkSession for kraftcheck's jobs, with Spark's console noise kept out of kraftcheck's output.

Under `spark-submit` the session already running is used as it is (and left running). Otherwise a
new one is started against `master` (`local[*]`, `local[N]`, `spark://HOST:PORT`, ...): its JVM's
output goes to `spark.log` in the work directory, its driver binds loopback unless the
environment names another address (SPARK_LOCAL_IP), and its executors run this Python
(PYSPARK_PYTHON, unless set): on a cluster, a Python with kraftcheck installed, which is checked
before any work.
"""

import argparse
import contextlib
import os
import secrets
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from model.config import ConfigError



# Keyed data is spread over twice as many partitions as there are cores: measured on 2 cores
# (check --config faults), 4 partitions beat 2 by 10 % (two tasks per core even out uneven
# ones) and 8 lose 25 % (each task sends its partitions the parts they need: more copies).
PARTITIONS_PER_CORE = 2


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
    return SparkOptions(args.spark_master, args.spark_partitions, args.spark_dir)


class SparkRun(NamedTuple):
    session: object  # the pyspark.sql.SparkSession
    work: str  # this run's checkpoints and tables: a directory (or URL) every executor can reach
    partitions: int  # how many partitions keyed data is spread over


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no Java, no pyspark, a master that does not answer); the message says why."""


def _executor_python() -> str:
    """What an executor's Python says about itself, or the error that stops it from running kraftcheck."""
    try:
        import model.cluster  # noqa: F401  (kraftcheck's model, with its libraries)
    except Exception as error:  # reported on the driver, with what the executor lacks
        return f"{sys.executable}: {type(error).__name__}: {error}"
    return ""


def _check_executors(context) -> None:
    """Fail early and clearly when the executors' Python cannot import kraftcheck, rather than
    with a remote traceback in the middle of a job."""
    problems = sorted(set(context.parallelize(range(context.defaultParallelism), context.defaultParallelism).map(lambda _: _executor_python()).collect()) - {""})
    if problems:
        raise SparkUnavailable(
            "the executors' Python cannot run kraftcheck (install kraftcheck and its dependencies there, or set PYSPARK_PYTHON; see the README): " + "; ".join(problems)
        )


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
    with tempfile.TemporaryDirectory(prefix="kraftcheck-spark-") as temporary:
        work_dir = Path(temporary)
        shared = f"{work.rstrip('/')}/kraftcheck-{os.getpid()}-{secrets.token_hex(4)}" if work else str(work_dir / "shared")
        if active is not None:
            context = active.sparkContext
            context.setCheckpointDir(f"{shared}/checkpoints")
            yield SparkRun(active, shared, partitions or PARTITIONS_PER_CORE * context.defaultParallelism)
            return
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
            detail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
            raise SparkUnavailable(f"Spark did not start against {master}: {error}" + "".join(f"\n  {line}" for line in detail)) from None
        try:
            context.setLogLevel("ERROR")
            context.setCheckpointDir(f"{shared}/checkpoints")
            _check_executors(context)
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
