"""ISR replication (model/isr): the ISR-* rules, and KIP-101's K101-* rules as the ISR replicas apply them.

Replica steps are checked exactly (next state, outputs, cited rules); the controller, crashes
and power failures through the partition's actions; the ISR-SAFE-* properties on crafted states.
"""

import msgspec
import pytest
from conftest import log

from model.cluster import Append, CrashNode, Deliver, RestartNode
from model.events import AppendResult, ClientAppend, Crash, Request, Response, Send
from model.isr import controller, properties, replica
from model.isr.cluster import Elect, Partition, PowerFailure, Shrink, StartFetch
from model.isr.config import IsrBounds, PartitionConfig
from model.isr.events import AlterIsr, FetchNext, PowerLoss, ShrinkIsr, Startup
from model.isr.state import History, LeaderAndIsr, PartitionState, ReplicaState, Role
from model.messages import (
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Record,
)
from spec import errors

replace = msgspec.structs.replace

NOT_ENOUGH_REPLICAS = 19  # Kafka's wire codes
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
OFFSET_OUT_OF_RANGE = 1


def config(node: int = 1, replicas=(1, 2, 3), min_isr: int = 1, truncation: str = "epoch"):
    return PartitionConfig(replicas=replicas, min_isr=min_isr, truncation=truncation).replica(node)


def leader(epoch: int, records=(), isr=(1, 2, 3), hw: int = 0, ends=((2, -1), (3, -1))) -> ReplicaState:
    """Replica 1 leading `epoch`; `ends` are the followers' log end offsets as it knows them."""
    return ReplicaState(role=Role.LEADER, epoch=epoch, leader=1, log=tuple(records), high_watermark=hw, isr=tuple(isr), follower_ends=tuple(ends))


def follower(epoch: int, records=(), hw: int = 0, lead: int = 1, **fields) -> ReplicaState:
    return ReplicaState(role=Role.FOLLOWER, epoch=epoch, leader=lead, log=tuple(records), high_watermark=hw, **fields)


def fetch(replica_id: int, epoch: int, offset: int) -> FetchRequest:
    return FetchRequest(ReplicaId=replica_id, CurrentLeaderEpoch=epoch, FetchOffset=offset)


def served(epoch: int, hw: int, records=(), error: int = errors.NONE, lead: int = 1) -> FetchResponse:
    return FetchResponse(ErrorCode=error, HighWatermark=hw, CurrentLeader=LeaderIdAndEpoch(LeaderId=lead, LeaderEpoch=epoch), Records=records)


def refused(epoch: int, error: int, lead: int = 1) -> FetchResponse:
    """A refused Fetch: the error and the leader and epoch the refuser knows, no records."""
    return FetchResponse(ErrorCode=error, CurrentLeader=LeaderIdAndEpoch(LeaderId=lead, LeaderEpoch=epoch))


def offsets_for(epoch: int, current: int, replica_id: int = 2) -> OffsetsForLeaderEpochRequest:
    return OffsetsForLeaderEpochRequest(ReplicaId=replica_id, CurrentLeaderEpoch=current, LeaderEpoch=epoch)


def end_offset(epoch: int, offset: int, error: int = errors.NONE) -> OffsetsForLeaderEpochResponse:
    return OffsetsForLeaderEpochResponse(ErrorCode=error, LeaderEpoch=epoch, EndOffset=offset)


# ISR-PRODUCE-1, ISR-PRODUCE-2 --------------------------------------------------------------


def test_isr_produce_1_appends_with_the_leader_epoch_when_the_isr_is_large_enough():
    """ISR-PRODUCE-1: the record goes at the log end, stamped with the leader's epoch; nothing is answered yet."""
    s = leader(3, log(1), isr=(1, 2), hw=1, ends=((2, 1), (3, -1)))
    t = replica.step(config(min_isr=2), s, ClientAppend(value=7))
    assert t.state == replace(s, log=log(1) + (Record(Offset=1, Epoch=3, Value=7),))
    assert t.outputs == ()
    assert "ISR-PRODUCE-1" in t.rules and "K101-1" in t.rules  # the first record of epoch 3 starts its cache entry


def test_isr_produce_1_refuses_below_min_isr_with_not_enough_replicas():
    """ISR-PRODUCE-1: an ISR smaller than min.isr refuses the append with NOT_ENOUGH_REPLICAS and writes nothing."""
    s = leader(3, log(1), isr=(1,), hw=1)
    t = replica.step(config(min_isr=2), s, ClientAppend(value=7))
    assert t.state == s
    assert t.outputs == (AppendResult(ErrorCode=NOT_ENOUGH_REPLICAS, Offset=-1),)
    assert t.rules == ("ISR-PRODUCE-1",)


