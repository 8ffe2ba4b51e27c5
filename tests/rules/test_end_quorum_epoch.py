"""EndQuorumEpoch: a leader's graceful resignation, the successors' elections, and the resigned state."""

from collections import Counter

import msgspec
import pytest
from conftest import CLUSTER_ID, config, fetch, leader_state, log, request, response, state, timer

from model import node
from model.choices import Choices
from model.events import AppendResult, ClientAppend, Resign, Send, SetTimer, TimerKind
from model.messages import (
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchResponse,
    LeaderIdAndEpoch,
    VoteRequest,
)
from model.state import NodeState, Role
from spec import errors


def end(epoch: int, leader: int, successors, cluster_id: str | None = CLUSTER_ID) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(
        ClusterId=cluster_id, ReplicaId=leader, LeaderId=leader, LeaderEpoch=epoch, PreferredSuccessors=tuple(successors)
    )


def answer(epoch: int, leader: int, error: int = errors.NONE, top_error: int = errors.NONE) -> EndQuorumEpochResponse:
    return EndQuorumEpochResponse(ErrorCode=top_error, PartitionErrorCode=error, LeaderId=leader, LeaderEpoch=epoch)


def election_timer() -> SetTimer:
    return SetTimer(kind=TimerKind.ELECTION_TIMEOUT, delay_ms=1000, jitter_ms=1000)


def follower(epoch: int = 5, leader: int = 2, records=None) -> NodeState:
    records = log(1, epoch) if records is None else records
    return state(Role.FOLLOWER, epoch=epoch, leader_id=leader, log=records, fetching=fetch(epoch, records))


# VOTER-ONLY-1


def test_voter_only_1_observer_rejects_end_quorum_epoch():
    """VOTER-ONLY-1: an observer answers EndQuorumEpoch with INCONSISTENT_VOTER_SET and keeps its state."""
    cfg = config(4, voters=(1, 2, 3), observers=(4,))
    s = state(Role.OBSERVER, epoch=3, leader_id=1, log=log(1, 3))
    t = request(cfg, s, 1, end(3, 1, (2, 3)))
    assert t.state == s
    assert t.outputs == (Send(destination=1, message=answer(3, 1, errors.INCONSISTENT_VOTER_SET)),)
    assert "VOTER-ONLY-1" in t.rules
    assert "COMMON-2" in t.rules


# END-SEND-1


def test_end_send_1_resigning_leader_orders_successors_by_replicated_offset():
    """END-SEND-1: EndQuorumEpoch goes to every other voter, successors by replicated offset desc, ties by smaller id."""
    cfg = config(1, voters=(1, 2, 3, 4, 5), observers=(6,))
    records = log(1, 1, 2, 2, 3, 3, 3, 3, 3, 3)
    s = leader_state(cfg, 3, records, high_watermark=8, replica_offsets=(10, 5, 8, 5, -1, 10), endorsed=frozenset({1, 2, 3}))
    t = node.step(cfg, s, Resign())
    request_ = end(3, 1, (3, 2, 4, 5))
    assert Counter(t.outputs) == Counter(Send(destination=v, message=request_) for v in (2, 3, 4, 5))
    assert t.state == NodeState(role=Role.RESIGNED, epoch=3, leader_id=1, voted_id=1, log=records, high_watermark=8)
    assert "END-SEND-1" in t.rules


def test_end_send_1_unknown_offsets_tie_and_are_ordered_by_id():
    """END-SEND-1: voters with equal (unknown) progress are listed by smaller id first."""
    cfg = config(2, voters=(1, 2, 3))
    s = leader_state(cfg, 4, log(4))
    t = node.step(cfg, s, Resign())
    request_ = EndQuorumEpochRequest(ClusterId=CLUSTER_ID, ReplicaId=2, LeaderId=2, LeaderEpoch=4, PreferredSuccessors=(1, 3))
    assert Counter(t.outputs) == Counter([Send(destination=1, message=request_), Send(destination=3, message=request_)])
    assert t.state.role == Role.RESIGNED
    assert "END-SEND-1" in t.rules


