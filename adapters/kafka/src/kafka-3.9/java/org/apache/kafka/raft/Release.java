package org.apache.kafka.raft;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.feature.SupportedVersionRange;
import org.apache.kafka.common.message.VoteRequestData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.server.common.Features;

import java.net.InetSocketAddress;
import java.util.Map;

/**
 * What differs in elections between the Kafka releases the adapter builds against, for Kafka
 * 3.9.x: the feature class, KafkaRaftClient.initialize's arguments, the Vote request's field
 * names (no pre-vote yet), a candidate's backoff after a lost election. The build picks this
 * source directory, src/kafka-4 or src/kafka-3.3 (property kraftcheck.release); all have the
 * same methods but kraftVersions and initialize, which only src/client-3.9 uses.
 */
final class Release {
    private Release() {
    }

    static SupportedVersionRange kraftVersions() {
        return Features.KRAFT_VERSION.supportedVersionRange();
    }

    static void initialize(KafkaRaftClient<Integer> client, Map<Integer, InetSocketAddress> voters, QuorumStateStore store, Metrics metrics) {
        client.initialize(voters, store, metrics);
    }

    /** A Vote request; Kafka 3.9 predates pre-votes (KIP-996), so it cannot be sent one. */
    static VoteRequestData voteRequest(TopicPartition partition, String clusterId, int epoch, int candidateId, int voterId, int lastOffsetEpoch, long lastOffset, boolean preVote) {
        if (preVote) {
            throw new Unsupported("a pre-vote (a Vote request with PreVote true, KIP-996), which Kafka 3.9 predates");
        }
        return RaftUtil.singletonVoteRequest(partition, clusterId, epoch, ReplicaKey.of(candidateId, ReplicaKey.NO_DIRECTORY_ID),
            ReplicaKey.of(voterId, ReplicaKey.NO_DIRECTORY_ID), lastOffsetEpoch, lastOffset);
    }

    /** Candidate epoch, candidate id, last offset epoch, last offset and whether it is a pre-vote (never, before 4.0). */
    static long[] voteFields(VoteRequestData.PartitionData partition) {
        return new long[] {partition.candidateEpoch(), partition.candidateId(), partition.lastOffsetEpoch(), partition.lastOffset(), 0};
    }

    /** The role kraftcheck's observe names for a state only this release has, or null: 3.9 has none. */
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
        } else if (quorum.isCandidate()) {
            CandidateState candidate = quorum.candidateStateOrThrow();
            return candidate.isBackingOff() ? candidate.remainingBackoffMs(now) : candidate.remainingElectionTimeMs(now);
        } else if (quorum.isResigned()) {
            return quorum.resignedStateOrThrow().remainingElectionTimeMs(now);
        }
        return -1;
    }
}
