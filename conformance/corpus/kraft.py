"""The KRaft side of corpus generation: a coverage-guided search of a cluster's states, probes
for inputs the cluster never sends, and random walks, all projected onto single nodes.

A breadth-first search of a configuration's cluster states notes, for every node step it
meets, the coverage cells it covers (conformance/corpus/cells.py); the first time a cell is met, the
cluster path that led there is the shortest, and it is projected onto the node that took the
step. Probes add inputs the cluster itself never sends (DescribeQuorum from an admin client,
OffsetsForLeaderEpoch, requests of another cluster, requests delivered to the wrong node) at
every node state met, and are kept when they reach a new cell.
"""

import msgspec

from adapters.node_models import MODELS
from conformance.corpus.cells import cells, note_cells
from conformance.corpus.reference import NodeInputs
from conformance.corpus.walks import path_to, random_walk
from conformance.explore.check import system_for
from conformance.explore.configs import CheckConfig
from conformance.explore.kraft_system import KraftSystem
from model.cluster import Cluster, Deliver, Drop, event_of
from model.events import Request, Response
from model.messages import BeginQuorumEpochRequest, DescribeQuorumRequest, EndQuorumEpochRequest, FetchRequest, OffsetsForLeaderEpochRequest, VoteRequest
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
    non-voter; naming another leader; naming leader -1, or a Fetch with a last epoch above its
    own (COMMON-4); an EndQuorumEpoch that does not prefer the receiver. Never one naming the
    receiver as its sender.
    A response to the node's own request: the answer of a node of another cluster.
    """
    message = envelope.message
    if envelope.request is not None:
        if envelope.destination != me:
            return []
        foreign = type(message)(ErrorCode=errors.INCONSISTENT_CLUSTER_ID)
        return [Response(source=envelope.source, message=foreign, request=envelope.request)]
    if envelope.source == me:
        return []
    replace = msgspec.structs.replace
    variants = [(envelope.source, message)] if envelope.destination != me else []
    if getattr(message, "ClusterId", None) is not None:
        variants.append((envelope.source, replace(message, ClusterId=OTHER_CLUSTER)))
    leader_field = "CandidateId" if type(message) is VoteRequest else ("LeaderId" if type(message) in (BeginQuorumEpochRequest, EndQuorumEpochRequest) else None)
    if leader_field:
        for other in (tuple(o for o in observers if o != me)[:1] + tuple(v for v in voters if v not in (me, getattr(message, leader_field)))[:1]):
            variants.append((other, replace(message, **{leader_field: other})))
        variants.append((envelope.source, replace(message, **{leader_field: -1})))
    if type(message) is FetchRequest:
        variants.append((envelope.source, replace(message, LastFetchedEpoch=message.CurrentLeaderEpoch + 1)))
    if type(message) is EndQuorumEpochRequest and me in message.PreferredSuccessors:
        variants.append((envelope.source, replace(message, PreferredSuccessors=tuple(v for v in message.PreferredSuccessors if v != me))))
    return [Request(source=source, message=m) for source, m in variants]


# -- the coverage-guided search -------------------------------------------------------------
class Found(msgspec.Struct, frozen=True):
    """Where a cell was first met: the cluster state's fingerprint and the step taken from it."""

    state_fp: int
    key: tuple  # an explorer action key, or ("probe", position, event)


def search(system: KraftSystem, max_states: int) -> tuple[dict[str, Found], dict[int, tuple[int, tuple]], bool]:
    """Breadth-first, noting the first (shallowest) step reaching each cell.

    Returns the cells, each state's (parent fingerprint, action key), and whether the bounded
    state space was exhausted.
    """
    first: dict[str, Found] = {}
    parents: dict[int, tuple[int, tuple]] = {}
    step_cells: dict[tuple, tuple[str, ...]] = {}
    probed: set[tuple] = set()  # (position, node) and (position, node, message) already probed
    cluster = system.cluster
    frontier = []
    for state in system.initial_states():
        fp = system.fingerprint(state)
        parents[fp] = (fp, ())
        frontier.append((fp, state))

    while frontier and len(parents) < max_states:
        level = []
        for fp, state in frontier:
            for position in range(system.size):
                node_id = state[position]
                node = system.nodes.values[node_id]
                config = cluster.node_configs[position]
                candidates = []
                if (position, node_id) not in probed:
                    probed.add((position, node_id))
                    candidates = admin_probes(system, position, node)
                for message_id in set(state[system.size + 1 :]):
                    if (position, node_id, message_id) not in probed:
                        probed.add((position, node_id, message_id))
                        envelope = system.messages.values[message_id]
                        candidates += message_probes(envelope, cluster.ids[position], cluster.config.voters, cluster.config.observers)
                for event in candidates:
                    note_cells(first, cells(KRAFT, config, node, event), Found(fp, ("probe", position, event)))
            for key, successor in system.successors(state):
                if key[0] != "drop":
                    action = system.action(key)
                    node, event = event_of(action)
                    position = cluster.index[node]
                    memo = (position, state[position], key)
                    found = step_cells.get(memo)
                    if found is None:
                        before = system.nodes.values[state[position]]
                        found = step_cells[memo] = cells(KRAFT, cluster.node_configs[position], before, event)
                    note_cells(first, found, Found(fp, key))
                successor_fp = system.fingerprint(successor)
                if successor_fp not in parents:
                    parents[successor_fp] = (fp, key)
                    level.append((successor_fp, successor))
        frontier = level
    return first, parents, not frontier


def node_inputs(system: KraftSystem, parents: dict[int, tuple[int, tuple]], found: Found) -> NodeInputs:
    """The node that took a cell's step, and its inputs along the cluster path there."""
    keys = path_to(parents, found.state_fp)
    if found.key[0] == "probe":
        _, position, last = found.key
        node = system.cluster.ids[position]
    else:
        node, last = event_of(system.action(found.key))
    events = []
    for key in keys:
        action = system.action(key)
        if type(action) is not Drop:
            target, event = event_of(action)
            if target == node:
                events.append(event)
    return node, events + [last]


def search_config(config: CheckConfig, max_states: int, known: set[str]) -> tuple[dict[str, NodeInputs], int, bool, int]:
    """The configuration's search: each cell not in `known` with its node's inputs, the states
    visited, whether the bounded space was exhausted, and the cells met."""
    system = system_for(config)
    first, parents, complete = search(system, max_states)
    paths = {cell: node_inputs(system, parents, first[cell]) for cell in sorted(set(first) - known)}
    return paths, len(parents), complete, len(first)


def walk(config: CheckConfig, seed: int, steps: int) -> dict[int, list[Input]]:
    """A seeded random cluster run, projected onto each node."""
    cluster = Cluster(config.cluster(), config.faults())

    def apply(state, action):
        after, _ = cluster.apply(state, action)
        return after, ([] if type(action) is Drop else [event_of(action)])

    return random_walk(cluster.initial(), cluster.enabled, apply, cluster.ids, seed, steps, lambda a: type(a) is Deliver and not a.duplicate)
