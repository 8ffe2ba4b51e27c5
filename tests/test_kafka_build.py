"""The Kafka adapter's build: versions it accepts, its cache and stamp, Maven's failures told
plainly, the registry's `kafka` adapters and `kraftcheck adapters`. One real Maven build of
Kafka 3.9.1 serves the module; the tests that need Maven skip only where java, javac or mvn is
missing, and say which."""

import contextlib
import io
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

from adapters import kafka_build
from adapters.kafka_build import DEFAULT_VERSION, TRAINING, adapter_command, build, build_dir, check_version, is_built, maven_failure, source_hash
from adapters.registry import AdapterBuildError, AdapterOptionError, adapter_factory
from conformance.cli import main

TOOLS = ("java", "javac", "mvn")
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
needs_maven = pytest.mark.skipif(
    bool(MISSING),
    reason=f"{', '.join(MISSING)} not on PATH: scripts/bootstrap installs them (apt-get install openjdk-17-jdk-headless maven)",
)
TESTED = "3.9.1"
TOO_OLD = "is too old: the adapter needs Kafka 3.3.0 or later (the oldest release line it is built for; tested: 3.9.1, 4.3.1)"


def partials(cache: Path) -> list[Path]:
    """Half-built or set-aside builds left in the cache."""
    return list((cache / "kraftcheck" / "kafka").glob(".*.partial-*"))


class Built(NamedTuple):
    cache: Path
    built: bool  # what build() returned
    stderr: str


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory) -> Built:
    """The module's one real build: Kafka 3.9.1 into a cache of its own, and what it printed."""
    if MISSING:
        pytest.skip(f"{', '.join(MISSING)} not on PATH: scripts/bootstrap installs them (apt-get install openjdk-17-jdk-headless maven)")
    cache = tmp_path_factory.mktemp("cache")
    stderr = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(stderr):
        patch.setenv("XDG_CACHE_HOME", str(cache))
        built = build(TESTED)
    return Built(cache, built, stderr.getvalue())


@pytest.fixture
def in_built_cache(built_cache, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(built_cache.cache))
    return build_dir(TESTED)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def copied_build(built_cache, fresh_cache) -> Path:
    """A copy of the module's build in a fresh cache, for a test to change."""
    shutil.copytree(built_cache.cache / "kraftcheck" / "kafka" / TESTED, build_dir(TESTED))
    return build_dir(TESTED)


@pytest.fixture
def maven_runs(monkeypatch) -> list[str]:
    """The versions Maven is run for, counted; Maven still runs."""
    runs = []
    real = kafka_build._run_maven

    def counted(version: str, out: Path) -> None:
        runs.append(version)
        real(version, out)

    monkeypatch.setattr(kafka_build, "_run_maven", counted)
    return runs


# versions and places -------------------------------------------------------------------


@pytest.mark.parametrize("version", ["3.3.0", "3.6.2", "3.8.1", "3.9.0", "3.9.1", "4.0.0", "4.3.1", "10.2.3"])
def test_versions_from_3_3_are_accepted(version):
    check_version(version)


@pytest.mark.parametrize(
    "version, message",
    [
        ("2.8.0", f"Kafka 2.8.0 {TOO_OLD}"),
        ("3.2.3", f"Kafka 3.2.3 {TOO_OLD}"),
        ("4.3", "Kafka version '4.3' is not MAJOR.MINOR.PATCH (tested: 3.9.1, 4.3.1)"),
        ("v4.3.1", "Kafka version 'v4.3.1' is not MAJOR.MINOR.PATCH (tested: 3.9.1, 4.3.1)"),
        ("4.3.1-rc0", "Kafka version '4.3.1-rc0' is not MAJOR.MINOR.PATCH (tested: 3.9.1, 4.3.1)"),
        ("../4.3.1", "Kafka version '../4.3.1' is not MAJOR.MINOR.PATCH (tested: 3.9.1, 4.3.1)"),
        ("", "Kafka version '' is not MAJOR.MINOR.PATCH (tested: 3.9.1, 4.3.1)"),
    ],
)
def test_other_versions_are_refused_naming_the_tested_ones(version, message):
    with pytest.raises(AdapterOptionError) as refused:
        check_version(version)
    assert str(refused.value) == message
    with pytest.raises(AdapterOptionError):
        build_dir(version)  # no path is made of a refused version


