"""The KIP as written: where KIP-595 leaves a node's answer open, what a node written from its
text does is an allowed outcome under `kip595`; the Kafka profiles pin Kafka's one behaviour.

One test per place where such a node used to depart: impossible requests refused with any KIP
code, a candidate's EndQuorumEpoch (LeaderId -1), a voter looking for the leader re-sending its
Fetch, an observer's answer to a Vote, late Fetch answers, an EndQuorumEpoch naming another
leader, a restart with the node's own vote, a Vote from a non-voter.
"""

from model import node as nodes
from model.choices import CHOICE_POINTS, allowed_transitions, default, rule_of
from model.config import ClusterConfig
from model.events import Request, Response, Restart, Send, SetTimer, Timer, TimerKind
from model.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    VoteRequest,
    VoteResponse,
)
from model.state import NodeState, Role
from spec import errors
from spec.rules import load_rules

KIP_CODES = {errors.INVALID_REQUEST, errors.INCONSISTENT_VOTER_SET, errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH, errors.INVALID_QUORUM_STATE}


def config(node: int = 2, profile: str = "kip595"):
    return ClusterConfig(voters=(1, 2, 3), observers=(4,), profile=profile).node(node)


def outcomes(node_config, state: NodeState, event, *, branching: tuple[str, ...] = ("OBS-2", "COMMON-4B")):
    """The allowed outcomes, those that take another alternative at a point in `branching` left out
    unless that point is what the test is about (the voter a discovery Fetch goes to, the refusal code)."""
    found = allowed_transitions(nodes.step, node_config, state, event)
    return [o for o in found if all(dict(o.picks).get(name, default(name)) == default(name) for name in branching)]


def answers(node_config, state: NodeState, event) -> set[tuple[int, bool]]:
    """(partition error code, state unchanged) of every allowed answer."""
    found = set()
    for outcome in outcomes(node_config, state, event, branching=()):
        sent = [o.message for o in outcome.transition.outputs if isinstance(o, Send) and o.destination == event.source]
        found.add((sent[0].PartitionErrorCode, outcome.transition.state == state))
    return found


def sends(transition) -> list[tuple[int, str]]:
    return sorted((o.destination, type(o.message).__name__) for o in transition.outputs if isinstance(o, Send))


FOLLOWER = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=1)


def test_an_impossible_request_may_be_refused_with_any_kip_code_its_state_unchanged():
    """COMMON-4B: a BeginQuorumEpoch naming leader -1 is refused; the KIP names no code for it."""
    begin = Request(source=1, message=BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=-1, LeaderEpoch=3))
    assert answers(config(), FOLLOWER, begin) == {(code, True) for code in KIP_CODES}
    assert answers(config(profile="kafka-3.9"), FOLLOWER, begin) == {(errors.INVALID_REQUEST, True)}


def test_a_second_leader_outside_the_voter_set_may_be_refused_as_an_invalid_quorum_state():
    """A leader that is not a voter, for an epoch whose leader is known: INVALID_QUORUM_STATE is the KIP's own example."""
    begin = Request(source=4, message=BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=4, LeaderEpoch=2))
    assert (errors.INVALID_QUORUM_STATE, True) in answers(config(), FOLLOWER, begin)
    end = Request(source=4, message=EndQuorumEpochRequest(ClusterId="kraft-cluster", ReplicaId=4, LeaderId=4, LeaderEpoch=2, PreferredSuccessors=(2,)))
    assert (errors.UNKNOWN_LEADER_EPOCH, True) in answers(config(), FOLLOWER, end)


