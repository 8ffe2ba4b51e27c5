"""The `kafka` adapter's build: Apache Kafka's own KafkaRaftClient, compiled with Maven on first use.

adapters/kafka/ holds a Java program that drives one KafkaRaftClient node over
spec/subprocess-protocol.md. Kafka's jars come from Maven Central, so the program is built per
Kafka version (3.3 on), once, into the user's cache ($XDG_CACHE_HOME/kraftcheck/kafka/VERSION/),
not shipped; the version picks the source directories with what differs between releases
(_release, _client, _api, _records, _io; the test jars of TEST_JARS where it has none). A build is reused while its stamp matches a hash of the
sources and the version; it is made in a temporary directory beside its place and moved there
only when complete, under a lock, so an interrupted or concurrent build never leaves a
half-built adapter that looks complete.
"""

import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import adapters
from adapters.process_lifetime import die_with_parent
from adapters.registry import AdapterBuildError, AdapterOptionError

TESTED_VERSIONS = ("3.9.1", "4.3.1")  # certified under kip595 too (scripts/certify-kafka): the first release with KIP-853 and the newest on its own test jars
DEFAULT_VERSION = "4.3.1"
# The model profile (model/config.py PROFILES) that reads KIP-595 as a Kafka release does, one
# patch release per release line: scripts/certify-kafka certifies each under it (its shipped
# corpus is traces/PROFILE/), and the tested versions under kip595 too. 4.1 and 4.2 read it as 4.3
# does, and so does 4.4 (built on 4.3.1's test jars, TEST_JARS); 3.3 to 3.6 are judged under 3.7's
# profile, the first release with the leader's check-quorum that KIP-595 asks for (KNOWN_DEFECTS).
VERSION_PROFILES = {
    "3.3.2": "kafka-3.7", "3.4.1": "kafka-3.7", "3.5.2": "kafka-3.7", "3.6.2": "kafka-3.7", "3.7.2": "kafka-3.7", "3.8.1": "kafka-3.8",
    "3.9.1": "kafka-3.9", "4.0.2": "kafka-4.0", "4.1.2": "kafka-4.3", "4.2.1": "kafka-4.3", "4.3.1": "kafka-4.3", "4.4.0": "kafka-4.3",
}  # fmt: skip
# The Kafka defects (Apache Kafka's issue keys) for which a release departs from its profile, a
# profile pinning what a release line does by design, not its bugs (docs/certification/README.md,
# "Historical bugs"): each is fixed in a later release.
_NO_CHECK_QUORUM = ("KAFKA-15489",)  # fixed in 3.7.0: a leader no majority fetches from resigns (PROGRESS-1)
_HELD_DIVERGING = ("KAFKA-15100",)  # fixed in 3.5.2: a Fetch whose answer diverges is not held (FETCH-REQ-7)
KNOWN_DEFECTS = {
    "3.3.2": _NO_CHECK_QUORUM + _HELD_DIVERGING, "3.4.1": _NO_CHECK_QUORUM + _HELD_DIVERGING, "3.5.2": _NO_CHECK_QUORUM, "3.6.2": _NO_CHECK_QUORUM,
    "3.8.1": ("KAFKA-17067",),
}  # fmt: skip
# The node's timeouts (adapters/kafka/src/main/java/org/apache/kafka/raft/Timeouts.java): a
# `timer` command jumps mock time to that timer's expiry, and these decide what expires with it.
TIMEOUTS = {
    "short": "the adapter's: request 100 ms, retry backoff 10 ms, election 1,000 ms, fetch 2,000 ms",
    "kafka": "Kafka's defaults: request 2,000 ms, retry backoff 20 ms, election 1,000 ms, fetch 2,000 ms",
    "long": "a request outlasting every other timer: request 10,000 ms, retry backoff 20 ms, election 1,000 ms, fetch 2,000 ms",
}
OLDEST = (3, 3)  # the oldest release line built and certified (KRaft production-ready from 3.3, KIP-833); see _release, _client, _api, _records, _io
# The release whose test jars (MockLog, MockQuorumStateStore, MockTime) a build uses where Maven
# Central serves none of its own: the nearest earlier one that it serves.
TEST_JARS = {"4.2.2": "4.2.1", "4.4.0": "4.3.1"}

