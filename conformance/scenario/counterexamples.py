"""Counterexamples saved by `kraftcheck check` as scenarios of the whole cluster (a KRaft
cluster or an ISR partition): the same actions from the start, the violated property expected
after the last; a lasso (`check --liveness`) as its prefix, then its cycle once, marked where
it begins."""

import json
import re
from pathlib import Path

import msgspec

from conformance.explore.configs import CheckConfig, IsrCheckConfig
from conformance.scenario.parser import ClusterScenario, ClusterStep
from conformance.text import visible
from model.cluster import Action
from model.isr.cluster import Action as IsrAction
from model.isr.properties import PROPERTIES as ISR_PROPERTIES
from model.liveness import GOALS
from model.properties import PROPERTIES
from spec.trace import TraceCluster, TraceError, TracePartition

KIND = "kraftcheck-counterexample"
LASSO_KIND = "kraftcheck-lasso"


def is_counterexample(path: Path) -> bool:
    """A file `check` saved (its first line names the kind: a counterexample or a lasso), rather than a trace."""
    try:
        with path.open("rb") as handle:
            return json.loads(handle.readline()).get("kind") in (KIND, LASSO_KIND)
    except (OSError, ValueError, AttributeError, RecursionError):
        return False  # not one: reading it as a trace reports what is wrong with it


def counterexample_scenario(path: Path) -> ClusterScenario:
    """The counterexample as a scenario; a file that is not one is a TraceError naming it."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error.strerror}") from None
    try:
        return _scenario(path, lines)
    except TraceError:
        raise
    except Exception as error:  # noqa: BLE001 - a file from elsewhere may fail in any way (nesting, types); none may end the run
        raise TraceError(f"{path}: not a readable counterexample: {type(error).__name__}: {error}") from None


def _scenario(path: Path, lines: list[bytes]) -> ClusterScenario:
    header = json.loads(lines[0])
    steps = [json.loads(line) for line in lines[1:]]
    if header["bounds"].get("system") == "isr":
        config = msgspec.convert(header["bounds"], IsrCheckConfig).partition()
        setting = TracePartition(replicas=config.replicas, min_isr=config.min_isr, truncation=config.truncation)
        actions = [msgspec.convert(step["encoded_action"], IsrAction) for step in steps if step["step"] > 0]  # step 0: the initial state
        known = ISR_PROPERTIES
    else:
        config = msgspec.convert(header["bounds"], CheckConfig).cluster()
        setting = TraceCluster(voters=config.voters, observers=config.observers, cluster_id=config.cluster_id, profile=config.profile, fetch_max_records=config.fetch_max_records)
        actions = [msgspec.convert(step["encoded_action"], Action) for step in steps]
        known = tuple(GOALS) if header["kind"] == LASSO_KIND else PROPERTIES
    if not actions:
        raise TraceError(f"{path}: a counterexample without steps")
    if header["property"] not in known:
        raise TraceError(f"{path}: a counterexample of an unknown property {_one_line(str(header['property']))!r}; expected one of {', '.join(known)}")
    comments = [f"{header['property']} violated: {header['detail']}", f"found by kraftcheck check, configuration {header['config']} ({header['bounds']['description']})"]
    marks = {0: ["# " + _one_line(text) for text in comments]}
    if header["kind"] == LASSO_KIND:  # a liveness property is no state's: nothing to expect, the cycle marked
        scenario_steps = [ClusterStep(action=action) for action in actions]
        cycle_from = int(header["cycle_from_step"])
        marks[cycle_from] = [f"# the cycle: steps {cycle_from} to {len(actions)} repeat for ever"] if cycle_from <= len(actions) else ["# the run stays here for ever, nothing fair enabled"]
    else:
        scenario_steps = [ClusterStep(action=action) for action in actions[:-1]] + [ClusterStep(action=actions[-1], violated=(header["property"],))]
    return ClusterScenario(name=path.stem, setting=setting, steps=tuple(scenario_steps), step_lines=(), comments=marks)


def _one_line(text: str) -> str:
    """Text from the file as one line of a comment: control characters escaped, so that none
    ends the comment (and starts a statement) or rewrites the terminal."""
    return re.sub(r"[\t\n\u2028\u2029]", lambda found: repr(found.group())[1:-1], visible(text))
