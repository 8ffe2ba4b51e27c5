"""`kraftcheck check`: exhaustive exploration of a configuration, its summary and counterexamples."""

import contextlib
import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
from tabulate import tabulate

from conformance import text
from conformance.diagrams.isr import partition_svg
from conformance.diagrams.kraft import cluster_svg
from conformance.explore.configs import CheckConfig, IsrCheckConfig
from conformance.explore.engine import Counterexample, Progress, Result, SearchInterrupted, Violation, explore
from conformance.explore.isr_system import IsrSystem, action_text
from conformance.explore.kraft_system import KraftSystem
from conformance.explore.sharded import explore_sharded
from conformance.explore.kept import LOCK, SEARCH_FILE, Damaged, ResumeError, locked, verify
from conformance.explore.workspace import read_checkpoint
from conformance.explore.spark_engine import explore_spark
from conformance.spark.session import SparkOptions, spark_session
from model.cluster import Cluster
from spec.trace import write_bytes_atomically


def system_for(config: CheckConfig | IsrCheckConfig) -> KraftSystem | IsrSystem:
    if isinstance(config, IsrCheckConfig):
        return IsrSystem(config.partition(), config.bounds())
    return KraftSystem(
        config.cluster(),
        config.faults(),
        max_epoch=config.max_epoch,
        max_in_flight=config.max_in_flight or None,
        max_elections=config.max_elections,
        symmetry=config.symmetry,
        every_choice=config.every_choice,
    )


VACUOUS = "no action leads out of the initial state"


def summary(name: str, config: CheckConfig | IsrCheckConfig, system: KraftSystem | IsrSystem, result: Result, workers: int, engine: str = "in-process") -> dict:
    """The run as one JSON-ready object (the keys `--json` promises).

    A complete search that never left its initial states says nothing about any run, so its
    verdict is vacuous, never "holds".
    """
    violated = {c.violation.rule: c for c in result.counterexamples}
    vacuous = result.complete and result.depth == 0 and not result.counterexamples
    verdict = f"vacuous: {VACUOUS}" if vacuous else ("holds" if result.complete else "not violated so far")
    if result.interrupted:  # its last level may hold a violation it did not report
        verdict = "unknown (interrupted)"
    return {
        "config": name,
        "bounds": msgspec.to_builtins(config),
        "symmetry": system.symmetry,
        "complete": result.complete,
        "interrupted": result.interrupted,
        "stopped_by": result.stopped,
        "distinct_states": result.distinct,
        "generated_states": result.generated,
        "depth": result.depth,
        "wall_s": round(result.seconds, 3),
        "engine": engine,
        "workers": workers,
        "distinct_per_s": round(result.distinct / result.seconds) if result.seconds else 0,
        "distinct_per_s_per_core": round(result.distinct / result.seconds / workers) if result.seconds else 0,
        "worker_seconds": [{"busy": round(busy, 3), "waiting": round(waiting, 3)} for busy, waiting in result.worker_seconds],
        "vacuous": vacuous,
        "properties": {rule: ("violated" if rule in violated else verdict) for rule in system.property_ids()},
        "violations": [
            {"property": c.violation.rule, "detail": c.violation.detail, "length": len(c.path) - 1} for c in result.counterexamples
        ],
    }


STOPPED_BY = {"max-states": ": --max-states reached", "max-seconds": ": --max-seconds reached"}


