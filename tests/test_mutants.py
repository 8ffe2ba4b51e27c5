"""Each mutant is a real bug: one step where it and the reference differ in what replay compares.

For every mutant one node-level scenario pins the reference's and the mutant's exact outputs
(in the adapter contract's terms) and observable state, so a mutant that stops being a bug, or
a reference that changes, fails here.
"""

from typing import NamedTuple

import msgspec
import pytest

from adapters.mutants import MUTANTS, mutant_adapter
from adapters.node_models import MODELS, outputs_of
from model.config import NodeConfig
from model.events import AppendResult, ClientAppend, Event, Request, Response, Restart, Send
from model.isr.config import ReplicaConfig
from model.isr.events import AlterIsr, Startup
from model.isr.state import LeaderAndIsr
from model.isr.state import ReplicaState as IsrReplica
from model.isr.state import Role as IsrRole
from model.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Record,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from model.state import NodeState, Role
from model.transitions import Transition
from spec import errors
from spec.rules import load_rules
from spec.trace import Observed, Outputs, TimerLeft

CLUSTER_ID = "kraft-cluster"
NO_EPOCH = EpochEndOffset(Epoch=-1, EndOffset=-1)


def config(node_id: int = 1, voters=(1, 2, 3), observers=()) -> NodeConfig:
    return NodeConfig(node_id=node_id, voters=voters, observers=observers, cluster_id=CLUSTER_ID)


def records(*epochs: int) -> tuple[Record, ...]:
    """One client record per epoch given, with values 1, 2, ..."""
    return tuple(Record(Offset=i, Epoch=e, Value=i + 1) for i, e in enumerate(epochs))


def leader(cfg: NodeConfig, epoch: int, log, offsets: tuple[int, ...] | None = None, hw: int = 0) -> NodeState:
    """A leader whose replica progress is `offsets` (its own log end, others unknown, by default)."""
    if offsets is None:
        offsets = tuple(len(log) if r == cfg.node_id else -1 for r in cfg.replicas)
    return NodeState(
        role=Role.LEADER,
        epoch=epoch,
        leader_id=cfg.node_id,
        voted_id=cfg.node_id,
        log=log,
        high_watermark=hw,
        endorsed=frozenset({cfg.node_id}),
        fetched=frozenset({cfg.node_id}),
        replica_offsets=offsets,
    )


def follower(cfg: NodeConfig, leader_id: int, epoch: int, log=(), hw: int = 0) -> NodeState:
    """A follower whose Fetch for its log end is in flight."""
    return NodeState(
        role=Role.FOLLOWER, epoch=epoch, leader_id=leader_id, log=log, high_watermark=hw, fetching=fetch(cfg.node_id, epoch, log)
    )


def fetch(replica: int, epoch: int, log) -> FetchRequest:
    """The Fetch of a replica holding `log` (FETCH-SEND-1)."""
    return FetchRequest(
        ClusterId=CLUSTER_ID, ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=len(log), LastFetchedEpoch=log[-1].Epoch if log else 0
    )


def fetch_answer(leader_id: int, epoch: int, hw: int, *, error: int = errors.NONE, diverging=NO_EPOCH, log=()) -> FetchResponse:
    return FetchResponse(
        PartitionErrorCode=error,
        HighWatermark=hw,
        DivergingEpoch=diverging,
        CurrentLeader=LeaderIdAndEpoch(LeaderId=leader_id, LeaderEpoch=epoch),
        Records=log,
    )


def vote(candidate: int, epoch: int, cluster_id: str | None = CLUSTER_ID) -> VoteRequest:
    """The Vote request of a candidate with an empty log."""
    return VoteRequest(ClusterId=cluster_id, CandidateEpoch=epoch, CandidateId=candidate, LastOffsetEpoch=0, LastOffset=-1)


def begin(leader_id: int, epoch: int) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=leader_id, LeaderEpoch=epoch)


def sends(message, *destinations: int) -> tuple[Send, ...]:
    return tuple(Send(destination=d, message=message) for d in destinations)


def observed(role: str, epoch: int, leader_id: int = -1, voted_id: int = -1, log=(), hw: int = 0) -> Observed:
    return Observed(
        role=role,
        epoch=epoch,
        leader_id=leader_id,
        voted_id=voted_id,
        log_end_offset=len(log),
        high_watermark=hw,
        log=tuple((r.Offset, r.Epoch) for r in log),
    )


class Seen(NamedTuple):
    """What replay compares after one step."""

    outputs: Outputs
    state: Observed


def seen(system: str, event: Event, transition: Transition) -> Seen:
    return Seen(outputs_of(event, transition), MODELS[system].observe(transition.state))


