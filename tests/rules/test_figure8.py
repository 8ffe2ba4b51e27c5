"""The Raft paper's Figure 8, in KRaft: a record of an earlier epoch on a majority is not committed.

Raft (raft-paper-summary, "previous term 값을 지닌 엔트리 커밋") and KIP-595 ("커밋에 대한 추가
조건") give the same scenario on five voters S1..S5:

  epoch 1  S1 leads; its LeaderChange record LC1 reaches everyone and is committed.
  epoch 2  S1 leads again (votes S1, S2, S3) and writes "2"; only S2 receives it.
  epoch 3  S5 leads (votes S3, S4, S5) and writes "3" to its own log only.
  epoch 4  S1 leads (votes S1, S2, S3) and replicates "2" to S3: "2" is now on S1, S2, S3,
           a majority, but no record of epoch 4 is on a majority yet.
  epoch 5  S5 is elected (votes S2, S4, S5: S5's last record (epoch 3, offset 2) is at least
           as up to date as S2's (2, 2) and S4's (1, 0)) and makes everyone truncate "2".

HW-1 keeps S1 from committing "2" in epoch 4, so losing it in epoch 5 loses nothing committed.
With the faulty profile that ignores HW-1 (option hw_any_epoch) S1 commits "2" in epoch 4 and
the epoch-5 leader breaks Leader Completeness (SAFE-6), then the truncations leave "2" on a
minority (SAFE-9) and S5 commits "3" over it (SAFE-7).
"""

from model import network, properties
from model.cluster import Append, Cluster, Deliver, Drop, Fire, ResignLeader
from model.config import ClusterConfig
from model.events import Committed, TimerKind
from model.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    LeaderChangeMessage,
    Record,
    VoteRequest,
    VoteResponse,
)
from model.state import Role

VOTERS = (1, 2, 3, 4, 5)

LC1 = Record(Offset=0, Epoch=1, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 2, 3)))
LC2 = Record(Offset=1, Epoch=2, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 2, 3)))
TWO = Record(Offset=2, Epoch=2, Value=2)
LC3 = Record(Offset=1, Epoch=3, Value=LeaderChangeMessage(LeaderId=5, VotedIds=(3, 4, 5)))
THREE = Record(Offset=2, Epoch=3, Value=3)
LC4 = Record(Offset=3, Epoch=4, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 2, 3)))
LC5 = Record(Offset=3, Epoch=5, Value=LeaderChangeMessage(LeaderId=5, VotedIds=(2, 4, 5)))


class Run:
    """A five-voter cluster stepped by hand; the safety properties are checked after every step."""

    def __init__(self, profile: str) -> None:
        self.cluster = Cluster(ClusterConfig(voters=VOTERS, profile=profile))
        self.state = self.cluster.initial()
        self.transitions = []  # (node, Transition) of every step that reached a node
        self.found = []  # (step number, violated rule IDs) of every step that broke something

    def node(self, node_id: int):
        return self.state.nodes[node_id - 1]

    def apply(self, action) -> None:
        self.state, transition = self.cluster.apply(self.state, action)
        if transition is not None:
            target = action.envelope.destination if type(action) is Deliver else action.node
            self.transitions.append((target, transition))
        broken = tuple(v.rule for v in properties.violations(self.cluster, self.state))
        if broken:
            self.found.append((len(self.transitions), broken))

    def in_flight(self, source: int, destination: int, kind: type):
        for envelope in network.envelopes(self.state.network):
            if (envelope.source, envelope.destination, type(envelope.message)) == (source, destination, kind):
                return envelope
        raise AssertionError(f"no {kind.__name__} {source}->{destination} in flight")

    def deliver(self, source: int, destination: int, kind: type):
        envelope = self.in_flight(source, destination, kind)
        self.apply(Deliver(envelope=envelope))
        return self.transitions[-1][1]

    def drop_all(self) -> None:
        for envelope in network.envelopes(self.state.network):
            self.apply(Drop(envelope=envelope))
        assert self.state.network == network.EMPTY

    def pump(self, rounds: int) -> None:
        """Deliver everything in flight, round by round (fair: each round takes a snapshot)."""
        for _ in range(rounds):
            for envelope in network.envelopes(self.state.network):
                if envelope in network.envelopes(self.state.network):
                    self.apply(Deliver(envelope=envelope))

    def committed_outputs(self, node_id: int) -> list[int]:
        return [o.HighWatermark for n, t in self.transitions if n == node_id for o in t.outputs if type(o) is Committed]


