"""Counterexamples of the ISR system as conformance traces, one per replica.

Each replica's inputs along the counterexample, with the reference's expectations, so that
`kraftcheck certify --corpus DIR` can replay the scenario against an implementation.
"""

from pathlib import Path

from conformance.corpus.reference import build_trace
from conformance.explore.engine import Violation
from conformance.explore.isr_system import IsrSystem
from spec import trace as traces
from spec.trace import Trace, TracePartition


def replica_traces(system: IsrSystem, path: list, name: str) -> dict[int, Trace]:
    """The trace of every replica that took a step along the path (the engine's (action, state) pairs)."""
    partition = system.partition
    inputs: dict[int, list] = {r: [] for r in partition.ids}
    previous = path[0][1]
    for action, state in path[1:]:
        for node, event in partition.apply(previous, action).inputs:
            inputs[node].append(event)
        previous = state
    config = partition.config
    setting = TracePartition(replicas=config.replicas, min_isr=config.min_isr, truncation=config.truncation)
    origin = f"{name}: replica {{}}'s inputs along the counterexample"
    return {node: build_trace(f"{name}-replica{node}", setting, node, events, origin.format(node)) for node, events in inputs.items() if events}


def save_replica_traces(directory: Path, name: str, violation: Violation, system: IsrSystem, path: list) -> list[Path]:
    """Write them under counterexample-NAME-PROPERTY/ in `directory`; the files written."""
    folder = directory / f"counterexample-{name}-{violation.rule}"
    saved = []
    for built in replica_traces(system, path, folder.name).values():
        target = folder / f"{built.header.name}.jsonl"
        traces.write(target, built)
        saved.append(target)
    return saved