class Case(NamedTuple):
    config: NodeConfig | ReplicaConfig
    state: NodeState | IsrReplica
    event: Event
    reference: Seen
    mutant: Seen


def isr_observed(role: str, epoch: int, leader: int, log=(), hw: int = 0, isr=()) -> Observed:
    return Observed(
        role=role, epoch=epoch, leader_id=leader, voted_id=-1, log_end_offset=len(log), high_watermark=hw, log=tuple((r.Offset, r.Epoch) for r in log), isr=isr
    )


def isr_leader(epoch: int, log, hw: int, isr=(1, 2), follower_end: int = -1) -> IsrReplica:
    """Replica 1 leading a partition of replicas 1 and 2."""
    return IsrReplica(role=IsrRole.LEADER, epoch=epoch, leader=1, log=log, high_watermark=hw, isr=isr, follower_ends=((2, follower_end),))


def offsets(current: int, asked: int) -> OffsetsForLeaderEpochRequest:
    return OffsetsForLeaderEpochRequest(ReplicaId=2, CurrentLeaderEpoch=current, LeaderEpoch=asked)


C = config()
ONE = records(1)
LOG_1_1_3 = records(1, 1, 3)
FOLLOWER_LOG = records(1, 2, 2, 2)
GRANTED = VoteResponse(LeaderId=-1, LeaderEpoch=3, VoteGranted=True)
CANDIDATE = NodeState(role=Role.CANDIDATE, epoch=3, voted_id=1, granted=frozenset({1}))
AS_LEADER = Seen(Outputs(sends=sends(begin(1, 3), 2, 3)), observed("leader", 3, 1, 1, records(3)))
LEADER_3 = observed("leader", 3, 1, 1, LOG_1_1_3)
END = EndQuorumEpochRequest(ClusterId=CLUSTER_ID, ReplicaId=1, LeaderId=1, LeaderEpoch=2, PreferredSuccessors=(2, 3))
OBSERVED = config(voters=(1, 2), observers=(3,))
DESCRIBED = DescribeQuorumResponse(
    LeaderId=1,
    LeaderEpoch=1,
    HighWatermark=2,
    CurrentVoters=(ReplicaState(ReplicaId=1, LogEndOffset=2), ReplicaState(ReplicaId=2, LogEndOffset=2), ReplicaState(ReplicaId=3, LogEndOffset=-1)),
)
DOWN_LEADER = NodeState(role=Role.DOWN, epoch=2, leader_id=1, voted_id=1, log=records(2))
RESTARTED_FETCH = sends(fetch(1, 2, ()), 2, 3)

ISR_1 = ReplicaConfig(node_id=1, replicas=(1, 2))
ISR_2 = ReplicaConfig(node_id=2, replicas=(1, 2))
LOG_0_0_2 = records(0, 0, 2)

