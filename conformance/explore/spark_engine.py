"""The Spark engine: the same level-synchronous search, on a Spark cluster (`check --engine spark`).

Each of the P partitions owns the states whose fingerprint is its number modulo P, and keeps
them in files under the search's directory (`--spark-dir`, which every executor mounts): its
fingerprint table (conformance.explore.visited.Table on disk, labelled by level, never moved),
each level's new states, and, for counterexamples, their parent links. A level is one Spark job
of two stages, its lineage starting afresh from those files, so nothing is checkpointed:

    expand   task p: partition p's level, expanded as the in-process engine does (fingerprints
             first); the successors every table (read only) has seen before are dropped, the
             others are built, packed and grouped by owner: one Batch per owner
    select   task q: the Batches for q (a shuffle of a few records per task) put in q's table;
             the new states, of those found several times the one of smallest order, are its
             next level; they are checked, and the task returns its summary

A state crosses processes self-contained (System.pack: its parts' stable fingerprints, the
parts beside them once per Batch). Tasks that run again, after an executor is lost, change no
result: a table labels each state with the level it was first seen at, so a select that runs
again finds its own states as new as the first time, and an expand counts as seen only the
states of earlier levels; a table is written by one task at a time, under a lock, and read
only while no task writes it. Counts, depth, verdicts and counterexamples equal
conformance.explore.engine's, for any number of partitions and executors.
"""

import contextlib
import fcntl
import hashlib
import io
import itertools
import os
import pickle
import secrets
import shutil
import time
import urllib.parse
from array import array
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import msgspec
import numpy as np

from conformance.explore.frontier import FRAME_LENGTH, read_frames
from conformance.explore.engine import Counterexample, Findings, Progress, Result, SearchInterrupted, System, Violation, limit_reached, shortest_path, without_cycle_collection
from conformance.explore.visited import Table, smallest_parents
from conformance.spark.session import raised_while_interrupted
from model.config import ConfigError

PARTS = "parts"  # a record of shared parts: (PARTS, [(fp, kind, encoding), ...])
CHUNK = 1 << 18  # a level's states an expand task takes at a time: its memory is that many states' successors

_BUILT: dict[str, object] = {}  # per Python worker: the systems (and the like) it has built, by recipe


class Batch(msgspec.Struct, array_like=True):
    """States bound for one partition: a task's successors for it, or a partition's level on
    file. Fingerprints (int64 bytes), each state's order (see ByParent), the parts they are made
    of (System.parts), the states packed (System.pack), and the properties each violates (its
    place, rule, detail: found where the state was built)."""

    fps: bytes
    orders: list
    parts: list[tuple[int, int, bytes]]
    states: list[bytes]
    violations: list[tuple[int, str, str]] = []


_decode_batch = msgspec.msgpack.Decoder(Batch).decode
_encode = msgspec.msgpack.Encoder().encode


