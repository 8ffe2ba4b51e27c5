"""Observers and leader discovery (OBS-1, OBS-2, BOOT-4) and the null cluster id (BOOT-2)."""

from collections import Counter

import msgspec
from conftest import CLUSTER_ID, config, leader_state, log, request, response, sends, sent_to, state, timer

from model import node
from model.events import Send, SetTimer, Shutdown, TimerKind
from model.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    Record,
    VoteRequest,
    VoteResponse,
)
from model.state import Role
from spec import errors

replace = msgspec.structs.replace

VOTERS = (1, 2, 3)
OBSERVER = 4


def observer_config(**kw):
    return config(OBSERVER, voters=VOTERS, observers=(OBSERVER,), **kw)


def fetch(replica: int, epoch: int, offset: int, last_epoch: int, cluster_id: str | None = CLUSTER_ID) -> FetchRequest:
    return FetchRequest(ClusterId=cluster_id, ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch)


def answer(leader: int, epoch: int, hw: int = 0, *, error: int = errors.NONE, top_error: int = errors.NONE, records=()) -> FetchResponse:
    return FetchResponse(
        ErrorCode=top_error,
        PartitionErrorCode=error,
        HighWatermark=hw,
        DivergingEpoch=EpochEndOffset(Epoch=-1, EndOffset=-1),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=leader, LeaderEpoch=epoch),
        Records=records,
    )


# OBS-1 --------------------------------------------------------------------------------------


def test_obs_1_observer_fetch_timeout_forgets_the_leader_and_rediscovers():
    """OBS-1: an observer's fetch timeout makes it forget the leader and re-discover it from the voters."""
    cfg = observer_config()
    s = state(Role.OBSERVER, epoch=3, leader_id=2, log=log(1, 3), high_watermark=1, fetching=fetch(4, 3, 2, 3))
    t = timer(cfg, s, TimerKind.FETCH_TIMEOUT)
    discovery = fetch(4, 3, 2, 3)
    assert sent_to(t) == {1: discovery, 2: discovery, 3: discovery}
    assert len(sends(t)) == 3
    assert t.state == state(Role.OBSERVER, epoch=3, leader_id=-1, log=log(1, 3), high_watermark=1, fetching=discovery)
    assert "OBS-1" in t.rules


def test_obs_1_observer_never_becomes_candidate_on_any_timer():
    """OBS-1: an observer never becomes candidate or leader, whatever timer fires."""
    cfg = observer_config()
    for leader in (2, -1):
        s = state(Role.OBSERVER, epoch=3, leader_id=leader, log=log(1), fetching=fetch(4, 3, 1, 1))
        for kind in TimerKind:
            t = timer(cfg, s, kind)
            assert t.state.role == Role.OBSERVER, kind
            assert t.state.epoch == 3, kind
            assert t.state.voted_id == -1, kind
            assert all(type(o.message) is FetchRequest for o in sends(t)), kind
        for kind in (TimerKind.ELECTION_TIMEOUT, TimerKind.PROGRESS_TIMEOUT):
            t = timer(cfg, s, kind)
            assert t.state == s and t.outputs == (), kind


def test_obs_1_observer_request_timeout_resends_its_fetch():
    """OBS-1: an observer replicates with Fetch like a follower (its unanswered Fetch is re-sent)."""
    cfg = observer_config()
    s = state(Role.OBSERVER, epoch=3, leader_id=2, log=log(1, 3))
    t = timer(cfg, s, TimerKind.REQUEST_TIMEOUT)
    assert sent_to(t) == {2: fetch(4, 3, 2, 3)}
    assert t.state == replace(s, fetching=fetch(4, 3, 2, 3))


