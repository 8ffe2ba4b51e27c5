"""Fetch: the follower's request, the leader's answer, and the follower's handling of the answer."""

import msgspec
from conftest import CLUSTER_ID, config, leader_change, leader_state, log, reply, request, response, sends, sent_to, state, timer

from model import node
from model.events import Committed, Restart, Send, Shutdown, TimerKind
from model.messages import BeginQuorumEpochRequest, EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch, Record
from model.state import Role
from spec import errors

replace = msgspec.structs.replace

NO_DIVERGING = EpochEndOffset(Epoch=-1, EndOffset=-1)


def fetch(replica: int, epoch: int, offset: int, last_epoch: int, cluster_id: str | None = CLUSTER_ID) -> FetchRequest:
    return FetchRequest(
        ClusterId=cluster_id, ReplicaId=replica, CurrentLeaderEpoch=epoch, FetchOffset=offset, LastFetchedEpoch=last_epoch
    )


def answer(leader: int, epoch: int, hw: int, *, error: int = errors.NONE, top_error: int = errors.NONE, diverging=NO_DIVERGING, records=()) -> FetchResponse:
    return FetchResponse(
        ErrorCode=top_error,
        PartitionErrorCode=error,
        HighWatermark=hw,
        DivergingEpoch=diverging,
        CurrentLeader=LeaderIdAndEpoch(LeaderId=leader, LeaderEpoch=epoch),
        Records=records,
    )


def follower(node_id: int, leader: int, epoch: int, records, **fields):
    """A follower whose Fetch for its log end is in flight."""
    last = records[-1].Epoch if records else 0
    in_flight = fetch(node_id, epoch, len(records), last)
    return state(Role.FOLLOWER, epoch=epoch, leader_id=leader, log=tuple(records), fetching=in_flight, **fields)


# FETCH-SEND-1 -------------------------------------------------------------------------------


def test_fetch_send_1_new_follower_fetches_its_log_end_from_the_announced_leader():
    """FETCH-SEND-1: a new follower fetches with its log end offset, last record epoch, epoch, id and cluster id."""
    cfg = config(2)
    s = state(Role.UNATTACHED, epoch=1, log=log(1, 1, 2))
    t = request(cfg, s, 1, BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=1, LeaderEpoch=3))
    expected = FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=2, CurrentLeaderEpoch=3, FetchOffset=3, LastFetchedEpoch=2)
    fetches = [o for o in sends(t) if type(o.message) is FetchRequest]
    assert fetches == [Send(destination=1, message=expected)]
    assert t.state.role == Role.FOLLOWER
    assert (t.state.epoch, t.state.leader_id, t.state.fetching) == (3, 1, expected)


def test_fetch_send_1_restarted_follower_fetches_from_its_persisted_leader():
    """FETCH-SEND-1: FetchOffset = log end offset, LastFetchedEpoch = epoch of the last record, CurrentLeaderEpoch = its epoch."""
    cfg = config(3)
    s = state(Role.DOWN, epoch=4, leader_id=2, voted_id=2, log=log(1, 1, 2, 4))
    t = node.step(cfg, s, Restart())
    expected = FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=3, CurrentLeaderEpoch=4, FetchOffset=4, LastFetchedEpoch=4)
    assert sends(t) == [Send(destination=2, message=expected)]
    assert t.state == state(Role.FOLLOWER, epoch=4, leader_id=2, voted_id=2, log=log(1, 1, 2, 4), fetching=expected)
    assert "FETCH-SEND-1" in t.rules


