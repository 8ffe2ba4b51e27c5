"""A scenario of the whole cluster: its actions run on the model (a KRaft cluster, model/cluster.py,
or an ISR partition, model/isr/cluster.py) with its expectations checked after each, then its
nodes' inputs as node-level traces, replayed through an adapter as certify replays a trace."""

from pathlib import Path
from typing import Any, Callable, NamedTuple

import msgspec

from adapters.contract import Adapter
from adapters.node_models import isr_observe, kraft_observe, kraft_start
from conformance.certify.replay import CONFORMS, ERROR, TraceResult, replay
from conformance.corpus.reference import build_trace
from conformance.scenario.describe import cluster_views
from conformance.scenario.parser import ClusterScenario, ScenarioError, UntilQuiet
from conformance.scenario.printer import action_text, cluster_scenario_text, envelope_text, state_line
from model import network, properties
from model.cluster import Cluster, Deliver, Drop, event_of
from model.isr import properties as isr_properties
from model.isr.cluster import Partition
from spec.trace import Input, Observed, Persisted, Trace, TraceCluster, check_integers

MAX_QUIET_DELIVERIES = 1000  # a run until quiet that has not settled by then fails


class System(NamedTuple):
    """What a cluster scenario runs on, a KRaft cluster or an ISR partition, in one shape."""

    ids: tuple[int, ...]
    start: Any  # the state before the first action
    apply: Callable[[Any, Any], tuple[Any, list[tuple[int, Input]]]]  # the state after an action, and each node's input it made
    violations: Callable[[Any], dict[str, str]]  # safety property -> what breaks it
    properties: tuple[str, ...]
    observe: Callable[[Any, int], Observed]
    views: Callable[[Any], str] | None  # the quorum views (KRaft)


def system_of(scenario: ClusterScenario) -> System:
    config = scenario.setting.config()
    if type(scenario.setting) is TraceCluster:
        cluster = Cluster(config)

        def kraft_apply(state: Any, action: Any) -> tuple[Any, list[tuple[int, Input]]]:
            return cluster.apply(state, action)[0], [] if type(action) is Drop else [event_of(action)]

        return System(
            ids=cluster.ids,
            start=set_up(cluster, scenario),
            apply=kraft_apply,
            violations=lambda state: {v.rule: v.detail for v in properties.violations(cluster, state)},
            properties=tuple(properties.PROPERTIES),
            observe=lambda state, node: kraft_observe(state.nodes[cluster.index[node]]),
            views=lambda state: cluster_views(cluster, state),
        )
    partition = Partition(config)

    def isr_apply(state: Any, action: Any) -> tuple[Any, list[tuple[int, Input]]]:
        applied = partition.apply(state, action)
        return applied.state, list(applied.inputs)

    return System(
        ids=partition.ids,
        start=partition.initial(),
        apply=isr_apply,
        violations=lambda state: {v.rule: v.detail for v in isr_properties.violations(partition, state)},
        properties=tuple(isr_properties.PROPERTIES),
        observe=lambda state, node: isr_observe(state.replicas[partition.index[node]]),
        views=None,
    )


def set_up(cluster: Cluster, scenario: ClusterScenario) -> Any:
    """A fresh KRaft cluster, the nodes given a persisted state holding it, shut down
    (model.cluster's restart brings them back, as a node trace's first step does)."""
    state = cluster.initial()
    nodes = list(state.nodes)
    for node, initial in scenario.initial:
        index = cluster.index[node]
        nodes[index] = kraft_start(cluster.node_configs[index], initial)
    return msgspec.structs.replace(state, nodes=tuple(nodes))


class ModelRun(NamedTuple):
    """A cluster scenario on the model: its first failure (None: every expectation holds), the
    quorum views its `describe` clauses asked for, each headed by its place, each node's inputs
    along the actions taken, and the state after the last."""

    failure: str | None
    views: list[str]
    inputs: dict[int, list[Input]]
    system: System
    state: Any


def model_run(path: Path, scenario: ClusterScenario) -> ModelRun:
    """Run the actions on the model from the scenario's start, up to the first expectation that
    does not hold (or action that cannot be taken), named with its line."""
    system = system_of(scenario)
    state = system.start
    views: list[str] = []
    inputs: dict[int, list[Input]] = {node: [] for node in system.ids}
    for number, (step, line) in enumerate(zip(scenario.steps, scenario.step_lines), start=1):
        where = f"{path}:{line}: step {number} ({action_text(step.action)})"
        if type(step.action) in (Deliver, Drop) and step.action.envelope not in network.envelopes(state.network):
            return ModelRun(f"{where}: no such message in flight; in flight: {in_flight_text(state)}", views, inputs, system, state)
        try:
            taken = until_quiet(system, state) if type(step.action) is UntilQuiet else [(step.action, *system.apply(state, step.action))]
        except OverflowError:  # the network encodes its messages: an epoch at the limit, taken one further
            return ModelRun(f"{where}: the model takes an integer beyond 64 bits", views, inputs, system, state)
        if taken is None:
            return ModelRun(f"{where}: not quiet after {MAX_QUIET_DELIVERIES} deliveries", views, inputs, system, state)
        for _, state, made in taken:
            for node, event in made:
                inputs[node].append(event)
        if step.describe:
            views.append(f"{where}: describe\n{system.views(state)}")
        failure = unmet(system, step, state)
        if failure is not None:
            return ModelRun(f"{where}: {failure}", views, inputs, system, state)
    return ModelRun(None, views, inputs, system, state)


