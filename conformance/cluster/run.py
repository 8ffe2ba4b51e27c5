"""One run of a real Kafka controller quorum under a seeded nemesis: start the quorum, wait for
its first leader, start the workload (workload.py), inject faults for the run's time (each drawn
from the seed: which fault (a kill, a pause, a partition of some shape, a wiped disk), which
node, how long), heal everything, watch for a leader, stop, read every node's metadata log
(metadata_log.py) and check the history (history.py).

While it runs, every node's quorum-state file is read every SAMPLE_SECONDS and each change is
appended to history.jsonl at once, beside every fault, write and reading: a run that is
interrupted or fails keeps what it saw. At most a minority of the nodes is faulty at any time, so
a majority can always elect, but for a wipe, the operator's error: a follower's disk is lost while
the other nodes are down, so that it and the followers that lag form a majority without the
acknowledged writes (WIPE below). The liveness bound is the time a leader may take once all are
back.
"""

import random
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from conformance.cluster import history, metadata_log, server_log, workload
from conformance.cluster.history import Began, Event, Fault, Healed, Reading, Sample, Violation, Write
from conformance.cluster.quorum import ControllerQuorum
from conformance.outputs import check_directory

NEMESES = ("kill", "pause", "partition", "wipe")  # SIGKILL then a restart; SIGSTOP then SIGCONT; links cut then healed; WIPE
# A wipe, around a follower X of the leader L: first the followers that are to lag, (N-1)/2 of
# them, are killed, and the others commit writes without them for half the fault's time (and on,
# up to the fault's time more, until one written since is acknowledged: a loaded machine elects
# slowly); then X is killed and its disk wiped (formatted anew), and L and the rest are killed; X
# and the lagging followers, a majority, restart and elect among themselves, none holding those
# writes; for the other half L and the rest stay down (and on, up to the fault's time more, until
# the restarted majority has its leader: else L, back first, would win with the writes), then
# restart and follow. Raft cannot survive this, and the history must show it: acknowledged writes
# lost (SAFE-6). Never drawn unless asked for.
DEFAULT_NEMESES = ("kill", "pause", "partition")
# A partition's shapes, around one node X (the leader where the shape says so):
#   isolate: X cut from every other node, both ways;
#   isolate-leader: the same, X the leader;
#   partial: X, a follower, cut from the leader alone, both ways: it still reaches the others;
#   leader-deaf: nothing reaches the leader from the others (one way): it still sends;
#   bridge: X, a follower, reaches every node, while the others are split in two sides that do
#     not reach each other, both ways: the leader's (with fewer than half the rest) and the far one.
SHAPES = ("isolate", "isolate-leader", "partial", "leader-deaf", "bridge")
SAMPLE_SECONDS = 0.05
FAULT_GAP_SECONDS = (1.0, 4.0)  # between one fault's end and the next fault
FAULT_SECONDS = (1.0, 8.0)  # how long a fault lasts: past a fetch timeout (2 s) and an election, or not
FIRST_LEADER_SECONDS = 90.0  # JVMs starting on a loaded machine: generous
AFTER_HEALING_SECONDS = 3.0  # writes go on this long once a leader is back, before the nodes stop
HISTORY = "history.jsonl"
SUMMARY = "summary.json"
TIMELINE = "timeline.svg"
OWNED = (HISTORY, SUMMARY, "report.md", TIMELINE, workload.LOG)


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    version: str
    controllers: int = 3
    nemesis: tuple[str, ...] = DEFAULT_NEMESES
    seconds: float = 60.0
    seed: int = 0
    leader_bound_seconds: float = 30.0  # LIVENESS: a leader within this of the faults healing
    fault_seconds: tuple[float, float] = FAULT_SECONDS
    shapes: tuple[str, ...] = SHAPES  # the partitions to draw from
    writes: bool = True  # run the workload (where the release has bootstrap.controllers)


class RunSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What a run did and found, as summary.json holds it."""

    version: str
    controllers: int
    nemesis: tuple[str, ...]
    seed: int
    seconds: float
    faults: dict[str, int]  # by kind
    writes: dict[str, int] | None  # by outcome (ack, failed, unknown); None: no workload
    readings: int  # DescribeQuorum answers with a high watermark
    batches: dict[str, int]  # by node: the record batches of its metadata log at the end
    transitions: int  # state transitions the nodes' own logs tell
    unreadable: tuple[str, ...]  # transition lines of those logs that server_log.py cannot read
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
    """The history as it happens: appended to history.jsonl line by line, and kept; events come
    from the run and from the workload's thread."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("ab")
        self.start = time.monotonic()
        self.events: list[Event] = []
        self.last: dict[int, Sample] = {}
        self.lock = threading.Lock()
        self.add(Began(t=0.0, wall=round(time.time(), 3)))

    def now(self) -> float:
        return round(time.monotonic() - self.start, 3)

    def add(self, event: Event) -> None:
        with self.lock:
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
        """Once the workload has stopped: nothing else adds any more."""
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
    writing = options.writes and workload.supported(options.version)

    def agreed() -> bool:
        return history.agreed_leader(recorder.last, nodes) is not None

    try:
        with ControllerQuorum(options.version, nodes, out, options.seed, partitions="partition" in options.nemesis) as quorum:
            progress(f"formatting {nodes} controllers of Kafka {options.version} (cluster id {quorum.cluster_id})")
            quorum.format()
            for node_id in quorum.nodes:
                quorum.start(node_id)
            where = "each in a network namespace of its own" if quorum.partitionable else f"all on the host's loopback ({quorum.no_network_because})"
            progress(f"started on 127.0.0.1 ports {', '.join(str(n.port) for n in quorum.nodes.values())}, {where}; waiting for a leader")
            if watch(recorder, quorum, FIRST_LEADER_SECONDS, agreed):
                first_leader = recorder.now()
                epoch, leader = history.agreed_leader(recorder.last, nodes)
                progress(f"{first_leader:.1f} s: node {leader} leads epoch {epoch}; " + ("writes and " if writing else "") + f"faults for {options.seconds:g} s")
            writer = workload.Workload(options.version, quorum.bootstrap, out, recorder.add, recorder.now) if writing else None
            try:
                if writer is not None and not writer.wait_until_writing():
                    progress(f"the workload has no answer within {workload.READY_SECONDS:g} s (see {out / workload.LOG}); faults begin without it")
                faulting_until = recorder.now() + options.seconds
                while recorder.now() < faulting_until:
                    watch(recorder, quorum, draw.uniform(*FAULT_GAP_SECONDS))
                    if recorder.now() >= faulting_until:
                        break
                    kind, node_id, lasting = draw.choice(options.nemesis), draw.choice(sorted(quorum.nodes)), draw.uniform(*options.fault_seconds)
                    shape = draw.choice(options.shapes)
                    progress(f"{recorder.now():.1f} s: {kind} around node {node_id}" + (f" ({shape})" if kind == "partition" else "") + f" for {lasting:.1f} s")
                    (wipe if kind == "wipe" else fault)(quorum, recorder, kind, node_id, shape, lasting, draw)
                    faults[kind] += 1
                recorder.add(Healed(t=recorder.now()))
                healed_at = recorder.now()
                came = watch(recorder, quorum, options.leader_bound_seconds + 5.0, agreed)
                progress(f"{recorder.now():.1f} s: faults healed at {healed_at:.1f} s; " + ("a leader followed by a majority" if came else "no leader yet"))
                watch(recorder, quorum, AFTER_HEALING_SECONDS if writer else 0.0)
            finally:
                if writer is not None:
                    writer.stop()
    finally:
        recorder.close()
    progress("reading every node's metadata log and its own log")
    logs = {node_id: metadata_log.read(options.version, quorum.nodes[node_id].data, quorum.nodes[node_id].directory / metadata_log.DUMP) for node_id in quorum.nodes}
    told = {node_id: server_log.read(quorum.nodes[node_id].log_file.read_text(errors="replace")) for node_id in quorum.nodes}
    transitions = {node_id: log.transitions for node_id, log in told.items()}
    violations = tuple(history.check(recorder.events, nodes, options.leader_bound_seconds, logs=logs, transitions=transitions))
    samples = [event for event in recorder.events if type(event) is Sample]
    outcomes = [event.outcome for event in recorder.events if type(event) is Write and event.outcome != "invoked"]
    agreed_at = history.leader_agreed_at(recorder.events, nodes, healed_at)
    return RunSummary(
        version=options.version,
        controllers=nodes,
        nemesis=options.nemesis,
        seed=options.seed,
        seconds=options.seconds,
        faults=faults,
        writes={outcome: outcomes.count(outcome) for outcome in ("ack", "failed", "unknown")} if writing else None,
        readings=sum(1 for event in recorder.events if type(event) is Reading and event.hw >= 0),
        batches={str(node_id): len(batches) for node_id, batches in logs.items()},
        transitions=sum(len(log.transitions) for log in told.values()),
        unreadable=tuple(line for log in told.values() for line in log.unreadable),
        samples=len(samples),
        epochs=len({s.epoch for s in samples if s.leader >= 0}),
        first_leader_seconds=first_leader,
        leader_after_healing_seconds=None if agreed_at is None else round(agreed_at - healed_at, 3),
        violations=violations,
    )


