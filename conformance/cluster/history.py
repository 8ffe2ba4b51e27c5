"""The history of a real quorum's run and its checks: what the nemesis did (Fault), what each
node's quorum-state file said (Sample), what the workload wrote (Write) and read of the quorum
(Reading), in wall time from the run's start, and each node's metadata log at the end (Batch,
metadata_log.py) and its state transitions as its own log tells them (server_log.py). Judged against the model's safety properties (model/properties.py): from the
quorum-state files and again from the nodes' transitions SAFE-1, SAFE-2, SAFE-3; from the
metadata logs SAFE-1 (the LeaderChange records), SAFE-4 (log matching), SAFE-6 (an
acknowledged write, committed, is in the last leader's log) and SAFE-7 (committed prefixes
agree); from the readings, a high watermark that never goes back (HW-MONOTONE); KIP-595's
check-quorum with a bound (PROGRESS-1: a leader no majority follows any more steps down) and a
liveness bound (a leader that a majority follows within a stated time after the last fault
heals). Pure: run.py records the history, this module only reads it."""

import itertools
from collections.abc import Iterable

import msgspec

from conformance.cluster.metadata_log import Batch
from conformance.cluster.server_log import Transition


class Fault(msgspec.Struct, frozen=True, kw_only=True, tag="fault"):
    """What the nemesis did at `t` seconds: kill, restart, pause or resume a node; partition
    (cut `links`, each (from, to): nothing from `from` reaches `to`, in the `shape` drawn, around
    `node`) or heal them."""

    t: float
    kind: str
    node: int
    shape: str = ""
    links: tuple[tuple[int, int], ...] = ()


class Sample(msgspec.Struct, frozen=True, kw_only=True, tag="sample"):
    """A node's quorum-state file at `t` seconds, where it changed since the node's last sample."""

    t: float
    node: int
    epoch: int
    leader: int
    voted: int


class Began(msgspec.Struct, frozen=True, kw_only=True, tag="began"):
    """The run's start, `t` 0, at `wall` seconds since the Unix epoch: where the nodes' logs, in
    wall time, meet the history."""

    t: float
    wall: float


class Healed(msgspec.Struct, frozen=True, kw_only=True, tag="healed"):
    """Every node runs again, none paused, at `t` seconds: the faults are over."""

    t: float


class Write(msgspec.Struct, frozen=True, kw_only=True, tag="write"):
    """The workload's write `n` at `t` seconds: invoked, or its outcome: ack (the quorum committed
    it), failed (refused, not applied) or unknown (it may have been applied)."""

    t: float
    n: int
    outcome: str
    error: str = ""


class Reading(msgspec.Struct, frozen=True, kw_only=True, tag="reading"):
    """What DescribeQuorum answered the workload at `t` seconds: the leader, its epoch, its high watermark (-1: not known yet)."""

    t: float
    leader: int
    epoch: int
    hw: int


Event = Began | Fault | Sample | Healed | Write | Reading
_DECODER = msgspec.json.Decoder(Event)


def read(lines: bytes) -> list[Event]:
    """A history.jsonl's events (run.py writes one per line)."""
    return [_DECODER.decode(line) for line in lines.splitlines() if line.strip()]


LIVENESS = "LIVENESS"  # a leader within a bound of the faults healing: no rule of spec/rules.toml, which states safety only


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """A property the history breaks: its rule ID, when, and what shows it."""

    rule: str
    t: float
    detail: str


def election_safety(samples: Iterable[Sample]) -> list[Violation]:
    """SAFE-1: every file that names a leader of an epoch names the same one."""
    first: dict[int, Sample] = {}
    found = []
    for sample in samples:
        if sample.leader < 0:
            continue
        seen = first.setdefault(sample.epoch, sample)
        if seen.leader != sample.leader:
            found.append(Violation(rule="SAFE-1", t=sample.t, detail=f"epoch {sample.epoch}: node {seen.node} named leader {seen.leader} at {seen.t:.3f} s, node {sample.node} leader {sample.leader}"))
    return found