def until_quiet(system: System, state: Any) -> list[tuple[Any, Any, list[tuple[int, Input]]]] | None:
    """Deliver, round after round, every message that was in flight when the round began, until
    none is left or a round ends where an earlier one did (followers fetching from an idle
    leader): each delivery, the state after it and the inputs it made; None if it has not
    settled after MAX_QUIET_DELIVERIES."""
    seen = {state}
    taken: list[tuple[Any, Any, list[tuple[int, Input]]]] = []
    while len(taken) < MAX_QUIET_DELIVERIES:
        in_flight = network.envelopes(state.network)
        if not in_flight:
            return taken
        for envelope in in_flight:
            action = Deliver(envelope=envelope)
            state, made = system.apply(state, action)
            taken.append((action, state, made))
        if state in seen:
            return taken
        seen.add(state)
    return None


def unmet(system: System, step: Any, state: Any) -> str | None:
    """The first of a step's expectations that does not hold after it, in words."""
    violated = system.violations(state)
    for rule in step.violated:
        if rule not in violated:
            return f"expected {rule} violated, it holds"
    for rule in step.holds:
        if rule in violated:
            return f"expected {rule} to hold, it is violated: {violated[rule]}"
    for envelope in step.in_flight:
        if envelope not in network.envelopes(state.network):
            return f"expected in flight {envelope_text(envelope)}; in flight: {in_flight_text(state)}"
    for node, expected in step.states:
        actual = system.observe(state, node)
        if actual != expected:
            return f"node {node}: expected {state_line(expected).removeprefix('expect ')}, got {state_line(actual).removeprefix('expect ')}"
    return None


def in_flight_text(state: Any) -> str:
    return "; ".join(envelope_text(envelope) for envelope in network.envelopes(state.network)) or "none"


def node_traces(path: Path, scenario: ClusterScenario, inputs: dict[int, list[Input]]) -> dict[int, Trace]:
    """Each node's inputs along the run, as a trace with the reference's expectations."""
    origin = f"scenario {scenario.name}: node {{}}'s inputs"
    initial = dict(scenario.initial)
    made = {
        node: build_trace(f"{scenario.name}-node{node}", scenario.setting, node, events, origin.format(node), initial=initial.get(node, Persisted()))
        for node, events in inputs.items()
        if events
    }
    for node, trace in made.items():
        check_integers(trace, f"{path}: node {node}'s trace")
    return made


def recorded_cluster(path: Path, scenario: ClusterScenario) -> str:
    """The scenario with, after its last action, every node's state and every property's verdict
    as the model gives them (its other expectations must hold)."""
    on_model = model_run(path, scenario)
    if on_model.failure is not None:
        raise ScenarioError(on_model.failure)
    if not scenario.steps:
        return cluster_scenario_text(scenario)
    system, state = on_model.system, on_model.state
    found = system.violations(state)
    last = msgspec.structs.replace(
        scenario.steps[-1],
        violated=tuple(rule for rule in system.properties if rule in found),
        holds=tuple(rule for rule in system.properties if rule not in found),
        states=tuple((node, system.observe(state, node)) for node in system.ids),
    )
    return cluster_scenario_text(msgspec.structs.replace(scenario, steps=(*scenario.steps[:-1], last)))


def compiled_nodes(path: Path, scenario: ClusterScenario) -> list[Trace]:
    """A cluster scenario as its nodes' traces, for a corpus; its expectations must hold on the model."""
    on_model = model_run(path, scenario)
    if on_model.failure is not None:
        raise ScenarioError(on_model.failure)
    return list(node_traces(path, scenario, on_model.inputs).values())


def run_cluster_scenario(make_adapter: Callable[[], Adapter], path: Path, scenario: ClusterScenario, on_model: ModelRun) -> TraceResult:
    """After its run on the model (a failure there is the scenario's: verdict error), every
    node's trace through the adapter; the first that does not conform is the result."""
    steps = len(scenario.steps)
    if on_model.failure is not None:
        return TraceResult(trace=str(path), name=scenario.name, node=-1, steps=steps, steps_run=0, verdict=ERROR, passed=False, failure=on_model.failure)
    results = [replay(make_adapter(), trace, f"{path} node {node}") for node, trace in node_traces(path, scenario, on_model.inputs).items()]
    failed = next((result for result in results if not result.passed), None)
    if failed is not None:
        return msgspec.structs.replace(failed, trace=str(path), name=scenario.name)
    rules = tuple(sorted({rule for result in results for rule in result.rules_passed}))
    return TraceResult(trace=str(path), name=scenario.name, node=-1, steps=steps, steps_run=steps, verdict=CONFORMS, passed=True, rules_passed=rules)
