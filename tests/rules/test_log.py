"""The log (LOG-1) and its epoch cache (LOG-2): model.log directly, and through node steps."""

from conftest import CLUSTER_ID, config, leader_change, leader_state, log, request, response, sent_to, state

from model import log as logs
from model import node
from model.events import AppendResult, ClientAppend
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

NO_EPOCH = EpochEndOffset(Epoch=-1, EndOffset=-1)


def fetch(replica: int, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    return FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch)


def epochs_never_decrease(records) -> bool:
    return all(a.Epoch <= b.Epoch for a, b in zip(records, records[1:]))


# LOG-1 --------------------------------------------------------------------------------------


def test_log_1_client_appends_are_identified_by_offset_and_leader_epoch():
    """LOG-1: a record is identified by its offset and the epoch of the leader that appended it."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 1, 3, values=[1, 2, leader_change(1, 1, 2)]))
    t = node.step(cfg, s, ClientAppend(value=40))
    assert t.outputs == (AppendResult(ErrorCode=errors.NONE, Offset=3),)
    assert t.state.log == s.log + (Record(Offset=3, Epoch=3, Value=40),)
    assert [r.Offset for r in t.state.log] == [0, 1, 2, 3]
    assert epochs_never_decrease(t.state.log)
    assert "LOG-1" in t.rules


def test_log_1_records_carry_data_or_a_leader_change_control_record():
    """LOG-1: records carry client data or a LeaderChange control record."""
    cfg = config(1)
    s = state(Role.CANDIDATE, epoch=2, voted_id=1, granted=frozenset({1}), log=log(1))
    t = response(
        cfg,
        s,
        3,
        VoteResponse(LeaderId=-1, LeaderEpoch=2, VoteGranted=True),
        VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=2, CandidateId=1, LastOffsetEpoch=1, LastOffset=0),
    )
    assert t.state.log == (Record(Offset=0, Epoch=1, Value=1), Record(Offset=1, Epoch=2, Value=leader_change(1, 1, 3)))
    t = node.step(cfg, t.state, ClientAppend(value=5))
    assert t.state.log[-1] == Record(Offset=2, Epoch=2, Value=5)
    assert epochs_never_decrease(t.state.log)
    assert "LOG-1" in t.rules


def test_log_1_append_function_writes_at_the_log_end_in_the_given_epoch():
    """LOG-1: model.log.append gives the next offset and the writer's epoch."""
    assert logs.append((), 1, 7) == (Record(Offset=0, Epoch=1, Value=7),)
    assert logs.append(log(1, 2), 4, 9) == log(1, 2) + (Record(Offset=2, Epoch=4, Value=9),)


def test_log_1_last_epoch_is_0_for_an_empty_log():
    """LOG-1: the epoch of the last record, 0 when there is none (epoch 0 holds no records)."""
    assert logs.last_epoch(()) == 0
    assert logs.last_epoch(log(1, 1, 4)) == 4


# LOG-2 --------------------------------------------------------------------------------------


def test_log_2_epoch_cache_maps_each_epoch_to_its_start_offset():
    """LOG-2: the epoch cache maps each epoch in the log to its start offset."""
    assert logs.epoch_cache(()) == ()
    assert logs.epoch_cache(log(1, 1, 3, 3, 5)) == ((1, 0), (3, 2), (5, 4))
    assert logs.epoch_start(log(1, 1, 3, 3, 5), 3) == 2
    assert logs.epoch_start(log(1, 1, 3, 3, 5), 2) is None
    assert logs.epoch_start((), 1) is None


def test_log_2_end_offset_for_epoch_is_next_epoch_start_or_log_end():
    """LOG-2: an epoch's end offset is the next larger epoch's start, or the log end for the last epoch."""
    records = log(1, 1, 3, 3, 5)
    assert logs.end_offset_for_epoch(records, 1) == EpochEndOffset(Epoch=1, EndOffset=2)
    assert logs.end_offset_for_epoch(records, 3) == EpochEndOffset(Epoch=3, EndOffset=4)
    assert logs.end_offset_for_epoch(records, 5) == EpochEndOffset(Epoch=5, EndOffset=5)
    assert logs.end_offset_for_epoch(records, 4) == EpochEndOffset(Epoch=3, EndOffset=4)
    assert logs.end_offset_for_epoch(records, 2) == EpochEndOffset(Epoch=1, EndOffset=2)
    assert logs.end_offset_for_epoch(records, 0) == NO_EPOCH
    assert logs.end_offset_for_epoch((), 3) == NO_EPOCH


