"""Elections: the timeouts that start them, becoming candidate, the leader's progress check, request retries."""

from collections import Counter

import msgspec
import pytest
from conftest import CLUSTER_ID, config, fetch, leader_state, log, request, state, timer
from conftest import response as response_step

from model import node
from model.choices import Choices
from model.config import Timing
from model.events import Committed, Response, Send, SetTimer, TimerKind
from model.messages import (
    BeginQuorumEpochRequest,
    LeaderChangeMessage,
    Record,
    VoteRequest,
    VoteResponse,
)
from model.state import NodeState, Role

TIMING = Timing()


def ask(epoch: int, candidate: int = 1, last_epoch: int = 0, last_offset: int = -1) -> VoteRequest:
    return VoteRequest(
        ClusterId=CLUSTER_ID, CandidateEpoch=epoch, CandidateId=candidate, LastOffsetEpoch=last_epoch, LastOffset=last_offset
    )


def election_timer() -> SetTimer:
    return SetTimer(kind=TimerKind.ELECTION_TIMEOUT, delay_ms=TIMING.election_timeout_ms, jitter_ms=TIMING.election_backoff_max_ms)


def candidacy(epoch: int, records, voters, me: int = 1) -> Counter:
    """The outputs of a new candidacy: Vote to every other voter, and the election timer."""
    last = records[-1] if records else None
    vote = ask(epoch, me, last.Epoch if last else 0, last.Offset if last else -1)
    return Counter([Send(destination=v, message=vote) for v in voters if v != me] + [election_timer()])


# ELECT-1


def test_elect_1_follower_fetch_timeout_starts_election():
    """ELECT-1: a follower with no successful Fetch within the fetch timeout starts an election."""
    cfg = config(1)
    records = log(1, 2, 5)
    s = state(Role.FOLLOWER, epoch=5, leader_id=2, log=records, high_watermark=2, fetching=fetch(5, records))
    t = timer(cfg, s, TimerKind.FETCH_TIMEOUT)
    assert t.state == NodeState(
        role=Role.CANDIDATE, epoch=6, leader_id=-1, voted_id=1, granted=frozenset({1}), log=records, high_watermark=2
    )
    assert Counter(t.outputs) == candidacy(6, records, (1, 2, 3))
    assert "ELECT-1" in t.rules
    assert "QSTATE-2" in t.rules


# ELECT-2


def test_elect_2_candidate_election_timeout_starts_new_election():
    """ELECT-2: a candidate without a majority at its election timeout starts a new election in epoch + 1."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    records = log(1, 1)
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1, 4}), log=records)
    t = timer(cfg, s, TimerKind.ELECTION_TIMEOUT)
    assert t.state == NodeState(role=Role.CANDIDATE, epoch=7, leader_id=-1, voted_id=1, granted=frozenset({1}), log=records)
    assert Counter(t.outputs) == candidacy(7, records, (1, 2, 3, 4, 5))
    assert "ELECT-2" in t.rules


# ELECT-3


@pytest.mark.parametrize("voted", [-1, 2], ids=["no-vote", "voted"])
def test_elect_3_unattached_election_timeout_makes_candidate(voted):
    """ELECT-3: an unattached voter, with or without a vote, becomes candidate when its election timeout expires."""
    cfg = config(1)
    records = log(1, 3)
    s = state(Role.UNATTACHED, epoch=4, voted_id=voted, log=records)
    t = timer(cfg, s, TimerKind.ELECTION_TIMEOUT)
    assert t.state == NodeState(role=Role.CANDIDATE, epoch=5, leader_id=-1, voted_id=1, granted=frozenset({1}), log=records)
    assert Counter(t.outputs) == candidacy(5, records, (1, 2, 3))
    assert "ELECT-3" in t.rules


def test_elect_3_fresh_cluster_first_election():
    """ELECT-3: a bootstrapped voter (epoch 0, empty log) becomes candidate of epoch 1 with an empty-log Vote."""
    cfg = config(2)
    t = timer(cfg, state(Role.UNATTACHED), TimerKind.ELECTION_TIMEOUT)
    assert t.state == NodeState(role=Role.CANDIDATE, epoch=1, voted_id=2, granted=frozenset({2}))
    vote = ask(1, 2, 0, -1)
    assert Counter(t.outputs) == Counter([Send(destination=1, message=vote), Send(destination=3, message=vote), election_timer()])
    assert "ELECT-3" in t.rules


# ELECT-4


def test_elect_4_vote_request_describes_last_record():
    """ELECT-4: epoch + 1, vote for self, persisted; Vote to every other voter with the last record's epoch and offset."""
    cfg = config(3, voters=(1, 2, 3, 4, 5))
    records = log(1, 1, 2, 4, 4)
    s = state(Role.UNATTACHED, epoch=4, log=records)
    t = timer(cfg, s, TimerKind.ELECTION_TIMEOUT)
    assert (t.state.role, t.state.epoch, t.state.voted_id, t.state.leader_id) == (Role.CANDIDATE, 5, 3, -1)
    vote = ask(5, 3, 4, 4)
    sent = [o for o in t.outputs if type(o) is Send]
    assert Counter(sent) == Counter(Send(destination=v, message=vote) for v in (1, 2, 4, 5))
    assert "ELECT-4" in t.rules
    assert "QSTATE-2" in t.rules