def test_a_candidates_end_quorum_epoch_is_a_request_from_an_unknown_leader():
    """END-REQ-3B: LeaderId -1 is what the KIP's shutting-down candidate sends; refused as from a leader the voter does not know."""
    voted = NodeState(role=Role.UNATTACHED, epoch=2, voted_id=3)
    end = Request(source=3, message=EndQuorumEpochRequest(ClusterId="kraft-cluster", ReplicaId=3, LeaderId=-1, LeaderEpoch=2, PreferredSuccessors=(2,)))
    by_reading = {dict(o.picks).get("END-REQ-3B"): o for o in outcomes(config(), voted, end)}
    assert by_reading["unknown-leader"].transition.outputs[0].message.PartitionErrorCode == errors.UNKNOWN_LEADER_EPOCH
    assert by_reading["impossible"].transition.outputs[0].message.PartitionErrorCode == errors.INVALID_REQUEST
    assert all(o.transition.state == voted for o in by_reading.values())
    assert {dict(o.picks).get("END-REQ-3B") for o in outcomes(config(profile="kafka-3.9"), voted, end)} == {"impossible"}


def restarted(node_config, state: NodeState) -> NodeState:
    return nodes.step(node_config, state, Restart()).state


def test_a_voter_looking_for_the_leader_may_fetch_again_on_an_answer_or_on_its_request_timer():
    """BOOT-1B: "keeps retrying Fetch to random voters until the election timeout expires", at no stated moment."""
    looking = restarted(config(), NodeState(role=Role.DOWN, epoch=2))
    assert looking.role == Role.UNATTACHED and looking.fetching is not None
    assert TimerKind.REQUEST_TIMEOUT in nodes.armed_timers(config(), looking)
    timer = outcomes(config(), looking, Timer(kind=TimerKind.REQUEST_TIMEOUT))
    assert [sends(o.transition) for o in timer] == [[], [(1, "FetchRequest"), (3, "FetchRequest")]]
    no_leader = FetchResponse(CurrentLeader=LeaderIdAndEpoch(LeaderId=-1, LeaderEpoch=2), PartitionErrorCode=errors.NOT_LEADER_OR_FOLLOWER)
    answered = outcomes(config(), looking, Response(source=1, message=no_leader, request=looking.fetching))
    assert [sends(o.transition) for o in answered] == [[], [(1, "FetchRequest"), (3, "FetchRequest")]]


def test_an_observer_may_answer_a_vote_with_a_plain_refusal_or_take_its_epoch():
    """VOTER-ONLY-1B: the KIP says observers do not vote, not how one answers a Vote."""
    observer = NodeState(role=Role.OBSERVER, epoch=1, leader_id=1)
    vote = Request(source=3, message=VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=2, CandidateId=3, LastOffsetEpoch=0, LastOffset=-1))
    found = {dict(o.picks)["VOTER-ONLY-1B"]: o.transition for o in outcomes(config(4), observer, vote)}
    assert found["reject"].outputs[0].message.PartitionErrorCode == errors.INCONSISTENT_VOTER_SET
    assert found["refuse"].outputs[0].message.PartitionErrorCode == errors.NONE and found["refuse"].state == observer
    adopted = found["adopt-epoch"]
    assert (adopted.state.role, adopted.state.epoch, adopted.state.leader_id, adopted.state.voted_id) == (Role.OBSERVER, 2, -1, -1)
    assert [o.message.VoteGranted for o in adopted.outputs if isinstance(o, Send) and o.destination == 3 and type(o.message) is VoteResponse] == [False]


def test_a_late_fetch_answer_may_be_taken_as_the_answer():
    """FETCH-RESP-3 take-as-answer: the KIP has no notion of a stale answer; one from the leader may start the next Fetch."""
    earlier = FetchRequest(ClusterId="kraft-cluster", ReplicaId=2, CurrentLeaderEpoch=2, FetchOffset=0, LastFetchedEpoch=0)
    waiting = NodeState(role=Role.FOLLOWER, epoch=2, leader_id=1, fetching=FetchRequest(ClusterId="kraft-cluster", ReplicaId=2, CurrentLeaderEpoch=2, FetchOffset=1, LastFetchedEpoch=2))
    refused = FetchResponse(CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=2), HighWatermark=0)
    found = {dict(o.picks)["FETCH-RESP-3"]: sends(o.transition) for o in outcomes(config(), waiting, Response(source=1, message=refused, request=earlier))}
    assert found == {"ignore": [], "apply": [], "take-as-answer": [(1, "FetchRequest")]}
    assert {dict(o.picks).get("FETCH-RESP-3") for o in outcomes(config(profile="kafka-3.9"), waiting, Response(source=1, message=refused, request=earlier))} == {None}


