"""`kraftcheck check`: exhaustive exploration of a configuration, its summary and counterexamples."""

import functools
import json
import os
import sys
import tempfile
from pathlib import Path

import msgspec
from tabulate import tabulate

from conformance import describe_steps
from conformance import trace as traces
from conformance.check_config import CheckConfig, IsrCheckConfig
from conformance.engine import Progress, Result, explore
from conformance.isr_system import IsrSystem, steps_table
from conformance.kraft_system import KraftSystem
from conformance.sharded import explore_sharded
from model.cluster import Cluster


def system_for(config: CheckConfig | IsrCheckConfig) -> KraftSystem | IsrSystem:
    if isinstance(config, IsrCheckConfig):
        return IsrSystem(config.partition(), config.bounds())
    return KraftSystem(
        config.cluster(),
        config.faults(),
        max_epoch=config.max_epoch,
        max_in_flight=config.max_in_flight,
        max_elections=config.max_elections,
        symmetry=config.symmetry,
    )


def summary(name: str, config: CheckConfig | IsrCheckConfig, system: KraftSystem | IsrSystem, result: Result, workers: int) -> dict:
    """The run as one JSON-ready object (the keys `--json` promises)."""
    violated = {c.violation.rule: c for c in result.counterexamples}
    return {
        "config": name,
        "bounds": msgspec.to_builtins(config),
        "symmetry": system.symmetry,
        "complete": result.complete,
        "distinct_states": result.distinct,
        "generated_states": result.generated,
        "depth": result.depth,
        "wall_s": round(result.seconds, 3),
        "workers": workers,
        "distinct_per_s": round(result.distinct / result.seconds) if result.seconds else 0,
        "distinct_per_s_per_core": round(result.distinct / result.seconds / workers) if result.seconds else 0,
        "properties": {
            rule: ("violated" if rule in violated else ("holds" if result.complete else "not violated so far"))
            for rule in system.property_ids()
        },
        "violations": [
            {"property": c.violation.rule, "detail": c.violation.detail, "length": len(c.path) - 1} for c in result.counterexamples
        ],
    }


def summary_table(data: dict) -> str:
    rows = [
        ("configuration", data["config"]),
        ("exhaustive", "yes" if data["complete"] else "no (stopped early)"),
        ("distinct states", f"{data['distinct_states']:,}"),
        ("generated states", f"{data['generated_states']:,}"),
        ("depth", data["depth"]),
        ("wall seconds", f"{data['wall_s']:.1f}"),
        ("workers", data["workers"]),
        ("distinct states/s", f"{data['distinct_per_s']:,}"),
        ("symmetry reduction", "on" if data["symmetry"] else "off"),
    ]
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
                "action": describe_steps.action_text(action),
                "changed": describe_steps.changes(cluster.ids, previous, state),
                "rules": list(transition.rules) if transition else [],
                "encoded_action": msgspec.to_builtins(action),
            }
        )
        previous = state
    return steps


def counterexample_table(steps: list[dict]) -> str:
    rows = [(s["step"], s["action"], s["changed"] or "-", " ".join(s["rules"])) for s in steps]
    return tabulate(rows, headers=("step", "action", "what changed", "rules"), tablefmt="simple", maxcolwidths=[None, 55, 70, 30])


def write_atomically(path: Path, lines: list[str]) -> None:
    """Write the whole file or nothing: a temporary file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            out.writelines(line + "\n" for line in lines)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def save_counterexample(directory: Path, name: str, data: dict, violation, steps: list[dict]) -> Path:
    path = directory / f"counterexample-{name}-{violation.rule}.jsonl"
    header = {"kind": "kraftcheck-counterexample", "format_version": 1, "config": name, "bounds": data["bounds"], "property": violation.rule, "detail": violation.detail}
    write_atomically(path, [json.dumps(header)] + [json.dumps(step) for step in steps])
    return path


def save_replica_traces(directory: Path, name: str, violation, system: IsrSystem, path: list) -> list[Path]:
    """An ISR counterexample as one conformance trace per replica, under counterexample-NAME-PROPERTY/."""
    folder = directory / f"counterexample-{name}-{violation.rule}"
    saved = []
    for built in system.replica_traces(path, folder.name).values():
        target = folder / f"{built.header.name}.jsonl"
        traces.write(target, built)
        saved.append(target)
    return saved


def run_check(
    name: str, config: CheckConfig | IsrCheckConfig, *, keep_going: bool, as_json: bool, out: Path, max_states: int | None, workers: int
) -> int:
    """Explore, print the summary and each counterexample, save the counterexamples; exit 1 on a violation.

    ISR configurations run on the in-process engine (their state spaces are small) and may ask
    to keep going, so that every property gets its shortest counterexample.
    """
    system = system_for(config)
    isr = isinstance(system, IsrSystem)
    if isr:
        keep_going, workers = keep_going or config.keep_going, 1
    live = sys.stderr.isatty() and not as_json

    def progress(p: Progress) -> None:
        rate = p.distinct / p.seconds if p.seconds else 0
        line = f"\r  distinct {p.distinct:,}  {rate:,.0f} states/s  depth {p.depth}  queue {p.queue:,}  {p.seconds:.0f}s"
        print(line, end="", file=sys.stderr, flush=True)

    report = progress if live else None
    if workers > 1:
        result = explore_sharded(
            functools.partial(system_for, config), workers, keep_going=keep_going, max_states=max_states, progress=report, local=system
        )
    else:
        result = explore(system, keep_going=keep_going, max_states=max_states, progress=report)
    if live:
        print(file=sys.stderr)
    data = summary(name, config, system, result, workers=workers)
    saved = []
    for counterexample in result.counterexamples:
        steps = counterexample_steps(system, counterexample.path)
        path = save_counterexample(out, name, data, counterexample.violation, steps)
        replica_traces = save_replica_traces(out, name, counterexample.violation, system, counterexample.path) if isr else []
        saved.append((counterexample, steps, path, replica_traces))
    if as_json:
        data["counterexample_files"] = [str(path) for _, _, path, _ in saved]
        if isr:
            data["counterexample_traces"] = [str(trace) for _, _, _, replica_traces in saved for trace in replica_traces]
        print(json.dumps(data))
    else:
        print(summary_table(data))
        for counterexample, steps, path, replica_traces in saved:
            print(f"\n{counterexample.violation.rule} violated after {len(counterexample.path) - 1} steps: {counterexample.violation.detail}")
            print(steps_table(steps) if isr else counterexample_table(steps))
            print(f"saved: {path}")
            if replica_traces:
                print(f"as conformance traces, one per replica: {replica_traces[0].parent}/ ({len(replica_traces)} files)")
    return 1 if result.counterexamples else 0
