"""The corpus search on Spark (`traces generate --engine spark`): the places the scan of
conformance/corpus/search.py keeps, found in the Spark engine's own jobs.

The levels are the Spark engine's (conformance/explore/spark_engine.py), ordered by path
(ByPath): of the ways a state is found, the smallest path wins, the one a scan meets first.
A state's places are its steps to its successors and its probes; a probe is a place only where
its key is met first, in scan order. So the places of level d come in three stages, each in the
task that has what it needs, one job after the other:

    job d      expanding level d: each state's steps (its successors are at hand), and its
               probe keys, each with the smallest (path, fp) that has it, sent to the key's owner
    job d + 1  the key's owner: the keys not met at an earlier level (its key table, labelled by
               level), each won by its smallest (path, fp), sent to that state's owner
    job d + 2  the state's owner: the probes of the keys its states won (the level kept on file)

Each task keeps, per cell, its CANDIDATES first places; the driver merges a level's, its steps and
probes, and notes them in level order, as the scan does (note_cells). A job more after the last
level gives the last probes. A probe key is a 64-bit int: the keys met cost 8 bytes each.
"""

from bisect import insort
from collections.abc import Callable
from functools import partial

import msgspec
import numpy as np

from conformance.corpus.cells import CANDIDATES, note_cells
from conformance.corpus.search import Coverage, Searched, extend
from conformance.explore.engine import Progress, System
from conformance.explore.spark_engine import Files, Watching, built, by_owner, explore_spark, recipe
from conformance.spark.session import SparkRun

KEYS = "probed"  # the per-partition table of probe keys met, by level
BIDS, WON = "bids", "won"  # what tasks send about a level: bids for keys (to their owners), keys won (to their states' owners)


class ByPath:
    """Of the ways a state is found, keep the smallest path (its successor indices from the
    initial state): the one a breadth-first scan meets first."""

    @staticmethod
    def initial(fps: np.ndarray) -> list[bytes]:
        return [b""] * len(fps)

    links = False  # a path is no parent link

    @staticmethod
    def successors(parents: list[tuple], origins: np.ndarray, indices: np.ndarray) -> list[bytes]:
        """The paths of successors (see ByParent.successors)."""
        return [extend(parents[origin][1], index) for origin, index in zip(origins.tolist(), indices.tolist())]

    @staticmethod
    def expansion(fps: np.ndarray, paths: list[bytes]) -> np.ndarray:
        """A level's states in the order of their paths (see ByParent.expansion): a level's paths
        are of one length, so a smaller path's successors have the smaller paths."""
        return np.array(sorted(range(len(paths)), key=paths.__getitem__), dtype=np.int64)

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


class Claims(msgspec.Struct, array_like=True):
    """Probe keys, each with the (path, fp) of a state that has it: a task's bid for each key (to
    the key's owner), or the keys a state won (to the state's owner)."""

    keys: bytes  # int64
    paths: list[bytes]
    fps: bytes  # int64


_decode_claims = msgspec.msgpack.Decoder(Claims).decode
_encode = msgspec.msgpack.Encoder().encode

Kept = dict[str, list]  # per cell, its CANDIDATES first places (path, place inside the state), sorted


class Places:
    """The CANDIDATES first places of each cell, as places come in any order. Places come with the
    cells met there as a tuple, and few distinct tuples recur: the first places are kept per tuple
    (one look-up a place), and per cell only at the end."""

    def __init__(self) -> None:
        self.by_found: dict[tuple[str, ...], list] = {}

    def add(self, found: tuple[str, ...], place: tuple) -> None:
        first = self.by_found.get(found)
        if first is None:
            self.by_found[found] = [place]
        elif len(first) < CANDIDATES:
            insort(first, place)
        elif place < first[-1]:
            insort(first, place)
            first.pop()

    def kept(self) -> Kept:
        return merged([{cell: first for cell in found} for found, first in self.by_found.items()])