def test_log_2_end_offset_for_epoch_strictly_below():
    """LOG-2: strictly_below (FETCH-REQ-3A's literal reading) skips the epoch itself."""
    records = log(1, 1, 3, 3, 5)
    assert logs.end_offset_for_epoch(records, 3, strictly_below=True) == EpochEndOffset(Epoch=1, EndOffset=2)
    assert logs.end_offset_for_epoch(records, 4, strictly_below=True) == EpochEndOffset(Epoch=3, EndOffset=4)
    assert logs.end_offset_for_epoch(records, 1, strictly_below=True) == NO_EPOCH


def test_log_2_is_consistent():
    """LOG-2: a fetch is consistent when the record before FetchOffset has epoch LastFetchedEpoch."""
    records = log(1, 1, 2, 2, 3)
    assert logs.is_consistent(records, 0, 0)
    assert logs.is_consistent(records, 0, -1)
    assert logs.is_consistent(records, 2, 1)  # start of the next epoch
    assert logs.is_consistent(records, 3, 2)  # inside epoch 2
    assert logs.is_consistent(records, 5, 3)  # log end
    assert not logs.is_consistent(records, 3, 1)
    assert not logs.is_consistent(records, 6, 3)  # beyond the log end
    assert not logs.is_consistent((), 1, 1)


def test_log_2_truncate_diverging():
    """LOG-2: truncation drops offsets >= EndOffset and every record of a larger epoch."""
    assert logs.truncate_diverging(log(1, 1, 1, 1), EpochEndOffset(Epoch=1, EndOffset=2)) == log(1, 1)
    assert logs.truncate_diverging(log(1, 2, 2, 3), EpochEndOffset(Epoch=1, EndOffset=3)) == log(1)
    assert logs.truncate_diverging(log(1, 1), EpochEndOffset(Epoch=1, EndOffset=5)) == log(1, 1)
    assert logs.truncate_diverging(log(1, 1), EpochEndOffset(Epoch=0, EndOffset=0)) == ()


def test_log_2_is_up_to_date_compares_last_epoch_then_last_offset():
    """LOG-2: a candidate's last (epoch, offset) is at least the voter's last (epoch, offset)."""
    assert logs.is_up_to_date(0, -1, ())
    assert logs.is_up_to_date(2, 0, log(1, 1))  # larger last epoch, shorter log
    assert logs.is_up_to_date(1, 1, log(1, 1))  # equal
    assert logs.is_up_to_date(1, 5, log(1, 1))
    assert not logs.is_up_to_date(1, 0, log(1, 1))  # same epoch, shorter
    assert not logs.is_up_to_date(1, 3, log(1, 2))  # smaller last epoch, longer log
    assert not logs.is_up_to_date(0, -1, log(1))


def test_log_2_divergence_answer_uses_the_epoch_cache():
    """LOG-2: the leader's DivergingEpoch comes from its epoch cache (end = next epoch's start)."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 1, 3, 3, 5))
    t = request(cfg, s, 2, fetch(2, 5, 4, 4))  # fetcher's last epoch 4: largest cached epoch <= 4 is 3
    assert t.outputs[0].message == FetchResponse(
        HighWatermark=0,
        DivergingEpoch=EpochEndOffset(Epoch=3, EndOffset=4),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=5),
        Records=(),
    )
    assert "LOG-2" in t.rules


def test_log_2_offsets_for_leader_epoch_answer_uses_the_epoch_cache():
    """LOG-2: OffsetsForLeaderEpoch answers from the epoch cache."""
    cfg = config(1)
    s = leader_state(cfg, 5, log(1, 1, 3, 3, 5))
    t = request(cfg, s, 2, OffsetsForLeaderEpochRequest(ReplicaId=2, CurrentLeaderEpoch=5, LeaderEpoch=3))
    assert sent_to(t) == {2: OffsetsForLeaderEpochResponse(ErrorCode=errors.NONE, LeaderEpoch=3, EndOffset=4)}
    assert "LOG-2" in t.rules