def test_fetch_send_1_empty_log_fetches_offset_0_with_last_fetched_epoch_0():
    """FETCH-SEND-1: an empty log fetches FetchOffset 0 with LastFetchedEpoch 0."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=1, leader_id=1)
    t = timer(cfg, s, TimerKind.REQUEST_TIMEOUT)
    expected = FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=2, CurrentLeaderEpoch=1, FetchOffset=0, LastFetchedEpoch=0)
    assert sends(t) == [Send(destination=1, message=expected)]
    assert t.state == replace(s, fetching=expected)
    assert "FETCH-SEND-1" in t.rules


def test_fetch_send_1_no_cached_cluster_id_sends_null_cluster_id():
    """FETCH-SEND-1: ClusterId = the cached cluster id, null if the node has none."""
    cfg = config(2, cluster_id=None)
    s = state(Role.FOLLOWER, epoch=2, leader_id=1, log=log(1, 2))
    t = timer(cfg, s, TimerKind.REQUEST_TIMEOUT)
    expected = FetchRequest(ClusterId=None, ReplicaId=2, CurrentLeaderEpoch=2, FetchOffset=2, LastFetchedEpoch=2)
    assert sends(t) == [Send(destination=1, message=expected)]
    assert t.state.fetching == expected
    assert "FETCH-SEND-1" in t.rules


# FETCH-SEND-2 -------------------------------------------------------------------------------


def test_fetch_send_2_each_response_is_followed_by_one_fetch_to_the_leader():
    """FETCH-SEND-2: after each Fetch response the follower sends its next Fetch to its leader; one in flight."""
    cfg = config(2)
    s = follower(2, 1, 3, log(1, 1))
    new = (Record(Offset=2, Epoch=3, Value=leader_change(1, 1, 2)), Record(Offset=3, Epoch=3, Value=9))
    t = response(cfg, s, 1, answer(1, 3, 2, records=new), s.fetching)
    next_fetch = fetch(2, 3, 4, 3)
    assert sends(t) == [Send(destination=1, message=next_fetch)]
    assert t.state == replace(s, log=log(1, 1) + new, high_watermark=2, fetching=next_fetch)
    assert "FETCH-SEND-2" in t.rules

    # The answer to that Fetch triggers the next one, and so on.
    t2 = response(cfg, t.state, 1, answer(1, 3, 4), next_fetch)
    assert sends(t2) == [Send(destination=1, message=fetch(2, 3, 4, 3))]
    assert t2.state == replace(t.state, high_watermark=4)
    assert "FETCH-SEND-2" in t2.rules


def test_fetch_send_2_error_response_is_followed_by_the_next_fetch():
    """FETCH-SEND-2: after each Fetch response, an error answer included, the next Fetch goes to the leader."""
    cfg = config(2)
    s = follower(2, 1, 3, log(1, 3))
    # Leader 1 has resigned in epoch 3: it answers NOT_LEADER_OR_FOLLOWER, still naming itself for epoch 3.
    t = response(cfg, s, 1, answer(1, 3, 0, error=errors.NOT_LEADER_OR_FOLLOWER), s.fetching)
    next_fetch = fetch(2, 3, 2, 3)
    assert sends(t) == [Send(destination=1, message=next_fetch)]
    assert t.state == replace(s, fetching=next_fetch)
    assert "FETCH-SEND-2" in t.rules


def test_fetch_send_2_response_to_a_fetch_no_longer_in_flight_sends_nothing():
    """FETCH-SEND-2: one Fetch in flight at a time; a stale answer does not start a second one."""
    cfg = config(2)
    s = follower(2, 1, 3, log(1, 1))
    stale = fetch(2, 3, 1, 1)
    t = response(cfg, s, 1, answer(1, 3, 2), stale)
    assert t.outputs == ()
    assert t.state == s


# FETCH-REQ-1 --------------------------------------------------------------------------------


def test_fetch_req_1_other_cluster_id_is_inconsistent_cluster_id():
    """FETCH-REQ-1: a non-null ClusterId different from the leader's cached one gets INCONSISTENT_CLUSTER_ID."""
    cfg = config(1)
    s = leader_state(cfg, 2, log(1, 2), high_watermark=1)
    t = request(cfg, s, 2, fetch(2, 2, 2, 2, cluster_id="other-cluster"))
    assert reply(t) == answer(1, 2, 1, top_error=errors.INCONSISTENT_CLUSTER_ID)
    assert sent_to(t) == {2: answer(1, 2, 1, top_error=errors.INCONSISTENT_CLUSTER_ID)}
    assert t.state == s  # no progress recorded, no endorsement
    assert "FETCH-REQ-1" in t.rules


