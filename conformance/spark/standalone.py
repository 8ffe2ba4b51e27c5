"""A Spark standalone cluster on loopback: a master and workers started from the pyspark installation.

What the tests and the benchmark run the Spark engine against, besides `local[N]`: separate
JVMs talking over the network, each worker launching its own executors, as on a real cluster
(`spark-class org.apache.spark.deploy.master.Master`, `...deploy.worker.Worker`). Every process
is bound to 127.0.0.1, dies with kraftcheck, and is stopped by stop(); a worker can be killed on
purpose (kill_worker) to show that a lost executor changes no result.
"""

import contextlib
import socket
import subprocess
import time
from pathlib import Path

from adapters.process_lifetime import ProcessTree
from conformance.spark.session import SparkUnavailable

LOOPBACK = "127.0.0.1"
START_SECONDS = 90.0  # a JVM starts in seconds; a busy two-core machine may need many


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """A master and `workers` workers of `cores` cores each; use as a context manager."""

    def __init__(self, directory: Path, workers: int = 2, cores: int = 1, memory: str = "2g") -> None:
        self.directory = directory
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port = _free_port()
        self.url = f"spark://{LOOPBACK}:{self.port}"
        self.trees: list[ProcessTree] = []  # the master's, then one per worker
        self.logs: list[Path] = []

    def __enter__(self) -> "StandaloneCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._launch("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(_free_port()))
        self._await(0, "I have been elected leader")
        for index in range(1, self.workers + 1):
            work = self.directory / f"worker-{index}"
            self._launch(
                f"worker-{index}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", LOOPBACK, "--port", str(_free_port()), "--webui-port", str(_free_port())),
                *("--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work)),
                self.url,
            )
        for index in range(1, self.workers + 1):
            self._await(index, "Successfully registered with master")

    def _launch(self, name: str, main_class: str, *arguments: str) -> None:
        home = _spark_home()
        log = self.directory / f"{name}.log"
        tree = ProcessTree()
        environment = {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": LOOPBACK, "SPARK_NO_DAEMONIZE": "1", "SPARK_LOG_DIR": str(self.directory)}
        with open(log, "wb") as sink:
            tree.popen(["bash", str(home / "bin" / "spark-class"), main_class, *arguments], environment=environment, stdout=sink, stderr=sink, stdin=subprocess.DEVNULL)
        self.trees.append(tree)
        self.logs.append(log)

    def _await(self, index: int, line: str) -> None:
        """Wait until process `index` logs `line`; a clear error with its log's end otherwise."""
        deadline = time.monotonic() + START_SECONDS
        log = self.logs[index]
        while time.monotonic() < deadline:
            if line in log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        tail = "".join(f"\n  {text}" for text in log.read_text(errors="replace").splitlines()[-8:])
        raise SparkUnavailable(f"Spark standalone {log.stem} did not start within {START_SECONDS:.0f} s (log {log}):{tail}")

    def kill_worker(self, index: int) -> None:
        """Kill worker `index` (from 1) and its executors at once, as a machine failure would."""
        self.trees[index].kill()

    def stop(self) -> None:
        for tree in reversed(self.trees):
            with contextlib.suppress(Exception):
                tree.kill()
        self.trees = []
