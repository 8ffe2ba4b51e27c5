"""FETCH-REQ-7: a leader that holds a Fetch asking to wait, and what answers it (Options.held_fetches)."""

import msgspec
from conftest import CLUSTER_ID, config, leader_change, leader_state, log, request, sends, timer

from model import node
from model.cluster import outgoing
from model.events import Answer, ClientAppend, Crash, Request, Resign, TimerKind
from model.messages import BeginQuorumEpochRequest, EndQuorumEpochRequest, EpochEndOffset, FetchRequest, FetchResponse, LeaderIdAndEpoch, VoteRequest
from model.state import Role
from model.transitions import fetch_request
from spec import errors

replace = msgspec.structs.replace

HOLDING = {"held_fetches": True, "fetch_max_wait_ms": 500}
RECORDS = log(1, values=[leader_change(1, 1, 2)])


def waiting_fetch(replica: int, epoch: int = 1, offset: int = 1, **fields) -> FetchRequest:
    return FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=replica, MaxWaitMs=500, CurrentLeaderEpoch=epoch, FetchOffset=offset, **({"LastFetchedEpoch": 1} | fields))


def answer(epoch: int, hw: int, *, leader: int = 1, error: int = errors.NONE, records=()) -> FetchResponse:
    return FetchResponse(
        PartitionErrorCode=error,
        HighWatermark=hw,
        DivergingEpoch=EpochEndOffset(Epoch=-1, EndOffset=-1),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=leader, LeaderEpoch=epoch),
        Records=records,
    )


def holding_leader(cfg, *fetchers: int):
    """A leader of epoch 1 whose log (its LeaderChange) every voter has, committed, holding a Fetch from each of `fetchers`."""
    s = leader_state(cfg, 1, RECORDS, high_watermark=1, replica_offsets=(1, 1, 1))
    for replica in fetchers:
        t = request(cfg, s, replica, waiting_fetch(replica))
        assert t.outputs == () and "FETCH-REQ-7" in t.rules
        s = t.state
    return s


def test_fetch_send_1_carries_the_wait_and_the_high_watermark_only_where_the_profile_does():
    """The fields are not carried at all under KIP-595's reading, so its Fetch is the one it always was."""
    kip = fetch_request(config(2), node.NodeState(role=Role.FOLLOWER, epoch=1, leader_id=1, log=RECORDS, high_watermark=1))
    assert msgspec.json.encode(kip) == b'{"type":"FetchRequest","ClusterId":"kraft-cluster","ReplicaId":2,"CurrentLeaderEpoch":1,"FetchOffset":1,"LastFetchedEpoch":1}'
    kafka = fetch_request(config(2, fetch_max_wait_ms=500, fetch_carries_high_watermark=True), node.NodeState(role=Role.FOLLOWER, epoch=1, leader_id=1, log=RECORDS, high_watermark=-1))
    assert (kafka.MaxWaitMs, kafka.HighWatermark, kafka.ReplicaEpoch) == (500, -1, msgspec.UNSET)


def test_fetch_req_7_a_fetch_that_finds_nothing_new_is_held_and_answered_when_records_come():
    cfg = config(1, **HOLDING)
    s = holding_leader(cfg, 2, 3)
    assert [h.source for h in s.held] == [2, 3] and node.armed_timers(cfg, s)[-1] == TimerKind.FETCH_WAIT
    t = node.step(cfg, s, ClientAppend(value=7))
    records = log(1, 1, values=[leader_change(1, 1, 2), 7])[1:]
    answers = [o for o in t.outputs if type(o) is Answer]
    assert answers == [Answer(destination=r, message=answer(1, 1, records=records), request=waiting_fetch(r)) for r in (2, 3)]
    assert not t.state.held and TimerKind.FETCH_WAIT not in node.armed_timers(cfg, t.state)


def test_fetch_req_7_a_fetch_asking_no_wait_or_finding_records_is_answered_at_once():
    cfg = config(1, **HOLDING)
    s = leader_state(cfg, 1, RECORDS, high_watermark=1, replica_offsets=(1, 1, 1))
    no_wait = request(cfg, s, 2, replace(waiting_fetch(2), MaxWaitMs=msgspec.UNSET))
    assert sends(no_wait)[0].message == answer(1, 1) and not no_wait.state.held
    behind = request(cfg, s, 2, waiting_fetch(2, offset=0, LastFetchedEpoch=0))
    assert sends(behind)[0].message.Records == RECORDS and not behind.state.held
    kip = request(config(1, fetch_max_wait_ms=500), s, 2, waiting_fetch(2))  # held_fetches off: the KIP's reading
    assert sends(kip)[0].message == answer(1, 1)


def test_fetch_req_7_the_wait_running_out_gives_the_answer_it_had_when_it_came_oldest_first():
    cfg = config(1, **HOLDING)
    s = holding_leader(cfg, 2, 3)
    first = timer(cfg, s, TimerKind.FETCH_WAIT)
    assert first.outputs == (Answer(destination=2, message=answer(1, 1), request=waiting_fetch(2)),)
    second = timer(cfg, first.state, TimerKind.FETCH_WAIT)
    assert second.outputs == (Answer(destination=3, message=answer(1, 1), request=waiting_fetch(3)),) and not second.state.held


