"""Pre-vote (KIP-996, Options.pre_vote, profile kafka-4.3): ask before standing, as Kafka 4.x does.

Expected values are Kafka 4.3's behaviour as its sources state it (QuorumState.transitionToProspective,
KafkaRaftClient.handleVoteRequest / handleVoteResponse / prospectiveTransitionAfterElectionLoss,
FollowerState.canGrantVote), written out by hand.
"""

from collections import Counter

from conftest import CLUSTER_ID, config, fetch, leader_state, log, request, response, state, timer

from model.events import Send, SetTimer, TimerKind
from model.messages import FetchResponse, LeaderIdAndEpoch, VoteRequest, VoteResponse
from model.state import NodeState, Role
from spec import errors

ELECTION_TIMER = SetTimer(kind=TimerKind.ELECTION_TIMEOUT, delay_ms=1000, jitter_ms=1000)


def ask(epoch: int, candidate: int = 1, last_epoch: int = 0, last_offset: int = -1, pre_vote: bool = True) -> VoteRequest:
    return VoteRequest(
        ClusterId=CLUSTER_ID, CandidateEpoch=epoch, CandidateId=candidate, LastOffsetEpoch=last_epoch, LastOffset=last_offset, PreVote=pre_vote
    )


def answer(epoch: int, granted: bool, leader: int = -1, error: int = errors.NONE) -> VoteResponse:
    return VoteResponse(PartitionErrorCode=error, LeaderId=leader, LeaderEpoch=epoch, VoteGranted=granted)


PRE = config(1, pre_vote=True)
RECORDS = log(1, 2, 5)
FOLLOWER = state(Role.FOLLOWER, epoch=5, leader_id=2, log=RECORDS, high_watermark=2, fetching=fetch(5, RECORDS))
PROSPECTIVE = NodeState(role=Role.PROSPECTIVE, epoch=5, leader_id=2, log=RECORDS, high_watermark=2, granted=frozenset({1}))


def test_a_follower_out_of_time_asks_for_pre_votes_in_its_own_epoch_and_persists_nothing():
    t = timer(PRE, FOLLOWER, TimerKind.FETCH_TIMEOUT)
    assert t.state == PROSPECTIVE  # epoch 5, leader 2 and no vote: the quorum-state file is as it was
    pre_vote = ask(5, 1, last_epoch=5, last_offset=2)
    assert Counter(t.outputs) == Counter([Send(destination=2, message=pre_vote), Send(destination=3, message=pre_vote), ELECTION_TIMER])
    assert "ELECT-1" in t.rules and "QSTATE-2" not in t.rules


def test_without_pre_vote_the_same_timeout_stands_at_once():
    t = timer(config(1), FOLLOWER, TimerKind.FETCH_TIMEOUT)
    assert (t.state.role, t.state.epoch, t.state.voted_id) == (Role.CANDIDATE, 6, 1)


def test_a_majority_of_pre_votes_makes_a_candidate_in_the_next_epoch():
    t = response(PRE, PROSPECTIVE, 3, answer(5, True, leader=2), ask(5, 1, 5, 2))
    assert (t.state.role, t.state.epoch, t.state.leader_id, t.state.voted_id) == (Role.CANDIDATE, 6, -1, 1)
    vote = ask(6, 1, last_epoch=5, last_offset=2, pre_vote=False)
    assert Counter(t.outputs) == Counter([Send(destination=2, message=vote), Send(destination=3, message=vote), ELECTION_TIMER])


def test_refused_by_a_majority_a_prospective_follows_its_leader_again():
    refused_once = response(PRE, PROSPECTIVE, 2, answer(5, False, leader=2), ask(5, 1, 5, 2)).state
    assert refused_once.role == Role.PROSPECTIVE and refused_once.refused == {2}
    t = response(PRE, refused_once, 3, answer(5, False, leader=2), ask(5, 1, 5, 2))
    assert (t.state.role, t.state.epoch, t.state.leader_id) == (Role.FOLLOWER, 5, 2)
    assert Send(destination=2, message=fetch(5, RECORDS)) in t.outputs


def test_refused_by_a_majority_without_a_leader_it_waits_unattached_keeping_its_vote():
    voted = NodeState(role=Role.PROSPECTIVE, epoch=5, voted_id=1, log=RECORDS, granted=frozenset({1}), refused=frozenset({2}))
    t = response(PRE, voted, 3, answer(5, False), ask(5, 1, 5, 2))
    assert (t.state.role, t.state.epoch, t.state.leader_id, t.state.voted_id) == (Role.UNATTACHED, 5, -1, 1)
    assert t.outputs == (ELECTION_TIMER,)


def test_a_prospective_out_of_time_asks_again_or_follows_the_leader_it_knew():
    leaderless = NodeState(role=Role.PROSPECTIVE, epoch=5, log=RECORDS, granted=frozenset({1}), refused=frozenset({2}))
    again = timer(PRE, leaderless, TimerKind.ELECTION_TIMEOUT)
    assert again.state == NodeState(role=Role.PROSPECTIVE, epoch=5, log=RECORDS, granted=frozenset({1}))  # the refusal is forgotten
    assert Counter(again.outputs) == Counter([Send(destination=2, message=ask(5, 1, 5, 2)), Send(destination=3, message=ask(5, 1, 5, 2)), ELECTION_TIMER])
    back = timer(PRE, PROSPECTIVE, TimerKind.ELECTION_TIMEOUT)
    assert (back.state.role, back.state.leader_id) == (Role.FOLLOWER, 2)


