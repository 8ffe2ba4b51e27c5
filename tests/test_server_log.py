"""Kafka's own log read into state transitions (conformance/cluster/server_log.py): one line of
each state's toString as the releases write them (3.6 and 3.7, 3.9, 4.3; shortened where a
state prints every voter), and a transition line no pattern reads, counted."""

import datetime

import pytest

from conformance.cluster.server_log import read

PREFIX = "2026-12-02T06:47:04.380+0000 [kafka-{node}-raft-io-thread] INFO org.apache.kafka.raft.QuorumState - [RaftManager id={node}] Completed transition to "


@pytest.mark.parametrize(
    "node, state, told",
    [
        # 3.6, 3.7
        (1, "Unattached(epoch=0, voters=[1, 2, 3], electionTimeoutMs=1069) from null", ("unattached", 0, -1, -1)),
        (1, "CandidateState(localId=1, epoch=1, retries=1, voteStates={1=GRANTED, 2=UNRECORDED, 3=UNRECORDED}, highWatermark=Optional.empty, electionTimeoutMs=1645) from Unattached(epoch=0, voters=[1, 2, 3], electionTimeoutMs=1069)", ("candidate", 1, -1, 1)),
        (1, "Leader(localId=1, epoch=1, epochStartOffset=0, highWatermark=Optional.empty, voterStates={1=ReplicaState(nodeId=1, endOffset=Optional.empty, lastFetchTimestamp=-1, lastCaughtUpTimestamp=-1, hasAcknowledgedLeader=true)}) from CandidateState(localId=1, epoch=1, retries=1)", ("leader", 1, 1, -1)),
        (2, "Voted(epoch=3, votedId=3, voters=[1, 2, 3], electionTimeoutMs=1523) from FollowerState(fetchTimeoutMs=2000, epoch=1, leaderId=1, voters=[1, 2, 3])", ("voted", 3, -1, 3)),
        (2, "FollowerState(fetchTimeoutMs=2000, epoch=1, leaderId=1, voters=[1, 2, 3], highWatermark=Optional.empty, fetchingSnapshot=Optional.empty) from Voted(epoch=1, votedId=1, voters=[1, 2, 3], electionTimeoutMs=1664)", ("follower", 1, 1, -1)),
        (2, "ResignedState(localId=2, epoch=1, voters=[1, 2, 3], electionTimeoutMs=1060, unackedVoters=[1, 3], preferredSuccessors=[1, 3]) from Leader(localId=2, epoch=1)", ("resigned", 1, 2, -1)),
        # 3.9
        (4, "Unattached(epoch=4, votedKey=ReplicaKey(id=3, directoryId=Optional[vKNV9K-WdlX3heNuqN7WF]), voters=[1, 2, 3, 4, 5], electionTimeoutMs=1032, highWatermark=Optional.empty) from Unattached(epoch=4, votedKey=null)", ("unattached", 4, -1, 3)),
        (1, "CandidateState(localId=1, localDirectoryId=eneeFaZ6bdceGqcXU3txpw,epoch=2, retries=1, voteStates={1=org.apache.kafka.raft.CandidateState$VoterState@4be527a}, highWatermark=Optional.empty, electionTimeoutMs=1700) from Unattached(epoch=1, votedKey=null)", ("candidate", 2, -1, 1)),
        (1, "Leader(localReplicaKey=ReplicaKey(id=1, directoryId=Optional[eneeFaZ6bdceGqcXU3txpw]), epoch=2, epochStartOffset=0, highWatermark=Optional.empty) from CandidateState(localId=1, epoch=2)", ("leader", 2, 1, -1)),
        (3, "FollowerState(fetchTimeoutMs=2000, epoch=7, leader=5, leaderEndpoints=Endpoints(endpoints={ListenerName(CONTROLLER)=127.0.0.1/<unresolved>:38019}), voters=[1, 2, 3, 4, 5], highWatermark=Optional[LogOffsetMetadata(offset=73, metadata=Optional[(segmentBaseOffset=0,relativePositionInSegment=6677)])], fetchingSnapshot=Optional.empty) from Unattached(epoch=7, votedKey=null)", ("follower", 7, 5, -1)),
        # 4.3
        (2, "UnattachedState(epoch=0, leaderId=OptionalInt.empty, votedKey=Optional.empty, voters=[1, 2, 3], electionTimeoutMs=1548, highWatermark=Optional.empty) from null", ("unattached", 0, -1, -1)),
        (1, "ProspectiveState(epoch=1, leaderId=OptionalInt[3], votedKey=Optional[ReplicaKey(id=3, directoryId=<undefined>)], epochElection=EpochElection[voterStates={1=VoterState(replicaKey=ReplicaKey(id=1, directoryId=<undefined>), state=GRANTED)}], electionTimeoutMs=1203) from FollowerState(epoch=1, leader=3)", ("prospective", 1, 3, 3)),
        (2, "FollowerState(fetchTimeoutMs=2000, epoch=1, leader=3, leaderEndpoints=Endpoints(endpoints={ListenerName(CONTROLLER)=127.0.0.1/<unresolved>:59099}), votedKey=Optional[ReplicaKey(id=3, directoryId=bb4w9ijOVXqOb2Kd7RfrXA)], voters=[1, 2, 3], highWatermark=Optional.empty, fetchingSnapshot=Optional.empty) from UnattachedState(epoch=1)", ("follower", 1, 3, 3)),
        (1, "Leader(localVoterNode=VoterNode(voterKey=ReplicaKey(id=1, directoryId=pvuT8oKfi6nWhSpdtrJ4AQ), listeners=Endpoints(endpoints={ListenerName(CONTROLLER)=127.0.0.1/<unresolved>:41773}), supportedKRaftVersion=SupportedVersionRange[min_version:0, max_version:1]), epoch=2, epochStartOffset=18, highWatermark=Optional.empty) from CandidateState(localId=1, epoch=2)", ("leader", 2, 1, -1)),
    ],
)
def test_each_release_s_states_are_read(node, state, told):
    log = read(PREFIX.format(node=node) + state + "\n")
    assert log.unreadable == ()
    [transition] = log.transitions
    assert (transition.role, transition.epoch, transition.leader, transition.voted) == told
    assert transition.node == node
    assert transition.wall == datetime.datetime(2026, 12, 2, 6, 47, 4, 380000, tzinfo=datetime.timezone.utc).timestamp()


def test_other_lines_are_skipped_and_unknown_transitions_counted():
    lines = [
        "2026-12-02T06:47:04.380+0000 [main] INFO org.apache.kafka.raft.KafkaRaftClient - [RaftManager id=1] Reading KRaft snapshot and log as part of the initialization",
        PREFIX.format(node=1) + "MysteryState(epoch=3) from null",
        PREFIX.format(node=1) + "Voted(votedId=3) from null",  # no epoch
        PREFIX.format(node=1) + "Unattached(epoch=5, voters=[1, 2, 3]) from null",
    ]
    log = read("\n".join(lines))
    assert [(t.role, t.epoch) for t in log.transitions] == [("unattached", 5)]
    assert log.unreadable == tuple(lines[1:3])
