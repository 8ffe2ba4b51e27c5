"""SAFE-1 .. SAFE-9: the safety properties as predicates over cluster states.

Each property gets a crafted cluster state that breaks it (and only it) and one where it
holds; then a real election, append and commit is driven through the cluster layer with
every property checked after every step.
"""

import msgspec
from conftest import leader_change, log

from model import cluster as clusters
from model import properties
from model.cluster import Append, Cluster, ClusterState, Deliver, Fire
from model.config import ClusterConfig
from model.events import Committed, TimerKind
from model.messages import BeginQuorumEpochRequest, FetchRequest, FetchResponse, LeaderChangeMessage, Record, VoteRequest, VoteResponse
from model.state import NodeState, Role

replace = msgspec.structs.replace

CLUSTER = Cluster(ClusterConfig(voters=(1, 2, 3), observers=(4,)))
INITIAL = CLUSTER.initial()


def crafted(nodes: dict[int, NodeState] | None = None, **history) -> ClusterState:
    """The initial 3-voter + 1-observer state with some nodes and history fields replaced."""
    members = list(INITIAL.nodes)
    for node_id, node in (nodes or {}).items():
        members[CLUSTER.index[node_id]] = node
    return replace(INITIAL, nodes=tuple(members), history=replace(INITIAL.history, **history))


def broken(state: ClusterState) -> list[tuple[str, str]]:
    return [(v.rule, v.detail) for v in properties.violations(CLUSTER, state)]


def follower(epoch: int, records, high_watermark: int = 0, leader: int = 1) -> NodeState:
    return NodeState(role=Role.FOLLOWER, epoch=epoch, leader_id=leader, log=tuple(records), high_watermark=high_watermark)


def test_initial_state_breaks_nothing():
    """A freshly bootstrapped cluster satisfies every safety property."""
    assert properties.violations(CLUSTER, INITIAL) == ()
    assert set(properties.PROPERTIES) == {f"SAFE-{n}" for n in range(1, 10)}


# SAFE-1 Election Safety ---------------------------------------------------------------


def test_safe_1_two_leaders_in_one_epoch_is_a_violation():
    """SAFE-1: at most one leader is elected per epoch."""
    state = crafted(elected=frozenset({(1, 1), (1, 2), (2, 3)}))
    assert broken(state) == [("SAFE-1", "epoch 1 elected both 1 and 2")]


def test_safe_1_one_leader_per_epoch_holds():
    """SAFE-1: different epochs may have different leaders, and re-recording one is fine."""
    state = crafted(elected=frozenset({(1, 1), (2, 2), (3, 2), (4, 1)}))
    assert properties.violations(CLUSTER, state) == ()


# SAFE-2 one vote per epoch ------------------------------------------------------------


def test_safe_2_two_votes_by_one_voter_in_one_epoch_is_a_violation():
    """SAFE-2: a voter casts at most one vote per epoch."""
    state = crafted(votes=frozenset({(1, 1, 1), (2, 1, 1), (2, 1, 3), (3, 1, 3)}))
    assert broken(state) == [("SAFE-2", "voter 2 voted for 1 and 3 in epoch 1")]


def test_safe_2_one_vote_per_voter_and_epoch_holds():
    """SAFE-2: the same voter may vote for different candidates in different epochs."""
    state = crafted(votes=frozenset({(1, 1, 1), (2, 1, 1), (2, 2, 3), (3, 2, 3), (3, 1, 3)}))
    assert properties.violations(CLUSTER, state) == ()


# SAFE-3 epochs never decrease ---------------------------------------------------------


def test_safe_3_an_epoch_going_back_is_a_violation():
    """SAFE-3: a node's epoch never decreases."""
    state = crafted({2: NodeState(role=Role.UNATTACHED, epoch=2)}, max_epochs=(0, 3, 0, 0))
    assert broken(state) == [("SAFE-3", "node 2 is at epoch 2 after having reached 3")]


