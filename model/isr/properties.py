"""The ISR safety properties, as predicates over partition states; each speaks in its ISR-SAFE-* rule ID.

A power failure of every replica may erase records that were not yet on disk, and Kafka
acknowledges before flushing: no protocol keeps a record every replica lost. So the promise
that acknowledged records are kept is ISR-SAFE-2 until a power failure, and after one
ISR-SAFE-3: a record is not lost while some replica still holds a copy.
"""

from collections.abc import Callable
from typing import NamedTuple

from model.isr.cluster import Partition, holds
from model.isr.state import PartitionState, Role, log_text, record_text


class Violation(NamedTuple):
    rule: str
    detail: str


def no_divergence(partition: Partition, state: PartitionState) -> str | None:
    """ISR-SAFE-1: live replicas that are not mid-truncation agree below both their high watermarks."""
    settled = [(r, s) for r, s in zip(partition.ids, state.replicas) if s.role != Role.DOWN and not s.truncating]
    for a, (id_a, replica_a) in enumerate(settled):
        for id_b, replica_b in settled[a + 1 :]:
            common = min(replica_a.high_watermark, replica_b.high_watermark)
            for offset in range(common):
                if replica_a.log[offset] != replica_b.log[offset]:
                    return (
                        f"replicas {id_a} and {id_b} hold {record_text(replica_a.log[offset])} and {record_text(replica_b.log[offset])} "
                        f"at offset {offset}, below both high watermarks ({replica_a.high_watermark}, {replica_b.high_watermark})"
                    )
    return None


def lost(partition: Partition, state: PartitionState, *, surviving_only: bool) -> str | None:
    """The first acknowledged record the current leader (the recorded one, if up) does not hold."""
    leader = state.controller.Leader
    replica = state.replicas[partition.index[leader]]
    if replica.role != Role.LEADER:
        return None
    for record in state.history.acked:
        if holds(replica, record):
            continue
        holders = [r for r, s in zip(partition.ids, state.replicas) if holds(s, record)]
        if surviving_only and not holders:
            continue
        held = f"; replicas {holders} still hold it" if holders else ""
        return f"acknowledged record {record_text(record)} is not in the log of leader {leader} (epoch {replica.epoch}: {log_text(replica.log)}){held}"
    return None


def no_loss(partition: Partition, state: PartitionState) -> str | None:
    """ISR-SAFE-2: until a power failure, the current leader holds every acknowledged record."""
    return None if state.history.power_failures else lost(partition, state, surviving_only=False)


def no_discarded_copy(partition: Partition, state: PartitionState) -> str | None:
    """ISR-SAFE-3: after a power failure, the current leader holds every acknowledged record some replica still holds."""
    return lost(partition, state, surviving_only=True) if state.history.power_failures else None


PROPERTIES: dict[str, Callable[[Partition, PartitionState], str | None]] = {
    "ISR-SAFE-1": no_divergence,
    "ISR-SAFE-2": no_loss,
    "ISR-SAFE-3": no_discarded_copy,
}


def violations(partition: Partition, state: PartitionState) -> tuple[Violation, ...]:
    """Every ISR safety property the state breaks, in rule order."""
    found = []
    for rule_id, holds_or_detail in PROPERTIES.items():
        detail = holds_or_detail(partition, state)
        if detail is not None:
            found.append(Violation(rule_id, detail))
    return tuple(found)