def test_end_send_1_larger_id_ahead_comes_first():
    """END-SEND-1: replicated offset decides before the id."""
    cfg = config(1, voters=(1, 2, 3))
    s = leader_state(cfg, 4, log(4, 4, 4), replica_offsets=(3, 1, 3))
    t = node.step(cfg, s, Resign())
    request_ = end(4, 1, (3, 2))
    assert Counter(t.outputs) == Counter([Send(destination=2, message=request_), Send(destination=3, message=request_)])
    assert "END-SEND-1" in t.rules


# END-SEND-2


def test_end_send_2_end_quorum_epoch_is_never_retried():
    """END-SEND-2: the resigned leader never re-sends EndQuorumEpoch; its election timeout ends the epoch instead."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 5))
    t = node.step(cfg, s, Resign())
    assert "END-SEND-2" in t.rules
    retry = timer(cfg, t.state, TimerKind.REQUEST_TIMEOUT)
    assert retry.state == t.state
    assert retry.outputs == ()
    elected = timer(cfg, t.state, TimerKind.ELECTION_TIMEOUT)
    assert elected.state.role == Role.CANDIDATE
    assert elected.state.epoch == 6


def test_end_send_2_lost_request_follower_elects_on_fetch_timeout():
    """END-SEND-2: a voter that never got EndQuorumEpoch starts an election on its fetch timeout."""
    cfg = config(2)
    s = follower(5, 1, log(1, 5))
    t = timer(cfg, s, TimerKind.FETCH_TIMEOUT)
    assert t.state.role == Role.CANDIDATE
    assert t.state.epoch == 6
    assert t.state.voted_id == 2
    assert "ELECT-1" in t.rules


# END-REQ-1


def test_end_req_1_cluster_id_mismatch_is_rejected():
    """END-REQ-1: a mismatched ClusterId is rejected with INCONSISTENT_CLUSTER_ID; no election starts."""
    cfg = config(1)
    s = follower()
    t = request(cfg, s, 2, end(5, 2, (1, 3), cluster_id="another-cluster"))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(5, 2, top_error=errors.INCONSISTENT_CLUSTER_ID)),)
    assert "END-REQ-1" in t.rules


def test_end_req_1_null_cluster_id_skips_the_check():
    """END-REQ-1: a null ClusterId skips the check (the first successor becomes candidate)."""
    cfg = config(1)
    s = follower()
    t = request(cfg, s, 2, end(5, 2, (1, 3), cluster_id=None))
    assert t.state.role == Role.CANDIDATE
    assert "END-REQ-1" not in t.rules
    assert "END-REQ-5" in t.rules


# END-REQ-2 / COMMON-1


def test_end_req_2_stale_epoch_is_fenced():
    """END-REQ-2/COMMON-1: a LeaderEpoch below ours is rejected with FENCED_LEADER_EPOCH."""
    cfg = config(1)
    s = follower(6, 3)
    t = request(cfg, s, 2, end(5, 2, (1, 3)))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(6, 3, errors.FENCED_LEADER_EPOCH)),)
    assert "END-REQ-2" in t.rules
    assert "COMMON-1" in t.rules


# END-REQ-3 / COMMON-1


@pytest.mark.parametrize(
    "s, request_, leader, epoch",
    [
        (follower(5, 2), end(6, 3, (1, 2)), 2, 5),  # larger epoch than known
        (follower(5, 2), end(5, 3, (1, 2)), 2, 5),  # not the leader we know for the epoch
        (state(Role.UNATTACHED, epoch=5, voted_id=2, log=log(1)), end(5, 2, (1, 3)), -1, 5),  # no leader known
        (state(Role.CANDIDATE, epoch=5, voted_id=1, granted=frozenset({1}), log=log(1)), end(5, 2, (1, 3)), -1, 5),
    ],
    ids=["larger-epoch", "other-leader", "voted-no-leader", "candidate-no-leader"],
)
def test_end_req_3_unknown_leader_is_rejected(s, request_, leader, epoch):
    """END-REQ-3/COMMON-1: EndQuorumEpoch from a leader we do not know for that epoch gets UNKNOWN_LEADER_EPOCH."""
    cfg = config(1)
    t = request(cfg, s, request_.LeaderId, request_)
    assert t.state == s
    assert t.outputs == (Send(destination=request_.LeaderId, message=answer(epoch, leader, errors.UNKNOWN_LEADER_EPOCH)),)
    assert "END-REQ-3" in t.rules
    assert "COMMON-1" in t.rules


# END-REQ-4


def test_end_req_4_receiver_not_a_preferred_successor_is_rejected():
    """END-REQ-4: a receiver missing from PreferredSuccessors answers INCONSISTENT_VOTER_SET and does nothing."""
    cfg = config(1)
    s = follower()
    t = request(cfg, s, 2, end(5, 2, (3,)))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=answer(5, 2, errors.INCONSISTENT_VOTER_SET)),)
    assert "END-REQ-4" in t.rules


# END-REQ-5


def test_end_req_5_first_successor_becomes_candidate_at_once():
    """END-REQ-5: the first preferred successor becomes candidate at once (epoch + 1, self vote persisted, Vote sent)."""
    cfg = config(1)
    records = log(1, 5)
    s = follower(5, 2, records)
    t = request(cfg, s, 2, end(5, 2, (1, 3)))
    assert t.state == NodeState(role=Role.CANDIDATE, epoch=6, leader_id=-1, voted_id=1, granted=frozenset({1}), log=records)
    ask = VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=6, CandidateId=1, LastOffsetEpoch=5, LastOffset=1)
    assert Counter(t.outputs) == Counter(
        [
            Send(destination=2, message=answer(6, -1)),
            Send(destination=2, message=ask),
            Send(destination=3, message=ask),
            election_timer(),
        ]
    )
    assert "END-REQ-5" in t.rules
    assert "QSTATE-2" in t.rules


def test_end_req_5_the_successor_may_answer_as_the_follower_it_was():
    """END-REQ-5's choice point: "before-standing" answers with leader 2 of epoch 5, as Kafka
    does (its candidacy comes on the next poll); the node still stands in epoch 6."""
    cfg = msgspec.structs.replace(config(1), choices=Choices(picks=(("END-REQ-5", "before-standing"),)))
    t = request(cfg, follower(5, 2, log(1, 5)), 2, end(5, 2, (1, 3)))
    assert (t.state.role, t.state.epoch) == (Role.CANDIDATE, 6)
    assert Send(destination=2, message=answer(5, 2)) in t.outputs


# END-REQ-6


@pytest.mark.parametrize(
    "position, delay_ms",
    [
        (1, 20),  # min(1000, 20 * 2^0)
        (2, 40),  # min(1000, 20 * 2^1)
        (3, 80),  # min(1000, 20 * 2^2)
        (6, 640),  # min(1000, 20 * 2^5)
        (7, 1000),  # min(1000, 20 * 2^6 = 1280)
        (8, 1000),  # min(1000, 20 * 2^7 = 2560)
    ],
)
def test_end_req_6_later_successor_waits_exponential_backoff(position, delay_ms):
    """END-REQ-6: successor N > 0 starts its election after min(retry_backoff_max_ms, retry_backoff_ms * 2^(N-1))."""
    cfg = config(1, voters=tuple(range(1, 10)))
    others = [2, 3, 4, 5, 6, 7, 8]
    successors = others[:position] + [1] + others[position:]
    records = log(1, 5)
    s = follower(5, 9, records)
    t = request(cfg, s, 9, end(5, 9, successors))
    assert t.state == s
    assert Counter(t.outputs) == Counter(
        [Send(destination=9, message=answer(5, 9)), SetTimer(kind=TimerKind.FETCH_TIMEOUT, delay_ms=delay_ms, jitter_ms=0)]
    )
    assert "END-REQ-6" in t.rules
    elected = timer(cfg, t.state, TimerKind.FETCH_TIMEOUT)
    assert elected.state.role == Role.CANDIDATE
    assert elected.state.epoch == 6


@pytest.mark.parametrize(
    "successors, delay_ms",
    [
        ((3, 1), 500),  # 2 successors, place 1: min(1000, (1000 >> 1) << 0)
        ((3, 4, 1), 500),  # 3 successors, place 2: min(1000, (1000 >> 2) << 1) = 250 << 1
        ((3, 4, 5, 1), 500),  # 4 successors, place 3: (1000 >> 3) << 2 = 125 << 2
        ((3, 1, 4, 5), 125),  # 4 successors, place 1: 1000 >> 3
        ((3, 4, 1, 5, 6, 7, 8), 30),  # 7 successors, place 2: (1000 >> 6) << 1 = 15 << 1
        ((3, 4), 1000),  # not listed (Options.end_epoch_as_news): past the last place, the whole 1,000 ms
    ],
)
def test_end_req_6_kafka_waits_its_strict_exponential_backoff(successors, delay_ms):
    """END-REQ-6 under Options.successor_backoff_strict: Kafka's strictExponentialElectionBackoffMs,
    halving quorum.election.backoff.max.ms once per successor listed after the first."""
    options = msgspec.structs.replace(config(1).options, successor_backoff_strict=True, end_epoch_as_news=True)
    cfg = msgspec.structs.replace(config(1, voters=tuple(range(1, 10))), options=options)
    t = request(cfg, follower(5, 9, log(1, 5)), 9, end(5, 9, successors))
    assert [o for o in t.outputs if type(o) is SetTimer] == [SetTimer(kind=TimerKind.FETCH_TIMEOUT, delay_ms=delay_ms, jitter_ms=0)]
    assert "END-REQ-6" in t.rules


# END-RESP-1


def test_end_resp_1_answer_without_error_changes_nothing():
    """END-RESP-1: an EndQuorumEpoch answer without error needs nothing done."""
    cfg = config(1)
    s = state(Role.RESIGNED, epoch=5, leader_id=1, voted_id=1, log=log(1, 5), high_watermark=2)
    t = response(cfg, s, 3, answer(5, 1), end(5, 1, (2, 3)))
    assert t.state == s
    assert t.outputs == ()
    assert "END-RESP-1" in t.rules


@pytest.mark.parametrize(
    "message",
    [answer(5, 1, errors.INCONSISTENT_VOTER_SET), answer(5, -1, errors.UNKNOWN_LEADER_EPOCH)],
    ids=["inconsistent-voter-set", "unknown-leader-epoch"],
)
def test_end_resp_1_other_errors_change_nothing(message):
    """END-RESP-1: an error other than FENCED_LEADER_EPOCH changes nothing and nothing is re-sent."""
    cfg = config(1)
    s = state(Role.RESIGNED, epoch=5, leader_id=1, voted_id=1, log=log(1, 5), high_watermark=2)
    t = response(cfg, s, 3, message, end(5, 1, (2, 3)))
    assert t.state == s
    assert t.outputs == ()
    assert "END-RESP-1" in t.rules


def test_common_3_inconsistent_cluster_id_end_response_is_exempt():
    """COMMON-3: an EndQuorumEpoch answer with INCONSISTENT_CLUSTER_ID carries another cluster's epoch; nothing is adopted."""
    cfg = config(1)
    s = state(Role.RESIGNED, epoch=5, leader_id=1, voted_id=1, log=log(1, 5), high_watermark=2)
    t = response(cfg, s, 3, answer(9, 3, top_error=errors.INCONSISTENT_CLUSTER_ID), end(5, 1, (2, 3)))
    assert t.state == s
    assert t.outputs == ()