def test_safe_3_observer_epoch_going_back_is_a_violation():
    """SAFE-3: the property covers every node, observers included."""
    state = crafted({4: NodeState(role=Role.OBSERVER, epoch=1)}, max_epochs=(0, 0, 0, 5))
    assert broken(state) == [("SAFE-3", "node 4 is at epoch 1 after having reached 5")]


def test_safe_3_epoch_at_its_maximum_holds():
    """SAFE-3: a node at (or above) the largest epoch it has had is fine."""
    state = crafted({1: NodeState(role=Role.UNATTACHED, epoch=3), 2: NodeState(role=Role.UNATTACHED, epoch=4)}, max_epochs=(3, 2, 0, 0))
    assert properties.violations(CLUSTER, state) == ()


# SAFE-4 Log Matching ------------------------------------------------------------------


def test_safe_4_same_offset_and_epoch_with_different_prefix_is_a_violation():
    """SAFE-4: two logs with a record of the same offset and epoch are identical up to it."""
    a = log(1, 1, 2, values=[leader_change(1, 1, 2), 10, 20])
    b = log(1, 1, 2, values=[leader_change(1, 1, 3), 10, 20])
    state = crafted({1: follower(2, a), 3: follower(2, b)})
    assert broken(state) == [("SAFE-4", "nodes 1 and 3 share epoch 2 at offset 2 but differ before it")]


def test_safe_4_observer_logs_are_checked_too():
    """SAFE-4: the observer's log must match the voters' as well."""
    a = log(1, 1, values=[leader_change(1, 1, 2), 10])
    b = log(1, 1, values=[leader_change(1, 1, 2), 11])
    state = crafted({2: follower(1, a), 4: replace(follower(1, b), role=Role.OBSERVER)})
    assert broken(state) == [("SAFE-4", "nodes 2 and 4 share epoch 1 at offset 1 but differ before it")]


def test_safe_4_logs_that_diverge_only_after_their_last_common_epoch_hold():
    """SAFE-4: logs may diverge after their last matching (offset, epoch); a prefix is fine."""
    common = log(1, 1, values=[leader_change(1, 1, 2), 10])
    a = common + (Record(Offset=2, Epoch=2, Value=20),)
    b = common + (Record(Offset=2, Epoch=3, Value=30), Record(Offset=3, Epoch=3, Value=31))
    state = crafted({1: follower(3, a), 2: follower(3, b), 3: follower(1, common)})
    assert properties.violations(CLUSTER, state) == ()


# SAFE-5 Leader Append-Only ------------------------------------------------------------


def test_safe_5_recorded_leader_rewrite_is_a_violation():
    """SAFE-5: a leader never overwrites or deletes records in its log during its epoch."""
    state = crafted(violations=frozenset({"SAFE-5"}))
    assert broken(state) == [("SAFE-5", "a leader removed or rewrote records of its own log")]


def test_safe_5_history_flags_a_leader_shrinking_its_log_in_its_epoch():
    """SAFE-5: the history notices a leader whose log lost records within its epoch."""
    records = log(1, 1, values=[leader_change(1, 1, 2), 10])
    before = NodeState(role=Role.LEADER, epoch=1, leader_id=1, voted_id=1, log=records, replica_offsets=(2, -1, -1, -1))
    rewritten = replace(before, log=records[:1] + (Record(Offset=1, Epoch=1, Value=99),))
    history = replace(INITIAL.history, elected=frozenset({(1, 1)}), max_epochs=(1, 0, 0, 0))
    for after in (replace(before, log=records[:1]), rewritten):
        recorded = clusters.record(history, 0, 1, before, after)
        assert recorded.violations == frozenset({"SAFE-5"})
        state = replace(INITIAL, nodes=(after,) + INITIAL.nodes[1:], history=recorded)
        assert [v.rule for v in properties.violations(CLUSTER, state)] == ["SAFE-5"]


