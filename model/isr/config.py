"""The partition's replication settings and the bounds of the environment around it."""

import msgspec

from model.config import ConfigError

TRUNCATIONS = ("hw", "epoch")


class ReplicaConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What one replica knows statically: who it is, the replica set, min.isr, how it truncates."""

    node_id: int
    replicas: tuple[int, ...]
    min_isr: int = 1
    truncation: str = "epoch"  # "hw": to the local high watermark (before KIP-101); "epoch": KIP-101

    @property
    def followers(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r != self.node_id)


class PartitionConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One partition: its replicas (the first is the initial leader), min.isr and truncation mode."""

    replicas: tuple[int, ...] = (1, 2)
    min_isr: int = 1
    truncation: str = "epoch"

    def __post_init__(self) -> None:
        if not self.replicas:
            raise ConfigError("a partition needs at least one replica")
        if len(set(self.replicas)) != len(self.replicas) or min(self.replicas) < 0:
            raise ConfigError(f"replica ids must be distinct and non-negative, got {list(self.replicas)}")
        if not 1 <= self.min_isr <= len(self.replicas):
            raise ConfigError(f"min_isr must be between 1 and the number of replicas ({len(self.replicas)}), got {self.min_isr}")
        if self.truncation not in TRUNCATIONS:
            raise ConfigError(f"truncation must be one of {', '.join(TRUNCATIONS)}, got {self.truncation!r}")

    def replica(self, node_id: int) -> ReplicaConfig:
        return ReplicaConfig(node_id=node_id, replicas=self.replicas, min_isr=self.min_isr, truncation=self.truncation)


class IsrBounds(msgspec.Struct, frozen=True, kw_only=True):
    """Which faults may happen and how far the environment may go."""

    client_values: int = 2  # records the producer may append
    max_crashes: int = 2  # process crashes (a crashed replica keeps its log and may restart)
    max_elections: int = 1  # leader elections by the controller (each bumps the leader epoch)
    unflushed_loss: bool = False  # one power failure of every replica, losing unflushed records