def test_the_cache_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build_dir("4.3.1") == tmp_path / "xdg" / "kraftcheck" / "kafka" / "4.3.1"
    for unusable in ("", "relative/cache"):
        monkeypatch.setenv("XDG_CACHE_HOME", unusable)
        assert build_dir("4.3.1") == tmp_path / "home" / ".cache" / "kraftcheck" / "kafka" / "4.3.1"


def test_the_sources_are_found_through_the_installed_package():
    assert (kafka_build.SOURCES / "pom.xml").is_file()
    assert list((kafka_build.SOURCES / "src").rglob("*.java"))
    assert source_hash("3.9.1") == source_hash("3.9.1") != source_hash("4.3.1")


@pytest.mark.parametrize(
    "version, release, client, api, records, io",
    [
        ("3.3.2", "kafka-3.3", "client-3.3", "api-3.3", "records", "io-3.3"),
        ("3.7.2", "kafka-3.3", "client-3.3", "api-3.3", "records", "io-3.3"),
        ("3.8.1", "kafka-3.3", "client-3.8", "api-3.3", "records", "io-3.3"),
        ("3.9.0", "kafka-3.9", "client-3.9", "api-3.9", "records", "io-3.3"),
        ("3.9.1", "kafka-3.9", "client-3.9", "api-3.9", "records", "io-3.3"),
        ("4.0.2", "kafka-4", "client-3.9", "api-3.9", "records", "io-3.3"),
        ("4.2.1", "kafka-4", "client-3.9", "api-3.9", "records", "io-3.3"),
        ("4.3.1", "kafka-4", "client-3.9", "api-3.9", "records-internal", "io-3.3"),
        ("4.4.0", "kafka-4", "client-3.9", "api-3.9", "records-internal", "io-4.4"),
        ("5.0.0", "kafka-4", "client-3.9", "api-3.9", "records-internal", "io-4.4"),
    ],
)
def test_each_version_builds_with_its_release_s_sources(version, release, client, api, records, io):
    """Elections (a voted state of its own before 3.9, pre-votes from 4.0), the client's
    construction (QuorumConfig and initialize's arguments in 3.8, KIP-853's types in 3.9), the
    API KIP-853 changed (3.9), the record classes (moved to ...record.internal in 4.3) and the
    channel and queue (answered through futures in 4.4) changed in different releases: the build
    takes one source directory for each."""
    picked = (kafka_build._release(version), kafka_build._client(version), kafka_build._api(version), kafka_build._records(version), kafka_build._io(version))
    assert picked == (release, client, api, records, io)
    assert all((kafka_build.SOURCES / "src" / directory / "java").is_dir() for directory in picked)


@pytest.mark.parametrize("version, tests", [("4.3.1", "4.3.1"), ("4.2.2", "4.2.1"), ("4.4.0", "4.3.1")])
def test_a_release_without_test_jars_is_built_on_the_nearest_served_ones(version, tests, monkeypatch, tmp_path):
    """Maven Central serves no test jars (MockLog, MockTime) of 4.2.2 and 4.4.0: their builds take
    4.2.1's and 4.3.1's, and a build records which (a changed choice is a stale build)."""
    calls = []
    monkeypatch.setattr(kafka_build.subprocess, "run", lambda argv, **_: calls.append(argv) or subprocess.CompletedProcess(argv, 1, "[ERROR] stop here"))
    with pytest.raises(AdapterBuildError):
        kafka_build._run_maven(version, tmp_path)
    assert f"-Dkafka.version={version}" in calls[0] and f"-Dkafka.test.version={tests}" in calls[0]
    stamp = kafka_build.source_hash(version)
    monkeypatch.setitem(kafka_build.TEST_JARS, version, "4.0.0")
    assert kafka_build.source_hash(version) != stamp


