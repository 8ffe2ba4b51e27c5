"""One run of a real Kafka controller quorum under a seeded nemesis: start the quorum, wait for
its first leader, inject faults for the run's time (each drawn from the seed: which fault (a
kill, a pause, a partition of some shape), which node, how long), heal everything, watch for a
leader, and check the history (history.py).

While it runs, every node's quorum-state file is read every SAMPLE_SECONDS and each change is
appended to history.jsonl at once, beside every fault: a run that is interrupted or fails keeps
what it saw. At most a minority of the nodes is faulty at any time, so a majority can always
elect; the liveness bound is then the time a leader may take once all are back.
"""

import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from conformance.cluster import history
from conformance.cluster.history import Event, Fault, Healed, Sample, Violation
from conformance.cluster.quorum import ControllerQuorum
from conformance.outputs import check_directory

NEMESES = ("kill", "pause", "partition")  # SIGKILL then a restart; SIGSTOP then SIGCONT; links cut then healed
# A partition's shapes, around one node X (the leader where the shape says so):
#   isolate: X cut from every other node, both ways;
#   isolate-leader: the same, X the leader;
#   partial: X, a follower, cut from the leader alone, both ways: it still reaches the others;
#   leader-deaf: nothing reaches the leader from the others (one way): it still sends.
SHAPES = ("isolate", "isolate-leader", "partial", "leader-deaf")
# From Kafka 3.9 (KIP-853) a leader sends its own listener's address to its followers, which then
# fetch from it there, past kraftcheck's relays: partitions need a network of the run's own
# (namespaces), which is not built yet.
RELAYED_BEFORE = (3, 9)
SAMPLE_SECONDS = 0.05
FAULT_GAP_SECONDS = (1.0, 4.0)  # between one fault's end and the next fault
FAULT_SECONDS = (1.0, 8.0)  # how long a fault lasts: past a fetch timeout (2 s) and an election, or not
FIRST_LEADER_SECONDS = 90.0  # JVMs starting on a loaded machine: generous
HISTORY = "history.jsonl"
SUMMARY = "summary.json"
TIMELINE = "timeline.svg"
OWNED = (HISTORY, SUMMARY, "report.md", TIMELINE)


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    version: str
    controllers: int = 3
    nemesis: tuple[str, ...] = NEMESES
    seconds: float = 60.0
    seed: int = 0
    leader_bound_seconds: float = 30.0  # LIVENESS: a leader within this of the faults healing
    fault_seconds: tuple[float, float] = FAULT_SECONDS
    shapes: tuple[str, ...] = SHAPES  # the partitions to draw from


class RunSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What a run did and found, as summary.json holds it."""

    version: str
    controllers: int
    nemesis: tuple[str, ...]
    seed: int
    seconds: float
    faults: dict[str, int]  # by kind
    samples: int
    epochs: int  # distinct epochs some node's file named a leader of
    first_leader_seconds: float | None
    leader_after_healing_seconds: float | None
    violations: tuple[Violation, ...]


def owned(name: str) -> bool:
    return name in OWNED or name.startswith("node-")


def prepare(out: Path) -> None:
    """`out` new, empty or an earlier run's: refused if it holds anything else (OutputError), an
    earlier run's files removed."""
    check_directory(out, owned, "cluster run")
    out.mkdir(parents=True, exist_ok=True)
    for entry in out.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


class Recorder:
    """The history as it happens: appended to history.jsonl line by line, and kept."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("ab")
        self.start = time.monotonic()
        self.events: list[Event] = []
        self.last: dict[int, Sample] = {}

    def now(self) -> float:
        return round(time.monotonic() - self.start, 3)

    def add(self, event: Event) -> None:
        self.events.append(event)
        self.file.write(msgspec.json.encode(event) + b"\n")
        self.file.flush()

    def sample(self, quorum: ControllerQuorum) -> None:
        """Each node's quorum-state file, recorded where it changed."""
        for node_id in quorum.nodes:
            state = quorum.quorum_state(node_id)
            if state is None:
                continue
            last = self.last.get(node_id)
            if last is None or (last.epoch, last.leader, last.voted) != (state.leaderEpoch, state.leaderId, state.votedId):
                self.last[node_id] = Sample(t=self.now(), node=node_id, epoch=state.leaderEpoch, leader=state.leaderId, voted=state.votedId)
                self.add(self.last[node_id])

    def close(self) -> None:
        self.file.close()


