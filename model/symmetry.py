"""Renaming nodes: the same cluster state with node ids permuted, for symmetry reduction.

Voters are interchangeable among themselves, and so are observers: a state and its renamed
copy behave alike. Which message fields hold node ids comes from the schemas (Kafka's
"entityType": "brokerId"), so a new id field is covered once the schema marks it.
"""

from collections.abc import Mapping

import msgspec

from model import network
from model.cluster import ClusterState, History
from model.messages import NODE_ID_FIELDS, LeaderChangeMessage
from model.network import Envelope
from model.state import NodeState

replace = msgspec.structs.replace

# Id lists that are sets: the model writes them sorted, so a renamed copy is re-sorted.
SORTED_ID_LISTS = {(LeaderChangeMessage, "VotedIds"), (LeaderChangeMessage, "Voters"), (LeaderChangeMessage, "GrantingVoters")}


def rename_id(node_id: int, names: Mapping[int, int]) -> int:
    return names.get(node_id, node_id)  # -1 and unknown ids stay as they are


def rename_value(value: object, names: Mapping[int, int]) -> object:
    """Any message, record or nested struct with its node-id fields renamed."""
    if isinstance(value, tuple):
        return tuple(rename_value(item, names) for item in value)
    if not isinstance(value, msgspec.Struct):
        return value
    kind = type(value)
    id_fields = NODE_ID_FIELDS.get(kind, ())
    changes = {}
    for field in value.__struct_fields__:
        current = getattr(value, field)
        if field in id_fields:
            if isinstance(current, tuple):
                renamed = tuple(rename_id(i, names) for i in current)
                changes[field] = tuple(sorted(renamed)) if (kind, field) in SORTED_ID_LISTS else renamed
            else:
                changes[field] = rename_id(current, names)
        elif isinstance(current, (msgspec.Struct, tuple)):
            changes[field] = rename_value(current, names)
    return replace(value, **changes) if changes else value


def rename_node(state: NodeState, names: Mapping[int, int], position: Mapping[int, int]) -> NodeState:
    """A node's state with ids renamed; `position` maps an old replica index to its new one."""
    offsets = state.replica_offsets
    if offsets:
        moved = [0] * len(offsets)
        for old, offset in enumerate(offsets):
            moved[position[old]] = offset
        offsets = tuple(moved)
    return replace(
        state,
        leader_id=rename_id(state.leader_id, names),
        voted_id=rename_id(state.voted_id, names),
        log=rename_value(state.log, names),
        granted=frozenset(rename_id(i, names) for i in state.granted),
        refused=frozenset(rename_id(i, names) for i in state.refused),
        endorsed=frozenset(rename_id(i, names) for i in state.endorsed),
        fetched=frozenset(rename_id(i, names) for i in state.fetched),
        replica_offsets=offsets,
        fetching=rename_value(state.fetching, names),
        aside=None if state.aside is None else (rename_id(state.aside[0], names), rename_value(state.aside[1], names)),
        held=tuple(replace(rename_value(h, names), source=rename_id(h.source, names)) for h in state.held) if state.held else state.held,
    )


def rename_envelope(envelope: Envelope, names: Mapping[int, int]) -> Envelope:
    return Envelope(
        source=rename_id(envelope.source, names),
        destination=rename_id(envelope.destination, names),
        message=rename_value(envelope.message, names),
        request=rename_value(envelope.request, names),
    )


def rename_history(history: History, names: Mapping[int, int], position: Mapping[int, int]) -> History:
    epochs = [0] * len(history.max_epochs)
    for old, epoch in enumerate(history.max_epochs):
        epochs[position[old]] = epoch
    return replace(
        history,
        elected=frozenset((epoch, rename_id(leader, names)) for epoch, leader in history.elected),
        votes=frozenset((rename_id(v, names), epoch, rename_id(c, names)) for v, epoch, c in history.votes),
        committed=tuple((rename_value(record, names), epoch) for record, epoch in history.committed),
        max_epochs=tuple(epochs),
        **({} if history.cut is msgspec.UNSET else {"cut": frozenset((rename_id(a, names), rename_id(b, names)) for a, b in history.cut)}),
    )


def rename_cluster(state: ClusterState, ids: tuple[int, ...], names: Mapping[int, int]) -> ClusterState:
    """The whole cluster state renamed (node slots move with their ids); for tests and traces."""
    position = {i: ids.index(names.get(node_id, node_id)) for i, node_id in enumerate(ids)}
    nodes = [None] * len(ids)
    for old, node in enumerate(state.nodes):
        nodes[position[old]] = rename_node(node, names, position)
    bag = network.EMPTY
    for _key, envelope in state.network:
        bag = network.add(bag, rename_envelope(envelope, names))
    return ClusterState(nodes=tuple(nodes), network=bag, history=rename_history(state.history, names, position))
