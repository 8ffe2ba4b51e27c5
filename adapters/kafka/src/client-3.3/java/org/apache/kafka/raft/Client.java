package org.apache.kafka.raft;

import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.raft.internals.BatchMemoryPool;

import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * How the adapter builds a KafkaRaftClient on Kafka's mocks, for Kafka 3.3 to 3.7, before
 * KIP-853: the constructor takes the quorum-state store and the metrics, and a RaftConfig that
 * carries the static voters beside the timeouts; initialize takes nothing. The quorum-state
 * store keeps an ElectionState of ids (MockQuorumStateStore); MockNetworkChannel must be told
 * the ids it may send to; requests name their destination and responses their source by id; a
 * batch's compression is a CompressionType. The build picks this source directory,
 * src/client-3.8 or src/client-3.9 (property kraftcheck.client); all have the same methods.
 */
final class Client {
    /** How the client is set up, for the reports: there is no kraft.version before 3.8. */
    static final String SETUP = "static voters";
    static final CompressionType NO_COMPRESSION = CompressionType.NONE;

    private Client() {
    }

    static MockNetworkChannel newChannel(AtomicInteger correlationIds, List<Integer> voters) {
        return new MockNetworkChannel(correlationIds, Set.copyOf(voters));
    }

    /** The client built with its full constructor and initialized; RaftConfig names the static voters. */
    static KafkaRaftClient<Integer> newClient(int nodeId, String clusterId, Map<Integer, InetSocketAddress> voters, Timeouts timeouts, NodeIo io,
                                              MockLog log, MockQuorumStateStore store, MockTime time, ExpirationService expirations, Random random,
                                              String logPrefix) {
        Map<Integer, RaftConfig.AddressSpec> addresses = new HashMap<>();
        voters.forEach((id, address) -> addresses.put(id, new RaftConfig.InetAddressSpec(address)));
        RaftConfig config = new RaftConfig(addresses, timeouts.requestMs(), timeouts.retryBackoffMs(), timeouts.electionMs(),
            timeouts.electionBackoffMaxMs(), timeouts.fetchMs(), 0);
        KafkaRaftClient<Integer> client = new KafkaRaftClient<>(
            new IntegerSerde(),
            io.channel(),
            io.queue(),
            log,
            store,
            new BatchMemoryPool(2, KafkaRaftClient.MAX_BATCH_SIZE_BYTES),
            time,
            new Metrics(time),
            expirations,
            Timeouts.FETCH_MAX_WAIT_MS,
            clusterId,
            OptionalInt.of(nodeId),
            NodeIo.logContext(logPrefix),
            random,
            config
        );
        client.initialize();
        return client;
    }

    static int destination(RaftRequest.Outbound request) {
        return request.destinationId();
    }

    static RaftResponse.Inbound inboundResponse(int correlationId, ApiMessage data, int source) {
        return new RaftResponse.Inbound(correlationId, data, source);
    }

    static void writeElection(MockQuorumStateStore store, Election election, List<Integer> voters) {
        store.writeElectionState(new ElectionState(election.epoch(), optional(election.leaderId()), optional(election.votedId()), Set.copyOf(voters)));
    }

    private static OptionalInt optional(int id) {
        return id < 0 ? OptionalInt.empty() : OptionalInt.of(id);
    }

    static Optional<Election> readElection(MockQuorumStateStore store) {
        return Optional.ofNullable(store.readElectionState()).map(election ->
            new Election(election.epoch, election.leaderIdOpt.orElse(-1), election.votedIdOpt.orElse(-1)));
    }
}