def watch(recorder: Recorder, quorum: ControllerQuorum, seconds: float, until: Callable[[], bool] = lambda: False) -> bool:
    """Sample for `seconds`, or until `until()`: whether it came."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        recorder.sample(quorum)
        if until():
            return True
        time.sleep(SAMPLE_SECONDS)
    return until()


def run(options: RunOptions, out: Path, progress: Callable[[str], None]) -> RunSummary:
    """Run the quorum under the nemesis into `out` (prepared by `prepare`), and check it."""
    draw = random.Random(options.seed)
    nodes = options.controllers
    recorder = Recorder(out / HISTORY)
    faults: dict[str, int] = {kind: 0 for kind in options.nemesis}
    first_leader = None

    def agreed() -> bool:
        return history.agreed_leader(recorder.last, nodes) is not None

    try:
        with ControllerQuorum(options.version, nodes, out, options.seed) as quorum:
            progress(f"formatting {nodes} controllers of Kafka {options.version} (cluster id {quorum.cluster_id})")
            quorum.format()
            for node_id in quorum.nodes:
                quorum.start(node_id)
            progress(f"started on 127.0.0.1 ports {', '.join(str(n.port) for n in quorum.nodes.values())}; waiting for a leader")
            if watch(recorder, quorum, FIRST_LEADER_SECONDS, agreed):
                first_leader = recorder.now()
                epoch, leader = history.agreed_leader(recorder.last, nodes)
                progress(f"{first_leader:.1f} s: node {leader} leads epoch {epoch}; faults for {options.seconds:g} s")
            faulting_until = recorder.now() + options.seconds
            while recorder.now() < faulting_until:
                watch(recorder, quorum, draw.uniform(*FAULT_GAP_SECONDS))
                if recorder.now() >= faulting_until:
                    break
                kind, node_id, lasting = draw.choice(options.nemesis), draw.choice(sorted(quorum.nodes)), draw.uniform(*options.fault_seconds)
                fault = inject(quorum, recorder, kind, node_id, draw.choice(options.shapes))
                faults[kind] += 1
                progress(f"{recorder.now():.1f} s: {kind} node {fault.node}{' (' + fault.shape + ')' if fault.shape else ''} for {lasting:.1f} s")
                watch(recorder, quorum, lasting)
                heal(quorum, recorder, fault)
            recorder.add(Healed(t=recorder.now()))
            healed_at = recorder.now()
            came = watch(recorder, quorum, options.leader_bound_seconds + 5.0, agreed)
            progress(f"{recorder.now():.1f} s: faults healed at {healed_at:.1f} s; " + ("a leader followed by a majority" if came else "no leader yet"))
    finally:
        recorder.close()
    violations = tuple(history.check(recorder.events, nodes, options.leader_bound_seconds))
    samples = [event for event in recorder.events if type(event) is Sample]
    agreed_at = history.leader_agreed_at(recorder.events, nodes, healed_at)
    return RunSummary(
        version=options.version,
        controllers=nodes,
        nemesis=options.nemesis,
        seed=options.seed,
        seconds=options.seconds,
        faults=faults,
        samples=len(samples),
        epochs=len({s.epoch for s in samples if s.leader >= 0}),
        first_leader_seconds=first_leader,
        leader_after_healing_seconds=None if agreed_at is None else round(agreed_at - healed_at, 3),
        violations=violations,
    )


def inject(quorum: ControllerQuorum, recorder: Recorder, kind: str, node_id: int, shape: str) -> Fault:
    """Start one fault at `node_id` (a partition: of `shape`, around the node it names)."""
    if kind == "partition":
        fault = partition(quorum, recorder, node_id, shape)
        for source, target in fault.links:
            quorum.links.cut(source, target)
    else:
        fault = Fault(t=recorder.now(), kind=kind, node=node_id)
        (quorum.kill if kind == "kill" else quorum.pause)(node_id)
    recorder.add(fault)
    return fault


def partition(quorum: ControllerQuorum, recorder: Recorder, node_id: int, shape: str) -> Fault:
    """The links a partition of `shape` cuts; the leader is the one a majority's files name now
    (without one, a leader-shaped partition falls on `node_id`)."""
    agreed = history.agreed_leader(recorder.last, len(quorum.nodes))
    leader = agreed[1] if agreed is not None else node_id
    others = [n for n in quorum.nodes if n != leader]
    if shape == "isolate-leader":
        node_id = leader
    if shape in ("isolate", "isolate-leader"):
        links = [(node_id, n) for n in quorum.nodes if n != node_id] + [(n, node_id) for n in quorum.nodes if n != node_id]
    elif shape == "partial":
        node_id = node_id if node_id != leader else others[0]
        links = [(node_id, leader), (leader, node_id)]
    else:  # leader-deaf
        node_id = leader
        links = [(n, leader) for n in others]
    return Fault(t=recorder.now(), kind="partition", node=node_id, shape=shape, links=tuple(sorted(links)))


def heal(quorum: ControllerQuorum, recorder: Recorder, fault: Fault) -> None:
    """End the fault: restart, resume, or heal the links it cut."""
    if fault.kind == "partition":
        for source, target in fault.links:
            quorum.links.heal(source, target)
        recorder.add(Fault(t=recorder.now(), kind="heal", node=fault.node, shape=fault.shape, links=fault.links))
        return
    (quorum.start if fault.kind == "kill" else quorum.resume)(fault.node)
    recorder.add(Fault(t=recorder.now(), kind="restart" if fault.kind == "kill" else "resume", node=fault.node))
