"""The exploration engine: breadth-first search over a system's states, deduplicated by fingerprint.

Generic over a `System` (initial states, successors within bounds, canonical fingerprint,
invariants), so the in-process engine and the sharded one explore the same systems and report
the same counts. The search is level-synchronous: when a property fails it finishes that level
and stops, and for each violated property it keeps the violating state with the smallest
fingerprint at that depth, so every engine and every worker count reports the same numbers and
the same shortest counterexamples. A state found several times in one level keeps the parent
with the smallest fingerprint, so counterexample paths do not depend on scan order either.
What a search has seen is kept as TLC keeps it: fingerprints in a table, parent links in files,
full states only for the level being expanded and the one being built (conformance.explore.
visited and .workspace), in memory or, with a state directory, on disk and resumable.
An interrupt (Ctrl-C, or SIGTERM turned into one) ends a search with SearchInterrupted, still a
KeyboardInterrupt for callers that do not look, carrying the counts so far.
"""

import contextlib
import gc
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

import msgspec

from conformance.explore.packed import Packed
from conformance.explore.workspace import Checkpoint, Manifest, Workspace, verified


class Violation(NamedTuple):
    rule: str
    detail: str


class System(Protocol):
    """What the engine explores."""

    def initial_states(self) -> list: ...

    def successors(self, state) -> Iterable[tuple[object, object]]:
        """Every (action, next state) within the system's bounds, in a deterministic order."""

    def expand(self, state) -> tuple[list[int], list]:
        """successors()' states as two lists, what the hot loops take: fingerprints, and handles
        that reach() turns into the states (built only for the states that are new)."""

    def reach(self, handle) -> object:
        """The state an expand() handle stands for."""

    def key(self, handle) -> object:
        """The action an expand() handle stands for, as successors() gives it."""

    def fingerprint(self, state) -> int:
        """Equal for states that are the same up to symmetry; the same in every process."""

    def violations(self, state) -> tuple[Violation, ...]: ...

    def pack(self, states: list) -> Packed:
        """States as bytes for another process (the sharded and Spark engines), given their parts."""

    def parts(self, packed: Packed, known: set[tuple[int, int]]) -> list[tuple[int, int, bytes]]:
        """(fingerprint, kind, encoding) of the shared parts packed states refer to that `known`
        ((kind, fingerprint) pairs) lacks, once each, added to `known`; none if self-contained."""

    def learn(self, fp: int, kind: int, encoded: bytes) -> None:
        """Take in a part another process sent."""

    def unpack(self, packed: Packed) -> list:
        """Packed states, as this process's successors() takes them; their parts learned first."""

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
    # A sharded search's workers, in this run (not those it resumed): each one's seconds busy, and
    # waiting for the slowest to end a level's handover or expansion (the busiest sets the pace).
    worker_seconds: list[tuple[float, float]] = msgspec.field(default_factory=list)


class SearchInterrupted(KeyboardInterrupt):
    """An interrupt during a search, with what had been explored: its `result` is interrupted.

    No counterexample is rebuilt: stopping must be prompt, and a sharded search's workers may be gone.
    """

    def __init__(self, distinct: int, generated: int, depth: int, seconds: float) -> None:
        super().__init__()
        self.result = Result(distinct, generated, depth, seconds, False, [], interrupted=True)


