"""Crash and restart: what the quorum-state file and the log keep, what is lost, and the role rebuilt from them."""

from collections import Counter

import pytest

from conftest import CLUSTER_ID, config, fetch, leader_state, log, request, state, timer

from model import node, properties
from model.cluster import Bounds, Cluster, CrashNode, Deliver, Fire, RestartNode
from model.config import ClusterConfig
from model.events import Crash, Restart, Send, TimerKind
from model.messages import BeginQuorumEpochRequest, FetchRequest, LeaderIdAndEpoch, QuorumStateMessage, Voter, VoteRequest, VoteResponse
from model.network import envelopes
from model.state import NodeState, Role, quorum_state_file
from spec import errors


def crash_and_restart(cfg, s):
    down = node.step(cfg, s, Crash())
    return down, node.step(cfg, down.state, Restart())


def ask(epoch: int, candidate: int, last_epoch: int = 0, last_offset: int = -1) -> VoteRequest:
    return VoteRequest(
        ClusterId=CLUSTER_ID, CandidateEpoch=epoch, CandidateId=candidate, LastOffsetEpoch=last_epoch, LastOffset=last_offset
    )


# QSTATE-1


def test_qstate_1_bootstrap_quorum_state_file():
    """QSTATE-1: at bootstrap the file holds LeaderId -1, LeaderEpoch 0, VotedId -1 and the voters; restart keeps it so."""
    cfg = config(1)
    fresh = node.initial_state(cfg)
    assert quorum_state_file(fresh, cfg.voters) == QuorumStateMessage(
        LeaderId=-1, LeaderEpoch=0, VotedId=-1, AppliedOffset=0, CurrentVoters=(Voter(VoterId=1), Voter(VoterId=2), Voter(VoterId=3))
    )
    _, t = crash_and_restart(cfg, fresh)
    assert (t.state.role, t.state.epoch, t.state.leader_id, t.state.voted_id) == (Role.UNATTACHED, 0, -1, -1)
    assert "QSTATE-1" in t.rules


def test_qstate_1_file_reflects_leader_and_vote():
    """QSTATE-1: the file's LeaderId, LeaderEpoch and VotedId are the node's, read back on restart."""
    cfg = config(1)
    s = state(Role.FOLLOWER, epoch=7, leader_id=3, voted_id=3, log=log(1, 7), high_watermark=2)
    assert quorum_state_file(s, cfg.voters) == QuorumStateMessage(
        LeaderId=3, LeaderEpoch=7, VotedId=3, AppliedOffset=2, CurrentVoters=(Voter(VoterId=1), Voter(VoterId=2), Voter(VoterId=3))
    )
    _, t = crash_and_restart(cfg, s)
    assert (t.state.epoch, t.state.leader_id, t.state.voted_id) == (7, 3, 3)
    assert "QSTATE-1" in t.rules


# QSTATE-3 / LOG-3


def test_qstate_3_crash_keeps_quorum_state_and_log_loses_volatile_state():
    """QSTATE-3/LOG-3: a crash keeps epoch, LeaderId, VotedId and the log; high watermark, progress, endorsements are lost."""
    cfg = config(1, observers=(4,))
    records = log(1, 1, 5, 5)
    s = leader_state(
        cfg, 5, records, high_watermark=3, endorsed=frozenset({1, 2}), fetched=frozenset({1, 2}), replica_offsets=(4, 3, -1, 2)
    )
    t = node.step(cfg, s, Crash())
    assert t.state == NodeState(role=Role.DOWN, epoch=5, leader_id=1, voted_id=1, log=records)
    assert t.outputs == ()
    assert "QSTATE-3" in t.rules
    assert "LOG-3" in t.rules


def test_log_3_crash_keeps_every_record_including_uncommitted_ones():
    """LOG-3: appends are durable at once: records above the high watermark survive a crash and restart."""
    cfg = config(1)
    records = log(1, 2, 2, 3)
    s = state(Role.FOLLOWER, epoch=3, leader_id=2, log=records, high_watermark=1, fetching=fetch(3, records))
    down, up = crash_and_restart(cfg, s)
    assert down.state.log == records
    assert up.state.log == records
    assert up.state.high_watermark == 0
    assert "LOG-3" in down.rules


def test_qstate_3_candidate_crash_loses_granted_votes():
    """QSTATE-3: the votes a candidate collected are volatile; after restart it asks every other voter again."""
    cfg = config(1, voters=(1, 2, 3, 4, 5))
    records = log(1)
    s = state(Role.CANDIDATE, epoch=4, voted_id=1, granted=frozenset({1, 2}), log=records)
    down, up = crash_and_restart(cfg, s)
    assert down.state == NodeState(role=Role.DOWN, epoch=4, voted_id=1, log=records)
    assert up.state == NodeState(role=Role.CANDIDATE, epoch=4, voted_id=1, granted=frozenset({1}), log=records)
    vote = ask(4, 1, 1, 0)
    sent = [o for o in up.outputs if type(o) is Send]
    assert Counter(sent) == Counter(Send(destination=v, message=vote) for v in (2, 3, 4, 5))
    assert "QSTATE-3" in up.rules


