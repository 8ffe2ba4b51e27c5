"""A scenario of the whole cluster: its actions run on the model cluster (model/cluster.py) with
its expectations checked after each, then its nodes' inputs as node-level traces, replayed
through an adapter as certify replays a trace."""

from pathlib import Path
from typing import Callable, NamedTuple

import msgspec

from adapters.contract import Adapter
from adapters.node_models import kraft_observe, kraft_start
from conformance.certify.replay import CONFORMS, ERROR, TraceResult, replay
from conformance.corpus.reference import build_trace
from conformance.scenario.describe import cluster_views
from conformance.scenario.parser import ClusterScenario, ScenarioError, UntilQuiet
from conformance.scenario.printer import action_text, cluster_scenario_text, envelope_text, state_line
from model import network, properties
from model.cluster import Action, Cluster, ClusterState, Deliver, Drop, event_of
from spec.trace import Persisted, Trace


MAX_QUIET_DELIVERIES = 1000  # a run until quiet that has not settled by then fails


class ModelRun(NamedTuple):
    """A cluster scenario on the model: its first failure (None: every expectation holds), the
    quorum views its `describe` clauses asked for, each headed by its place, and the actions
    taken (a run until quiet as the deliveries it made)."""

    failure: str | None
    views: list[str]
    actions: list[Action]
    cluster: Cluster
    state: ClusterState  # after the last action taken


def until_quiet(cluster: Cluster, state: ClusterState) -> tuple[ClusterState, list[Action]] | None:
    """Deliver, round after round, every message that was in flight when the round began, until
    none is left or a round ends where an earlier one did (followers fetching from an idle
    leader); None if it has not settled after MAX_QUIET_DELIVERIES."""
    seen = {state}
    taken: list[Action] = []
    while len(taken) < MAX_QUIET_DELIVERIES:
        in_flight = network.envelopes(state.network)
        if not in_flight:
            return state, taken
        for envelope in in_flight:
            taken.append(Deliver(envelope=envelope))
            state, _ = cluster.apply(state, taken[-1])
        if state in seen:
            return state, taken
        seen.add(state)
    return None


def set_up(cluster: Cluster, scenario: ClusterScenario) -> ClusterState:
    """A fresh cluster, the nodes given a persisted state holding it, shut down (model.cluster's
    restart brings them back, as a node trace's first step does)."""
    state = cluster.initial()
    nodes = list(state.nodes)
    for node, initial in scenario.initial:
        index = cluster.index[node]
        nodes[index] = kraft_start(cluster.node_configs[index], initial)
    return msgspec.structs.replace(state, nodes=tuple(nodes))


def model_run(path: Path, scenario: ClusterScenario) -> ModelRun:
    """Run the actions on a fresh model cluster, up to the first expectation that does not hold
    (or action that cannot be taken), named with its line."""
    cluster = Cluster(scenario.cluster.config())
    state = set_up(cluster, scenario)
    views: list[str] = []
    actions: list[Action] = []
    for number, (step, line) in enumerate(zip(scenario.steps, scenario.step_lines), start=1):
        where = f"{path}:{line}: step {number} ({action_text(step.action)})"
        if type(step.action) is UntilQuiet:
            settled = until_quiet(cluster, state)
            if settled is None:
                return ModelRun(f"{where}: not quiet after {MAX_QUIET_DELIVERIES} deliveries", views, actions, cluster, state)
            state, delivered = settled
            actions.extend(delivered)
        elif type(step.action) in (Deliver, Drop) and step.action.envelope not in network.envelopes(state.network):
            return ModelRun(f"{where}: no such message in flight; in flight: {in_flight_text(state)}", views, actions, cluster, state)
        else:
            state, _ = cluster.apply(state, step.action)
            actions.append(step.action)
        if step.describe:
            views.append(f"{where}: describe\n{cluster_views(cluster, state)}")
        violated = {violation.rule: violation.detail for violation in properties.violations(cluster, state)}
        for rule in step.violated:
            if rule not in violated:
                return ModelRun(f"{where}: expected {rule} violated, it holds", views, actions, cluster, state)
        for rule in step.holds:
            if rule in violated:
                return ModelRun(f"{where}: expected {rule} to hold, it is violated: {violated[rule]}", views, actions, cluster, state)
        for envelope in step.in_flight:
            if envelope not in network.envelopes(state.network):
                return ModelRun(f"{where}: expected in flight {envelope_text(envelope)}; in flight: {in_flight_text(state)}", views, actions, cluster, state)
        for node, expected in step.states:
            actual = kraft_observe(state.nodes[cluster.index[node]])
            if actual != expected:
                return ModelRun(f"{where}: node {node}: expected {state_line(expected).removeprefix('expect ')}, got {state_line(actual).removeprefix('expect ')}", views, actions, cluster, state)
    return ModelRun(None, views, actions, cluster, state)