def test_isr_produce_1_a_follower_refuses_with_not_leader():
    """ISR-PRODUCE-1: only the leader appends."""
    s = follower(3, log(1))
    t = replica.step(config(2), s, ClientAppend(value=7))
    assert t.state == s
    assert t.outputs == (AppendResult(ErrorCode=errors.NOT_LEADER_OR_FOLLOWER, Offset=-1),)


def test_isr_produce_1_an_isr_of_one_commits_and_acknowledges_at_once():
    """ISR-PRODUCE-1/2 with min.isr 1: the leader alone is the ISR, so its own append passes the high watermark."""
    s = leader(2, (), isr=(1,))
    t = replica.step(config(min_isr=1), s, ClientAppend(value=5))
    assert t.state.high_watermark == 1
    assert t.outputs == (AppendResult(ErrorCode=errors.NONE, Offset=0),)
    assert "ISR-PRODUCE-2" in t.rules


def test_isr_produce_2_acknowledges_own_epoch_records_when_the_hw_passes_them():
    """ISR-PRODUCE-2: records of the leader's epoch are acknowledged as the HW passes them; an earlier epoch's are not answered."""
    s = leader(2, log(1, 2, 2), isr=(1, 2), hw=0, ends=((2, 0), (3, -1)))
    t = replica.step(config(min_isr=2), s, Request(source=2, message=fetch(2, 2, 3)))
    assert t.state.high_watermark == 3
    assert t.outputs[:2] == (AppendResult(ErrorCode=errors.NONE, Offset=1), AppendResult(ErrorCode=errors.NONE, Offset=2))
    assert "ISR-PRODUCE-2" in t.rules


def test_isr_produce_2_after_a_shrink_below_min_isr_the_answer_is_not_enough_replicas_after_append():
    """ISR-PRODUCE-2: the HW passes the record only because the ISR shrank below min.isr: NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
    s = leader(2, log(2), isr=(1, 2), hw=0, ends=((2, 0), (3, -1)))
    t = replica.step(config(min_isr=2), s, ShrinkIsr(replica=2))
    assert t.state.high_watermark == 1
    assert t.outputs == (AlterIsr(LeaderEpoch=2, Isr=(1,)), AppendResult(ErrorCode=NOT_ENOUGH_REPLICAS_AFTER_APPEND, Offset=0))
    assert "ISR-PRODUCE-2" in t.rules


# ISR-HW-1, ISR-HW-2 ----------------------------------------------------------------------


def test_isr_hw_1_the_hw_is_the_smallest_log_end_in_the_isr():
    """ISR-HW-1: followers outside the ISR do not hold the HW back; ISR members do."""
    s = leader(1, log(1, 1, 1), isr=(1, 2), hw=0, ends=((2, 1), (3, 0)))
    t = replica.step(config(), s, Request(source=2, message=fetch(2, 1, 2)))
    assert t.state.high_watermark == 2  # min(3 own, 2 follower 2); follower 3 (at 0) is not in the ISR
    assert t.state.follower_ends == ((2, 2), (3, 0))
    assert "ISR-HW-1" in t.rules


def test_isr_hw_1_an_unknown_follower_log_end_holds_the_hw_and_it_never_decreases():
    """ISR-HW-1: a new leader waits for every ISR member's first Fetch, and a smaller minimum never lowers the HW."""
    s = leader(4, log(1, 1), isr=(1, 2, 3), hw=1)
    t = replica.step(config(), s, Request(source=2, message=fetch(2, 4, 2)))
    assert t.state.high_watermark == 1  # follower 3's log end is still unknown
    t = replica.step(config(), t.state, Request(source=3, message=fetch(3, 4, 0)))
    assert t.state.high_watermark == 1  # min is 0 now, but the HW stays
    t = replica.step(config(), t.state, Request(source=3, message=fetch(3, 4, 2)))
    assert t.state.high_watermark == 2
    assert "ISR-HW-1" in t.rules