def test_a_pre_vote_is_granted_to_an_up_to_date_log_and_binds_nothing():
    """An unattached voter that voted for 3 still grants 2's pre-vote; its vote stays 3's."""
    voted = state(Role.UNATTACHED, epoch=5, voted_id=3, log=RECORDS)
    t = request(PRE, voted, 2, ask(5, 2, last_epoch=5, last_offset=2))
    assert t.state == voted
    assert t.outputs == (Send(destination=2, message=answer(5, True)),)
    behind = request(PRE, voted, 2, ask(5, 2, last_epoch=2, last_offset=1))
    assert behind.state == voted and behind.outputs == (Send(destination=2, message=answer(5, False)),)


def test_a_follower_grants_a_pre_vote_only_until_it_hears_from_its_leader():
    pre_vote = ask(5, 3, last_epoch=5, last_offset=2)
    fresh = request(PRE, FOLLOWER, 3, pre_vote)
    assert fresh.outputs == (Send(destination=3, message=answer(5, True, leader=2)),)
    served = response(PRE, FOLLOWER, 2, FetchResponse(HighWatermark=2, CurrentLeader=LeaderIdAndEpoch(LeaderId=2, LeaderEpoch=5)), fetch(5, RECORDS))
    assert served.state.fetched_from_leader
    heard = request(PRE, served.state, 3, pre_vote)
    assert heard.outputs == (Send(destination=3, message=answer(5, False, leader=2)),)


def test_a_leader_never_grants_a_pre_vote():
    cfg = config(2, pre_vote=True)
    leader = leader_state(cfg, 5, RECORDS)
    t = request(cfg, leader, 1, ask(5, 1, last_epoch=5, last_offset=2))
    assert t.state == leader and t.outputs == (Send(destination=1, message=answer(5, False, leader=2)),)


def test_a_pre_vote_of_a_later_epoch_moves_the_voter_to_that_epoch_as_kafka_does():
    t = request(PRE, FOLLOWER, 3, ask(7, 3, last_epoch=5, last_offset=2))
    assert (t.state.role, t.state.epoch, t.state.leader_id, t.state.voted_id) == (Role.UNATTACHED, 7, -1, -1)
    assert Send(destination=3, message=answer(7, True)) in t.outputs


def test_a_pre_vote_may_name_its_own_epoch_as_its_last_one_but_not_a_later_one():
    voter = state(Role.UNATTACHED, epoch=5, log=RECORDS)
    same = request(PRE, voter, 2, ask(5, 2, last_epoch=5, last_offset=2))
    assert same.outputs[-1].message.PartitionErrorCode == errors.NONE
    later = request(PRE, voter, 2, ask(5, 2, last_epoch=6, last_offset=2))
    assert later.state == voter and later.outputs[-1].message.PartitionErrorCode == errors.INVALID_REQUEST
    assert "COMMON-4" in later.rules


def test_a_voter_without_pre_votes_answers_one_unsupported_and_the_prospective_stands():
    voter = state(Role.UNATTACHED, epoch=5, log=RECORDS)
    t = request(config(2), voter, 1, ask(5, 1, last_epoch=5, last_offset=2))
    assert t.state == voter
    assert t.outputs[-1].message.ErrorCode == errors.UNSUPPORTED_VERSION and not t.outputs[-1].message.VoteGranted
    stood = response(PRE, PROSPECTIVE, 2, VoteResponse(ErrorCode=errors.UNSUPPORTED_VERSION), ask(5, 1, 5, 2))
    assert (stood.state.role, stood.state.epoch) == (Role.CANDIDATE, 6)


def test_a_resigned_leader_asks_in_the_next_epoch():
    resigned = state(Role.RESIGNED, epoch=5, leader_id=1, voted_id=1, log=RECORDS)
    t = timer(PRE, resigned, TimerKind.ELECTION_TIMEOUT)
    assert t.state == NodeState(role=Role.PROSPECTIVE, epoch=6, log=RECORDS, granted=frozenset({1}))
    assert Send(destination=2, message=ask(6, 1, 5, 2)) in t.outputs


def test_a_single_voter_asks_nobody_and_leads():
    cfg = config(1, voters=(1,), pre_vote=True)
    t = timer(cfg, state(Role.UNATTACHED, epoch=5), TimerKind.ELECTION_TIMEOUT)
    assert (t.state.role, t.state.epoch) == (Role.LEADER, 6)


def test_a_prospective_that_grants_a_real_vote_is_bound_and_asks_afresh():
    """Voter 2 stands in epoch 5 (its pre-vote won); prospective 1, in epoch 5 too, grants its real vote."""
    records = log(1, 2)
    leaderless = NodeState(role=Role.PROSPECTIVE, epoch=5, log=records, granted=frozenset({1, 3}), refused=frozenset())
    t = request(PRE, leaderless, 2, ask(5, 2, last_epoch=2, last_offset=1, pre_vote=False))
    assert t.state == NodeState(role=Role.PROSPECTIVE, epoch=5, voted_id=2, log=records, granted=frozenset({1}))
    assert Send(destination=2, message=answer(5, True)) in t.outputs and ELECTION_TIMER in t.outputs
