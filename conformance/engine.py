"""The exploration engine: breadth-first search over a system's states, deduplicated by fingerprint.

Generic over a `System` (initial states, successors within bounds, canonical fingerprint,
invariants), so the in-process engine and a distributed one explore the same systems and
must report the same counts. A violation comes back with the shortest path to it, rebuilt
from parent links.
"""

import time
from collections.abc import Callable, Iterable
from typing import Generic, NamedTuple, Protocol, TypeVar

import msgspec

State = TypeVar("State")
Action = TypeVar("Action")


class Violation(NamedTuple):
    rule: str
    detail: str


class System(Protocol[State, Action]):
    """What the engine explores."""

    def initial_states(self) -> list[State]: ...

    def successors(self, state: State) -> Iterable[tuple[Action, State]]:
        """Every (action, next state) within the system's bounds, in a deterministic order."""

    def fingerprint(self, state: State) -> int:
        """Equal for states that are the same up to symmetry; the same in every process."""

    def violations(self, state: State) -> tuple[Violation, ...]: ...

    def property_ids(self) -> tuple[str, ...]: ...


class Counterexample(Generic[State, Action], NamedTuple):
    violation: Violation
    path: list[tuple[Action | None, State]]  # from an initial state (action None) to the violating one


class Progress(msgspec.Struct):
    distinct: int
    generated: int
    depth: int
    queue: int
    seconds: float


class Result(msgspec.Struct):
    distinct: int
    generated: int
    depth: int
    seconds: float
    complete: bool  # the whole bounded state space was explored
    counterexamples: list  # one per violated property, shortest first found


def explore(
    system: System,
    *,
    keep_going: bool = False,
    max_states: int | None = None,
    progress: Callable[[Progress], None] | None = None,
    progress_every: float = 1.0,
) -> Result:
    """Breadth-first search; stops at the first violation unless keep_going (then one per property)."""
    start = time.perf_counter()
    parents: dict[int, int] = {}
    found: dict[str, tuple[Violation, int]] = {}
    frontier: list[tuple[int, object]] = []
    for state in system.initial_states():
        fp = system.fingerprint(state)
        if fp not in parents:
            parents[fp] = fp
            frontier.append((fp, state))
            for v in system.violations(state):
                found.setdefault(v.rule, (v, fp))
    generated = len(frontier)
    depth = 0
    next_report = start + progress_every
    stopped = bool(found) and not keep_going
    while frontier and not stopped:
        level: list[tuple[int, object]] = []
        for parent_fp, state in frontier:
            for _action, successor in system.successors(state):
                generated += 1
                fp = system.fingerprint(successor)
                if fp in parents:
                    continue
                parents[fp] = parent_fp
                level.append((fp, successor))
                for v in system.violations(successor):
                    if v.rule not in found:
                        found[v.rule] = (v, fp)
                        stopped = not keep_going
            if stopped or (max_states is not None and len(parents) >= max_states):
                stopped = True
                break
            if progress and time.perf_counter() >= next_report:
                progress(Progress(len(parents), generated, depth + 1, len(level), time.perf_counter() - start))
                next_report = time.perf_counter() + progress_every
        if level:
            depth += 1
        frontier = level
    seconds = time.perf_counter() - start
    counterexamples = [Counterexample(v, shortest_path(system, parents, fp)) for v, fp in found.values()]
    counterexamples.sort(key=lambda c: len(c.path))
    return Result(len(parents), generated, depth, seconds, not frontier, counterexamples)


def shortest_path(system: System, parents: dict[int, int], target: int) -> list[tuple[object, object]]:
    """Replay from an initial state along the parent links, picking successors by fingerprint."""
    chain = [target]
    while parents[chain[-1]] != chain[-1]:
        chain.append(parents[chain[-1]])
    chain.reverse()
    state = next(s for s in system.initial_states() if system.fingerprint(s) == chain[0])
    path: list[tuple[object, object]] = [(None, state)]
    for fp in chain[1:]:
        action, state = next((a, s) for a, s in system.successors(state) if system.fingerprint(s) == fp)
        path.append((action, state))
    return path


