"""The history of a real quorum's run and its checks: what the nemesis did (Fault) and what each
node's quorum-state file said (Sample), in wall time from the run's start, judged against the
model's safety properties that a quorum-state file shows (model/properties.py: SAFE-1, SAFE-2,
SAFE-3), KIP-595's check-quorum with a bound (PROGRESS-1: a leader no majority follows any more
steps down) and a liveness bound (a leader that a majority follows within a stated time after
the last fault heals). Pure: run.py records the history, this module only reads it."""

from collections.abc import Iterable

import msgspec


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


class Healed(msgspec.Struct, frozen=True, kw_only=True, tag="healed"):
    """Every node runs again, none paused, at `t` seconds: the faults are over."""

    t: float


Event = Fault | Sample | Healed
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


def check(events: list[Event], nodes: int, bound_s: float, stale_leader_s: float = 8.0) -> list[Violation]:
    """Every violation the history shows, in time order: `bound_s` bounds the leader after the
    healing, `stale_leader_s` a cut-off leader's stepping down."""
    samples = [event for event in events if type(event) is Sample]
    found = (
        election_safety(samples)
        + one_vote_per_epoch(samples)
        + epochs_never_decrease(samples)
        + cut_off_leader_steps_down(events, nodes, stale_leader_s)
        + leader_after_healing(events, nodes, bound_s)
    )
    return sorted(found, key=lambda v: (v.t, v.rule))