def test_safe_5_leader_appending_holds():
    """SAFE-5: a leader that only appends in its epoch, or leaves it, breaks nothing."""
    records = log(1, values=[leader_change(1, 1, 2)])
    before = NodeState(role=Role.LEADER, epoch=1, leader_id=1, voted_id=1, log=records, replica_offsets=(1, -1, -1, -1))
    history = replace(INITIAL.history, elected=frozenset({(1, 1)}), max_epochs=(1, 0, 0, 0))
    appended = replace(before, log=records + (Record(Offset=1, Epoch=1, Value=10),))
    assert clusters.record(history, 0, 1, before, appended).violations == frozenset()
    # A new epoch's leader may hold a different log than the previous one had.
    next_epoch = replace(before, epoch=2, log=())
    assert clusters.record(history, 0, 1, before, next_epoch).violations == frozenset()
    state = replace(INITIAL, nodes=(appended,) + INITIAL.nodes[1:], history=clusters.record(history, 0, 1, before, appended))
    assert properties.violations(CLUSTER, state) == ()


# SAFE-6 Leader Completeness -----------------------------------------------------------

COMMITTED_LC = Record(Offset=0, Epoch=1, Value=leader_change(1, 1, 2))
COMMITTED_VALUE = Record(Offset=1, Epoch=1, Value=10)


def test_safe_6_later_leader_lacking_a_committed_record_is_a_violation():
    """SAFE-6: a record committed in epoch T is in the log of every leader of a larger epoch."""
    held = (COMMITTED_LC, COMMITTED_VALUE)
    later = NodeState(role=Role.LEADER, epoch=2, leader_id=3, voted_id=3, log=(COMMITTED_LC, Record(Offset=1, Epoch=2, Value=leader_change(3, 2, 3))))
    state = crafted(
        {1: follower(1, held, 2), 2: follower(1, held, 2), 3: later},
        committed=((COMMITTED_LC, 1), (COMMITTED_VALUE, 1)),
        elected=frozenset({(1, 1), (2, 3)}),
    )
    assert broken(state) == [("SAFE-6", "leader 3 of epoch 2 lacks record 1 (epoch 1) committed in epoch 1")]


def test_safe_6_later_leader_with_a_short_log_is_a_violation():
    """SAFE-6: a later leader whose log ends before the committed offset lacks it too."""
    held = (COMMITTED_LC, COMMITTED_VALUE)
    later = NodeState(role=Role.LEADER, epoch=3, leader_id=2, voted_id=2, log=())
    state = crafted({1: follower(1, held, 2), 2: later, 3: follower(1, held, 2)}, committed=((COMMITTED_LC, 2),))
    assert broken(state) == [("SAFE-6", "leader 2 of epoch 3 lacks record 0 (epoch 1) committed in epoch 2")]


def test_safe_6_holds_for_complete_leaders_and_the_committing_epoch():
    """SAFE-6: later leaders holding every committed record, and leaders of the same epoch, are fine."""
    held = (COMMITTED_LC, COMMITTED_VALUE)
    complete = NodeState(role=Role.LEADER, epoch=2, leader_id=2, voted_id=2, log=held + (Record(Offset=2, Epoch=2, Value=leader_change(2, 1, 2)),))
    state = crafted({1: follower(2, held, 2, leader=2), 2: complete, 3: follower(2, held, 2, leader=2)}, committed=((COMMITTED_LC, 1), (COMMITTED_VALUE, 1)))
    assert properties.violations(CLUSTER, state) == ()
    # Committed in epoch 2 itself: the leader of epoch 2 is not "a later leader".
    short = replace(complete, log=(COMMITTED_LC,))
    state = crafted({1: follower(2, held, 2, leader=2), 2: short, 3: follower(2, held, 2, leader=2)}, committed=((COMMITTED_VALUE, 2),))
    assert properties.violations(CLUSTER, state) == ()


# SAFE-7 State Machine Safety ----------------------------------------------------------


