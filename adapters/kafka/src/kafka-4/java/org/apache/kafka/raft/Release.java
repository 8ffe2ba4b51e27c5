package org.apache.kafka.raft;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.feature.SupportedVersionRange;
import org.apache.kafka.common.message.VoteRequestData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.server.common.Feature;

import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.util.Map;

/**
 * What differs in elections between the Kafka releases the adapter builds against, for Kafka 4.x:
 * KafkaRaftClient.initialize's arguments, the Vote request's field names and pre-vote (KIP-996),
 * the prospective state, and in 4.0 only a candidate's backoff. The build picks this source
 * directory, src/kafka-3.9 or src/kafka-3.3 (property kraftcheck.release); all have the same
 * methods but kraftVersions and initialize, which only src/client-3.9 uses.
 */
final class Release {
    private Release() {
    }

    static SupportedVersionRange kraftVersions() {
        return Feature.KRAFT_VERSION.supportedVersionRange();
    }

    static void initialize(KafkaRaftClient<Integer> client, Map<Integer, InetSocketAddress> voters, QuorumStateStore store, Metrics metrics) {
        client.initialize(voters, store, metrics, ignoredStaticVoters -> { });
    }

    static VoteRequestData voteRequest(TopicPartition partition, String clusterId, int epoch, int candidateId, int voterId, int lastOffsetEpoch, long lastOffset, boolean preVote) {
        return RaftUtil.singletonVoteRequest(partition, clusterId, epoch, ReplicaKey.of(candidateId, ReplicaKey.NO_DIRECTORY_ID),
            ReplicaKey.of(voterId, ReplicaKey.NO_DIRECTORY_ID), lastOffsetEpoch, lastOffset, preVote);
    }

    /** Candidate epoch, candidate id, last offset epoch, last offset and whether it is a pre-vote. */
    static long[] voteFields(VoteRequestData.PartitionData partition) {
        return new long[] {partition.replicaEpoch(), partition.replicaId(), partition.lastOffsetEpoch(), partition.lastOffset(), partition.preVote() ? 1 : 0};
    }

    /** The role kraftcheck's observe names for a state only this release has, or null. */
    static String releaseRole(QuorumState quorum) {
        return quorum.isProspective() ? "prospective" : null;
    }

    // A 4.0 candidate that lost backs off before it becomes prospective; 4.1 removed the backoff and
    // these methods, so they are looked up, not compiled against (null from 4.1 on).
    private static final Method IS_BACKING_OFF = candidateMethod("isBackingOff");
    private static final Method REMAINING_BACKOFF_MS = candidateMethod("remainingBackoffMs", long.class);

    private static Method candidateMethod(String name, Class<?>... parameters) {
        try {
            return CandidateState.class.getMethod(name, parameters);
        } catch (NoSuchMethodException absent) {
            return null;
        }
    }

    private static Object call(Method method, CandidateState candidate, Object... arguments) {
        try {
            return method.invoke(candidate, arguments);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("CandidateState." + method.getName(), e);
        }
    }

    /** Whether the node is a candidate backing off after a lost election, waiting to become prospective (4.0 only). */
    static boolean candidateBackingOff(QuorumState quorum) {
        return IS_BACKING_OFF != null && quorum.isCandidate() && (boolean) call(IS_BACKING_OFF, quorum.candidateStateOrThrow());
    }

    /** Time until the election timer fires in the node's current state, or -1 if it has none. */
    static long electionTimerMs(QuorumState quorum, long now) {
        if (quorum.isUnattached()) {
            return quorum.unattachedStateOrThrow().remainingElectionTimeMs(now);
        } else if (quorum.isProspective()) {
            return quorum.prospectiveStateOrThrow().remainingElectionTimeMs(now);
        } else if (candidateBackingOff(quorum)) {
            return (long) call(REMAINING_BACKOFF_MS, quorum.candidateStateOrThrow(), now);
        } else if (quorum.isCandidate()) {
            return quorum.candidateStateOrThrow().remainingElectionTimeMs(now);
        } else if (quorum.isResigned()) {
            return quorum.resignedStateOrThrow().remainingElectionTimeMs(now);
        }
        return -1;
    }
}