def epoch_1(run: Run) -> None:
    """S1 is elected by everyone and LC1 is replicated to and committed on all five."""
    run.apply(Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    for voter in (2, 3, 4, 5):
        run.deliver(1, voter, VoteRequest)
    for voter in (2, 3, 4, 5):
        run.deliver(voter, 1, VoteResponse)
    assert run.node(1).role == Role.LEADER and run.node(1).log == (LC1,)
    for voter in (2, 3, 4, 5):
        run.deliver(1, voter, BeginQuorumEpochRequest)
    for _ in range(3):
        for voter in (2, 3, 4, 5):
            run.deliver(voter, 1, FetchRequest)
            run.deliver(1, voter, FetchResponse)
    run.drop_all()
    assert [(n.log, n.high_watermark) for n in run.state.nodes] == [((LC1,), 1)] * 5


def epoch_2(run: Run) -> None:
    """S1 resigns, wins epoch 2 with S2 and S3 and writes "2", which only S2 receives."""
    run.apply(ResignLeader(node=1))
    run.drop_all()
    run.apply(Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    for voter in (2, 3, 4, 5):
        run.deliver(1, voter, VoteRequest)
    run.deliver(2, 1, VoteResponse)
    run.deliver(3, 1, VoteResponse)
    assert (run.node(1).role, run.node(1).epoch, run.node(1).log) == (Role.LEADER, 2, (LC1, LC2))
    run.apply(Append(node=1, value=2))
    run.deliver(1, 2, BeginQuorumEpochRequest)
    run.deliver(2, 1, FetchRequest)
    run.deliver(1, 2, FetchResponse)
    run.deliver(2, 1, FetchRequest)
    run.drop_all()
    assert [n.log for n in run.state.nodes] == [(LC1, LC2, TWO)] * 2 + [(LC1,)] * 3
    assert run.node(1).high_watermark == 1


def epoch_3(run: Run) -> None:
    """S5 wins epoch 3 with S3 and S4 (S1 and S2 refuse) and writes "3" to its own log only."""
    run.apply(Fire(node=5, timer=TimerKind.ELECTION_TIMEOUT))
    for voter in (1, 2, 3, 4):
        run.deliver(5, voter, VoteRequest)
    assert run.in_flight(1, 5, VoteResponse).message.VoteGranted is False
    assert run.in_flight(2, 5, VoteResponse).message.VoteGranted is False
    run.deliver(3, 5, VoteResponse)
    run.deliver(4, 5, VoteResponse)
    assert (run.node(5).role, run.node(5).epoch) == (Role.LEADER, 3)
    run.apply(Append(node=5, value=3))
    run.drop_all()
    assert run.node(5).log == (LC1, LC3, THREE)
    assert [(n.role, n.epoch) for n in run.state.nodes[:2]] == [(Role.UNATTACHED, 3)] * 2


def epoch_4(run: Run) -> None:
    """S1 wins epoch 4 with S2 and S3 and brings S3 up to date: "2" is on S1, S2, S3."""
    run.apply(Fire(node=1, timer=TimerKind.ELECTION_TIMEOUT))
    for voter in (2, 3, 5):  # S5 learns epoch 4 and refuses; the request to S4 is lost
        run.deliver(1, voter, VoteRequest)
    run.apply(Drop(envelope=run.in_flight(1, 4, VoteRequest)))
    assert run.in_flight(5, 1, VoteResponse).message.VoteGranted is False
    run.deliver(2, 1, VoteResponse)
    run.deliver(3, 1, VoteResponse)
    assert (run.node(1).role, run.node(1).epoch, run.node(1).log) == (Role.LEADER, 4, (LC1, LC2, TWO, LC4))
    run.deliver(1, 3, BeginQuorumEpochRequest)
    run.deliver(3, 1, FetchRequest)  # FetchOffset 1: S3 has LC1 only
    run.deliver(1, 3, FetchResponse)
    run.deliver(3, 1, FetchRequest)  # FetchOffset 4: S3 has LC2, "2" and LC4 now
    run.deliver(1, 2, BeginQuorumEpochRequest)
    fetch = run.in_flight(2, 1, FetchRequest).message
    assert (fetch.FetchOffset, fetch.LastFetchedEpoch) == (3, 2)
    run.deliver(2, 1, FetchRequest)  # the leader now knows S1, S2 and S3 hold offsets 0..2
    run.drop_all()  # the answer to S2 (carrying LC4) is lost
    holders = [v for v in VOTERS if run.node(v).log[:3] == (LC1, LC2, TWO)]
    assert holders == [1, 2, 3]
    assert run.node(1).replica_offsets == (4, 3, 4, -1, -1)


def epoch_5(run: Run) -> None:
    """S5 wins epoch 5 with S2 and S4 (S1 and S3 refuse), then replicates its log to everyone."""
    run.apply(Fire(node=5, timer=TimerKind.ELECTION_TIMEOUT))
    for voter in (1, 2, 3, 4):
        run.deliver(5, voter, VoteRequest)
    granted = {v: run.in_flight(v, 5, VoteResponse).message.VoteGranted for v in (1, 2, 3, 4)}
    assert granted == {1: False, 2: True, 3: False, 4: True}
    run.deliver(2, 5, VoteResponse)
    run.deliver(4, 5, VoteResponse)
    assert (run.node(5).role, run.node(5).epoch, run.node(5).log) == (Role.LEADER, 5, (LC1, LC3, THREE, LC5))
    for voter in (1, 2, 3, 4):
        run.in_flight(5, voter, BeginQuorumEpochRequest)
    run.pump(12)


def figure8(profile: str) -> Run:
    run = Run(profile)
    for phase in (epoch_1, epoch_2, epoch_3, epoch_4, epoch_5):
        phase(run)
    return run


def test_figure8_leader_does_not_commit_an_earlier_epoch_record_on_a_majority():
    """HW-1: "2" of epoch 2 on a majority in epoch 4 is not committed until a record of epoch 4 is."""
    run = Run("kip595")
    for phase in (epoch_1, epoch_2, epoch_3, epoch_4):
        phase(run)
    assert run.found == []
    leader = run.node(1)
    assert (leader.role, leader.epoch, leader.log) == (Role.LEADER, 4, (LC1, LC2, TWO, LC4))
    assert leader.high_watermark == 1  # "2" (offset 2) needs a high watermark of 3
    # The fetch that put "2" on a majority cited HW-1 and emitted no Committed output.
    fetch_steps = [t for n, t in run.transitions if n == 1 and "FETCH-REQ-4" in t.rules]
    assert "HW-1" in fetch_steps[-1].rules
    assert not any(type(o) is Committed for o in fetch_steps[-1].outputs)
    assert all(hw <= 1 for hw in run.committed_outputs(1))
    assert run.state.history.committed == ((LC1, 1),)


def test_figure8_later_leader_truncates_the_uncommitted_record_safely():
    """HW-1 makes Figure 8 safe: S5 may win epoch 5 and truncate "2", and every SAFE-* property holds."""
    run = figure8("kip595")
    assert run.found == []
    assert run.state.history.elected == frozenset({(1, 1), (2, 1), (3, 5), (4, 1), (5, 5)})
    assert {(2, 5, 5), (4, 5, 5), (5, 5, 5)} <= run.state.history.votes
    assert {(1, 4, 1), (2, 4, 1), (3, 4, 1)} <= run.state.history.votes
    final = (LC1, LC3, THREE, LC5)
    assert [n.log for n in run.state.nodes] == [final] * 5
    assert [n.high_watermark for n in run.state.nodes] == [4] * 5
    assert run.state.history.committed == ((LC1, 1), (LC3, 5), (THREE, 5), (LC5, 5))
    assert all(record not in (LC2, TWO) for record, _ in run.state.history.committed)
    assert all(hw <= 1 for hw in run.committed_outputs(1))


def test_figure8_without_hw_1_commits_early_and_loses_a_committed_record():
    """Without HW-1 (faulty-hw-any-epoch) S1 commits "2" in epoch 4 and epoch 5 breaks SAFE-6, SAFE-9, SAFE-7."""
    run = Run("faulty-hw-any-epoch")
    for phase in (epoch_1, epoch_2, epoch_3, epoch_4):
        phase(run)
    assert run.found == []
    assert run.node(1).high_watermark == 3
    assert run.committed_outputs(1)[-1] == 3
    assert run.state.history.committed == ((LC1, 1), (LC2, 4), (TWO, 4))

    epoch_5(run)
    first_step, first = run.found[0]
    assert first == ("SAFE-6",)  # S5 leads epoch 5 without LC2 and "2", committed in epoch 4
    elected_at = next(i for i, (n, t) in enumerate(run.transitions, start=1) if n == 5 and t.state.role == Role.LEADER and t.state.epoch == 5)
    assert first_step == elected_at
    seen = [rules for _, rules in run.found]
    assert ("SAFE-6", "SAFE-9") in seen  # the truncations leave "2" on a minority of voters
    assert seen[-1] == ("SAFE-6", "SAFE-7", "SAFE-9")  # and S5 commits "3" at the offset of "2"
    assert all(set(rules) <= {"SAFE-6", "SAFE-7", "SAFE-9"} for rules in seen)
    details = {v.rule: v.detail for v in properties.violations(run.cluster, run.state)}
    assert details == {
        "SAFE-6": "leader 5 of epoch 5 lacks record 1 (epoch 2) committed in epoch 4",
        "SAFE-7": "two different records were committed at offset 1",
        # S1 knows "2" is committed (high watermark 3): told to truncate it, it shuts down instead (FETCH-RESP-2)
        "SAFE-9": "committed record at offset 1 (epoch 2) is on 1 voters, fewer than a majority",
    }
