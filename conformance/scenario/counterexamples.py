"""Counterexamples saved by `kraftcheck check` (KRaft clusters) as scenarios of the whole
cluster: the same actions from a fresh cluster, the violated property expected at the last."""

import json
from pathlib import Path

import msgspec

from conformance.explore.configs import CheckConfig
from conformance.scenario.parser import ClusterScenario, ClusterStep
from model.cluster import Action
from spec.trace import TraceCluster, TraceError

KIND = "kraftcheck-counterexample"


def is_counterexample(path: Path) -> bool:
    """A file `check` saved (its first line names the kind), rather than a trace."""
    try:
        with path.open("rb") as handle:
            return json.loads(handle.readline()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False  # not one: reading it as a trace reports what is wrong with it


def counterexample_scenario(path: Path) -> ClusterScenario:
    lines = path.read_bytes().splitlines()
    try:
        header = json.loads(lines[0])
        if header["bounds"].get("system") == "isr":
            raise TraceError(f"{path}: an ISR counterexample; its replicas' traces, saved beside it under {path.stem}/, show as scenarios")
        config = msgspec.convert(header["bounds"], CheckConfig).cluster()
        actions = [msgspec.convert(json.loads(line)["encoded_action"], Action) for line in lines[1:]]
    except (json.JSONDecodeError, KeyError, TypeError, msgspec.ValidationError) as error:
        raise TraceError(f"{path}: not a readable counterexample: {type(error).__name__}: {error}") from None
    if not actions:
        raise TraceError(f"{path}: a counterexample without steps")
    cluster = TraceCluster(voters=config.voters, observers=config.observers, cluster_id=config.cluster_id, profile=config.profile, fetch_max_records=config.fetch_max_records)
    steps = [ClusterStep(action=action) for action in actions[:-1]] + [ClusterStep(action=actions[-1], violated=(header["property"],))]
    comments = [f"# {header['property']} violated: {header['detail']}", f"# found by kraftcheck check, configuration {header['config']} ({header['bounds']['description']})"]
    return ClusterScenario(name=path.stem, cluster=cluster, steps=tuple(steps), step_lines=(), comments={0: comments})
