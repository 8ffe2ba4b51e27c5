"""BeginQuorumEpoch: a new leader's announcement at voters and observers, and the endorsements at the leader."""

from collections import Counter

import pytest
from conftest import CLUSTER_ID, config, fetch, leader_state, log, request, response, state, timer

from model import node
from model.events import AppendResult, ClientAppend, Send, Shutdown, TimerKind
from model.messages import BeginQuorumEpochRequest, BeginQuorumEpochResponse, FetchRequest, VoteRequest
from model.state import NodeState, Role
from spec import errors


def begin(epoch: int, leader: int, cluster_id: str | None = CLUSTER_ID) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(ClusterId=cluster_id, LeaderId=leader, LeaderEpoch=epoch)


def answer(epoch: int, leader: int, error: int = errors.NONE, top_error: int = errors.NONE) -> BeginQuorumEpochResponse:
    return BeginQuorumEpochResponse(ErrorCode=top_error, PartitionErrorCode=error, LeaderId=leader, LeaderEpoch=epoch)


# VOTER-ONLY-1


def test_voter_only_1_observer_rejects_begin_quorum_epoch():
    """VOTER-ONLY-1: an observer answers BeginQuorumEpoch with INCONSISTENT_VOTER_SET and keeps its state."""
    cfg = config(4, voters=(1, 2, 3), observers=(4,))
    s = state(Role.OBSERVER, epoch=3, leader_id=1, log=log(1, 3), high_watermark=1)
    t = request(cfg, s, 2, begin(4, 2))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(3, 1, errors.INCONSISTENT_VOTER_SET)),)
    assert "VOTER-ONLY-1" in t.rules
    assert "COMMON-2" in t.rules


# BEGIN-REQ-1


def test_begin_req_1_cluster_id_mismatch_is_fatal():
    """BEGIN-REQ-1: a mismatched ClusterId is answered INCONSISTENT_CLUSTER_ID and the receiver shuts down."""
    cfg = config(1)
    s = state(Role.FOLLOWER, epoch=4, leader_id=2, log=log(1, 4))
    t = request(cfg, s, 3, begin(5, 3, cluster_id="another-cluster"))
    assert t.state.role == Role.DOWN
    assert (t.state.epoch, t.state.leader_id, t.state.voted_id, t.state.log) == (4, 2, -1, log(1, 4))
    assert len(t.outputs) == 2
    assert t.outputs[0] == Send(destination=3, message=answer(4, 2, top_error=errors.INCONSISTENT_CLUSTER_ID))
    assert type(t.outputs[1]) is Shutdown
    assert "BEGIN-REQ-1" in t.rules


def test_begin_req_1_down_node_does_nothing_more():
    """BEGIN-REQ-1: once shut down, the node answers nothing and arms nothing."""
    cfg = config(1)
    s = state(Role.FOLLOWER, epoch=4, leader_id=2, log=log(1, 4))
    t = request(cfg, s, 3, begin(5, 3, cluster_id="another-cluster"))
    assert "BEGIN-REQ-1" in t.rules
    down = t.state
    after = request(cfg, down, 3, begin(5, 3))
    assert after.state == down
    assert after.outputs == ()
    fired = timer(cfg, down, TimerKind.FETCH_TIMEOUT)
    assert fired.state == down
    assert fired.outputs == ()


def test_begin_req_1_null_cluster_id_skips_the_check():
    """BEGIN-REQ-1: a null ClusterId skips the check: the announcement is accepted."""
    cfg = config(1)
    s = state(Role.UNATTACHED, epoch=4, log=log(1, 4))
    t = request(cfg, s, 3, begin(5, 3, cluster_id=None))
    assert t.state == NodeState(role=Role.FOLLOWER, epoch=5, leader_id=3, log=log(1, 4), fetching=fetch(5, log(1, 4)))
    assert Counter(t.outputs) == Counter(
        [Send(destination=3, message=answer(5, 3)), Send(destination=3, message=fetch(5, log(1, 4)))]
    )
    assert "BEGIN-REQ-1" not in t.rules
    assert "BEGIN-REQ-4" in t.rules


