"""Scenarios run through an adapter (conformance.certify's replay), and their expectations
recorded from the reference model (as etcd's datadriven tests rewrite theirs)."""

import re
from pathlib import Path
from typing import Callable

import msgspec

from adapters.contract import Adapter
from conformance.certify.replay import ERROR, TraceResult, check_follows_model, replay
from conformance.corpus.reference import build_trace
from conformance.scenario.parser import Scenario, ScenarioError
from conformance.scenario.printer import scenario_text
from spec.trace import Trace, TraceError, check_integers

_STEP = re.compile(r"step (\d+): ")


def modelled(trace: Trace) -> Trace:
    """The trace the reference model makes from a scenario's inputs (its default reading)."""
    header = trace.header
    inputs = [step.input for step in trace.steps]
    try:
        made = build_trace(header.name, header.setting, header.node, inputs, header.origin, header.covers, header.initial)
    except Exception as error:  # noqa: BLE001 - inputs no node could be given
        raise TraceError(f"the specification's model cannot take its inputs ({type(error).__name__}: {error})") from None
    check_integers(made, "the specification's model's outcome")  # an epoch at the limit, taken one further
    return made


def completed(trace: Trace) -> Trace:
    """A step that names neither rules nor other allowed outcomes takes the model's, so that a
    hand-written step need only say what the node does."""
    made = modelled(trace)
    steps = tuple(
        step if step.rules or step.allowed else msgspec.structs.replace(step, rules=model.rules, allowed=model.allowed) for step, model in zip(trace.steps, made.steps)
    )
    return Trace(header=trace.header, steps=steps)


def run_scenario(make_adapter: Callable[[], Adapter], path: Path, scenario: Scenario) -> TraceResult:
    """Replay a scenario through an adapter, as certify replays a trace; a scenario whose
    expectations are not the specification's fails with the step's line (verdict error)."""
    header = scenario.trace.header
    try:
        trace = compiled(path, scenario)
    except ScenarioError as error:
        return TraceResult(trace=str(path), name=header.name, node=header.node, steps=header.steps, steps_run=0, verdict=ERROR, passed=False, failure=str(error))
    return replay(make_adapter(), trace, str(path))


def compiled(path: Path, scenario: Scenario) -> Trace:
    """A node scenario as the trace it stands for, for a corpus: its expectations must be the
    reference's (a corpus trace that is not is invalid), rules and allowed outcomes filled in."""
    try:
        trace = completed(scenario.trace)
        check_follows_model(trace)
    except TraceError as error:
        raise ScenarioError(f"{path}:{_line(scenario, error)}: {error}") from None
    return trace


def _line(scenario: Scenario, error: TraceError) -> int:
    """The line of the step a model check names ("step N: ..."), else the first."""
    found = _STEP.match(str(error))
    return scenario.step_lines[int(found.group(1)) - 1] if found else 1


def recorded(path: Path, scenario: Scenario) -> str:
    """The scenario with every expectation the reference model's, its comments kept."""
    try:
        made = modelled(scenario.trace)
    except TraceError as error:
        raise ScenarioError(f"{path}: {error}") from None
    return scenario_text(made, scenario.comments)
