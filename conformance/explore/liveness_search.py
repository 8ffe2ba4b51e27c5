"""`check --liveness`: the safety search's engines, each state's steps recorded as it is expanded,
then every liveness property judged on the recorded graph (conformance.explore.lasso).

The search is the one `check` runs (conformance.explore.engine, or .sharded over several worker
processes, on the same fingerprint table, in memory or in a state directory), with the system
wrapped in a Recording: as a process expands a state it appends the state's fingerprint, its
successors' fingerprints, each step's label, the fair actions the state owes and the goals it
meets to files of its own. Every state is expanded by exactly one process, so the files together
hold the graph once, whatever the number of workers; they are read back as arrays, in the order
recorded. Where the judgement chooses among states (a lasso's), it chooses by depth, then
fingerprint, so the verdicts and lassos are the same for any number of workers.
Every safety property is checked by the engine on the same states, as the safety search checks it.
"""

import contextlib
import os
import tempfile
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

import msgspec
import numpy as np

from conformance.explore.engine import Progress, System, explore
from conformance.explore.lasso import FAULT, Graph, Walk, judge_all
from conformance.explore.sharded import explore_sharded
from conformance.explore.sorted_keys import argsorted, distinct, located

FLUSH_EDGES = 1 << 20  # a process writes its records out once it holds this many steps, and at each level's end
STATE_COLUMNS = 4  # a state's record: fingerprint, goals met, steps, actions owed
RECORDS = {"states": "q", "steps": "q", "labels": "i", "owed": "i", "levels": "q"}  # each file's array type: labels and fair actions are small numbers


class LivenessSystem(System, Protocol):
    """What the fair-cycle search needs of a system beyond the engines' (conformance.explore.
    kraft_liveness.KraftLiveness): its liveness properties, and per state, the labels of the steps
    expand() gives (see labels)."""

    def goal_ids(self) -> tuple[str, ...]: ...

    def action_ids(self) -> list[int]:
        """Each fair action labels() has numbered so far, as an id the same in every process:
        number n is action_ids()[n] (each process numbers the actions as it meets them)."""

    def labels(self, state, handles: list) -> tuple[list[int], list[int], int]:
        """Each step's label (a fair action's number >= 0, NO_FAIRNESS or FAULT), the fair actions
        the state owes (each once), and the goals it meets as bits (bit i: goal_ids()[i])."""

    def leaves(self, state, handles: list) -> bool:
        """Whether a step the state enables that is no fault leaves the bounds (asked of a lasso's states only)."""


class Lasso(NamedTuple):
    """A violation: the path to the cycle's first state (its (action key, state) steps, the first
    with key None) and the cycle's steps from there back to that state."""

    prefix: list[tuple[object, object]]
    cycle: list[tuple[object, object]]
    wedged: bool


class Verdict(msgspec.Struct):
    """One property's outcome: its lasso if violated, and how many components were fair but for
    actions that leave the bounds (at_bounds) or unfair."""

    rule: str
    lasso: Lasso | None
    components: int
    at_bounds: int
    unfair: int


class LivenessResult(msgspec.Struct):
    distinct: int
    transitions: int
    seconds: float
    complete: bool
    stopped: str | None  # the limit that stopped the search: "max-states" or "max-seconds"
    verdicts: list[Verdict]
    counterexamples: list  # the safety properties' (conformance.explore.engine.Counterexample), in property order
    workers: int = 1
    search_seconds: float = 0.0  # of `seconds`, the search itself; the rest reads the records and judges them