def in_flight_text(state: ClusterState) -> str:
    return "; ".join(envelope_text(envelope) for envelope in network.envelopes(state.network)) or "none"


def node_traces(scenario: ClusterScenario, actions: list[Action]) -> dict[int, Trace]:
    """Each node's inputs along the actions taken, as a trace with the reference's expectations."""
    inputs: dict[int, list] = {node: [] for node in scenario.cluster.config().nodes}
    for action in actions:
        if type(action) is not Drop:
            node, event = event_of(action)
            inputs[node].append(event)
    origin = f"scenario {scenario.name}: node {{}}'s inputs"
    initial = dict(scenario.initial)
    return {
        node: build_trace(f"{scenario.name}-node{node}", scenario.cluster, node, events, origin.format(node), initial=initial.get(node, Persisted()))
        for node, events in inputs.items()
        if events
    }


def recorded_cluster(path: Path, scenario: ClusterScenario) -> str:
    """The scenario with, after its last action, every node's state and every property's verdict
    as the model gives them (its other expectations must hold)."""
    on_model = model_run(path, scenario)
    if on_model.failure is not None:
        raise ScenarioError(on_model.failure)
    if not scenario.steps:
        return cluster_scenario_text(scenario)
    found = {violation.rule for violation in properties.violations(on_model.cluster, on_model.state)}
    last = msgspec.structs.replace(
        scenario.steps[-1],
        violated=tuple(rule for rule in properties.PROPERTIES if rule in found),
        holds=tuple(rule for rule in properties.PROPERTIES if rule not in found),
        states=tuple((node, kraft_observe(state)) for node, state in zip(on_model.cluster.ids, on_model.state.nodes)),
    )
    return cluster_scenario_text(msgspec.structs.replace(scenario, steps=(*scenario.steps[:-1], last)))


def compiled_nodes(path: Path, scenario: ClusterScenario) -> list[Trace]:
    """A cluster scenario as its nodes' traces, for a corpus; its expectations must hold on the model."""
    on_model = model_run(path, scenario)
    if on_model.failure is not None:
        raise ScenarioError(on_model.failure)
    return list(node_traces(scenario, on_model.actions).values())


def run_cluster_scenario(make_adapter: Callable[[], Adapter], path: Path, scenario: ClusterScenario, on_model: ModelRun) -> TraceResult:
    """After its run on the model (a failure there is the scenario's: verdict error), every
    node's trace through the adapter; the first that does not conform is the result."""
    steps = len(scenario.steps)
    if on_model.failure is not None:
        return TraceResult(trace=str(path), name=scenario.name, node=-1, steps=steps, steps_run=0, verdict=ERROR, passed=False, failure=on_model.failure)
    results = [replay(make_adapter(), trace, f"{path} node {node}") for node, trace in node_traces(scenario, on_model.actions).items()]
    failed = next((result for result in results if not result.passed), None)
    if failed is not None:
        return msgspec.structs.replace(failed, trace=str(path), name=scenario.name)
    rules = tuple(sorted({rule for result in results for rule in result.rules_passed}))
    return TraceResult(trace=str(path), name=scenario.name, node=-1, steps=steps, steps_run=steps, verdict=CONFORMS, passed=True, rules_passed=rules)
