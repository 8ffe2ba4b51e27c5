"""The Spark engine: the same level-synchronous search, on a Spark cluster (`check --engine spark`).

Each of the P partitions owns the states whose fingerprint is its number modulo P, and keeps
them in files under the search's directory (`--spark-dir`, which every executor mounts): its
fingerprint table (conformance.explore.visited.Table on disk, labelled by level, never moved),
the candidates other partitions sent it, and, for counterexamples, its states' parent links.
A level is one Spark job of one task per partition, its lineage starting afresh from those files,
so nothing is shuffled or checkpointed. Task p of level d:

    select   the candidates sent to p for level d put in p's table; the new states, of those
             found several times the one of smallest order, are p's level d
    expand   that level expanded as the in-process engine does (fingerprints first), a chunk
             at a time in the order's sequence; the successors met in an earlier chunk (at a
             smaller order) are dropped, and the others claimed in their owners' tables for
             level d + 1: those a table holds up to level d are dropped (another task may be
             selecting its level d meanwhile: what it has put in by then is of that level, what
             not yet its owner drops); those no task claimed before are built, packed and sent to
             their owners; of those another task claimed first (and sends), only the orders are
             sent, for the owner to keep the smallest: one file per owner, a Batch per chunk

A state crosses processes self-contained (System.pack: its parts' stable fingerprints, the
parts beside them once per Batch). The driver learns each level's counts and findings from its
job; a level after which the search stops (a limit, a violation) has its expansion dropped, so
counts, depth, verdicts and counterexamples equal conformance.explore.engine's, for any number of
partitions and executors. A task that runs again, after an executor is lost, changes no result:
a table labels each state with the level it was first seen at, so a select that runs again finds
its own states as new as the first time, and an expansion that runs again sends every state of
the next level it meets in full (its claims may be the lost attempt's); a table is used by one
task at a time, under a lock, mapped once per worker (Table.joined).
"""

import contextlib
import fcntl
import gc
import hashlib
import io
import os
import pickle
import secrets
import shutil
import time
import urllib.parse
from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, Protocol
from pathlib import Path

import msgspec
import numpy as np

from conformance.explore.frontier import FRAME_LENGTH, read_frames
from conformance.explore.packed import Packed, joined
from conformance.explore.sorted_keys import distinct, located
from conformance.explore.engine import Counterexample, Findings, Progress, Result, SearchInterrupted, System, Violation, limit_reached, shortest_path, without_cycle_collection
from conformance.explore.visited import BOARD, Board, Table, smallest_parents
from conformance.spark.session import raised_while_interrupted
from model.config import ConfigError

CHUNK = 1 << 18  # a level's states an expand task takes at a time: its memory is that many states' successors

_BUILT: dict[str, object] = {}  # per Python worker: the systems (and the like) it has built, by recipe
_JOINED: dict[Path, Table] = {}  # per Python worker: the tables of the search it works on, as it maps them


class Batch(msgspec.Struct, array_like=True):
    """States bound for one partition: a task's successors for it, or a partition's level on
    file. Fingerprints (int64 bytes), each state's order (see ByParent; int64 orders as their
    bytes, see orders_of), the parts they are made of (System.parts), the states packed
    (System.pack), and the properties each violates (its place, rule, detail: found where the
    state was built). An offer has fingerprints and orders only: states another task claimed
    first and sends whole (see offered)."""

    fps: bytes
    orders: bytes | list
    parts: list[tuple[int, int, bytes]]
    states: Packed
    violations: list[tuple[int, str, str]] = []


class Fingerprints(msgspec.Struct, array_like=True):
    """A Batch's fingerprints, decoded without the rest: what a select offers its table."""

    fps: bytes


_decode_batch = msgspec.msgpack.Decoder(Batch).decode
_decode_fps = msgspec.msgpack.Decoder(Fingerprints).decode
_encode = msgspec.msgpack.Encoder().encode


def offered(batch: Batch) -> bool:
    """Whether a Batch offers orders only (its states are another task's to send)."""
    return len(batch.states) == 0 and len(batch.fps) > 0