class CorpusTask:
    """The corpus search's part of the task of partition `partition`, job `depth` (see the module)."""

    def __init__(self, coverage: Coverage, files: Files, depth: int, partition: int) -> None:
        self.coverage, self.files, self.depth, self.partition = coverage, files, depth, partition
        self.steps = Places()
        self.bids: dict[int, tuple[bytes, int]] = {}  # probe key -> the smallest (path, fp) of this task's level with it

    def expanded(self, chunk: list[tuple], handles: list, counts: list[int]) -> None:
        places, add, bids = self.coverage.places, self.steps.add, self.bids
        start = 0
        for (fp, path, state), count in zip(chunk, counts):
            mine = (path, fp)

            def bid(key: int) -> bool:
                """Asked of every probe key of the state (see Coverage.places): none is a place yet."""
                held = bids.get(key)
                if held is None or mine < held:
                    bids[key] = mine
                return False

            for within, cells in places(state, handles[start : start + count], bid):
                add(cells, (path, within))
            start += count

    def done(self, selected: bool) -> tuple[Kept, Kept]:
        """Level `depth`'s steps, its bids sent; and where the job selected level `depth` (the
        job after level `depth - 1`'s), the keys won at level `depth - 1` told their states'
        owners and level `depth - 2`'s probes."""
        self._send(self.depth, BIDS, self.bids)
        if selected and self.depth >= 1:
            self._send(self.depth - 1, WON, self._won(self.depth - 1))
        return self.steps.kept(), self._probes(self.depth - 2) if selected and self.depth >= 2 else {}

    def _send(self, depth: int, kind: str, claims: dict[int, tuple[bytes, int]]) -> None:
        """Claims to the partitions that own them: bids by key, won keys by state."""
        keys = np.fromiter(claims, dtype=np.int64, count=len(claims))
        fps = np.fromiter((fp for _path, fp in claims.values()), dtype=np.int64, count=len(claims))
        paths = [path for path, _fp in claims.values()]
        with self.files.sending(depth, str(self.partition), kind) as send:
            for owner, mine in by_owner(keys if kind == BIDS else fps, self.files.partitions):
                send(owner, _encode(Claims(keys[mine].tobytes(), [paths[at] for at in mine.tolist()], fps[mine].tobytes())))

    def _won(self, depth: int) -> dict[int, tuple[bytes, int]]:
        """Of the keys bid for at level `depth`, those met there first, each with its winner."""
        bids = [_decode_claims(raw) for raw in self.files.received(depth, self.partition, BIDS)]
        if not bids:
            return {}
        keys = np.concatenate([np.frombuffer(b.keys, dtype=np.int64) for b in bids])
        fps = np.concatenate([np.frombuffer(b.fps, dtype=np.int64) for b in bids]).tolist()
        paths = [path for b in bids for path in b.paths]
        with self.files.locked(self.partition, KEYS) as table:
            _first, ours = table.offer(keys, depth)
        won: dict[int, tuple[bytes, int]] = {}
        for at in np.flatnonzero(ours).tolist():
            key, mine = int(keys[at]), (paths[at], fps[at])
            held = won.get(key)
            if held is None or mine < held:
                won[key] = mine
        return won

    def _probes(self, depth: int) -> Kept:
        """Level `depth`'s probes: those of the keys its states won."""
        won: dict[int, set[int]] = {}
        for raw in self.files.received(depth, self.partition, WON):
            claims = _decode_claims(raw)
            for key, fp in zip(np.frombuffer(claims.keys, dtype=np.int64).tolist(), np.frombuffer(claims.fps, dtype=np.int64).tolist()):
                won.setdefault(fp, set()).add(key)
        level = self.files.read_level(depth, self.partition) if won else None
        if level is None:
            return {}
        kept = Places()
        system = self.coverage.system
        for part in level.parts:
            system.learn(*part)
        fps = np.frombuffer(level.fps, dtype=np.int64)
        winners = np.flatnonzero(np.isin(fps, np.fromiter(won, dtype=np.int64, count=len(won))))
        for at, state in zip(winners.tolist(), system.unpack(level.states.take(winners))):
            for within, cells in self.coverage.places(state, [], won[int(fps[at])].__contains__):
                kept.add(cells, (level.orders[at], within))
        return kept.kept()


class CorpusWatch:
    """The corpus search's watch (spark_engine.Watch), built on a worker from the coverage's recipe."""

    def __init__(self, making: tuple) -> None:
        self.making = making

    def task(self, files: Files, depth: int, partition: int) -> CorpusTask:
        return CorpusTask(built(self.making), files, depth, partition)


def coverage_system(making: tuple) -> System:
    """The explorer system of a coverage recipe: one object per worker for both."""
    return built(making).system


def merged(kept: list[Kept]) -> Kept:
    """Per cell, the CANDIDATES first places of several."""
    cells: Kept = {}
    for one in kept:
        for cell, places in one.items():
            cells[cell] = sorted(cells.get(cell, []) + places)[:CANDIDATES]
    return cells


def search_on_spark(spark: SparkRun, make_coverage: Callable[[], Coverage], local: Coverage, max_states: int, progress: Callable[[str], None] | None = None) -> Searched:
    """conformance.corpus.search.search on Spark: the same places, states and completeness.
    `local` is this process's coverage (the initial states come from it)."""
    making = recipe(make_coverage)
    first: dict[str, tuple] = {}
    steps: dict[int, Kept] = {}  # per level expanded, its steps, until its probes come

    def watched(files: Files, depth: int, results: list[tuple[Kept, Kept]], expanded: bool) -> None:
        if expanded:
            steps[depth] = merged([result[0] for result in results])
        else:
            files.discard(BIDS, depth)  # the bids of a level not expanded for good
        if depth >= 2 and depth - 2 in steps:
            for cell, places in sorted(merged([steps.pop(depth - 2)] + [result[1] for result in results]).items()):
                for place in places:
                    note_cells(first, (cell,), place)
        for kind, level in ((BIDS, depth - 1), (WON, depth - 2), ("level", depth - 2)):
            files.discard(kind, level)

    def report(p: Progress) -> None:
        if progress:
            progress(f"level {p.depth}: {p.distinct:,} states, {len(first):,} cells, {p.seconds:.1f}s")

    result = explore_spark(
        spark.session,
        partial(coverage_system, making),
        spark.work,
        partitions=spark.partitions,
        keep_going=True,
        max_states=max_states,
        progress=report,
        local=local.system,
        order=ByPath,
        watching=Watching(recipe(partial(CorpusWatch, making)), (KEYS,), watched),
    )
    return Searched(first, result.distinct, result.complete)