class Recording:
    """A system whose expand() also records what it expands, under `directory`, in files named
    after the process (a sharded search's workers each write their own): per state its
    fingerprint, the goals it meets and how many steps and actions owed it has; each step's
    target and label; the actions owed; how many states each level had; and the process's
    numbering of the fair actions (action_ids)."""

    def __init__(self, system: LivenessSystem, directory: Path) -> None:
        self.system, self.directory = system, directory
        self.prefix = directory / str(os.getpid())
        self.records: dict[str, tuple[str, list[int]]] = {name: (kind, []) for name, kind in RECORDS.items()}
        self.states, self.steps, self.labels, self.owed = (self.records[name][1] for name in ("states", "steps", "labels", "owed"))
        self.in_level = 0

    def __getattr__(self, name: str) -> object:
        """The rest of the System protocol (reach, violations, pack...): the recorded system's own."""
        return getattr(self.system, name)

    def expand(self, state) -> tuple[list[int], list]:
        return self.expand_known(self.system.fingerprint(state), state)

    def expand_known(self, fp: int, state) -> tuple[list[int], list]:
        """expand(), given the state's fingerprint (the engines hold it: engine.expander)."""
        system = self.system
        fps, handles = system.expand(state)
        labels, owed, goals = system.labels(state, handles)
        self.states += (fp, goals, len(fps), len(owed))
        self.steps += fps
        self.labels += labels
        self.owed += owed
        self.in_level += 1
        if len(self.steps) >= FLUSH_EDGES:
            self.flush()
        return fps, handles

    def level_expanded(self, depth: int) -> None:
        """Every state of `depth` this process had is expanded: its records written out."""
        self.records["levels"][1].extend((depth, self.in_level))
        self.in_level = 0
        self.flush()

    def flush(self) -> None:
        for name, (kind, records) in self.records.items():
            if records:
                with open(f"{self.prefix}.{name}", "ab") as out:
                    array(kind, records).tofile(out)
                del records[:]
        with open(f"{self.prefix}.actions", "wb") as out:  # the whole numbering, as it stands
            array("q", self.system.action_ids()).tofile(out)


def recorded_graph(directory: Path, threads: int = 1) -> Graph:
    """The records of every process that searched, as one graph, each process's states in the
    order it recorded them, the processes' one after the other, and each fair action numbered by
    its place among the ids of all of them."""
    processes = sorted({path.stem for path in directory.glob("*.states")})

    def read(process: str, name: str) -> np.ndarray:
        path = directory / f"{process}.{name}"
        return np.fromfile(path, dtype=np.dtype(RECORDS.get(name, "q"))).astype(np.int64, copy=False) if path.exists() else np.zeros(0, dtype=np.int64)

    numbering = {p: read(p, "actions") for p in processes}
    actions = distinct(np.concatenate([np.zeros(0, dtype=np.int64), *numbering.values()]))[0]
    ranks = {p: np.searchsorted(actions, numbered) for p, numbered in numbering.items()}  # each process's numbers to places in `actions`

    def renumbered(process: str, name: str) -> np.ndarray:
        numbers = read(process, name)
        fair = numbers >= 0
        numbers[fair] = ranks[process][numbers[fair]]
        return numbers

    def joined(parts: Iterable[np.ndarray]) -> np.ndarray:
        return np.concatenate([np.zeros(0, dtype=np.int64), *parts])

    states = joined(read(p, "states") for p in processes).reshape(-1, STATE_COLUMNS)
    depth = joined(np.repeat(level[:, 0], level[:, 1]) for level in (read(p, "levels").reshape(-1, 2) for p in processes))
    fps, degree, owes = states[:, 0], states[:, 2], states[:, 3]
    by_fp = np.argsort(fps)
    steps = joined(read(p, "steps") for p in processes)
    by_target = argsorted(steps, threads)
    place, found = located(fps[by_fp], steps, threads, by_target)
    into = by_target[found[by_target]]  # the edges to a state expanded, grouped by its target's place in by_fp
    rank = np.empty(len(fps), dtype=np.int64)
    rank[by_fp] = np.arange(len(fps), dtype=np.int64)
    return Graph(
        fps=fps,
        depth=depth,
        goals=states[:, 1],
        edge_start=np.concatenate(([0], np.cumsum(degree))),
        edge_to=np.where(found, by_fp[place], -1),
        edge_label=joined(renumbered(p, "labels") for p in processes),
        owed_start=np.concatenate(([0], np.cumsum(owes))),
        owed=joined(renumbered(p, "owed") for p in processes),
        actions=actions,
        into=into,
        into_start=np.concatenate(([0], np.cumsum(np.bincount(place[into], minlength=len(fps))))),
        rank=rank,
    )


