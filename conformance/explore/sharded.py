"""The sharded engine: the same level-synchronous search on several worker processes.

The workers share one fingerprint table (conformance.explore.visited.Board: in memory, or the
files of a state directory), each segment of it held by one worker at a time, so a state is new
for exactly one of them wherever it is found: that worker keeps it, checks it, and expands it at
the next level. Nothing else crosses between workers but the states handed over when a level
begins, packed with their parts, so that each has about as much to expand (see handovers). Each worker writes the parent links of what it offered (a state found by several in one
level keeps the smallest parent among them all), and the coordinator merges the findings with the
rule of conformance.explore.engine, so the counts and the counterexamples equal the single-process
engine's. A worker's levels are in a workspace of its own (conformance.explore.workspace); with a
state directory, state_dir/worker-N beside the shared table, and the coordinator writes the
checkpoint once every worker has ended the level.

No worker outlives its coordinator: each asks to be killed when the coordinator dies (SIGKILL
included) and holds no end of the pipes but its own, so a coordinator that ends, or is
interrupted, closes them and reaps its workers; a worker that dies is noticed at once, not after
the others, which may be waiting for a lock it held.
"""

import contextlib
import itertools
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np

from adapters.process_lifetime import become_worker
from conformance.explore.engine import (
    Counterexample,
    Findings,
    Progress,
    Result,
    SearchInterrupted,
    System,
    Violation,
    checkpoint,
    expander,
    level_expanded,
    limit_reached,
    shortest_path,
    without_cycle_collection,
)
from conformance.explore.frontier import Level
from conformance.explore.packed import Packed
from conformance.explore.visited import SEGMENTS, Board, Table
from conformance.explore.workspace import BATCH, Manifest, ResumeError, Workspace, scratch_directory, verified
from model.config import ConfigError

STOP_GRACE_SECONDS = 1.0  # how long stop() lets busy workers finish before killing them


class Handover(msgspec.Struct, array_like=True):
    """Frontier states one worker hands another to expand: fingerprints (int64 bytes), the parts
    they are made of (System.parts) and the states packed (System.pack)."""

    fps: bytes
    parts: list[tuple[int, int, bytes]]
    states: Packed


class WorkerFailed(RuntimeError):
    """A worker process died (the message names it and its signal) or raised (it carries the traceback)."""


def nearest(number: float) -> int:
    """Rounded half up (round() rounds half to even: 0.5 to 0, 1.5 to 2)."""
    return math.floor(number + 0.5)


def handovers(sizes: list[int], costs: list[float]) -> list[tuple[int, int, int]]:
    """(giver, taker, states) moves after which the workers' frontiers should take about as long
    to expand, a state costing what one of its giver's did at the last level (a worker's frontier
    is what it found, so it carries on where its last one was dearer or cheaper): the largest
    surplus to the largest deficit first."""
    loads = [size * cost for size, cost in zip(sizes, costs)]
    target = sum(loads) / len(loads)
    surplus = [load - target for load in loads]
    givers = sorted((index for index, extra in enumerate(surplus) if extra > 0), key=lambda index: -surplus[index])
    takers = sorted((index for index, extra in enumerate(surplus) if extra < 0), key=lambda index: surplus[index])
    moves = []
    for giver in givers:
        handed = 0.0  # the states it has handed over, rounded as they add up (so that each taker's share is off by less than one)
        for taker in takers:
            share = min(surplus[giver], -surplus[taker])
            if share <= 0:
                continue
            surplus[giver] -= share
            surplus[taker] += share
            moved = nearest(handed + share / costs[giver]) - nearest(handed)
            handed += share / costs[giver]
            if moved > 0:
                moves.append((giver, taker, moved))
    return moves


