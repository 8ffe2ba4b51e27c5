import msgspec

"""Vote: handling of a candidate's request at voters and observers, and of the answers at the candidate."""

from collections import Counter

import pytest
from conftest import CLUSTER_ID, config, leader_state, log, request, response, state, timer

from model.events import Send, SetTimer, Shutdown, TimerKind
from model.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    LeaderChangeMessage,
    Record,
    VoteRequest,
    VoteResponse,
)
from model.state import NodeState, Role
from spec import errors


def vote(epoch: int, candidate: int, last_epoch: int = 0, last_offset: int = -1, cluster_id: str | None = CLUSTER_ID) -> VoteRequest:
    return VoteRequest(
        ClusterId=cluster_id,
        CandidateEpoch=epoch,
        CandidateId=candidate,
        LastOffsetEpoch=last_epoch,
        LastOffset=last_offset,
    )


def answer(epoch: int, granted: bool, leader: int = -1, error: int = errors.NONE, top_error: int = errors.NONE) -> VoteResponse:
    return VoteResponse(ErrorCode=top_error, PartitionErrorCode=error, LeaderId=leader, LeaderEpoch=epoch, VoteGranted=granted)


def outputs(t) -> Counter:
    return Counter(t.outputs)


# VOTER-ONLY-1


def test_voter_only_1_observer_rejects_vote_without_changing_state():
    """VOTER-ONLY-1: an observer answers Vote with INCONSISTENT_VOTER_SET and keeps its state."""
    cfg = config(4, voters=(1, 2, 3), observers=(4,))
    s = state(Role.OBSERVER, epoch=3, leader_id=1, log=log(1, 3))
    t = request(cfg, s, 2, vote(4, 2, 3, 1))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(3, False, leader=1, error=errors.INCONSISTENT_VOTER_SET)),)
    assert "VOTER-ONLY-1" in t.rules
    assert "COMMON-2" in t.rules


# COMMON-2: responses piggy-back the responder's leader and epoch


@pytest.mark.parametrize(
    "s, leader",
    [
        (state(Role.FOLLOWER, epoch=5, leader_id=2), 2),
        (state(Role.UNATTACHED, epoch=5, voted_id=2), -1),
        (state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1})), -1),
    ],
    ids=["follower-knows-leader", "voted-no-leader", "candidate-no-leader"],
)
def test_common_2_vote_response_carries_responder_leader_and_epoch(s, leader):
    """COMMON-2: a Vote response piggy-backs the responder's LeaderId (-1 when unknown) and LeaderEpoch."""
    cfg = config(1)
    t = request(cfg, s, 3, vote(5, 3))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=answer(5, False, leader=leader)),)
    assert "COMMON-2" in t.rules


# COMMON-3: a larger epoch in a Vote response


def test_common_3_vote_response_with_larger_epoch_and_leader_makes_follower():
    """COMMON-3: a larger epoch naming a leader in a response makes the node that leader's follower."""
    cfg = config(1)
    records = log(1, 5)
    s = state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=records)
    t = response(cfg, s, 2, answer(7, False, leader=3), vote(5, 1, 5, 1))
    fetch = FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=1, CurrentLeaderEpoch=7, FetchOffset=2, LastFetchedEpoch=5)
    assert t.state == NodeState(role=Role.FOLLOWER, epoch=7, leader_id=3, voted_id=-1, log=records, fetching=fetch)
    assert t.outputs == (Send(destination=3, message=fetch),)
    assert "COMMON-3" in t.rules


def test_common_3_vote_response_with_larger_epoch_and_no_leader_makes_unattached():
    """COMMON-3: a larger epoch with LeaderId -1 in a response makes the node unattached at that epoch."""
    cfg = config(1)
    records = log(1, 5)
    s = state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=records)
    t = response(cfg, s, 2, answer(7, False), vote(5, 1, 5, 1))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=7, leader_id=-1, voted_id=-1, log=records)
    assert t.outputs == ()
    assert "COMMON-3" in t.rules


# VOTE-REQ-1