def rebuilt(system: LivenessSystem, graph: Graph, walk: Walk) -> Lasso:
    """A walk's states and action keys, found again by expanding each state and taking the step
    to the next fingerprint with the same label; wedged if its component is closed and no state
    of it has a step beyond the bounds."""
    first = int(graph.fps[walk.prefix[0][0]])
    state = next(s for s in system.initial_states() if system.fingerprint(s) == first)
    steps = [(None, state)]
    for target, place in walk.prefix[1:] + walk.cycle:
        state, key = step_to(system, graph, state, target, place)
        steps.append((key, state))
    wedged = walk.closed and not any(system.leaves(s, system.expand(s)[1]) for s in component_states(system, graph, walk.members, steps[len(walk.prefix) - 1][1]))
    return Lasso(steps[: len(walk.prefix)], steps[len(walk.prefix) :], wedged)


def shortest_lasso(system: LivenessSystem, graph: Graph, walks: list[Walk]) -> Lasso | None:
    """Of lassos equally short, the first wedged one, else the first."""
    lassos = [rebuilt(system, graph, walk) for walk in walks]
    return next((lasso for lasso in lassos if lasso.wedged), lassos[0] if lassos else None)


def step_to(system: LivenessSystem, graph: Graph, state, target: int, place: int) -> tuple[object, object]:
    """The state `target` of the graph as a step from `state` labelled `place` (a fair action's
    number, or NO_FAIRNESS or FAULT) reaches it, and the step's action key."""
    wanted = int(graph.actions[place]) if place >= 0 else place
    fps, handles = system.expand(state)
    ids = system.action_ids()
    at = next(i for i, (fp, label) in enumerate(zip(fps, system.labels(state, handles)[0])) if fp == graph.fps[target] and (ids[label] if label >= 0 else label) == wanted)
    return system.reach(handles[at]), system.key(handles[at])


def component_states(system: LivenessSystem, graph: Graph, members: list[int], entry) -> list:
    """The states of a strongly connected component, from its first one along its fault-free steps."""
    inside, found = set(members), {members[0]: entry}
    queue = [members[0]]
    for member in queue:
        for target, place in graph.edges(member):
            if target in inside and target not in found and place != FAULT:
                found[target] = step_to(system, graph, found[member], target, place)[0]
                queue.append(target)
    return list(found.values())


def check_liveness(
    system: LivenessSystem,
    *,
    workers: int = 1,
    max_states: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    state_dir: Path | None = None,
) -> LivenessResult:
    """Every liveness property of the system judged on its reachable graph, and every safety
    property on each of its states; the search on `workers` processes (forked: each takes a copy
    of `system`), its table and levels in `state_dir` if given (the records beside them, in
    state_dir/liveness), else in memory (the records in a temporary directory)."""
    start = time.perf_counter()
    with small_pages(), records_directory(state_dir) as records:

        def recording() -> Recording:
            return Recording(system, records)

        options = {"keep_going": True, "max_states": max_states, "max_seconds": max_seconds, "progress": progress, "state_dir": state_dir}
        if workers == 1:
            result = explore(recording(), **options)
        else:
            result = explore_sharded(recording, workers, local=system, **options)
        searched = time.perf_counter() - start
        graph = recorded_graph(records, workers)
        judged = judge_all(graph, system.goal_ids(), workers)
    verdicts = [Verdict(j.rule, shortest_lasso(system, graph, j.walks), j.components, j.at_bounds, j.unfair) for j in judged]
    transitions = int(graph.edge_start[-1]) if len(graph) else 0
    return LivenessResult(len(graph), transitions, time.perf_counter() - start, result.complete, result.stopped, verdicts, result.counterexamples, workers, searched)


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """numpy's arrays in Linux's ordinary pages while the graph is read back and judged. numpy
    asks for transparent huge pages for every array over 4 MiB; on a virtual machine whose host
    takes back the memory its guest frees (as the search's workers exit), faulting 2 MiB pages
    in again can stall, and on a 2-core one reading back and judging smoke under kafka-4.0 took
    2.4 times as long with them (about 10.5 s against 4.4)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy before 2.0
        from numpy.core.multiarray import _set_madvise_hugepage
    before = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(before)


@contextlib.contextmanager
def records_directory(state_dir: Path | None) -> Iterator[Path]:
    """Where the processes write their records: state_dir/liveness, or a temporary directory
    removed afterwards."""
    if state_dir is None:
        with tempfile.TemporaryDirectory(prefix="kraftcheck-liveness-") as temporary:
            yield Path(temporary)
        return
    directory = state_dir / "liveness"
    directory.mkdir(parents=True)
    yield directory