def test_isr_hw_2_the_follower_hw_lags_the_leader_by_one_fetch():
    """ISR-HW-2: the follower gets the records before it learns that they are committed."""
    partition = Partition(PartitionConfig(replicas=(1, 2)), IsrBounds(client_values=1))
    s = partition.apply(partition.initial(), Append(node=1, value=1)).state

    def fetch_round(s):
        s = partition.apply(s, StartFetch(node=2)).state
        (request,) = [e for _, e in s.network]
        s = partition.apply(s, Deliver(envelope=request)).state
        (answer,) = [e for _, e in s.network]
        leader_hw = s.replicas[0].high_watermark
        applied = partition.apply(s, Deliver(envelope=answer))
        return applied.state, leader_hw, applied.rules

    s, leader_hw, _ = fetch_round(s)
    assert (leader_hw, s.replicas[1].log, s.replicas[1].high_watermark) == (0, log(0), 0)
    s, leader_hw, rules = fetch_round(s)
    assert (leader_hw, s.replicas[1].high_watermark) == (1, 1)
    assert "ISR-HW-2" in rules


def test_isr_hw_2_the_follower_hw_is_capped_by_its_log_end():
    """ISR-HW-2: min(the answer's HighWatermark, the follower's log end offset)."""
    request = fetch(2, 1, 0)
    s = follower(1, (), fetching=True)
    t = replica.step(config(2), s, Response(source=1, message=served(1, 3, log(1)), request=request))
    assert t.state == follower(1, log(1), hw=1)
    assert t.rules == ("ISR-FETCH-3", "ISR-HW-2", "K101-1")


# ISR-FETCH-1 .. ISR-FETCH-4 -------------------------------------------------------------


def test_isr_fetch_1_one_fetch_at_a_time_from_the_log_end():
    """ISR-FETCH-1: Fetch(ReplicaId, CurrentLeaderEpoch, FetchOffset = log end), then nothing until the answer."""
    s = follower(2, log(1, 2), hw=1)
    t = replica.step(config(3), s, FetchNext())
    assert t.state == replace(s, fetching=True)
    assert t.outputs == (Send(destination=1, message=fetch(3, 2, 2)),)
    assert t.rules == ("ISR-FETCH-1",)
    assert replica.step(config(3), t.state, FetchNext()) == (t.state, (), ())


def test_isr_fetch_1_no_fetch_while_truncating_or_without_a_leader():
    """ISR-FETCH-1: a follower fetches only once truncation is done and a leader is known."""
    for s in (follower(2, log(1), truncating=True), follower(2, log(1), lead=-1)):
        assert replica.step(config(3), s, FetchNext()) == (s, (), ())


def test_isr_fetch_2_the_leader_notes_the_log_end_and_answers_with_records_and_the_new_hw():
    """ISR-FETCH-2: FetchOffset becomes the follower's log end; the answer has the records from it and the updated HW."""
    s = leader(1, log(1, 1), isr=(1, 2), hw=0, ends=((2, 0), (3, -1)))
    t = replica.step(config(), s, Request(source=2, message=fetch(2, 1, 1)))
    assert t.state == replace(s, high_watermark=1, follower_ends=((2, 1), (3, -1)))
    assert t.outputs == (AppendResult(ErrorCode=errors.NONE, Offset=0), Send(destination=2, message=served(1, 1, log(1, 1)[1:])))
    assert t.rules == ("ISR-FETCH-2", "ISR-HW-1", "ISR-PRODUCE-2")


@pytest.mark.parametrize(
    ("epoch", "role", "error"),
    [(2, Role.LEADER, errors.FENCED_LEADER_EPOCH), (4, Role.LEADER, errors.UNKNOWN_LEADER_EPOCH), (3, Role.FOLLOWER, errors.NOT_LEADER_OR_FOLLOWER)],
)
def test_isr_fetch_2_refuses_another_epoch_or_a_non_leader(epoch, role, error):
    """ISR-FETCH-2: K101-4's checks, in its order; nothing changes."""
    s = leader(3, log(1)) if role == Role.LEADER else follower(3, log(1), lead=2)
    t = replica.step(config(), s, Request(source=3, message=fetch(3, epoch, 1)))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=refused(3, error, lead=s.leader)),)
    assert t.rules == ("ISR-FETCH-2",)


def test_isr_fetch_3_the_follower_appends_and_may_fetch_again():
    """ISR-FETCH-3: records appended after the log, HW taken, the Fetch over."""
    request = fetch(2, 1, 1)
    s = follower(1, log(1), hw=0, fetching=True)
    t = replica.step(config(2), s, Response(source=1, message=served(1, 1, log(1, 1)[1:]), request=request))
    assert t.state == follower(1, log(1, 1), hw=1)
    assert t.outputs == ()
    assert "ISR-FETCH-3" in t.rules


