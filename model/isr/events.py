"""What reaches an ISR replica besides requests, responses, producer appends and crashes
(model.events), and the ISR write a leader asks of the controller.

Events carry short tags, as model.events' do, because conformance traces store them as they are.
"""

import msgspec

from model.isr.state import LeaderAndIsr


class FetchNext(msgspec.Struct, frozen=True, kw_only=True, tag="fetch_next"):
    """The follower's fetcher thread sends its next Fetch."""


class ShrinkIsr(msgspec.Struct, frozen=True, kw_only=True, tag="shrink_isr"):
    """The leader's lag check drops a follower from the ISR (it did not keep up in time)."""

    replica: int


class Startup(msgspec.Struct, frozen=True, kw_only=True, tag="startup"):
    """A down replica starts; it reads the partition's LeaderAndISR record (design E)."""

    partition: LeaderAndIsr


class PowerLoss(msgspec.Struct, frozen=True, kw_only=True, tag="power_loss"):
    """The machine loses power: the replica goes down keeping only the first `keep` records,
    those the operating system had written to disk."""

    keep: int


class AlterIsr(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Output of a leader: write this ISR to the controller's record if it is still its epoch's."""

    LeaderEpoch: int
    Isr: tuple[int, ...]


IsrEvent = FetchNext | ShrinkIsr | Startup | PowerLoss | LeaderAndIsr