def test_elect_4_self_vote_counts_toward_majority():
    """ELECT-4: the candidate's own vote is counted (granted = {self})."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=2)
    t = timer(cfg, s, TimerKind.ELECTION_TIMEOUT)
    assert t.state.granted == frozenset({1})
    assert "ELECT-4" in t.rules


# ELECT-5


def test_elect_5_voted_node_keeps_its_vote_in_the_epoch():
    """ELECT-5: a voter that voted for 2 in epoch 5 refuses 3 in epoch 5 and keeps VotedId 2."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, voted_id=2)
    t = request(cfg, s, 3, ask(5, 3, 4, 10))
    assert t.state == s
    assert t.outputs == (
        Send(destination=3, message=VoteResponse(ErrorCode=0, PartitionErrorCode=0, LeaderId=-1, LeaderEpoch=5, VoteGranted=False)),
    )
    assert "ELECT-5" in t.rules


def test_elect_5_follower_keeps_its_vote_when_it_learns_the_leader():
    """ELECT-5: learning the leader of the epoch it voted in does not change the node's vote."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=5, voted_id=2)
    t = request(cfg, s, 2, BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=2, LeaderEpoch=5))
    assert t.state.role == Role.FOLLOWER
    assert t.state.voted_id == 2
    later = request(cfg, t.state, 3, ask(5, 3, 4, 9))
    assert later.state.voted_id == 2
    assert "ELECT-5" in later.rules


# ELECT-6


def test_elect_6_new_candidacy_arms_election_timer_with_backoff():
    """ELECT-6: a new election emits the election timer: election_timeout_ms with jitter up to election_backoff_max_ms."""
    cfg = config(1)
    t = timer(cfg, state(Role.UNATTACHED, epoch=3), TimerKind.ELECTION_TIMEOUT)
    timers = [o for o in t.outputs if type(o) is SetTimer]
    assert timers == [SetTimer(kind=TimerKind.ELECTION_TIMEOUT, delay_ms=1000, jitter_ms=1000)]
    assert "ELECT-6" in t.rules


@pytest.mark.parametrize(
    "role, kind, fields",
    [
        (Role.UNATTACHED, TimerKind.ELECTION_TIMEOUT, {}),
        (Role.CANDIDATE, TimerKind.ELECTION_TIMEOUT, {"voted_id": 1, "granted": frozenset({1})}),
        (Role.FOLLOWER, TimerKind.FETCH_TIMEOUT, {"leader_id": 2}),
        (Role.RESIGNED, TimerKind.ELECTION_TIMEOUT, {"leader_id": 1, "voted_id": 1}),
    ],
    ids=["unattached", "candidate", "follower", "resigned"],
)
def test_elect_6_backoff_bound_comes_from_configured_timing(role, kind, fields):
    """ELECT-6: the timer uses the node's configured quorum.election.timeout.ms and quorum.election.backoff.max.ms."""
    cfg = msgspec.structs.replace(config(1), timing=Timing(election_timeout_ms=1500, election_backoff_max_ms=300))
    t = timer(cfg, state(role, epoch=3, **fields), kind)
    timers = [o for o in t.outputs if type(o) is SetTimer]
    assert timers == [SetTimer(kind=TimerKind.ELECTION_TIMEOUT, delay_ms=1500, jitter_ms=300)]
    assert t.state.role == Role.CANDIDATE
    assert "ELECT-6" in t.rules


