"""Client appends: only the leader appends (CLIENT-1); acknowledged once committed (CLIENT-2)."""

import msgspec
from conftest import CLUSTER_ID, config, leader_state, log, request, state

from model import node
from model.events import AppendResult, ClientAppend, Committed, Send
from model.messages import EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch, Record
from model.state import Role
from spec import errors

replace = msgspec.structs.replace


def append(cfg, s, value):
    return node.step(cfg, s, ClientAppend(value=value))


def fetch(replica: int, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    return FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch)


def answer(leader: int, epoch: int, hw: int, records=()) -> FetchResponse:
    return FetchResponse(
        HighWatermark=hw,
        DivergingEpoch=EpochEndOffset(Epoch=-1, EndOffset=-1),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=leader, LeaderEpoch=epoch),
        Records=records,
    )


# CLIENT-1 -----------------------------------------------------------------------------------


def test_client_1_leader_appends_in_its_epoch_at_the_log_end():
    """CLIENT-1: the leader appends Record(Offset=log end, Epoch=its epoch, Value) and answers the offset."""
    cfg = config(1)
    s = leader_state(cfg, 2, log(1, 2))
    t = append(cfg, s, 7)
    assert t.outputs == (AppendResult(ErrorCode=errors.NONE, Offset=2),)
    assert t.state == replace(s, log=log(1, 2) + (Record(Offset=2, Epoch=2, Value=7),), replica_offsets=(3, -1, -1))
    assert "CLIENT-1" in t.rules

    t = append(cfg, t.state, 8)
    assert t.outputs == (AppendResult(ErrorCode=errors.NONE, Offset=3),)
    assert t.state.log[-1] == Record(Offset=3, Epoch=2, Value=8)
    assert "CLIENT-1" in t.rules


def test_client_1_follower_rejects_with_not_leader_and_no_state_change():
    """CLIENT-1: a non-leader rejects with NOT_LEADER_OR_FOLLOWER, offset -1, and changes nothing."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=2, leader_id=1, log=log(1, 2), high_watermark=1)
    t = append(cfg, s, 7)
    assert t.outputs == (AppendResult(ErrorCode=errors.NOT_LEADER_OR_FOLLOWER, Offset=-1),)
    assert t.state == s
    assert "CLIENT-1" in t.rules


def test_client_1_every_non_leader_role_rejects():
    """CLIENT-1: unattached, voted, candidate, resigned and observer nodes reject appends too."""
    voter = config(2)
    observer = config(4, observers=(4,))
    cases = [
        (voter, state(Role.UNATTACHED, epoch=2, log=log(1))),
        (voter, state(Role.UNATTACHED, epoch=2, voted_id=3, log=log(1))),
        (voter, state(Role.CANDIDATE, epoch=3, voted_id=2, granted=frozenset({2}), log=log(1))),
        (voter, state(Role.RESIGNED, epoch=2, leader_id=2, voted_id=2, log=log(1, 2))),
        (observer, state(Role.OBSERVER, epoch=2, leader_id=1, log=log(1))),
    ]
    for cfg, s in cases:
        t = append(cfg, s, 7)
        assert t.outputs == (AppendResult(ErrorCode=errors.NOT_LEADER_OR_FOLLOWER, Offset=-1),), s
        assert t.state == s
        assert "CLIENT-1" in t.rules


def test_client_1_down_node_does_not_append():
    """CLIENT-1: a crashed node appends nothing."""
    cfg = config(1)
    s = replace(leader_state(cfg, 2, log(1, 2)), role=Role.DOWN)
    t = append(cfg, s, 7)
    assert t.state == s
    assert not any(type(o) is AppendResult and o.ErrorCode == errors.NONE for o in t.outputs)


# CLIENT-2 -----------------------------------------------------------------------------------


def test_client_2_append_is_committed_only_when_the_high_watermark_passes_it():
    """CLIENT-2: Committed(HighWatermark) comes only once the HW passes the appended record's offset."""
    cfg = config(1)
    s = leader_state(cfg, 2, log(1, 2), high_watermark=0)
    t = append(cfg, s, 7)
    assert t.outputs == (AppendResult(ErrorCode=errors.NONE, Offset=2),)  # not committed yet
    assert t.state.high_watermark == 0
    assert "CLIENT-2" in t.rules

    t = append(cfg, t.state, 8)
    assert t.outputs == (AppendResult(ErrorCode=errors.NONE, Offset=3),)
    records = t.state.log

    # Voter 2 has offsets 0..2: the HW moves to 3, which passes offset 2 but not offset 3.
    t = request(cfg, t.state, 2, fetch(2, 2, 3, 2))
    assert t.outputs == (Send(destination=2, message=answer(1, 2, 3, records=records[3:])), Committed(HighWatermark=3))
    assert t.state.high_watermark == 3

    # Voter 3 has them all: the HW passes offset 3.
    t = request(cfg, t.state, 3, fetch(3, 2, 4, 2))
    assert t.outputs == (Send(destination=3, message=answer(1, 2, 4)), Committed(HighWatermark=4))
    assert t.state.high_watermark == 4

    # A fetch that moves nothing acknowledges nothing again.
    t = request(cfg, t.state, 2, fetch(2, 2, 3, 2))
    assert t.outputs == (Send(destination=2, message=answer(1, 2, 4, records=records[3:])),)


def test_client_2_single_voter_leader_commits_at_once():
    """CLIENT-2: a single-voter leader is its own majority: the append is committed at once."""
    cfg = config(1, voters=(1,))
    s = leader_state(cfg, 1, log(1), high_watermark=1)
    t = append(cfg, s, 5)
    assert t.outputs == (AppendResult(ErrorCode=errors.NONE, Offset=1), Committed(HighWatermark=2))
    assert t.state == replace(s, log=log(1) + (Record(Offset=1, Epoch=1, Value=5),), replica_offsets=(2,), high_watermark=2)
    assert "CLIENT-2" in t.rules


def test_client_2_rejected_append_is_never_committed():
    """CLIENT-2: a rejected append produces no Committed output."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=2, leader_id=1, log=log(1, 2))
    t = append(cfg, s, 7)
    assert not any(type(o) is Committed for o in t.outputs)