def test_vote_req_1_cluster_id_mismatch_is_rejected():
    """VOTE-REQ-1: a non-null ClusterId differing from ours is rejected with INCONSISTENT_CLUSTER_ID."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5)
    t = request(cfg, s, 2, vote(6, 2, cluster_id="another-cluster"))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(5, False, top_error=errors.INCONSISTENT_CLUSTER_ID)),)
    assert "VOTE-REQ-1" in t.rules
    assert not any(type(o) is Shutdown for o in t.outputs)


def test_vote_req_1_null_cluster_id_skips_the_check():
    """VOTE-REQ-1: a null ClusterId skips the cluster-id check, so the vote is granted."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5)
    t = request(cfg, s, 2, vote(6, 2, cluster_id=None))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, voted_id=2)
    assert t.outputs == (Send(destination=2, message=answer(6, True)),)
    assert "VOTE-REQ-4B" in t.rules
    assert "VOTE-REQ-1" not in t.rules


def test_vote_req_1_receiver_without_cached_cluster_id_skips_the_check():
    """VOTE-REQ-1/BOOT-2: a receiver with no cached cluster id has nothing to conflict with and grants."""
    cfg = config(1, cluster_id=None)
    s = state(Role.UNATTACHED, epoch=5)
    t = request(cfg, s, 2, vote(6, 2, cluster_id="any-cluster"))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, voted_id=2)
    assert t.outputs == (Send(destination=2, message=answer(6, True)),)
    assert "VOTE-REQ-4B" in t.rules


# VOTE-REQ-2 / COMMON-1


@pytest.mark.parametrize(
    "s, leader",
    [
        (state(Role.FOLLOWER, epoch=5, leader_id=2, log=log(1, 5)), 2),
        (state(Role.UNATTACHED, epoch=5, voted_id=2, log=log(1, 5)), -1),
        (state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1, 5)), -1),
    ],
    ids=["follower", "voted", "candidate"],
)
def test_vote_req_2_stale_candidate_epoch_is_fenced(s, leader):
    """VOTE-REQ-2/COMMON-1: CandidateEpoch below ours is rejected with FENCED_LEADER_EPOCH."""
    cfg = config(1)
    t = request(cfg, s, 3, vote(4, 3, 3, 9))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=answer(5, False, leader=leader, error=errors.FENCED_LEADER_EPOCH)),)
    assert "VOTE-REQ-2" in t.rules
    assert "COMMON-1" in t.rules


def test_vote_req_2_stale_epoch_at_leader_is_fenced():
    """VOTE-REQ-2/COMMON-1: a leader fences a Vote of an older epoch and stays leader."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = request(cfg, s, 2, vote(4, 2, 3, 7))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(5, False, leader=1, error=errors.FENCED_LEADER_EPOCH)),)
    assert "VOTE-REQ-2" in t.rules
    assert "COMMON-1" in t.rules


# VOTE-REQ-3 / ELECT-5


def test_vote_req_3_same_epoch_same_candidate_is_granted_again():
    """VOTE-REQ-3: in an epoch already voted in, the recorded candidate is granted (again)."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, voted_id=2, log=log(1, 5))
    t = request(cfg, s, 2, vote(5, 2, 4, 1))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(5, True)),)
    assert "VOTE-REQ-3" in t.rules