def test_fetch_req_1_cluster_id_is_checked_first_at_any_receiver():
    """FETCH-REQ-1: the cluster-id check comes first, before the role and epoch checks."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=5, leader_id=1, log=log(1, 5), high_watermark=1)
    for epoch in (4, 5, 6):
        t = request(cfg, s, 3, fetch(3, epoch, 0, 0, cluster_id="other-cluster"))
        assert sent_to(t) == {3: answer(1, 5, 1, top_error=errors.INCONSISTENT_CLUSTER_ID)}, epoch
        assert t.state == s
        assert "FETCH-REQ-1" in t.rules


def test_fetch_req_1_same_cluster_id_is_served():
    """FETCH-REQ-1: the leader's own cluster id passes the check."""
    cfg = config(1)
    s = leader_state(cfg, 2, log(1, 2))
    t = request(cfg, s, 2, fetch(2, 2, 1, 1))
    assert reply(t) == answer(1, 2, 0, records=log(1, 2)[1:])
    assert t.state.replica_offsets == (2, 1, -1)
    assert "FETCH-REQ-6" in t.rules


# FETCH-REQ-2A / 2B --------------------------------------------------------------------------


def test_fetch_req_2a_smaller_current_leader_epoch_is_fenced():
    """FETCH-REQ-2A: CurrentLeaderEpoch smaller than the receiver's epoch gets FENCED_LEADER_EPOCH."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 3), high_watermark=1)
    t = request(cfg, s, 2, fetch(2, 2, 1, 1))
    assert sent_to(t) == {2: answer(1, 3, 1, error=errors.FENCED_LEADER_EPOCH)}
    assert t.state == s
    assert "FETCH-REQ-2A" in t.rules


def test_fetch_req_2b_larger_current_leader_epoch_is_unknown():
    """FETCH-REQ-2B: CurrentLeaderEpoch larger than the receiver's epoch gets UNKNOWN_LEADER_EPOCH."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 3), high_watermark=1)
    t = request(cfg, s, 2, fetch(2, 4, 2, 3))
    assert sent_to(t) == {2: answer(1, 3, 1, error=errors.UNKNOWN_LEADER_EPOCH)}
    assert t.state == s  # the leader does not adopt the fetcher's epoch
    assert "FETCH-REQ-2B" in t.rules


# FETCH-REQ-3 --------------------------------------------------------------------------------


def test_fetch_req_3_fetch_offset_inside_the_last_fetched_epoch_is_consistent():
    """FETCH-REQ-3: FetchOffset in the range of epoch LastFetchedEpoch is served with records."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 1, 2, 2, 3))
    t = request(cfg, s, 2, fetch(2, 3, 3, 2))
    assert sent_to(t) == {2: answer(1, 3, 0, records=log(1, 1, 2, 2, 3)[3:])}
    assert t.state.replica_offsets == (5, 3, -1)
    assert "FETCH-REQ-3" in t.rules


def test_fetch_req_3_fetch_offset_at_the_start_of_the_next_epoch_is_consistent():
    """FETCH-REQ-3: FetchOffset equal to the start offset of the next epoch is consistent."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 1, 2, 2, 3))
    t = request(cfg, s, 2, fetch(2, 3, 2, 1))
    assert sent_to(t) == {2: answer(1, 3, 0, records=log(1, 1, 2, 2, 3)[2:])}
    assert t.state.replica_offsets == (5, 2, -1)
    assert "FETCH-REQ-3" in t.rules


def test_fetch_req_3_inconsistent_fetch_gets_no_records_and_a_diverging_epoch():
    """FETCH-REQ-3: an inconsistent Fetch is answered with no records and DivergingEpoch set."""
    cfg = config(1)
    records = log(1, 1, 2, 2, 3)
    s = leader_state(cfg, 3, records, high_watermark=2, replica_offsets=(5, -1, 2))
    t = request(cfg, s, 2, fetch(2, 3, 3, 1))  # the fetcher's offset 2 has epoch 1, the leader's epoch 2
    assert sent_to(t) == {2: answer(1, 3, 2, diverging=EpochEndOffset(Epoch=1, EndOffset=2))}
    # The fetcher is a voter in the leader's epoch (it endorses it), but its progress is not recorded.
    assert t.state == replace(s, endorsed=frozenset({1, 2}), fetched=frozenset({1, 2}))
    assert "FETCH-REQ-3" in t.rules