def test_qstate_3_down_node_ignores_everything_but_restart():
    """QSTATE-3: a crashed node neither answers requests nor reacts to timers until it restarts."""
    cfg = config(1)
    down = node.step(cfg, state(Role.UNATTACHED, epoch=2, voted_id=3), Crash()).state
    answered = request(cfg, down, 2, ask(3, 2))
    assert answered.state == down
    assert answered.outputs == ()
    fired = timer(cfg, down, TimerKind.ELECTION_TIMEOUT)
    assert fired.state == down
    assert fired.outputs == ()
    up = node.step(cfg, down, Restart())
    assert up.state.role == Role.UNATTACHED
    assert "QSTATE-3" in up.rules


# QSTATE-4: the role rebuilt on restart


def test_qstate_4_leader_restarts_resigned():
    """QSTATE-4: LeaderId == self in the file: the node restarts resigned in the same epoch."""
    cfg = config(1)
    records = log(1, 5)
    s = leader_state(cfg, 5, records, high_watermark=2, endorsed=frozenset({1, 2}))
    _, t = crash_and_restart(cfg, s)
    assert t.state == NodeState(role=Role.RESIGNED, epoch=5, leader_id=1, voted_id=1, log=records)
    assert t.outputs == ()
    assert "QSTATE-4" in t.rules
    fetched = request(cfg, t.state, 2, fetch(5, records, replica=2))
    assert fetched.outputs[0].message.PartitionErrorCode == errors.NOT_LEADER_OR_FOLLOWER
    assert fetched.outputs[0].message.CurrentLeader == LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=5)


def test_qstate_4_known_leader_restarts_following_it():
    """QSTATE-4: a known LeaderId in the file: the node restarts as its follower and fetches from it."""
    cfg = config(1)
    records = log(1, 5, 5)
    s = state(Role.FOLLOWER, epoch=5, leader_id=2, voted_id=3, log=records, high_watermark=2, fetching=fetch(5, records))
    _, t = crash_and_restart(cfg, s)
    assert t.state == NodeState(role=Role.FOLLOWER, epoch=5, leader_id=2, voted_id=3, log=records, fetching=fetch(5, records))
    assert t.outputs == (Send(destination=2, message=fetch(5, records)),)
    assert "QSTATE-4" in t.rules


def test_qstate_4_self_vote_restarts_candidate_re_sending_vote():
    """QSTATE-4: VotedId == self and no leader: the node restarts candidate in the same epoch and re-sends Vote."""
    cfg = config(1)
    records = log(1, 2)
    s = state(Role.CANDIDATE, epoch=4, voted_id=1, granted=frozenset({1, 3}), log=records)
    _, t = crash_and_restart(cfg, s)
    assert t.state == NodeState(role=Role.CANDIDATE, epoch=4, voted_id=1, granted=frozenset({1}), log=records)
    vote = ask(4, 1, 2, 1)
    sent = [o for o in t.outputs if type(o) is Send]
    assert Counter(sent) == Counter([Send(destination=2, message=vote), Send(destination=3, message=vote)])
    assert "QSTATE-4" in t.rules


def test_qstate_4_other_vote_restarts_voted_and_discovers():
    """QSTATE-4: VotedId set to another voter: the node restarts unattached with that vote, looking for the leader."""
    cfg = config(1)
    records = log(1, 2)
    s = state(Role.UNATTACHED, epoch=4, voted_id=3, log=records)
    _, t = crash_and_restart(cfg, s)
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=4, voted_id=3, log=records, fetching=fetch(4, records))
    assert t.state.role_name == "voted"
    assert Counter(t.outputs) == Counter(Send(destination=v, message=fetch(4, records)) for v in (2, 3))
    assert "QSTATE-4" in t.rules
    again = request(cfg, t.state, 2, ask(4, 2, 3, 9))
    assert again.outputs == (
        Send(destination=2, message=VoteResponse(ErrorCode=0, PartitionErrorCode=0, LeaderId=-1, LeaderEpoch=4, VoteGranted=False)),
    )