def test_obs_1_observer_never_votes():
    """OBS-1: an observer never votes: a Vote request is refused with INCONSISTENT_VOTER_SET."""
    cfg = observer_config()
    s = state(Role.OBSERVER, epoch=3, leader_id=2, log=log(1, 3))
    vote = VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=4, CandidateId=1, LastOffsetEpoch=3, LastOffset=1)
    t = request(cfg, s, 1, vote)
    assert sent_to(t) == {
        1: VoteResponse(ErrorCode=errors.NONE, PartitionErrorCode=errors.INCONSISTENT_VOTER_SET, LeaderId=2, LeaderEpoch=3, VoteGranted=False)
    }
    assert t.state == s


def test_obs_1_observer_replicates_records_like_a_follower():
    """OBS-1: an observer appends fetched records and fetches again from the leader."""
    cfg = observer_config()
    in_flight = fetch(4, 3, 1, 1)
    s = state(Role.OBSERVER, epoch=3, leader_id=2, log=log(1), fetching=in_flight)
    new = (Record(Offset=1, Epoch=3, Value=2),)
    t = response(cfg, s, 2, answer(2, 3, 2, records=new), in_flight)
    assert t.state == replace(s, log=log(1) + new, high_watermark=2, fetching=fetch(4, 3, 2, 3))
    assert sent_to(t) == {2: fetch(4, 3, 2, 3)}


# OBS-2 --------------------------------------------------------------------------------------


def test_obs_2_node_without_a_leader_sends_the_same_fetch_to_every_voter():
    """OBS-2: a node that knows no leader sends the same Fetch to every voter."""
    cfg = observer_config()
    s = state(Role.OBSERVER, epoch=2, leader_id=1, log=log(1, 1))
    t = timer(cfg, s, TimerKind.FETCH_TIMEOUT)
    discovery = fetch(4, 2, 2, 1)
    assert sends(t) == [Send(destination=v, message=discovery) for v in VOTERS]
    assert t.state.fetching == discovery
    assert "OBS-2" in t.rules


def test_obs_2_observer_follows_the_leader_named_in_its_epoch():
    """OBS-2: a discovery response naming a leader in the node's epoch makes it follow that leader."""
    cfg = observer_config()
    discovery = fetch(4, 2, 2, 1)
    s = state(Role.OBSERVER, epoch=2, log=log(1, 1), fetching=discovery)
    t = response(cfg, s, 3, answer(1, 2, error=errors.NOT_LEADER_OR_FOLLOWER), discovery)
    expected = fetch(4, 2, 2, 1)
    assert sent_to(t) == {1: expected}
    assert len(sends(t)) == 1
    assert t.state == state(Role.OBSERVER, epoch=2, leader_id=1, log=log(1, 1), fetching=expected)
    assert "OBS-2" in t.rules


def test_obs_2_unattached_voter_follows_the_leader_named_in_its_epoch():
    """OBS-2: a voter that knows no leader follows the leader a Fetch response names in its epoch."""
    cfg = config(3)
    discovery = fetch(3, 2, 1, 1)
    s = state(Role.UNATTACHED, epoch=2, log=log(1), fetching=discovery)
    t = response(cfg, s, 2, answer(1, 2, error=errors.NOT_LEADER_OR_FOLLOWER), discovery)
    assert sent_to(t) == {1: fetch(3, 2, 1, 1)}
    assert t.state == state(Role.FOLLOWER, epoch=2, leader_id=1, log=log(1), fetching=fetch(3, 2, 1, 1))
    assert "OBS-2" in t.rules


def test_obs_2_response_without_a_leader_changes_nothing():
    """OBS-2: an answer that names no leader leaves the node looking."""
    cfg = observer_config()
    discovery = fetch(4, 2, 2, 1)
    s = state(Role.OBSERVER, epoch=2, log=log(1, 1), fetching=discovery)
    t = response(cfg, s, 3, answer(-1, 2, error=errors.NOT_LEADER_OR_FOLLOWER), discovery)
    assert t.state.role == Role.OBSERVER
    assert t.state.leader_id == -1
    assert t.state.epoch == 2