def test_fetch_req_3_fetch_offset_past_the_leader_log_end_is_inconsistent():
    """FETCH-REQ-3: a FetchOffset beyond the leader's log is not in the range of any of its epochs."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 1, 3))
    t = request(cfg, s, 2, fetch(2, 3, 5, 3))
    assert sent_to(t) == {2: answer(1, 3, 0, diverging=EpochEndOffset(Epoch=3, EndOffset=3))}
    assert t.state.replica_offsets == (3, -1, -1)
    assert "FETCH-REQ-3" in t.rules


# FETCH-REQ-3A -------------------------------------------------------------------------------


def test_fetch_req_3a_follower_ahead_in_its_last_epoch_gets_that_epoch_end():
    """FETCH-REQ-3A: DivergingEpoch = the largest epoch <= LastFetchedEpoch with its end offset."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 1, 3), high_watermark=2)
    t = request(cfg, s, 2, fetch(2, 3, 4, 1))  # fetcher holds 4 records of epoch 1, the leader 2
    assert sent_to(t) == {2: answer(1, 3, 2, diverging=EpochEndOffset(Epoch=1, EndOffset=2))}
    assert "FETCH-REQ-3A" in t.rules


def test_fetch_req_3a_follower_last_epoch_absent_from_leader_gets_largest_smaller_epoch():
    """FETCH-REQ-3A: an epoch the leader never had maps to the largest smaller epoch it has, with its end."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 1, 3, 3))
    t = request(cfg, s, 2, fetch(2, 3, 4, 2))  # fetcher log epochs 1, 1, 2, 2
    assert sent_to(t) == {2: answer(1, 3, 0, diverging=EpochEndOffset(Epoch=1, EndOffset=2))}
    assert "FETCH-REQ-3A" in t.rules


def test_fetch_req_3a_no_epoch_at_most_last_fetched_epoch_gives_0_0():
    """FETCH-REQ-3A: (Epoch 0, EndOffset 0) when the leader has no epoch <= LastFetchedEpoch."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(2, 2, 3))
    t = request(cfg, s, 2, fetch(2, 3, 1, 1))
    assert sent_to(t) == {2: answer(1, 3, 0, diverging=EpochEndOffset(Epoch=0, EndOffset=0))}
    assert "FETCH-REQ-3A" in t.rules


def test_fetch_req_3a_diverging_epoch_is_at_most_not_strictly_below():
    """FETCH-REQ-3A: the model's reading is <= LastFetchedEpoch (Kafka's endOffsetForEpoch)."""
    cfg = config(1)
    s = leader_state(cfg, 3, log(1, 1, 2, 2, 3), high_watermark=4)
    t = request(cfg, s, 2, fetch(2, 3, 5, 2))  # fetcher log epochs 1, 1, 2, 2, 2
    assert sent_to(t) == {2: answer(1, 3, 4, diverging=EpochEndOffset(Epoch=2, EndOffset=4))}
    assert "FETCH-REQ-3A" in t.rules


def test_fetch_req_3a_literal_below_option_gives_the_strictly_smaller_epoch():
    """FETCH-REQ-3A: the KIP's literal 'smaller than' (diverging_epoch='below') names the epoch before it."""
    cfg = config(1, diverging_epoch="below")
    s = leader_state(cfg, 3, log(1, 1, 2, 2, 3), high_watermark=4)
    t = request(cfg, s, 2, fetch(2, 3, 5, 2))
    assert sent_to(t) == {2: answer(1, 3, 4, diverging=EpochEndOffset(Epoch=1, EndOffset=2))}
    assert "FETCH-REQ-3A" in t.rules


def test_fetch_req_3a_literal_below_option_truncates_all_of_the_follower_last_epoch():
    """FETCH-REQ-3A: read literally, a follower ahead in its last epoch is told to drop the whole epoch."""
    cfg = config(1, diverging_epoch="below")
    s = leader_state(cfg, 3, log(1, 1, 3), high_watermark=2)
    t = request(cfg, s, 2, fetch(2, 3, 4, 1))
    assert sent_to(t) == {2: answer(1, 3, 2, diverging=EpochEndOffset(Epoch=0, EndOffset=0))}
    assert "FETCH-REQ-3A" in t.rules


