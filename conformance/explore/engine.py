"""The exploration engine: breadth-first search over a system's states, deduplicated by fingerprint.

Generic over a `System` (initial states, successors within bounds, canonical fingerprint,
invariants), so the in-process engine and the sharded one explore the same systems and report
the same counts. The search is level-synchronous: when a property fails it finishes that level
and stops, and for each violated property it keeps the violating state with the smallest
fingerprint at that depth, so every engine and every worker count reports the same numbers and
the same shortest counterexamples. A state found several times in one level keeps the parent
with the smallest fingerprint, so counterexample paths do not depend on scan order either.
An interrupt (Ctrl-C, or SIGTERM turned into one) ends a search with SearchInterrupted, still a
KeyboardInterrupt for callers that do not look, carrying the counts so far.
"""

import time
from collections.abc import Callable, Iterable
from typing import NamedTuple, Protocol

import msgspec


class Violation(NamedTuple):
    rule: str
    detail: str


class System(Protocol):
    """What the engine explores."""

    def initial_states(self) -> list: ...

    def successors(self, state) -> Iterable[tuple[object, object]]:
        """Every (action, next state) within the system's bounds, in a deterministic order."""

    def fingerprint(self, state) -> int:
        """Equal for states that are the same up to symmetry; the same in every process."""

    def violations(self, state) -> tuple[Violation, ...]: ...

    def pack(self, state) -> bytes:
        """The state as bytes for another process (the Spark engine), given its parts."""

    def parts(self, states: Iterable) -> list[tuple[int, int, bytes]]:
        """(fingerprint, kind, encoding) of the shared parts packed states refer to, once each (none if self-contained)."""

    def learn(self, fp: int, kind: int, encoded: bytes) -> None:
        """Take in a part another process sent."""

    def unpack(self, packed: bytes):
        """A packed state, as this process's successors() takes it; its parts learned first."""

    def property_ids(self) -> tuple[str, ...]: ...


class Counterexample(NamedTuple):
    violation: Violation
    path: list  # (action, state) pairs from an initial state (action None) to the violating one


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
    counterexamples: list  # one per violated property, in property order
    interrupted: bool = False  # ended by an interrupt: the counts so far, not complete, no counterexamples
    stopped: str | None = None  # the limit that ended the search at a level boundary: "max-states" or "max-seconds"


class SearchInterrupted(KeyboardInterrupt):
    """An interrupt during a search, with what had been explored: its `result` is interrupted.

    No counterexample is rebuilt: stopping must be prompt, and a sharded search's workers may be gone.
    """

    def __init__(self, distinct: int, generated: int, depth: int, seconds: float) -> None:
        super().__init__()
        self.result = Result(distinct, generated, depth, seconds, False, [], interrupted=True)


def limit_reached(distinct: int, max_states: int | None, started: float, max_seconds: float | None) -> str | None:
    """The limit a search has reached, checked as a level is about to start: every level before
    it is then complete, so the counts are those of a search bounded in depth."""
    if max_states is not None and distinct >= max_states:
        return "max-states"
    if max_seconds is not None and time.perf_counter() - started >= max_seconds:
        return "max-seconds"
    return None


class ParentLinks:
    """Each state's parent: settled for earlier levels; in the level being built the smallest wins."""

    def __init__(self) -> None:
        self.settled: dict[int, int] = {}
        self.level: dict[int, int] = {}

    def adopt(self, fp: int, parent_fp: int) -> bool:
        """Note a state found in the level being built; True the first time it is seen at all."""
        if fp in self.settled:
            return False
        held = self.level.get(fp)
        if held is None:
            self.level[fp] = parent_fp
            return True
        if parent_fp < held:
            self.level[fp] = parent_fp
        return False

    def settle(self) -> None:
        self.settled.update(self.level)
        self.level = {}

    def get(self, fp: int) -> int | None:
        return self.settled.get(fp, self.level.get(fp))

    def __len__(self) -> int:
        return len(self.settled) + len(self.level)


class Findings:
    """Per property, the violating (depth, fingerprint) that wins: the shallowest, then the smallest."""

    def __init__(self) -> None:
        self.best: dict[str, tuple[int, int, Violation]] = {}

    def note(self, depth: int, fp: int, violations: tuple[Violation, ...]) -> None:
        for v in violations:
            held = self.best.get(v.rule)
            if held is None or (depth, fp) < held[:2]:
                self.best[v.rule] = (depth, fp, v)

    def __bool__(self) -> bool:
        return bool(self.best)


def explore(
    system: System,
    *,
    keep_going: bool = False,
    max_states: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    progress_every: float = 1.0,
) -> Result:
    """Breadth-first search; stops after the first level with a violation unless keep_going,
    or before a level once a limit is reached."""
    start = time.perf_counter()
    parents = ParentLinks()
    findings = Findings()
    frontier: list[tuple[int, object]] = []
    for state in system.initial_states():
        fp = system.fingerprint(state)
        if parents.adopt(fp, fp):
            frontier.append((fp, state))
            findings.note(0, fp, system.violations(state))
    parents.settle()
    generated = len(frontier)
    depth = 0
    next_report = start + progress_every
    stopped = None
    try:
        while frontier and not (findings and not keep_going):
            stopped = limit_reached(len(parents), max_states, start, max_seconds)
            if stopped:
                break
            level: list[tuple[int, object]] = []
            for parent_fp, state in frontier:
                for _action, successor in system.successors(state):
                    generated += 1
                    fp = system.fingerprint(successor)
                    if parents.adopt(fp, parent_fp):
                        level.append((fp, successor))
                        found = system.violations(successor)
                        if found:
                            findings.note(depth + 1, fp, found)
                if progress and time.perf_counter() >= next_report:
                    progress(Progress(len(parents), generated, depth + 1, len(level), time.perf_counter() - start))
                    next_report = time.perf_counter() + progress_every
            parents.settle()
            if level:
                depth += 1
            frontier = level
    except KeyboardInterrupt:
        raise SearchInterrupted(len(parents), generated, depth, time.perf_counter() - start) from None
    seconds = time.perf_counter() - start
    order = {rule: i for i, rule in enumerate(system.property_ids())}
    counterexamples = [
        Counterexample(v, shortest_path(system, parents.get, fp))
        for _depth, fp, v in sorted(findings.best.values(), key=lambda f: order.get(f[2].rule, len(order)))
    ]
    return Result(len(parents), generated, depth, seconds, not frontier, counterexamples, stopped=stopped)


def shortest_path(system: System, parent_of: Callable[[int], int], target: int) -> list[tuple[object, object]]:
    """Replay from an initial state along the parent links, picking successors by fingerprint."""
    chain = [target]
    while parent_of(chain[-1]) != chain[-1]:
        chain.append(parent_of(chain[-1]))
    chain.reverse()
    state = next(s for s in system.initial_states() if system.fingerprint(s) == chain[0])
    path: list[tuple[object, object]] = [(None, state)]
    for fp in chain[1:]:
        action, state = next((a, s) for a, s in system.successors(state) if system.fingerprint(s) == fp)
        path.append((action, state))
    return path