# VOTE-RESP-3: a single voter elects itself


def test_vote_resp_3_single_voter_becomes_leader_at_once_and_commits_leader_change():
    """VOTE-RESP-3: a single voter's election timeout makes it leader at once; its LeaderChange record commits."""
    cfg = config(1, voters=(1,))
    t = timer(cfg, state(Role.UNATTACHED), TimerKind.ELECTION_TIMEOUT)
    change = Record(Offset=0, Epoch=1, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1,)))
    assert t.state == NodeState(
        role=Role.LEADER,
        epoch=1,
        leader_id=1,
        voted_id=1,
        log=(change,),
        high_watermark=1,
        endorsed=frozenset({1}),
        fetched=frozenset({1}),
        replica_offsets=(1,),
    )
    assert t.outputs == (Committed(HighWatermark=1),)
    assert "ELECT-3" in t.rules
    assert "ELECT-4" in t.rules


def test_vote_resp_3_single_voter_with_records_appends_leader_change_after_them():
    """VOTE-RESP-3: the LeaderChange record goes at the log end, in the new epoch, and commits the whole log."""
    cfg = config(1, voters=(1,), observers=(2,))
    records = log(1, 1)
    t = timer(cfg, state(Role.RESIGNED, epoch=1, leader_id=1, voted_id=1, log=records, high_watermark=0), TimerKind.ELECTION_TIMEOUT)
    change = Record(Offset=2, Epoch=2, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1,)))
    assert t.state.role == Role.LEADER
    assert t.state.log == records + (change,)
    assert t.state.high_watermark == 3
    assert t.state.replica_offsets == (3, -1)
    assert t.outputs == (Committed(HighWatermark=3),)
    assert "RESIGN-1" in t.rules


def test_vote_resp_3_single_voter_election_cites_leader_rules():
    """VOTE-RESP-2/3: the single voter's immediate election is the VOTE-RESP-2/VOTE-RESP-3 branch."""
    cfg = config(1, voters=(1,))
    t = timer(cfg, state(Role.UNATTACHED), TimerKind.ELECTION_TIMEOUT)
    assert t.state.role == Role.LEADER
    assert "VOTE-RESP-2" in t.rules
    assert "VOTE-RESP-3" in t.rules


# PROGRESS-1


def test_progress_1_leader_with_majority_fetches_stays_leader_and_resets():
    """PROGRESS-1: a leader fetched from by a majority (itself counted) since the last check stays leader; the set restarts."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5), fetched=frozenset({1, 3}))
    t = timer(cfg, s, TimerKind.PROGRESS_TIMEOUT)
    assert t.state == leader_state(cfg, 5, log(1, 5), fetched=frozenset({1}))
    assert t.outputs == ()
    assert "PROGRESS-1" in t.rules


def test_progress_1_fetch_from_a_voter_counts_toward_progress():
    """PROGRESS-1: a voter's Fetch in the current epoch keeps the leader leading through the next progress check."""
    cfg = config(1)
    records = log(1, 5)
    s = leader_state(cfg, 5, records)
    fetched = request(cfg, s, 2, fetch(5, records, replica=2)).state
    assert fetched.fetched == frozenset({1, 2})
    t = timer(cfg, fetched, TimerKind.PROGRESS_TIMEOUT)
    assert t.state.role == Role.LEADER
    assert t.state.fetched == frozenset({1})
    assert t.outputs == ()
    assert "PROGRESS-1" in t.rules


