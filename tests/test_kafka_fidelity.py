"""What Kafka 3.9.1's and 4.3.1's raft client does where it stops on an error (KafkaRaftClient),
stated from its code, not computed by the model; KIP-595 as written alongside."""

import pytest

from model import node as nodes
from model.config import ClusterConfig
from model.events import Request, Response, Send, Shutdown
from model.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    Record,
    VoteRequest,
    VoteResponse,
)
from model.state import NodeState, Role
from spec import errors

KAFKA = ("kafka-3.9", "kafka-4.3")
CLUSTER = "kraft-cluster"


def config(profile: str, node: int = 1):
    return ClusterConfig(voters=(1, 2, 3), profile=profile).node(node)


def answer(transition):
    """The one message the step sends."""
    (sent,) = [o.message for o in transition.outputs if type(o) is Send]
    return sent


def shut_down(transition) -> bool:
    return transition.state.role == Role.DOWN and any(type(o) is Shutdown for o in transition.outputs)


def begin(leader: int, epoch: int) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(ClusterId=CLUSTER, LeaderId=leader, LeaderEpoch=epoch)


def end(leader: int, epoch: int) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(ClusterId=CLUSTER, ReplicaId=leader, LeaderId=leader, LeaderEpoch=epoch, PreferredSuccessors=(2, 3))


FOLLOWER = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=2)
LEADER = NodeState(role=Role.LEADER, epoch=2, leader_id=1, endorsed=frozenset({1}), fetched=frozenset({1}), replica_offsets=(0, -1, -1))
RESIGNED = NodeState(role=Role.RESIGNED, epoch=2, leader_id=1)
CANDIDATE = NodeState(role=Role.CANDIDATE, epoch=2, voted_id=1, granted=frozenset({1}))


@pytest.mark.parametrize("profile", KAFKA)
@pytest.mark.parametrize("request_of", [begin, end])
def test_a_request_naming_the_leader_itself_in_its_epoch_is_answered_none(profile, request_of):
    """validateVoterOnlyRequest lets it through (a non-negative id, not a stale epoch);
    maybeTransition finds it consistent (hasConsistentLeader: the node's own id, and isLeader)
    and changes nothing; the response is built with Errors.NONE."""
    step = nodes.step(config(profile), LEADER, Request(source=2, message=request_of(1, 2)))
    assert step.state == LEADER
    assert (answer(step).ErrorCode, answer(step).PartitionErrorCode) == (errors.NONE, errors.NONE)


@pytest.mark.parametrize("profile", KAFKA)
@pytest.mark.parametrize("request_of", [begin, end])
@pytest.mark.parametrize(
    "state, epoch",
    [(FOLLOWER, 2), (FOLLOWER, 3), (CANDIDATE, 2), (RESIGNED, 2), (LEADER, 3)],
    ids=["follower-same", "follower-newer", "candidate-same", "resigned-same", "leader-newer"],
)
def test_a_request_naming_the_receiver_leader_of_an_epoch_it_does_not_lead_stops_kafka(profile, request_of, state, epoch):
    """maybeTransition throws: hasConsistentLeader is false for the node's own id unless it is
    leader ("inconsistent with current leader"), and a leader told of a newer epoch goes to
    transitionToFollower, which refuses the local id ("matches the local node.id"). The exception
    leaves poll, and the node goes down."""
    assert shut_down(nodes.step(config(profile), state, Request(source=2, message=request_of(1, epoch))))


@pytest.mark.parametrize("profile", KAFKA)
def test_a_request_naming_the_receiver_in_a_stale_epoch_is_fenced(profile):
    """validateVoterOnlyRequest checks the epoch first: FENCED_LEADER_EPOCH."""
    step = nodes.step(config(profile), FOLLOWER, Request(source=2, message=begin(1, 1)))
    assert answer(step).PartitionErrorCode == errors.FENCED_LEADER_EPOCH


def test_kip595_refuses_a_request_naming_the_receiver_as_leader():
    step = nodes.step(config("kip595"), FOLLOWER, Request(source=2, message=begin(1, 3)))
    assert (step.state, answer(step).PartitionErrorCode) == (FOLLOWER, errors.INVALID_REQUEST)


def fetch_request(epoch: int = 2, offset: int = 0) -> FetchRequest:
    return FetchRequest(ClusterId=CLUSTER, ReplicaId=1, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=0 if offset == 0 else epoch)