def test_begin_req_1_receiver_without_cached_cluster_id_skips_the_check():
    """BEGIN-REQ-1: a receiver with no cached cluster id has nothing to conflict with and accepts."""
    cfg = config(1, cluster_id=None)
    s = state(Role.UNATTACHED, epoch=4)
    t = request(cfg, s, 3, begin(5, 3, cluster_id="any-cluster"))
    expected_fetch = FetchRequest(ClusterId=None, ReplicaId=1, CurrentLeaderEpoch=5, FetchOffset=0, LastFetchedEpoch=0)
    assert t.state == NodeState(role=Role.FOLLOWER, epoch=5, leader_id=3, fetching=expected_fetch)
    assert Counter(t.outputs) == Counter([Send(destination=3, message=answer(5, 3)), Send(destination=3, message=expected_fetch)])
    assert "BEGIN-REQ-4" in t.rules


# BEGIN-REQ-2 / COMMON-1


@pytest.mark.parametrize(
    "s, leader",
    [
        (state(Role.FOLLOWER, epoch=5, leader_id=2, log=log(1, 5)), 2),
        (state(Role.UNATTACHED, epoch=5, voted_id=3, log=log(1, 5)), -1),
        (state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1, 5)), -1),
    ],
    ids=["follower", "voted", "candidate"],
)
def test_begin_req_2_stale_leader_epoch_is_fenced(s, leader):
    """BEGIN-REQ-2/COMMON-1: a LeaderEpoch below ours is rejected with FENCED_LEADER_EPOCH."""
    cfg = config(1)
    t = request(cfg, s, 3, begin(4, 3))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=answer(5, leader, errors.FENCED_LEADER_EPOCH)),)
    assert "BEGIN-REQ-2" in t.rules
    assert "COMMON-1" in t.rules


# BEGIN-REQ-3


def test_begin_req_3_other_leader_in_same_epoch_is_invalid_quorum_state():
    """BEGIN-REQ-3: a different leader claiming our epoch is rejected with INVALID_QUORUM_STATE."""
    cfg = config(1)
    s = state(Role.FOLLOWER, epoch=5, leader_id=2, log=log(1, 5))
    t = request(cfg, s, 3, begin(5, 3))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=answer(5, 2, errors.INVALID_QUORUM_STATE)),)
    assert "BEGIN-REQ-3" in t.rules


def test_begin_req_3_resigned_node_rejects_rival_claim_of_its_epoch():
    """BEGIN-REQ-3: a resigned leader still knows itself as the epoch's leader and rejects another claimant."""
    cfg = config(1)
    s = state(Role.RESIGNED, epoch=5, leader_id=1, voted_id=1, log=log(1, 5))
    t = request(cfg, s, 3, begin(5, 3))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=answer(5, 1, errors.INVALID_QUORUM_STATE)),)
    assert "BEGIN-REQ-3" in t.rules


