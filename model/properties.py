"""The safety properties, as predicates over cluster states; each speaks in its SAFE-* rule ID."""

from collections.abc import Callable
from typing import NamedTuple

from model.cluster import Cluster, ClusterState
from model.state import Role


class Violation(NamedTuple):
    rule: str
    detail: str


def election_safety(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-1: at most one leader is elected per epoch."""
    leaders: dict[int, int] = {}
    for epoch, leader in sorted(state.history.elected):
        if leaders.setdefault(epoch, leader) != leader:
            return f"epoch {epoch} elected both {leaders[epoch]} and {leader}"
    return None


def one_vote_per_epoch(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-2: a voter casts at most one vote per epoch."""
    cast: dict[tuple[int, int], int] = {}
    for voter, epoch, candidate in sorted(state.history.votes):
        if cast.setdefault((voter, epoch), candidate) != candidate:
            return f"voter {voter} voted for {cast[(voter, epoch)]} and {candidate} in epoch {epoch}"
    return None


def epochs_never_decrease(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-3: a node's epoch never decreases."""
    for node_id, node, highest in zip(cluster.ids, state.nodes, state.history.max_epochs):
        if node.epoch < highest:
            return f"node {node_id} is at epoch {node.epoch} after having reached {highest}"
    return None


def log_matching(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-4: logs with a record of the same offset and epoch are identical up to it."""
    nodes = list(zip(cluster.ids, state.nodes))
    for a, (id_a, node_a) in enumerate(nodes):
        for id_b, node_b in nodes[a + 1 :]:
            log_a, log_b = node_a.log, node_b.log
            for offset in range(min(len(log_a), len(log_b)) - 1, -1, -1):
                if log_a[offset].Epoch == log_b[offset].Epoch:
                    if log_a[: offset + 1] != log_b[: offset + 1]:
                        return f"nodes {id_a} and {id_b} share epoch {log_a[offset].Epoch} at offset {offset} but differ before it"
                    break
    return None


def leader_append_only(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-5: a leader never overwrites or deletes its log in its epoch (checked at each step)."""
    if "SAFE-5" in state.history.violations:
        return "a leader removed or rewrote records of its own log"
    return None


def leader_completeness(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-6: a record committed in epoch T is in the log of every leader of a later epoch."""
    for node_id, node in zip(cluster.ids, state.nodes):
        if node.role != Role.LEADER:
            continue
        for record, epoch in state.history.committed:
            if epoch < node.epoch and (record.Offset >= len(node.log) or node.log[record.Offset] != record):
                return f"leader {node_id} of epoch {node.epoch} lacks record {record.Offset} (epoch {record.Epoch}) committed in epoch {epoch}"
    return None


def committed_prefixes_agree(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-7: any two nodes agree on their logs up to the smaller of their high watermarks."""
    seen: dict[int, object] = {}
    for record, _ in state.history.committed:
        if seen.setdefault(record.Offset, record) != record:
            return f"two different records were committed at offset {record.Offset}"
    nodes = list(zip(cluster.ids, state.nodes))
    for a, (id_a, node_a) in enumerate(nodes):
        for id_b, node_b in nodes[a + 1 :]:
            common = max(min(node_a.high_watermark, node_b.high_watermark), 0)  # -1: unknown (Options.unknown_high_watermark)
            if node_a.log[:common] != node_b.log[:common]:
                return f"nodes {id_a} and {id_b} disagree below high watermark {common}"
    return None


def high_watermark_within_log(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-8: every node's high watermark is at most its log end offset."""
    for node_id, node in zip(cluster.ids, state.nodes):
        if node.high_watermark > len(node.log):
            return f"node {node_id} has high watermark {node.high_watermark} beyond its log end {len(node.log)}"
    return None


def committed_never_lost(cluster: Cluster, state: ClusterState) -> str | None:
    """SAFE-9: every committed record stays in the logs of a majority of voters."""
    voters = state.nodes[: len(cluster.config.voters)]
    majority = len(voters) // 2 + 1
    for record, _ in state.history.committed:
        holders = sum(1 for node in voters if record.Offset < len(node.log) and node.log[record.Offset] == record)
        if holders < majority:
            return f"committed record at offset {record.Offset} (epoch {record.Epoch}) is on {holders} voters, fewer than a majority"
    return None


PROPERTIES: dict[str, Callable[[Cluster, ClusterState], str | None]] = {
    "SAFE-1": election_safety,
    "SAFE-2": one_vote_per_epoch,
    "SAFE-3": epochs_never_decrease,
    "SAFE-4": log_matching,
    "SAFE-5": leader_append_only,
    "SAFE-6": leader_completeness,
    "SAFE-7": committed_prefixes_agree,
    "SAFE-8": high_watermark_within_log,
    "SAFE-9": committed_never_lost,
}


def violations(cluster: Cluster, state: ClusterState) -> tuple[Violation, ...]:
    """Every safety property the state breaks, in rule order."""
    found = []
    for rule_id, holds_or_detail in PROPERTIES.items():
        detail = holds_or_detail(cluster, state)
        if detail is not None:
            found.append(Violation(rule_id, detail))
    return tuple(found)