CASES: dict[str, Case] = {
    "vote-foreign-cluster": Case(
        C,
        NodeState(epoch=1),
        Request(source=2, message=vote(2, 2, cluster_id="other-cluster")),
        Seen(Outputs(response=VoteResponse(ErrorCode=errors.INCONSISTENT_CLUSTER_ID, LeaderEpoch=1, LeaderId=-1)), observed("unattached", 1)),
        Seen(Outputs(response=VoteResponse(LeaderId=-1, LeaderEpoch=2, VoteGranted=True)), observed("voted", 2, voted_id=2)),
    ),
    "vote-grant-twice": Case(
        C,
        NodeState(epoch=2, voted_id=2),
        Request(source=3, message=vote(3, 2)),
        Seen(Outputs(response=VoteResponse(LeaderId=-1, LeaderEpoch=2)), observed("voted", 2, voted_id=2)),
        Seen(Outputs(response=VoteResponse(LeaderId=-1, LeaderEpoch=2, VoteGranted=True)), observed("voted", 2, voted_id=3)),
    ),
    "vote-no-log-check": Case(
        C,
        NodeState(epoch=1, log=ONE),
        Request(source=2, message=vote(2, 2)),
        Seen(Outputs(response=VoteResponse(LeaderId=-1, LeaderEpoch=2)), observed("unattached", 2, log=ONE)),
        Seen(Outputs(response=VoteResponse(LeaderId=-1, LeaderEpoch=2, VoteGranted=True)), observed("voted", 2, voted_id=2, log=ONE)),
    ),
    "vote-response-other-epoch": Case(
        C,
        CANDIDATE,
        Response(source=2, message=VoteResponse(LeaderId=-1, LeaderEpoch=2, VoteGranted=True), request=vote(1, 2)),
        Seen(Outputs(), observed("candidate", 3, voted_id=1)),
        AS_LEADER,
    ),
    "leader-change-skipped": Case(
        C,
        CANDIDATE,
        Response(source=2, message=GRANTED, request=vote(1, 3)),
        AS_LEADER,
        Seen(Outputs(sends=sends(begin(1, 3), 2, 3)), observed("leader", 3, 1, 1)),
    ),
    "begin-stale-epoch": Case(
        C,
        follower(C, 3, 3),
        Request(source=2, message=begin(2, 2)),
        Seen(
            Outputs(response=BeginQuorumEpochResponse(PartitionErrorCode=errors.FENCED_LEADER_EPOCH, LeaderId=3, LeaderEpoch=3)),
            observed("follower", 3, 3),
        ),
        Seen(
            Outputs(response=BeginQuorumEpochResponse(LeaderId=2, LeaderEpoch=2), sends=sends(fetch(1, 2, ()), 2)),
            observed("follower", 2, 2),
        ),
    ),
    "end-successor-waits": Case(
        config(node_id=2),
        follower(config(node_id=2), 1, 2),
        Request(source=1, message=END),
        Seen(
            Outputs(response=EndQuorumEpochResponse(LeaderId=-1, LeaderEpoch=3), sends=sends(vote(2, 3), 1, 3)),
            observed("candidate", 3, voted_id=2),
        ),
        Seen(Outputs(response=EndQuorumEpochResponse(LeaderId=1, LeaderEpoch=2), timers=(TimerLeft(kind="fetch_timeout", ms=20),)), observed("follower", 2, 1)),
    ),
    "end-successor-no-backoff": Case(
        config(node_id=3),
        follower(config(node_id=3), 1, 2),
        Request(source=1, message=END),
        Seen(Outputs(response=EndQuorumEpochResponse(LeaderId=1, LeaderEpoch=2), timers=(TimerLeft(kind="fetch_timeout", ms=20),)), observed("follower", 2, 1)),
        Seen(Outputs(response=EndQuorumEpochResponse(LeaderId=1, LeaderEpoch=2), timers=(TimerLeft(kind="fetch_timeout", ms=2000),)), observed("follower", 2, 1)),
    ),
    "fetch-stale-epoch-served": Case(
        C,
        leader(C, 3, LOG_1_1_3),
        Request(source=2, message=fetch(2, 2, records(1, 1))),
        Seen(Outputs(response=fetch_answer(1, 3, 0, error=errors.FENCED_LEADER_EPOCH)), LEADER_3),
        Seen(Outputs(response=fetch_answer(1, 3, 0, log=LOG_1_1_3[2:])), LEADER_3),
    ),
    "fetch-newer-epoch-fenced": Case(
        C,
        leader(C, 3, LOG_1_1_3),
        Request(source=2, message=fetch(2, 4, LOG_1_1_3)),
        Seen(Outputs(response=fetch_answer(1, 3, 0, error=errors.UNKNOWN_LEADER_EPOCH)), LEADER_3),
        Seen(Outputs(response=fetch_answer(1, 3, 0, error=errors.FENCED_LEADER_EPOCH)), LEADER_3),
    ),
    "fetch-no-diverging-epoch": Case(
        C,
        leader(C, 3, LOG_1_1_3),
        Request(source=2, message=fetch(2, 3, records(1, 1, 2))),
        Seen(Outputs(response=fetch_answer(1, 3, 0, diverging=EpochEndOffset(Epoch=1, EndOffset=2))), LEADER_3),
        Seen(Outputs(response=fetch_answer(1, 3, 0)), LEADER_3),
    ),
    "fetch-diverging-below": Case(
        C,
        leader(C, 3, LOG_1_1_3),
        Request(source=2, message=fetch(2, 3, records(1, 1, 1))),
        Seen(Outputs(response=fetch_answer(1, 3, 0, diverging=EpochEndOffset(Epoch=1, EndOffset=2))), LEADER_3),
        Seen(Outputs(response=fetch_answer(1, 3, 0, diverging=EpochEndOffset(Epoch=0, EndOffset=0))), LEADER_3),
    ),
    "hw-any-epoch": Case(
        C,
        leader(C, 3, LOG_1_1_3),
        Request(source=2, message=fetch(2, 3, records(1, 1))),
        Seen(Outputs(response=fetch_answer(1, 3, 0, log=LOG_1_1_3[2:])), LEADER_3),
        Seen(Outputs(response=fetch_answer(1, 3, 2, log=LOG_1_1_3[2:])), observed("leader", 3, 1, 1, LOG_1_1_3, hw=2)),
    ),
    "hw-counts-observers": Case(
        OBSERVED,
        leader(OBSERVED, 1, ONE),
        Request(source=3, message=fetch(3, 1, ONE)),
        Seen(Outputs(response=fetch_answer(1, 1, 0)), observed("leader", 1, 1, 1, ONE)),
        Seen(Outputs(response=fetch_answer(1, 1, 1)), observed("leader", 1, 1, 1, ONE, hw=1)),
    ),
    "follower-hw-unbounded": Case(
        config(node_id=2),
        follower(config(node_id=2), 1, 1),
        Response(source=1, message=fetch_answer(1, 1, 3, log=ONE), request=fetch(2, 1, ())),
        Seen(Outputs(sends=sends(fetch(2, 1, ONE), 1)), observed("follower", 1, 1, log=ONE, hw=1)),
        Seen(Outputs(sends=sends(fetch(2, 1, ONE), 1)), observed("follower", 1, 1, log=ONE, hw=3)),
    ),
    "truncate-by-offset-only": Case(
        config(node_id=2),
        follower(config(node_id=2), 1, 3, FOLLOWER_LOG),
        Response(source=1, message=fetch_answer(1, 3, 0, diverging=EpochEndOffset(Epoch=1, EndOffset=2)), request=fetch(2, 3, FOLLOWER_LOG)),
        Seen(Outputs(sends=sends(fetch(2, 3, FOLLOWER_LOG[:1]), 1)), observed("follower", 3, 1, log=FOLLOWER_LOG[:1])),
        Seen(Outputs(sends=sends(fetch(2, 3, FOLLOWER_LOG[:2]), 1)), observed("follower", 3, 1, log=FOLLOWER_LOG[:2])),
    ),
    "truncate-to-hw": Case(
        C,
        NodeState(epoch=1, log=records(1, 1), high_watermark=1),
        Request(source=2, message=begin(2, 2)),
        Seen(
            Outputs(response=BeginQuorumEpochResponse(LeaderId=2, LeaderEpoch=2), sends=sends(fetch(1, 2, records(1, 1)), 2)),
            observed("follower", 2, 2, log=records(1, 1), hw=1),
        ),
        Seen(
            Outputs(response=BeginQuorumEpochResponse(LeaderId=2, LeaderEpoch=2), sends=sends(fetch(1, 2, ONE), 2)),
            observed("follower", 2, 2, log=ONE, hw=1),
        ),
    ),
    "describe-hw-last-offset": Case(
        C,
        leader(C, 1, records(1, 1), offsets=(2, 2, -1), hw=2),
        Request(source=2, message=DescribeQuorumRequest()),
        Seen(Outputs(response=DESCRIBED), observed("leader", 1, 1, 1, records(1, 1), hw=2)),
        Seen(Outputs(response=msgspec.structs.replace(DESCRIBED, HighWatermark=1)), observed("leader", 1, 1, 1, records(1, 1), hw=2)),
    ),
    "offsets-end-offset-plus-one": Case(
        C,
        leader(C, 3, LOG_1_1_3),
        Request(source=2, message=OffsetsForLeaderEpochRequest(CurrentLeaderEpoch=3, LeaderEpoch=1)),
        Seen(Outputs(response=OffsetsForLeaderEpochResponse(LeaderEpoch=1, EndOffset=2)), LEADER_3),
        Seen(Outputs(response=OffsetsForLeaderEpochResponse(LeaderEpoch=1, EndOffset=3)), LEADER_3),
    ),
    "restart-forgets-vote": Case(
        C,
        NodeState(role=Role.DOWN, epoch=2, voted_id=2),
        Restart(),
        Seen(Outputs(sends=RESTARTED_FETCH), observed("voted", 2, voted_id=2)),
        Seen(Outputs(sends=RESTARTED_FETCH), observed("unattached", 2)),
    ),
    "restart-resumes-leadership": Case(
        C,
        DOWN_LEADER,
        Restart(),
        Seen(Outputs(), observed("resigned", 2, 1, 1, records(2))),
        Seen(Outputs(sends=sends(begin(1, 2), 2, 3)), observed("leader", 2, 1, 1, records(2, 2))),
    ),
    "isr-truncate-to-hw": Case(
        ISR_2,
        IsrReplica(role=IsrRole.DOWN, log=records(0, 0)),
        Startup(partition=LeaderAndIsr(Leader=1, LeaderEpoch=1, Isr=(1, 2))),
        Seen(Outputs(sends=sends(offsets(1, 0), 1)), isr_observed("follower", 1, 1, records(0, 0))),
        Seen(Outputs(), isr_observed("follower", 1, 1)),
    ),
    "isr-offsets-unfenced": Case(
        ISR_1,
        isr_leader(2, LOG_0_0_2, 3),
        Request(source=2, message=offsets(1, 0)),
        Seen(Outputs(response=OffsetsForLeaderEpochResponse(ErrorCode=errors.FENCED_LEADER_EPOCH, LeaderEpoch=-1, EndOffset=-1)), isr_observed("leader", 2, 1, LOG_0_0_2, 3, (1, 2))),
        Seen(Outputs(response=OffsetsForLeaderEpochResponse(LeaderEpoch=0, EndOffset=2)), isr_observed("leader", 2, 1, LOG_0_0_2, 3, (1, 2))),
    ),
    "isr-offsets-exact-epoch": Case(
        ISR_1,
        isr_leader(2, LOG_0_0_2, 3),
        Request(source=2, message=offsets(2, 1)),
        Seen(Outputs(response=OffsetsForLeaderEpochResponse(LeaderEpoch=0, EndOffset=2)), isr_observed("leader", 2, 1, LOG_0_0_2, 3, (1, 2))),
        Seen(Outputs(response=OffsetsForLeaderEpochResponse(LeaderEpoch=-1, EndOffset=-1)), isr_observed("leader", 2, 1, LOG_0_0_2, 3, (1, 2))),
    ),
    "isr-expand-lagging": Case(
        ISR_1,
        isr_leader(0, records(0, 0), 2, isr=(1,), follower_end=0),
        Request(source=2, message=FetchRequest(ReplicaId=2, CurrentLeaderEpoch=0, FetchOffset=1)),
        Seen(
            Outputs(sends=(), response=FetchResponse(HighWatermark=2, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=0), Records=records(0, 0)[1:])),
            isr_observed("leader", 0, 1, records(0, 0), 2, (1,)),
        ),
        Seen(
            Outputs(
                response=FetchResponse(HighWatermark=2, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=0), Records=records(0, 0)[1:]),
                alter_isr=AlterIsr(LeaderEpoch=0, Isr=(1, 2)),
            ),
            isr_observed("leader", 0, 1, records(0, 0), 2, (1, 2)),
        ),
    ),
    "isr-ignore-min-isr": Case(
        ReplicaConfig(node_id=1, replicas=(1, 2), min_isr=2),
        isr_leader(0, (), 0, isr=(1,)),
        ClientAppend(value=1),
        Seen(Outputs(append_result=AppendResult(ErrorCode=errors.code_of("NOT_ENOUGH_REPLICAS"), Offset=-1)), isr_observed("leader", 0, 1, (), 0, (1,))),
        Seen(Outputs(append_result=AppendResult(ErrorCode=errors.NONE, Offset=0)), isr_observed("leader", 0, 1, records(0), 1, (1,))),
    ),
}