def test_begin_req_3_leader_rejects_rival_claim_of_its_epoch():
    """BEGIN-REQ-3: a leader told another node leads its own epoch answers INVALID_QUORUM_STATE and stays leader."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = request(cfg, s, 3, begin(5, 3))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=answer(5, 1, errors.INVALID_QUORUM_STATE)),)
    assert "BEGIN-REQ-3" in t.rules


# BEGIN-REQ-4


@pytest.mark.parametrize(
    "make, voted",
    [
        (lambda cfg: state(Role.UNATTACHED, epoch=4, log=log(1, 4), high_watermark=1), -1),
        (lambda cfg: state(Role.UNATTACHED, epoch=5, voted_id=3, log=log(1, 4), high_watermark=1), 3),
        (lambda cfg: state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1, 4), high_watermark=1), 1),
        (lambda cfg: leader_state(cfg, 4, log(1, 4), high_watermark=1), -1),
        (lambda cfg: state(Role.RESIGNED, epoch=4, leader_id=1, voted_id=1, log=log(1, 4), high_watermark=1), -1),
        (lambda cfg: state(Role.FOLLOWER, epoch=4, leader_id=3, voted_id=3, log=log(1, 4), high_watermark=1), -1),
    ],
    ids=["unattached-older", "voted-same-epoch", "candidate-same-epoch", "leader-older", "resigned-older", "follower-older"],
)
def test_begin_req_4_accepts_new_leader_and_fetches_from_it(make, voted):
    """BEGIN-REQ-4: an epoch >= ours without conflict is accepted: persist the leader, become follower, fetch at once."""
    cfg = config(1)
    s = make(cfg)
    t = request(cfg, s, 2, begin(5, 2))
    expected_fetch = fetch(5, log(1, 4))
    assert t.state == NodeState(
        role=Role.FOLLOWER, epoch=5, leader_id=2, voted_id=voted, log=log(1, 4), high_watermark=1, fetching=expected_fetch
    )
    assert Counter(t.outputs) == Counter(
        [Send(destination=2, message=answer(5, 2)), Send(destination=2, message=expected_fetch)]
    )
    assert "BEGIN-REQ-4" in t.rules
    assert "QSTATE-2" in t.rules


def test_begin_req_4_repeated_announcement_is_accepted_unchanged():
    """BEGIN-REQ-4: the known leader re-announcing its epoch is accepted without any change."""
    cfg = config(1)
    s = state(Role.FOLLOWER, epoch=5, leader_id=2, log=log(1, 5), fetching=fetch(5, log(1, 5)))
    t = request(cfg, s, 2, begin(5, 2))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(5, 2)),)
    assert "BEGIN-REQ-4" in t.rules


# BEGIN-RESP-1 (and RETRY-1 at the leader)


def test_begin_resp_1_endorsement_is_recorded_and_not_re_sent():
    """BEGIN-RESP-1: a voter's error-free answer is its endorsement; the retry timer re-sends only to the others."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = response(cfg, s, 2, answer(5, 1), begin(5, 1))
    assert t.state == leader_state(cfg, 5, log(1, 5), endorsed=frozenset({1, 2}))
    assert t.outputs == ()
    assert "BEGIN-RESP-1" in t.rules
    retry = timer(cfg, t.state, TimerKind.REQUEST_TIMEOUT)
    assert retry.state == t.state
    assert retry.outputs == (Send(destination=3, message=begin(5, 1)),)
    assert "BEGIN-RESP-1" in retry.rules
    assert "RETRY-1" in retry.rules


def test_begin_resp_1_without_endorsements_re_sends_to_every_other_voter():
    """BEGIN-RESP-1: while no voter has endorsed, the retry timer re-sends BeginQuorumEpoch to all other voters."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    s = leader_state(cfg, 5, log(1, 5))
    t = timer(cfg, s, TimerKind.REQUEST_TIMEOUT)
    assert t.state == s
    assert Counter(t.outputs) == Counter(Send(destination=v, message=begin(5, 1)) for v in (2, 3, 4, 5))
    assert "BEGIN-RESP-1" in t.rules


def test_begin_resp_1_all_endorsed_nothing_to_re_send():
    """BEGIN-RESP-1: once every voter endorsed, the retry timer sends nothing."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5), endorsed=frozenset({1, 2}))
    t = response(cfg, s, 3, answer(5, 1), begin(5, 1))
    assert t.state.endorsed == frozenset({1, 2, 3})
    assert "BEGIN-RESP-1" in t.rules
    retry = timer(cfg, t.state, TimerKind.REQUEST_TIMEOUT)
    assert retry.outputs == ()


def test_begin_resp_1_error_answer_is_not_an_endorsement():
    """BEGIN-RESP-1: only an answer without error endorses the leader."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = response(cfg, s, 2, answer(5, 1, errors.INVALID_QUORUM_STATE), begin(5, 1))
    assert t.state == s
    assert t.outputs == ()
    assert "BEGIN-RESP-1" not in t.rules


# BEGIN-RESP-3 / COMMON-3


def test_begin_resp_3_fenced_leader_follows_named_leader():
    """BEGIN-RESP-3: FENCED_LEADER_EPOCH naming a leader makes the stale leader its follower in the newer epoch."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5), high_watermark=1, endorsed=frozenset({1, 3}))
    t = response(cfg, s, 2, answer(7, 3, errors.FENCED_LEADER_EPOCH), begin(5, 1))
    expected_fetch = fetch(7, log(1, 5))
    assert t.state == NodeState(
        role=Role.FOLLOWER, epoch=7, leader_id=3, voted_id=-1, log=log(1, 5), high_watermark=1, fetching=expected_fetch
    )
    assert t.outputs == (Send(destination=3, message=expected_fetch),)
    assert "BEGIN-RESP-3" in t.rules
    assert "COMMON-3" in t.rules


