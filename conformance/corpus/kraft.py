"""The KRaft side of corpus generation: a coverage-guided search of a cluster's states, probes
for inputs the cluster never sends, and random walks, all projected onto single nodes.

The breadth-first search of a configuration's cluster states (conformance/corpus/search.py)
notes, for every node step it meets, the coverage cells it covers (conformance/corpus/cells.py);
the first time a cell is met, the cluster path that led there is the shortest, and it is
projected onto the node that took the step. Probes add inputs the cluster itself never sends (DescribeQuorum from an admin client,
OffsetsForLeaderEpoch, requests of another cluster, requests delivered to the wrong node) at
every node state met, and are kept when they reach a new cell.
"""

from collections.abc import Callable, Iterator

import msgspec

from adapters.node_models import MODELS
from conformance.corpus.cells import cells
from conformance.corpus.reference import NodeInputs
from conformance.corpus.search import ProbeKey, distinct_events, probe_key, successor
from conformance.corpus.walks import random_walk
from conformance.explore.check import system_for
from conformance.explore.configs import CheckConfig
from conformance.explore.kraft_system import KraftSystem
from model.cluster import Cluster, Deliver, Drop, event_of
from model.events import Request, Response
from model.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    VoteRequest,
    VoteResponse,
)
from model.network import Envelope
from model.state import NodeState
from spec import errors
from spec.trace import Input, TraceCluster

KRAFT = MODELS["kraft"]
OTHER_CLUSTER = "other-cluster"
ADMIN_CLIENT = -1  # the source of DescribeQuorum requests: an admin client, not a replica


def setting(config: CheckConfig) -> TraceCluster:
    chosen = config.cluster()
    return TraceCluster(
        voters=chosen.voters, observers=chosen.observers, cluster_id=chosen.cluster_id, profile=chosen.profile, fetch_max_records=chosen.fetch_max_records
    )


def offsets_probes(peer: int, epoch: int, last_epoch: int) -> list[Input]:
    """OffsetsForLeaderEpoch from a peer around the node's epoch: fenced, current, unknown,
    unchecked (-1), asking for the first epoch, the current one and the last one in the log."""
    return [
        Request(source=peer, message=OffsetsForLeaderEpochRequest(ReplicaId=peer, CurrentLeaderEpoch=current, LeaderEpoch=asked))
        for current in sorted({-1, max(epoch - 1, 0), epoch, epoch + 1})
        for asked in sorted({0, epoch, last_epoch})
    ]


def admin_probes(system: KraftSystem, position: int, node: NodeState) -> list[Input]:
    """DescribeQuorum from an admin client; OffsetsForLeaderEpoch around the node's epoch."""
    me = system.cluster.ids[position]
    peer = next((n for n in system.cluster.ids if n != me), me)
    describe: list[Input] = [Request(source=ADMIN_CLIENT, message=DescribeQuorumRequest())]
    return describe + offsets_probes(peer, node.epoch, node.log[-1].Epoch if node.log else 0)


def message_probes(envelope: Envelope, me: int, voters: tuple[int, ...], observers: tuple[int, ...]) -> list[Input]:
    """Variants of a message in flight that the cluster itself never produces.

    A request: delivered to a node it was not sent to; as another cluster's; as sent by a
    non-voter; naming another leader, or the receiver itself; naming leader -1, or a Fetch with
    a last epoch above its own (COMMON-4); an EndQuorumEpoch that does not prefer the receiver.
    Never one naming the receiver as its sender.
    A response to the node's own request: the answer of a node of another cluster; the request
    refused INVALID_REQUEST; a Fetch's answer with a high watermark of 0.
    """
    message = envelope.message
    replace = msgspec.structs.replace
    if envelope.request is not None:
        if envelope.destination != me:
            return []
        answers = [type(message)(ErrorCode=errors.INCONSISTENT_CLUSTER_ID), replace(message, PartitionErrorCode=errors.INVALID_REQUEST)]
        if type(message) is VoteResponse:
            answers[1] = replace(answers[1], VoteGranted=False)
        if type(message) is FetchResponse and message.HighWatermark > 0:
            answers.append(replace(message, HighWatermark=0))
        return [Response(source=envelope.source, message=answer, request=envelope.request) for answer in answers]
    if envelope.source == me:
        return []
    variants = [(envelope.source, message)] if envelope.destination != me else []
    if getattr(message, "ClusterId", None) is not None:
        variants.append((envelope.source, replace(message, ClusterId=OTHER_CLUSTER)))
    leader_field = "CandidateId" if type(message) is VoteRequest else ("LeaderId" if type(message) in (BeginQuorumEpochRequest, EndQuorumEpochRequest) else None)
    if leader_field:
        for other in (tuple(o for o in observers if o != me)[:1] + tuple(v for v in voters if v not in (me, getattr(message, leader_field)))[:1]):
            variants.append((other, replace(message, **{leader_field: other})))
        variants.append((envelope.source, replace(message, **{leader_field: -1})))
    if type(message) in (BeginQuorumEpochRequest, EndQuorumEpochRequest):
        variants.append((envelope.source, replace(message, LeaderId=me)))
    if type(message) is FetchRequest:
        variants.append((envelope.source, replace(message, LastFetchedEpoch=message.CurrentLeaderEpoch + 1)))
    if type(message) is EndQuorumEpochRequest and me in message.PreferredSuccessors:
        variants.append((envelope.source, replace(message, PreferredSuccessors=tuple(v for v in message.PreferredSuccessors if v != me))))
    return [Request(source=source, message=m) for source, m in variants]