def test_obs_2_observer_follows_a_leader_of_a_larger_epoch_as_an_observer():
    """OBS-2: an observer that learns a leader of a larger epoch follows it, staying an observer."""
    cfg = observer_config()
    discovery = fetch(4, 2, 2, 1)
    s = state(Role.OBSERVER, epoch=2, log=log(1, 1), fetching=discovery)
    t = response(cfg, s, 1, answer(3, 5, error=errors.NOT_LEADER_OR_FOLLOWER), discovery)
    assert sent_to(t) == {3: fetch(4, 5, 2, 1)}
    assert t.state == state(Role.OBSERVER, epoch=5, leader_id=3, log=log(1, 1), fetching=fetch(4, 5, 2, 1))


# BOOT-4 -------------------------------------------------------------------------------------


def test_boot_4_observer_keeps_rediscovering_and_never_becomes_candidate():
    """BOOT-4: an observer retries leader discovery indefinitely; repeated fetch timeouts never make it a candidate."""
    cfg = observer_config()
    s = state(Role.OBSERVER, epoch=0)
    discovery = fetch(4, 0, 0, 0)
    for _ in range(6):
        t = timer(cfg, s, TimerKind.FETCH_TIMEOUT)
        assert sent_to(t) == {1: discovery, 2: discovery, 3: discovery}
        assert t.state == state(Role.OBSERVER, epoch=0, fetching=discovery)
        assert not any(type(o) is SetTimer and o.kind == TimerKind.ELECTION_TIMEOUT for o in t.outputs)
        assert "BOOT-4" in t.rules
        s = t.state


def test_boot_4_observer_without_cluster_id_discovers_with_null_cluster_id():
    """BOOT-4: an observer without a cached cluster id fetches with ClusterId null."""
    cfg = observer_config(cluster_id=None)
    s = state(Role.OBSERVER, epoch=1, log=log(1))
    t = timer(cfg, s, TimerKind.FETCH_TIMEOUT)
    discovery = fetch(4, 1, 1, 1, cluster_id=None)
    assert sent_to(t) == {1: discovery, 2: discovery, 3: discovery}
    assert t.state == replace(s, fetching=discovery)
    assert "BOOT-4" in t.rules


# BOOT-2 -------------------------------------------------------------------------------------


def test_boot_2_null_cluster_id_fetch_is_served():
    """BOOT-2: a null ClusterId in a Fetch skips the cluster-id check."""
    cfg = config(1)
    s = leader_state(cfg, 2, log(1, 2))
    t = request(cfg, s, 2, fetch(2, 2, 1, 1, cluster_id=None))
    assert sent_to(t) == {2: answer(1, 2, records=log(1, 2)[1:])}
    assert t.state.replica_offsets == (2, 1, -1)


def test_boot_2_null_cluster_id_vote_is_granted():
    """BOOT-2: a null ClusterId in a Vote skips the check."""
    cfg = config(2)
    s = state(Role.UNATTACHED, epoch=1)
    t = request(cfg, s, 1, VoteRequest(ClusterId=None, CandidateEpoch=2, CandidateId=1, LastOffsetEpoch=0, LastOffset=-1))
    assert sent_to(t) == {1: VoteResponse(ErrorCode=errors.NONE, PartitionErrorCode=errors.NONE, LeaderId=-1, LeaderEpoch=2, VoteGranted=True)}
    assert t.state == state(Role.UNATTACHED, epoch=2, voted_id=1)


def test_boot_2_null_cluster_id_begin_quorum_epoch_is_accepted():
    """BOOT-2: a null ClusterId in BeginQuorumEpoch skips the check."""
    cfg = config(2)
    s = state(Role.UNATTACHED, epoch=1)
    t = request(cfg, s, 1, BeginQuorumEpochRequest(ClusterId=None, LeaderId=1, LeaderEpoch=2))
    assert sends(t)[0].message == BeginQuorumEpochResponse(ErrorCode=errors.NONE, PartitionErrorCode=errors.NONE, LeaderId=1, LeaderEpoch=2)
    assert (t.state.role, t.state.epoch, t.state.leader_id) == (Role.FOLLOWER, 2, 1)