def fingerprint_partition(key: int | tuple[str, int]) -> int:
    """The one partition function of every keyed RDD here (partitioners compare it by identity):
    a state goes by its fingerprint (a Batch by its partition's number), a parts record
    (PARTS, partition) to its partition."""
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
    """Of the ways a state is found, keep the one from the smallest parent fingerprint: `check`'s
    order, independent of the scan; the order is the parent link counterexamples are rebuilt from."""

    links = True

    @staticmethod
    def initial(fp: int) -> int:
        return fp  # an initial state is its own parent

    @staticmethod
    def successors(parents: list[tuple], origins: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """The orders of successors, given each one's parent (its place among `parents`, (fp,
        order, packed) records) and its index among the parent's successors."""
        return np.fromiter((parent[0] for parent in parents), dtype=np.int64, count=len(parents))[origins]

    @staticmethod
    def smallest(fps: np.ndarray, orders: np.ndarray | list) -> tuple[np.ndarray, list, np.ndarray]:
        """Of candidates, one a fingerprint: the fingerprints (sorted), each one's smallest order,
        and the place of a candidate with that fingerprint (any: equal states are equal)."""
        fps, smallest, first = smallest_parents(fps, np.asarray(orders, dtype=np.int64))
        return fps, smallest.tolist(), first


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


class Files:
    """The search's files, in a directory every executor mounts: per partition its table
    (seen-P/), its lock, each level's new states (level-D/P.batch) and parent links (parents-D/P.npy)."""

    def __init__(self, directory: str, partitions: int) -> None:
        self.directory, self.partitions = Path(directory), partitions

    def table(self, partition: int) -> Path:
        return self.directory / f"seen-{partition}"

    def level(self, depth: int, partition: int) -> Path:
        return self.directory / f"level-{depth}" / f"{partition}.batch"

    def links(self, depth: int, partition: int) -> Path:
        return self.directory / f"parents-{depth}" / f"{partition}.npy"

    def create(self) -> None:
        """Every partition's table, empty."""
        for partition in range(self.partitions):
            self.table(partition).mkdir(parents=True)
            Table(self.table(partition), on_disk=True).checkpoint()

    @contextlib.contextmanager
    def locked(self, partitions: Iterable[int], exclusive: bool) -> Iterator[None]:
        """Partitions' tables held: shared by readers, exclusively by their one writer (a select
        that runs again while an earlier attempt still writes waits for it)."""
        with contextlib.ExitStack() as stack:
            for partition in sorted(partitions):
                lock = stack.enter_context(open(self.directory / f"seen-{partition}.lock", "a"))
                fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield

    def seen_by(self, fps: np.ndarray, depth: int) -> np.ndarray:
        """Which fingerprints the tables hold from level `depth` or before."""
        seen = np.zeros(len(fps), dtype=bool)
        owners = fps % self.partitions
        with self.locked(range(self.partitions), exclusive=False):
            for partition in np.unique(owners).tolist():
                mine = np.flatnonzero(owners == partition)
                levels = Table.reopen(self.table(partition)).levels_of(fps[mine])
                seen[mine] = (levels >= 0) & (levels <= depth)
        return seen

    def candidates(self, depth: int, owner: int) -> Path:
        """Where the expand tasks leave level `depth`'s candidates for `owner`, a file each."""
        return self.directory / f"candidates-{depth}" / str(owner)

    @contextlib.contextmanager
    def sending(self, depth: int, sender: int) -> Iterator[Callable[[int, bytes], None]]:
        """send(owner, batch): a task's Batches for level `depth`, one file per owner, each written
        whole before it takes its name (a task that runs again writes them again, the same)."""
        outputs: dict[int, tuple] = {}
        try:

            def send(owner: int, batch: bytes) -> None:
                if owner not in outputs:
                    final = self.candidates(depth, owner) / f"{sender}.batches"
                    final.parent.mkdir(parents=True, exist_ok=True)
                    partial = final.with_suffix(f".{secrets.token_hex(4)}.partial")
                    outputs[owner] = (open(partial, "wb"), partial, final)
                outputs[owner][0].write(FRAME_LENGTH.pack(len(batch)) + batch)

            yield send
            for out, partial, final in outputs.values():
                out.close()
                os.replace(partial, final)
        finally:
            for out, partial, _final in outputs.values():
                out.close()
                partial.unlink(missing_ok=True)

    def received(self, depth: int, owner: int) -> Iterator[Batch]:
        """The Batches the expand tasks sent `owner` for level `depth`."""
        directory = self.candidates(depth, owner)
        for path in sorted(directory.glob("*.batches")) if directory.exists() else ():
            for _end, raw in read_frames(path):
                yield _decode_batch(raw)

    def write(self, path: Path, content: bytes) -> None:
        """A file written whole before it takes its name."""
        path.parent.mkdir(exist_ok=True)
        partial = path.with_suffix(f".{secrets.token_hex(4)}.partial")
        partial.write_bytes(content)
        os.replace(partial, path)

    def read_level(self, depth: int, partition: int) -> Batch | None:
        path = self.level(depth, partition)
        return _decode_batch(path.read_bytes()) if path.exists() else None

    def parent(self, fp: int, depth: int) -> int | None:
        """The parent link of a state of level `depth` or before (an initial state's is itself)."""
        for level in range(depth, -1, -1):
            path = self.links(level, fp % self.partitions)
            if path.exists():
                links = np.load(path, mmap_mode="r")
                at = int(np.searchsorted(links[0], fp))
                if at < links.shape[1] and links[0, at] == fp:
                    return int(links[1, at])
        return None


def _expand(making: tuple, order: type, files: Files, depth: int, partition: int) -> Iterator[int]:
    """Partition `partition`'s level `depth` expanded, a chunk of states at a time: per chunk, the
    successors not seen before (of equal ones the one of smallest order) built and packed and
    sent to their owners. Yields the successors it made, all counted (`check`'s generated)."""
    with without_cycle_collection(), files.sending(depth + 1, partition) as send:
        generated = _expanded(built(making), order, files, depth, partition, send)
    yield generated


def _expanded(system: System, order: type, files: Files, depth: int, partition: int, send: Callable[[int, bytes], None]) -> int:
    level = files.read_level(depth, partition)
    if level is None:
        return 0
    for part in level.parts:
        system.learn(*part)
    expand, unpack, reach = system.expand, system.unpack, system.reach
    generated = 0
    rows = zip(np.frombuffer(level.fps, dtype=np.int64).tolist(), level.orders, level.states)
    for chunk in iter(lambda: list(itertools.islice(rows, CHUNK)), []):  # (fp, order, packed) each
        chunk.sort(key=_packed)  # states with the same node states next to each other: the model's caches then serve twice as fast
        found_fps, handles, counts = array("q"), [], []
        for _parent, _order, packed in chunk:
            fps, found = expand(unpack(packed))
            found_fps.extend(fps)
            handles += found
            counts.append(len(found))
        generated += len(handles)
        keys = np.frombuffer(found_fps, dtype=np.int64)
        unseen = np.flatnonzero(~files.seen_by(keys, depth))
        origins = np.repeat(np.arange(len(chunk)), counts)[unseen]
        indices = unseen - (np.cumsum(counts) - counts)[origins]  # each successor's place among its parent's
        fps, orders, places = order.smallest(keys[unseen], order.successors(chunk, origins, indices))
        places = unseen[places]
        owners = fps % files.partitions
        for owner in np.unique(owners).tolist():
            mine = np.flatnonzero(owners == owner)
            send(owner, batch_of(system, fps[mine], [orders[at] for at in mine.tolist()], [reach(handles[at]) for at in places[mine].tolist()]))
    return generated


def batch_of(system: System, fps: np.ndarray, orders: list, states: list) -> bytes:
    """States as the Batch an owner receives: packed, with their parts and the properties they violate."""
    found = [(at, v.rule, v.detail) for at, violated in enumerate(map(system.violations, states)) if violated for v in violated]
    return _encode(Batch(fps.tobytes(), orders, system.parts(states), list(map(system.pack, states)), found))


def _packed(row: tuple) -> bytes:
    return row[2]


def _select(making: tuple, order: type, files: Files, depth: int, partition: int) -> Iterator[tuple[int, list]]:
    """Partition `partition`'s level `depth`: the Batches sent to it put in its table, its new
    states (of those found several times, the smallest order's) written with their parent links.
    Yields (new states, findings)."""
    with without_cycle_collection():
        yield _selected(built(making), order, files, depth, partition)


def _selected(system: System, order: type, files: Files, depth: int, partition: int) -> tuple[int, list]:
    batches = list(files.received(depth, partition))
    if not batches:
        return 0, []
    parts = {part[0]: part for batch in batches for part in batch.parts}
    fps = np.concatenate([np.frombuffer(batch.fps, dtype=np.int64) for batch in batches])
    orders = [o for batch in batches for o in batch.orders]
    packed = [state for batch in batches for state in batch.states]
    found: dict[int, list] = {}
    offset = 0
    for batch in batches:
        for at, rule, detail in batch.violations:
            found.setdefault(offset + at, []).append(Violation(rule, detail))
        offset += len(batch.states)
    with files.locked([partition], exclusive=True):
        table = Table.reopen(files.table(partition), "r+")
        _first, ours = table.offer(fps, depth)  # ours: first seen at this level, by this task or an earlier attempt at it
    candidates = np.flatnonzero(ours)
    fps, orders, places = order.smallest(fps[candidates], [orders[at] for at in candidates.tolist()])
    places = candidates[places].tolist()
    findings = Findings()
    for fp, at in zip(fps.tolist(), places):
        if at in found:
            findings.note(depth, fp, tuple(found[at]))
    if len(fps):
        files.write(files.level(depth, partition), _encode(Batch(fps.tobytes(), orders, list(parts.values()), [packed[at] for at in places])))
        if order.links:
            files.write(files.links(depth, partition), _npy(np.array([fps, orders], dtype=np.int64)))
    return len(fps), [(d, fp, tuple(v)) for d, fp, v in findings.best.values()]


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def level_records(files: Files, depth: int, partition: int) -> Iterator[tuple]:
    """Partition `partition`'s level `depth` as records: its parts (PARTS, parts), then each
    state (fp, order, packed)."""
    level = files.read_level(depth, partition)
    if level is None:
        return
    yield PARTS, level.parts
    yield from zip(np.frombuffer(level.fps, dtype=np.int64).tolist(), level.orders, level.states)


def search_directory(work: str) -> str:
    """The local path of the work directory (a path, or a file: URL): the tables are files every
    executor maps, so another file system's URL cannot hold them."""
    parts = urllib.parse.urlsplit(work)
    if parts.scheme not in ("", "file"):
        raise ConfigError(f"--spark-dir {work}: a search on Spark keeps its fingerprint tables as files every executor maps; give a directory they all mount (a path or a file: URL), not a {parts.scheme}: URL")
    return parts.path if parts.scheme else work


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
    mounts) receives the search's files, removed at the end.

    Counterexample paths are rebuilt in `local` (a fresh system if None), from parent links:
    under another `order` (the corpus search's) there are none. `each_level` sees every level
    the search expands (an RDD of its records, see level_records, partitioned by fingerprint)
    with its depth, before it is expanded.
    """
    context = session.sparkContext
    start = time.perf_counter()
    local = local or make_system()
    making = recipe(make_system)
    files = Files(os.path.join(search_directory(work), f"search-{secrets.token_hex(4)}"), partitions)
    files.create()
    findings = Findings()
    initial = local.initial_states()
    seeds: dict[int, object] = {}
    for state in initial:
        seeds.setdefault(local.fingerprint(state), state)
    for owner in range(partitions):
        mine = [(fp, state) for fp, state in seeds.items() if fp % partitions == owner]
        if mine:
            with files.sending(0, -1) as send:
                send(owner, batch_of(local, np.array([fp for fp, _s in mine], dtype=np.int64), [order.initial(fp) for fp, _s in mine], [state for _fp, state in mine]))
    distinct = depth = 0
    generated = len(initial)  # as `check` counts them: every initial state offered
    stopped = None

    def each_partition(task: Callable[[int], Iterator]) -> list:
        """A job of one task per partition, its results by partition."""
        return context.parallelize(range(partitions), partitions).mapPartitionsWithIndex(lambda partition, _none: task(partition)).collect()

    def select(level: int) -> int:
        """Level `level` made of the candidates sent: its new states."""
        summaries = each_partition(lambda partition: _select(making, order, files, level, partition))
        for _new, found in summaries:
            for d, fp, v in found:
                findings.note(d, fp, (Violation(*v),))
        shutil.rmtree(files.directory / f"candidates-{level}", ignore_errors=True)
        return sum(new for new, _found in summaries)

    try:
        distinct = select(0)
        while True:
            stopped = limit_reached(distinct, max_states, start, max_seconds)
            if findings and not keep_going or stopped:
                break
            if each_level:
                each_level(context.parallelize([(p, p) for p in range(partitions)], partitions).partitionBy(partitions, fingerprint_partition).mapPartitionsWithIndex(lambda p, _r, d=depth: level_records(files, d, p), preservesPartitioning=True), depth)
            generated += sum(each_partition(lambda partition, d=depth: _expand(making, order, files, d, partition)))
            found_new = select(depth + 1)
            shutil.rmtree(files.directory / f"level-{depth}", ignore_errors=True)  # expanded: its parent links stay
            if not found_new:
                break
            depth += 1
            distinct += found_new
            if progress:
                progress(Progress(distinct, generated, depth, found_new, time.perf_counter() - start))
        seconds = time.perf_counter() - start
        complete = not (findings and not keep_going) and not stopped
        rank = {rule: i for i, rule in enumerate(local.property_ids())}
        counterexamples = []
        if findings and order.links:
            counterexamples = [
                Counterexample(v, shortest_path(local, lambda fp, d=d: files.parent(fp, d), fp)) for d, fp, v in sorted(findings.best.values(), key=lambda f: rank.get(f[2].rule, len(rank)))
            ]
        return Result(distinct, generated, depth, seconds, complete, counterexamples, stopped=stopped)
    except BaseException as error:
        if not isinstance(error, KeyboardInterrupt) and not raised_while_interrupted(error):
            raise
        # PySpark's own SIGINT handler has cancelled the jobs already; a gateway the interrupt cut
        # short may refuse to again, and that must not cost the user the summary.
        with contextlib.suppress(Exception):
            context.cancelAllJobs()
        raise SearchInterrupted(distinct, generated, depth, time.perf_counter() - start) from None
    finally:
        shutil.rmtree(files.directory, ignore_errors=True)