def test_isr_fetch_3_an_error_ends_the_fetch_and_a_stale_answer_changes_nothing():
    """ISR-FETCH-3: an error only ends the Fetch; an answer to a Fetch of another epoch is ignored."""
    s = follower(2, log(1), fetching=True)
    t = replica.step(config(2), s, Response(source=1, message=refused(2, errors.NOT_LEADER_OR_FOLLOWER), request=fetch(2, 2, 1)))
    assert t.state == replace(s, fetching=False)
    assert t.rules == ("ISR-FETCH-3",)
    t = replica.step(config(2), s, Response(source=1, message=served(1, 1, log(1, 1)[1:]), request=fetch(2, 1, 1)))
    assert t.state == s
    assert t.rules == ("ISR-FETCH-3",)


def test_isr_fetch_4_beyond_the_leader_log_end_the_leader_answers_offset_out_of_range_and_the_follower_halts():
    """ISR-FETCH-4: OFFSET_OUT_OF_RANGE; the follower halts rather than truncate, keeping its log and HW."""
    s = leader(2, log(1), isr=(1,), hw=1)
    t = replica.step(config(), s, Request(source=2, message=fetch(2, 2, 2)))
    assert t.state == s
    assert t.outputs == (Send(destination=2, message=refused(2, OFFSET_OUT_OF_RANGE)),)
    assert t.rules == ("ISR-FETCH-4",)
    f = follower(2, log(1, 1), hw=2, fetching=True)
    t = replica.step(config(2), f, Response(source=1, message=refused(2, OFFSET_OUT_OF_RANGE), request=fetch(2, 2, 2)))
    assert t.state == ReplicaState(role=Role.DOWN, log=log(1, 1), high_watermark=2)
    assert t.rules == ("ISR-FETCH-4",)


# ISR-SHRINK-1, ISR-EXPAND-1, ISR-ALTER-1 ------------------------------------------------


def test_isr_shrink_1_drops_the_follower_writes_the_isr_and_advances_the_hw():
    """ISR-SHRINK-1: without the lagging follower the HW moves to the next-smallest log end."""
    s = leader(1, log(0, 0), isr=(1, 2, 3), hw=0, ends=((2, 2), (3, 0)))
    t = replica.step(config(), s, ShrinkIsr(replica=3))
    assert t.state == replace(s, isr=(1, 2), high_watermark=2)
    assert t.outputs == (AlterIsr(LeaderEpoch=1, Isr=(1, 2)),)
    assert t.rules == ("ISR-SHRINK-1", "ISR-HW-1")
    assert replica.step(config(), t.state, ShrinkIsr(replica=3)) == (t.state, (), ())  # not a member any more
    assert replica.step(config(), t.state, ShrinkIsr(replica=1)) == (t.state, (), ())  # never the leader itself


def test_isr_expand_1_a_follower_reaching_the_hw_rejoins_the_isr():
    """ISR-EXPAND-1: FetchOffset >= HW puts the follower back; below the HW it stays out."""
    s = leader(1, log(1, 1, 1), isr=(1, 2), hw=2, ends=((2, 2), (3, -1)))
    t = replica.step(config(), s, Request(source=3, message=fetch(3, 1, 1)))
    assert t.state.isr == (1, 2)
    assert "ISR-EXPAND-1" not in t.rules
    t = replica.step(config(), t.state, Request(source=3, message=fetch(3, 1, 2)))
    assert t.state.isr == (1, 2, 3)
    assert t.outputs[0] == AlterIsr(LeaderEpoch=1, Isr=(1, 2, 3))
    assert "ISR-EXPAND-1" in t.rules


def test_isr_alter_1_the_controller_takes_the_leaders_isr_write():
    """ISR-ALTER-1: the leader's shrink reaches the controller's record, conditionally on its epoch."""
    partition = Partition(PartitionConfig(replicas=(1, 2, 3)))
    applied = partition.apply(partition.initial(), Shrink(node=1, replica=3))
    assert applied.state.controller == LeaderAndIsr(Leader=1, LeaderEpoch=0, Isr=(1, 2))
    assert "ISR-ALTER-1" in applied.rules


def test_isr_alter_1_a_write_from_another_epoch_or_leader_fails():
    """ISR-ALTER-1: the record names leader 2 in epoch 5; writes by leader 1, or for epoch 4, leave it as it is."""
    record = LeaderAndIsr(Leader=2, LeaderEpoch=5, Isr=(1, 2, 3))
    assert controller.alter_isr(record, 1, AlterIsr(LeaderEpoch=5, Isr=(1,))) == (record, ("ISR-ALTER-1",))
    assert controller.alter_isr(record, 2, AlterIsr(LeaderEpoch=4, Isr=(2,))) == (record, ("ISR-ALTER-1",))
    assert controller.alter_isr(record, 2, AlterIsr(LeaderEpoch=5, Isr=(2,))) == (LeaderAndIsr(Leader=2, LeaderEpoch=5, Isr=(2,)), ("ISR-ALTER-1",))