def test_an_end_quorum_epoch_naming_another_leader_may_be_acted_on():
    """END-REQ-3 accept: the KIP refuses only a leader it does not know for the epoch."""
    end = Request(source=3, message=EndQuorumEpochRequest(ClusterId="kraft-cluster", ReplicaId=3, LeaderId=3, LeaderEpoch=2, PreferredSuccessors=(2,)))
    found = {dict(o.picks)["END-REQ-3"]: o.transition for o in outcomes(config(), FOLLOWER, end)}
    assert found["unknown-leader-epoch"].outputs[0].message.PartitionErrorCode == errors.UNKNOWN_LEADER_EPOCH
    assert found["invalid-quorum-state"].outputs[0].message.PartitionErrorCode == errors.INVALID_QUORUM_STATE
    assert found["accept"].state.role == Role.CANDIDATE and found["accept"].state.epoch == 3


def test_a_voter_restarting_with_its_own_vote_may_look_for_the_leader_first():
    """QSTATE-4B: the KIP's start-up is a Fetch to the voters; resuming the candidacy is Kafka's (pinned)."""
    was_candidate = NodeState(role=Role.DOWN, epoch=2, voted_id=2)
    found = {dict(o.picks)["QSTATE-4B"]: o.transition for o in outcomes(config(), was_candidate, Restart())}
    assert found["stand"].state.role == Role.CANDIDATE
    looking = found["look-for-leader"]
    assert (looking.state.role, looking.state.epoch, looking.state.voted_id) == (Role.UNATTACHED, 2, 2)
    assert sends(looking) == [(1, "FetchRequest"), (3, "FetchRequest")]
    assert [o.picks for o in outcomes(config(profile="kafka-3.9"), was_candidate, Restart())] == [(("QSTATE-4B", "stand"),)]


def test_a_vote_from_a_non_voter_may_be_refused_without_a_code_or_start_an_election_at_once():
    """VOTE-REQ-4C: "reject the vote ... start a new election itself" names neither a code nor a moment."""
    unattached = NodeState(role=Role.UNATTACHED, epoch=2)
    same_epoch = Request(source=4, message=VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=2, CandidateId=4, LastOffsetEpoch=0, LastOffset=-1))
    found = {dict(o.picks)["VOTE-REQ-4C"]: o.transition for o in outcomes(config(), unattached, same_epoch)}
    assert found["refuse-without-code"].outputs == (Send(destination=4, message=found["refuse-without-code"].outputs[0].message),)
    assert found["refuse-without-code"].outputs[0].message.PartitionErrorCode == errors.NONE
    assert any(isinstance(o, SetTimer) for o in found["refuse-and-wait"].outputs)
    assert not any(isinstance(o, SetTimer) for o in found["refuse"].outputs)
    larger = Request(source=4, message=VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=3, CandidateId=4, LastOffsetEpoch=0, LastOffset=-1))
    stood = {dict(o.picks)["VOTE-REQ-4C"]: o.transition for o in outcomes(config(), unattached, larger)}["stand"]
    assert (stood.state.role, stood.state.epoch) == (Role.CANDIDATE, 4)
    refusal = stood.outputs[0].message
    assert (refusal.VoteGranted, refusal.PartitionErrorCode, refusal.LeaderEpoch) == (False, errors.INCONSISTENT_VOTER_SET, 3)


def test_every_choice_point_belongs_to_a_rule_of_the_catalogue():
    """A departure at a one-way point blames the point's rule: it must be one the reports can name."""
    known = {rule.id for rule in load_rules()}
    assert {name: rule_of(name) for name in CHOICE_POINTS if rule_of(name) not in known} == {}