def test_progress_1_leader_without_majority_fetches_becomes_candidate():
    """PROGRESS-1: a leader without Fetches from a majority since the last check becomes candidate at epoch + 1."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    records = log(1, 5)
    s = leader_state(cfg, 5, records, high_watermark=1, fetched=frozenset({1, 4}), endorsed=frozenset({1, 4}))
    t = timer(cfg, s, TimerKind.PROGRESS_TIMEOUT)
    assert t.state == NodeState(
        role=Role.CANDIDATE, epoch=6, leader_id=-1, voted_id=1, granted=frozenset({1}), log=records, high_watermark=1
    )
    vote = ask(6, 1, 5, 1)
    sent = [o for o in t.outputs if type(o) is Send]
    assert Counter(sent) == Counter(Send(destination=v, message=vote) for v in (2, 3, 4, 5))
    assert "PROGRESS-1" in t.rules


def test_progress_1_observer_fetches_do_not_count():
    """PROGRESS-1: only voters' Fetches count toward the leader's progress (observers never do)."""
    cfg = config(1, observers=(4,))
    records = log(1, 5)
    s = leader_state(cfg, 5, records)
    fetched = request(cfg, s, 4, fetch(5, records, replica=4)).state
    assert fetched.fetched == frozenset({1})
    t = timer(cfg, fetched, TimerKind.PROGRESS_TIMEOUT)
    assert t.state.role == Role.CANDIDATE
    assert t.state.epoch == 6
    assert "PROGRESS-1" in t.rules


def test_progress_1_fenced_fetch_does_not_count():
    """PROGRESS-1: only Fetches that pass the epoch checks count; a stale-epoch Fetch leaves the leader cut off."""
    cfg = config(1)
    records = log(1, 5)
    s = leader_state(cfg, 5, records)
    fenced = request(cfg, s, 2, fetch(4, records, replica=2))
    assert fenced.state.fetched == frozenset({1})
    t = timer(cfg, fenced.state, TimerKind.PROGRESS_TIMEOUT)
    assert t.state.role == Role.CANDIDATE
    assert t.state.epoch == 6
    assert "PROGRESS-1" in t.rules


# RETRY-1


def test_retry_1_follower_re_sends_fetch():
    """RETRY-1: on the request timeout a follower re-sends its Fetch to the leader."""
    cfg = config(1)
    records = log(1, 5)
    s = state(Role.FOLLOWER, epoch=5, leader_id=2, log=records, fetching=fetch(5, records))
    t = timer(cfg, s, TimerKind.REQUEST_TIMEOUT)
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=fetch(5, records)),)
    assert "RETRY-1" in t.rules


def test_retry_1_observer_re_sends_fetch():
    """RETRY-1: on the request timeout an observer re-sends its Fetch to the leader it follows."""
    cfg = config(4, observers=(4,))
    records = log(1, 5)
    s = state(Role.OBSERVER, epoch=5, leader_id=3, log=records, fetching=fetch(5, records, replica=4))
    t = timer(cfg, s, TimerKind.REQUEST_TIMEOUT)
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=fetch(5, records, replica=4)),)
    assert "RETRY-1" in t.rules


def test_retry_1_candidate_re_sends_vote_only_to_voters_not_granted():
    """RETRY-1: a candidate re-sends Vote only to the voters that have not granted."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    records = log(1, 2)
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1, 3}), log=records)
    t = timer(cfg, s, TimerKind.REQUEST_TIMEOUT)
    assert t.state == s
    vote = ask(6, 1, 2, 1)
    assert Counter(t.outputs) == Counter(Send(destination=v, message=vote) for v in (2, 4, 5))
    assert "RETRY-1" in t.rules


