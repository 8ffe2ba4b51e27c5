"""The controller: leader election from the ISR, and the conditional ISR write.

Its record (LeaderAndIsr, the design's LeaderAndISR path) is the source of truth; after an
election it tells every live replica (LeaderAndISRCommand), which model.isr.cluster delivers
in the same step. It replaces a leader only once that leader is down.
"""

import msgspec

from model.isr.events import AlterIsr
from model.isr.state import LeaderAndIsr


def candidates(record: LeaderAndIsr, up: frozenset[int]) -> tuple[int, ...]:
    """ISR-ELECT-1: when the recorded leader is down, the live members of the ISR (none: offline)."""
    if record.Leader in up:
        return ()
    return tuple(r for r in record.Isr if r in up)


def elect(record: LeaderAndIsr, up: frozenset[int], leader: int) -> tuple[LeaderAndIsr, tuple[str, ...]]:
    """ISR-ELECT-1: the new leader, the next leader epoch, the ISR cut to its live members."""
    if leader not in candidates(record, up):
        raise ValueError(f"replica {leader} is not electable: the ISR is {list(record.Isr)}, the live replicas {sorted(up)}")
    return LeaderAndIsr(Leader=leader, LeaderEpoch=record.LeaderEpoch + 1, Isr=tuple(r for r in record.Isr if r in up)), ("ISR-ELECT-1",)


def alter_isr(record: LeaderAndIsr, leader: int, change: AlterIsr) -> tuple[LeaderAndIsr, tuple[str, ...]]:
    """ISR-ALTER-1: a leader's ISR write succeeds only while the record still names it in that epoch."""
    if record.Leader != leader or record.LeaderEpoch != change.LeaderEpoch:
        return record, ("ISR-ALTER-1",)
    return msgspec.structs.replace(record, Isr=change.Isr), ("ISR-ALTER-1",)
