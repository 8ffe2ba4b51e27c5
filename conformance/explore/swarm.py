"""Swarm simulation: many seeded random runs, every violated property with its shortest run.

Where `simulate` stops at the first violating seed, a swarm runs them all and keeps, per
property, the violating run with the fewest steps (the smallest seed on a tie): the shortest
reproducing run the seeds tried. In-process, or on Spark (`simulate --engine spark`) with the
seeds spread over the executors in waves; the two give the same result, since every run
depends on its seed alone.
"""

import time
from collections.abc import Callable, Iterable

import msgspec

from conformance.explore.simulate import run
from model import properties
from model.cluster import Bounds, Cluster
from model.config import ClusterConfig

WAVES = 10  # a Spark swarm runs its seeds in this many jobs, reporting progress after each


class RunSummary(msgspec.Struct, frozen=True, array_like=True):
    """A violating run, small enough to travel: its seed, its length, what it violated."""

    seed: int
    steps: int
    violations: tuple[tuple[str, str], ...]  # (rule, detail)


class SwarmResult(msgspec.Struct):
    runs: int
    steps: int
    seconds: float
    shortest: dict[str, RunSummary]  # per violated property, in the properties' order


class Progress(msgspec.Struct):
    runs: int
    steps: int
    violating: int
    seconds: float


def summarise(config: ClusterConfig, bounds: Bounds, seeds: Iterable[int], max_steps: int) -> tuple[int, int, list[RunSummary]]:
    """Run some seeds: how many, their steps in all, and the violating ones."""
    cluster = Cluster(config, bounds)
    runs = steps = 0
    violating = []
    for seed in seeds:
        result = run(cluster, seed, max_steps)
        runs += 1
        steps += result.steps
        if result.violations:
            violating.append(RunSummary(seed, result.steps, tuple((v.rule, v.detail) for v in result.violations)))
    return runs, steps, violating


def shortest(violating: Iterable[RunSummary]) -> dict[str, RunSummary]:
    """Per violated property, the run with the fewest steps, then the smallest seed."""
    best: dict[str, RunSummary] = {}
    for summary in violating:
        for rule, _detail in summary.violations:
            held = best.get(rule)
            if held is None or (summary.steps, summary.seed) < (held.steps, held.seed):
                best[rule] = summary
    order = {rule: i for i, rule in enumerate(properties.PROPERTIES)}
    return {rule: best[rule] for rule in sorted(best, key=lambda r: order.get(r, len(order)))}


def swarm(
    config: ClusterConfig, bounds: Bounds, first_seed: int, runs: int, max_steps: int, progress: Callable[[Progress], None] | None = None, *, chunk: int = 50
) -> SwarmResult:
    """The swarm in this process."""
    start = time.perf_counter()
    done = steps = 0
    violating: list[RunSummary] = []
    for low in range(first_seed, first_seed + runs, chunk):
        count, chunk_steps, found = summarise(config, bounds, range(low, min(low + chunk, first_seed + runs)), max_steps)
        done, steps = done + count, steps + chunk_steps
        violating += found
        if progress:
            progress(Progress(done, steps, len(violating), time.perf_counter() - start))
    return SwarmResult(done, steps, time.perf_counter() - start, shortest(violating))


def swarm_spark(
    session, config: ClusterConfig, bounds: Bounds, first_seed: int, runs: int, max_steps: int, partitions: int, progress: Callable[[Progress], None] | None = None
) -> SwarmResult:
    """The swarm on Spark: each wave's seeds split over `partitions` tasks, one summary per task."""
    context = session.sparkContext
    start = time.perf_counter()
    done = steps = 0
    violating: list[RunSummary] = []
    wave = max(partitions, -(-runs // WAVES))
    for low in range(first_seed, first_seed + runs, wave):
        seeds = range(low, min(low + wave, first_seed + runs))
        slices = context.parallelize(seeds, min(partitions, len(seeds)))
        for count, task_steps, found in slices.mapPartitions(lambda part: [summarise(config, bounds, part, max_steps)]).collect():
            done, steps = done + count, steps + task_steps
            violating += found
        if progress:
            progress(Progress(done, steps, len(violating), time.perf_counter() - start))
    return SwarmResult(done, steps, time.perf_counter() - start, shortest(violating))