def test_fetch_req_7_resigning_or_following_a_leader_answers_not_leader_or_follower():
    cfg = config(1, **HOLDING)
    resigned = node.step(cfg, holding_leader(cfg, 2), Resign())
    refusal = [o for o in resigned.outputs if type(o) is Answer]
    assert refusal == [Answer(destination=2, message=answer(1, 1, error=errors.NOT_LEADER_OR_FOLLOWER), request=waiting_fetch(2))]
    followed = request(cfg, holding_leader(cfg, 2), 3, BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=3, LeaderEpoch=2))
    refusal = [o for o in followed.outputs if type(o) is Answer]
    assert followed.state.role == Role.FOLLOWER and not followed.state.held
    assert refusal == [Answer(destination=2, message=answer(2, 1, leader=3, error=errors.NOT_LEADER_OR_FOLLOWER), request=waiting_fetch(2))]


def test_fetch_req_7_a_crash_forgets_held_fetches_unanswered():
    cfg = config(1, **HOLDING)
    crashed = node.step(cfg, holding_leader(cfg, 2), Crash())
    assert crashed.state.role == Role.DOWN and crashed.state.held is msgspec.UNSET
    assert not any(type(o) is Answer for o in crashed.outputs)


def test_fetch_req_7_under_kip_1166_a_newer_high_watermark_answers_at_once_and_a_moving_one_answers_every_held_fetch():
    cfg = config(1, observers=(4,), fetch_carries_high_watermark=True, **HOLDING)
    s = leader_state(cfg, 1, RECORDS, high_watermark=1, replica_offsets=(1, 1, 1, 1))
    behind = request(cfg, s, 2, waiting_fetch(2, HighWatermark=0))
    assert sends(behind)[0].message == answer(1, 1) and not behind.state.held
    # Observer 4 has the leader's new record and its Fetch is held (observers do not commit);
    # voter 2's Fetch past that record commits it, and the held Fetch is answered afresh.
    appended = node.step(cfg, s, ClientAppend(value=7)).state
    held = request(cfg, appended, 4, waiting_fetch(4, offset=2, HighWatermark=1))
    assert held.outputs == () and [h.source for h in held.state.held] == [4]
    committed = request(cfg, held.state, 2, waiting_fetch(2, offset=2, HighWatermark=1))
    assert committed.state.high_watermark == 2 and not committed.state.held
    assert sends(committed)[0].message == answer(1, 2)  # its own answer: the high watermark moved past its
    answers = [o for o in committed.outputs if type(o) is Answer]
    assert answers == [Answer(destination=4, message=answer(1, 2), request=waiting_fetch(4, offset=2, HighWatermark=1))]


def test_an_answer_travels_as_the_response_to_the_request_it_answers():
    """In a cluster, an Answer is a response in flight, paired with the held request, as a Send answering the step's request is."""
    cfg = config(1, **HOLDING)
    t = node.step(cfg, holding_leader(cfg, 2), ClientAppend(value=7))
    (envelope,) = outgoing(1, ClientAppend(value=7), t)
    assert (envelope.destination, envelope.request) == (2, waiting_fetch(2))
    assert outgoing(1, Request(source=2, message=waiting_fetch(2)), request(cfg, holding_leader(cfg), 2, waiting_fetch(2))) == []


def test_fetch_req_7_a_node_that_follows_and_stands_in_one_step_answers_as_the_follower_it_was_in_between():
    """Held Fetches stay through a vote; an EndQuorumEpoch of a newer epoch (Options.end_epoch_as_news)
    that names the node first successor makes it follow the resigning leader and stand at once:
    Kafka fails its purgatory as it becomes that follower (onBecomeFollower), so the refusals name
    the leader it followed, not the candidate it ends as."""
    cfg = config(1, end_epoch_as_news=True, **HOLDING)
    voted = request(cfg, holding_leader(cfg, 3), 2, VoteRequest(ClusterId=CLUSTER_ID, CandidateEpoch=2, CandidateId=2, LastOffsetEpoch=1, LastOffset=0))
    assert (voted.state.role, voted.state.voted_id) == (Role.UNATTACHED, 2) and [h.source for h in voted.state.held] == [3]
    ended = request(cfg, voted.state, 2, EndQuorumEpochRequest(ClusterId=CLUSTER_ID, ReplicaId=2, LeaderId=2, LeaderEpoch=2, PreferredSuccessors=(1, 3)))
    assert (ended.state.role, ended.state.epoch) == (Role.CANDIDATE, 3) and not ended.state.held
    assert [o for o in ended.outputs if type(o) is Answer] == [Answer(destination=3, message=answer(2, 1, leader=2, error=errors.NOT_LEADER_OR_FOLLOWER), request=waiting_fetch(3))]
    assert "FETCH-REQ-7" in ended.rules
