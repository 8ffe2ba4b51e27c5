"""The ISR partition (model.isr) as an explorable system, and its counterexamples in the KIP's step form.

States are model.isr's PartitionState structs, fingerprinted by their deterministic encoding.
The state spaces of the named ISR configurations are small, so there is no interning and no
symmetry reduction, and they run on the in-process engine.
"""

from collections.abc import Iterator

import msgspec

from conformance.explore.engine import Violation
from conformance.explore.interned import stable_fingerprint
from conformance.explore.packed import Packed
from conformance.text import wrapped_table
from model.cluster import Append, CrashNode, Deliver, RestartNode
from model.isr import properties
from model.isr.cluster import Action, Elect, Partition, Shrink, StartFetch
from model.isr.config import IsrBounds, PartitionConfig
from model.isr.state import PartitionState, ReplicaState, Role, log_text
from model.messages import FetchRequest, FetchResponse, OffsetsForLeaderEpochRequest
from spec import errors

_encode = msgspec.msgpack.Encoder(order="deterministic").encode
_decode = msgspec.msgpack.Decoder(PartitionState).decode


class IsrSystem:
    """A partition under exploration bounds."""

    symmetry = False

    def __init__(self, config: PartitionConfig, bounds: IsrBounds) -> None:
        self.partition = Partition(config, bounds)

    def property_ids(self) -> tuple[str, ...]:
        return tuple(properties.PROPERTIES)

    def initial_states(self) -> list[PartitionState]:
        return [self.partition.initial()]

    def successors(self, state: PartitionState) -> Iterator[tuple[Action, PartitionState]]:
        for action in self.partition.enabled(state):
            yield action, self.partition.apply(state, action).state

    def expand(self, state: PartitionState) -> tuple[list[int], list[tuple[Action, PartitionState]]]:
        handles = list(self.successors(state))
        return [stable_fingerprint(successor) for _action, successor in handles], handles

    def reach(self, handle: tuple[Action, PartitionState]) -> PartitionState:
        return handle[1]  # expand() gives the states themselves, with their actions

    def key(self, handle: tuple[Action, PartitionState]) -> Action:
        return handle[0]

    def fingerprint(self, state: PartitionState) -> int:
        return stable_fingerprint(state)

    def pack(self, states: list[PartitionState]) -> Packed:
        return Packed.of(list(map(_encode, states)))

    def parts(self, packed: Packed, known: set[tuple[int, int]]) -> list:
        return []  # a packed state is self-contained

    def learn(self, fp: int, kind: int, encoded: bytes) -> None:
        raise AssertionError("an ISR state has no parts to learn")

    def unpack(self, packed: Packed) -> list[PartitionState]:
        return list(map(_decode, packed.rows()))

    def violations(self, state: PartitionState) -> tuple[Violation, ...]:
        return tuple(Violation(v.rule, v.detail) for v in properties.violations(self.partition, state))

    def steps(self, path: list) -> list[dict]:
        """A counterexample as the KIP draws it: after each action, every replica's log and high watermark."""
        steps = [{"step": 0, "action": "initial state", **self.snapshot(path[0][1]), "rules": []}]
        previous = path[0][1]
        for number, (action, state) in enumerate(path[1:], start=1):
            applied = self.partition.apply(previous, action)
            steps.append(
                {
                    "step": number,
                    "action": action_text(action, self.partition.ids),
                    **self.snapshot(state),
                    "rules": sorted(set(applied.rules)),
                    "encoded_action": msgspec.to_builtins(action),
                }
            )
            previous = state
        return steps

    def snapshot(self, state: PartitionState) -> dict:
        recorded = state.controller
        return {
            "replicas": {f"r{r}": replica_text(s) for r, s in zip(self.partition.ids, state.replicas)},
            "controller": f"r{recorded.Leader} e{recorded.LeaderEpoch} ISR {','.join(map(str, recorded.Isr))}",
            "acknowledged": log_text(state.history.acked),
        }


def replica_text(replica: ReplicaState) -> str:
    """`leader e1: 0:0:v1 1:1:v2, hw 2` (offset:epoch:value per record)."""
    if replica.role == Role.DOWN:
        role = "down"
    elif replica.role == Role.LEADER:
        role = f"leader e{replica.epoch}"
    else:
        role = f"follower e{replica.epoch}" + (" truncating" if replica.truncating else "")
    return f"{role}: {log_text(replica.log)}, hw {replica.high_watermark}"


def message_text(message: object) -> str:
    kind = type(message)
    if kind is FetchRequest:
        return f"Fetch(offset {message.FetchOffset}, epoch {message.CurrentLeaderEpoch})"
    if kind is OffsetsForLeaderEpochRequest:
        return f"OffsetsForLeaderEpoch(for epoch {message.LeaderEpoch}, epoch {message.CurrentLeaderEpoch})"
    if message.ErrorCode:
        return f"{kind.__name__.removesuffix('Response')} answer {errors.name_of(message.ErrorCode)}"
    if kind is FetchResponse:
        return f"Fetch answer (records {log_text(message.Records)}, hw {message.HighWatermark})"
    return f"OffsetsForLeaderEpoch answer (epoch {message.LeaderEpoch}, end offset {message.EndOffset})"


def action_text(action: Action, ids: tuple[int, ...]) -> str:
    kind = type(action)
    if kind is Deliver:
        e = action.envelope
        return f"r{e.destination} gets {message_text(e.message)} from r{e.source}"
    if kind is Append:
        return f"producer appends v{action.value} at r{action.node}"
    if kind is StartFetch:
        return f"r{action.node} fetches"
    if kind is Shrink:
        return f"r{action.node} drops r{action.replica} from the ISR"
    if kind is CrashNode:
        return f"r{action.node} crashes"
    if kind is RestartNode:
        return f"r{action.node} restarts"
    if kind is Elect:
        return f"controller elects r{action.node}"
    kept = ", ".join(f"r{r} keeps {k}" for r, k in zip(ids, action.keep))
    return f"power failure ({kept} records)"


def steps_table(steps: list[dict]) -> str:
    names = list(steps[0]["replicas"])
    rows = [(s["step"], s["action"], *s["replicas"].values(), s["controller"], s["acknowledged"], " ".join(s["rules"])) for s in steps]
    headers = ("step", "action", *names, "controller", "acked", "rules")
    return wrapped_table(rows, headers, [None, 34, *([30] * len(names)), None, 16, 30])