# missing tools -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "present, message",
    [
        (("java", "javac"), "missing: mvn. On Debian: apt-get install maven"),
        (("java", "mvn"), "missing: javac. On Debian: apt-get install openjdk-17-jdk-headless"),
        ((), "missing: java, javac, mvn. On Debian: apt-get install openjdk-17-jdk-headless maven"),
    ],
)
def test_missing_tools_are_named_with_their_debian_packages(fresh_cache, tmp_path, monkeypatch, present, message):
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in present:
        (tools / tool).write_text("#!/bin/sh\nexit 0\n")
        (tools / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    with pytest.raises(AdapterBuildError) as failed:
        build(TESTED)
    assert str(failed.value) == f"the Kafka adapter needs these on PATH: java, javac, mvn; {message} (scripts/bootstrap installs them)"
    assert not (fresh_cache / "kraftcheck").exists()


@needs_maven  # the tools are checked before the cache
def test_an_unwritable_cache_is_named(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file" / "cache"))
    with pytest.raises(AdapterBuildError) as failed:
        build(TESTED)
    assert str(failed.value).startswith(f"cannot build the Kafka adapter for Kafka {TESTED} in {build_dir(TESTED)}: [Errno 20] Not a directory: ")
    assert not is_built(TESTED)


# a real build and its stamp ------------------------------------------------------------


def test_a_build_writes_the_jar_the_classpath_and_the_stamp(built_cache, in_built_cache):
    assert built_cache.built
    for name in ("kraftcheck-kafka-adapter.jar", "classpath.txt"):
        assert (in_built_cache / name).is_file()
    assert (in_built_cache / "stamp").read_text() == source_hash(TESTED)
    assert is_built(TESTED) and not partials(built_cache.cache)
    first, done = built_cache.stderr.splitlines()
    assert first == f"kraftcheck: building the Kafka adapter for Kafka {TESTED} with Maven (first use; cached in {in_built_cache})"
    assert done.startswith(f"kraftcheck: built the Kafka adapter for Kafka {TESTED} in ") and done.endswith(" s")


def test_a_second_call_reuses_the_build(in_built_cache, maven_runs, capsys):
    jar = in_built_cache / "kraftcheck-kafka-adapter.jar"
    before = jar.stat().st_mtime_ns
    assert build(TESTED) is False
    command = adapter_command(TESTED)
    assert maven_runs == [] and jar.stat().st_mtime_ns == before
    assert capsys.readouterr().err == ""
    assert command[:7] == [
        "java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xlog:disable", "-Xlog:all=warning:stderr",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    ]
    assert command[7] == f"-XX:SharedArchiveFile={in_built_cache / 'classes.jsa'}"
    assert command[8] == "-cp" and command[10:] == ["org.apache.kafka.raft.KraftcheckNode"]
    assert command[9].split(":")[0] == str(jar)


def test_the_build_archives_the_classes_a_session_loads_and_the_jvm_maps_them(in_built_cache):
    """The class archive (AppCDS) is made by the build; -Xshare:on makes a JVM that cannot use it fail."""
    command = [("-Xshare:on" if flag == "-Xshare:auto" else flag) for flag in adapter_command(TESTED)]
    started = subprocess.run(command, input=TRAINING[0] + '\n{"command":"stop"}\n', capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith('{"ok":true,"protocol":2,"implementation":"Apache Kafka 3.9.1 KafkaRaftClient')


def test_the_command_s_classpath_holds_the_adapter_and_kafka_s_raft_client(in_built_cache):
    command = adapter_command(TESTED)
    classpath = command[command.index("-cp") + 1]
    found = subprocess.run(
        ["javap", "-cp", classpath, "org.apache.kafka.raft.KraftcheckNode", "org.apache.kafka.raft.KafkaRaftClient"], capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    assert "class org.apache.kafka.raft.KafkaRaftClient" in found.stdout


def test_changed_sources_rebuild(copied_build, maven_runs, monkeypatch, capsys):
    monkeypatch.setattr(kafka_build, "source_hash", lambda version: f"changed {version}")
    assert not is_built(TESTED)
    assert build(TESTED) is True
    assert maven_runs == [TESTED]
    assert (copied_build / "stamp").read_text() == f"changed {TESTED}"
    assert (copied_build / "kraftcheck-kafka-adapter.jar").is_file() and is_built(TESTED)
    assert f"(its sources changed; cached in {copied_build})" in capsys.readouterr().err
    assert not partials(copied_build.parents[2])


def test_jars_gone_from_maven_s_repository_rebuild(copied_build):
    classpath = copied_build / "classpath.txt"
    classpath.write_text(classpath.read_text().strip() + ":/nowhere/gone.jar")
    assert kafka_build._stale_reason(TESTED) == "jars it uses are gone from Maven's local repository"


def interrupted_maven(version: str, out: Path) -> None:
    """Maven stopped by Ctrl-C after writing what looks like a complete build."""
    out.mkdir()
    for name in ("kraftcheck-kafka-adapter.jar", "classpath.txt", "stamp"):
        (out / name).write_text("")
    raise KeyboardInterrupt


@needs_maven  # the tools are checked before Maven runs
def test_an_interrupted_build_leaves_nothing_that_looks_built(fresh_cache, monkeypatch):
    monkeypatch.setattr(kafka_build, "_run_maven", interrupted_maven)
    with pytest.raises(KeyboardInterrupt):
        build(TESTED)
    assert not build_dir(TESTED).exists() and not partials(fresh_cache) and not is_built(TESTED)


def test_an_interrupted_rebuild_keeps_the_earlier_build(copied_build, monkeypatch):
    monkeypatch.setattr(kafka_build, "_run_maven", interrupted_maven)
    with pytest.raises(KeyboardInterrupt):
        build(TESTED, force=True)
    assert is_built(TESTED) and (copied_build / "stamp").read_text() == source_hash(TESTED)
    assert not partials(copied_build.parents[2])


# Maven's failures ----------------------------------------------------------------------


@needs_maven
def test_an_unresolvable_version_fails_plainly_and_leaves_no_build(fresh_cache, capsys):
    assert main(["adapters", "build", "kafka", "--kafka-version", "3.9.99"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and "\x1b" not in err
    building, failed, *quoted = err.splitlines()
    assert building.startswith("kraftcheck: building the Kafka adapter for Kafka 3.9.99 with Maven (first use;")
    assert failed == (
        "kraftcheck: cannot build the Kafka adapter for Kafka 3.9.99: Maven could not resolve Kafka 3.9.99's jars: the version "
        "does not exist, or the repository (Maven Central) could not be reached. Maven said:"
    )
    assert 1 <= len(quoted) <= 21 and all(line.startswith("  ") for line in quoted)
    assert any("3.9.99" in line and "could not be resolved" in line for line in quoted)
    assert not build_dir("3.9.99").exists() and not partials(fresh_cache)


COMPILE_FAILURE = """\x1b[0m\x1b[0m[ERROR] COMPILATION ERROR : 
[ERROR] /src/KraftcheckNode.java:[4,17] incompatible types: java.lang.String cannot be converted to int
[ERROR] /src/KraftcheckNode.java:[5,9] cannot find symbol
  symbol:   class Foo
[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.13.0:compile (default-compile) on project kraftcheck-kafka-adapter: Compilation failure: Compilation failure: 
[ERROR] /src/KraftcheckNode.java:[4,17] incompatible types: java.lang.String cannot be converted to int
[ERROR] -> [Help 1]
[ERROR] 
[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch.
\x1b[0m\x1b[0m"""


def test_a_compile_failure_quotes_the_compiler_once():
    assert maven_failure("4.3.1", COMPILE_FAILURE, 1) == (
        "cannot build the Kafka adapter for Kafka 4.3.1: the adapter's Java sources do not compile against it. The compiler said:\n"
        "  [ERROR] /src/KraftcheckNode.java:[4,17] incompatible types: java.lang.String cannot be converted to int\n"
        "  [ERROR] /src/KraftcheckNode.java:[5,9] cannot find symbol\n"
        "    symbol:   class Foo"
    )


def test_another_failure_quotes_maven_s_errors_at_most_20_lines():
    output = "\n".join(f"\x1b[1;31m[ERROR] problem {n}\x1b[m" for n in range(25)) + "\n[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch."
    message = maven_failure("4.3.1", output, 1).splitlines()
    assert message[0] == "cannot build the Kafka adapter for Kafka 4.3.1: Maven failed (exit code 1). Maven said:"
    assert message[1:] == [f"  [ERROR] problem {n}" for n in range(20)] + ["  ... (5 more lines)"]


# the registry and the command line -----------------------------------------------------


def test_the_registry_runs_the_built_adapter_in_a_shared_pool(in_built_cache):
    with adapter_factory(f"kafka:{TESTED}") as make:
        adapter = make()
        assert adapter.command == shlex.join(adapter_command(TESTED))
        assert make.pool is not None and make().pool is adapter.pool


def test_plain_kafka_is_the_default_version(monkeypatch):
    monkeypatch.setattr(kafka_build, "adapter_command", lambda version, timeouts: ["node", version, timeouts])
    with adapter_factory("kafka") as make:
        assert make().command == f"node {DEFAULT_VERSION} short"
    with adapter_factory("kafka:3.9.1") as make:
        assert make().command == "node 3.9.1 short"
    with adapter_factory("kafka:3.9.1,timeouts=kafka") as make:
        assert make().command == "node 3.9.1 kafka"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("kafka:2.8.0", f"Kafka 2.8.0 {TOO_OLD}"),
        ("kafka:", "Kafka version '' is not MAJOR.MINOR.PATCH (tested: 3.9.1, 4.3.1)"),
        ("kafka:4.3.1,timeouts=slow", "timeouts='slow': short (the adapter's: request 100 ms, retry backoff 10 ms, election 1,000 ms, fetch 2,000 ms), "
         "kafka (Kafka's defaults: request 2,000 ms, retry backoff 20 ms, election 1,000 ms, fetch 2,000 ms), "
         "long (a request outlasting every other timer: request 10,000 ms, retry backoff 20 ms, election 1,000 ms, fetch 2,000 ms)"),
        ("kafka:4.3.1,seed=1", "kafka option 'seed=1' is not timeouts=NAME: kafka:VERSION[,timeouts=short|kafka|long]"),
    ],
)
def test_the_registry_refuses_bad_versions(spec, message):
    with pytest.raises(AdapterOptionError) as refused:
        adapter_factory(spec)
    assert str(refused.value) == message


def test_an_unknown_adapter_s_message_lists_kafka():
    with pytest.raises(AdapterOptionError, match=r"subprocess:COMMAND, kafka or kafka:VERSION\[,timeouts=kafka\|long\] \(see `kraftcheck adapters list`\)$"):
        adapter_factory("telepathy")


def test_cli_refuses_a_version_too_old_with_exit_2(capsys):
    assert main(["adapters", "build", "kafka", "--kafka-version", "2.8.0"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"kraftcheck: Kafka 2.8.0 {TOO_OLD}\n"


def test_cli_builds_only_kafka(capsys):
    assert main(["adapters", "build", "reference"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "kraftcheck: cannot build 'reference': kafka is the only adapter kraftcheck builds (another version: kafka --kafka-version "
        "VERSION); reference, reference:OPTIONS and mutant:NAME are built in, subprocess:COMMAND is built by its implementer\n"
    )


def test_cli_says_what_is_already_built_and_how_it_runs(in_built_cache, capsys):
    assert main(["adapters", "build", "kafka", "--kafka-version", TESTED]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines() == [
        f"already built: the Kafka adapter for Kafka {TESTED} in {in_built_cache}",
        f"certify with: kraftcheck certify --adapter kafka:{TESTED}",
        f"the command it runs: {shlex.join(adapter_command(TESTED))}",
    ]


def test_cli_lists_the_adapter_forms_and_what_is_built(in_built_cache, capsys):
    assert main(["adapters", "list"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    rows = {line.split("  ")[0]: line for line in out.splitlines()[2:] if line}
    assert {"reference", "reference:OPTIONS", "mutant:NAME", "subprocess:COMMAND", "kafka:3.9.1", "kafka:4.3.1 (kafka)", "kafka:VERSION", "kafka:VERSION,timeouts=kafka"} <= set(rows)
    assert rows["kafka:3.9.1"].endswith(f"built: {in_built_cache}")
    assert rows["kafka:4.3.1 (kafka)"].endswith("not built: `kraftcheck adapters build kafka --kafka-version 4.3.1`")


def test_cli_help_describes_the_adapters_command(capsys):
    for argv in (["adapters", "--help"], ["adapters", "build", "--help"], ["certify", "--help"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "list the adapter forms and which Kafka versions are built" in text
    assert "build the Kafka adapter now (otherwise built on first use)" in text
    assert "--kafka-version VERSION" in text and "--force" in text
    assert "or kafka[:VERSION[,timeouts=kafka|long]], Apache Kafka's KafkaRaftClient (default version 4.3.1; with the adapter's short timeouts, Kafka's default ones, or a long request timeout)" in text