SOURCES = Path(adapters.__file__).parent / "kafka"
JAR = "kraftcheck-kafka-adapter.jar"
CLASSPATH = "classpath.txt"  # the dependencies' jars, written by the build
STAMP = "stamp"  # the source hash the build was made from, written last
CLASS_ARCHIVE = "classes.jsa"  # the classes a session loads, archived by the build (AppCDS): a JVM starts in a third of the time
BUILD_FORMAT = 3  # what a build holds; a build of an earlier format is rebuilt
ARCHIVE_SECONDS = 120  # the archiving run is a few seconds; past this, the build goes on without an archive
MAIN_CLASS = "org.apache.kafka.raft.KraftcheckNode"
# One JVM serves many traces (protocol 2), but it starts once per job: make that cheap and quiet.
# The JVM's own messages (an archive made by another JDK, say) go to stderr: stdout carries replies.
JVM_FLAGS = (
    "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xlog:disable", "-Xlog:all=warning:stderr",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
)
# What the archiving run does: every kind of command a trace sends, so that their classes are loaded.
TRAINING = (
    '{"command":"start","cluster":{"voters":[1,2,3],"observers":[],"cluster_id":"c","profile":"kip595","fetch_max_records":0},"node":1,'
    '"initial":{"epoch":0,"leader_id":-1,"voted_id":-1,"log":[]}}',
    '{"command":"request","source":3,"message":{"type":"VoteRequest","ClusterId":"c","CandidateEpoch":1,"CandidateId":3,"LastOffsetEpoch":0,"LastOffset":-1}}',
    '{"command":"timer","kind":"election_timeout"}',
    '{"command":"response","source":2,"message":{"type":"VoteResponse","ErrorCode":0,"PartitionErrorCode":0,"LeaderId":-1,"LeaderEpoch":2,"VoteGranted":true},'
    '"request":{"type":"VoteRequest","ClusterId":"c","CandidateEpoch":2,"CandidateId":1,"LastOffsetEpoch":1,"LastOffset":-1}}',
    '{"command":"request","source":2,"message":{"type":"FetchRequest","ClusterId":"c","ReplicaId":2,"CurrentLeaderEpoch":2,"FetchOffset":0,"LastFetchedEpoch":0}}',
    '{"command":"append","value":7}',
    '{"command":"resign"}',
    '{"command":"crash"}',
    '{"command":"restart"}',
    '{"command":"drain"}',
    '{"command":"observe"}',
    '{"command":"reset"}',
    '{"command":"start","cluster":{"voters":[1,2,3],"observers":[],"cluster_id":"c","profile":"kip595","fetch_max_records":0},"node":2,'
    '"initial":{"epoch":1,"leader_id":1,"voted_id":1,"log":[{"type":"Record","Offset":0,"Epoch":1,"Value":{"type":"LeaderChangeMessage","LeaderId":1,"VotedIds":[1,2]}}]}}',
    '{"command":"timer","kind":"fetch_timeout"}',
    '{"command":"response","source":1,"message":{"type":"FetchResponse","ErrorCode":0,"PartitionErrorCode":0,"HighWatermark":1,"DivergingEpoch":{"Epoch":-1,"EndOffset":-1},'
    '"CurrentLeader":{"LeaderId":-1,"LeaderEpoch":-1},"Records":[]},"request":{"type":"FetchRequest","ClusterId":"c","ReplicaId":2,"CurrentLeaderEpoch":1,"FetchOffset":1,"LastFetchedEpoch":1}}',
    '{"command":"drain"}',
    '{"command":"observe"}',
    '{"command":"stop"}',
)

BUILD_TOOLS = {"java": "openjdk-17-jdk-headless", "javac": "openjdk-17-jdk-headless", "mvn": "maven"}  # tool: its Debian package
MAX_QUOTED_LINES = 20
_VERSION = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RESOLUTION = re.compile(r"could not resolve|could not be resolved|could not transfer|could not find artifact|unknown host|non-resolvable", re.IGNORECASE)
_MAVEN_BOILERPLATE = ("To see the full stack trace", "Re-run Maven using", "For more information about the errors", "[Help 1]")


