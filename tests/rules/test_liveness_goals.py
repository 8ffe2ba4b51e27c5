"""LIVE-1 .. LIVE-5: the goals the liveness properties ask a fair run to meet again and again,
each on crafted cluster states that meet it and miss it; and which actions fairness covers."""

import msgspec

from model import liveness, network
from model.cluster import Append, Bounds, Cluster, CrashNode, Deliver, Drop, Fire, RestartNode
from model.config import ClusterConfig
from model.events import TimerKind
from model.messages import FetchRequest, Record, VoteRequest
from model.network import Envelope
from model.state import NodeState, Role

CLUSTER = Cluster(ClusterConfig(voters=(1, 2, 3)))
INITIAL = CLUSTER.initial()


def with_nodes(*nodes: NodeState):
    return msgspec.structs.replace(INITIAL, nodes=tuple(nodes))


def node(role: Role, epoch: int = 1, log: int = 0, high_watermark: int = 0) -> NodeState:
    return NodeState(role=role, epoch=epoch, leader_id=1, log=tuple(Record(Offset=i, Epoch=1, Value=i) for i in range(log)), high_watermark=high_watermark)


def test_live_1_a_leader_is_the_goal_the_initial_cluster_misses():
    """LIVE-1: no leader in the initial state; a leader, whatever the others do, meets the goal."""
    assert "LIVE-1" in liveness.unmet(CLUSTER, INITIAL)
    assert "LIVE-1" not in liveness.unmet(CLUSTER, with_nodes(node(Role.LEADER), node(Role.CANDIDATE), node(Role.DOWN)))


def test_live_2_a_leader_with_an_uncommitted_record_misses_the_goal():
    """LIVE-2: a leader whose high watermark is below its log end misses it; without a leader it is met."""
    pending = with_nodes(node(Role.LEADER, log=2, high_watermark=1), node(Role.FOLLOWER, log=2, high_watermark=1), node(Role.FOLLOWER))
    assert "LIVE-2" in liveness.unmet(CLUSTER, pending)
    committed = with_nodes(node(Role.LEADER, log=2, high_watermark=2), node(Role.FOLLOWER, log=2, high_watermark=1), node(Role.FOLLOWER))
    assert "LIVE-2" not in liveness.unmet(CLUSTER, committed)
    assert "LIVE-2" not in liveness.unmet(CLUSTER, INITIAL)


def test_live_3_a_candidate_or_a_prospective_misses_the_goal():
    """LIVE-3: any voter standing (candidate, prospective) misses it; unattached voters meet it."""
    assert "LIVE-3" in liveness.unmet(CLUSTER, with_nodes(node(Role.LEADER), node(Role.CANDIDATE, epoch=2), node(Role.FOLLOWER)))
    assert "LIVE-3" in liveness.unmet(CLUSTER, with_nodes(node(Role.PROSPECTIVE), node(Role.FOLLOWER), node(Role.FOLLOWER)))
    assert "LIVE-3" not in liveness.unmet(CLUSTER, INITIAL)


def test_live_4_every_node_up_knows_the_leaders_high_watermark():
    """LIVE-4: a follower behind the leader's high watermark misses it; a node down does not count."""
    behind = with_nodes(node(Role.LEADER, log=2, high_watermark=2), node(Role.FOLLOWER, log=2, high_watermark=1), node(Role.DOWN))
    assert "LIVE-4" in liveness.unmet(CLUSTER, behind)
    caught_up = with_nodes(node(Role.LEADER, log=2, high_watermark=2), node(Role.FOLLOWER, log=2, high_watermark=2), node(Role.DOWN))
    assert "LIVE-4" not in liveness.unmet(CLUSTER, caught_up)
    assert "LIVE-4" in liveness.unmet(CLUSTER, INITIAL)  # no leader: nothing to learn it from


def test_live_5_a_leader_that_no_majority_can_reach_misses_the_goal():
    """LIVE-5: a leader cut off from the Fetch requests of both others misses it; one link into it
    left (a majority with itself), or the links out of it cut only, it meets it."""
    leading = with_nodes(node(Role.LEADER), node(Role.FOLLOWER), node(Role.FOLLOWER))

    def cut(*links):
        return msgspec.structs.replace(leading, history=msgspec.structs.replace(leading.history, cut=frozenset(links)))

    assert "LIVE-5" in liveness.unmet(CLUSTER, cut((2, 1), (3, 1)))
    assert "LIVE-5" not in liveness.unmet(CLUSTER, cut((2, 1)))
    assert "LIVE-5" not in liveness.unmet(CLUSTER, cut((1, 2), (1, 3)))
    assert "LIVE-5" not in liveness.unmet(CLUSTER, INITIAL)