# -- the coverage-guided search (conformance/corpus/search.py) -----------------------------
class KraftCoverage:
    """A configuration's cluster for the corpus search: its probes, its places, its paths."""

    def __init__(self, config: CheckConfig) -> None:
        self.system = system_for(config)
        # Cells are judged as the traces will be, under the profile alone: the configuration's own
        # choices (ClusterConfig.choices) only steer which paths the search takes.
        judged = msgspec.structs.replace(self.system.cluster.config, choices=())
        self.judged = tuple(judged.node(n) for n in self.system.cluster.ids)
        self._step_cells: dict[tuple, tuple[str, ...]] = {}

    def _messages(self, state: tuple[int, ...]) -> list[int]:
        """The distinct messages in flight, in the state's (content) order."""
        return list(dict.fromkeys(state[self.system.size + 1 :]))

    def probe_keys(self, state: tuple[int, ...]) -> list[tuple[ProbeKey, int, int]]:
        node_fps, message_fps = self.system.nodes.fps, self.system.messages.fps
        messages = self._messages(state)
        keys = []
        for position in range(self.system.size):
            node = node_fps[state[position]]
            keys.append((probe_key(position, node), position, -1))
            keys += [(probe_key(position, node, message_fps[m]), position, index) for index, m in enumerate(messages)]
        return keys

    def probes(self, state: tuple[int, ...], position: int, message_index: int) -> list[Input]:
        """The node's own probes (message index -1), or those of one message in flight."""
        system = self.system
        cluster = system.cluster
        if message_index < 0:
            return admin_probes(system, position, system.nodes.values[state[position]])
        envelope = system.messages.values[self._messages(state)[message_index]]
        return message_probes(envelope, cluster.ids[position], cluster.config.voters, cluster.config.observers)

    def places(self, state: tuple[int, ...], handles: list, fresh: Callable[[ProbeKey], bool]) -> Iterator[tuple[tuple, tuple[str, ...]]]:
        system = self.system
        cluster = system.cluster
        by_position: dict[int, list[tuple[tuple, Input]]] = {}
        for key, position, message_index in self.probe_keys(state):
            if fresh(key):
                by_position.setdefault(position, []).extend(((0, position, message_index, j), event) for j, event in enumerate(self.probes(state, position, message_index)))
        for position, probes in by_position.items():
            node = system.nodes.values[state[position]]
            for within, event in distinct_events(probes):
                yield within, cells(KRAFT, self.judged[position], node, event)
        for index, handle in enumerate(handles):
            key = system.key(handle)
            if key[0] not in ("drop", "link"):
                node, event = event_of(system.action(key))
                position = cluster.index[node]
                memo = (position, state[position], key)
                found = self._step_cells.get(memo)
                if found is None:
                    found = self._step_cells[memo] = cells(KRAFT, self.judged[position], system.nodes.values[state[position]], event)
                yield (1, index), found

    def node_inputs(self, keys: list, state: tuple[int, ...], within: tuple) -> NodeInputs:
        system = self.system
        if within[0] == 0:
            _, position, message_index, j = within
            node, last = system.cluster.ids[position], self.probes(state, position, message_index)[j]
        else:
            key = successor(system, state, within[1])[0]
            node, last = event_of(system.action(key))
        events = []
        for key in keys:
            action = system.action(key)
            if type(action) is not Drop:
                target, event = event_of(action)
                if target == node:
                    events.append(event)
        return node, events + [last]


def walk(config: CheckConfig, seed: int, steps: int) -> dict[int, list[Input]]:
    """A seeded random cluster run, projected onto each node."""
    cluster = Cluster(config.cluster(), config.faults())

    def apply(state, action):
        after, _ = cluster.apply(state, action)
        return after, ([] if type(action) is Drop else [event_of(action)])

    return random_walk(
        cluster.initial(), cluster.enabled, apply, cluster.ids, seed, steps, lambda a: type(a) is Deliver and not a.duplicate, config.corpus_walk_deliveries
    )