def test_fetch_req_3a_literal_reading_makes_a_follower_drop_committed_records():
    """FETCH-REQ-3A: with the literal reading the leader tells the follower to truncate records below
    its high watermark; the follower refuses and shuts down (FETCH-RESP-2)."""
    leader_cfg = config(1, diverging_epoch="below")
    leader = leader_state(leader_cfg, 3, log(1, 1, 2, 2, 3), high_watermark=4)
    cfg = config(2, diverging_epoch="below")
    s = follower(2, 1, 3, log(1, 1, 2, 2, 2), high_watermark=4)
    diverging = reply(request(leader_cfg, leader, 2, s.fetching)).DivergingEpoch
    assert diverging == EpochEndOffset(Epoch=1, EndOffset=2)
    t = response(cfg, s, 1, answer(1, 3, 4, diverging=diverging), s.fetching)
    assert t.state.role == Role.DOWN  # offsets 2 and 3 are committed (high watermark 4)
    assert t.state.log == s.log
    assert [type(o) for o in t.outputs] == [Shutdown]

    # The model's reading keeps them: only the uncommitted offset 4 goes.
    at_most_leader_cfg = config(1)
    diverging = reply(request(at_most_leader_cfg, leader, 2, s.fetching)).DivergingEpoch
    assert diverging == EpochEndOffset(Epoch=2, EndOffset=4)
    t = response(config(2), s, 1, answer(1, 3, 4, diverging=diverging), s.fetching)
    assert t.state.log == log(1, 1, 2, 2)
    assert t.state.high_watermark == 4
    assert "FETCH-RESP-2" in t.rules


# FETCH-REQ-4 --------------------------------------------------------------------------------


def test_fetch_req_4_voter_fetch_records_its_offset_and_advances_the_high_watermark():
    """FETCH-REQ-4: a valid Fetch from a voter sets its replicated offset to FetchOffset and may advance the HW."""
    cfg = config(1)
    s = leader_state(cfg, 2, log(1, 2))
    t = request(cfg, s, 2, fetch(2, 2, 2, 2))
    assert t.outputs == (Send(destination=2, message=answer(1, 2, 2)), Committed(HighWatermark=2))
    assert t.state == replace(
        s,
        replica_offsets=(2, 2, -1),
        high_watermark=2,
        endorsed=frozenset({1, 2}),
        fetched=frozenset({1, 2}),
    )
    assert "FETCH-REQ-4" in t.rules


def test_fetch_req_4_voter_fetch_without_majority_records_offset_only():
    """FETCH-REQ-4: the offset is recorded even when the high watermark cannot move."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    s = leader_state(cfg, 2, log(1, 2, 2))
    t = request(cfg, s, 4, fetch(4, 2, 1, 1))
    assert t.outputs == (Send(destination=4, message=answer(1, 2, 0, records=log(1, 2, 2)[1:])),)
    assert t.state == replace(
        s, replica_offsets=(3, -1, -1, 1, -1), endorsed=frozenset({1, 4}), fetched=frozenset({1, 4})
    )
    assert "FETCH-REQ-4" in t.rules


# FETCH-REQ-5 --------------------------------------------------------------------------------


def test_fetch_req_5_follower_answers_not_leader_with_its_leader_and_epoch():
    """FETCH-REQ-5: a non-leader answers NOT_LEADER_OR_FOLLOWER with its known leader and epoch."""
    cfg = config(2)
    s = state(Role.FOLLOWER, epoch=3, leader_id=1, log=log(1, 3), high_watermark=1)
    t = request(cfg, s, 3, fetch(3, 3, 0, 0))
    assert sent_to(t) == {3: answer(1, 3, 1, error=errors.NOT_LEADER_OR_FOLLOWER)}
    assert t.state == s
    assert "FETCH-REQ-5" in t.rules


def test_fetch_req_5_unattached_answers_not_leader_with_no_leader():
    """FETCH-REQ-5: a node that knows no leader answers NOT_LEADER_OR_FOLLOWER with LeaderId -1."""
    cfg = config(2)
    s = state(Role.UNATTACHED, epoch=4, voted_id=3)
    t = request(cfg, s, 3, fetch(3, 4, 0, 0))
    assert sent_to(t) == {3: answer(-1, 4, 0, error=errors.NOT_LEADER_OR_FOLLOWER)}
    assert t.state == s
    assert "FETCH-REQ-5" in t.rules


def test_fetch_req_5_candidate_answers_not_leader():
    """FETCH-REQ-5: a candidate is not the leader either."""
    cfg = config(2)
    s = state(Role.CANDIDATE, epoch=4, voted_id=2, granted=frozenset({2}))
    t = request(cfg, s, 3, fetch(3, 4, 0, 0))
    assert sent_to(t) == {3: answer(-1, 4, 0, error=errors.NOT_LEADER_OR_FOLLOWER)}
    assert t.state == s
    assert "FETCH-REQ-5" in t.rules


# FETCH-REQ-6 --------------------------------------------------------------------------------


def test_fetch_req_6_answer_has_records_from_fetch_offset_to_log_end_and_the_high_watermark():
    """FETCH-REQ-6: a valid Fetch gets the leader's records from FetchOffset to its log end and its HW."""
    cfg = config(1)
    records = log(1, 2, 2, 2)
    s = leader_state(cfg, 2, records, high_watermark=2, replica_offsets=(4, 2, -1))
    t = request(cfg, s, 3, fetch(3, 2, 2, 2))
    assert t.outputs == (Send(destination=3, message=answer(1, 2, 2, records=records[2:])),)
    assert t.state == replace(s, replica_offsets=(4, 2, 2), endorsed=frozenset({1, 3}), fetched=frozenset({1, 3}))
    assert "FETCH-REQ-6" in t.rules


