"""The Spark engine: the same level-synchronous search, on a Spark cluster (`check --engine spark`).

States cross process boundaries self-contained, not as one process's interned ids: a packed
state is its parts' stable fingerprints (System.pack), and the parts themselves (node states,
histories, messages) travel beside them once per partition and task (System.parts, learned by
the receiving worker). States are keyed by the System's 64-bit canonical fingerprint. Every
level and the visited set are partitioned by fingerprint with one partitioner, so removing
already-seen states is a narrow, co-partitioned union, never a shuffle of the visited set:

    level --expand (executors run the model)--> candidates: (fp, (parent fp, packed, count))
    candidates --partitionBy(fingerprint)--> union(visited partitions, candidates), partition by
    partition --> the next level's states, then that partition's summary

A state found several times keeps the smallest parent fingerprint (of one parent's twins, the
first successor) and the generated count is carried in the records themselves, so a task that
runs twice (after an executor is lost) counts nothing twice. Each level is checkpointed
(lineage is cut there); the visited set is each level's fingerprints as one array per
partition (8 bytes a state); when a property fails, every level's (state, parent) pairs are
written as Parquet and the shortest counterexample is rebuilt from them. Counts, depth,
verdicts and counterexamples equal conformance.explore.engine's, for any number of partitions
and executors.
"""

import contextlib
import hashlib
import pickle
import time
from array import array
from collections.abc import Callable, Iterable, Iterator

from conformance.explore.engine import Counterexample, Findings, Progress, Result, SearchInterrupted, System, Violation, limit_reached, shortest_path
from conformance.spark.session import raised_while_interrupted

PARTS = "parts"  # a record of shared parts: (PARTS, [(fp, kind, encoding), ...])
SUMMARY = "summary"  # a partition's summary of a level: (SUMMARY, generated, new states, findings)

_BUILT: dict[str, object] = {}  # per Python worker: the systems (and the like) it has built, by recipe


def fingerprint_partition(key: int | tuple[str, int]) -> int:
    """The one partition function of every keyed RDD here (partitioners compare it by identity):
    a state goes by its fingerprint, a parts record (PARTS, partition) to its partition."""
    return key if type(key) is int else key[1]


def recipe(make: Callable[[], object]) -> tuple[str, Callable[[], object]]:
    """What executors build an object from: the factory, and a token naming it."""
    return hashlib.sha256(pickle.dumps(make)).hexdigest(), make


def built(making: tuple[str, Callable[[], object]]) -> object:
    """What a recipe makes, built once per Python worker and kept with its caches."""
    token, make = making
    made = _BUILT.get(token)
    if made is None:
        made = _BUILT[token] = make()
    return made


class ByParent:
    """Of the ways a state is found, keep the one from the smallest parent fingerprint (of one
    parent's twins, the first successor): `check`'s order, independent of the scan."""

    @staticmethod
    def initial(fp: int) -> int:
        return fp  # an initial state is its own parent

    @staticmethod
    def successor(fp: int, order: int, index: int) -> int:
        return fp


def states_of(system: System, records: Iterable[tuple]) -> list[tuple[int, object, bytes]]:
    """A level partition's states (fp, order, packed), its parts learned first."""
    states = []
    for record in records:
        if type(record[0]) is int:
            states.append(record)
        elif record[0] == PARTS:
            for part in record[1]:
                system.learn(*part)
    return states


def _expand(making: tuple, order: type, partitions: int, records: Iterable[tuple]) -> Iterator[tuple]:
    """A level partition's successors, once each: (fp, (order, packed, times generated)), then
    per destination partition the parts it has not been sent by this task: ((PARTS, p), parts).

    Of a state found several times the smallest order wins (the first found of equals); only
    the winners are packed.
    """
    system = built(making)
    best: dict[int, list] = {}
    for parent, parent_order, packed in states_of(system, records):
        fps, handles = system.expand(system.unpack(packed))
        for index, (fp, handle) in enumerate(zip(fps, handles)):
            mine = order.successor(parent, parent_order, index)
            held = best.get(fp)
            if held is None:
                best[fp] = [mine, handle, 1]
            else:
                held[2] += 1
                if mine < held[0]:
                    held[0], held[1] = mine, handle
    bound: dict[int, list] = {}  # the successors going to each partition
    pack = system.pack
    for fp, (parent, handle, count) in best.items():
        successor = system.reach(handle)
        bound.setdefault(fp % partitions, []).append(successor)
        yield fp, (parent, pack(successor), count)
    for partition, states in bound.items():
        parts = system.parts(states)
        if parts:
            yield (PARTS, partition), parts