def check_version(version: str) -> None:
    """Refuse a version the adapter cannot be built against, before Maven is asked for it."""
    tested = f"tested: {', '.join(TESTED_VERSIONS)}"
    if _VERSION.fullmatch(version) is None:
        raise AdapterOptionError(f"Kafka version {version!r} is not MAJOR.MINOR.PATCH ({tested})")
    if _numbers(version)[:2] < OLDEST:
        raise AdapterOptionError(f"Kafka {version} is too old: the adapter needs Kafka 3.3.0 or later (the oldest release line it is built for; {tested})")


def _numbers(version: str) -> tuple[int, int, int]:
    """MAJOR.MINOR.PATCH as numbers (a version check_version accepts)."""
    found = _VERSION.fullmatch(version)
    return int(found[1]), int(found[2]), int(found[3])


def build_dir(version: str, kind: str = "kafka") -> Path:
    """Where the adapter for Kafka `version` is (or will be) built; with `kind` "kafka-server",
    where the class path of Kafka's server is kept (adapters/kafka_server.py)."""
    check_version(version)
    configured = os.environ.get("XDG_CACHE_HOME", "")
    cache = Path(configured) if os.path.isabs(configured) else Path.home() / ".cache"
    return cache / "kraftcheck" / kind / version


def source_hash(version: str) -> str:
    """What a build is made from: the version, its test jars', pom.xml and every file under src/, names and bytes."""
    digest = hashlib.sha256(f"kafka {version}\0tests {TEST_JARS.get(version, version)}\0format {BUILD_FORMAT}\0".encode())
    for path in [SOURCES / "pom.xml", *sorted(p for p in (SOURCES / "src").rglob("*") if p.is_file())]:
        content = path.read_bytes()
        digest.update(f"{path.relative_to(SOURCES).as_posix()}\0{len(content)}\0".encode() + content)
    return digest.hexdigest()


def is_built(version: str) -> bool:
    """Whether a build of the current sources for Kafka `version` is cached, its jars all there."""
    return _stale_reason(version) is None