def test_safe_7_nodes_disagreeing_below_their_high_watermarks_is_a_violation():
    """SAFE-7: the committed prefixes (up to each node's high watermark) of any two nodes agree."""
    a = (Record(Offset=0, Epoch=1, Value=10), Record(Offset=1, Epoch=1, Value=11))
    b = (Record(Offset=0, Epoch=1, Value=10), Record(Offset=1, Epoch=2, Value=21))
    state = crafted({1: follower(2, a, 2), 2: follower(2, b, 2), 3: follower(2, b, 1)})
    assert broken(state) == [("SAFE-7", "nodes 1 and 2 disagree below high watermark 2")]


def test_safe_7_two_different_records_committed_at_one_offset_is_a_violation():
    """SAFE-7: the history never commits two different records at one offset."""
    first = Record(Offset=0, Epoch=1, Value=10)
    second = Record(Offset=0, Epoch=2, Value=20)
    state = crafted(
        {1: follower(2, (first,)), 2: follower(2, (second,)), 3: follower(2, (second,))},
        committed=((first, 1), (second, 2)),
    )
    # The first record is then on one voter only, so SAFE-9 is broken with it.
    assert broken(state) == [
        ("SAFE-7", "two different records were committed at offset 0"),
        ("SAFE-9", "committed record at offset 0 (epoch 1) is on 1 voters, fewer than a majority"),
    ]


def test_safe_7_logs_differing_above_the_smaller_high_watermark_hold():
    """SAFE-7: only the common committed prefix must agree; beyond it logs may differ."""
    a = (Record(Offset=0, Epoch=1, Value=10), Record(Offset=1, Epoch=1, Value=11))
    b = (Record(Offset=0, Epoch=1, Value=10), Record(Offset=1, Epoch=2, Value=21))
    state = crafted({1: follower(2, a, 2), 2: follower(2, b, 1), 3: follower(2, b, 1)})
    assert properties.violations(CLUSTER, state) == ()


# SAFE-8 high watermark within the log -------------------------------------------------


def test_safe_8_high_watermark_beyond_log_end_is_a_violation():
    """SAFE-8: every node's high watermark is at most its log end offset."""
    state = crafted({3: follower(1, (Record(Offset=0, Epoch=1, Value=10),), 2)})
    assert broken(state) == [("SAFE-8", "node 3 has high watermark 2 beyond its log end 1")]


def test_safe_8_high_watermark_at_log_end_holds():
    """SAFE-8: a high watermark equal to the log end offset is fine."""
    records = (Record(Offset=0, Epoch=1, Value=10),)
    state = crafted({1: follower(1, records, 1), 2: follower(1, records, 1), 4: replace(follower(1, records, 1), role=Role.OBSERVER)})
    assert properties.violations(CLUSTER, state) == ()


# SAFE-9 committed records are never lost ----------------------------------------------


def test_safe_9_committed_record_on_a_minority_is_a_violation():
    """SAFE-9: a committed record stays in the logs of a majority of voters (observers do not count)."""
    records = (COMMITTED_LC,)
    state = crafted(
        {1: follower(1, records), 4: replace(follower(1, records), role=Role.OBSERVER)},
        committed=((COMMITTED_LC, 1),),
    )
    assert broken(state) == [("SAFE-9", "committed record at offset 0 (epoch 1) is on 1 voters, fewer than a majority")]


def test_safe_9_committed_record_replaced_on_a_voter_is_a_violation():
    """SAFE-9: a voter holding another record at the committed offset does not hold it."""
    other = Record(Offset=0, Epoch=2, Value=leader_change(2, 2, 3))
    state = crafted({1: follower(2, (COMMITTED_LC,)), 2: follower(2, (other,)), 3: follower(2, (other,))}, committed=((COMMITTED_LC, 1),))
    assert broken(state) == [("SAFE-9", "committed record at offset 0 (epoch 1) is on 1 voters, fewer than a majority")]


