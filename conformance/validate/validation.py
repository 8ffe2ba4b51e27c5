"""`kraftcheck validate`: a run's node logs found, read, searched and linked, into one verdict."""

import functools
import gzip
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from adapters.kafka_build import VERSION_PROFILES
from conformance.validate import links, observations, search
from model.config import ClusterConfig, ConfigError, profile as profile_options

SERVER_LOG = "server.log"
NODE_DIRECTORY = re.compile(r"node-(\d+)$")
_NODE_ID = re.compile(r"\[RaftManager id=(\d+)\]")


class ValidationError(ValueError):
    """Input kraftcheck cannot validate: no logs, a log of no node, no profile to judge by."""


class Validation(msgspec.Struct, frozen=True, kw_only=True):
    profile: str
    voters: tuple[int, ...]
    logs: dict[int, str]  # node -> the log read
    observations: int
    explained: int
    filled: int
    outside: int
    unreadable: tuple[observations.Unreadable, ...]
    linked: int
    unlinked: tuple[links.Unlinked, ...]
    sent_at_kill: tuple[links.Unlinked, ...]  # received, sent by a run of its sender killed before it logged sending (links.py)
    check_quorum_ms: int | None
    seconds: float
    nodes: tuple[search.NodeResult, ...]

    @property
    def first(self) -> search.Unexplained | None:
        """The first unexplained observation the search met; a later one on another node may follow from it."""
        failed = [result for result in self.nodes if result.unexplained]
        return min(failed, key=lambda result: result.order).unexplained if failed else None

    @property
    def valid(self) -> bool:
        return self.first is None and not self.unlinked


def node_logs(paths: list[Path]) -> dict[int, Path]:
    """Each node's log: a `kraftcheck cluster` run directory's node-N/server.log (or .gz), or log
    files given one per node (which node, its own lines say)."""
    found: dict[int, Path] = {}
    for path in paths:
        if path.is_dir():
            logs = sorted(p for pattern in (SERVER_LOG, SERVER_LOG + ".gz") for p in path.glob(f"node-*/{pattern}") if NODE_DIRECTORY.match(p.parent.name))
            if not logs:
                raise ValidationError(f"{path}: no node-N/{SERVER_LOG} in it (a `kraftcheck cluster run` directory, or give the node logs themselves)")
            pairs = [(int(NODE_DIRECTORY.match(p.parent.name)[1]), p) for p in logs]
        elif path.is_file():
            pairs = [(_node_of(path), path)]
        else:
            raise ValidationError(f"{path}: no such file or directory")
        for node, log in pairs:
            if node in found:
                raise ValidationError(f"{log}: a second log of node {node} (the first: {found[node]})")
            found[node] = log
    return found