# END-RESP-2


def test_end_resp_2_fenced_follows_newer_leader():
    """END-RESP-2: FENCED_LEADER_EPOCH: update the quorum state and follow the newer leader named."""
    cfg = config(1)
    s = state(Role.RESIGNED, epoch=5, leader_id=1, voted_id=1, log=log(1, 5), high_watermark=2)
    t = response(cfg, s, 2, answer(7, 3, errors.FENCED_LEADER_EPOCH), end(5, 1, (2, 3)))
    expected_fetch = fetch(7, log(1, 5))
    assert t.state == NodeState(
        role=Role.FOLLOWER, epoch=7, leader_id=3, voted_id=-1, log=log(1, 5), high_watermark=2, fetching=expected_fetch
    )
    assert t.outputs == (Send(destination=3, message=expected_fetch),)
    assert "END-RESP-2" in t.rules
    assert "COMMON-3" in t.rules


# RESIGN-1


def _resigned(cfg):
    return node.step(cfg, leader_state(cfg, 5, log(1, 5), high_watermark=2, replica_offsets=(2, 2, 1)), Resign()).state


def test_resign_1_resigned_node_answers_fetch_as_non_leader():
    """RESIGN-1: a resigned leader answers Fetch with NOT_LEADER_OR_FOLLOWER, its known leader and epoch."""
    cfg = config(1)
    s = _resigned(cfg)
    t = request(cfg, s, 2, fetch(5, log(1, 5), replica=2))
    assert t.state == s
    expected = FetchResponse(
        ErrorCode=errors.NONE,
        PartitionErrorCode=errors.NOT_LEADER_OR_FOLLOWER,
        HighWatermark=2,
        DivergingEpoch=EpochEndOffset(Epoch=-1, EndOffset=-1),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=5),
        Records=(),
    )
    assert t.outputs == (Send(destination=2, message=expected),)
    assert "RESIGN-1" in t.rules