# ISR-ELECT-1, ISR-ELECT-2, ISR-START-1 ---------------------------------------------------


def three_replicas_leader_down() -> tuple[Partition, PartitionState]:
    """Leader 1 (epoch 0) crashed; the ISR is {1, 2}; replica 3 is up but out of the ISR."""
    partition = Partition(PartitionConfig(replicas=(1, 2, 3)), IsrBounds(max_crashes=1))
    s = partition.apply(partition.initial(), Shrink(node=1, replica=3)).state
    s = partition.apply(s, Append(node=1, value=1)).state
    return partition, partition.apply(s, CrashNode(node=1)).state


def test_isr_elect_1_only_a_live_isr_member_can_be_elected():
    """ISR-ELECT-1: the leader is down; replica 2 (ISR, up) is electable, replica 3 (out of the ISR) is not."""
    partition, s = three_replicas_leader_down()
    assert [a for a in partition.enabled(s) if type(a) is Elect] == [Elect(node=2)]
    applied = partition.apply(s, Elect(node=2))
    assert applied.state.controller == LeaderAndIsr(Leader=2, LeaderEpoch=1, Isr=(2,))
    assert applied.state.history.elections == 1
    assert "ISR-ELECT-1" in applied.rules
    with pytest.raises(ValueError, match="not electable"):
        controller.elect(s.controller, frozenset({2, 3}), 3)


def test_isr_elect_1_no_election_while_the_leader_is_up_or_no_isr_member_is():
    """ISR-ELECT-1: an up leader is never replaced; with every ISR member down the partition stays offline."""
    record = LeaderAndIsr(Leader=1, LeaderEpoch=0, Isr=(1, 2))
    assert controller.candidates(record, frozenset({1, 2, 3})) == ()
    assert controller.candidates(record, frozenset({3})) == ()
    assert controller.candidates(record, frozenset({2, 3})) == (2,)


def test_isr_elect_2_the_command_makes_the_leader_and_the_followers():
    """ISR-ELECT-2: the elected replica leads with the command's ISR and unknown follower progress; the other live one follows."""
    partition, s = three_replicas_leader_down()
    applied = partition.apply(s, Elect(node=2))
    new_leader, other = applied.state.replicas[1], applied.state.replicas[2]
    assert new_leader == ReplicaState(role=Role.LEADER, epoch=1, leader=2, isr=(2,), follower_ends=((1, -1), (3, -1)))
    assert other == follower(1, (), lead=2)  # an empty log: nothing to ask before fetching
    assert "ISR-ELECT-2" in applied.rules


def test_isr_elect_2_a_leader_keeps_its_log_and_hw():
    """ISR-ELECT-2: a leader never truncates; an ISR of one commits its log at once (no acknowledgement for earlier epochs)."""
    s = follower(1, log(1, 1), hw=1)
    t = replica.step(config(2), s, LeaderAndIsr(Leader=2, LeaderEpoch=2, Isr=(2,)))
    assert t.state == ReplicaState(role=Role.LEADER, epoch=2, leader=2, log=log(1, 1), high_watermark=2, isr=(2,), follower_ends=((1, -1), (3, -1)))
    assert t.outputs == ()
    assert t.rules == ("ISR-ELECT-2", "ISR-HW-1")


def test_isr_start_1_a_restarted_replica_follows_the_recorded_leader_with_its_hw_capped():
    """ISR-START-1: the checkpointed HW is capped at the surviving log, then the replica follows the record's leader."""
    down = ReplicaState(role=Role.DOWN, log=log(1), high_watermark=2)
    t = replica.step(config(2, truncation="hw"), down, Startup(partition=LeaderAndIsr(Leader=3, LeaderEpoch=4, Isr=(2, 3))))
    assert t.state == follower(4, log(1), hw=1, lead=3)
    assert t.rules == ("ISR-START-1", "ISR-TRUNC-1")


def test_isr_start_1_a_replica_recorded_as_leader_waits_for_an_election():
    """ISR-START-1: a former leader does not resume leading; it waits with no leader known."""
    down = ReplicaState(role=Role.DOWN, log=log(1), high_watermark=1)
    t = replica.step(config(1), down, Startup(partition=LeaderAndIsr(Leader=1, LeaderEpoch=4, Isr=(1,))))
    assert t.state == follower(4, log(1), hw=1, lead=-1)
    assert t.outputs == ()
    assert t.rules == ("ISR-START-1", "ISR-TRUNC-2")