def one_vote_per_epoch(samples: Iterable[Sample]) -> list[Violation]:
    """SAFE-2: a node's file names at most one candidate it voted for in an epoch."""
    cast: dict[tuple[int, int], Sample] = {}
    found = []
    for sample in samples:
        if sample.voted < 0:
            continue
        seen = cast.setdefault((sample.node, sample.epoch), sample)
        if seen.voted != sample.voted:
            found.append(Violation(rule="SAFE-2", t=sample.t, detail=f"node {sample.node} voted for {seen.voted} (at {seen.t:.3f} s) and {sample.voted} in epoch {sample.epoch}"))
    return found


def epochs_never_decrease(samples: Iterable[Sample]) -> list[Violation]:
    """SAFE-3: a node's epoch, as its file keeps it across crashes, never goes down."""
    highest: dict[int, Sample] = {}
    found = []
    for sample in samples:
        top = highest.get(sample.node)
        if top is not None and sample.epoch < top.epoch:
            found.append(Violation(rule="SAFE-3", t=sample.t, detail=f"node {sample.node} is at epoch {sample.epoch} after epoch {top.epoch} at {top.t:.3f} s"))
        elif top is None or sample.epoch > top.epoch:
            highest[sample.node] = sample
    return found


def leader_after_healing(events: list[Event], nodes: int, bound_s: float) -> list[Violation]:
    """LIVENESS: once the faults are over (the last Healed), a majority's files name one leader
    of one epoch, the leader's own included, within `bound_s` seconds."""
    healed = [event.t for event in events if type(event) is Healed]
    if not healed:
        return [Violation(rule=LIVENESS, t=0.0, detail="the faults never healed")]
    start = healed[-1]
    agreed = leader_agreed_at(events, nodes, start)
    if agreed is None:
        return [Violation(rule=LIVENESS, t=start, detail=f"no leader followed by a majority within {bound_s:g} s of the faults healing at {start:.3f} s, nor by the run's end")]
    if agreed - start > bound_s:
        return [Violation(rule=LIVENESS, t=agreed, detail=f"a leader followed by a majority only {agreed - start:.3f} s after the faults healed at {start:.3f} s (bound {bound_s:g} s)")]
    return []


def cut_off_leader_steps_down(events: list[Event], nodes: int, bound_s: float) -> list[Violation]:
    """PROGRESS-1, bounded: a node whose file still names itself leader of an epoch while a
    majority follows the leader of a later one (so no majority fetches from it) leaves that
    leadership within `bound_s` seconds (its check-quorum timer: 1.5 fetch timeouts in Kafka,
    then its election); the history's end counts as a moment it was seen."""
    latest: dict[int, Sample] = {}
    stale_since: dict[int, float] = {}
    reported: set[tuple[int, float]] = set()
    found: list[Violation] = []

    def look(t: float) -> None:
        agreed = agreed_leader(latest, nodes)
        for node, sample in latest.items():
            stale = agreed is not None and sample.leader == node and sample.epoch < agreed[0]
            if not stale:
                stale_since.pop(node, None)
                continue
            since = stale_since.setdefault(node, t)
            if t - since > bound_s and (node, since) not in reported:
                reported.add((node, since))
                found.append(Violation(rule="PROGRESS-1", t=since, detail=f"node {node} still leads epoch {sample.epoch} {t - since:.3f} s after a majority followed leader {agreed[1]} of epoch {agreed[0]} (bound {bound_s:g} s)"))

    for event in events:
        if type(event) is Sample:
            latest[event.node] = event
        look(event.t)
    return found


def leader_agreed_at(events: list[Event], nodes: int, since: float) -> float | None:
    """The first time from `since` on at which the nodes' latest files agree on a leader (agreed_leader), None if never."""
    latest: dict[int, Sample] = {}
    for event in events:
        if type(event) is not Sample:
            continue
        if event.t >= since and agreed_leader(latest, nodes) is not None:
            return since  # agreed before `since`, and still then
        latest[event.node] = event
        if event.t >= since and agreed_leader(latest, nodes) is not None:
            return event.t
    return since if agreed_leader(latest, nodes) is not None else None