def test_resign_1_election_timeout_makes_resigned_node_candidate():
    """RESIGN-1: the resigned node's election timeout makes it a candidate of the next epoch."""
    cfg = config(1)
    s = _resigned(cfg)
    t = timer(cfg, s, TimerKind.ELECTION_TIMEOUT)
    assert t.state == NodeState(
        role=Role.CANDIDATE, epoch=6, leader_id=-1, voted_id=1, granted=frozenset({1}), log=log(1, 5), high_watermark=2
    )
    ask = VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=6, CandidateId=1, LastOffsetEpoch=5, LastOffset=1)
    assert Counter(t.outputs) == Counter([Send(destination=2, message=ask), Send(destination=3, message=ask), election_timer()])
    assert "RESIGN-1" in t.rules


def test_resign_1_resigned_node_rejects_client_appends():
    """RESIGN-1: a resigned leader accepts no client appends (NOT_LEADER_OR_FOLLOWER)."""
    cfg = config(1)
    s = _resigned(cfg)
    t = node.step(cfg, s, ClientAppend(value=7))
    assert t.state == s
    assert t.outputs == (AppendResult(ErrorCode=errors.NOT_LEADER_OR_FOLLOWER, Offset=-1),)
    assert "CLIENT-1" in t.rules


def test_resign_1_resigned_node_client_append_cites_resign_rule():
    """RESIGN-1: the resigned node's rejection of a client append is the RESIGN-1 branch."""
    cfg = config(1)
    s = _resigned(cfg)
    t = node.step(cfg, s, ClientAppend(value=7))
    assert t.outputs == (AppendResult(ErrorCode=errors.NOT_LEADER_OR_FOLLOWER, Offset=-1),)
    assert "RESIGN-1" in t.rules


