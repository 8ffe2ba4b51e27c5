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

import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.function.Consumer;

/**
 * KafkaRaftClient's API as Kafka 3.9 changed it with KIP-853 (dynamic voters), for Kafka 3.9 on:
 * the messages other nodes send carry replica keys and the leader's endpoints (RaftUtil's
 * builders), an inbound request names its listener and version (RaftRequest.Inbound), an append
 * is prepared and then scheduled (KafkaRaftClient.prepareAppend), LogOffsetMetadata.offset() is a
 * method, a voter that granted a vote is unattached (QuorumState.isUnattachedAndVoted), and every
 * leader has the check-quorum timer. The build picks this source directory or src/api-3.3
 * (property kraftcheck.api); both have the same methods but endpoints, which src/client-3.9 uses.
 */
final class Api {
    private Api() {
    }

    /** Where a node is reached on MockNetworkChannel's listener; none for no node (-1). */
    static Endpoints endpoints(int id) {
        return id < 0 ? Endpoints.empty() : Endpoints.fromInetSocketAddresses(Map.of(MockNetworkChannel.LISTENER_NAME, Messages.address(id)));
    }

    private static ReplicaKey replica(int id) {
        return ReplicaKey.of(id, ReplicaKey.NO_DIRECTORY_ID);
    }

    static RaftRequest.Inbound inboundRequest(int correlationId, ApiMessage data, long createdTimeMs) {
        return new RaftRequest.Inbound(MockNetworkChannel.LISTENER_NAME, correlationId, Messages.version(data), data, createdTimeMs);
    }

    static BeginQuorumEpochRequestData beginQuorumEpochRequest(String clusterId, int epoch, int leaderId, int voterId) {
        return RaftUtil.singletonBeginQuorumEpochRequest(Messages.PARTITION, clusterId, epoch, leaderId, endpoints(leaderId), replica(voterId));
    }

    static EndQuorumEpochRequestData endQuorumEpochRequest(String clusterId, int epoch, int leaderId, List<Integer> preferredSuccessors) {
        return RaftUtil.singletonEndQuorumEpochRequest(Messages.PARTITION, clusterId, epoch, leaderId, preferredSuccessors.stream().map(Api::replica).toList());
    }

    /** An EndQuorumEpoch's successors as they cross at v1: PreferredCandidates (v0's PreferredSuccessors is not written). */
    static List<Integer> preferredSuccessors(EndQuorumEpochRequestData.PartitionData partition) {
        return partition.preferredCandidates().stream().map(EndQuorumEpochRequestData.ReplicaInfo::candidateId).toList();
    }

    /** The Fetch as replicaId sends it: its id in the Fetch's ReplicaState (KIP-903). */
    static FetchRequestData fetchFrom(int replicaId, FetchRequestData fetch) {
        return fetch.setReplicaState(new FetchRequestData.ReplicaState().setReplicaId(replicaId));
    }

    static DescribeQuorumRequestData describeQuorumRequest() {
        return RaftUtil.singletonDescribeQuorumRequest(Messages.PARTITION);
    }

    static VoteResponseData voteResponse(Errors error, Errors partitionError, int epoch, int leaderId, boolean voteGranted) {
        return RaftUtil.singletonVoteResponse(MockNetworkChannel.LISTENER_NAME, Messages.version(new VoteResponseData()), error, Messages.PARTITION, partitionError,
            epoch, leaderId, voteGranted, endpoints(leaderId));
    }

    static BeginQuorumEpochResponseData beginQuorumEpochResponse(Errors error, Errors partitionError, int epoch, int leaderId) {
        return RaftUtil.singletonBeginQuorumEpochResponse(MockNetworkChannel.LISTENER_NAME, Messages.version(new BeginQuorumEpochResponseData()), error,
            Messages.PARTITION, partitionError, epoch, leaderId, endpoints(leaderId));
    }

    static EndQuorumEpochResponseData endQuorumEpochResponse(Errors error, Errors partitionError, int epoch, int leaderId) {
        return RaftUtil.singletonEndQuorumEpochResponse(MockNetworkChannel.LISTENER_NAME, Messages.version(new EndQuorumEpochResponseData()), error,
            Messages.PARTITION, partitionError, epoch, leaderId, endpoints(leaderId));
    }

    static FetchResponseData fetchResponse(Errors error, int leaderId, Consumer<FetchResponseData.PartitionData> partition) {
        return RaftUtil.singletonFetchResponse(MockNetworkChannel.LISTENER_NAME, Messages.version(new FetchResponseData()), Messages.PARTITION,
            Messages.TOPIC_ID, error, leaderId, endpoints(leaderId), partition);
    }

    /** A client append of one value at the leader's epoch: the offset it was given. */
    static long append(KafkaRaftClient<Integer> client, int value) {
        long offset = client.prepareAppend(client.quorum().epoch(), List.of(value));
        client.schedulePreparedAppend();
        return offset;
    }

    static long offset(LogOffsetMetadata metadata) {
        return metadata.offset();
    }

    /** Whether the node voted in its epoch and knows no leader: kraftcheck's role "voted". */
    static boolean isVoted(QuorumState quorum) {
        return quorum.isUnattachedAndVoted();
    }

    /** Time until the leader's check-quorum timer fires (it resigns unless a majority fetched). */
    static OptionalLong checkQuorumMs(LeaderState<?> leader, long now) {
        return OptionalLong.of(leader.timeUntilCheckQuorumExpires(now));
    }
}