def agreed_leader(latest: dict[int, Sample], nodes: int) -> tuple[int, int] | None:
    """(epoch, leader) that a majority of the nodes' latest files name, the leader's own among
    them, or None."""
    counts: dict[tuple[int, int], int] = {}
    for sample in latest.values():
        if sample.leader >= 0:
            counts[(sample.epoch, sample.leader)] = counts.get((sample.epoch, sample.leader), 0) + 1
    for (epoch, leader), count in counts.items():
        own = latest.get(leader)
        if count > nodes // 2 and own is not None and (own.epoch, own.leader) == (epoch, leader):
            return epoch, leader
    return None


HW_MONOTONE = "HW-MONOTONE"  # a committed offset stays committed: what SAFE-6 and SAFE-7 give a reader of the high watermark


def high_watermark_never_goes_back(readings: Iterable[Reading]) -> list[Violation]:
    """HW-MONOTONE: every high watermark a leader reports is at least the highest reported before."""
    found = []
    top: Reading | None = None
    for reading in readings:
        if reading.hw < 0:
            continue
        if top is not None and reading.hw < top.hw:
            found.append(Violation(rule=HW_MONOTONE, t=reading.t, detail=f"leader {reading.leader} of epoch {reading.epoch} reports high watermark {reading.hw} after leader {top.leader} of epoch {top.epoch} reported {top.hw} at {top.t:.3f} s"))
        elif top is None or reading.hw > top.hw:
            top = reading
    return found


def acknowledged_writes_kept(writes: Iterable[Write], logs: dict[int, list[Batch]], last_leader: int | None) -> list[Violation]:
    """SAFE-6: every write the quorum acknowledged is in the log of the last leader (without one,
    in some node's log): one violation for each run of lost writes (acknowledged one after the
    other, none kept between), at the moment the first was acknowledged."""
    holders = [last_leader] if last_leader in logs else sorted(logs)
    kept = {n for node in holders for batch in logs[node] for n in batch.writes}
    where = f"the log of node {last_leader}, the last leader" if last_leader in logs else "any node's log"
    acknowledged = [write for write in writes if write.outcome == "ack"]
    runs: list[list[Write]] = []
    for write, before in zip(acknowledged, [None, *acknowledged]):
        if write.n in kept:
            continue
        if runs and before is runs[-1][-1]:
            runs[-1].append(write)
        else:
            runs.append([write])
    return [
        Violation(
            rule="SAFE-6",
            t=run[0].t,
            detail=(f"write {run[0].n}, acknowledged at {run[0].t:.3f} s," if len(run) == 1 else f"{len(run)} writes, {run[0].n} to {run[-1].n}, acknowledged from {run[0].t:.3f} s to {run[-1].t:.3f} s,")
            + (" is" if len(run) == 1 else " are")
            + f" not in {where}: lost",
        )
        for run in runs
    ]


def logs_match(logs: dict[int, list[Batch]], end: float) -> list[Violation]:
    """SAFE-4: where two nodes' logs hold a batch at the same offsets in the same epoch, the two are
    identical, and so is everything before it."""
    found = []
    for a, b in itertools.combinations(sorted(logs), 2):
        start = max((batches[0].base for batches in (_segments(logs[a]), _segments(logs[b])) if batches), default=0)  # a snapshot may have taken a prefix
        theirs = {(batch.base, batch.last): batch for batch in _segments(logs[b]) if batch.base >= start}
        ours = [batch for batch in _segments(logs[a]) if batch.base >= start]
        agreed_to = max((i for i, batch in enumerate(ours) if (other := theirs.get((batch.base, batch.last))) is not None and other.epoch == batch.epoch), default=-1)
        for batch in ours[: agreed_to + 1]:
            other = theirs.get((batch.base, batch.last))
            if other is None or (other.epoch, other.crc) != (batch.epoch, batch.crc):
                found.append(Violation(rule="SAFE-4", t=end, detail=f"nodes {a} and {b} hold the same batch of epoch {ours[agreed_to].epoch} at offset {ours[agreed_to].base}, but differ before it, at offset {batch.base}"))
                break
    return found