def test_qstate_4_nothing_restarts_unattached_sending_discovery_fetch():
    """QSTATE-4/BOOT-1: no leader and no vote: the node restarts unattached and sends Fetch to the other voters."""
    cfg = config(2)
    records = log(1, 3)
    s = state(Role.UNATTACHED, epoch=3, log=records, high_watermark=1)
    _, t = crash_and_restart(cfg, s)
    discovery = fetch(3, records, replica=2)
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=3, log=records, fetching=discovery)
    assert Counter(t.outputs) == Counter(Send(destination=v, message=discovery) for v in (1, 3))
    assert "QSTATE-4" in t.rules
    assert "BOOT-1" in t.rules


@pytest.mark.parametrize(
    "persisted",
    [
        dict(role=Role.FOLLOWER, leader_id=3),
        dict(role=Role.UNATTACHED, voted_id=1),
        dict(role=Role.UNATTACHED, voted_id=3),
        dict(role=Role.LEADER, leader_id=2),
    ],
    ids=["follower", "own vote", "other vote", "leader"],
)
def test_qstate_4_a_log_ahead_of_the_file_wins(persisted):
    """QSTATE-4: a quorum-state file at epoch 2 beside a log whose last record is of epoch 5 (a stale
    file): the node starts unattached in epoch 5, with no leader and no vote, never back in epoch 2."""
    cfg = config(2)
    records = log(1, 2, 5)
    s = state(epoch=2, log=records, **persisted)
    _, t = crash_and_restart(cfg, s)
    discovery = fetch(5, records, replica=2)
    assert t.state == NodeState(role=Role.UNATTACHED, epoch=5, log=records, fetching=discovery)
    assert Counter(t.outputs) == Counter(Send(destination=v, message=discovery) for v in (1, 3))
    assert "QSTATE-4" in t.rules


def test_qstate_4_observer_restarts_following_known_leader():
    """QSTATE-4: an observer with a known leader restarts following it (never candidate)."""
    cfg = config(4, observers=(4,))
    records = log(1, 2)
    s = state(Role.OBSERVER, epoch=2, leader_id=3, log=records, high_watermark=2, fetching=fetch(2, records, replica=4))
    _, t = crash_and_restart(cfg, s)
    expected = fetch(2, records, replica=4)
    assert t.state == NodeState(role=Role.OBSERVER, epoch=2, leader_id=3, log=records, fetching=expected)
    assert t.outputs == (Send(destination=3, message=expected),)
    assert "QSTATE-4" in t.rules


def test_qstate_4_observer_without_leader_restarts_discovering():
    """QSTATE-4: an observer that knows no leader restarts as an observer fetching from every voter."""
    cfg = config(4, observers=(4,))
    records = log(1, 2)
    s = state(Role.OBSERVER, epoch=2, log=records)
    _, t = crash_and_restart(cfg, s)
    expected = fetch(2, records, replica=4)
    assert t.state == NodeState(role=Role.OBSERVER, epoch=2, leader_id=-1, log=records, fetching=expected)
    assert Counter(t.outputs) == Counter(Send(destination=v, message=expected) for v in (1, 2, 3))
    assert "QSTATE-4" in t.rules


# QSTATE-2: what was persisted before acting is there after a crash


def test_qstate_2_granted_vote_survives_crash():
    """QSTATE-2: the VotedId persisted with a grant is still there after a crash; the node cannot vote twice."""
    cfg = config(1)
    granted = request(cfg, state(Role.UNATTACHED, epoch=3), 2, ask(4, 2))
    assert "QSTATE-2" in granted.rules
    _, up = crash_and_restart(cfg, granted.state)
    assert (up.state.epoch, up.state.voted_id) == (4, 2)
    rival = request(cfg, up.state, 3, ask(4, 3))
    assert rival.outputs == (
        Send(destination=3, message=VoteResponse(ErrorCode=0, PartitionErrorCode=0, LeaderId=-1, LeaderEpoch=4, VoteGranted=False)),
    )
    assert rival.state.voted_id == 2


def test_qstate_2_candidacy_survives_crash():
    """QSTATE-2: the candidate's epoch and self-vote, persisted before its Vote requests, survive a crash."""
    cfg = config(1)
    candidate = timer(cfg, state(Role.UNATTACHED, epoch=3), TimerKind.ELECTION_TIMEOUT)
    assert "QSTATE-2" in candidate.rules
    _, up = crash_and_restart(cfg, candidate.state)
    assert (up.state.role, up.state.epoch, up.state.voted_id) == (Role.CANDIDATE, 4, 1)


def test_qstate_2_followed_leader_survives_crash():
    """QSTATE-2: the leader persisted on accepting BeginQuorumEpoch is followed again after a crash."""
    cfg = config(1)
    accepted = request(cfg, state(Role.UNATTACHED, epoch=3), 2, BeginQuorumEpochRequest(ClusterId=CLUSTER_ID, LeaderId=2, LeaderEpoch=4))
    assert "QSTATE-2" in accepted.rules
    _, up = crash_and_restart(cfg, accepted.state)
    assert (up.state.role, up.state.epoch, up.state.leader_id) == (Role.FOLLOWER, 4, 2)
    assert up.outputs == (Send(destination=2, message=fetch(4, ())),)