def test_boot_2_null_cluster_id_end_quorum_epoch_is_accepted():
    """BOOT-2: a null ClusterId in EndQuorumEpoch skips the check."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=3, leader_id=1)
    end = EndQuorumEpochRequest(ClusterId=None, ReplicaId=1, LeaderId=1, LeaderEpoch=3, PreferredSuccessors=(3, 2))
    t = request(cfg, s, 1, end)
    assert sends(t)[0].message == EndQuorumEpochResponse(ErrorCode=errors.NONE, PartitionErrorCode=errors.NONE, LeaderId=1, LeaderEpoch=3)
    assert SetTimer(kind=TimerKind.FETCH_TIMEOUT, delay_ms=20) in t.outputs


def test_boot_2_node_without_cached_cluster_id_accepts_any():
    """BOOT-2: a node with no cached cluster id accepts any ClusterId."""
    other = "some-other-cluster"
    leader_cfg = config(1, cluster_id=None)
    leader = leader_state(leader_cfg, 2, log(1, 2))
    t = request(leader_cfg, leader, 2, fetch(2, 2, 1, 1, cluster_id=other))
    assert sent_to(t) == {2: answer(1, 2, records=log(1, 2)[1:])}

    voter_cfg = config(2, cluster_id=None)
    t = request(voter_cfg, state(Role.UNATTACHED, epoch=1), 1, VoteRequest(ClusterId=other, CandidateEpoch=2, CandidateId=1, LastOffsetEpoch=0, LastOffset=-1))
    assert sent_to(t) == {1: VoteResponse(LeaderId=-1, LeaderEpoch=2, VoteGranted=True)}

    t = request(voter_cfg, state(Role.UNATTACHED, epoch=1), 1, BeginQuorumEpochRequest(ClusterId=other, LeaderId=1, LeaderEpoch=2))
    assert sends(t)[0].message == BeginQuorumEpochResponse(LeaderId=1, LeaderEpoch=2)
    assert (t.state.role, t.state.epoch, t.state.leader_id) == (Role.FOLLOWER, 2, 1)

    end = EndQuorumEpochRequest(ClusterId=other, ReplicaId=1, LeaderId=1, LeaderEpoch=3, PreferredSuccessors=(3, 2))
    t = request(voter_cfg, state(Role.FOLLOWER, epoch=3, leader_id=1), 1, end)
    assert sends(t)[0].message == EndQuorumEpochResponse(LeaderId=1, LeaderEpoch=3)


def test_boot_2_conflicting_fetch_response_is_fatal():
    """BOOT-2: a cluster-id conflict with an elected leader (Fetch response) is fatal."""
    cfg = config(2)
    in_flight = fetch(2, 2, 1, 1)
    s = state(Role.FOLLOWER, epoch=2, leader_id=1, log=log(1), fetching=in_flight)
    t = response(cfg, s, 1, answer(1, 2, top_error=errors.INCONSISTENT_CLUSTER_ID), in_flight)
    assert [type(o) for o in t.outputs] == [Shutdown]
    assert t.state.role == Role.DOWN
    assert "BOOT-2" in t.rules


def test_boot_2_conflicting_begin_quorum_epoch_is_fatal():
    """BOOT-2: a cluster-id conflict with an elected leader (BeginQuorumEpoch request) is fatal."""
    cfg = config(2)
    s = state(Role.UNATTACHED, epoch=1)
    t = request(cfg, s, 1, BeginQuorumEpochRequest(ClusterId="other-cluster", LeaderId=1, LeaderEpoch=2))
    assert sends(t)[0].message == BeginQuorumEpochResponse(ErrorCode=errors.INCONSISTENT_CLUSTER_ID, PartitionErrorCode=errors.NONE, LeaderId=-1, LeaderEpoch=1)
    assert [type(o) for o in t.outputs if type(o) is not Send] == [Shutdown]
    assert t.state.role == Role.DOWN
    assert t.state.epoch == 1  # the conflicting leader's epoch is not adopted
    assert "BOOT-2" in t.rules


def test_boot_2_conflicting_vote_is_a_mere_rejection():
    """BOOT-2: a cluster-id mismatch on Vote is a rejection, not fatal."""
    cfg = config(2)
    s = state(Role.UNATTACHED, epoch=1)
    t = request(cfg, s, 1, VoteRequest(ClusterId="other-cluster", CandidateEpoch=2, CandidateId=1, LastOffsetEpoch=0, LastOffset=-1))
    assert sent_to(t) == {
        1: VoteResponse(ErrorCode=errors.INCONSISTENT_CLUSTER_ID, PartitionErrorCode=errors.NONE, LeaderId=-1, LeaderEpoch=1, VoteGranted=False)
    }
    assert t.outputs == (sends(t)[0],)
    assert t.state == s


def test_boot_2_conflicting_end_quorum_epoch_is_a_mere_rejection():
    """BOOT-2: a cluster-id mismatch on EndQuorumEpoch is a plain refusal, not fatal."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=3, leader_id=1)
    end = EndQuorumEpochRequest(ClusterId="other-cluster", ReplicaId=1, LeaderId=1, LeaderEpoch=3, PreferredSuccessors=(2, 3))
    t = request(cfg, s, 1, end)
    assert t.outputs == (
        Send(destination=1, message=EndQuorumEpochResponse(ErrorCode=errors.INCONSISTENT_CLUSTER_ID, PartitionErrorCode=errors.NONE, LeaderId=1, LeaderEpoch=3)),
    )
    assert t.state == s