def test_vote_req_3_same_epoch_other_candidate_is_rejected():
    """VOTE-REQ-3/ELECT-5: in an epoch already voted in, another candidate is rejected (NONE), even with a longer log."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, voted_id=2, log=log(1, 4))
    t = request(cfg, s, 3, vote(5, 3, 4, 9))
    assert t.state == s
    assert t.state.voted_id == 2
    assert t.outputs == (Send(destination=3, message=answer(5, False)),)
    assert "VOTE-REQ-3" in t.rules
    assert "ELECT-5" in t.rules


def test_vote_req_3_candidate_rejects_rival_of_its_own_epoch():
    """VOTE-REQ-3/ELECT-5: a candidate has voted for itself and rejects a rival candidate of its epoch."""
    cfg = config(1)
    s = state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1))
    t = request(cfg, s, 2, vote(5, 2, 4, 3))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(5, False)),)
    assert "VOTE-REQ-3" in t.rules
    assert "ELECT-5" in t.rules


def test_vote_req_3_vote_recorded_in_a_larger_epoch_request_is_kept():
    """VOTE-REQ-3/ELECT-5: after granting 2 in epoch 6, a Vote from 3 in epoch 6 is rejected."""
    cfg = config(1)
    s = state(Role.FOLLOWER, epoch=5, leader_id=3, log=log(1, 5))
    first = request(cfg, s, 2, vote(6, 2, 5, 1))
    assert first.state == NodeState(role=Role.UNATTACHED, epoch=6, voted_id=2, log=log(1, 5))
    second = request(cfg, first.state, 3, vote(6, 3, 5, 4))
    assert second.state == first.state
    assert second.outputs == (Send(destination=3, message=answer(6, False)),)
    assert "VOTE-REQ-3" in second.rules


# VOTE-REQ-3A


def test_vote_req_3a_same_epoch_no_vote_known_leader_is_rejected():
    """VOTE-REQ-3A: same epoch, no vote recorded, a leader known for it: reject with NONE."""
    cfg = config(1)
    s = state(Role.FOLLOWER, epoch=5, leader_id=2, log=log(1, 5))
    t = request(cfg, s, 3, vote(5, 3, 4, 1))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=answer(5, False, leader=2)),)
    assert "VOTE-REQ-3A" in t.rules


def test_vote_req_3a_same_epoch_no_vote_no_leader_applies_log_check_grant():
    """VOTE-REQ-3A: same epoch, no vote, no leader: an up-to-date candidate is granted as for a larger epoch."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, log=log(1, 4))
    t = request(cfg, s, 3, vote(5, 3, 4, 1))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=5, voted_id=3, log=log(1, 4))
    assert t.outputs == (Send(destination=3, message=answer(5, True)),)
    assert "VOTE-REQ-4B" in t.rules
    assert "VOTE-REQ-3A" not in t.rules


def test_vote_req_3a_same_epoch_no_vote_no_leader_applies_log_check_reject():
    """VOTE-REQ-3A: same epoch, no vote, no leader: a candidate behind our log is rejected (NONE)."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, log=log(1, 5))
    t = request(cfg, s, 3, vote(5, 3, 1, 0))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=answer(5, False)),)
    assert "VOTE-REQ-4B" in t.rules


def test_vote_req_3a_same_epoch_no_vote_no_leader_applies_voter_check():
    """VOTE-REQ-3A: same epoch, no vote, no leader: a non-voter candidate gets INCONSISTENT_VOTER_SET (4A)."""
    cfg = config(1, observers=(4,))
    s = state(Role.UNATTACHED, epoch=5)
    t = request(cfg, s, 4, vote(5, 4))
    election = SetTimer(kind=TimerKind.ELECTION_TIMEOUT, delay_ms=1000, jitter_ms=1000)
    assert t.state == s
    assert outputs(t) == Counter([Send(destination=4, message=answer(5, False, error=errors.INCONSISTENT_VOTER_SET)), election])
    assert "VOTE-REQ-4A" in t.rules


# VOTE-REQ-4


def _resigned(cfg):
    return state(Role.RESIGNED, epoch=5, leader_id=1, voted_id=1, log=log(1, 5), high_watermark=2)


@pytest.mark.parametrize(
    "make",
    [
        lambda cfg: leader_state(cfg, 5, log(1, 5), high_watermark=2, endorsed=frozenset({1, 2}), fetched=frozenset({1, 3})),
        lambda cfg: state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1, 3}), log=log(1, 5), high_watermark=2),
        lambda cfg: state(
            Role.FOLLOWER,
            epoch=5,
            leader_id=3,
            log=log(1, 5),
            high_watermark=2,
            fetching=FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=1, CurrentLeaderEpoch=5, FetchOffset=2, LastFetchedEpoch=5),
        ),
        _resigned,
        lambda cfg: state(Role.UNATTACHED, epoch=5, voted_id=3, log=log(1, 5), high_watermark=2),
    ],
    ids=["leader", "candidate", "follower", "resigned", "voted"],
)
def test_vote_req_4_larger_epoch_steps_down_to_unattached_and_grants(make):
    """VOTE-REQ-4: a larger CandidateEpoch is adopted as unattached (stepping down) before the 4A/4B checks."""
    cfg = config(1)
    s = make(cfg)
    t = request(cfg, s, 2, vote(6, 2, 5, 1))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, leader_id=-1, voted_id=2, log=log(1, 5), high_watermark=2)
    assert t.outputs == (Send(destination=2, message=answer(6, True)),)
    assert "VOTE-REQ-4" in t.rules
    assert "VOTE-REQ-4B" in t.rules


def test_vote_req_4_larger_epoch_is_kept_when_vote_is_rejected():
    """VOTE-REQ-4: the epoch bump stands even when the log check then rejects the candidate."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5), high_watermark=2)
    t = request(cfg, s, 2, vote(6, 2, 1, 0))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, leader_id=-1, voted_id=-1, log=log(1, 5), high_watermark=2)
    assert t.outputs == (Send(destination=2, message=answer(6, False)),)
    assert "VOTE-REQ-4" in t.rules


