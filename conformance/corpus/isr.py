"""The ISR side of corpus generation: a coverage-guided search of a partition's states, probes
for requests and answers the partition never sends, and random walks, projected onto replicas.

As for KRaft (conformance/corpus/kraft.py), a breadth-first search notes the first (shortest)
path to every coverage cell and projects it onto the replica that took the step; a controller
election or a power failure steps every replica it reaches, and each of those steps counts.
Probes, at every replica state met: OffsetsForLeaderEpoch and Fetch requests around the
replica's epoch and log end (fenced, unknown epoch, not the leader, out of range), and error
answers to the replica's own requests in flight.
"""

from collections.abc import Callable, Iterator

from adapters.node_models import MODELS
from conformance.corpus.cells import cells
from conformance.corpus.kraft import offsets_probes
from conformance.corpus.reference import NodeInputs
from conformance.corpus.search import ProbeKey, distinct_events, probe_key, successor
from conformance.corpus.walks import random_walk
from conformance.explore.check import system_for
from conformance.explore.configs import IsrCheckConfig
from conformance.explore.interned import stable_fingerprint
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


class IsrCoverage:
    """A configuration's partition for the corpus search: its probes, its places, its paths."""

    def __init__(self, config: IsrCheckConfig) -> None:
        self.system = system_for(config)
        self.partition = self.system.partition
        self._cells: dict[tuple, tuple[str, ...]] = {}

    def _step_cells(self, position: int, before: ReplicaState, event: Input) -> tuple[str, ...]:
        key = (position, before, event)
        found = self._cells.get(key)
        if found is None:
            found = self._cells[key] = cells(ISR, self.partition.replica_configs[position], before, event)
        return found

    def probe_keys(self, state: PartitionState) -> list[tuple[ProbeKey, int, int]]:
        messages = [stable_fingerprint(envelope) for envelope in network.envelopes(state.network)]
        keys = []
        for position, current in enumerate(state.replicas):
            replica = stable_fingerprint(current)
            keys.append((probe_key(position, replica), position, -1))
            keys += [(probe_key(position, replica, message), position, index) for index, message in enumerate(messages)]
        return keys

    def probes(self, state: PartitionState, position: int, message_index: int) -> list[Input]:
        """The replica's own probes (message index -1), or answers to one of its requests in flight."""
        node = self.partition.ids[position]
        if message_index < 0:
            return request_probes(node, self.partition.ids, state.replicas[position])
        return answer_probes(network.envelopes(state.network)[message_index], node)

    def places(self, state: PartitionState, handles: list, fresh: Callable[[ProbeKey], bool]) -> Iterator[tuple[tuple, tuple[str, ...]]]:
        by_position: dict[int, list[tuple[tuple, Input]]] = {}
        for key, position, message_index in self.probe_keys(state):
            if fresh(key):
                by_position.setdefault(position, []).extend(((0, position, message_index, j), event) for j, event in enumerate(self.probes(state, position, message_index)))
        for position, probes in by_position.items():
            for within, event in distinct_events(probes):
                yield within, self._step_cells(position, state.replicas[position], event)
        for index, (action, _successor) in enumerate(handles):
            stepped: dict[int, tuple[str, ...]] = {}  # by replica, in the order the action steps them: a replica stepped twice is one place
            for node, event in self.partition.apply(state, action).inputs:
                position = self.partition.index[node]
                stepped[node] = stepped.get(node, ()) + self._step_cells(position, state.replicas[position], event)
            for order, found in enumerate(stepped.values()):
                yield (1, index, order), tuple(dict.fromkeys(found))

    def node_inputs(self, keys: list, state: PartitionState, within: tuple) -> NodeInputs:
        partition = self.partition
        if within[0] == 0:
            _, position, message_index, j = within
            node, actions, last = partition.ids[position], keys, [self.probes(state, position, message_index)[j]]
        else:
            _, index, order = within
            action = successor(self.system, state, index)[0]
            node = list(dict.fromkeys(target for target, _event in partition.apply(state, action).inputs))[order]
            actions, last = keys + [action], []
        state = partition.initial()
        events = []
        for action in actions:
            applied = partition.apply(state, action)
            events += [event for target, event in applied.inputs if target == node]
            state = applied.state
        return node, events + last


def walk(config: IsrCheckConfig, seed: int, steps: int) -> dict[int, list[Input]]:
    """A seeded random run of the partition, projected onto each replica."""
    partition = Partition(config.partition(), config.bounds())

    def apply(state: PartitionState, action: Action) -> tuple[PartitionState, tuple]:
        applied = partition.apply(state, action)
        return applied.state, applied.inputs

    return random_walk(partition.initial(), partition.enabled, apply, partition.ids, seed, steps, lambda a: type(a) is Deliver)