def test_stalled_fetch_any_voter_an_expired_fetch_timer_keeps_the_observer_asking_any_voter():
    """Options.stalled_fetch_any_voter, Kafka 3.9's observer (pollFollowerAsObserver: while
    hasFetchTimeoutExpired, maybeSendFetchToAnyBootstrap; handleFetchResponse -> resetFetchTimeout
    on an answer without error): after its fetch timer fires, its Fetch in flight, the request
    timeout sends the next Fetch to any voter, not to the leader (findReadyBootstrapServer waits
    for the request in flight), so does an error answer, and the timer is not armed again until
    a Fetch succeeds."""
    cfg = config(4, observers=(4,), stalled_fetch_any_voter=True)
    records = log(1)
    again = fetch(4, 1, 1, 1)
    following = state(Role.OBSERVER, epoch=1, leader_id=1, log=records, fetching=again)
    stalled = timer(cfg, following, TimerKind.FETCH_TIMEOUT)
    assert stalled.state.fetch_stalled and stalled.outputs == ()
    expired = timer(cfg, stalled.state, TimerKind.REQUEST_TIMEOUT)
    assert expired.state.fetch_stalled and Counter(expired.outputs) == Counter(Send(destination=v, message=again) for v in (1, 2, 3))
    assert node.armed_timers(cfg, expired.state) == (TimerKind.REQUEST_TIMEOUT,)
    assert timer(cfg, expired.state, TimerKind.FETCH_TIMEOUT).outputs == ()
    refused = FetchResponse(PartitionErrorCode=errors.NOT_LEADER_OR_FOLLOWER, HighWatermark=-1, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=1))
    asked_again = response(cfg, expired.state, 3, refused, again)
    assert asked_again.state.fetch_stalled and Counter(asked_again.outputs) == Counter(Send(destination=v, message=again) for v in (1, 2, 3))
    answered = response(cfg, asked_again.state, 1, FetchResponse(HighWatermark=1, CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=1)), again)
    assert not answered.state.fetch_stalled and answered.outputs == (Send(destination=1, message=again),)
    assert node.armed_timers(cfg, answered.state) == (TimerKind.FETCH_TIMEOUT, TimerKind.REQUEST_TIMEOUT)
    without = response(config(4, observers=(4,)), following, 1, refused, again)
    assert without.outputs == (Send(destination=1, message=again),)  # the KIP's reading: back to its leader
