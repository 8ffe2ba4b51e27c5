"""The corpus search on Spark (`traces generate --engine spark`): the places the scan of
conformance/corpus/search.py keeps, found level by level on the executors.

The levels are the Spark engine's (conformance/explore/spark_engine.py), ordered by path
(ByPath): of the ways a state is found, the smallest path wins, the one a scan meets first.
Before a level is expanded, two jobs find its places:

    probes   every state's probe keys with its (path, fp) --partitionBy(key)--> beside the keys
             probed at earlier levels (one array per partition, co-partitioned) --> each key
             probed for the first time, with the smallest (path, fp) that has it
    places   those winners by state fingerprint, beside the level (co-partitioned) --> every
             place of every state; per partition, then per cell, a cell's CANDIDATES first places
             --collect--> merged on the driver in level order, as the scan notes them (note_cells)

A probe key is a 64-bit int, so the probed keys cost 8 bytes each, as the visited states do.
"""

from array import array
from bisect import insort
from collections.abc import Callable, Iterable, Iterator
from functools import partial

import numpy as np

from conformance.corpus.cells import CANDIDATES, note_cells
from conformance.corpus.search import Coverage, Searched, extend
from conformance.explore.engine import Progress, System
from conformance.explore.spark_engine import PARTS, built, explore_spark, fingerprint_partition, recipe, states_of
from conformance.spark.session import SparkRun


class ByPath:
    """Of the ways a state is found, keep the smallest path (its successor indices from the
    initial state): the one a breadth-first scan meets first."""

    @staticmethod
    def initial(fp: int) -> bytes:
        return b""

    links = False  # a path is no parent link

    @staticmethod
    def successors(parents: list[tuple], origins: np.ndarray, indices: np.ndarray) -> list[bytes]:
        """The paths of successors (see ByParent.successors)."""
        return [extend(parents[origin][1], index) for origin, index in zip(origins.tolist(), indices.tolist())]

    @staticmethod
    def smallest(fps: np.ndarray, paths: list[bytes]) -> tuple[np.ndarray, list[bytes], np.ndarray]:
        """Of candidates, one a fingerprint: the one of smallest path, its path and place (see
        ByParent.smallest); the state kept is that one, as the scan keeps it."""
        best: dict[int, tuple[bytes, int]] = {}
        for at, (fp, path) in enumerate(zip(fps.tolist(), paths)):
            held = best.get(fp)
            if held is None or path < held[0]:
                best[fp] = (path, at)
        kept = sorted(best)
        return np.array(kept, dtype=np.int64), [best[fp][0] for fp in kept], np.array([best[fp][1] for fp in kept], dtype=np.int64)


def coverage_system(making: tuple) -> System:
    """The explorer system of a coverage recipe: one object per worker for both."""
    return built(making).system


def _probe_candidates(making: tuple, records: Iterable[tuple]) -> Iterator[tuple[int, tuple[bytes, int]]]:
    """A level partition's probe keys, each with the smallest (path, fp) of its states that has it."""
    coverage = built(making)
    system = coverage.system
    best: dict[int, tuple[bytes, int]] = {}
    for fp, path, state in states_of(system, records):
        mine = (path, fp)
        for key, _position, _message in coverage.probe_keys(state):
            held = best.get(key)
            if held is None or mine < held:
                best[key] = mine
    return iter(best.items())


def _select_fresh(records: Iterable) -> Iterator:
    """One partition's keys probed for the first time: the array of them, then each (key, (path, fp)).
    The union brings the arrays of earlier levels' keys and this level's candidates."""
    probed: set[int] = set()
    fresh: dict[int, tuple[bytes, int]] = {}
    for record in records:
        if type(record) is bytes:
            probed.update(array("q", record))
            continue
        key, mine = record
        if key not in probed:
            held = fresh.get(key)
            if held is None or mine < held:
                fresh[key] = mine
    yield array("q", fresh).tobytes()
    yield from fresh.items()


def _places(making: tuple, records: Iterable[tuple]) -> Iterator[tuple[str, list]]:
    """A level partition's places: per cell its CANDIDATES first (path, place) pairs. The union
    brings the level (states and parts) and the probe keys each state is the first to have."""
    coverage = built(making)
    system = coverage.system
    level, won = [], {}
    for record in records:
        if len(record) == 2 and record[0] != PARTS:
            won.setdefault(record[0], set()).add(record[1])
        else:
            level.append(record)
    kept: dict[str, list] = {}
    for fp, path, state in states_of(system, level):
        for within, found in coverage.places(state, system.expand(state)[1], won.get(fp, set()).__contains__):
            place = (path, within)
            for cell in found:
                first = kept.setdefault(cell, [])
                if len(first) < CANDIDATES:
                    insort(first, place)
                elif place < first[-1]:
                    insort(first, place)
                    first.pop()
    return iter(kept.items())


def _first_places(one: list, other: list) -> list:
    return sorted(one + other)[:CANDIDATES]


def _is_array(record: object) -> bool:
    return type(record) is bytes


def search_on_spark(spark: SparkRun, make_coverage: Callable[[], Coverage], local: Coverage, max_states: int, progress: Callable[[str], None] | None = None) -> Searched:
    """conformance.corpus.search.search on Spark: the same places, states and completeness.
    `local` is this process's coverage (the initial states come from it)."""
    from pyspark import StorageLevel

    context = spark.session.sparkContext
    partitions = spark.partitions
    making = recipe(make_coverage)
    first: dict[str, tuple] = {}
    probed: list = []  # per level, the keys it probed first: one array per partition
    held: list = []

    def find_places(level, depth: int) -> None:
        candidates = level.mapPartitions(partial(_probe_candidates, making)).partitionBy(partitions, fingerprint_partition)
        fresh = context.union([*probed, candidates]).mapPartitions(_select_fresh, preservesPartitioning=True)
        fresh.persist(StorageLevel.MEMORY_AND_DISK)
        fresh.checkpoint()
        held.append(fresh)
        probed.append(fresh.filter(_is_array))
        winners = fresh.filter(lambda r: not _is_array(r)).map(lambda pair: (pair[1][1], pair[0])).partitionBy(partitions, fingerprint_partition)
        places = context.union([level, winners]).mapPartitions(partial(_places, making))
        for cell, kept in sorted(places.reduceByKey(_first_places).collect()):
            for place in kept:
                note_cells(first, (cell,), place)

    def report(p: Progress) -> None:
        if progress:
            progress(f"level {p.depth}: {p.distinct:,} states, {len(first):,} cells, {p.seconds:.1f}s")

    try:
        result = explore_spark(
            spark.session,
            partial(coverage_system, making),
            spark.work,
            partitions=partitions,
            keep_going=True,
            max_states=max_states,
            progress=report,
            local=local.system,
            order=ByPath,
            each_level=find_places,
        )
    finally:
        for rdd in held:
            rdd.unpersist()
    return Searched(first, result.distinct, result.complete)