def test_every_mutant_has_a_scenario() -> None:
    assert list(CASES) == list(MUTANTS)


@pytest.mark.parametrize("name", list(CASES))
def test_mutant_departs_from_the_reference(name: str) -> None:
    case, mutant = CASES[name], MUTANTS[name]
    assert case.mutant != case.reference
    assert seen(mutant.system, case.event, MODELS[mutant.system].step(case.config, case.state, case.event)) == case.reference
    assert seen(mutant.system, case.event, mutant.step(case.config, case.state, case.event)) == case.mutant


def test_catalogue() -> None:
    assert len(MUTANTS) >= 15
    assert all(name == mutant.name for name, mutant in MUTANTS.items())
    assert len({mutant.step for mutant in MUTANTS.values()}) == len(MUTANTS)
    rule_ids = {rule.id for rule in load_rules()}
    for mutant in MUTANTS.values():
        assert mutant.name == mutant.name.lower() and " " not in mutant.name
        cited = mutant.description.rsplit("(", 1)[-1].rstrip(")")
        assert cited in rule_ids, f"{mutant.name}: the description should end with the rule it breaks, got {mutant.description!r}"


def test_mutant_adapter() -> None:
    adapter = mutant_adapter("vote-grant-twice")
    assert adapter.name == "mutant:vote-grant-twice"
    assert adapter.steps == {"kraft": MUTANTS["vote-grant-twice"].step}
    assert mutant_adapter("isr-truncate-to-hw").steps == {"isr": MUTANTS["isr-truncate-to-hw"].step}


def test_unknown_mutant_lists_the_known_ones() -> None:
    with pytest.raises(ValueError) as raised:
        mutant_adapter("no-such-bug")
    assert str(raised.value) == f"unknown mutant 'no-such-bug'; known mutants: {', '.join(MUTANTS)}"