def test_fetch_req_6_fetch_at_log_end_gets_no_records():
    """FETCH-REQ-6: a fetcher at the leader's log end gets an empty record set and the HW."""
    cfg = config(1)
    records = log(1, 2)
    s = leader_state(cfg, 2, records, high_watermark=2, replica_offsets=(2, 2, -1))
    t = request(cfg, s, 3, fetch(3, 2, 2, 2))
    assert t.outputs == (Send(destination=3, message=answer(1, 2, 2)),)
    assert "FETCH-REQ-6" in t.rules


# FETCH-RESP-1 -------------------------------------------------------------------------------


def test_fetch_resp_1_fenced_naming_a_leader_follows_it():
    """FETCH-RESP-1: FENCED_LEADER_EPOCH naming a leader: adopt its epoch, follow it, fetch from it."""
    cfg = config(3)
    s = follower(3, 1, 2, log(1, 2), high_watermark=1)
    t = response(cfg, s, 1, answer(2, 4, 1, error=errors.FENCED_LEADER_EPOCH), s.fetching)
    expected = fetch(3, 4, 2, 2)
    assert sends(t) == [Send(destination=2, message=expected)]
    assert t.state == state(Role.FOLLOWER, epoch=4, leader_id=2, log=log(1, 2), high_watermark=1, fetching=expected)
    assert "FETCH-RESP-1" in t.rules


def test_fetch_resp_1_fenced_without_a_leader_rediscovers_from_every_other_voter():
    """FETCH-RESP-1: FENCED_LEADER_EPOCH naming no leader: unattached at the new epoch, Fetch to the voters."""
    cfg = config(3)
    s = follower(3, 1, 2, log(1, 2), high_watermark=1)
    t = response(cfg, s, 1, answer(-1, 4, 1, error=errors.FENCED_LEADER_EPOCH), s.fetching)
    expected = fetch(3, 4, 2, 2)
    assert sent_to(t) == {1: expected, 2: expected}
    assert len(sends(t)) == 2
    assert t.state == state(Role.UNATTACHED, epoch=4, log=log(1, 2), high_watermark=1, fetching=expected)
    assert "FETCH-RESP-1" in t.rules


# FETCH-RESP-2 -------------------------------------------------------------------------------


def test_fetch_resp_2_truncates_to_the_diverging_end_offset_and_refetches():
    """FETCH-RESP-2: truncate offsets >= DivergingEpoch.EndOffset, then fetch from the new log end."""
    cfg = config(2)
    s = follower(2, 1, 3, log(1, 1, 1, 1))
    t = response(cfg, s, 1, answer(1, 3, 0, diverging=EpochEndOffset(Epoch=1, EndOffset=2)), s.fetching)
    expected = fetch(2, 3, 2, 1)
    assert sends(t) == [Send(destination=1, message=expected)]
    assert t.state == replace(s, log=log(1, 1), fetching=expected)
    assert "FETCH-RESP-2" in t.rules


def test_fetch_resp_2_truncates_records_of_larger_epochs_below_the_end_offset():
    """FETCH-RESP-2: records whose epoch is greater than DivergingEpoch.Epoch go even below EndOffset."""
    cfg = config(2)
    s = follower(2, 1, 4, log(1, 2, 2, 3))
    t = response(cfg, s, 1, answer(1, 4, 0, diverging=EpochEndOffset(Epoch=1, EndOffset=3)), s.fetching)
    expected = fetch(2, 4, 1, 1)
    assert sends(t) == [Send(destination=1, message=expected)]
    assert t.state == replace(s, log=log(1), fetching=expected)
    assert "FETCH-RESP-2" in t.rules