def _select_new(making: tuple, depth: int, records: Iterable) -> Iterator[tuple]:
    """One partition of the next level: its parts, its new states (fp, order, packed), its summary.

    The union brings the visited arrays (bytes) and the candidates of every expanding task: a
    state found by several keeps the smallest order.
    """
    system = built(making)
    visited: set[int] = set()
    candidates: dict[int, tuple[int, bytes]] = {}
    generated = 0
    for record in records:
        if type(record) is bytes:
            visited.update(array("q", record))
            continue
        key, value = record
        if type(key) is not int:
            for part in value:
                system.learn(*part)
            continue
        parent, packed, count = value
        generated += count
        if key not in visited:
            held = candidates.get(key)
            if held is None or parent < held[0]:
                candidates[key] = (parent, packed)
    findings = Findings()
    states = []
    for fp, (_parent, packed) in candidates.items():
        state = system.unpack(packed)
        states.append(state)
        found = system.violations(state)
        if found:
            findings.note(depth, fp, found)
    yield PARTS, system.parts(states)
    for fp, (parent, packed) in candidates.items():
        yield fp, parent, packed
    yield SUMMARY, generated, len(candidates), [(d, fp, tuple(v)) for d, fp, v in findings.best.values()]


def _fingerprints(records: Iterable[tuple]) -> Iterator[bytes]:
    """A level partition's state fingerprints as one array: the visited set costs 8 bytes a state."""
    yield array("q", (r[0] for r in records if type(r[0]) is int)).tobytes()


def _is_state(record: tuple) -> bool:
    return type(record[0]) is int


def _is_summary(record: tuple) -> bool:
    return record[0] == SUMMARY


def _level_record(pair: tuple) -> tuple:
    """A keyed initial record as a level record: (fp, order, packed) or (PARTS, parts)."""
    key, value = pair
    return (key, *value) if type(key) is int else (PARTS, value)


