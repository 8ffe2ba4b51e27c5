"""KIP-101: the leader-epoch sequence, OffsetsForLeaderEpoch, and truncation by epoch."""

import msgspec
from conftest import CLUSTER_ID, config, leader_state, log, request, response, sends, sent_to, state

from model import log as logs
from model import node
from model.events import ClientAppend, Restart, Send
from model.messages import (
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Record,
    VoteRequest,
    VoteResponse,
)
from model.state import Role
from spec import errors

replace = msgspec.structs.replace


def offsets_for(epoch: int, current: int = -1, replica: int = 2) -> OffsetsForLeaderEpochRequest:
    return OffsetsForLeaderEpochRequest(ReplicaId=replica, CurrentLeaderEpoch=current, LeaderEpoch=epoch)


def end_offset(epoch: int, offset: int, error: int = errors.NONE) -> OffsetsForLeaderEpochResponse:
    return OffsetsForLeaderEpochResponse(ErrorCode=error, LeaderEpoch=epoch, EndOffset=offset)


def fetch(replica: int, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    return FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch)


def leader_1_3_5():
    """Leader 1 of epoch 5 with epochs 1 (offsets 0-1), 3 (offsets 2-3) and 5 (offset 4)."""
    cfg = config(1)
    return cfg, leader_state(cfg, 5, log(1, 1, 3, 3, 5), high_watermark=4)


# K101-1 -------------------------------------------------------------------------------------


def test_k101_1_leader_epoch_sequence_gains_an_entry_when_a_new_leader_writes():
    """K101-1: the epoch -> start offset sequence gets an entry when a leader of a new epoch writes its first record."""
    cfg = config(1)
    s = state(Role.CANDIDATE, epoch=3, voted_id=1, granted=frozenset({1}), log=log(1, 1))
    assert logs.epoch_cache(s.log) == ((1, 0),)
    granted = VoteResponse(LeaderId=-1, LeaderEpoch=3, VoteGranted=True)
    asked = VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=3, CandidateId=1, LastOffsetEpoch=1, LastOffset=1)
    t = response(cfg, s, 2, granted, asked)
    assert t.state.role == Role.LEADER
    assert logs.epoch_cache(t.state.log) == ((1, 0), (3, 2))

    # The sequence is what OffsetsForLeaderEpoch answers from.
    o = request(cfg, t.state, 2, offsets_for(1, current=3))
    assert sent_to(o) == {2: end_offset(1, 2)}
    assert "K101-1" in o.rules

    # Further records of the same epoch add no entry.
    more = node.step(cfg, t.state, ClientAppend(value=9))
    assert logs.epoch_cache(more.state.log) == ((1, 0), (3, 2))


def test_k101_1_follower_keeps_the_sequence_of_the_records_it_replicates():
    """K101-1: each replica keeps the sequence: a follower's log gains the new epoch's start offset."""
    cfg = config(2)
    in_flight = fetch(2, 4, 2, 1)
    s = state(Role.FOLLOWER, epoch=4, leader_id=1, log=log(1, 1), fetching=in_flight)
    new = (Record(Offset=2, Epoch=4, Value=3),)
    answer = FetchResponse(
        HighWatermark=2,
        DivergingEpoch=EpochEndOffset(Epoch=-1, EndOffset=-1),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=4),
        Records=new,
    )
    t = response(cfg, s, 1, answer, in_flight)
    assert logs.epoch_cache(t.state.log) == ((1, 0), (4, 2))


# K101-2 -------------------------------------------------------------------------------------


def test_k101_2_epoch_present_and_not_last_ends_at_the_next_epoch_start():
    """K101-2: a requested epoch present and not the latest ends where the next larger epoch starts."""
    cfg, s = leader_1_3_5()
    t = request(cfg, s, 2, offsets_for(1, current=5))
    assert sent_to(t) == {2: end_offset(1, 2)}
    assert t.state == s
    assert "K101-2" in t.rules
    t = request(cfg, s, 2, offsets_for(3, current=5))
    assert sent_to(t) == {2: end_offset(3, 4)}


def test_k101_2_latest_epoch_ends_at_the_log_end_offset():
    """K101-2: the leader's latest epoch ends at its log end offset."""
    cfg, s = leader_1_3_5()
    t = request(cfg, s, 2, offsets_for(5, current=5))
    assert sent_to(t) == {2: end_offset(5, 5)}
    assert "K101-2" in t.rules


def test_k101_2_epoch_between_cached_epochs_gives_the_largest_smaller_one():
    """K101-2: an epoch the leader has no record of maps to the largest smaller cached epoch and its end."""
    cfg, s = leader_1_3_5()
    t = request(cfg, s, 2, offsets_for(4, current=5))
    assert sent_to(t) == {2: end_offset(3, 4)}
    assert "K101-2" in t.rules
    t = request(cfg, s, 2, offsets_for(2, current=5))
    assert sent_to(t) == {2: end_offset(1, 2)}
    assert "K101-2" in t.rules


