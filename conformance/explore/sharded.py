"""The sharded engine: the same level-synchronous search on several worker processes.

Each worker owns the states whose history fingerprint (canonical, like the state's) is its
index modulo the worker count: a step rarely changes the history, so most successors stay with
the worker that found them, and equal states still always meet at one owner. It expands
its own frontier; successors it does not own travel to their owner as the fingerprints of
their parts (node states, history, messages), with the parts themselves sent only the first
time that worker needs them. The coordinator routes those batches, merges the findings with
the same rule as conformance.explore.engine, and rebuilds counterexamples from the owners' parent
links, so the counts and counterexamples equal the single-process engine's.

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

import msgspec

from adapters.process_lifetime import die_with_parent
from conformance.explore.engine import Counterexample, Findings, ParentLinks, Progress, Result, SearchInterrupted, Violation, limit_reached, shortest_path
from conformance.explore.kraft_system import KraftSystem
from model.cluster import History
from model.network import Envelope
from model.state import NodeState

STOP_GRACE_SECONDS = 1.0  # how long stop() lets busy workers finish before killing them


class Batch(msgspec.Struct, array_like=True):
    """States one worker hands another, and the parts the receiver has not been sent yet."""

    nodes: list[tuple[int, NodeState]]
    histories: list[tuple[int, History]]
    messages: list[tuple[int, Envelope]]
    states: list[tuple[int, int, bytes]]  # fp, parent fp, the state packed (KraftSystem.pack)


class WorkerFailed(RuntimeError):
    """A worker process died or raised; the message carries its traceback."""


class Worker:
    """One shard: its states' parent links, its frontier, and what it has sent to each peer."""

    def __init__(self, index: int, count: int, system: KraftSystem) -> None:
        self.index, self.count, self.system = index, count, system
        self.parents = ParentLinks()
        self.frontier: list[tuple[int, tuple]] = []
        self.sent_parts = [(set(), set(), set()) for _ in range(count)]
        self.sent_states = [set() for _ in range(count)]
        self.encoder = msgspec.msgpack.Encoder()
        self.decoder = msgspec.msgpack.Decoder(Batch)

    def start(self) -> tuple[int, list]:
        findings = []
        for state in self.system.initial_states():
            fp, shard = self.system.fingerprint_and_shard(state)
            if shard % self.count == self.index and self.parents.adopt(fp, fp):
                self.frontier.append((fp, state))
                findings.extend((0, fp, v) for v in self.system.violations(state))
        self.parents.settle()
        return len(self.frontier), findings

    def expand(self, depth: int) -> tuple[int, list, list[bytes | None]]:
        """Expand the frontier: keep owned successors, batch the others per owner."""
        system, index, count = self.system, self.index, self.count
        generated = 0
        level: list[tuple[int, tuple]] = []
        findings: list = []
        outgoing: list[dict[int, tuple[int, tuple]]] = [{} for _ in range(count)]
        for parent_fp, state in self.frontier:
            for _action, successor in system.successors(state):
                generated += 1
                fp, shard = system.fingerprint_and_shard(successor)
                owner = shard % count
                if owner == index:
                    if self.parents.adopt(fp, parent_fp):
                        level.append((fp, successor))
                        findings.extend((depth, fp, v) for v in system.violations(successor))
                elif fp not in self.sent_states[owner]:
                    held = outgoing[owner].get(fp)
                    if held is None or parent_fp < held[0]:
                        outgoing[owner][fp] = (parent_fp, successor)
        self.frontier = level
        batches = []
        for owner, states in enumerate(outgoing):
            self.sent_states[owner].update(states)
            batches.append(self.batch(owner, [(fp, p, s) for fp, (p, s) in states.items()]) if states else None)
        return generated, findings, batches

    def batch(self, owner: int, states: list) -> bytes:
        system = self.system
        sent_nodes, sent_histories, sent_messages = self.sent_parts[owner]
        nodes, histories, messages, packed = [], [], [], []
        size = system.size
        for fp, parent_fp, state in states:
            for n in state[:size]:
                part = system.nodes.fps[n]
                if part not in sent_nodes:
                    sent_nodes.add(part)
                    nodes.append((part, system.nodes.values[n]))
            h = system.histories.fps[state[size]]
            if h not in sent_histories:
                sent_histories.add(h)
                histories.append((h, system.histories.values[state[size]]))
            for m in state[size + 1 :]:
                part = system.messages.fps[m]
                if part not in sent_messages:
                    sent_messages.add(part)
                    messages.append((part, system.messages.values[m]))
            packed.append((fp, parent_fp, system.pack(state)))
        return self.encoder.encode(Batch(nodes, histories, messages, packed))

    def ingest(self, depth: int, batches: list[bytes]) -> tuple[int, list]:
        """Take in states found by other workers; the new ones join the next frontier."""
        system = self.system
        findings: list = []
        for raw in batches:
            batch = self.decoder.decode(raw)
            for _fp, node in batch.nodes:
                system.nodes.id(node)
            for _fp, history in batch.histories:
                system.histories.id(history)
            for _fp, envelope in batch.messages:
                system.messages.id(envelope)
            for fp, parent_fp, packed in batch.states:
                if self.parents.adopt(fp, parent_fp):
                    state = system.unpack(packed)
                    self.frontier.append((fp, state))
                    findings.extend((depth, fp, v) for v in system.violations(state))
        self.parents.settle()
        return len(self.frontier), findings