# VOTE-REQ-4A


def test_vote_req_4a_non_voter_candidate_is_rejected_and_epoch_kept():
    """VOTE-REQ-4A: a CandidateId outside the voters gets INCONSISTENT_VOTER_SET; the epoch bump is kept and the election timer armed."""
    cfg = config(1, observers=(4,))
    s = leader_state(cfg, 5, log(1, 5))
    t = request(cfg, s, 4, vote(6, 4, 5, 1))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, leader_id=-1, voted_id=-1, log=log(1, 5))
    election = SetTimer(kind=TimerKind.ELECTION_TIMEOUT, delay_ms=1000, jitter_ms=1000)
    reject = Send(destination=4, message=answer(6, False, error=errors.INCONSISTENT_VOTER_SET))
    assert outputs(t) == Counter([reject, election])
    assert "VOTE-REQ-4" in t.rules
    assert "VOTE-REQ-4A" in t.rules


def test_vote_req_4a_receiver_then_starts_its_own_election_on_timeout():
    """VOTE-REQ-4A: the receiver starts a new election itself when its election timer fires."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, log=log(1, 5))
    rejected = request(cfg, s, 9, vote(6, 9, 5, 1))
    assert "VOTE-REQ-4A" in rejected.rules
    assert rejected.state == NodeState(role=Role.UNATTACHED, epoch=6, log=log(1, 5))
    t = timer(cfg, rejected.state, TimerKind.ELECTION_TIMEOUT)
    assert t.state.role == Role.CANDIDATE
    assert t.state.epoch == 7
    assert t.state.voted_id == 1


# VOTE-REQ-4B


def test_vote_req_4b_up_to_date_candidate_is_granted_and_vote_persisted():
    """VOTE-REQ-4B: an up-to-date candidate is granted; VotedId is recorded with the answer."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, log=log(1, 2))
    t = request(cfg, s, 2, vote(6, 2, 2, 1))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, voted_id=2, log=log(1, 2))
    assert t.outputs == (Send(destination=2, message=answer(6, True)),)
    assert "VOTE-REQ-4B" in t.rules
    assert "QSTATE-2" in t.rules


def test_vote_req_4b_candidate_behind_is_rejected_without_vote():
    """VOTE-REQ-4B: a candidate whose log is behind is rejected with NONE and no vote is recorded."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, log=log(1, 2))
    t = request(cfg, s, 2, vote(6, 2, 1, 5))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, voted_id=-1, log=log(1, 2))
    assert t.outputs == (Send(destination=2, message=answer(6, False)),)
    assert "VOTE-REQ-4B" in t.rules


def test_vote_req_4b_faulty_option_grants_without_log_check():
    """VOTE-REQ-4B: the vote_without_log_check variant grants a candidate that is behind (what the check prevents)."""
    cfg = config(1, vote_without_log_check=True)
    s = state(Role.UNATTACHED, epoch=5, log=log(1, 2))
    t = request(cfg, s, 2, vote(6, 2, 1, 5))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, voted_id=2, log=log(1, 2))
    assert t.outputs == (Send(destination=2, message=answer(6, True)),)


# VOTE-LOG-1


@pytest.mark.parametrize(
    "ours, last_epoch, last_offset, granted",
    [
        (log(1, 1, 1), 2, 0, True),  # larger last epoch wins though shorter
        (log(1, 2), 1, 9, False),  # smaller last epoch loses though longer
        (log(1, 1, 1), 1, 3, True),  # same last epoch, longer wins
        (log(1, 1, 1), 1, 1, False),  # same last epoch, shorter loses
        (log(1, 1, 2), 2, 2, True),  # equal is granted
        ((), 0, -1, True),  # both empty
        (log(1), 0, -1, False),  # empty candidate, we have a record
        ((), 1, 0, True),  # we are empty, candidate has a record
    ],
    ids=[
        "larger-epoch-shorter",
        "smaller-epoch-longer",
        "same-epoch-longer",
        "same-epoch-shorter",
        "equal",
        "both-empty",
        "candidate-empty",
        "receiver-empty",
    ],
)
def test_vote_log_1_up_to_date_comparison(ours, last_epoch, last_offset, granted):
    """VOTE-LOG-1: compare the last record's epoch first, then its offset (-1/0 for an empty log)."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=2, log=ours)
    t = request(cfg, s, 2, vote(3, 2, last_epoch, last_offset))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=3, voted_id=2 if granted else -1, log=ours)
    assert t.outputs == (Send(destination=2, message=answer(3, granted)),)
    assert "VOTE-LOG-1" in t.rules


