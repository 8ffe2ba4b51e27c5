"""The ISR side of corpus generation: a coverage-guided search of a partition's states, probes
for requests and answers the partition never sends, and random walks, projected onto replicas.

As for KRaft (conformance/corpus/kraft.py), a breadth-first search notes the first (shortest)
path to every coverage cell and projects it onto the replica that took the step; a controller
election or a power failure steps every replica it reaches, and each of those steps counts.
Probes, at every replica state met: OffsetsForLeaderEpoch and Fetch requests around the
replica's epoch and log end (fenced, unknown epoch, not the leader, out of range), and error
answers to the replica's own requests in flight.
"""

import msgspec

from adapters.node_models import MODELS
from conformance.corpus.cells import cells, note_cells
from conformance.corpus.kraft import offsets_probes
from conformance.corpus.reference import NodeInputs
from conformance.corpus.walks import path_to, random_walk
from conformance.explore.configs import IsrCheckConfig
from conformance.explore.kraft_system import stable_fingerprint
from model import log as logs
from model import network
from model.cluster import Deliver
from model.events import Request, Response
from model.isr.cluster import Action, Partition
from model.isr.state import PartitionState, ReplicaState
from model.messages import FetchRequest, FetchResponse, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse
from model.network import Envelope
from spec import errors
from spec.trace import Input, TracePartition

ISR = MODELS["isr"]
ANSWER_ERRORS = {
    FetchRequest: (errors.FENCED_LEADER_EPOCH, errors.NOT_LEADER_OR_FOLLOWER, errors.OFFSET_OUT_OF_RANGE),
    OffsetsForLeaderEpochRequest: (errors.FENCED_LEADER_EPOCH, errors.NOT_LEADER_OR_FOLLOWER),
}


def setting(config: IsrCheckConfig) -> TracePartition:
    partition = config.partition()
    return TracePartition(replicas=partition.replicas, min_isr=partition.min_isr, truncation=partition.truncation)


def request_probes(me: int, ids: tuple[int, ...], state: ReplicaState) -> list[Input]:
    """OffsetsForLeaderEpoch and Fetch from a peer around the replica's epoch and log end."""
    peer = next((r for r in ids if r != me), me)
    fetches = [
        Request(source=peer, message=FetchRequest(ReplicaId=peer, CurrentLeaderEpoch=current, FetchOffset=offset))
        for current in sorted({max(state.epoch - 1, 0), state.epoch, state.epoch + 1})
        for offset in (len(state.log), len(state.log) + 1)
    ]
    return offsets_probes(peer, state.epoch, logs.last_epoch(state.log)) + fetches


def answer_probes(envelope: Envelope, me: int) -> list[Input]:
    """Error answers to a request the replica sent and that is still in flight."""
    if envelope.source != me or envelope.request is not None:
        return []
    kind = type(envelope.message)
    answer = FetchResponse if kind is FetchRequest else OffsetsForLeaderEpochResponse
    return [Response(source=envelope.destination, message=answer(ErrorCode=code), request=envelope.message) for code in ANSWER_ERRORS[kind]]


class Found(msgspec.Struct, frozen=True):
    """Where a cell was first met: the state's fingerprint, the replica, and the action taken
    from that state (or the probe delivered to the replica there)."""

    state_fp: int
    node: int
    action: Action | None = None
    probe: Input | None = None


def search(partition: Partition, max_states: int) -> tuple[dict[str, Found], dict[int, tuple[int, Action | None]], bool]:
    """Breadth-first, noting the first (shallowest) replica step reaching each cell.

    Returns the cells, each state's (parent fingerprint, action), and whether the bounded state
    space was exhausted.
    """
    first: dict[str, Found] = {}
    initial = partition.initial()
    root = stable_fingerprint(initial)
    parents: dict[int, tuple[int, Action | None]] = {root: (root, None)}
    memo: dict[tuple, tuple[str, ...]] = {}
    probed: set[tuple] = set()
    frontier: list[tuple[int, PartitionState]] = [(root, initial)]

    def step_cells(position: int, before: ReplicaState, event: Input) -> tuple[str, ...]:
        key = (position, before, event)
        found = memo.get(key)
        if found is None:
            found = memo[key] = cells(ISR, partition.replica_configs[position], before, event)
        return found

    while frontier and len(parents) < max_states:
        level = []
        for fp, state in frontier:
            for position, (node, current) in enumerate(zip(partition.ids, state.replicas)):
                candidates = []
                if (position, current) not in probed:
                    probed.add((position, current))
                    candidates = request_probes(node, partition.ids, current)
                for envelope in network.envelopes(state.network):
                    if (position, current, envelope) not in probed:
                        probed.add((position, current, envelope))
                        candidates += answer_probes(envelope, node)
                for event in candidates:
                    note_cells(first, step_cells(position, current, event), Found(fp, node, probe=event))
            for action in partition.enabled(state):
                applied = partition.apply(state, action)
                for node, event in applied.inputs:
                    position = partition.index[node]
                    note_cells(first, step_cells(position, state.replicas[position], event), Found(fp, node, action=action))
                successor_fp = stable_fingerprint(applied.state)
                if successor_fp not in parents:
                    parents[successor_fp] = (fp, action)
                    level.append((successor_fp, applied.state))
        frontier = level
    return first, parents, not frontier


def node_inputs(partition: Partition, parents: dict[int, tuple[int, Action | None]], found: Found) -> NodeInputs:
    """The replica that took a cell's step, and its inputs along the partition's path there."""
    actions = path_to(parents, found.state_fp)
    if found.action is not None:
        actions.append(found.action)
    state = partition.initial()
    events = []
    for action in actions:
        applied = partition.apply(state, action)
        events += [event for node, event in applied.inputs if node == found.node]
        state = applied.state
    return found.node, events + ([found.probe] if found.probe is not None else [])


def search_config(config: IsrCheckConfig, max_states: int, known: set[str]) -> tuple[dict[str, NodeInputs], int, bool, int]:
    """The configuration's search: each cell not in `known` with its replica's inputs, the
    states visited, whether the bounded space was exhausted, and the cells met."""
    partition = Partition(config.partition(), config.bounds())
    first, parents, complete = search(partition, max_states)
    paths = {cell: node_inputs(partition, parents, first[cell]) for cell in sorted(set(first) - known)}
    return paths, len(parents), complete, len(first)


def walk(config: IsrCheckConfig, seed: int, steps: int) -> dict[int, list[Input]]:
    """A seeded random run of the partition, projected onto each replica."""
    partition = Partition(config.partition(), config.bounds())

    def apply(state: PartitionState, action: Action) -> tuple[PartitionState, tuple]:
        applied = partition.apply(state, action)
        return applied.state, applied.inputs

    return random_walk(partition.initial(), partition.enabled, apply, partition.ids, seed, steps, lambda a: type(a) is Deliver)
