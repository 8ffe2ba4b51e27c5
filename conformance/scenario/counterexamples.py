"""Counterexamples saved by `kraftcheck check` as scenarios of the whole cluster (a KRaft
cluster or an ISR partition): the same actions from the start, the violated property expected
after the last."""

import json
from pathlib import Path

import msgspec

from conformance.explore.configs import CheckConfig, IsrCheckConfig
from conformance.scenario.parser import ClusterScenario, ClusterStep
from model.cluster import Action
from model.isr.cluster import Action as IsrAction
from spec.trace import TraceCluster, TraceError, TracePartition

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
        steps = [json.loads(line) for line in lines[1:]]
        if header["bounds"].get("system") == "isr":
            config = msgspec.convert(header["bounds"], IsrCheckConfig).partition()
            setting = TracePartition(replicas=config.replicas, min_isr=config.min_isr, truncation=config.truncation)
            actions = [msgspec.convert(step["encoded_action"], IsrAction) for step in steps if step["step"] > 0]  # step 0: the initial state
        else:
            config = msgspec.convert(header["bounds"], CheckConfig).cluster()
            setting = TraceCluster(voters=config.voters, observers=config.observers, cluster_id=config.cluster_id, profile=config.profile, fetch_max_records=config.fetch_max_records)
            actions = [msgspec.convert(step["encoded_action"], Action) for step in steps]
    except (json.JSONDecodeError, KeyError, TypeError, msgspec.ValidationError) as error:
        raise TraceError(f"{path}: not a readable counterexample: {type(error).__name__}: {error}") from None
    if not actions:
        raise TraceError(f"{path}: a counterexample without steps")
    scenario_steps = [ClusterStep(action=action) for action in actions[:-1]] + [ClusterStep(action=actions[-1], violated=(header["property"],))]
    comments = [f"# {header['property']} violated: {header['detail']}", f"# found by kraftcheck check, configuration {header['config']} ({header['bounds']['description']})"]
    return ClusterScenario(name=path.stem, setting=setting, steps=tuple(scenario_steps), step_lines=(), comments={0: comments})