def summary_table(data: dict) -> str:
    rows = [
        ("configuration", data["config"]),
        ("exhaustive", "yes" if data["complete"] else ("no (interrupted)" if data["interrupted"] else f"no (stopped early{STOPPED_BY.get(data['stopped_by'], '')})")),
        ("distinct states", f"{data['distinct_states']:,}"),
        ("generated states", f"{data['generated_states']:,}"),
        ("depth", data["depth"]),
        ("wall seconds", f"{data['wall_s']:.1f}"),
        ("engine", data["engine"]),
        ("workers" if data["engine"] == "in-process" else "cores", data["workers"]),
        ("distinct states/s", f"{data['distinct_per_s']:,}"),
        ("symmetry reduction", "on" if data["symmetry"] else "off"),
    ]
    if data["worker_seconds"]:  # sharded: how evenly the work was spread
        rows.append(("workers' seconds busy/waiting", ", ".join(f"{w['busy']:.1f}/{w['waiting']:.1f}" for w in data["worker_seconds"])))
    bounds = data["bounds"]
    if "max_in_flight" in bounds:  # a KRaft configuration
        rows.append(("node choices", "every allowed outcome" if bounds["every_choice"] else "the model's default reading"))
        rows.append(("messages in flight", f"at most {bounds['max_in_flight']}" if bounds["max_in_flight"] else "no bound"))
        if bounds["loss"]:
            rows.append(("message loss", "on" if bounds["max_in_flight"] else "on: a lost message is one never delivered (not explored apart)"))
    properties = [(rule, verdict) for rule, verdict in data["properties"].items()]
    return tabulate(rows, tablefmt="simple") + "\n\n" + tabulate(properties, headers=("property", "verdict"), tablefmt="simple")


def counterexample_steps(system: KraftSystem | IsrSystem, path: list) -> list[dict]:
    """Each step of a counterexample: the action, what it changed, the rules the node's step cited.

    An ISR counterexample shows, from the initial state (step 0) on, every replica after each step.
    """
    if isinstance(system, IsrSystem):
        return system.steps(path)
    cluster: Cluster = system.cluster
    steps = []
    previous = system.decode(path[0][1])
    for number, (key, encoded) in enumerate(path[1:], start=1):
        state = system.decode(encoded)
        action = system.action(key)
        _, transition = cluster.apply(previous, action)
        steps.append(
            {
                "step": number,
                "action": text.action_text(action),
                "changed": text.changes(cluster.ids, previous, state),
                "rules": list(transition.rules) if transition else [],
                "encoded_action": msgspec.to_builtins(action),
            }
        )
        previous = state
    return steps


def counterexample_table(steps: list[dict]) -> str:
    rows = [(s["step"], s["action"], s["changed"] or "-", " ".join(s["rules"])) for s in steps]
    return text.wrapped_table(rows, ("step", "action", "what changed", "rules"), [None, 55, 70, 30])


def save_counterexample(directory: Path, name: str, data: dict, violation: Violation, steps: list[dict]) -> Path:
    """The counterexample as JSON Lines: a header naming the configuration and property, then the steps."""
    path = directory / f"counterexample-{name}-{violation.rule}.jsonl"
    header = {"kind": "kraftcheck-counterexample", "format_version": 1, "config": name, "bounds": data["bounds"], "property": violation.rule, "detail": violation.detail}
    lines = [json.dumps(header)] + [json.dumps(step) for step in steps]
    write_bytes_atomically(path, "".join(line + "\n" for line in lines).encode())
    return path


def save_counterexample_diagram(directory: Path, name: str, violation: Violation, system: KraftSystem | IsrSystem, path: list) -> Path:
    """The counterexample as a message-sequence diagram (SVG) beside its JSON Lines file."""
    title = f"{name}: {violation.rule} violated after {len(path) - 1} steps"
    if isinstance(system, IsrSystem):
        ids = system.partition.ids
        svg = partition_svg(system.partition, [action for action, _ in path[1:]], title, lambda action: action_text(action, ids))
    else:
        svg = cluster_svg(system.cluster, [system.action(key) for key, _ in path[1:]], title)
    target = directory / f"counterexample-{name}-{violation.rule}.svg"
    write_bytes_atomically(target, svg.encode())
    return target


class SavedSearch(msgspec.Struct, forbid_unknown_fields=True):
    """What a search kept on disk (check --state-dir) was begun with: check --resume runs it again."""

    name: str
    kind: str  # "kraft" or "isr": which configuration type `config` is
    config: dict
    workers: int
    keep_going: bool
    format: str = "kraftcheck-search"