def open_log(path: Path):
    """A log's lines, gzip-compressed (a rotated log) or not."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", errors="replace")
    return path.open(errors="replace")


def _node_of(path: Path) -> int:
    try:
        with open_log(path) as lines:
            for line in lines:
                named = _NODE_ID.search(line)
                if named:
                    return int(named[1])
    except (OSError, EOFError) as error:
        raise ValidationError(f"{path}: {error}") from None
    raise ValidationError(f"{path}: no line of Kafka's raft client ([RaftManager id=N]) in it")


def run_profile(paths: list[Path]) -> str | None:
    """The profile of the release a `kraftcheck cluster` run ran (its summary.json), if one says."""
    for path in paths:
        summary = path / "summary.json"
        if path.is_dir() and summary.is_file():
            try:
                version = json.loads(summary.read_text()).get("version", "")
            except (ValueError, OSError, AttributeError):
                continue
            line = ".".join(str(version).split(".")[:2])
            return VERSION_PROFILES.get(version) or next((p for v, p in VERSION_PROFILES.items() if v.startswith(line + ".")), None)
    return None


def validate_logs(
    paths: list[Path], profile: str | None = None, fill: int = search.DEFAULT_FILL, slack_ms: int = search.DEFAULT_SLACK_MS,
    progress: Callable[[str], None] | None = None,
) -> Validation:
    files = node_logs(paths)
    chosen = profile or run_profile(paths)
    if chosen is None:
        raise ValidationError("no --profile given, and no summary.json of a `kraftcheck cluster` run says which release ran")
    try:
        profile_options(chosen)
    except ConfigError as error:
        raise ValidationError(str(error)) from None
    started = time.perf_counter()
    read = {}
    for node, path in sorted(files.items()):
        try:
            with open_log(path) as lines:
                read[node] = observations.read(node, lines)
        except (OSError, EOFError) as error:
            raise ValidationError(f"{path}: {error}") from None
        if progress:
            progress(f"node {node}: {len(read[node].observations):,} observations read from {path}")
    voters = next((log.voters for log in read.values() if log.voters), ())
    if not voters:
        raise ValidationError("no transition line names the voters (are these logs of Kafka's raft client at INFO?)")
    if missing := sorted(set(read) - set(voters)):
        raise ValidationError(f"logs of nodes {missing}, which are not voters {list(voters)}: kraftcheck validates the voters' logs")
    cluster_id = next((log.cluster_id for log in read.values() if log.cluster_id), None)
    fetch_timeout = next((log.fetch_timeout_ms for log in read.values() if log.fetch_timeout_ms), 2_000)
    check_quorum = search.check_quorum_timeout_ms(chosen, fetch_timeout)
    cluster = ClusterConfig(voters=voters, cluster_id=cluster_id, profile=chosen)
    results = search.validate(cluster, read, fill=fill, check_quorum_ms=check_quorum, slack_ms=slack_ms,
                              progress=(lambda n: progress(f"{n:,} observations searched")) if progress else None)  # fmt: skip
    matched = links.links(read)
    return Validation(
        profile=chosen, voters=voters, logs={node: str(path) for node, path in sorted(files.items())},
        observations=sum(r.observations for r in results), explained=sum(r.explained for r in results), filled=sum(r.filled for r in results),
        outside=sum(r.outside for r in results), unreadable=tuple(u for log in read.values() for u in log.unreadable), linked=matched.linked, unlinked=matched.unlinked, sent_at_kill=matched.sent_at_kill,
        check_quorum_ms=check_quorum, seconds=time.perf_counter() - started, nodes=results,
    )  # fmt: skip


class RunVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """One run of many (`--runs`): its validation, or why it could not be validated."""

    run: str
    validation: Validation | None
    error: str | None


def validate_run(run: tuple[str, str], profile: str | None, fill: int, slack_ms: int) -> RunVerdict:
    """One run directory (as named, and its absolute path), as one task: a run that cannot be
    read is an error of its own, not the batch's."""
    named, path = run
    try:
        return RunVerdict(run=named, validation=validate_logs([Path(path)], profile, fill, slack_ms), error=None)
    except (ValidationError, OSError) as error:
        return RunVerdict(run=named, validation=None, error=str(error))


def validate_runs(runs: list[Path], profile: str | None, fill: int, slack_ms: int, on_spark=None, progress: Callable[[str], None] | None = None) -> list[RunVerdict]:
    """Many runs (a night's worth of fault runs): one after another here, or on Spark one task
    per run (`on_spark`: a conformance.spark.session.SparkRun; every executor must reach the
    run directories, a shared file system on a cluster). The verdicts in the order given."""
    names = [(str(run), str(run.resolve())) for run in runs]
    if on_spark is None:
        verdicts = []
        for name in names:
            verdicts.append(validate_run(name, profile, fill, slack_ms))
            if progress:
                progress(f"{len(verdicts)}/{len(names)} runs validated")
        return verdicts
    task = functools.partial(validate_run, profile=profile, fill=fill, slack_ms=slack_ms)
    return on_spark.session.sparkContext.parallelize(names, len(names)).map(task).collect()