class Worker:
    """One worker: its workspace (parent links, levels; the table is shared) and its frontier."""

    def __init__(self, index: int, count: int, system: System, directory: Path, on_disk: bool, table: Table) -> None:
        self.index, self.count, self.system = index, count, system
        self.space = Workspace(system, directory, on_disk=on_disk, table=table, first=index * SEGMENTS // count)
        self.frontier: Level | None = None
        self.remaining = None  # the frontier's states not handed over, if some were
        self.previous: Level | None = None  # the last frontier, kept until the checkpoint after it

    def start(self, completed: int | None) -> tuple[int, list]:
        """The initial states this worker offers (every count-th), or (resuming) its frontier after `completed` levels."""
        if completed is not None:
            self.frontier = self.space.resume(completed)
            return len(self.frontier), []
        self.space.start()
        builder = self.space.builder(0)
        for state in itertools.islice(self.system.initial_states(), self.index, None, self.count):
            builder.offer(self.system.fingerprint(state), None, state)
        self.frontier = builder.finish()
        self.space.save()
        return len(self.frontier), builder.findings

    def hand_over(self, moves: list[tuple[int, int]]) -> list[tuple[int, bytes]]:
        """The first states of the frontier, `count` for each (taker, count): packed for the takers."""
        system = self.system
        self.remaining = iter(self.frontier)
        packed = []
        for taker, count in moves:
            fps, states = zip(*itertools.islice(self.remaining, count))
            rows = system.pack(states)
            packed.append((taker, msgspec.msgpack.encode(Handover(np.array(fps, dtype=np.int64).tobytes(), system.parts(rows, set()), rows))))
        return packed

    def expand(self, depth: int, received: list[bytes]) -> tuple[int, int, list]:
        """Expand the states handed to this worker, then its frontier (what it did not hand over):
        the level's states new to the table are this worker's next frontier."""
        if self.previous is not None:
            self.previous.discard()  # the coordinator's checkpoint has moved past it
            self.previous = None
        system = self.system
        builder = self.space.builder(depth, BATCH // self.count)
        builder.thaw = system.reach
        add, expand = builder.add, expander(system)
        for raw in received:
            handover = msgspec.msgpack.decode(raw, type=Handover)
            for fp, kind, encoded in handover.parts:
                system.learn(fp, kind, encoded)
            for parent_fp, state in zip(np.frombuffer(handover.fps, dtype=np.int64).tolist(), system.unpack(handover.states)):
                found_fps, found = expand(parent_fp, state)
                add(parent_fp, found_fps, found)
        for parent_fp, state in self.remaining if self.remaining is not None else self.frontier:
            found_fps, found = expand(parent_fp, state)
            add(parent_fp, found_fps, found)
        level_expanded(system, depth - 1)
        self.previous, self.frontier, self.remaining = self.frontier, builder.finish(), None
        self.space.save()
        return builder.generated, len(self.frontier), builder.findings


@without_cycle_collection()
def worker_main(index: int, count: int, make_system: Callable[[], System], place: tuple[Path, bool], table: Table, connection, coordinator: int, foreign: list) -> None:
    """A worker's loop: answer the coordinator's commands until its pipe closes.

    `foreign` are the coordinator's pipe ends the fork copied: closed, so that only the
    coordinator holds them. A terminal's Ctrl-C reaches the whole process group: only the
    coordinator acts on it; SIGTERM ends a worker at once.
    """
    become_worker(coordinator)
    for end in foreign:
        end.close()
    try:
        worker = Worker(index, count, make_system(), *place, table)
        while True:
            try:
                command, argument = connection.recv()
            except EOFError:
                return  # the coordinator is done, or gone
            if command == "start":
                connection.send(worker.start(argument))
            elif command in ("hand over", "expand"):  # timed: the coordinator sums who waited for whom
                started = time.perf_counter()
                reply = worker.hand_over(argument) if command == "hand over" else worker.expand(*argument)
                connection.send((reply, time.perf_counter() - started))
            elif command == "parent":
                connection.send(worker.space.visited.parent(argument))
    except (ConfigError, OSError) as refusal:  # a damaged state directory, a full disk: the coordinator raises it as it is
        with contextlib.suppress(OSError):
            connection.send(("raised", refusal))
    except BaseException:
        with contextlib.suppress(OSError):  # the coordinator may have closed the pipe already
            connection.send(("error", traceback.format_exc()))


class Coordinator:
    def __init__(self, make_system: Callable[[], System], workers: int, state_dir: Path | None, completed: int | None) -> None:
        """The shared table (in memory, or in state_dir, rolled back to `completed` levels when
        resuming) made before the workers are forked, who keep their levels in state_dir/worker-N
        (on disk), or in memory with their parent links in a temporary directory that stop() removes."""
        context = multiprocessing.get_context("fork")
        self.count = workers
        self.connections = []
        self.processes = []
        self.table = shared_table(state_dir, Board(context), completed)
        self.temporary = None if state_dir is not None else scratch_directory()
        root = Path(state_dir if state_dir is not None else self.temporary.name)
        for index in range(workers):
            mine, theirs = context.Pipe()
            foreign = [*self.connections, mine]
            place = (root / worker_place(index), state_dir is not None)
            process = context.Process(target=worker_main, args=(index, workers, make_system, place, self.table, theirs, os.getpid(), foreign), daemon=True)
            process.start()
            theirs.close()  # the worker's alone: when it dies, receive() gets end of file
            self.connections.append(mine)
            self.processes.append(process)

    def ask(self, index: int, command: str, argument: object = None):
        self.send(index, (command, argument))
        return self.receive(index)

    def send(self, index: int, message: tuple) -> None:
        try:
            self.connections[index].send(message)
        except (BrokenPipeError, ConnectionResetError):
            raise self.died(index) from None

    def receive(self, index: int):
        try:
            reply = self.connections[index].recv()
        except (EOFError, ConnectionResetError):
            raise self.died(index) from None
        if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "error":
            raise WorkerFailed(f"worker {index} failed:\n{reply[1]}")
        if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "raised":
            raise reply[1]
        return reply

    def broadcast(self, command: str, arguments: list) -> list:
        """Every worker's reply, taken as they come: one that died is reported while the others
        may still wait for it (for a segment's lock it held)."""
        for index, argument in enumerate(arguments):
            self.send(index, (command, argument))
        replies: dict[int, object] = {}
        while len(replies) < self.count:
            for connection in multiprocessing.connection.wait([c for index, c in enumerate(self.connections) if index not in replies]):
                index = self.connections.index(connection)
                replies[index] = self.receive(index)
        return [replies[index] for index in range(self.count)]

    def died(self, index: int) -> WorkerFailed:
        """A worker whose pipe broke: what ended it, once it is reaped."""
        process = self.processes[index]
        process.join(STOP_GRACE_SECONDS)
        code = process.exitcode
        how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited unexpectedly (exit code {code})"
        return WorkerFailed(f"worker {index} (pid {process.pid}) {how}")

    def stop(self) -> None:
        """Close the pipes, which ends idle workers; kill those still busy (after an interrupt or a
        failure) once the grace is over; reap them all."""
        for connection in self.connections:
            connection.close()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        if self.temporary is not None:
            self.temporary.cleanup()


def worker_place(index: int) -> str:
    """Where a worker keeps its levels, in the search's directory."""
    return f"worker-{index}"


def shared_table(state_dir: Path | None, board: Board, completed: int | None) -> Table:
    """The workers' table: new, in memory or in state_dir, or that of state_dir rolled back to `completed` levels."""
    if completed is None:
        if state_dir is not None:
            state_dir.mkdir(parents=True, exist_ok=True)
        return Table(state_dir, on_disk=state_dir is not None, board=board)
    return Table.open(state_dir, completed, board)


def explore_sharded(
    make_system: Callable[[], System],
    workers: int,
    *,
    keep_going: bool = False,
    max_states: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    local: System | None = None,
    state_dir: Path | None = None,
    resume: bool = False,
) -> Result:
    """conformance.explore.engine.explore's search, spread over `workers` processes.

    Counterexample paths are rebuilt in `local` (a fresh system if None): pass the system the
    caller will decode them with. With `state_dir`, the table and each worker's levels are kept on
    disk there and the coordinator checkpoints every level; `resume` carries on from the last
    checkpoint, with as many workers as the search began with (the frontier is in their files),
    once the files verify.
    """
    start = time.perf_counter()
    findings = Findings()
    distinct = generated = depth = 0
    stopped = None
    completed = None
    if resume:
        saved = verified(state_dir)
        if saved.workers != workers:
            raise ResumeError(f"{state_dir}: the search was sharded over {saved.workers} worker(s); resume it with --workers {saved.workers}")
        completed, distinct, generated, depth, start = saved.completed, saved.distinct, saved.generated, saved.depth, start - saved.seconds
        for d, fp, rule, detail in saved.findings:
            findings.note(d, fp, (Violation(rule, detail),))
    manifest = Manifest(state_dir, [worker_place(index) for index in range(workers)], saved.files if resume else {}) if state_dir is not None else None
    coordinator = Coordinator(make_system, workers, state_dir, completed)
    busy, waiting = [0.0] * workers, [0.0] * workers
    costs = [1.0] * workers  # each worker's seconds a state expanded at the last level (at first: alike)

    def timed(replies: list[tuple]) -> tuple[list, list[float]]:
        """The workers' replies to one command, and the seconds each took (summed as busy, and as
        waiting for the slowest)."""
        took = [seconds for _reply, seconds in replies]
        for index, seconds in enumerate(took):
            busy[index] += seconds
            waiting[index] += max(took) - seconds
        return [reply for reply, _seconds in replies], took

    try:
        started = coordinator.broadcast("start", [completed] * workers)
        sizes = [size for size, _ in started]
        for _size, found in started:
            findings.note_all(found)
        if not resume:
            distinct = generated = sum(sizes)
            completed = 1
            if manifest is not None:
                manifest.seal(checkpoint(completed, distinct, findings, generated, depth, start, workers), coordinator.table)
        while sum(sizes) and not (findings and not keep_going):
            stopped = limit_reached(distinct, max_states, start, max_seconds)
            if stopped:
                break
            received: list[list[bytes]] = [[] for _ in range(workers)]
            moves = handovers(sizes, costs)
            if moves:
                given = [[(taker, moved) for giver, taker, moved in moves if giver == index] for index in range(workers)]
                for packed in timed(coordinator.broadcast("hand over", given))[0]:
                    for taker, raw in packed:
                        received[taker].append(raw)
            for giver, taker, moved in moves:
                sizes[giver] -= moved
                sizes[taker] += moved
            expanded, took = timed(coordinator.broadcast("expand", [(depth + 1, raw) for raw in received]))
            costs = [seconds / size if size else cost for size, seconds, cost in zip(sizes, took, costs)]
            sizes = [size for _produced, size, _found in expanded]
            for produced, _size, found in expanded:
                generated += produced
                findings.note_all(found)
            distinct += sum(sizes)
            completed += 1
            if sum(sizes):
                depth += 1
            if manifest is not None:
                manifest.seal(checkpoint(completed, distinct, findings, generated, depth, start, workers), coordinator.table)
            if progress:
                progress(Progress(distinct, generated, depth, sum(sizes), time.perf_counter() - start))
        seconds = time.perf_counter() - start
        local = local or make_system()
        order = {rule: i for i, rule in enumerate(local.property_ids())}

        def parent_of(fp: int) -> int:
            """The smallest parent among the workers that offered the state in the level it was first found at."""
            known = [parent for index in range(workers) if (parent := coordinator.ask(index, "parent", fp)) is not None]
            if not known:
                raise WorkerFailed(f"no worker knows state {fp}")
            return min(known)

        counterexamples = [
            Counterexample(v, shortest_path(local, parent_of, fp))
            for _depth, fp, v in sorted(findings.best.values(), key=lambda f: order.get(f[2].rule, len(order)))
        ]
        return Result(distinct, generated, depth, seconds, not sum(sizes), counterexamples, stopped=stopped, worker_seconds=list(zip(busy, waiting)))
    except KeyboardInterrupt:
        raise SearchInterrupted(distinct, generated, depth, time.perf_counter() - start) from None
    finally:
        coordinator.stop()
