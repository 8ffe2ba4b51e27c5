package org.apache.kafka.raft;

import org.apache.kafka.common.message.BeginQuorumEpochRequestData;
import org.apache.kafka.common.message.BeginQuorumEpochResponseData;
import org.apache.kafka.common.message.DescribeQuorumRequestData;
import org.apache.kafka.common.message.EndQuorumEpochRequestData;
import org.apache.kafka.common.message.EndQuorumEpochResponseData;
import org.apache.kafka.common.message.FetchRequestData;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.VoteResponseData;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.BeginQuorumEpochRequest;
import org.apache.kafka.common.requests.BeginQuorumEpochResponse;
import org.apache.kafka.common.requests.DescribeQuorumRequest;
import org.apache.kafka.common.requests.EndQuorumEpochRequest;
import org.apache.kafka.common.requests.EndQuorumEpochResponse;
import org.apache.kafka.common.requests.VoteResponse;

import java.lang.reflect.Method;
import java.util.List;
import java.util.OptionalLong;
import java.util.function.Consumer;

/**
 * KafkaRaftClient's API before Kafka 3.9's KIP-853 (dynamic voters), for Kafka 3.3 to 3.8: the
 * messages other nodes send are built with kafka-clients' singleton builders (VoteResponse,
 * BeginQuorumEpochRequest, ...) and RaftUtil's Fetch builders, with neither replica keys nor
 * endpoints; RaftRequest.Inbound has no listener or version; KafkaRaftClient.scheduleAppend
 * appends at once; LogOffsetMetadata.offset is a field; a voter that granted a vote is in
 * VotedState (QuorumState.isVoted); and only 3.7 and 3.8 have the leader's check-quorum timer
 * (KAFKA-15489). The build picks this source directory or src/api-3.9 (property kraftcheck.api).
 */
final class Api {
    private Api() {
    }

    static RaftRequest.Inbound inboundRequest(int correlationId, ApiMessage data, long createdTimeMs) {
        return new RaftRequest.Inbound(correlationId, data, createdTimeMs);
    }

    static BeginQuorumEpochRequestData beginQuorumEpochRequest(String clusterId, int epoch, int leaderId, int voterId) {
        return BeginQuorumEpochRequest.singletonRequest(Messages.PARTITION, clusterId, epoch, leaderId);
    }

    static EndQuorumEpochRequestData endQuorumEpochRequest(String clusterId, int epoch, int leaderId, List<Integer> preferredSuccessors) {
        return EndQuorumEpochRequest.singletonRequest(Messages.PARTITION, clusterId, epoch, leaderId, preferredSuccessors);
    }

    /** An EndQuorumEpoch's successors as they cross at v0: PreferredSuccessors. */
    static List<Integer> preferredSuccessors(EndQuorumEpochRequestData.PartitionData partition) {
        return partition.preferredSuccessors();
    }

    // KIP-903 (Kafka 3.5, Fetch v15) moved a Fetch's replica id into its ReplicaState; 3.3 and 3.4
    // have only the top-level ReplicaId. ReplicaState is looked up, not compiled against (null before 3.5).
    private static final Class<?> REPLICA_STATE = replicaStateClass();

    private static Class<?> replicaStateClass() {
        try {
            return Class.forName(FetchRequestData.class.getName() + "$ReplicaState");
        } catch (ClassNotFoundException absent) {
            return null;
        }
    }

    /** The Fetch as replicaId sends it: its id in the Fetch's ReplicaState from 3.5 on, at the top level before. */
    static FetchRequestData fetchFrom(int replicaId, FetchRequestData fetch) {
        if (REPLICA_STATE == null) {
            return fetch.setReplicaId(replicaId);
        }
        try {
            Object state = REPLICA_STATE.getConstructor().newInstance();
            REPLICA_STATE.getMethod("setReplicaId", int.class).invoke(state, replicaId);
            return (FetchRequestData) FetchRequestData.class.getMethod("setReplicaState", REPLICA_STATE).invoke(fetch, state);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("FetchRequestData.ReplicaState", e);
        }
    }

    static DescribeQuorumRequestData describeQuorumRequest() {
        return DescribeQuorumRequest.singletonRequest(Messages.PARTITION);
    }

    static VoteResponseData voteResponse(Errors error, Errors partitionError, int epoch, int leaderId, boolean voteGranted) {
        return VoteResponse.singletonResponse(error, Messages.PARTITION, partitionError, epoch, leaderId, voteGranted);
    }

    static BeginQuorumEpochResponseData beginQuorumEpochResponse(Errors error, Errors partitionError, int epoch, int leaderId) {
        return BeginQuorumEpochResponse.singletonResponse(error, Messages.PARTITION, partitionError, epoch, leaderId);
    }

    static EndQuorumEpochResponseData endQuorumEpochResponse(Errors error, Errors partitionError, int epoch, int leaderId) {
        return EndQuorumEpochResponse.singletonResponse(error, Messages.PARTITION, partitionError, epoch, leaderId);
    }

    static FetchResponseData fetchResponse(Errors error, int leaderId, Consumer<FetchResponseData.PartitionData> partition) {
        return RaftUtil.singletonFetchResponse(Messages.PARTITION, Messages.TOPIC_ID, error, partition);
    }

    /** A client append of one value at the leader's epoch: the offset it was given. */
    static long append(KafkaRaftClient<Integer> client, int value) {
        return client.scheduleAppend(client.quorum().epoch(), List.of(value));
    }

    static long offset(LogOffsetMetadata metadata) {
        return metadata.offset;
    }

    /** Whether the node voted in its epoch and knows no leader: kraftcheck's role "voted". */
    static boolean isVoted(QuorumState quorum) {
        return quorum.isVoted();
    }

    // Check-quorum came in 3.7 (KAFKA-15489): 3.3 to 3.6 have no such timer, so the method is
    // looked up, not compiled against (null before 3.7).
    private static final Method TIME_UNTIL_CHECK_QUORUM_EXPIRES = checkQuorumMethod();

    private static Method checkQuorumMethod() {
        try {
            return LeaderState.class.getMethod("timeUntilCheckQuorumExpires", long.class);
        } catch (NoSuchMethodException absent) {
            return null;
        }
    }

    /** Time until the leader's check-quorum timer fires (it resigns unless a majority fetched), or none: 3.6 and older have no such timer. */
    static OptionalLong checkQuorumMs(LeaderState<?> leader, long now) {
        if (TIME_UNTIL_CHECK_QUORUM_EXPIRES == null) {
            return OptionalLong.empty();
        }
        try {
            return OptionalLong.of((long) TIME_UNTIL_CHECK_QUORUM_EXPIRES.invoke(leader, now));
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("LeaderState.timeUntilCheckQuorumExpires", e);
        }
    }
}