def test_live_5_is_checked_only_where_leaders_may_time_out():
    assert liveness.checked_goals(CLUSTER) == ("LIVE-1", "LIVE-2", "LIVE-3", "LIVE-4", "LIVE-5")
    assert liveness.checked_goals(Cluster(ClusterConfig(voters=(1, 2, 3)), Bounds(progress_timeouts=False))) == ("LIVE-1", "LIVE-2", "LIVE-3", "LIVE-4")


def test_a_timeout_that_beats_its_own_traffic_is_a_fault():
    """Raft's timing: a follower's fetch timeout firing while its Fetch is on its way, and a
    prospective's election timeout while its pre-vote is, are faults (never on a cycle); once
    the traffic is gone they are not."""
    fetching = with_nodes(node(Role.LEADER), node(Role.FOLLOWER), node(Role.FOLLOWER))
    fetch = Envelope(source=2, destination=1, message=FetchRequest(ClusterId="c", ReplicaId=2, CurrentLeaderEpoch=1))
    busy = msgspec.structs.replace(fetching, network=network.add(fetching.network, fetch))
    assert liveness.is_fault(CLUSTER, busy, Fire(node=2, timer=TimerKind.FETCH_TIMEOUT))
    assert not liveness.is_fault(CLUSTER, fetching, Fire(node=2, timer=TimerKind.FETCH_TIMEOUT))
    asking = with_nodes(node(Role.PROSPECTIVE), node(Role.FOLLOWER), node(Role.FOLLOWER))
    pre_vote = Envelope(source=1, destination=2, message=VoteRequest(ClusterId="c", CandidateEpoch=1, CandidateId=1, LastOffsetEpoch=0, LastOffset=0, PreVote=True))
    waiting = msgspec.structs.replace(asking, network=network.add(asking.network, pre_vote))
    assert liveness.is_fault(CLUSTER, waiting, Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    assert not liveness.is_fault(CLUSTER, asking, Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    late = Deliver(envelope=pre_vote, picks=(("COMMON-3B", "earlier"),))
    assert liveness.is_fault(CLUSTER, waiting, late) and not liveness.is_fault(CLUSTER, waiting, Deliver(envelope=pre_vote))


def test_faults_are_never_fair_and_deliveries_timers_and_restarts_are():
    envelope = Envelope(source=1, destination=2, message=VoteRequest(ClusterId="c", CandidateEpoch=1, CandidateId=1, LastOffsetEpoch=0, LastOffset=0))
    assert liveness.fairness_of(Deliver(envelope=envelope)) == ("deliver", envelope)
    assert liveness.fairness_of(Deliver(envelope=envelope, picks=(("X", 1),))) == ("deliver", envelope)  # whatever outcome
    assert liveness.fairness_of(Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT)) == ("fire", 1, TimerKind.ELECTION_TIMEOUT)
    assert liveness.fairness_of(RestartNode(node=3)) == ("restart", 3)
    for action in (Deliver(envelope=envelope, duplicate=True), Drop(envelope=envelope), CrashNode(node=1)):
        assert liveness.is_fault(CLUSTER, INITIAL, action) and liveness.fairness_of(action) is None
    for timer in (TimerKind.FETCH_TIMEOUT, TimerKind.PROGRESS_TIMEOUT):  # fair unless the check leaves them out
        assert liveness.fairness_of(Fire(node=1, timer=timer)) == ("fire", 1, timer)
        assert liveness.fairness_of(Fire(node=1, timer=timer), frozenset({TimerKind.ELECTION_TIMEOUT})) is None
    assert liveness.fairness_of(Append(node=1, value=1)) is None and not liveness.is_fault(CLUSTER, INITIAL, Append(node=1, value=1))


def test_a_timer_traffic_resets_is_owed_only_once_its_node_is_quiet():
    """A follower's fetch timeout is owed once nothing is in flight to or from it (its Fetch lost);
    while its Fetch is in flight, only the election timeouts and the delivery are."""
    followers = with_nodes(node(Role.LEADER), node(Role.FOLLOWER), node(Role.UNATTACHED))
    fetch_timeout, election_timeout = Fire(node=2, timer=TimerKind.FETCH_TIMEOUT), Fire(node=3, timer=TimerKind.ELECTION_TIMEOUT)
    fetch = Envelope(source=2, destination=1, message=FetchRequest(ClusterId="c", ReplicaId=2, CurrentLeaderEpoch=1))
    busy = msgspec.structs.replace(followers, network=network.add(followers.network, fetch))
    assert liveness.owed(CLUSTER, busy, [fetch_timeout, election_timeout, Deliver(envelope=fetch)]) == {("fire", 3, TimerKind.ELECTION_TIMEOUT), ("deliver", fetch)}
    assert liveness.owed(CLUSTER, followers, [fetch_timeout, election_timeout]) == {("fire", 2, TimerKind.FETCH_TIMEOUT), ("fire", 3, TimerKind.ELECTION_TIMEOUT)}
