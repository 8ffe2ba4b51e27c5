"""COMMON-4: requests no correct sender can produce are refused, at every RPC, changing nothing."""

import pytest
from conftest import CLUSTER_ID, config, leader_state, log, request, state

from model.events import Send
from model.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    VoteRequest,
    VoteResponse,
)
from model.state import Role
from spec import errors

INVALID = errors.INVALID_REQUEST
VOTER_SET = errors.INCONSISTENT_VOTER_SET


def vote(epoch=5, candidate=3, last_epoch=4, last_offset=1) -> VoteRequest:
    return VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=epoch, CandidateId=candidate, LastOffsetEpoch=last_epoch, LastOffset=last_offset)


def begin(epoch=5, leader=3) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=leader, LeaderEpoch=epoch)


def end(epoch=4, leader=2, replica=2, successors=(1, 3)) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(ClusterId=CLUSTER_ID, ReplicaId=replica, LeaderId=leader, LeaderEpoch=epoch, PreferredSuccessors=successors)


def fetch(epoch=4, offset=2, last_epoch=4) -> FetchRequest:
    return FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=3, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch)


FOLLOWER = state(Role.FOLLOWER, epoch=4, leader_id=2, log=log(1, 4), high_watermark=1)

VOTE_CASES = {
    "negative candidate epoch": vote(epoch=-1, last_epoch=0),
    "negative candidate id": vote(candidate=-1),
    "negative last epoch": vote(last_epoch=-1),
    "last epoch equal to the candidate's": vote(last_epoch=5),
    "last epoch above the candidate's": vote(last_epoch=9),
    "last offset below an empty log's": vote(last_offset=-2),
}

BEGIN_CASES = {
    "leader -1": (begin(leader=-1), INVALID),
    "negative epoch": (begin(epoch=-3), INVALID),
    "the receiver itself as leader": (begin(leader=1), INVALID),
    "a leader that is not a voter": (begin(leader=7), VOTER_SET),
}

END_CASES = {
    "leader -1 (a shutting-down candidate)": (end(leader=-1), INVALID),
    "negative epoch": (end(epoch=-1), INVALID),
    "negative replica id": (end(replica=-1), INVALID),
    "the receiver itself as leader": (end(leader=1), INVALID),
    "a successor named twice": (end(successors=(1, 1, 3)), INVALID),
    "a leader that is not a voter": (end(leader=7), VOTER_SET),
    "a successor that is not a voter": (end(successors=(1, 7)), VOTER_SET),
}


@pytest.mark.parametrize("message", VOTE_CASES.values(), ids=VOTE_CASES.keys())
def test_common_4_impossible_vote_is_refused(message):
    """COMMON-4: INVALID_REQUEST, no vote, the receiver's leader and epoch (COMMON-2), no state change."""
    cfg = config(1)
    t = request(cfg, FOLLOWER, 3, message)
    assert t.state == FOLLOWER
    expected = VoteResponse(ErrorCode=errors.NONE, PartitionErrorCode=INVALID, LeaderId=2, LeaderEpoch=4, VoteGranted=False)
    assert t.outputs == (Send(destination=3, message=expected),)
    assert t.rules == ("COMMON-4", "COMMON-2")


def test_common_4_a_possible_vote_passes():
    """COMMON-4: the largest last epoch a candidate can have (its epoch - 1) and an empty log (epoch 0, offset -1) pass."""
    cfg = config(1)
    for message in (vote(last_epoch=4), vote(last_epoch=0, last_offset=-1)):
        assert "COMMON-4" not in request(cfg, FOLLOWER, 3, message).rules


def test_common_4_end_offset_reading_refuses_a_negative_last_offset():
    """COMMON-4 under vote_last_offset="end-offset": LastOffset is the log end, so an empty log sends 0 and -1 is impossible."""
    cfg = config(1, vote_last_offset="end-offset")
    assert request(cfg, FOLLOWER, 3, vote(last_epoch=0, last_offset=-1)).rules == ("COMMON-4", "COMMON-2")
    assert "COMMON-4" not in request(cfg, FOLLOWER, 3, vote(last_epoch=0, last_offset=0)).rules