# Options.resigned_resends_end_epoch (profiles kafka-3.9, kafka-4.3): Kafka's resigned leader
# re-sends EndQuorumEpoch to the voters that have not acknowledged it (KafkaRaftClient.pollResigned
# -> maybeSendRequests(ResignedState.unackedVoters); handleEndQuorumEpochResponse ->
# acknowledgeResignation), values written out by hand from those sources.

RESENDS = config(1, voters=(1, 2, 3, 4), resigned_resends_end_epoch=True)


def _resigned_with_offsets() -> NodeState:
    """Leader 1 of epoch 5 with voter 3 at offset 2, voter 2 at 1 and voter 4 unknown, resigned."""
    s = leader_state(RESENDS, 5, log(1, 5), replica_offsets=(2, 1, 2, -1))
    return node.step(RESENDS, s, Resign()).state


def test_resigned_resends_keeps_the_offsets_that_order_its_successors():
    t = node.step(RESENDS, leader_state(RESENDS, 5, log(1, 5), replica_offsets=(2, 1, 2, -1)), Resign())
    assert t.outputs == tuple(Send(destination=v, message=end(5, 1, (3, 2, 4))) for v in (3, 2, 4))
    assert (t.state.role, t.state.endorsed, t.state.replica_offsets) == (Role.RESIGNED, frozenset(), (2, 1, 2, -1))