# VOTE-RESP-1


def test_vote_resp_1_late_grant_at_leader_is_ignored():
    """VOTE-RESP-1: a Vote response reaching a node that is no longer candidate is ignored."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = response(cfg, s, 3, answer(5, True), vote(5, 1, 1, 0))
    assert t.state == s
    assert t.outputs == ()
    assert "VOTE-RESP-1" in t.rules


def test_vote_resp_1_grant_for_an_older_candidacy_is_ignored():
    """VOTE-RESP-1: a grant for the candidate's previous epoch does not count in its current one."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1, 2}), log=log(1))
    t = response(cfg, s, 3, answer(5, True), vote(5, 1, 1, 0))
    assert t.state == s
    assert t.outputs == ()
    assert "VOTE-RESP-1" in t.rules


def test_vote_resp_1_grant_at_follower_is_ignored():
    """VOTE-RESP-1: a follower (it lost the election) ignores a late grant of its epoch."""
    cfg = config(1)
    s = state(Role.FOLLOWER, epoch=5, leader_id=3, voted_id=1, log=log(1))
    t = response(cfg, s, 2, answer(5, True), vote(5, 1, 1, 0))
    assert t.state == s
    assert t.outputs == ()
    assert "VOTE-RESP-1" in t.rules


# VOTE-RESP-2


def test_vote_resp_2_grant_short_of_majority_is_recorded():
    """VOTE-RESP-2: a grant is recorded; without a majority the node stays candidate."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1}), log=log(1))
    t = response(cfg, s, 2, answer(6, True), vote(6, 1, 1, 0))
    assert t.state == NodeState(role=Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1, 2}), log=log(1))
    assert t.outputs == ()
    assert "VOTE-RESP-2" in t.rules


def test_vote_resp_2_duplicate_grant_counts_once():
    """VOTE-RESP-2: the same voter's grant delivered twice is one vote."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1, 2}), log=log(1))
    t = response(cfg, s, 2, answer(6, True), vote(6, 1, 1, 0))
    assert t.state == s
    assert t.outputs == ()
    assert "VOTE-RESP-2" in t.rules


def test_vote_resp_2_rejection_is_not_counted():
    """VOTE-RESP-2: a rejection adds no vote; the candidate stays candidate and notes the answer."""
    cfg = config(1)
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1}), log=log(1))
    t = response(cfg, s, 2, answer(6, False), vote(6, 1, 1, 0))
    assert t.state == msgspec.structs.replace(s, refused=frozenset({2}))
    assert t.outputs == ()
    assert "VOTE-RESP-2" in t.rules