@contextlib.contextmanager
def kept_search(directory: Path, *, new: bool) -> Iterator[None]:
    """The directory of a search kept on disk, this run's alone until the block ends: a new or
    empty one (--state-dir, made if need be) or one that keeps a search (--resume). A run that
    finds it held by another is refused at once, before it reads or writes any file there."""
    directory = Path(directory)
    if new:
        claimable(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ResumeError(f"--state-dir {directory}: cannot write there: {error.strerror or error}") from None
    elif not (directory / SEARCH_FILE).is_file():
        raise ResumeError(f"--resume {directory}: no search kept there (no {SEARCH_FILE}; a search is kept with --state-dir)")
    with locked(directory):
        if new:
            claimable(directory)  # again: another run may have begun there meanwhile
        yield


def claimable(directory: Path) -> None:
    """A new or empty directory (but for the lock a run left), else ResumeError."""
    if directory.exists() and (not directory.is_dir() or any(entry.name != LOCK for entry in directory.iterdir())):
        raise ResumeError(f"--state-dir {directory}: not a new or empty directory (to continue the search kept there: --resume {directory})")


def begin_saved_search(directory: Path, name: str, config: CheckConfig | IsrCheckConfig, workers: int, keep_going: bool) -> None:
    """Say what the search kept in `directory` (see kept_search) is."""
    directory = Path(directory)
    kind = "isr" if isinstance(config, IsrCheckConfig) else "kraft"
    saved = SavedSearch(name, kind, msgspec.to_builtins(config), workers, keep_going)
    try:
        write_bytes_atomically(directory / SEARCH_FILE, msgspec.json.encode(saved))
    except OSError as error:
        raise ResumeError(f"--state-dir {directory}: cannot write there: {error.strerror or error}") from None


def saved_search(directory: Path) -> tuple[SavedSearch, CheckConfig | IsrCheckConfig]:
    """The search a directory keeps, and its configuration, for --resume: its check.json as the
    checkpoint recorded it (else Damaged: another search's would resume these files as its own)."""
    path = Path(directory) / SEARCH_FILE
    recorded = read_checkpoint(directory).files.get(SEARCH_FILE)
    if recorded is None:
        raise Damaged(path, "the checkpoint does not vouch for it")
    verify(directory, SEARCH_FILE, *recorded)
    saved = msgspec.json.decode(path.read_bytes(), type=SavedSearch)
    return saved, msgspec.convert(saved.config, IsrCheckConfig if saved.kind == "isr" else CheckConfig)


def check(
    config: CheckConfig | IsrCheckConfig,
    *,
    keep_going: bool,
    max_states: int | None,
    workers: int,
    progress: Callable[[Progress], None] | None,
    spark: SparkOptions | None = None,
    max_seconds: float | None = None,
    state_dir: Path | None = None,
    resume: bool = False,
) -> tuple[KraftSystem | IsrSystem, Result, int]:
    """Explore a configuration: its system, the result and the worker count actually used (on
    Spark: the cluster's cores).

    ISR configurations run on the in-process engine (their state spaces are small) unless Spark
    is asked for, and may ask to keep going, so that every property gets its shortest
    counterexample. An interrupt (Ctrl-C, SIGTERM) ends the search with an interrupted result,
    the states explored so far. `state_dir` and `resume`: see conformance.explore.engine.explore.
    """
    system = system_for(config)
    if isinstance(system, IsrSystem):
        keep_going, workers = keep_going or config.keep_going, 1
    limits = {"keep_going": keep_going, "max_states": max_states, "max_seconds": max_seconds}
    try:
        if spark is not None:
            with spark_session(spark) as run:
                workers = run.session.sparkContext.defaultParallelism
                make = functools.partial(system_for, config)
                result = explore_spark(run.session, make, run.work, partitions=run.partitions, progress=progress, local=system, **limits)
        elif workers > 1:
            result = explore_sharded(functools.partial(system_for, config), workers, progress=progress, local=system, state_dir=state_dir, resume=resume, **limits)
        else:
            result = explore(system, progress=progress, state_dir=state_dir, resume=resume, **limits)
    except SearchInterrupted as interrupt:
        result = interrupt.result
    result.counterexamples = [as_replayed(system, c) for c in result.counterexamples]
    return system, result, workers


def as_replayed(system: KraftSystem | IsrSystem, counterexample: Counterexample) -> Counterexample:
    """The counterexample with its violation as the path's own last state shows it: under symmetry
    the engine may have met a renamed twin first, whose detail names other nodes than the steps."""
    own = [v for v in system.violations(counterexample.path[-1][1]) if v.rule == counterexample.violation.rule]
    return counterexample._replace(violation=own[0]) if own else counterexample
