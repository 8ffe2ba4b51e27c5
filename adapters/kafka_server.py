"""Apache Kafka's server as Maven Central ships it, for a real controller quorum (`kraftcheck
cluster`): the release's jars, resolved by Maven into kraftcheck's cache (nothing of Kafka's is
built), and the commands that format a node's storage, run the node and dump its metadata log,
with Kafka's own classes; and kraftcheck's own two programs (server/Workload.java, the writes
through Kafka's admin client; server/LogDump.java, a metadata log read with Kafka's record
classes), compiled against the release's jars into the same cache.

Every release from 3.3 logs through slf4j 1.7; the class path binds it to slf4j-simple, so a
node writes one plain line per event to its standard output, the Raft client's at DEBUG.
"""

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from adapters.kafka_build import BUILD_TOOLS, SOURCES, build_dir, maven_failure, records_internal, require
from adapters.process_lifetime import die_with_parent
from adapters.registry import AdapterBuildError

SERVER_POM = SOURCES / "server" / "pom.xml"
PROGRAMS = (SOURCES / "server" / "Workload.java", SOURCES / "server" / "LogDump.java")
CLASSPATH = "classpath.txt"
PROGRAM_CLASSES = "classes"
RECORDS_IMPORT = "import org.apache.kafka.common.record."
STAMP = "stamp"
WHAT = "resolve Kafka's server"
HEAP = "-Xmx384m"  # a controller's metadata is small; three of them and kraftcheck fit in a CI machine
LOGGING = (
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.raft=debug",
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.raft.KafkaRaftClient=trace",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ",
    "-Dorg.slf4j.simpleLogger.showThreadName=true",
)


def _stamp(version: str) -> str:
    """What a resolution is made from: the version, the pom's bytes and the programs'."""
    return hashlib.sha256(b"\0".join([f"kafka-server {version}".encode(), SERVER_POM.read_bytes(), *(program.read_bytes() for program in PROGRAMS)])).hexdigest()


def classpath(version: str) -> list[str]:
    """Kafka `version`'s server jars, resolved once by Maven and cached; AdapterBuildError, for
    the user, when Maven cannot resolve them (an unknown version, no Maven Central)."""
    directory = build_dir(version, "kafka-server")
    cached = _cached(directory, version)
    if cached is not None:
        return cached
    require(BUILD_TOOLS, "kraftcheck cluster")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another kraftcheck may be resolving it: wait, then look again
            cached = _cached(directory, version)
            if cached is None:
                _resolve_into(directory, version)
                cached = _cached(directory, version)
    except OSError as error:
        raise AdapterBuildError(f"cannot {WHAT} for Kafka {version} in {directory}: {error}") from None
    if cached is None:
        raise AdapterBuildError(f"cannot {WHAT} for Kafka {version}: Maven wrote a class path whose jars are not there")
    return cached


def _cached(directory: Path, version: str) -> list[str] | None:
    """The cached class path, if it was resolved from this pom and its jars are all there."""
    try:
        if (directory / STAMP).read_text() != _stamp(version):
            return None
        jars = [jar for jar in (directory / CLASSPATH).read_text().strip().split(os.pathsep) if jar]
    except OSError:
        return None
    return jars if jars and all(os.path.exists(jar) for jar in jars) and all((directory / PROGRAM_CLASSES / f"{program.stem}.class").is_file() for program in PROGRAMS) else None


def _resolve_into(directory: Path, version: str) -> None:
    print(f"kraftcheck: resolving Kafka {version}'s server with Maven (cached in {directory})", file=sys.stderr, flush=True)
    started = time.monotonic()
    partial = directory / f"{CLASSPATH}.partial"
    argv = ["mvn", "-B", "-q", "-f", str(SERVER_POM), f"-Dkafka.version={version}", "dependency:build-classpath", f"-Dmdep.outputFile={partial}"]
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        preexec_fn=functools.partial(die_with_parent, os.getpid()),
    )
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise AdapterBuildError(maven_failure(version, done.stdout, done.returncode, WHAT))
    sources, classes = directory / "sources", directory / PROGRAM_CLASSES
    for made in (sources, classes):
        shutil.rmtree(made, ignore_errors=True)
    sources.mkdir()
    for program in PROGRAMS:  # the record classes' package as the release has it
        text = program.read_text()
        (sources / program.name).write_text(text.replace(RECORDS_IMPORT, RECORDS_IMPORT + "internal.") if records_internal(version) else text)
    compiled = subprocess.run(
        ["javac", "-nowarn", "-cp", partial.read_text().strip(), "-d", str(classes), *(str(sources / program.name) for program in PROGRAMS)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        preexec_fn=functools.partial(die_with_parent, os.getpid()),
    )
    if compiled.returncode != 0:
        partial.unlink(missing_ok=True)
        raise AdapterBuildError(f"cannot compile kraftcheck's programs against Kafka {version}'s jars (javac exit {compiled.returncode}):\n{compiled.stdout.strip()[-2000:]}")
    partial.rename(directory / CLASSPATH)
    (directory / STAMP).write_text(_stamp(version))
    print(f"kraftcheck: resolved Kafka {version}'s server in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


def format_command(version: str, properties: Path, cluster_id: str) -> list[str]:
    """Kafka's storage tool formatting the log directory `properties` names, for `cluster_id`."""
    return ["java", HEAP, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", os.pathsep.join(classpath(version)), "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties)]


def server_command(version: str, properties: Path) -> list[str]:
    """One Kafka server (kafka.Kafka) run from `properties`, logging to its standard output (a
    file of slf4j-simple's own would start empty at each restart)."""
    return ["java", HEAP, *LOGGING, "-Dorg.slf4j.simpleLogger.logFile=System.out", "-cp", os.pathsep.join(classpath(version)), "kafka.Kafka", str(properties)]


def program_command(version: str, program: str, *arguments: str) -> list[str]:
    """One of kraftcheck's programs (PROGRAMS: Workload, LogDump) run on the release's jars."""
    jars = [str(build_dir(version, "kafka-server") / PROGRAM_CLASSES), *classpath(version)]
    return ["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=error", "-cp", os.pathsep.join(jars), program, *arguments]