def test_k101_2_epoch_smaller_than_all_gives_minus_1():
    """K101-2: an epoch smaller than every cached epoch gives (-1, -1)."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(3, 3, 5))
    t = request(cfg, s, 2, offsets_for(2, current=5))
    assert sent_to(t) == {2: end_offset(-1, -1)}
    assert "K101-2" in t.rules


def test_k101_2_epoch_larger_than_any_cached_gives_the_latest_epoch_and_log_end():
    """K101-2: LeaderEpoch = the largest cached epoch <= E: above every cached epoch, the latest one and the log end."""
    cfg, s = leader_1_3_5()
    t = request(cfg, s, 2, offsets_for(7, current=5))
    assert sent_to(t) == {2: end_offset(5, 5)}
    assert "K101-2" in t.rules


# K101-3 -------------------------------------------------------------------------------------


def test_k101_3_divergence_keeps_records_below_the_divergence_point_with_high_watermark_0():
    """K101-3: truncation is by epoch: records below the divergence point stay even with a high watermark of 0."""
    cfg = config(2)
    in_flight = fetch(2, 3, 4, 1)
    s = state(Role.FOLLOWER, epoch=3, leader_id=1, log=log(1, 1, 1, 1), high_watermark=0, fetching=in_flight)
    answer = FetchResponse(
        HighWatermark=2,
        DivergingEpoch=EpochEndOffset(Epoch=1, EndOffset=3),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=3),
        Records=(),
    )
    t = response(cfg, s, 1, answer, in_flight)
    refetch = fetch(2, 3, 3, 1)
    assert t.state == replace(s, log=log(1, 1, 1), fetching=refetch)
    assert sends(t) == [Send(destination=1, message=refetch)]
    assert logs.epoch_cache(t.state.log) == ((1, 0),)
    assert "K101-3" in t.rules


def test_k101_1_truncation_removes_the_epochs_at_or_above_the_new_log_end():
    """K101-1: a truncation removes the sequence entries whose start offset is at or above the new log end."""
    cfg = config(2)
    in_flight = fetch(2, 4, 4, 3)
    s = state(Role.FOLLOWER, epoch=4, leader_id=1, log=log(1, 1, 3, 3), fetching=in_flight)
    assert logs.epoch_cache(s.log) == ((1, 0), (3, 2))
    answer = FetchResponse(
        HighWatermark=2,
        DivergingEpoch=EpochEndOffset(Epoch=1, EndOffset=2),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=4),
        Records=(),
    )
    t = response(cfg, s, 1, answer, in_flight)
    assert t.state.log == log(1, 1)
    assert logs.epoch_cache(t.state.log) == ((1, 0),)


def test_k101_3_scenario_1_restarted_follower_keeps_its_log_above_the_high_watermark():
    """K101-3: KIP-101 scenario 1: a restarted follower does not truncate to its high watermark."""
    cfg = config(2)
    s = state(Role.DOWN, epoch=1, leader_id=1, log=log(1, 1))  # fully replicated, high watermark lost (0)
    t = node.step(cfg, s, Restart())
    expected = fetch(2, 1, 2, 1)
    assert t.state == state(Role.FOLLOWER, epoch=1, leader_id=1, log=log(1, 1), fetching=expected)
    assert sends(t) == [Send(destination=1, message=expected)]

    # The leader finds the fetch consistent: nothing is truncated.
    leader_cfg = config(1)
    leader = leader_state(leader_cfg, 1, log(1, 1), high_watermark=1, replica_offsets=(2, 1, -1))
    served = request(leader_cfg, leader, 2, expected)
    assert served.outputs[0].message.DivergingEpoch == EpochEndOffset(Epoch=-1, EndOffset=-1)
    assert served.state.high_watermark == 2


def test_k101_3_faulty_truncate_to_hw_drops_the_log_to_the_high_watermark():
    """K101-3: the faulty option truncate_to_hw makes a new follower drop its log to its HW (scenario 1's mistake)."""
    cfg = config(2, truncate_to_hw=True)
    s = state(Role.DOWN, epoch=1, leader_id=1, log=log(1, 1))
    t = node.step(cfg, s, Restart())
    expected = fetch(2, 1, 0, 0)
    assert t.state == state(Role.FOLLOWER, epoch=1, leader_id=1, log=(), fetching=expected)
    assert sends(t) == [Send(destination=1, message=expected)]


# K101-4 -------------------------------------------------------------------------------------


def test_k101_4_non_leader_answers_not_leader_or_follower():
    """K101-4: a non-leader answers NOT_LEADER_OR_FOLLOWER."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=5, leader_id=1, log=log(1, 5))
    for current in (5, -1):
        t = request(cfg, s, 3, offsets_for(1, current=current, replica=3))
        assert sent_to(t) == {3: end_offset(-1, -1, errors.NOT_LEADER_OR_FOLLOWER)}
        assert t.state == s
        assert "K101-4" in t.rules


def test_k101_4_smaller_current_leader_epoch_is_fenced():
    """K101-4: a CurrentLeaderEpoch smaller than the leader's gives FENCED_LEADER_EPOCH."""
    cfg, s = leader_1_3_5()
    t = request(cfg, s, 2, offsets_for(3, current=4))
    assert sent_to(t) == {2: end_offset(-1, -1, errors.FENCED_LEADER_EPOCH)}
    assert t.state == s
    assert "K101-4" in t.rules


def test_k101_4_larger_current_leader_epoch_is_unknown():
    """K101-4: a CurrentLeaderEpoch larger than the leader's gives UNKNOWN_LEADER_EPOCH."""
    cfg, s = leader_1_3_5()
    t = request(cfg, s, 2, offsets_for(3, current=6))
    assert sent_to(t) == {2: end_offset(-1, -1, errors.UNKNOWN_LEADER_EPOCH)}
    assert t.state == s
    assert "K101-4" in t.rules