def test_fetch_resp_2_truncation_below_the_high_watermark_is_fatal():
    """FETCH-RESP-2: a DivergingEpoch below the fetcher's high watermark would drop records it knows
    are committed: it truncates nothing, shuts down, and handles nothing more."""
    cfg = config(2)
    s = follower(2, 1, 3, log(1, 1, 1, 1), high_watermark=3)
    t = response(cfg, s, 1, answer(1, 3, 2, diverging=EpochEndOffset(Epoch=1, EndOffset=2)), s.fetching)
    assert t.state.role == Role.DOWN
    assert (t.state.epoch, t.state.leader_id, t.state.log) == (3, 1, log(1, 1, 1, 1))
    assert len(t.outputs) == 1
    assert t.outputs[0].reason == (
        "Fetch response from 1: DivergingEpoch (epoch 1, end offset 2) would truncate to offset 2, below our high watermark 3"
    )
    assert t.rules == ("FETCH-RESP-2",)
    after = response(cfg, t.state, 1, answer(1, 3, 2), t.state.fetching)
    assert (after.state, after.outputs) == (t.state, ())


def test_hw_4_a_high_watermark_below_the_followers_stops_it_with_the_records_appended_under_kafkas_reading():
    """HW-4 under Options.high_watermark_regression_fatal: Kafka appends the response's records
    before it takes the high watermark and throws (handleFetchResponse: appendAsFollower, then
    updateFollowerHighWatermark), so the node stops with the records in its log."""
    cfg = config(2, high_watermark_regression_fatal=True)
    s = follower(2, 1, 1, log(1, 1), high_watermark=2)
    records = log(1, 1, 1)[2:]
    t = response(cfg, s, 1, answer(1, 1, 1, records=records), s.fetching)
    assert t.state.role == Role.DOWN and t.state.log == log(1, 1, 1)
    assert [type(o) for o in t.outputs] == [Shutdown] and t.rules == ("HW-4",)


def test_fetch_resp_2_truncation_down_to_the_high_watermark_is_obeyed():
    """FETCH-RESP-2: truncating exactly to the high watermark drops only uncommitted records."""
    cfg = config(2)
    s = follower(2, 1, 3, log(1, 1, 1, 1), high_watermark=2)
    t = response(cfg, s, 1, answer(1, 3, 2, diverging=EpochEndOffset(Epoch=1, EndOffset=2)), s.fetching)
    assert (t.state.role, t.state.log, t.state.high_watermark) == (Role.FOLLOWER, log(1, 1), 2)
    assert sends(t) == [Send(destination=1, message=fetch(2, 3, 2, 1))]
    assert "FETCH-RESP-2" in t.rules


def test_fetch_resp_2_end_offset_past_the_log_keeps_everything():
    """FETCH-RESP-2: nothing at or above EndOffset and no larger epoch: the log stays as it is."""
    cfg = config(2)
    s = follower(2, 1, 3, log(1, 1), high_watermark=1)
    t = response(cfg, s, 1, answer(1, 3, 1, diverging=EpochEndOffset(Epoch=1, EndOffset=5)), s.fetching)
    expected = fetch(2, 3, 2, 1)
    assert t.state == replace(s, fetching=expected)
    assert sends(t) == [Send(destination=1, message=expected)]
    assert "FETCH-RESP-2" in t.rules


# FETCH-RESP-3 -------------------------------------------------------------------------------


def test_fetch_resp_3_records_starting_at_the_log_end_are_appended():
    """FETCH-RESP-3: records starting at the follower's log end offset are appended; the HW is set."""
    cfg = config(2)
    s = follower(2, 1, 2, log(1, 1))
    new = (Record(Offset=2, Epoch=2, Value=leader_change(1, 1, 3)), Record(Offset=3, Epoch=2, Value=7))
    t = response(cfg, s, 1, answer(1, 2, 3, records=new), s.fetching)
    expected = fetch(2, 2, 4, 2)
    assert t.state == replace(s, log=log(1, 1) + new, high_watermark=3, fetching=expected)
    assert sends(t) == [Send(destination=1, message=expected)]
    assert "FETCH-RESP-3" in t.rules