def test_isr_start_1_through_the_partition_restart_reads_the_controllers_record():
    """ISR-START-1: RestartNode hands the replica the controller's current record."""
    partition, s = three_replicas_leader_down()
    s = partition.apply(s, Elect(node=2)).state
    applied = partition.apply(s, RestartNode(node=1))
    assert applied.state.replicas[0] == follower(1, log(0), hw=0, lead=2, truncating=True)
    assert [e.message for _, e in applied.state.network] == [offsets_for(0, 1, replica_id=1)]
    assert "ISR-START-1" in applied.rules


# ISR-TRUNC-1, ISR-TRUNC-2, K101-1 .. K101-4 ----------------------------------------------


def test_isr_trunc_1_hw_truncation_cuts_the_log_at_the_local_hw():
    """ISR-TRUNC-1: before KIP-101 a new follower drops everything above its own HW (KIP-101 scenario 1, step 3)."""
    s = follower(0, log(0, 0), hw=1, lead=2)
    t = replica.step(config(1, truncation="hw"), s, LeaderAndIsr(Leader=3, LeaderEpoch=1, Isr=(1, 3)))
    assert t.state == follower(1, log(0), hw=1, lead=3)
    assert t.outputs == ()
    assert t.rules == ("ISR-ELECT-2", "ISR-TRUNC-1")


def test_isr_trunc_2_epoch_truncation_asks_the_leader_for_the_end_of_its_last_epoch():
    """ISR-TRUNC-2: OffsetsForLeaderEpoch(LeaderEpoch = last record's epoch, CurrentLeaderEpoch = the new epoch); no Fetch until answered."""
    s = follower(0, log(0, 0), hw=1, lead=2)
    t = replica.step(config(1), s, LeaderAndIsr(Leader=3, LeaderEpoch=1, Isr=(1, 3)))
    assert t.state == follower(1, log(0, 0), hw=1, lead=3, truncating=True)
    assert t.outputs == (Send(destination=3, message=offsets_for(0, 1, replica_id=1)),)
    assert t.rules == ("ISR-ELECT-2", "ISR-TRUNC-2")


def test_isr_trunc_2_an_empty_log_asks_nothing():
    """ISR-TRUNC-2: nothing to truncate, so the follower may fetch at once."""
    t = replica.step(config(1), follower(0), LeaderAndIsr(Leader=3, LeaderEpoch=1, Isr=(1, 3)))
    assert t.state == follower(1, lead=3)
    assert t.outputs == ()


def test_k101_2_the_isr_leader_answers_from_its_epoch_cache():
    """K101-2 and K101-1: the largest cached epoch <= the asked one, ending where the next starts or at the log end."""
    s = leader(5, log(1, 1, 3, 3, 5), isr=(1,))
    for asked, answer in ((1, end_offset(1, 2)), (2, end_offset(1, 2)), (3, end_offset(3, 4)), (5, end_offset(5, 5)), (0, end_offset(-1, -1))):
        t = replica.step(config(), s, Request(source=2, message=offsets_for(asked, 5)))
        assert t.state == s
        assert t.outputs == (Send(destination=2, message=answer),)
        assert t.rules == ("K101-2", "K101-1")


@pytest.mark.parametrize(
    ("current", "role", "error"),
    [(4, Role.LEADER, errors.FENCED_LEADER_EPOCH), (6, Role.LEADER, errors.UNKNOWN_LEADER_EPOCH), (5, Role.FOLLOWER, errors.NOT_LEADER_OR_FOLLOWER), (-1, Role.FOLLOWER, errors.NOT_LEADER_OR_FOLLOWER)],
)
def test_k101_4_the_isr_replica_checks_the_epoch_and_leadership(current, role, error):
    """K101-4: FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, each with UNDEFINED (-1, -1)."""
    s = leader(5, log(1, 5), isr=(1,)) if role == Role.LEADER else follower(5, log(1, 5), lead=2)
    t = replica.step(config(), s, Request(source=3, message=offsets_for(1, current, replica_id=3)))
    assert t.state == s
    assert t.outputs == (Send(destination=3, message=end_offset(-1, -1, error)),)
    assert t.rules == ("K101-4",)


def test_k101_3_truncates_to_the_answered_end_offset():
    """K101-3, seed scenario 2 step 7: asked for epoch 0, the leader answers (0, 1): the follower drops offset 1."""
    request = offsets_for(0, 1, replica_id=1)
    s = follower(1, log(0, 0), hw=2, lead=2, truncating=True)
    t = replica.step(config(1), s, Response(source=2, message=end_offset(0, 1), request=request))
    assert t.state == follower(1, log(0), hw=1, lead=2)
    assert t.rules == ("K101-3", "K101-1")