def test_vote_resp_2_majority_makes_leader_with_leader_id_persisted():
    """VOTE-RESP-2: the grant completing a majority (self included) makes the candidate leader, LeaderId = self."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1, 4}), log=log(1, 2), high_watermark=1)
    t = response(cfg, s, 2, answer(6, True), vote(6, 1, 2, 1))
    change = Record(Offset=2, Epoch=6, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 2, 4)))
    assert t.state == NodeState(
        role=Role.LEADER,
        epoch=6,
        leader_id=1,
        voted_id=1,
        log=log(1, 2) + (change,),
        high_watermark=1,
        endorsed=frozenset({1}),
        fetched=frozenset({1}),
        replica_offsets=(3, -1, -1, -1, -1),
    )
    announce = BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=1, LeaderEpoch=6)
    assert outputs(t) == Counter(Send(destination=v, message=announce) for v in (2, 3, 4, 5))
    assert "VOTE-RESP-2" in t.rules
    assert "QSTATE-2" in t.rules


# VOTE-RESP-3


def test_vote_resp_3_new_leader_appends_leader_change_and_announces_epoch():
    """VOTE-RESP-3: the new leader appends LeaderChange(self, granted voters) in its epoch and sends BeginQuorumEpoch to every other voter."""
    cfg = config(1)
    records = log(1, 2, 2)
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1}), log=records)
    t = response(cfg, s, 3, answer(6, True), vote(6, 1, 2, 2))
    change = Record(Offset=3, Epoch=6, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 3)))
    assert t.state == NodeState(
        role=Role.LEADER,
        epoch=6,
        leader_id=1,
        voted_id=1,
        log=records + (change,),
        high_watermark=0,
        endorsed=frozenset({1}),
        fetched=frozenset({1}),
        replica_offsets=(4, -1, -1),
    )
    announce = BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=1, LeaderEpoch=6)
    assert outputs(t) == Counter([Send(destination=2, message=announce), Send(destination=3, message=announce)])
    assert "VOTE-RESP-3" in t.rules


def test_vote_resp_3_leader_change_lists_granted_voters_sorted():
    """VOTE-RESP-3: VotedIds are the voters that granted (self included), sorted, not the whole voter set."""
    cfg = config(3, voters=(1, 2, 3, 4, 5))
    s = state(Role.CANDIDATE, epoch=2, voted_id=3, granted=frozenset({3, 5}), log=())
    t = response(cfg, s, 1, answer(2, True), vote(2, 3))
    change = Record(Offset=0, Epoch=2, Value=LeaderChangeMessage(LeaderId=3, VotedIds=(1, 3, 5)))
    assert t.state.log == (change,)
    announce = BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=3, LeaderEpoch=2)
    assert outputs(t) == Counter(Send(destination=v, message=announce) for v in (1, 2, 4, 5))
    assert "VOTE-RESP-3" in t.rules


# BOOT-3


def test_boot_3_inconsistent_cluster_id_vote_answer_keeps_candidate():
    """BOOT-3: a Vote answered INCONSISTENT_CLUSTER_ID leaves the node candidate, no shutdown; it can still win."""
    cfg = config(1)
    s = state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1))
    t = response(cfg, s, 2, answer(5, False, top_error=errors.INCONSISTENT_CLUSTER_ID), vote(5, 1, 1, 0))
    assert t.state == s
    assert t.outputs == ()
    assert "BOOT-3" in t.rules
    won = response(cfg, t.state, 3, answer(5, True), vote(5, 1, 1, 0))
    assert won.state.role == Role.LEADER
    assert won.state.epoch == 5


def test_boot_3_inconsistent_cluster_id_from_older_epoch_keeps_candidate():
    """BOOT-3: a mismatched voter at an older epoch answering INCONSISTENT_CLUSTER_ID leaves the candidate as it was."""
    cfg = config(1)
    s = state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1))
    t = response(cfg, s, 2, answer(4, False, top_error=errors.INCONSISTENT_CLUSTER_ID), vote(5, 1, 1, 0))
    assert t.state == s
    assert t.outputs == ()
    assert "BOOT-3" in t.rules


def test_boot_3_inconsistent_cluster_id_answer_does_not_make_candidate_follow_foreign_epoch():
    """BOOT-3: the leader and epoch in an INCONSISTENT_CLUSTER_ID answer belong to another cluster; the candidate keeps trying."""
    cfg = config(1)
    s = state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1))
    t = response(cfg, s, 2, answer(9, False, leader=3, top_error=errors.INCONSISTENT_CLUSTER_ID), vote(5, 1, 1, 0))
    assert t.state == s
    assert t.outputs == ()
    assert "BOOT-3" in t.rules
