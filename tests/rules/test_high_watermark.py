"""The high watermark: at the leader (HW-1..3) and at a follower (HW-4)."""

import msgspec
from conftest import CLUSTER_ID, config, leader_state, log, reply, request, response, sends, state

from model.events import Committed, Send
from model.messages import DescribeQuorumRequest, DescribeQuorumResponse, EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch, Record, ReplicaState
from model.state import Role
from spec import errors

replace = msgspec.structs.replace

NO_DIVERGING = EpochEndOffset(Epoch=-1, EndOffset=-1)


def fetch(replica: int, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    return FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch)


def answer(leader: int, epoch: int, hw: int, records=()) -> FetchResponse:
    return FetchResponse(
        ErrorCode=errors.NONE,
        PartitionErrorCode=errors.NONE,
        HighWatermark=hw,
        DivergingEpoch=NO_DIVERGING,
        CurrentLeader=LeaderIdAndEpoch(LeaderId=leader, LeaderEpoch=epoch),
        Records=records,
    )


# HW-1 ---------------------------------------------------------------------------------------


def figure_8_leader(**options):
    """Five voters; leader 1 of epoch 4 holds an epoch-2 record (offset 1) and its own epoch-4 record (offset 2)."""
    cfg = config(1, voters=(1, 2, 3, 4, 5), **options)
    records = log(1, 2, 4)
    return cfg, leader_state(cfg, 4, records, high_watermark=1, replica_offsets=(3, 2, -1, -1, -1))


def test_hw_1_earlier_epoch_record_on_a_majority_is_not_committed_by_counting():
    """HW-1: the leader advances the HW only once a record of its own epoch is on a majority (Raft Figure 8)."""
    cfg, s = figure_8_leader()
    records = s.log
    # Voter 3 now has the epoch-2 record too: offset 1 is on 3 of 5 voters (1, 2, 3).
    t = request(cfg, s, 3, fetch(3, 4, 2, 2))
    assert t.outputs == (Send(destination=3, message=answer(1, 4, 1, records=records[2:])),)
    assert t.state.high_watermark == 1
    assert t.state.replica_offsets == (3, 2, 2, -1, -1)
    assert "HW-1" in t.rules

    # Voter 2 gets the epoch-4 record: only 2 of 5 voters have it.
    t = request(cfg, t.state, 2, fetch(2, 4, 3, 4))
    assert t.outputs == (Send(destination=2, message=answer(1, 4, 1)),)
    assert t.state.high_watermark == 1
    assert "HW-1" in t.rules

    # Voter 3 gets it as well: the epoch-4 record is on a majority, and everything before it is committed.
    t = request(cfg, t.state, 3, fetch(3, 4, 3, 4))
    assert t.outputs == (Send(destination=3, message=answer(1, 4, 3)), Committed(HighWatermark=3))
    assert t.state.high_watermark == 3
    assert t.state.replica_offsets == (3, 3, 3, -1, -1)
    assert "HW-1" in t.rules


def test_hw_1_faulty_hw_any_epoch_commits_the_earlier_epoch_record_by_counting():
    """HW-1: the faulty option hw_any_epoch commits the epoch-2 record by counting alone (what HW-1 forbids)."""
    cfg, s = figure_8_leader(hw_any_epoch=True)
    t = request(cfg, s, 3, fetch(3, 4, 2, 2))
    assert t.outputs == (Send(destination=3, message=answer(1, 4, 2, records=s.log[2:])), Committed(HighWatermark=2))
    assert t.state.high_watermark == 2


def test_hw_1_leader_without_a_record_of_its_epoch_never_advances():
    """HW-1: with no record of the leader's epoch in its log, no majority moves the HW."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 1), high_watermark=0)
    t = request(cfg, s, 2, fetch(2, 3, 2, 1))
    assert t.outputs == (Send(destination=2, message=answer(1, 3, 0)),)
    assert t.state.high_watermark == 0
    assert t.state.replica_offsets == (2, 2, -1)
    assert "HW-1" in t.rules


# HW-2 ---------------------------------------------------------------------------------------


def test_hw_2_high_watermark_is_the_majority_offset_with_the_leader_counted():
    """HW-2: the HW is the largest offset on a majority of voters, the leader's own log end counted."""
    cfg = config(1)
    records = log(1, 2, 2, 2)
    s = leader_state(cfg, 2, records, high_watermark=0)  # offsets (4, -1, -1)
    t = request(cfg, s, 2, fetch(2, 2, 3, 2))
    # Leader at 4, voter 2 at 3, voter 3 unknown: offset 3 is on 2 of 3 voters.
    assert t.outputs == (Send(destination=2, message=answer(1, 2, 3, records=records[3:])), Committed(HighWatermark=3))
    assert t.state.high_watermark == 3
    assert "HW-2" in t.rules

    t = request(cfg, t.state, 3, fetch(3, 2, 4, 2))
    # Leader at 4, voter 2 at 3, voter 3 at 4: offset 4 is on 2 of 3 voters.
    assert t.outputs == (Send(destination=3, message=answer(1, 2, 4)), Committed(HighWatermark=4))
    assert t.state.high_watermark == 4
    assert t.state.replica_offsets == (4, 3, 4)
    assert "HW-2" in t.rules