def fetch_answer(error: int = errors.NONE, leader: int = 2, epoch: int = 2, high_watermark: int = 0, records=()) -> FetchResponse:
    return FetchResponse(PartitionErrorCode=error, HighWatermark=high_watermark, CurrentLeader=LeaderIdAndEpoch(LeaderId=leader, LeaderEpoch=epoch), Records=records)


@pytest.mark.parametrize("profile", KAFKA)
@pytest.mark.parametrize(
    "state, response, asked",
    [
        (FOLLOWER, fetch_answer(errors.INVALID_REQUEST), fetch_request()),
        (CANDIDATE, VoteResponse(PartitionErrorCode=errors.INVALID_REQUEST, LeaderId=-1, LeaderEpoch=2), None),
        (LEADER, BeginQuorumEpochResponse(PartitionErrorCode=errors.INVALID_REQUEST, LeaderId=1, LeaderEpoch=2), begin(1, 2)),
        (RESIGNED, EndQuorumEpochResponse(PartitionErrorCode=errors.INVALID_REQUEST, LeaderId=1, LeaderEpoch=2), end(1, 2)),
    ],
    ids=["fetch", "vote", "begin", "end"],
)
def test_an_invalid_request_answer_in_the_nodes_epoch_stops_kafka(profile, state, response, asked):
    """maybeHandleCommonResponse: an answer of the node's epoch, naming no leader it would
    follow, with INVALID_REQUEST: throw new IllegalStateException("Received unexpected invalid
    request error")."""
    asked = asked or VoteRequest(ClusterId=CLUSTER, CandidateEpoch=2, CandidateId=1, LastOffsetEpoch=0, LastOffset=0)
    if type(response) is FetchResponse:
        state = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=2, fetching=asked)
    assert shut_down(nodes.step(config(profile), state, Response(source=2, message=response, request=asked)))


@pytest.mark.parametrize("profile", KAFKA)
def test_an_invalid_request_answer_of_an_earlier_epoch_is_dropped(profile):
    """maybeHandleCommonResponse: epoch < quorum.epoch() returns first, handled."""
    state = NodeState(role=Role.FOLLOWER, epoch=3, leader_id=2, fetching=fetch_request(3))
    step = nodes.step(config(profile), state, Response(source=2, message=fetch_answer(errors.INVALID_REQUEST, epoch=2), request=fetch_request(3)))
    assert step.state.role == Role.FOLLOWER


def test_kip595_takes_an_invalid_request_fetch_answer_as_a_failed_fetch():
    state = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=2, fetching=fetch_request())
    step = nodes.step(config("kip595"), state, Response(source=2, message=fetch_answer(errors.INVALID_REQUEST), request=fetch_request()))
    assert step.state.role == Role.FOLLOWER and type(answer(step)) is FetchRequest


LOG = tuple(Record(Offset=i, Epoch=2, Value=i) for i in range(3))


@pytest.mark.parametrize("profile", KAFKA)
def test_a_fetch_answer_lowering_the_high_watermark_stops_kafka(profile):
    """updateFollowerHighWatermark -> FollowerState.updateHighWatermark: a known high watermark
    above min(log end, the answer's) throws "Non-monotonic update of high watermark"."""
    state = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=2, log=LOG, high_watermark=2, fetching=fetch_request(offset=3))
    step = nodes.step(config(profile), state, Response(source=2, message=fetch_answer(high_watermark=1), request=fetch_request(offset=3)))
    assert shut_down(step)


@pytest.mark.parametrize("profile", KAFKA)
def test_a_fetch_answer_with_the_same_or_no_high_watermark_is_taken(profile):
    """updateHighWatermark returns false for an equal one; -1 is no update at all (ifPresent)."""
    state = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=2, log=LOG, high_watermark=2, fetching=fetch_request(offset=3))
    for high_watermark in (2, -1):
        step = nodes.step(config(profile), state, Response(source=2, message=fetch_answer(high_watermark=high_watermark), request=fetch_request(offset=3)))
        assert (step.state.role, step.state.high_watermark) == (Role.FOLLOWER, 2)


def test_kip595_takes_a_lower_high_watermark():
    state = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=2, log=LOG, high_watermark=2, fetching=fetch_request(offset=3))
    step = nodes.step(config("kip595"), state, Response(source=2, message=fetch_answer(high_watermark=1), request=fetch_request(offset=3)))
    assert (step.state.role, step.state.high_watermark) == (Role.FOLLOWER, 1)
