"""The sharded engine: the same level-synchronous search on several worker processes.

Each worker owns the states whose history fingerprint (canonical, like the state's) is its
index modulo the worker count: a step rarely changes the history, so most successors stay with
the worker that found them, and equal states still always meet at one owner. It expands
its own frontier; the successors it does not own are sorted out with numpy as each batch of the
level's candidates is offered (RoutingBuilder) and travel to their owner in the sender's ids for
their parts (node states, history, messages), with the parts themselves sent only the first time
that worker needs them; the receiver translates a state into its own ids only if it is new. The
coordinator routes those batches, merges the findings with the same rule as
conformance.explore.engine, and rebuilds counterexamples from the owners' parent links, so the
counts and counterexamples equal the single-process engine's. Each worker keeps
its shard in a workspace of its own (conformance.explore.workspace); with a state directory,
state_dir/worker-N, and the coordinator writes the checkpoint once every worker has ended the level.

No worker outlives its coordinator: each asks to be killed when the coordinator dies (SIGKILL
included) and holds no end of the pipes but its own, so a coordinator that ends, or is
interrupted, closes them and reaps its workers.
"""

import contextlib
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np

from adapters.process_lifetime import die_with_parent
from conformance.explore.engine import (
    Counterexample,
    Findings,
    Progress,
    Result,
    SearchInterrupted,
    Violation,
    checkpoint,
    limit_reached,
    shortest_path,
    without_cycle_collection,
)
from conformance.explore.frontier import Level
from conformance.explore.visited import smallest_parents
from conformance.explore.workspace import BATCH, Builder, ResumeError, Workspace, read_checkpoint, scratch_directory, write_checkpoint
from conformance.explore.kraft_system import KraftSystem
from model.cluster import History
from model.config import ConfigError
from model.network import Envelope
from model.state import NodeState

STOP_GRACE_SECONDS = 1.0  # how long stop() lets busy workers finish before killing them


class Batch(msgspec.Struct, array_like=True):
    """States one worker hands another, in the sender's ids, and the parts (sender's id, value)
    the receiver has not been sent yet."""

    sender: int
    nodes: list[tuple[int, NodeState]]
    histories: list[tuple[int, History]]
    messages: list[tuple[int, Envelope]]
    fps: list[int]
    parents: list[int]
    states: list[tuple[int, ...]]


class WorkerFailed(RuntimeError):
    """A worker process died or raised; the message carries its traceback."""