def orders_of(column: bytes | list) -> np.ndarray | list:
    """A Batch's orders as the search handles them: int64 orders (ByParent's) as an array, kept
    and sent as its bytes (a Python int each would be most of a task's memory); others a list."""
    return np.frombuffer(column, dtype=np.int64) if isinstance(column, bytes) else column


def column_of(orders: np.ndarray | list) -> bytes | list:
    """Orders as a Batch holds them (see orders_of)."""
    return orders.tobytes() if isinstance(orders, np.ndarray) else orders


def taken(orders: np.ndarray | list, at: np.ndarray) -> np.ndarray | list:
    """The orders at these places."""
    return orders[at] if isinstance(orders, np.ndarray) else [orders[place] for place in at.tolist()]


def joined_orders(columns: list[bytes | list]) -> np.ndarray | list:
    """The orders of several Batches of one search, one after the other."""
    if columns and isinstance(columns[0], bytes):
        return np.frombuffer(b"".join(columns), dtype=np.int64)
    return [order for column in columns for order in column]


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
    def initial(fps: np.ndarray) -> np.ndarray:
        return fps  # an initial state is its own parent

    @staticmethod
    def successors(parents: list[tuple], origins: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """The orders of successors, given each one's parent (its place among `parents`, (fp,
        order, packed) records) and its index among the parent's successors."""
        return np.fromiter((parent[0] for parent in parents), dtype=np.int64, count=len(parents))[origins]

    @staticmethod
    def expansion(fps: np.ndarray, orders: np.ndarray) -> np.ndarray:
        """The places of a level's states in the order they are expanded: that of their
        successors' orders (a successor's order is its parent's fingerprint)."""
        return np.argsort(fps, kind="stable")

    @staticmethod
    def smallest(fps: np.ndarray, orders: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Of candidates, one a fingerprint: the fingerprints (sorted), each one's smallest order,
        and the place of a candidate with that fingerprint (any: equal states are equal)."""
        return smallest_parents(fps, np.asarray(orders, dtype=np.int64))


class Files:
    """The search's files, in a directory every executor mounts: per partition its table
    (seen-P/), its lock, each level's new states (level-D/P.batch) and parent links (parents-D/P.npy)."""

    def __init__(self, directory: str, partitions: int) -> None:
        self.directory, self.partitions = Path(directory), partitions

    def table(self, partition: int, name: str = "seen") -> Path:
        return self.directory / f"{name}-{partition}"

    def level(self, depth: int, partition: int) -> Path:
        return self.directory / f"level-{depth}" / f"{partition}.batch"

    def links(self, depth: int, partition: int) -> Path:
        return self.directory / f"parents-{depth}" / f"{partition}.npy"

    def create(self, tables: Iterable[str] = ("seen",)) -> None:
        """Every partition's tables, empty: its fingerprints ("seen"), and any a watch keeps."""
        for name in tables:
            for partition in range(self.partitions):
                path = self.table(partition, name)
                path.mkdir(parents=True)
                Table(path, on_disk=True, board=Board.in_file(path / BOARD)).checkpoint()

    def joined(self, partition: int, name: str = "seen") -> Table:
        """A partition's table as this worker maps it, to use under its lock (see locked): mapped
        once per search, following the growth of its segments through its board."""
        path = self.table(partition, name)
        if path not in _JOINED:
            for other in [held for held in _JOINED if held.parent != self.directory]:
                del _JOINED[other]  # an earlier search's: its files are gone
            _JOINED[path] = Table.joined(path)
        return _JOINED[path]

    @contextlib.contextmanager
    def locked(self, partition: int, name: str = "seen") -> Iterator[Table]:
        """A partition's table, held by this task alone meanwhile (a select that runs again while
        an earlier attempt still writes waits for it)."""
        with open(self.directory / f"{name}-{partition}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield self.joined(partition, name)

    def claimed(self, fps: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Distinct fingerprints claimed for level `depth` in their owners' tables: which no task
        claimed before (new), and which are of that level (new, or claimed by another task, or
        by an earlier attempt of this one); the others the tables hold from an earlier level."""
        new, ours = np.zeros(len(fps), dtype=bool), np.zeros(len(fps), dtype=bool)
        for owner, mine in by_owner(fps, self.partitions):
            with self.locked(owner) as table:
                new[mine], ours[mine] = table.offer(fps[mine], depth)
        return new, ours

    def inbox(self, depth: int, owner: int, kind: str = "candidates") -> Path:
        """Where tasks leave what they send `owner` about level `depth`, a file each: the
        candidates for it, or another `kind` of record (a watch's)."""
        return self.directory / f"{kind}-{depth}" / str(owner)

    @contextlib.contextmanager
    def sending(self, depth: int, sender: str, kind: str = "candidates") -> Iterator[Callable[[int, bytes], None]]:
        """send(owner, record): a task's records about level `depth`, one file per owner, each
        written whole before it takes its name. `sender` names the task (and its attempt: what
        an attempt that runs again writes is beside the earlier attempt's, never over it)."""
        outputs: dict[int, tuple] = {}
        try:

            def send(owner: int, batch: bytes) -> None:
                if owner not in outputs:
                    final = self.inbox(depth, owner, kind) / f"{sender}.batches"
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

    def received(self, depth: int, owner: int, kind: str = "candidates") -> Iterator[bytes]:
        """The records tasks sent `owner` about level `depth`."""
        directory = self.inbox(depth, owner, kind)
        for path in sorted(directory.glob("*.batches")) if directory.exists() else ():
            for _end, raw in read_frames(path):
                yield raw

    def discard(self, kind: str, depth: int) -> None:
        """A level's files of one kind, no longer needed."""
        shutil.rmtree(self.directory / f"{kind}-{depth}", ignore_errors=True)

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


class WatchTask(Protocol):
    """A watch's part of one task (see Watch)."""

    def expanded(self, chunk: list[tuple], handles: list, counts: list[int]) -> None:
        """A chunk of the task's level expanded: its states (fp, order, state), then their
        successors' handles (System.expand), `counts[i]` of them the i-th state's."""

    def done(self, selected: bool) -> object:
        """The task's end (`selected`: its job selected level `depth`, else only expanded it):
        what the driver's Watching.watched receives from it."""


class Watch(Protocol):
    """Work a search on Spark does beside it, in the same jobs, from what the search has at hand
    (the corpus search's places: conformance.corpus.spark_search). Built on every worker from a
    recipe, as the system is; the level files are kept for it."""

    def task(self, files: Files, depth: int, partition: int) -> WatchTask: ...


class Watching(NamedTuple):
    """A watch: the recipe workers build it from, the per-partition tables it keeps beside the
    search's, and what the driver does with each job's results: watched(files, depth, results
    by partition, whether level `depth` was expanded for good)."""

    making: tuple
    tables: tuple[str, ...]
    watched: Callable[[Files, int, list, bool], None]


def _attempt() -> int:
    """Which attempt at its task the running Spark task is (0 the first)."""
    from pyspark import TaskContext

    return TaskContext.get().attemptNumber()


def _level(making: tuple, order: type, files: Files, depth: int, partition: int, attempt: int, stop_on_findings: bool, watching: tuple | None, select: bool, expand: bool) -> Iterator[tuple]:
    """Partition `partition`'s level `depth`: selected from the candidates sent to it, and expanded
    (unless its own violations end the search), its successors sent to their owners for the next
    level; and a watch's part. A job may select only (the level then kept on file) or expand only
    (a level selected before). `attempt`: 0, or which attempt at the task after one that was
    lost. Yields (new states, findings, successors made: `check`'s generated, successors sent
    whole, what the watch gives)."""
    system = built(making)
    watch = built(watching).task(files, depth, partition) if watching else None
    with without_cycle_collection(), files.sending(depth + 1, f"{partition}.{attempt}") as send:
        new, findings, made = 0, [], (0, 0)
        if select:
            level, findings = _selected(system, order, files, depth, partition)
            new = len(level.states)
            if new and (watch or not expand):
                files.write(files.level(depth, partition), _encode(level))
        else:
            level = files.read_level(depth, partition)
            for part in level.parts if level else ():
                system.learn(*part)
        if expand and level is not None and not (findings and stop_on_findings):
            made = _expanded(system, order, files, depth, level, send, attempt > 0, watch)
        watched = watch.done(select) if watch else None
    gc.freeze()  # what the worker keeps for its next tasks (the systems and their caches, millions of objects) out of the cycle collector's walks: a walk between tasks cost up to a second a level
    yield new, findings, *made, watched  # once its files are in place


def _selected(system: System, order: type, files: Files, depth: int, partition: int) -> tuple[Batch, list]:
    """The candidates sent to the partition for level `depth` put in its table: its new states (of
    those found several times, the one of smallest order, whole or offered) as a Batch, and the
    findings among them; their parent links written. The candidates are read a batch at a time,
    twice: their fingerprints offered to the table, then of their states only the new ones kept
    (a task holds its level, not every candidate it was sent)."""
    with files.locked(partition) as table:
        news = [table.offer(np.frombuffer(_decode_fps(raw).fps, dtype=np.int64), depth)[1] for raw in files.received(depth, partition)]  # first seen at this level, claimed for it, or selected by an earlier attempt at it
    kept: list[Batch] = []
    offers: list[Batch] = []
    parts: dict[int, tuple] = {}
    for raw, new in zip(files.received(depth, partition), news):
        batch = _decode_batch(raw)
        if offered(batch):
            mine = np.flatnonzero(new)
            offers.append(Batch(np.frombuffer(batch.fps, dtype=np.int64)[mine].tobytes(), column_of(taken(orders_of(batch.orders), mine)), [], Packed()))
            continue
        for part in batch.parts:
            system.learn(*part)
            parts.setdefault(part[0], part)
        mine, renumbered = np.flatnonzero(new), np.cumsum(new) - 1
        violations = [(int(renumbered[at]), rule, detail) for at, rule, detail in batch.violations if new[at]]
        kept.append(Batch(np.frombuffer(batch.fps, dtype=np.int64)[mine].tobytes(), column_of(taken(orders_of(batch.orders), mine)), [], batch.states.take(mine), violations))
    fps = np.frombuffer(b"".join(batch.fps for batch in kept), dtype=np.int64)
    fps, orders, places = order.smallest(fps, joined_orders([batch.orders for batch in kept]))
    if offers:
        orders = _smallest_offered(order, fps, orders, offers, f"partition {partition}'s level {depth}")
    found: dict[int, list] = {}
    offset = 0
    for batch in kept:
        for at, rule, detail in batch.violations:
            found.setdefault(offset + at, []).append(Violation(rule, detail))
        offset += len(batch.states)
    findings = Findings()
    for fp, at in zip(fps.tolist(), places.tolist()):
        if at in found:
            findings.note(depth, fp, tuple(found[at]))
    if len(fps) and order.links:
        files.write(files.links(depth, partition), _npy(np.array([fps, orders], dtype=np.int64)))
    level_fps, level_orders, states = _in_kept_order(fps, orders, places, kept)
    level = Batch(level_fps, level_orders, list(parts.values()), states)
    return level, [(d, fp, tuple(v)) for d, fp, v in findings.best.values()]


def _smallest_offered(order: type, fps: np.ndarray, orders: np.ndarray | list, offers: list[Batch], where: str) -> np.ndarray | list:
    """The smallest order of each of a level's states (`fps`, sorted, with the orders they came
    whole with), among those other tasks offered for them too. The task that claims a state
    sends it whole: a state offered and sent by none is a fault of the engine, not of the model."""
    every = [Batch(fps.tobytes(), column_of(orders), [], Packed()), *offers]
    offered_fps, smallest, _places = order.smallest(np.frombuffer(b"".join(batch.fps for batch in every), dtype=np.int64), joined_orders([batch.orders for batch in every]))
    if not np.array_equal(offered_fps, fps):
        raise RuntimeError(f"{where}: {len(np.setdiff1d(offered_fps, fps)):,} states offered that no task sent whole")
    return smallest


def _in_kept_order(fps: np.ndarray, orders: np.ndarray | list, places: np.ndarray, kept: list[Batch]) -> tuple[bytes, bytes | list, Packed]:
    """A level's fingerprints, orders and states in the order they were kept (`places`: among the
    kept batches' states, one after the other), each batch's taken and let go in turn: the
    level's states are held twice at most (not three times, and the candidates as well)."""
    by_place = np.argsort(places, kind="stable")
    places, bounds, states = places[by_place], np.cumsum([0] + [len(batch.states) for batch in kept]), []
    for batch, low, high in zip(kept, bounds[:-1].tolist(), bounds[1:].tolist()):
        first, last = np.searchsorted(places, [low, high]).tolist()
        states.append(batch.states.take(places[first:last] - low))
        batch.states = Packed()
    return fps[by_place].tobytes(), column_of(taken(orders, by_place)), joined(states)


def _expanded(system: System, order: type, files: Files, depth: int, level: Batch, send: Callable[[int, bytes], None], again: bool, watch: WatchTask | None) -> tuple[int, int]:
    """A partition's level expanded, a chunk at a time in the order's sequence. A chunk's
    successors are claimed for the next level in their owners' tables; of those neither held
    from an earlier level nor met in an earlier chunk, each with its smallest order in the chunk,
    the ones first claimed here are built and sent whole to their owners (every one, if `again`:
    this attempt follows a lost one, whose claims these may be), and the others' orders offered.
    Returns the successors made, all counted, and those sent whole."""
    expand, reach = system.expand, system.reach
    fps, orders = np.frombuffer(level.fps, dtype=np.int64), orders_of(level.orders)
    sequence = order.expansion(fps, orders)
    met = Table(None)  # the successors this task has sent or offered at this level: met again in a later chunk, they come at a larger order
    known: dict[int, set] = {}  # per owner, the parts its file carries already
    generated = sent = 0
    for start in range(0, len(fps), CHUNK):
        at = sequence[start : start + CHUNK]
        rows = level.states.take(at).rows()
        at = at[sorted(range(len(at)), key=rows.__getitem__)]  # states with the same node states next to each other, and unpacked (laid out in memory) in the order they are expanded: the model's caches serve best
        chunk = list(zip(fps[at].tolist(), taken(orders, at), system.unpack(level.states.take(at))))  # (fp, order, state), as order.successors takes parents
        found_fps, handles, counts = array("q"), [], []
        for _fp, _order, state in chunk:
            successor_fps, found = expand(state)
            found_fps.extend(successor_fps)
            handles += found
            counts.append(len(found))
        generated += len(handles)
        if watch:
            watch.expanded(chunk, handles, counts)
        keys = np.frombuffer(found_fps, dtype=np.int64)
        fresh = distinct(keys)[0]
        new, ours = files.claimed(fresh, depth + 1)
        ours[ours] = met.offer(fresh[ours], depth)[0]
        _place, unseen = located(fresh[ours], keys)
        unseen = np.flatnonzero(unseen)
        origins = np.repeat(np.arange(len(chunk)), counts)[unseen]
        indices = unseen - (np.cumsum(counts) - counts)[origins]  # each successor's place among its parent's
        found_fps, found_orders, places = order.smallest(keys[unseen], order.successors(chunk, origins, indices))  # found_fps: fresh[ours]
        whole = (new | again)[ours]
        offer = np.flatnonzero(~whole)
        kept = np.flatnonzero(whole)
        kept = kept[np.argsort(places[kept], kind="stable")]  # built in the order found, a parent's successors together, as the model's caches like them
        sent += len(kept)
        for owner, mine in by_owner(found_fps[offer], files.partitions):
            send(owner, _encode(Batch(found_fps[offer[mine]].tobytes(), column_of(taken(found_orders, offer[mine])), [], Packed())))
        for owner, mine in by_owner(found_fps[kept], files.partitions):
            at = kept[mine]
            send(owner, batch_of(system, found_fps[at], taken(found_orders, at), [reach(handles[unseen[place]]) for place in places[at].tolist()], known.setdefault(owner, set())))
    return generated, sent


def by_owner(fps: np.ndarray, partitions: int) -> Iterator[tuple[int, np.ndarray]]:
    """Each partition that owns some of the fingerprints, with their places."""
    owners = fps % partitions
    for owner in np.unique(owners).tolist():
        yield owner, np.flatnonzero(owners == owner)


def batch_of(system: System, fps: np.ndarray, orders: np.ndarray | list, states: list, known: set[tuple[int, int]]) -> bytes:
    """States as the Batch an owner receives: packed, with the properties they violate and their
    parts, those not in `known` (those the batches before it in the owner's file carry)."""
    found = [(at, v.rule, v.detail) for at, violated in enumerate(map(system.violations, states)) if violated for v in violated]
    packed = system.pack(states)
    return _encode(Batch(fps.tobytes(), column_of(orders), system.parts(packed, known), packed, found))


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


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
    watching: Watching | None = None,
) -> Result:
    """conformance.explore.engine.explore's search on Spark; `work` (a directory every executor
    mounts) receives the search's files, removed at the end.

    Counterexample paths are rebuilt in `local` (a fresh system if None), from parent links:
    under another `order` (the corpus search's) there are none. `watching` does its work in the
    search's jobs (see Watch), and in one job more after the last level, for what it still owes.
    """
    context = session.sparkContext
    start = time.perf_counter()
    local = local or make_system()
    making = recipe(make_system)
    files = Files(os.path.join(search_directory(work), f"search-{secrets.token_hex(4)}"), partitions)
    files.create(("seen", *(watching.tables if watching else ())))
    findings = Findings()
    initial = local.initial_states()
    seeds: dict[int, object] = {}
    for state in initial:
        seeds.setdefault(local.fingerprint(state), state)
    for owner in range(partitions):
        mine = [(fp, state) for fp, state in seeds.items() if fp % partitions == owner]
        if mine:
            with files.sending(0, "initial") as send:
                fps = np.array([fp for fp, _s in mine], dtype=np.int64)
                send(owner, batch_of(local, fps, order.initial(fps), [state for _fp, state in mine], set()))
    distinct = depth = level = 0
    generated = len(initial)  # as `check` counts them: every initial state offered
    stopped = None
    sent = len(seeds)  # candidates for the next level
    stop_on_findings, watch = not keep_going, watching.making if watching else None  # what the tasks take

    def job(depth: int, select: bool, expand: bool) -> list[tuple]:
        """A job of one task per partition (see _level), its results by partition."""
        return context.parallelize(range(partitions), partitions).mapPartitionsWithIndex(lambda partition, _none: _level(making, order, files, depth, partition, _attempt(), stop_on_findings, watch, select, expand)).collect()

    def watched(depth: int, summaries: list[tuple], expanded: bool) -> None:
        if watching:
            watching.watched(files, depth, [summary[4] for summary in summaries], expanded)

    try:
        while True:
            # A level is one job, selected and expanded at once, when its size cannot end the search
            # (its new states are at most the candidates sent); else two, its expansion only once
            # the search goes on. A fused level after which the search stops has its expansion dropped.
            fused = max_states is None or distinct + sent < max_states
            summaries = job(level, True, fused)
            for _new, found, *_rest in summaries:
                for d, fp, v in found:
                    findings.note(d, fp, (Violation(*v),))
            found_new = sum(summary[0] for summary in summaries)
            files.discard("candidates", level)
            ended = level > 0 and not found_new
            if not ended:
                depth, distinct = level, distinct + found_new
                if level and progress:
                    progress(Progress(distinct, generated, depth, found_new, time.perf_counter() - start))
                stopped = limit_reached(distinct, max_states, start, max_seconds)
                ended = bool(findings and not keep_going or stopped)
            if ended:
                files.discard("candidates", level + 1)  # a dropped expansion's
            elif not fused:
                watched(level, summaries, False)
                summaries = job(level, False, True)
            if not ended:
                generated += sum(summary[2] for summary in summaries)
                sent = sum(summary[3] for summary in summaries)
            if not watching:
                files.discard("level", level)
            watched(level, summaries, not ended)
            if ended:
                break
            level += 1
        if watching:  # a job more, selecting nothing: what the watch owes for the levels before
            watched(level + 1, job(level + 1, True, False), False)
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