def fault(quorum: ControllerQuorum, recorder: Recorder, kind: str, node_id: int, shape: str, lasting: float, draw: random.Random) -> None:
    """One kill, pause or partition, `lasting` seconds, then its end."""
    started = inject(quorum, recorder, kind, node_id, shape)
    watch(recorder, quorum, lasting)
    heal(quorum, recorder, started)


def wipe(quorum: ControllerQuorum, recorder: Recorder, kind: str, node_id: int, shape: str, lasting: float, draw: random.Random) -> None:
    """WIPE around `node_id` (a follower of the leader a majority's files name: another where it is the leader)."""
    agreed = history.agreed_leader(recorder.last, len(quorum.nodes))
    leader = agreed[1] if agreed is not None else node_id
    followers = [n for n in sorted(quorum.nodes) if n != leader]
    wiped = node_id if node_id != leader or not followers else followers[0]
    lagging = draw.sample([n for n in followers if n != wiped], (len(quorum.nodes) - 1) // 2)
    rest = [n for n in sorted(quorum.nodes) if n != wiped and n not in lagging]

    def act(kind: str, nodes: list[int]) -> None:
        for node in nodes:
            recorder.add(Fault(t=recorder.now(), kind=kind, node=node))  # as it begins: a wipe's formatting takes seconds
            {"kill": quorum.kill, "wipe": quorum.wipe, "restart": quorum.start}[kind](node)

    act("kill", lagging)
    killed = recorder.now()
    watch(recorder, quorum, lasting / 2)
    watch(recorder, quorum, lasting, until=lambda: acknowledged_since(recorder, killed))
    act("wipe", [wiped])
    act("kill", rest)
    restarted = lagging + [wiped]
    act("restart", restarted)
    watch(recorder, quorum, lasting / 2)
    watch(recorder, quorum, lasting, until=lambda: elected_among(recorder, len(quorum.nodes), restarted, agreed[0] if agreed is not None else -1))
    act("restart", rest)


def elected_among(recorder: Recorder, nodes: int, among: list[int], epoch: int) -> bool:
    """Whether a majority's latest files name a leader from `among` in an epoch past `epoch`."""
    agreed = history.agreed_leader(recorder.last, nodes)
    return agreed is not None and agreed[1] in among and agreed[0] > epoch


def acknowledged_since(recorder: Recorder, t: float) -> bool:
    """Whether a write invoked at or after `t` has been acknowledged (the history read from its end)."""
    acknowledged = set()
    for event in reversed(recorder.events):
        if event.t < t:
            return False
        if type(event) is Write and event.outcome == "ack":
            acknowledged.add(event.n)
        elif type(event) is Write and event.outcome == "invoked" and event.n in acknowledged:
            return True
    return False


def inject(quorum: ControllerQuorum, recorder: Recorder, kind: str, node_id: int, shape: str) -> Fault:
    """Start one fault at `node_id` (a partition: of `shape`, around the node it names)."""
    if kind == "partition":
        started = partition(quorum, recorder, node_id, shape)
        for source, target in started.links:
            quorum.cut(source, target)
    else:
        started = Fault(t=recorder.now(), kind=kind, node=node_id)
        (quorum.kill if kind == "kill" else quorum.pause)(node_id)
    recorder.add(started)
    return started


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
    elif shape == "bridge":
        node_id = node_id if node_id != leader else others[0]
        rest = [n for n in others if n != node_id]
        near = [leader, *rest[: (len(rest) - 1) // 2]]
        far = [n for n in rest if n not in near]
        links = [(a, b) for a in near for b in far] + [(b, a) for a in near for b in far]
    else:  # leader-deaf
        node_id = leader
        links = [(n, leader) for n in others]
    return Fault(t=recorder.now(), kind="partition", node=node_id, shape=shape, links=tuple(sorted(links)))


def heal(quorum: ControllerQuorum, recorder: Recorder, started: Fault) -> None:
    """End the fault: restart, resume, or heal the links it cut."""
    if started.kind == "partition":
        for source, target in started.links:
            quorum.heal(source, target)
        recorder.add(Fault(t=recorder.now(), kind="heal", node=started.node, shape=started.shape, links=started.links))
        return
    (quorum.start if started.kind == "kill" else quorum.resume)(started.node)
    recorder.add(Fault(t=recorder.now(), kind="restart" if started.kind == "kill" else "resume", node=started.node))