@pytest.mark.parametrize("message, code", BEGIN_CASES.values(), ids=BEGIN_CASES.keys())
def test_common_4_impossible_begin_quorum_epoch_is_refused(message, code):
    """COMMON-4: a BeginQuorumEpoch naming leader -1 is not followed (the node would follow no one)."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=4, log=log(1, 4))
    t = request(cfg, s, 3, message)
    assert t.state == s
    expected = BeginQuorumEpochResponse(ErrorCode=errors.NONE, PartitionErrorCode=code, LeaderId=-1, LeaderEpoch=4)
    assert t.outputs == (Send(destination=3, message=expected),)
    assert t.rules == ("COMMON-4", "COMMON-2")


@pytest.mark.parametrize("message, code", END_CASES.values(), ids=END_CASES.keys())
def test_common_4_impossible_end_quorum_epoch_is_refused(message, code):
    """COMMON-4: no election is started by an EndQuorumEpoch no leader could send."""
    cfg = config(1)
    t = request(cfg, FOLLOWER, 2, message)
    assert t.state == FOLLOWER
    expected = EndQuorumEpochResponse(ErrorCode=errors.NONE, PartitionErrorCode=code, LeaderId=2, LeaderEpoch=4)
    assert t.outputs == (Send(destination=2, message=expected),)
    assert t.rules == ("COMMON-4", "COMMON-2")


def test_common_4_a_possible_end_quorum_epoch_starts_the_election():
    """COMMON-4: the same request with possible fields is handled (END-REQ-5: the first successor stands)."""
    t = request(config(1), FOLLOWER, 2, end())
    assert t.state.role == Role.CANDIDATE
    assert "COMMON-4" not in t.rules


FETCH_CASES = {
    "negative current epoch": fetch(epoch=-1, last_epoch=0),
    "negative fetch offset": fetch(offset=-1),
    "negative last fetched epoch": fetch(last_epoch=-1),
    "last fetched epoch above the current epoch": fetch(last_epoch=5),
}


@pytest.mark.parametrize("message", FETCH_CASES.values(), ids=FETCH_CASES.keys())
def test_common_4_impossible_fetch_is_refused_by_the_leader(message):
    """COMMON-4: the leader neither serves records nor records the fetcher's progress."""
    cfg = config(1)
    leader = leader_state(cfg, 4, log(1, 4), high_watermark=1)
    t = request(cfg, leader, 3, message)
    assert t.state == leader
    expected = FetchResponse(PartitionErrorCode=INVALID, HighWatermark=1, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=4), Records=())
    assert t.outputs == (Send(destination=3, message=expected),)
    assert t.rules == ("COMMON-4", "COMMON-2")


@pytest.mark.parametrize(
    "message",
    [
        OffsetsForLeaderEpochRequest(ReplicaId=3, CurrentLeaderEpoch=4, LeaderEpoch=-1),
        OffsetsForLeaderEpochRequest(ReplicaId=3, CurrentLeaderEpoch=-2, LeaderEpoch=1),
    ],
    ids=["negative leader epoch", "current epoch below -1"],
)
def test_common_4_impossible_offsets_for_leader_epoch_is_refused(message):
    """COMMON-4: KIP-101's request too; CurrentLeaderEpoch -1 alone means "no epoch check"."""
    cfg = config(1)
    leader = leader_state(cfg, 4, log(1, 4))
    t = request(cfg, leader, 3, message)
    assert t.state == leader
    assert t.outputs == (Send(destination=3, message=OffsetsForLeaderEpochResponse(ErrorCode=INVALID, LeaderEpoch=-1, EndOffset=-1)),)
    assert t.rules == ("COMMON-4",)
    unchecked = request(cfg, leader, 3, OffsetsForLeaderEpochRequest(ReplicaId=3, CurrentLeaderEpoch=-1, LeaderEpoch=1))
    assert unchecked.outputs[0].message.ErrorCode == errors.NONE


def test_common_4_comes_after_the_cluster_id():
    """COMMON-4: a request from another cluster is answered INCONSISTENT_CLUSTER_ID whatever its fields."""
    cfg = config(1)
    foreign = VoteRequest(ClusterId="another", CandidateEpoch=-1, CandidateId=-1, LastOffsetEpoch=-1, LastOffset=-5)
    t = request(cfg, FOLLOWER, 3, foreign)
    assert t.outputs[0].message.ErrorCode == errors.INCONSISTENT_CLUSTER_ID
    assert "COMMON-4" not in t.rules