def test_fetch_resp_3_records_not_starting_at_the_log_end_are_not_appended():
    """FETCH-RESP-3: only records starting at the log end offset are appended."""
    cfg = config(2)
    s = follower(2, 1, 2, log(1, 1))
    overlapping = (Record(Offset=1, Epoch=1, Value=2), Record(Offset=2, Epoch=2, Value=3))
    t = response(cfg, s, 1, answer(1, 2, 3, records=overlapping), s.fetching)
    expected = fetch(2, 2, 2, 1)
    assert t.state == replace(s, high_watermark=2, fetching=expected)
    assert sends(t) == [Send(destination=1, message=expected)]
    assert "FETCH-RESP-3" in t.rules


def test_fetch_resp_3_response_to_another_request_than_the_one_in_flight_is_ignored():
    """FETCH-RESP-3: an answer to a Fetch other than the one in flight is ignored."""
    cfg = config(2)
    s = follower(2, 1, 2, log(1, 1))
    older = fetch(2, 2, 1, 1)
    new = (Record(Offset=2, Epoch=2, Value=5),)
    t = response(cfg, s, 1, answer(1, 2, 3, records=new), older)
    assert t.state == s
    assert t.outputs == ()


def test_fetch_resp_3_response_with_nothing_in_flight_is_ignored():
    """FETCH-RESP-3: with no Fetch in flight there is nothing to pair the answer with."""
    cfg = config(2)
    s = replace(follower(2, 1, 2, log(1, 1)), fetching=None)
    t = response(cfg, s, 1, answer(1, 2, 2, records=(Record(Offset=2, Epoch=2, Value=5),)), fetch(2, 2, 2, 1))
    assert t.state == s
    assert t.outputs == ()


# FETCH-RESP-4 -------------------------------------------------------------------------------


def test_fetch_resp_4_inconsistent_cluster_id_shuts_the_fetcher_down():
    """FETCH-RESP-4: a Fetch response with INCONSISTENT_CLUSTER_ID is fatal: Shutdown, role DOWN."""
    cfg = config(2)
    s = follower(2, 1, 3, log(1, 3), high_watermark=1)
    t = response(cfg, s, 1, answer(1, 3, 1, top_error=errors.INCONSISTENT_CLUSTER_ID), s.fetching)
    assert len(t.outputs) == 1 and type(t.outputs[0]) is Shutdown
    assert t.outputs[0].reason
    assert t.state.role == Role.DOWN
    assert (t.state.epoch, t.state.leader_id, t.state.log) == (3, 1, log(1, 3))
    assert "FETCH-RESP-4" in t.rules

    # A node that is down does nothing more.
    after = request(cfg, t.state, 3, fetch(3, 3, 0, 0))
    assert after.outputs == ()
    assert after.state == t.state


# FETCH-RESP-5 -------------------------------------------------------------------------------


def test_fetch_resp_5_leader_change_record_is_appended_and_changes_no_role():
    """FETCH-RESP-5: a LeaderChange control record is appended like data and never changes the role."""
    cfg = config(3)
    s = follower(3, 2, 3, log(1, 1), voted_id=2)
    control = Record(Offset=2, Epoch=3, Value=leader_change(2, 2, 3))
    t = response(cfg, s, 2, answer(2, 3, 2, records=(control,)), s.fetching)
    expected = fetch(3, 3, 3, 3)
    assert t.state == replace(s, log=log(1, 1) + (control,), high_watermark=2, fetching=expected)
    assert t.state.role == Role.FOLLOWER and t.state.leader_id == 2
    assert sends(t) == [Send(destination=2, message=expected)]
    assert "FETCH-RESP-5" in t.rules


def test_fetch_resp_5_leader_change_naming_another_leader_is_only_data():
    """FETCH-RESP-5: even a LeaderChange naming some other node leaves role and leader as they are."""
    cfg = config(3)
    s = follower(3, 2, 3, log(1, 1))
    control = Record(Offset=2, Epoch=1, Value=leader_change(1, 1, 3))
    t = response(cfg, s, 2, answer(2, 3, 0, records=(control, Record(Offset=3, Epoch=3, Value=4))), s.fetching)
    assert t.state.log == log(1, 1) + (control, Record(Offset=3, Epoch=3, Value=4))
    assert (t.state.role, t.state.epoch, t.state.leader_id, t.state.voted_id) == (Role.FOLLOWER, 3, 2, -1)
    assert "FETCH-RESP-5" in t.rules
