"""Helpers for rule tests: build a node's config and state tersely, step it, read its outputs."""

import msgspec
import pytest

from model import node
from model.config import NodeConfig, Options, Timing
from model.events import Request, Response, Send, Timer, TimerKind
from model.messages import FetchRequest, LeaderChangeMessage, Record
from model.state import NodeState, Role
from model.transitions import Transition

CLUSTER_ID = "kraft-cluster"


def config(node_id: int = 1, voters=(1, 2, 3), observers=(), cluster_id: str | None = CLUSTER_ID, **options) -> NodeConfig:
    """A node's config; keyword options go to model.config.Options (e.g. diverging_epoch="below")."""
    return NodeConfig(
        node_id=node_id,
        voters=tuple(voters),
        observers=tuple(observers),
        cluster_id=cluster_id,
        options=Options(**options),
        timing=Timing(),
    )


def log(*epochs: int, values=None) -> tuple[Record, ...]:
    """A log with one record per epoch given: client values 1, 2, ... unless values are given.

    Use `leader_change(...)` entries inside `values` for control records.
    """
    values = values if values is not None else list(range(1, len(epochs) + 1))
    return tuple(Record(Offset=i, Epoch=e, Value=v) for i, (e, v) in enumerate(zip(epochs, values)))


def leader_change(leader: int, *voted: int) -> LeaderChangeMessage:
    return LeaderChangeMessage(LeaderId=leader, VotedIds=tuple(voted))


def fetch(epoch: int, records, replica: int = 1, cluster_id: str | None = CLUSTER_ID) -> FetchRequest:
    """The Fetch a replica with `records` sends in `epoch` (FETCH-SEND-1)."""
    return FetchRequest(
        ClusterId=cluster_id,
        ReplicaId=replica,
        CurrentLeaderEpoch=epoch,
        FetchOffset=len(records),
        LastFetchedEpoch=records[-1].Epoch if records else 0,
    )


def state(role: Role = Role.UNATTACHED, **fields) -> NodeState:
    return NodeState(role=role, **fields)


def leader_state(cfg: NodeConfig, epoch: int, records, **fields) -> NodeState:
    """A leader of `epoch` whose own progress is its log end and others' unknown (-1) unless given."""
    offsets = tuple(len(records) if r == cfg.node_id else -1 for r in cfg.replicas)
    defaults = dict(
        epoch=epoch,
        leader_id=cfg.node_id,
        voted_id=cfg.node_id,
        log=tuple(records),
        endorsed=frozenset({cfg.node_id}),
        fetched=frozenset({cfg.node_id}),
        replica_offsets=offsets,
    )
    return NodeState(role=Role.LEADER, **(defaults | fields))


def request(cfg: NodeConfig, s: NodeState, source: int, message) -> Transition:
    return node.step(cfg, s, Request(source=source, message=message))


def response(cfg: NodeConfig, s: NodeState, source: int, message, answered) -> Transition:
    return node.step(cfg, s, Response(source=source, message=message, request=answered))


def timer(cfg: NodeConfig, s: NodeState, kind: TimerKind) -> Transition:
    return node.step(cfg, s, Timer(kind=kind))


def sends(transition: Transition) -> list[Send]:
    return [o for o in transition.outputs if type(o) is Send]


def reply(transition: Transition):
    """The one message the node sent (its response to a request)."""
    sent = sends(transition)
    assert len(sent) >= 1, f"expected a response, got outputs {transition.outputs}"
    return sent[0].message


def sent_to(transition: Transition) -> dict[int, object]:
    """{destination: message} of the Sends (one message per destination expected)."""
    return {s.destination: s.message for s in sends(transition)}


def fields(message) -> dict:
    return msgspec.structs.asdict(message)


@pytest.fixture
def cfg() -> NodeConfig:
    return config()
