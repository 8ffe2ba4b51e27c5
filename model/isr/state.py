"""The states of an ISR partition: each replica's, the controller's LeaderAndISR record, the history.

States are immutable and hashable so exploration can deduplicate them. Only the fields a role
uses are non-empty; every role change clears the others (see model/isr/replica.py).
"""

import enum

import msgspec

from model.messages import Record
from model.network import Bag


class Role(enum.IntEnum):
    FOLLOWER = 0  # a live replica that is not the leader (leader -1: it knows of no live leader)
    LEADER = 1
    DOWN = 2  # crashed, powered off, or halted


class ReplicaState(msgspec.Struct, frozen=True, kw_only=True):
    role: Role = Role.FOLLOWER
    epoch: int = 0  # the leader epoch it last heard of
    leader: int = -1
    # Persisted: the log, and the high watermark (Kafka's high-watermark checkpoint).
    log: tuple[Record, ...] = ()
    high_watermark: int = 0
    # Volatile.
    fetching: bool = False  # follower: a Fetch is outstanding
    truncating: bool = False  # follower, epoch truncation: waiting for its OffsetsForLeaderEpoch answer
    isr: tuple[int, ...] = ()  # leader: its copy of the ISR, sorted
    follower_ends: tuple[tuple[int, int], ...] = ()  # leader: (follower, log end offset as last fetched, -1 unknown)


class LeaderAndIsr(msgspec.Struct, frozen=True, kw_only=True, tag="leader_and_isr"):
    """The controller's record of the partition (the design's LeaderAndISR path), also the command
    it sends to brokers after an election (LeaderAndISRCommand)."""

    Leader: int
    LeaderEpoch: int
    Isr: tuple[int, ...]  # sorted


class History(msgspec.Struct, frozen=True, kw_only=True):
    """What the safety properties need and no replica remembers."""

    acked: tuple[Record, ...] = ()  # records acknowledged to the producer, by offset
    appended: int = 0  # producer records appended so far
    crashes: int = 0
    power_failures: int = 0
    elections: int = 0


class PartitionState(msgspec.Struct, frozen=True, kw_only=True):
    replicas: tuple[ReplicaState, ...]  # in PartitionConfig.replicas order
    controller: LeaderAndIsr  # the controller's record of the partition
    network: Bag
    history: History


def record_text(record: Record) -> str:
    """A record as the KIP's figures show it: offset:epoch:value, e.g. `1:0:v2`."""
    return f"{record.Offset}:{record.Epoch}:v{record.Value}"


def log_text(log: tuple[Record, ...]) -> str:
    return " ".join(record_text(r) for r in log) or "-"