def build(version: str, force: bool = False) -> bool:
    """Build the adapter for Kafka `version` unless an up-to-date build is cached (or `force`);
    True if it built. Raises AdapterBuildError, whose message is for the user, when it cannot."""
    directory = build_dir(version)
    if not force and is_built(version):
        return False
    require(BUILD_TOOLS)
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with open(directory.parent / f".{version}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another kraftcheck may be building it: wait, then look again
            reason = _stale_reason(version) or ("rebuild asked for" if force else None)
            if reason is None:
                return False
            _build_into(directory, version, reason)
    except OSError as error:  # the cache cannot be written, or Maven cannot be started
        raise AdapterBuildError(f"cannot build the Kafka adapter for Kafka {version} in {directory}: {error}") from None
    return True


def kafka_argument(argument: str) -> tuple[str, str]:
    """What `kafka:` takes, VERSION[,timeouts=short|kafka]: (version, timeouts). The timeouts are
    the adapter's short ones by default, or Kafka's own defaults (TIMEOUTS)."""
    version, *options = [part.strip() for part in argument.split(",")]
    timeouts = "short"
    for option in options:
        key, equals, value = option.partition("=")
        if key != "timeouts" or not equals:
            raise AdapterOptionError(f"kafka option {option!r} is not timeouts=NAME: kafka:VERSION[,timeouts={'|'.join(TIMEOUTS)}]")
        if value not in TIMEOUTS:
            raise AdapterOptionError(f"timeouts={value!r}: {', '.join(f'{name} ({what})' for name, what in TIMEOUTS.items())}")
        timeouts = value
    check_version(version)
    return version, timeouts


def adapter_command(version: str = DEFAULT_VERSION, timeouts: str = "short") -> list[str]:
    """The command that runs the adapter for Kafka `version` with those timeouts, building it first if need be."""
    build(version)
    require({"java": BUILD_TOOLS["java"]})
    return _java_command(build_dir(version)) + ([] if timeouts == "short" else [f"--timeouts={timeouts}"])


def _java_command(directory: Path, *options: str) -> list[str]:
    archive = directory / CLASS_ARCHIVE
    shared = [f"-XX:SharedArchiveFile={archive}"] if archive.is_file() and not options else []
    return ["java", *JVM_FLAGS, *shared, *options, "-cp", os.pathsep.join(_classpath(directory)), MAIN_CLASS]


def maven_failure(version: str, output: str, exit_code: int, what: str = "build the Kafka adapter") -> str:
    """The user's explanation of a failed Maven run (that was to `what`): what went wrong and Maven's own lines about it."""
    lines = [_ANSI.sub("", line).rstrip().removesuffix(" -> [Help 1]") for line in output.splitlines()]
    errors = [line for line in lines if line.startswith("[ERROR]") and line[7:].strip() and not line[7:].strip().startswith(_MAVEN_BOILERPLATE)]
    head = f"cannot {what} for Kafka {version}"
    compiler = next((i + 1 for i, line in enumerate(lines) if "COMPILATION ERROR" in line), None)  # where javac's messages begin
    if compiler is not None:
        end = next((i for i in range(compiler, len(lines)) if "Failed to execute goal" in lines[i]), len(lines))
        return f"{head}: the adapter's Java sources do not compile against it. The compiler said:\n{_quote(lines[compiler:end])}"
    resolution = [line for line in errors if _RESOLUTION.search(line)]
    if resolution:
        return (
            f"{head}: Maven could not resolve Kafka {version}'s jars: the version does not exist, or the repository "
            f"(Maven Central) could not be reached. Maven said:\n{_quote(resolution)}"
        )
    return f"{head}: Maven failed (exit code {exit_code}). Maven said:\n{_quote(errors or lines)}"


def _stale_reason(version: str) -> str | None:
    """Why the cached build cannot be used as it is, or None when it can."""
    directory = build_dir(version)
    try:
        stamp = (directory / STAMP).read_text()
        classpath = _classpath(directory)
    except OSError:
        return "first use"
    if stamp != source_hash(version):
        return "its sources changed"
    if not all(os.path.exists(jar) for jar in classpath):
        return "jars it uses are gone from Maven's local repository"
    return None


def _build_into(directory: Path, version: str, reason: str) -> None:
    """Build in a directory beside `directory`, stamp it, then put it in place; under the lock."""
    for leftover in directory.parent.glob(f".{version}.partial-*"):  # an earlier build that was killed
        shutil.rmtree(leftover)
    print(f"kraftcheck: building the Kafka adapter for Kafka {version} with Maven ({reason}; cached in {directory})", file=sys.stderr, flush=True)
    started = time.monotonic()
    partial = directory.parent / f".{version}.partial-build"
    try:
        _run_maven(version, partial)
        (partial / STAMP).write_text(source_hash(version))
        _replace(directory, partial)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    _archive_classes(directory)  # in place: an archive holds the class path it was made with
    print(f"kraftcheck: built the Kafka adapter for Kafka {version} in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


def _classpath(directory: Path) -> list[str]:
    """The adapter's jar, then the dependencies' jars the build listed."""
    dependencies = (directory / CLASSPATH).read_text().strip()
    return [str(directory / JAR), *filter(None, dependencies.split(os.pathsep))]


def require(tools: dict[str, str], what: str = "the Kafka adapter") -> None:
    """Name the tools missing from PATH that `what` needs, and the Debian packages that bring them."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        packages = " ".join(dict.fromkeys(tools[tool] for tool in missing))
        raise AdapterBuildError(
            f"{what} needs these on PATH: {', '.join(tools)}; missing: {', '.join(missing)}. "
            f"On Debian: apt-get install {packages} (scripts/bootstrap installs them)"
        )


def _run_maven(version: str, out: Path) -> None:
    """`mvn package` into `out`: the jar and classpath.txt, or AdapterBuildError saying why not."""
    argv = [
        "mvn", "-B", "-q", "-f", str(SOURCES / "pom.xml"),
        f"-Dkafka.version={version}", f"-Dkafka.test.version={TEST_JARS.get(version, version)}", f"-Dkraftcheck.release={_release(version)}",
        f"-Dkraftcheck.client={_client(version)}", f"-Dkraftcheck.api={_api(version)}", f"-Dkraftcheck.records={_records(version)}",
        f"-Dkraftcheck.io={_io(version)}", f"-Dkraftcheck.build={out}", "package",
    ]
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        preexec_fn=functools.partial(die_with_parent, os.getpid()),  # a killed kraftcheck leaves no Maven writing behind it
    )
    if done.returncode != 0:
        raise AdapterBuildError(maven_failure(version, done.stdout, done.returncode))
    absent = [name for name in (JAR, CLASSPATH) if not (out / name).is_file()]
    if absent:
        raise AdapterBuildError(f"cannot build the Kafka adapter for Kafka {version}: Maven succeeded but wrote no {' or '.join(absent)} (is {SOURCES / 'pom.xml'} intact?)")


def _archive_classes(directory: Path) -> None:
    """Run the adapter once through TRAINING, archiving the classes it loaded (AppCDS), written
    aside and then moved in place. The archive is an optimisation only: if the JVM cannot make
    one, the adapter starts without; one the JVM finds stale (another JDK) it ignores."""
    partial = directory / f".{CLASS_ARCHIVE}.partial"
    try:
        done = subprocess.run(
            _java_command(directory, f"-XX:ArchiveClassesAtExit={partial}"), input="\n".join(TRAINING) + "\n", text=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=ARCHIVE_SECONDS,
            preexec_fn=functools.partial(die_with_parent, os.getpid()),
        )
        if done.returncode == 0 and partial.is_file():
            partial.rename(directory / CLASS_ARCHIVE)
    except (OSError, subprocess.TimeoutExpired):
        pass
    finally:
        partial.unlink(missing_ok=True)


def _release(version: str) -> str:
    """The source directory (src/RELEASE/java, pom.xml's kraftcheck.release) with what differs in
    elections: 3.3 to 3.8 have a voted state of their own and check-quorum only from 3.7, 3.9 has
    KIP-853's replica keys but no pre-vote (KIP-996), 4.x has both."""
    numbers = _numbers(version)[:2]
    return "kafka-3.3" if numbers < (3, 9) else "kafka-3.9" if numbers < (4, 0) else "kafka-4"


def _client(version: str) -> str:
    """The source directory (pom.xml's kraftcheck.client) for building the client on Kafka's mocks:
    3.8 took a QuorumConfig and moved the quorum-state store and the voters to initialize, 3.9
    added KIP-853's directory id, listeners and kraft.version."""
    numbers = _numbers(version)[:2]
    return "client-3.3" if numbers < (3, 8) else "client-3.8" if numbers < (3, 9) else "client-3.9"


def _api(version: str) -> str:
    """The source directory (pom.xml's kraftcheck.api) for the API KIP-853 changed in 3.9: the
    message builders (replica keys, endpoints), RaftRequest.Inbound, prepareAppend."""
    return "api-3.3" if _numbers(version)[:2] < (3, 9) else "api-3.9"


def records_internal(version: str) -> bool:
    """Whether Kafka's record classes (FileRecords, RecordBatch, ...) are in
    org.apache.kafka.common.record.internal: moved there in 4.3."""
    return _numbers(version)[:2] >= (4, 3)


def _records(version: str) -> str:
    """The source directory (pom.xml's kraftcheck.records) for Kafka's record classes and MockLog:
    moved to org.apache.kafka.common.record.internal, MockLog.read given a byte limit, in 4.3."""
    return "records-internal" if records_internal(version) else "records"


def _io(version: str) -> str:
    """The source directory (pom.xml's kraftcheck.io) for carrying messages to and from the client:
    from 4.4 every message is answered through a future (NetworkChannel.send, RaftMessageQueue.add,
    handle), and the channel and queue are the adapter's own."""
    return "io-3.3" if _numbers(version)[:2] < (4, 4) else "io-4.4"


def _replace(directory: Path, built: Path) -> None:
    """Put the complete build in place; any earlier one goes aside first, then away."""
    earlier = directory.parent / f".{directory.name}.partial-earlier"
    if directory.exists():
        directory.rename(earlier)
    built.rename(directory)
    shutil.rmtree(earlier, ignore_errors=True)


def _quote(lines: list[str]) -> str:
    shown = [f"  {line}" for line in lines[:MAX_QUOTED_LINES]]
    if len(lines) > MAX_QUOTED_LINES:
        shown.append(f"  ... ({len(lines) - MAX_QUOTED_LINES} more lines)")
    return "\n".join(shown)
