"""The adapter contract: how kraftcheck drives one node of an implementation through a trace.

An adapter wraps one node of the implementation under test. For each trace kraftcheck calls
`start` once (after which `lacks` holds the optional capabilities the node declared it does
not have), then `step` once per input, and `observe` after each step when the trace
records the node's state; `close` always ends the trace, whatever happened. Every call is
synchronous: `step` returns everything the node did in answer to that input (see
spec.trace.Outputs). Inputs are model events (model/events.py), messages use the
field names of the Kafka schemas in spec/schemas.

An implementation in another language plugs in through `subprocess:COMMAND`, the JSON-lines
protocol of spec/subprocess-protocol.md; an implementation in Python may implement this
Protocol directly.
"""

from typing import Protocol

from model.events import Event
from spec.trace import Header, Observed, Outputs


class AdapterError(Exception):
    """The adapter failed (crashed, timed out, answered something unreadable): the trace fails with this reason."""


class CapabilityLacking(AdapterError):
    """The node declines one input for want of an optional capability (spec.trace.CAPABILITIES)
    that it has in some states only: a timer its clock cannot fire before a shorter one of its
    own. The trace is not applicable from that step on, not failed."""

    def __init__(self, capability: str, reason: str) -> None:
        super().__init__(reason)
        self.capability = capability


class Adapter(Protocol):
    """An adapter may also have `timing` (a model.config.Timing, set by start): the timeouts the
    node runs with, from which replay computes the durations of the timers it reports
    (Outputs.timers); without one, the model's defaults."""

    name: str
    lacks: frozenset[str]  # optional capabilities (spec.trace.CAPABILITIES) the node declared at start it does not have


    def start(self, header: Header) -> None:
        """Bring up a node as the trace header says: cluster, node id, persisted state."""

    def step(self, event: Event) -> Outputs:
        """Deliver one input and return what the node did in answer to it."""

    def observe(self) -> Observed | None:
        """The node's observable state, or None if this adapter cannot observe it."""

    def close(self) -> None:
        """Release the node (and any process behind it). May raise AdapterError if ending the
        trace fails (a subprocess's reset): a trace that conformed so far fails with it."""