def test_k101_3_keeps_the_log_when_the_leader_has_it_all():
    """K101-3, seed scenario 1 step 3: the answer is the follower's own log end, so nothing is deleted whatever the HW."""
    request = offsets_for(0, 0, replica_id=2)
    s = follower(0, log(0, 0), hw=0, truncating=True)
    t = replica.step(config(2), s, Response(source=1, message=end_offset(0, 2), request=request))
    assert t.state == follower(0, log(0, 0), hw=0)
    assert t.rules == ("K101-3",)


def test_k101_3_drops_records_of_epochs_the_leader_does_not_have():
    """K101-3: the answer's epoch 1 is below the follower's epoch-3 records: truncate at their start even if EndOffset is larger."""
    request = offsets_for(3, 4, replica_id=2)
    s = follower(4, log(1, 1, 3, 3), hw=2, truncating=True)
    t = replica.step(config(2), s, Response(source=1, message=end_offset(1, 5), request=request))
    assert t.state == follower(4, log(1, 1), hw=2)


def test_k101_3_undefined_truncates_everything_and_errors_or_stale_answers_change_nothing():
    """K101-3: UNDEFINED keeps nothing; an error answer or an answer for another epoch leaves the follower waiting."""
    request = offsets_for(2, 3, replica_id=2)
    s = follower(3, log(2, 2), hw=1, truncating=True)
    t = replica.step(config(2), s, Response(source=1, message=end_offset(-1, -1), request=request))
    assert t.state == follower(3, (), hw=0)
    error = end_offset(-1, -1, errors.NOT_LEADER_OR_FOLLOWER)
    assert replica.step(config(2), s, Response(source=1, message=error, request=request)).state == s
    stale = offsets_for(2, 2, replica_id=2)
    assert replica.step(config(2), s, Response(source=1, message=end_offset(2, 1), request=stale)).state == s


# ISR-CRASH-1, ISR-POWER-1 ----------------------------------------------------------------


def test_isr_crash_1_keeps_the_log_and_hw_and_loses_the_connections():
    """ISR-CRASH-1: a crashed follower keeps log and HW; the Fetch it had in flight is gone with the connection."""
    partition = Partition(PartitionConfig(replicas=(1, 2)), IsrBounds(max_crashes=1))
    s = partition.apply(partition.initial(), StartFetch(node=2)).state
    assert len(s.network) == 1
    s = replace(s, replicas=(s.replicas[0], replace(s.replicas[1], log=log(0), high_watermark=1)))
    applied = partition.apply(s, CrashNode(node=2))
    assert applied.state.replicas[1] == ReplicaState(role=Role.DOWN, log=log(0), high_watermark=1)
    assert applied.state.network == ()
    assert applied.state.history.crashes == 1
    assert applied.rules == ("ISR-CRASH-1",)
    assert replica.step(config(2), s.replicas[1], Crash()).rules == ("ISR-CRASH-1",)


def test_isr_power_1_every_replica_goes_down_keeping_a_prefix():
    """ISR-POWER-1: each replica keeps the records on its disk; a power failure that loses nothing is not one."""
    partition = Partition(PartitionConfig(replicas=(1, 2)), IsrBounds(unflushed_loss=True))
    s = partition.initial()
    s = replace(s, replicas=(replace(s.replicas[0], log=log(0, 0), high_watermark=1), replace(s.replicas[1], log=log(0))))
    failures = [a.keep for a in partition.enabled(s) if type(a) is PowerFailure]
    assert failures == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]  # not (2, 1): that loses nothing
    applied = partition.apply(s, PowerFailure(keep=(1, 0)))
    assert applied.state.replicas == (ReplicaState(role=Role.DOWN, log=log(0), high_watermark=1), ReplicaState(role=Role.DOWN))
    assert applied.state.history.power_failures == 1
    assert set(applied.rules) == {"ISR-POWER-1"}
    assert not [a for a in partition.enabled(applied.state) if type(a) is PowerFailure]  # one per run
    assert replica.step(config(1), s.replicas[0], PowerLoss(keep=0)).state == ReplicaState(role=Role.DOWN, high_watermark=1)


# ISR-SAFE-1 .. ISR-SAFE-3 ----------------------------------------------------------------

TWO = Partition(PartitionConfig(replicas=(1, 2)))


def two_replicas(first: ReplicaState, second: ReplicaState, record: LeaderAndIsr | None = None, **history) -> PartitionState:
    return PartitionState(
        replicas=(first, second),
        controller=record or LeaderAndIsr(Leader=1, LeaderEpoch=1, Isr=(1, 2)),
        network=(),
        history=History(**history),
    )