# BOOT-1


def test_boot_1_discovery_fetch_without_cached_cluster_id():
    """BOOT-1: a starting node with no cached cluster id sends discovery Fetch with ClusterId null and its last epoch."""
    cfg = config(3, cluster_id=None)
    records = log(2, 2)
    s = state(Role.UNATTACHED, epoch=6, log=records)
    _, t = crash_and_restart(cfg, s)
    discovery = fetch(6, records, replica=3, cluster_id=None)
    assert Counter(t.outputs) == Counter(Send(destination=v, message=discovery) for v in (1, 2))
    assert t.state.fetching == discovery
    assert "BOOT-1" in t.rules


def test_boot_1_fresh_node_discovery_fetch():
    """BOOT-1: a freshly bootstrapped voter (epoch 0, empty log) restarting sends Fetch(epoch 0, offset 0) to the voters."""
    cfg = config(1)
    _, t = crash_and_restart(cfg, node.initial_state(cfg))
    discovery = FetchRequest(ClusterId=CLUSTER_ID, ReplicaId=1, CurrentLeaderEpoch=0, FetchOffset=0, LastFetchedEpoch=0)
    assert Counter(t.outputs) == Counter(Send(destination=v, message=discovery) for v in (2, 3))
    assert "BOOT-1" in t.rules


# forget_vote_on_restart: what losing VotedId breaks


def test_qstate_3_forgetting_the_vote_lets_a_voter_vote_twice():
    """QSTATE-3: with forget_vote_on_restart the restarted voter grants a second candidate in the same epoch."""
    cfg = config(1, forget_vote_on_restart=True)
    granted = request(cfg, state(Role.UNATTACHED, epoch=3), 2, ask(4, 2))
    assert granted.state.voted_id == 2
    _, up = crash_and_restart(cfg, granted.state)
    assert up.state.voted_id == -1
    assert "QSTATE-3" in up.rules
    second = request(cfg, up.state, 3, ask(4, 3))
    assert second.state.voted_id == 3
    assert second.outputs == (
        Send(destination=3, message=VoteResponse(ErrorCode=0, PartitionErrorCode=0, LeaderId=-1, LeaderEpoch=4, VoteGranted=True)),
    )


def _two_candidates_and_a_forgetful_voter(profile: str):
    """Nodes 2 and 3 stand in epoch 1; node 1 grants 2, crashes, restarts, then hears 3's request."""
    cluster = Cluster(ClusterConfig(voters=(1, 2, 3), profile=profile), Bounds(max_crashes=1))
    s = cluster.initial()

    def apply(action):
        nonlocal s
        s, _ = cluster.apply(s, action)

    def deliver(source, destination, kind):
        for envelope in envelopes(s.network):
            if (envelope.source, envelope.destination, type(envelope.message)) == (source, destination, kind):
                apply(Deliver(envelope=envelope))
                return
        raise AssertionError(f"no {kind.__name__} from {source} to {destination} in flight")

    apply(Fire(node=2, timer=TimerKind.ELECTION_TIMEOUT))
    apply(Fire(node=3, timer=TimerKind.ELECTION_TIMEOUT))
    deliver(2, 1, VoteRequest)
    apply(CrashNode(node=1))
    apply(RestartNode(node=1))
    deliver(3, 1, VoteRequest)
    deliver(1, 2, VoteResponse)
    deliver(1, 3, VoteResponse)
    return cluster, s


def test_qstate_3_forgetting_the_vote_breaks_election_safety():
    """QSTATE-3: under faulty-forget-vote one voter votes twice in epoch 1 and two leaders are elected (SAFE-2, SAFE-1)."""
    cluster, s = _two_candidates_and_a_forgetful_voter("faulty-forget-vote")
    found = {v.rule for v in properties.violations(cluster, s)}
    assert {"SAFE-1", "SAFE-2"} <= found
    assert s.nodes[1].role == Role.LEADER
    assert s.nodes[2].role == Role.LEADER
    assert s.nodes[1].epoch == s.nodes[2].epoch == 1


def test_qstate_3_persisted_vote_keeps_one_leader_per_epoch():
    """QSTATE-3: with VotedId persisted, the same run elects one leader and breaks no safety property."""
    cluster, s = _two_candidates_and_a_forgetful_voter("kip595")
    assert properties.violations(cluster, s) == ()
    assert [n.role for n in s.nodes].count(Role.LEADER) == 1
    assert s.nodes[1].role == Role.LEADER
    assert s.nodes[2].role == Role.CANDIDATE
