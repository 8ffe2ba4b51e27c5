package org.apache.kafka.raft;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.message.VoteRequestData;
import org.apache.kafka.common.requests.VoteRequest;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * What differs in elections between the Kafka releases the adapter builds against, for Kafka 3.3
 * to 3.8, before KIP-853: a voter that granted a vote has an election timer of its own state
 * (VotedState, which 3.9 folded into UnattachedState), a Vote request is kafka-clients'
 * (VoteRequest.singletonRequest: no replica keys, no pre-vote), a candidate backs off after a lost
 * election. The build picks this source directory, src/kafka-3.9 or src/kafka-4 (property
 * kraftcheck.release); all have these methods (the other two also have kraftVersions and
 * initialize, for src/client-3.9).
 */
final class Release {
    private Release() {
    }

    /** A Vote request; Kafka before 4.0 predates pre-votes (KIP-996), so it cannot be sent one. */
    static VoteRequestData voteRequest(TopicPartition partition, String clusterId, int epoch, int candidateId, int voterId, int lastOffsetEpoch, long lastOffset, boolean preVote) {
        if (preVote) {
            throw new Unsupported("a pre-vote (a Vote request with PreVote true, KIP-996), which Kafka " + AppInfoParser.getVersion() + " predates");
        }
        return VoteRequest.singletonRequest(partition, clusterId, epoch, candidateId, lastOffsetEpoch, lastOffset);
    }

    /** Candidate epoch, candidate id, last offset epoch, last offset and whether it is a pre-vote (never, before 4.0). */
    static long[] voteFields(VoteRequestData.PartitionData partition) {
        return new long[] {partition.candidateEpoch(), partition.candidateId(), partition.lastOffsetEpoch(), partition.lastOffset(), 0};
    }

    /** The role kraftcheck's observe names for a state only this release has, or null: 3.3 to 3.8 have none. */
    static String releaseRole(QuorumState quorum) {
        return null;
    }

    /** Whether the node is a candidate backing off after a lost election, waiting to stand again (3.x; 4.x has no such backoff). */
    static boolean candidateBackingOff(QuorumState quorum) {
        return quorum.isCandidate() && quorum.candidateStateOrThrow().isBackingOff();
    }

    /** Time until the election timer fires in the node's current state, or -1 if it has none. */
    static long electionTimerMs(QuorumState quorum, long now) {
        if (quorum.isUnattached()) {
            return quorum.unattachedStateOrThrow().remainingElectionTimeMs(now);
        } else if (quorum.isVoted()) {
            return quorum.votedStateOrThrow().remainingElectionTimeMs(now);
        } else if (quorum.isCandidate()) {
            CandidateState candidate = quorum.candidateStateOrThrow();
            return candidate.isBackingOff() ? candidate.remainingBackoffMs(now) : candidate.remainingElectionTimeMs(now);
        } else if (quorum.isResigned()) {
            return quorum.resignedStateOrThrow().remainingElectionTimeMs(now);
        }
        return -1;
    }
}