def committed_prefixes_agree(logs: dict[int, list[Batch]], readings: Iterable[Reading], end: float) -> list[Violation]:
    """SAFE-7: the nodes whose logs reach the last high watermark a leader reported hold the same
    batches below it."""
    known = [reading.hw for reading in readings if reading.hw >= 0]
    if not known:
        return []
    hw = known[-1]
    below = {node: [(b.base, b.last, b.epoch, b.crc) for b in _segments(batches) if b.last < hw] for node, batches in logs.items() if any(b.last >= hw - 1 for b in _segments(batches))}
    found = []
    for a, b in itertools.combinations(sorted(below), 2):
        if below[a] != below[b]:
            at = next((x[0] for x, y in zip(below[a], below[b]) if x != y), min(len(below[a]), len(below[b])))
            found.append(Violation(rule="SAFE-7", t=end, detail=f"nodes {a} and {b} differ below the high watermark {hw}, from offset {at}"))
    return found


def one_leader_per_epoch_in_logs(logs: dict[int, list[Batch]], samples: Iterable[Sample], end: float) -> list[Violation]:
    """SAFE-1 from the logs: the LeaderChange records of an epoch, in every node's log, name the
    leader that the quorum-state files name for it."""
    named: dict[int, Sample] = {}
    for sample in samples:
        if sample.leader >= 0:
            named.setdefault(sample.epoch, sample)
    found = []
    for node in sorted(logs):
        for batch in logs[node]:
            if batch.leader < 0:
                continue
            seen = named.setdefault(batch.epoch, Sample(t=end, node=node, epoch=batch.epoch, leader=batch.leader, voted=-1))
            if seen.leader != batch.leader:
                found.append(Violation(rule="SAFE-1", t=end, detail=f"epoch {batch.epoch}: node {node}'s log has a LeaderChange to leader {batch.leader} at offset {batch.base}, node {seen.node} named leader {seen.leader}"))
    return found


def _segments(batches: list[Batch]) -> list[Batch]:
    """A log's batches, without its snapshots'."""
    return [batch for batch in batches if batch.file.endswith(".log")]


def as_told_by_logs(transitions: dict[int, tuple[Transition, ...]], began: Began) -> list[Sample]:
    """The nodes' transitions as samples in the history's time, in that time's order."""
    told = [Sample(t=round(tr.wall - began.wall, 3), node=node, epoch=tr.epoch, leader=tr.leader, voted=tr.voted) for node, theirs in transitions.items() for tr in theirs]
    return sorted(told, key=lambda sample: sample.t)


def state_safety(samples: list[Sample]) -> list[Violation]:
    """SAFE-1, SAFE-2, SAFE-3 over one source's samples."""
    return election_safety(samples) + one_vote_per_epoch(samples) + epochs_never_decrease(samples)


def check(
    events: list[Event],
    nodes: int,
    bound_s: float,
    stale_leader_s: float = 8.0,
    logs: dict[int, list[Batch]] | None = None,
    transitions: dict[int, tuple[Transition, ...]] | None = None,
) -> list[Violation]:
    """Every violation the history shows, in time order: `bound_s` bounds the leader after the
    healing, `stale_leader_s` a cut-off leader's stepping down; `logs`, each node's metadata log
    at the end, and `transitions`, each node's as its log tells them (where the history has its
    start's wall time), for the checks that read them. The files and the logs are checked apart:
    their clocks are not merged, a file read 50 ms late must not look like an epoch gone back."""
    samples = [event for event in events if type(event) is Sample]
    readings = [event for event in events if type(event) is Reading]
    began = next((event for event in events if type(event) is Began), None)
    end = max((event.t for event in events), default=0.0)
    found = (
        state_safety(samples)
        + cut_off_leader_steps_down(events, nodes, stale_leader_s)
        + leader_after_healing(events, nodes, bound_s)
        + high_watermark_never_goes_back(readings)
    )
    if transitions and began is not None:
        found += [msgspec.structs.replace(v, detail=f"{v.detail}, as the nodes' logs tell") for v in state_safety(as_told_by_logs(transitions, began))]
    if logs:
        latest = {sample.node: sample for sample in samples}
        agreed = agreed_leader(latest, nodes)
        found += (
            acknowledged_writes_kept((event for event in events if type(event) is Write), logs, agreed[1] if agreed else None)
            + logs_match(logs, end)
            + committed_prefixes_agree(logs, readings, end)
            + one_leader_per_epoch_in_logs(logs, samples, end)
        )
    return sorted(found, key=lambda v: (v.t, v.rule))