class RoutingBuilder(Builder):
    """A shard's level builder: of each batch of candidates (Builder.flush), those another worker
    owns are packed for it, one state a fingerprint with its smallest parent, sorted out with numpy
    rather than one by one; the rest are its own. Once `routing` is off (the peers' states coming
    in), every candidate is its own."""

    def __init__(self, system, visited, level, depth: int, worker: "Worker") -> None:
        super().__init__(system, visited, level, depth, BATCH // worker.count)
        self.worker = worker
        self.routing = True
        self.outgoing: list[list[bytes]] = [[] for _ in range(worker.count)]  # per owner, its batches

    def keep(self, fps: np.ndarray, parents: np.ndarray, candidates: list, chosen: np.ndarray | None = None) -> None:
        worker = self.worker
        if not self.routing:
            return super().keep(fps, parents, candidates, chosen)
        owners = np.array(self.system.shards(candidates), dtype=np.int64) % worker.count
        for owner in range(worker.count):
            picked = np.flatnonzero(owners == owner)
            if owner == worker.index:
                super().keep(fps[picked], parents[picked], candidates, picked)
            elif len(picked):
                unique, smallest, first = smallest_parents(fps[picked], parents[picked])
                handles = [candidates[at] for at in picked[first].tolist()]
                self.outgoing[owner].append(worker.batch(owner, unique.tolist(), smallest.tolist(), handles))


class Worker:
    """One shard: its workspace (fingerprints, parent links, levels), its frontier, and the parts
    it has sent to each peer."""

    def __init__(self, index: int, count: int, system: KraftSystem, directory: Path, on_disk: bool) -> None:
        self.index, self.count, self.system = index, count, system
        self.space = Workspace(system, directory, on_disk=on_disk)
        self.frontier: Level | None = None
        self.previous: Level | None = None  # the last frontier, kept until the checkpoint after it
        self.builder: Builder | None = None
        self.sent_parts = [(set(), set(), set()) for _ in range(count)]  # per peer, the ids of the nodes, histories, messages sent
        self.received_ids: list[tuple[dict, dict, dict]] = [({}, {}, {}) for _ in range(count)]  # per peer, its ids to ours
        self.encoder = msgspec.msgpack.Encoder()
        self.decoder = msgspec.msgpack.Decoder(Batch)

    def start(self, completed: int | None) -> tuple[int, list]:
        """The owned initial states, or (resuming) the frontier after `completed` levels."""
        if completed is not None:
            self.frontier = self.space.resume(completed)
            return len(self.frontier), []
        self.space.start()
        builder = self.space.builder(0)
        for state in self.system.initial_states():
            fp, shard = self.system.fingerprint_and_shard(state)
            if shard % self.count == self.index:
                builder.offer(fp, None, state)
        self.frontier = builder.finish()
        self.space.save()
        return len(self.frontier), builder.findings

    def expand(self, depth: int) -> tuple[int, list[list[bytes]]]:
        """Expand the frontier: its successors to the level, or packed for the peers that own them."""
        if self.previous is not None:
            self.previous.discard()  # the coordinator's checkpoint has moved past it
            self.previous = None
        system = self.system
        builder = self.builder = RoutingBuilder(system, self.space.visited, self.space.level(depth), depth, self)
        builder.thaw = system.reach
        # A shard's frontier, a subsequence of the order one process finds states in, has lost that
        # order's locality (measured: 14 % more time in expand()); grouped, two workers spend 7 % less
        # CPU. One process is not grouped: its order is local already (grouping measured 0-2 % slower).
        builder.grouped = system.grouped
        add, expand = builder.add, system.expand
        for parent_fp, state in self.frontier:
            found_fps, found = expand(state)
            add(parent_fp, found_fps, found)
        builder.flush()
        builder.routing = False
        return builder.generated, builder.outgoing

    def batch(self, owner: int, fps: list[int], parents: list[int], handles: list[tuple]) -> bytes:
        """Successors bound for one owner, in this worker's ids, with the parts it has not been sent yet."""
        system = self.system
        states = list(map(system.reach, handles))
        parts = []
        for interned, sent, ids in zip((system.nodes, system.histories, system.messages), self.sent_parts[owner], system.part_ids(states)):
            fresh = ids - sent
            sent |= fresh
            parts.append([(i, interned.values[i]) for i in fresh])
        return self.encoder.encode(Batch(self.index, *parts, fps, parents, states))

    def translate(self, received: tuple[int, tuple[int, ...]]) -> tuple[int, ...]:
        """A state a peer sent, in this worker's ids."""
        sender, state = received
        return self.system.translated(state, self.received_ids[sender])

    def ingest(self, batches: list[bytes]) -> tuple[int, list]:
        """Take in the states other workers found; the level ends: its new states are the next
        frontier (its size, and the violations found in it)."""
        system, builder = self.system, self.builder
        builder.thaw = self.translate  # received states come in their senders' ids, translated only when new
        for raw in batches:
            batch = self.decoder.decode(raw)
            for interned, ours, parts in zip((system.nodes, system.histories, system.messages), self.received_ids[batch.sender], (batch.nodes, batch.histories, batch.messages)):
                for theirs, value in parts:
                    ours[theirs] = interned.id(value)
            sender = batch.sender
            builder.add_each(batch.fps, batch.parents, [(sender, state) for state in batch.states])
        self.previous, self.frontier = self.frontier, builder.finish()
        self.space.save()
        self.builder = None
        return len(self.frontier), builder.findings


@without_cycle_collection()
def worker_main(index: int, count: int, make_system: Callable[[], KraftSystem], place: tuple[Path, bool], connection, coordinator: int, foreign: list) -> None:
    """A worker's loop: answer the coordinator's commands until its pipe closes.

    `foreign` are the coordinator's pipe ends the fork copied: closed, so that only the
    coordinator holds them. A terminal's Ctrl-C reaches the whole process group: only the
    coordinator acts on it; SIGTERM ends a worker at once.
    """
    die_with_parent(coordinator)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for end in foreign:
        end.close()
    try:
        worker = Worker(index, count, make_system(), *place)
        while True:
            try:
                command, argument = connection.recv()
            except EOFError:
                return  # the coordinator is done, or gone
            if command == "start":
                connection.send(worker.start(argument))
            elif command in ("expand", "ingest"):  # timed: the coordinator sums who waited for whom
                started = time.perf_counter()
                reply = worker.expand(argument) if command == "expand" else worker.ingest(argument)
                connection.send((*reply, time.perf_counter() - started))
            elif command == "parent":
                connection.send(worker.space.visited.parent(argument))
    except (ConfigError, OSError) as refusal:  # a damaged state directory, a full disk: the coordinator raises it as it is
        with contextlib.suppress(OSError):
            connection.send(("raised", refusal))
    except BaseException:
        with contextlib.suppress(OSError):  # the coordinator may have closed the pipe already
            connection.send(("error", traceback.format_exc()))


class Coordinator:
    def __init__(self, make_system: Callable[[], KraftSystem], workers: int, state_dir: Path | None) -> None:
        """Workers keep their shards in state_dir/worker-N (on disk), or in memory with their parent
        links in a temporary directory that stop() removes."""
        context = multiprocessing.get_context("fork")
        self.count = workers
        self.connections = []
        self.processes = []
        self.temporary = None if state_dir is not None else scratch_directory()
        root = Path(state_dir if state_dir is not None else self.temporary.name)
        for index in range(workers):
            mine, theirs = context.Pipe()
            foreign = [*self.connections, mine]
            place = (root / f"worker-{index}", state_dir is not None)
            process = context.Process(target=worker_main, args=(index, workers, make_system, place, theirs, os.getpid(), foreign), daemon=True)
            process.start()
            theirs.close()  # the worker's alone: when it dies, receive() gets end of file
            self.connections.append(mine)
            self.processes.append(process)

    def ask(self, index: int, command: str, argument: object = None):
        self.connections[index].send((command, argument))
        return self.receive(index)

    def receive(self, index: int):
        try:
            reply = self.connections[index].recv()
        except EOFError:
            self.processes[index].join(STOP_GRACE_SECONDS)  # reaped, it has an exit code to report
            raise WorkerFailed(f"worker {index} exited unexpectedly (exit code {self.processes[index].exitcode})") from None
        if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "error":
            raise WorkerFailed(f"worker {index} failed:\n{reply[1]}")
        if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "raised":
            raise reply[1]
        return reply

    def broadcast(self, command: str, arguments: list) -> list:
        for connection, argument in zip(self.connections, arguments):
            connection.send((command, argument))
        return [self.receive(index) for index in range(self.count)]

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


def explore_sharded(
    make_system: Callable[[], KraftSystem],
    workers: int,
    *,
    keep_going: bool = False,
    max_states: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    local: KraftSystem | None = None,
    state_dir: Path | None = None,
    resume: bool = False,
) -> Result:
    """conformance.explore.engine.explore's search, spread over `workers` processes.

    Counterexample paths are rebuilt in `local` (a fresh system if None): pass the system the
    caller will decode them with. With `state_dir`, each worker keeps its shard on disk there and
    the coordinator checkpoints every level; `resume` carries on from the last checkpoint, with
    as many workers as the search began with (the shards are theirs).
    """
    start = time.perf_counter()
    findings = Findings()
    distinct = generated = depth = 0
    stopped = None
    completed = None
    if resume:
        saved = read_checkpoint(state_dir)
        if saved.workers != workers:
            raise ResumeError(f"{state_dir}: the search was sharded over {saved.workers} worker(s); resume it with --workers {saved.workers}")
        completed, distinct, generated, depth, start = saved.completed, saved.distinct, saved.generated, saved.depth, start - saved.seconds
        for d, fp, rule, detail in saved.findings:
            findings.note(d, fp, (Violation(rule, detail),))
    coordinator = Coordinator(make_system, workers, state_dir)
    busy, waiting = [0.0] * workers, [0.0] * workers

    def timed(replies: list[tuple]) -> list[tuple]:
        """The workers' replies to one command, less the seconds each took, which are summed."""
        slowest = max(reply[-1] for reply in replies)
        for index, reply in enumerate(replies):
            busy[index] += reply[-1]
            waiting[index] += slowest - reply[-1]
        return [reply[:-1] for reply in replies]

    try:
        started = coordinator.broadcast("start", [completed] * workers)
        frontier = sum(size for size, _ in started)
        for _size, found in started:
            findings.note_all(found)
        if not resume:
            distinct = generated = frontier
            completed = 1
            if state_dir is not None:
                write_checkpoint(state_dir, checkpoint(completed, distinct, findings, generated, depth, start, workers))
        while frontier and not (findings and not keep_going):
            stopped = limit_reached(distinct, max_states, start, max_seconds)
            if stopped:
                break
            expanded = timed(coordinator.broadcast("expand", [depth + 1] * workers))
            inbound: list[list[bytes]] = [[] for _ in range(workers)]
            for produced, batches in expanded:
                generated += produced
                for owner, sent in enumerate(batches):
                    inbound[owner] += sent
            ingested = timed(coordinator.broadcast("ingest", inbound))
            frontier = sum(size for size, _ in ingested)
            for _size, found in ingested:
                findings.note_all(found)
            distinct += frontier
            completed += 1
            if frontier:
                depth += 1
            if state_dir is not None:
                write_checkpoint(state_dir, checkpoint(completed, distinct, findings, generated, depth, start, workers))
            if progress:
                progress(Progress(distinct, generated, depth, frontier, time.perf_counter() - start))
        seconds = time.perf_counter() - start
        local = local or make_system()
        order = {rule: i for i, rule in enumerate(local.property_ids())}

        def parent_of(fp: int) -> int:
            """The owner of a state is the one worker that knows its parent."""
            for index in range(workers):
                parent = coordinator.ask(index, "parent", fp)
                if parent is not None:
                    return parent
            raise WorkerFailed(f"no worker knows state {fp}")

        counterexamples = [
            Counterexample(v, shortest_path(local, parent_of, fp))
            for _depth, fp, v in sorted(findings.best.values(), key=lambda f: order.get(f[2].rule, len(order)))
        ]
        return Result(distinct, generated, depth, seconds, not frontier, counterexamples, stopped=stopped, worker_seconds=list(zip(busy, waiting)))
    except KeyboardInterrupt:
        raise SearchInterrupted(distinct, generated, depth, time.perf_counter() - start) from None
    finally:
        coordinator.stop()