def worker_main(index: int, count: int, make_system: Callable[[], KraftSystem], connection, coordinator: int, foreign: list) -> None:
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
        worker = Worker(index, count, make_system())
        while True:
            try:
                command, argument = connection.recv()
            except EOFError:
                return  # the coordinator is done, or gone
            if command == "start":
                connection.send(worker.start())
            elif command == "expand":
                connection.send(worker.expand(argument))
            elif command == "ingest":
                connection.send(worker.ingest(*argument))
            elif command == "parent":
                connection.send(worker.parents.get(argument))
    except BaseException:
        with contextlib.suppress(OSError):  # the coordinator may have closed the pipe already
            connection.send(("error", traceback.format_exc()))


class Coordinator:
    def __init__(self, make_system: Callable[[], KraftSystem], workers: int) -> None:
        context = multiprocessing.get_context("fork")
        self.count = workers
        self.connections = []
        self.processes = []
        for index in range(workers):
            mine, theirs = context.Pipe()
            foreign = [*self.connections, mine]
            process = context.Process(target=worker_main, args=(index, workers, make_system, theirs, os.getpid(), foreign), daemon=True)
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


def explore_sharded(
    make_system: Callable[[], KraftSystem],
    workers: int,
    *,
    keep_going: bool = False,
    max_states: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    local: KraftSystem | None = None,
) -> Result:
    """conformance.explore.engine.explore's search, spread over `workers` processes.

    Counterexample paths are rebuilt in `local` (a fresh system if None): pass the system the
    caller will decode them with.
    """
    start = time.perf_counter()
    coordinator = Coordinator(make_system, workers)
    distinct = generated = depth = 0
    stopped = None
    try:
        findings = Findings()
        started = coordinator.broadcast("start", [None] * workers)
        distinct = sum(size for size, _ in started)
        for _size, found in started:
            for depth, fp, v in found:
                findings.note(depth, fp, (Violation(*v),))
        generated, depth, frontier = distinct, 0, distinct
        while frontier and not (findings and not keep_going):
            stopped = limit_reached(distinct, max_states, start, max_seconds)
            if stopped:
                break
            expanded = coordinator.broadcast("expand", [depth + 1] * workers)
            inbound: list[list[bytes]] = [[] for _ in range(workers)]
            for produced, found, batches in expanded:
                generated += produced
                for owner, batch in enumerate(batches):
                    if batch is not None:
                        inbound[owner].append(batch)
                for d, fp, v in found:
                    findings.note(d, fp, (Violation(*v),))
            ingested = coordinator.broadcast("ingest", [(depth + 1, batches) for batches in inbound])
            frontier = sum(size for size, _ in ingested)
            for _size, found in ingested:
                for d, fp, v in found:
                    findings.note(d, fp, (Violation(*v),))
            distinct += frontier
            if frontier:
                depth += 1
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
        return Result(distinct, generated, depth, seconds, not frontier, counterexamples, stopped=stopped)
    except KeyboardInterrupt:
        raise SearchInterrupted(distinct, generated, depth, time.perf_counter() - start) from None
    finally:
        coordinator.stop()