@contextlib.contextmanager
def without_cycle_collection() -> Iterator[None]:
    """A search allocates containers by the million and makes no reference cycles (measured: 697
    cyclic objects left after 7.7M successors of tlc-kraft), so the cycle collector's passes over
    them only cost time: a fifth of it. Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def limit_reached(distinct: int, max_states: int | None, started: float, max_seconds: float | None) -> str | None:
    """The limit a search has reached, checked as a level is about to start: every level before
    it is then complete, so the counts are those of a search bounded in depth."""
    if max_states is not None and distinct >= max_states:
        return "max-states"
    if max_seconds is not None and time.perf_counter() - started >= max_seconds:
        return "max-seconds"
    return None


class Findings:
    """Per property, the violating (depth, fingerprint) that wins: the shallowest, then the smallest."""

    def __init__(self) -> None:
        self.best: dict[str, tuple[int, int, Violation]] = {}

    def note(self, depth: int, fp: int, violations: tuple[Violation, ...]) -> None:
        for v in violations:
            held = self.best.get(v.rule)
            if held is None or (depth, fp) < held[:2]:
                self.best[v.rule] = (depth, fp, v)

    def note_all(self, found: Iterable[tuple[int, int, Violation]]) -> None:
        for depth, fp, violation in found:
            self.note(depth, fp, (violation,))

    def __bool__(self) -> bool:
        return bool(self.best)


@without_cycle_collection()
def explore(
    system: System,
    *,
    keep_going: bool = False,
    max_states: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    progress_every: float = 1.0,
    state_dir: Path | None = None,
    resume: bool = False,
) -> Result:
    """Breadth-first search; stops after the first level with a violation unless keep_going,
    or before a level once a limit is reached (--max-seconds counts every run of a resumed search).

    With `state_dir` the search is kept on disk there and checkpointed after every level; with
    `resume` it carries on from the last checkpoint in `state_dir`, once its files verify.
    """
    saved = verified(state_dir) if resume else None  # before any of its files is opened
    space = Workspace(system, state_dir)
    manifest = Manifest(state_dir, [""], saved.files if saved else {}) if state_dir is not None else None
    findings = Findings()
    generated = depth = 0
    start = time.perf_counter()

    def save() -> None:
        """A level ended: its files durable, then, kept on disk, the checkpoint vouching for them."""
        space.save()
        if manifest is not None:
            manifest.seal(checkpoint(space.visited.level, len(space.visited), findings, generated, depth, start), space.visited.table)

    try:
        if saved:
            frontier = space.resume(saved.completed)
            for d, fp, rule, detail in saved.findings:
                findings.note(d, fp, (Violation(rule, detail),))
            generated, depth, start = saved.generated, saved.depth, start - saved.seconds
        else:
            space.start()
            builder = space.builder(0)
            for state in system.initial_states():
                builder.offer(system.fingerprint(state), None, state)
            frontier = builder.finish()
            generated = builder.generated
            findings.note_all(builder.findings)
            save()
        visited = space.visited
        next_report = time.perf_counter() + progress_every
        stopped = None
        expand = expander(system)
        while len(frontier) and not (findings and not keep_going):
            stopped = limit_reached(len(visited), max_states, start, max_seconds)
            if stopped:
                break
            builder = space.builder(depth + 1)
            builder.thaw = system.reach
            add = builder.add
            for parent_fp, state in frontier:
                found_fps, found = expand(parent_fp, state)
                add(parent_fp, found_fps, found)
                if progress and time.perf_counter() >= next_report:
                    progress(Progress(len(visited), generated + builder.generated + len(builder.states), depth + 1, len(builder.level), time.perf_counter() - start))
                    next_report = time.perf_counter() + progress_every
            level_expanded(system, depth)
            level = builder.finish()
            generated += builder.generated
            findings.note_all(builder.findings)
            if len(level):
                depth += 1
            save()
            frontier.discard()  # after the checkpoint that no longer needs it
            frontier = level
        seconds = time.perf_counter() - start
        order = {rule: i for i, rule in enumerate(system.property_ids())}
        counterexamples = [
            Counterexample(v, shortest_path(system, visited.parent, fp))
            for _depth, fp, v in sorted(findings.best.values(), key=lambda f: order.get(f[2].rule, len(order)))
        ]
        return Result(len(visited), generated, depth, seconds, not len(frontier), counterexamples, stopped=stopped)
    except KeyboardInterrupt:
        raise SearchInterrupted(len(space.visited or ()), generated, depth, time.perf_counter() - start) from None
    finally:
        space.close()


def expander(system: System) -> Callable[[int, object], tuple[list[int], list]]:
    """system.expand as the engines call it, with the state's fingerprint, which they hold: a
    system that records what it expands (conformance.explore.liveness_search.Recording) takes it
    as `expand_known(fp, state)` rather than computing it again."""
    known = getattr(system, "expand_known", None)
    if known is not None:
        return known
    expand = system.expand
    return lambda _fp, state: expand(state)


def level_expanded(system: System, depth: int) -> None:
    """Tell a system that records what it expands (conformance.explore.liveness_search.Recording)
    that this process has expanded every state of `depth` it had."""
    note = getattr(system, "level_expanded", None)
    if note is not None:
        note(depth)


def checkpoint(completed: int, distinct: int, findings: Findings, generated: int, depth: int, start: float, workers: int = 1) -> Checkpoint:
    """The search as it stands after `completed` levels."""
    noted = [(d, fp, v.rule, v.detail) for d, fp, v in findings.best.values()]
    return Checkpoint(completed, distinct, generated, depth, time.perf_counter() - start, noted, workers)


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