def broken(state: PartitionState) -> list[tuple[str, str]]:
    return [(v.rule, v.detail) for v in properties.violations(TWO, state)]


V1 = Record(Offset=0, Epoch=0, Value=1)
V2 = Record(Offset=0, Epoch=1, Value=2)


def test_isr_safe_1_different_records_below_both_hws_diverge():
    """ISR-SAFE-1: seed scenario 2's end: the same offset holds different records on two replicas that both count it committed."""
    s = two_replicas(follower(1, (V1,), hw=1, lead=2), replace(leader(1, (V2,), isr=(2,), hw=1), leader=2), LeaderAndIsr(Leader=2, LeaderEpoch=1, Isr=(2,)))
    assert broken(s) == [("ISR-SAFE-1", "replicas 1 and 2 hold 0:0:v1 and 0:1:v2 at offset 0, below both high watermarks (1, 1)")]


def test_isr_safe_1_holds_above_a_hw_down_or_mid_truncation():
    """ISR-SAFE-1: divergence above either HW, on a down replica, or on one still truncating is not (yet) a violation."""
    leading = replace(leader(1, (V2,), isr=(2,), hw=1), leader=2)
    record = LeaderAndIsr(Leader=2, LeaderEpoch=1, Isr=(2,))
    for first in (follower(1, (V1,), hw=0, lead=2), ReplicaState(role=Role.DOWN, log=(V1,), high_watermark=1), follower(1, (V1,), hw=1, lead=2, truncating=True)):
        assert broken(two_replicas(first, leading, record)) == []


def test_isr_safe_2_an_acknowledged_record_missing_from_the_leader_is_lost():
    """ISR-SAFE-2: seed scenario 1's end: the new leader lacks the acknowledged record; without a leader there is nothing to check."""
    leading = replace(leader(1, (), isr=(2,)), leader=2)
    record = LeaderAndIsr(Leader=2, LeaderEpoch=1, Isr=(2,))
    s = two_replicas(ReplicaState(role=Role.DOWN, log=(V1,), high_watermark=1), leading, record, acked=(V1,))
    assert broken(s) == [("ISR-SAFE-2", "acknowledged record 0:0:v1 is not in the log of leader 2 (epoch 1: -); replicas [1] still hold it")]
    no_leader = replace(s, replicas=(s.replicas[0], ReplicaState(role=Role.DOWN)))
    assert broken(no_leader) == []
    assert broken(replace(s, replicas=(s.replicas[0], replace(leading, log=(V1,))))) == []


def test_isr_safe_3_after_a_power_failure_only_a_surviving_copy_counts():
    """ISR-SAFE-3: after a power failure the leader must hold an acknowledged record some replica still has; one no replica has is not its concern."""
    leading = replace(leader(1, (), isr=(2,)), leader=2)
    record = LeaderAndIsr(Leader=2, LeaderEpoch=1, Isr=(2,))
    s = two_replicas(ReplicaState(role=Role.DOWN, log=(V1,), high_watermark=1), leading, record, acked=(V1,), power_failures=1)
    assert broken(s) == [("ISR-SAFE-3", "acknowledged record 0:0:v1 is not in the log of leader 2 (epoch 1: -); replicas [1] still hold it")]
    erased_everywhere = replace(s, replicas=(ReplicaState(role=Role.DOWN), leading))
    assert broken(erased_everywhere) == []


def test_isr_safe_properties_hold_along_a_replication_round():
    """ISR-SAFE-1..3 hold after every step of an append, two Fetch rounds and a clean failover with epoch truncation."""
    partition = Partition(PartitionConfig(replicas=(1, 2)), IsrBounds(client_values=1, max_crashes=1))
    s = partition.initial()
    steps = [Append(node=1, value=1)] + [StartFetch(node=2), "deliver", "deliver"] * 2 + [CrashNode(node=1), Elect(node=2), RestartNode(node=1), "deliver", "deliver"]
    for action in steps:
        if action == "deliver":
            (envelope,) = [e for _, e in s.network]
            action = Deliver(envelope=envelope)
        s = partition.apply(s, action).state
        assert properties.violations(partition, s) == ()
    assert s.history.acked == (V1,)
    assert s.replicas[0] == follower(1, (V1,), hw=1, lead=2)  # it kept v1: the new leader's epoch-0 ends at offset 1
    assert s.replicas[1].log == (V1,) and s.replicas[1].role == Role.LEADER
    assert s.network == ()