def test_hw_2_high_watermark_never_decreases_when_a_fetch_offset_goes_down():
    """HW-2: the high watermark never moves backwards at the leader."""
    cfg = config(1)
    records = log(1, 2, 2, 2)
    s = leader_state(cfg, 2, records, high_watermark=3, replica_offsets=(4, 3, 2))
    t = request(cfg, s, 2, fetch(2, 2, 1, 1))  # voter 2 now reports offset 1: majority offset is 2
    assert t.outputs == (Send(destination=2, message=answer(1, 2, 3, records=records[1:])),)
    assert t.state.replica_offsets == (4, 1, 2)
    assert t.state.high_watermark == 3
    assert "HW-2" in t.rules


def test_hw_2_no_majority_beyond_the_leader_keeps_the_high_watermark():
    """HW-2: the leader alone is not a majority of three voters."""
    cfg = config(1)
    s = leader_state(cfg, 2, log(1, 2, 2), high_watermark=0)
    t = request(cfg, s, 2, fetch(2, 2, 0, 0))
    assert t.outputs == (Send(destination=2, message=answer(1, 2, 0, records=log(1, 2, 2))),)
    assert t.state.high_watermark == 0
    assert t.state.replica_offsets == (3, 0, -1)
    assert "HW-2" in t.rules


# HW-3 ---------------------------------------------------------------------------------------


def test_hw_3_observer_fetch_never_advances_the_high_watermark():
    """HW-3: an observer's fetch never advances the HW; DescribeQuorum shows its offset."""
    cfg = config(1, voters=(1, 2, 3), observers=(4,))
    records = log(1, 2)
    s = leader_state(cfg, 2, records, high_watermark=0)  # offsets (2, -1, -1, -1)
    t = request(cfg, s, 4, fetch(4, 2, 2, 2))
    # Counted with the observer, offset 2 would be on 2 replicas: HW-3 says it must not count.
    assert t.outputs == (Send(destination=4, message=answer(1, 2, 0)),)
    assert t.state == replace(s, replica_offsets=(2, -1, -1, 2))  # no endorsement: observers are not voters
    assert "HW-3" in t.rules

    described = request(cfg, t.state, 9, DescribeQuorumRequest())
    assert reply(described) == DescribeQuorumResponse(
        ErrorCode=errors.NONE,
        PartitionErrorCode=errors.NONE,
        LeaderId=1,
        LeaderEpoch=2,
        HighWatermark=0,
        CurrentVoters=(
            ReplicaState(ReplicaId=1, LogEndOffset=2),
            ReplicaState(ReplicaId=2, LogEndOffset=-1),
            ReplicaState(ReplicaId=3, LogEndOffset=-1),
        ),
        Observers=(ReplicaState(ReplicaId=4, LogEndOffset=2),),
    )


def test_hw_3_voter_fetch_then_advances_even_with_many_observers():
    """HW-3: only voters count: one voter plus the leader is a majority of three however many observers there are."""
    cfg = config(1, voters=(1, 2, 3), observers=(4, 5, 6))
    records = log(1, 2)
    s = leader_state(cfg, 2, records, high_watermark=0, replica_offsets=(2, -1, -1, 2, 2, 2))
    t = request(cfg, s, 2, fetch(2, 2, 2, 2))
    assert t.outputs == (Send(destination=2, message=answer(1, 2, 2)), Committed(HighWatermark=2))
    assert t.state.high_watermark == 2


# HW-4 ---------------------------------------------------------------------------------------


def follower(records, hw=0):
    cfg = config(2)
    in_flight = fetch(2, 3, len(records), records[-1].Epoch if records else 0)
    return cfg, state(Role.FOLLOWER, epoch=3, leader_id=1, log=tuple(records), high_watermark=hw, fetching=in_flight)


def test_hw_4_follower_high_watermark_is_capped_by_its_log_end():
    """HW-4: a follower's HW = min(the response's HighWatermark, its own log end offset)."""
    cfg, s = follower(log(1, 1))
    t = response(cfg, s, 1, answer(1, 3, 5), s.fetching)
    assert t.state.high_watermark == 2
    assert t.state.log == log(1, 1)
    assert sends(t) == [Send(destination=1, message=fetch(2, 3, 2, 1))]
    assert "HW-4" in t.rules


def test_hw_4_follower_takes_the_leader_high_watermark_below_its_log_end():
    """HW-4: a leader HighWatermark below the follower's log end is taken as is."""
    cfg, s = follower(log(1, 1, 3))
    t = response(cfg, s, 1, answer(1, 3, 1), s.fetching)
    assert t.state.high_watermark == 1
    assert "HW-4" in t.rules


def test_hw_4_high_watermark_counts_the_records_just_appended():
    """HW-4: the log end offset compared is the one after appending the response's records."""
    cfg, s = follower(log(1, 1))
    new = (Record(Offset=2, Epoch=3, Value=3), Record(Offset=3, Epoch=3, Value=4))
    t = response(cfg, s, 1, answer(1, 3, 9, records=new), s.fetching)
    assert t.state.log == log(1, 1) + new
    assert t.state.high_watermark == 4
    assert "HW-4" in t.rules
