"""DescribeQuorum: the leader's replication view (DESCRIBE-REQ-*) and the admin client (DESCRIBE-RESP-*)."""

import msgspec
from conftest import config, leader_state, log, reply, request, sent_to, state

from model import describe
from model.messages import DescribeQuorumRequest, DescribeQuorumResponse, ReplicaState
from model.state import Role
from spec import errors

ADMIN = 100  # the admin client's connection


def by_replica(message: DescribeQuorumResponse) -> DescribeQuorumResponse:
    """The response with its replica lists in ReplicaId order (the KIP gives them no order)."""
    voters = tuple(sorted(message.CurrentVoters, key=replica_id))
    observers = tuple(sorted(message.Observers, key=replica_id))
    return msgspec.structs.replace(message, CurrentVoters=voters, Observers=observers)


def replica_id(replica: ReplicaState) -> int:
    return replica.ReplicaId


# DESCRIBE-REQ-1 -----------------------------------------------------------------------------


def test_describe_req_1_follower_answers_not_leader_with_its_leader_and_epoch():
    """DESCRIBE-REQ-1: at a non-leader, NOT_LEADER_OR_FOLLOWER with the known LeaderId and LeaderEpoch."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=3, leader_id=1, log=log(1, 3), high_watermark=2)
    t = request(cfg, s, ADMIN, DescribeQuorumRequest())
    assert sent_to(t) == {
        ADMIN: DescribeQuorumResponse(
            ErrorCode=errors.NONE,
            PartitionErrorCode=errors.NOT_LEADER_OR_FOLLOWER,
            LeaderId=1,
            LeaderEpoch=3,
            HighWatermark=0,
            CurrentVoters=(),
            Observers=(),
        )
    }
    assert t.state == s
    assert "DESCRIBE-REQ-1" in t.rules


def test_describe_req_1_node_without_a_leader_answers_leader_minus_1():
    """DESCRIBE-REQ-1: during an election the non-leader names no leader (LeaderId -1)."""
    cfg = config(2)
    for s in (
        state(Role.CANDIDATE, epoch=4, voted_id=2, granted=frozenset({2})),
        state(Role.UNATTACHED, epoch=4),
        state(Role.RESIGNED, epoch=4, leader_id=2, voted_id=2),
    ):
        t = request(cfg, s, ADMIN, DescribeQuorumRequest())
        assert sent_to(t) == {
            ADMIN: DescribeQuorumResponse(
                PartitionErrorCode=errors.NOT_LEADER_OR_FOLLOWER, LeaderId=s.leader_id, LeaderEpoch=4
            )
        }, s
        assert t.state == s
        assert "DESCRIBE-REQ-1" in t.rules


def test_describe_req_1_observer_answers_not_leader():
    """DESCRIBE-REQ-1: an observer is not the leader either."""
    cfg = config(4, observers=(4,))
    s = state(Role.OBSERVER, epoch=2, leader_id=1)
    t = request(cfg, s, ADMIN, DescribeQuorumRequest())
    assert sent_to(t) == {ADMIN: DescribeQuorumResponse(PartitionErrorCode=errors.NOT_LEADER_OR_FOLLOWER, LeaderId=1, LeaderEpoch=2)}
    assert "DESCRIBE-REQ-1" in t.rules


# DESCRIBE-REQ-2 -----------------------------------------------------------------------------


def test_describe_req_2_leader_reports_voters_and_known_observers():
    """DESCRIBE-REQ-2: LeaderId, LeaderEpoch, HighWatermark, every voter's offset (-1 unknown), observers with a known offset."""
    cfg = config(1, voters=(1, 2, 3), observers=(4, 5))
    s = leader_state(cfg, 2, log(1, 2, 2), high_watermark=2, replica_offsets=(3, 2, -1, 1, -1))
    t = request(cfg, s, ADMIN, DescribeQuorumRequest())
    assert list(sent_to(t)) == [ADMIN]
    assert by_replica(reply(t)) == DescribeQuorumResponse(
        ErrorCode=errors.NONE,
        PartitionErrorCode=errors.NONE,
        LeaderId=1,
        LeaderEpoch=2,
        HighWatermark=2,
        CurrentVoters=(
            ReplicaState(ReplicaId=1, LogEndOffset=3),
            ReplicaState(ReplicaId=2, LogEndOffset=2),
            ReplicaState(ReplicaId=3, LogEndOffset=-1),
        ),
        Observers=(ReplicaState(ReplicaId=4, LogEndOffset=1),),
    )
    assert t.state == s
    assert "DESCRIBE-REQ-2" in t.rules


def test_describe_req_2_new_leader_knows_only_its_own_offset():
    """DESCRIBE-REQ-2: right after election every other voter's LogEndOffset is -1 and no observer is listed."""
    cfg = config(2, voters=(1, 2, 3), observers=(4,))
    s = leader_state(cfg, 5, log(1, 5))
    t = request(cfg, s, ADMIN, DescribeQuorumRequest())
    assert list(sent_to(t)) == [ADMIN]
    assert by_replica(reply(t)) == DescribeQuorumResponse(
        LeaderId=2,
        LeaderEpoch=5,
        HighWatermark=0,
        CurrentVoters=(
            ReplicaState(ReplicaId=1, LogEndOffset=-1),
            ReplicaState(ReplicaId=2, LogEndOffset=2),
            ReplicaState(ReplicaId=3, LogEndOffset=-1),
        ),
        Observers=(),
    )
    assert "DESCRIBE-REQ-2" in t.rules


# DESCRIBE-RESP-1..3 -------------------------------------------------------------------------


def test_describe_resp_1_not_leader_naming_a_leader_retries_there():
    """DESCRIBE-RESP-1: NOT_LEADER_OR_FOLLOWER with LeaderId set -> retry at that leader."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=3, leader_id=1)
    answer = sent_to(request(cfg, s, ADMIN, DescribeQuorumRequest()))[ADMIN]
    decision = describe.admin_next_step(answer)
    assert (decision.step, decision.leader_id) == (describe.AdminStep.RETRY_AT_LEADER, 1)
    assert "DESCRIBE-RESP-1" in decision.rules


def test_describe_resp_2_no_leader_backs_off_and_retries():
    """DESCRIBE-RESP-2: no leader in the response (election in progress) -> back off and retry via metadata."""
    cfg = config(2)
    s = state(Role.CANDIDATE, epoch=4, voted_id=2, granted=frozenset({2}))
    answer = sent_to(request(cfg, s, ADMIN, DescribeQuorumRequest()))[ADMIN]
    decision = describe.admin_next_step(answer)
    assert (decision.step, decision.leader_id) == (describe.AdminStep.BACKOFF_AND_RETRY, -1)
    assert "DESCRIBE-RESP-2" in decision.rules


def test_describe_resp_3_leader_answer_is_returned():
    """DESCRIBE-RESP-3: otherwise the response goes back to the application."""
    cfg = config(1)
    s = leader_state(cfg, 2, log(1, 2))
    answer = sent_to(request(cfg, s, ADMIN, DescribeQuorumRequest()))[ADMIN]
    decision = describe.admin_next_step(answer)
    assert (decision.step, decision.leader_id) == (describe.AdminStep.RETURN, 1)
    assert "DESCRIBE-RESP-3" in decision.rules