def test_resigned_resends_to_every_unacknowledged_voter_on_its_request_timer():
    s = _resigned_with_offsets()
    acked = response(RESENDS, s, 2, answer(5, 1), end(5, 1, (3, 2, 4)))
    assert acked.state.endorsed == {2} and acked.outputs == ()
    assert "END-SEND-2" in acked.rules
    retry = timer(RESENDS, acked.state, TimerKind.REQUEST_TIMEOUT)
    assert retry.state == acked.state
    assert retry.outputs == (Send(destination=3, message=end(5, 1, (3, 2, 4))), Send(destination=4, message=end(5, 1, (3, 2, 4))))
    assert TimerKind.REQUEST_TIMEOUT in node.armed_timers(RESENDS, s)


@pytest.mark.parametrize(
    "message",
    [answer(5, 1, errors.INCONSISTENT_VOTER_SET), answer(5, -1, errors.UNKNOWN_LEADER_EPOCH), answer(5, 1, top_error=errors.INCONSISTENT_CLUSTER_ID)],
    ids=["partition-error", "unknown-leader-epoch", "top-level-error"],
)
def test_resigned_resends_an_answer_with_an_error_acknowledges_nothing(message):
    s = _resigned_with_offsets()
    assert response(RESENDS, s, 2, message, end(5, 1, (3, 2, 4))).state.endorsed == frozenset()


def test_resigned_stands_when_its_election_timer_fires_re_sending_nothing():
    """Its EndQuorumEpochs unacknowledged are still in flight when its election timer fires (a
    node whose request timer would expire first declines that timer: LateRequestTimeout), so it
    stands and re-sends nothing; it re-sends on its request timer only."""
    s = response(RESENDS, _resigned_with_offsets(), 3, answer(5, 1), end(5, 1, (3, 2, 4))).state
    t = timer(RESENDS, s, TimerKind.ELECTION_TIMEOUT)
    assert (t.state.role, t.state.epoch, t.state.endorsed, t.state.replica_offsets) == (Role.CANDIDATE, 6, frozenset(), ())
    ask = VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=6, CandidateId=1, LastOffsetEpoch=5, LastOffset=1)
    assert Counter(t.outputs) == Counter([Send(destination=v, message=ask) for v in (2, 3, 4)] + [election_timer()])
    assert "RESIGN-1" in t.rules and "END-SEND-2" not in t.rules


def test_resigned_resends_after_a_restart_names_no_successor():
    """QSTATE-4 with restart_resigned_ends_epoch: a restarted leader's EndQuorumEpoch, and its re-sends, name no successor."""
    cfg = config(1, resigned_resends_end_epoch=True, restart_resigned_ends_epoch=True)
    down = state(Role.DOWN, epoch=5, leader_id=1, voted_id=1, log=log(1, 5))
    restarted = node.restart(cfg, down)
    assert restarted.state.role == Role.RESIGNED
    retry = timer(cfg, restarted.state, TimerKind.REQUEST_TIMEOUT)
    assert retry.outputs == (Send(destination=2, message=end(5, 1, ())), Send(destination=3, message=end(5, 1, ())))


def test_stale_responses_ignored_drops_an_answer_to_an_earlier_resignation():
    """COMMON-3 under Options.stale_responses_ignored: an answer to the EndQuorumEpoch of a
    resignation that is over (the node stood since) is dropped unread, its fenced epoch not taken."""
    candidate = NodeState(role=Role.CANDIDATE, epoch=6, voted_id=1, granted=frozenset({1}), log=log(1, 5))
    fenced = answer(7, 3, errors.FENCED_LEADER_EPOCH)
    kafka = response(config(1, stale_responses_ignored=True), candidate, 3, fenced, end(5, 1, (2, 3)))
    assert kafka.state == candidate and kafka.outputs == () and kafka.rules == ("COMMON-3",)
    kip = response(config(1), candidate, 3, fenced, end(5, 1, (2, 3)))
    assert (kip.state.role, kip.state.epoch, kip.state.leader_id) == (Role.FOLLOWER, 7, 3)