def test_begin_resp_3_fenced_without_leader_makes_unattached():
    """BEGIN-RESP-3: FENCED_LEADER_EPOCH with no leader named makes the stale leader unattached in the newer epoch."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5), high_watermark=1)
    t = response(cfg, s, 2, answer(7, -1, errors.FENCED_LEADER_EPOCH), begin(5, 1))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=7, leader_id=-1, voted_id=-1, log=log(1, 5), high_watermark=1)
    assert t.outputs == ()
    assert "BEGIN-RESP-3" in t.rules


def test_begin_resp_3_stale_leader_no_longer_takes_client_appends():
    """BEGIN-RESP-3: after stepping down, the old leader rejects client appends."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = response(cfg, s, 2, answer(7, 3, errors.FENCED_LEADER_EPOCH), begin(5, 1))
    assert "BEGIN-RESP-3" in t.rules
    appended = node.step(cfg, t.state, ClientAppend(value=9))
    assert appended.state == t.state
    assert appended.outputs == (AppendResult(ErrorCode=errors.NOT_LEADER_OR_FOLLOWER, Offset=-1),)


def test_common_3_begin_response_without_error_but_larger_epoch_is_adopted():
    """COMMON-3: any response with a larger epoch is adopted, here an error-free BeginQuorumEpoch answer."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = response(cfg, s, 2, answer(6, -1), begin(5, 1))
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=6, leader_id=-1, voted_id=-1, log=log(1, 5))
    assert t.outputs == ()
    assert "COMMON-3" in t.rules
    assert "BEGIN-RESP-1" not in t.rules


def test_begin_req_4_announcement_to_a_candidate_ends_its_candidacy():
    """BEGIN-REQ-4: a candidate that lost its epoch follows the winner and stops asking for votes."""
    cfg = config(1)
    s = state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1))
    t = request(cfg, s, 3, begin(5, 3))
    assert t.state.role == Role.FOLLOWER
    assert "BEGIN-REQ-4" in t.rules
    retry = timer(cfg, t.state, TimerKind.REQUEST_TIMEOUT)
    assert not any(type(o.message) is VoteRequest for o in retry.outputs if type(o) is Send)
    assert retry.outputs == (Send(destination=3, message=fetch(5, log(1))),)


def test_common_3_inconsistent_cluster_id_begin_response_is_exempt():
    """COMMON-3: a BeginQuorumEpoch answer with INCONSISTENT_CLUSTER_ID carries another cluster's epoch; the leader adopts nothing."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = response(cfg, s, 2, answer(9, 3, top_error=errors.INCONSISTENT_CLUSTER_ID), begin(5, 1))
    assert t.state == s
    assert t.outputs == ()


def test_stale_responses_ignored_drops_an_answer_to_an_earlier_leadership():
    """COMMON-3 under Options.stale_responses_ignored (Kafka: RequestManager.isResponseExpected, its
    connections reset on every change of state): a FENCED_LEADER_EPOCH answer to the BeginQuorumEpoch
    of a leadership that is over, naming the leader of the node's own epoch, is dropped unread; the
    KIP's reading follows the leader it names."""
    voted = state(Role.UNATTACHED, epoch=2, voted_id=3, log=log(1))
    fenced = answer(2, 2, errors.FENCED_LEADER_EPOCH)
    kafka = response(config(1, stale_responses_ignored=True), voted, 2, fenced, begin(1, 1))
    assert kafka.state == voted and kafka.outputs == () and kafka.rules == ("COMMON-3",)
    kip = response(config(1), voted, 2, fenced, begin(1, 1))
    assert (kip.state.role, kip.state.epoch, kip.state.leader_id) == (Role.FOLLOWER, 2, 2)