def test_retry_1_leader_re_sends_begin_quorum_epoch_to_non_endorsers():
    """RETRY-1: a leader re-sends BeginQuorumEpoch to the voters that have not endorsed it."""
    cfg = config(1, voters=(1, 2, 3, 4, 5), observers=(6,))
    s = leader_state(cfg, 5, log(1, 5), endorsed=frozenset({1, 2, 5}))
    t = timer(cfg, s, TimerKind.REQUEST_TIMEOUT)
    assert t.state == s
    announce = BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=1, LeaderEpoch=5)
    assert Counter(t.outputs) == Counter(Send(destination=v, message=announce) for v in (3, 4))
    assert "RETRY-1" in t.rules


def test_retry_1_candidate_does_not_re_send_vote_to_voters_that_answered():
    """RETRY-1: a candidate re-sends Vote only to the voters that have not answered in its epoch (a refusal is an answer)."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    records = log(1, 2)
    s = state(Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1, 3}), log=records)
    vote = ask(6, 1, 2, 1)
    refused = node.step(
        cfg,
        s,
        Response(
            source=2,
            message=VoteResponse(ErrorCode=0, PartitionErrorCode=0, LeaderId=-1, LeaderEpoch=6, VoteGranted=False),
            request=vote,
        ),
    )
    assert refused.state.role == Role.CANDIDATE
    t = timer(cfg, refused.state, TimerKind.REQUEST_TIMEOUT)
    assert Counter(t.outputs) == Counter(Send(destination=v, message=vote) for v in (4, 5))
    assert "RETRY-1" in t.rules


def test_elect_6_a_candidate_refused_by_a_majority_may_stand_again_at_once():
    """ELECT-6's choice point: the random backoff after a lost election may draw 0 (Kafka 3.9's
    binaryExponentialElectionBackoffMs can): "at-once" stands in epoch + 1 on the losing answer;
    the default waits for the election timer."""
    refused_once = NodeState(role=Role.CANDIDATE, epoch=2, voted_id=1, granted=frozenset({1}), refused=frozenset({2}))
    no = VoteResponse(LeaderId=-1, LeaderEpoch=2, VoteGranted=False)
    asked = ask(2)
    waits = response_step(config(1), refused_once, 3, no, asked)
    assert waits.state.role == Role.CANDIDATE and waits.state.epoch == 2 and waits.outputs == ()
    at_once = msgspec.structs.replace(config(1), choices=Choices(picks=(("ELECT-6", "at-once"),)))
    again = response_step(at_once, refused_once, 3, no, asked)
    assert (again.state.role, again.state.epoch, again.state.voted_id) == (Role.CANDIDATE, 3, 1)
    assert Counter(again.outputs) == candidacy(3, (), (1, 2, 3))


def test_elect_6_a_lost_candidate_may_stand_again_when_its_request_timer_fires():
    """ELECT-6's "on-request-timer": a backoff shorter than the request timeout (Kafka 3.9's first
    draw is 0 or 100 ms, its request timeout here 100 ms plus a 10 ms retry backoff) ends before
    that timer fires; by default the request timer finds nothing to re-send (every voter answered)."""
    lost = NodeState(role=Role.CANDIDATE, epoch=2, voted_id=1, granted=frozenset({1}), refused=frozenset({2, 3}))
    waits = timer(config(1), lost, TimerKind.REQUEST_TIMEOUT)
    assert waits.state == lost and waits.outputs == ()
    on_timer = msgspec.structs.replace(config(1), choices=Choices(picks=(("ELECT-6", "on-request-timer"),)))
    again = timer(on_timer, lost, TimerKind.REQUEST_TIMEOUT)
    assert (again.state.role, again.state.epoch, again.state.voted_id, again.state.refused) == (Role.CANDIDATE, 3, 1, frozenset())
    assert Counter(again.outputs) == candidacy(3, (), (1, 2, 3))
    assert {"RETRY-1", "VOTE-RESP-2", "ELECT-4", "QSTATE-2"} <= set(again.rules)
    still_running = NodeState(role=Role.CANDIDATE, epoch=2, voted_id=1, granted=frozenset({1}), refused=frozenset({2}))
    assert timer(on_timer, still_running, TimerKind.REQUEST_TIMEOUT).state == still_running  # one refusal of three: not lost