def test_safe_9_committed_record_on_a_majority_holds():
    """SAFE-9: two of three voters holding the committed record is a majority."""
    state = crafted({1: follower(1, (COMMITTED_LC,)), 3: follower(1, (COMMITTED_LC,))}, committed=((COMMITTED_LC, 1),))
    assert properties.violations(CLUSTER, state) == ()


# A real run ---------------------------------------------------------------------------


class Driver:
    """Steps a cluster, checking every safety property after each step."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.state = cluster.initial()
        self.transitions = []

    def apply(self, action):
        self.state, transition = self.cluster.apply(self.state, action)
        self.transitions.append(transition)
        assert properties.violations(self.cluster, self.state) == (), action
        return transition

    def envelope(self, source: int, destination: int, kind: type):
        found = [e for e in clusters.network.envelopes(self.state.network) if (e.source, e.destination, type(e.message)) == (source, destination, kind)]
        assert len(found) == 1, (source, destination, kind, found)
        return found[0]

    def deliver(self, source: int, destination: int, kind: type):
        return self.apply(Deliver(envelope=self.envelope(source, destination, kind)))


def test_safe_properties_hold_through_an_election_and_a_commit():
    """SAFE-1..9 hold after every step of an election of node 1, an append and its commit."""
    run = Driver(CLUSTER)
    assert properties.violations(CLUSTER, run.state) == ()

    run.apply(Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    vote = VoteRequest(ClusterId="kraft-cluster", CandidateEpoch=1, CandidateId=1, LastOffsetEpoch=0, LastOffset=-1)
    assert run.envelope(1, 2, VoteRequest).message == vote
    assert run.envelope(1, 3, VoteRequest).message == vote
    for voter in (2, 3):
        run.deliver(1, voter, VoteRequest)
    granted = VoteResponse(ErrorCode=0, PartitionErrorCode=0, LeaderId=-1, LeaderEpoch=1, VoteGranted=True)
    assert run.envelope(2, 1, VoteResponse).message == granted
    run.deliver(2, 1, VoteResponse)
    leader = run.state.nodes[0]
    assert (leader.role, leader.epoch, leader.leader_id) == (Role.LEADER, 1, 1)
    lc = Record(Offset=0, Epoch=1, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 2)))
    assert leader.log == (lc,)
    run.deliver(3, 1, VoteResponse)  # late grant: already leader

    for voter in (2, 3):
        assert run.envelope(1, voter, BeginQuorumEpochRequest).message == BeginQuorumEpochRequest(ClusterId="kraft-cluster", LeaderId=1, LeaderEpoch=1)
        run.deliver(1, voter, BeginQuorumEpochRequest)
        assert run.state.nodes[voter - 1].role == Role.FOLLOWER
    run.apply(Append(node=1, value=1))
    value = Record(Offset=1, Epoch=1, Value=1)
    assert run.state.nodes[0].log == (lc, value)

    committed_at = []
    for _ in range(6):
        for voter in (2, 3):
            run.deliver(voter, 1, FetchRequest)
            committed_at += [o.HighWatermark for o in run.transitions[-1].outputs if type(o) is Committed]
            run.deliver(1, voter, FetchResponse)
        if run.state.nodes[0].high_watermark == 2 and all(n.high_watermark == 2 for n in run.state.nodes[1:3]):
            break
    assert committed_at == [2]
    assert [n.log for n in run.state.nodes[:3]] == [(lc, value)] * 3
    assert [n.high_watermark for n in run.state.nodes[:3]] == [2, 2, 2]

    history = run.state.history
    assert history.elected == frozenset({(1, 1)})
    assert (1, 1, 1) in history.votes
    assert history.votes == frozenset({(1, 1, 1), (2, 1, 1), (3, 1, 1)})
    assert history.committed == ((lc, 1), (value, 1))
    assert history.max_epochs == (1, 1, 1, 0)
    assert history.violations == frozenset()