def explore_spark(
    session,
    make_system: Callable[[], System],
    work: str,
    *,
    partitions: int,
    keep_going: bool = False,
    max_states: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    local: System | None = None,
    order: type = ByParent,
    each_level: Callable[[object, int], None] | None = None,
) -> Result:
    """conformance.explore.engine.explore's search on Spark; `work` (a directory every executor
    can read, like the checkpoint directory) receives the levels' parent records.

    Counterexample paths are rebuilt in `local` (a fresh system if None), from parent links:
    under another `order` (the corpus search's) there are none. `each_level` sees every level
    the search expands (its records (fp, order, packed) and parts, partitioned by fingerprint)
    with its depth, before it is expanded.
    """
    from pyspark import StorageLevel

    context = session.sparkContext
    start = time.perf_counter()
    local = local or make_system()
    making = recipe(make_system)
    findings = Findings()
    seeds: dict[int, tuple] = {}
    for state in local.initial_states():
        fp = local.fingerprint(state)
        if fp not in seeds:
            seeds[fp] = state
            findings.note(0, fp, local.violations(state))
    keyed = [(fp, (order.initial(fp), local.pack(state))) for fp, state in seeds.items()]
    keyed += [((PARTS, fp % partitions), local.parts([state])) for fp, state in seeds.items()]
    level = context.parallelize(keyed).partitionBy(partitions, fingerprint_partition).map(_level_record, preservesPartitioning=True)
    distinct = generated = len(seeds)
    depth = 0
    visited = []  # per level, its fingerprints; rebuilt from that level's checkpoint if an executor is lost
    held = None  # the last level's states, cached until the next level is computed
    levels = []  # every level, checkpointed: where the parent records come from
    stopped = None
    try:
        while True:
            levels.append(level)
            visited.append(level.mapPartitions(_fingerprints, preservesPartitioning=True).persist(StorageLevel.MEMORY_AND_DISK))
            stopped = limit_reached(distinct, max_states, start, max_seconds)
            if findings and not keep_going or stopped:
                break
            if each_level:
                each_level(level, depth)
            candidates = level.mapPartitions(lambda records: _expand(making, order, partitions, records)).partitionBy(partitions, fingerprint_partition)
            depth_next = depth + 1
            step = context.union([*visited, candidates]).mapPartitions(lambda records: _select_new(making, depth_next, records), preservesPartitioning=True)
            step.persist(StorageLevel.MEMORY_AND_DISK)
            step.checkpoint()
            summaries = step.filter(_is_summary).collect()
            if held is not None:
                held.unpersist()
            held = step
            found_new = sum(s[2] for s in summaries)
            generated += sum(s[1] for s in summaries)
            for summary in summaries:
                for d, fp, v in summary[3]:
                    findings.note(d, fp, (Violation(*v),))
            if not found_new:
                break
            depth = depth_next
            distinct += found_new
            level = step.filter(lambda r: not _is_summary(r))
            if progress:
                progress(Progress(distinct, generated, depth, found_new, time.perf_counter() - start))
        seconds = time.perf_counter() - start
        complete = not (findings and not keep_going) and not stopped
    except BaseException as error:
        if not isinstance(error, KeyboardInterrupt) and not raised_while_interrupted(error):
            raise
        # PySpark's own SIGINT handler has cancelled the jobs already; a gateway the interrupt cut
        # short may refuse to again, and that must not cost the user the summary.
        with contextlib.suppress(Exception):
            context.cancelAllJobs()
        raise SearchInterrupted(distinct, generated, depth, time.perf_counter() - start) from None
    rank = {rule: i for i, rule in enumerate(local.property_ids())}
    counterexamples = []
    if findings and order is ByParent:
        _write_parents(session, levels, work)
        links = _parent_links(session, work, [(d, fp) for d, fp, _v in findings.best.values()])
        counterexamples = [
            Counterexample(v, shortest_path(local, links.__getitem__, fp)) for _depth, fp, v in sorted(findings.best.values(), key=lambda f: rank.get(f[2].rule, len(rank)))
        ]
    for rdd in [*visited, held] if held else visited:
        rdd.unpersist()
    return Result(distinct, generated, depth, seconds, complete, counterexamples, stopped=stopped)


def _write_parents(session, levels: list, work: str) -> None:
    """Every level's (state, parent) fingerprints as Parquet, partitioned by depth: what rebuilds a
    counterexample. Written in one job, when there is a counterexample to rebuild."""
    pairs = session.sparkContext.union([level.filter(_is_state).map(lambda r, d=depth: (r[0], r[1], d)) for depth, level in enumerate(levels)])
    session.createDataFrame(pairs, "fp long, parent long, depth int").write.partitionBy("depth").parquet(f"{work}/parents")


def _parent_links(session, work: str, targets: list[tuple[int, int]]) -> dict[int, int]:
    """The parent of every state on the paths to `targets` (depth, fp), read level by level from
    the deepest down: one query per level, whatever the number of counterexamples."""
    from pyspark.sql import functions

    table = session.read.parquet(f"{work}/parents")
    links: dict[int, int] = {}
    wanted: dict[int, set[int]] = {}
    for depth, fp in targets:
        wanted.setdefault(depth, set()).add(fp)
    for depth in range(max(wanted), -1, -1):
        fps = wanted.pop(depth, set())
        if not fps:
            continue
        rows = table.where((functions.col("depth") == depth) & functions.col("fp").isin(sorted(fps))).select("fp", "parent").collect()
        for fp, parent in rows:
            links[fp] = parent
            if parent != fp:
                wanted.setdefault(depth - 1, set()).add(parent)
        missing = fps - {fp for fp, _ in rows}
        if missing:
            raise LookupError(f"no parent record for states {sorted(missing)} at depth {depth}")
    return links
