"""Seeded random runs of a cluster, every safety property checked after every step.

Like Kafka's RaftEventSimulationTest: cheap, reaches long interleavings the exhaustive
checker's bounds exclude, and reproducible from its seed.
"""

import random
import time
from collections.abc import Callable

import msgspec

from model import properties
from model.cluster import Action, Cluster, ClusterState, Deliver
from model.transitions import Transition


class Step(msgspec.Struct, frozen=True):
    action: Action
    transition: Transition | None
    before: ClusterState
    after: ClusterState


class RunResult(msgspec.Struct, frozen=True):
    seed: int
    steps: int
    violations: tuple[properties.Violation, ...]
    history: tuple[Step, ...]  # kept only for a violating run
    final: ClusterState


def run(cluster: Cluster, seed: int, max_steps: int, deliver_bias: float = 0.7) -> RunResult:
    """One random walk; messages are delivered with probability deliver_bias when any are in flight."""
    rng = random.Random(seed)
    state = cluster.initial()
    trail: list[Step] = []
    for count in range(1, max_steps + 1):
        actions = cluster.enabled(state)
        if not actions:
            return RunResult(seed, count - 1, (), (), state)
        deliveries = [a for a in actions if type(a) is Deliver and not a.duplicate]
        action = rng.choice(deliveries) if deliveries and rng.random() < deliver_bias else rng.choice(actions)
        if cluster.every_choice:
            action = rng.choice(cluster.alternatives(state, action))
        after, transition = cluster.apply(state, action)
        trail.append(Step(action, transition, state, after))
        state = after
        found = properties.violations(cluster, state)
        if found:
            return RunResult(seed, count, found, tuple(trail), state)
    return RunResult(seed, max_steps, (), (), state)


def simulate(
    cluster: Cluster,
    runs: int,
    max_steps: int,
    first_seed: int = 0,
    progress: Callable[[int, int, float], None] | None = None,
) -> list[RunResult]:
    """Run seeds first_seed.. until `runs` are done or one violates a property."""
    results = []
    start = time.perf_counter()
    for seed in range(first_seed, first_seed + runs):
        result = run(cluster, seed, max_steps)
        results.append(result)
        if progress:
            progress(len(results), sum(r.steps for r in results), time.perf_counter() - start)
        if result.violations:
            break
    return results
