package org.apache.kafka.raft;

import org.apache.kafka.common.Node;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.raft.generated.QuorumStateData;
import org.apache.kafka.raft.internals.BatchMemoryPool;
import org.apache.kafka.server.common.KRaftVersion;

import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * How the adapter builds a KafkaRaftClient on Kafka's mocks, for Kafka 3.9 on (KIP-853): the
 * constructor takes the node's directory id, its listeners and the kraft.version range, the
 * static voters go to initialize (Release.initialize: its arguments changed in 4.0), the
 * quorum-state file is written with a KRaftVersion; as from 3.8, requests name their
 * destination and responses their source as a Node, and a batch's compression is a Compression.
 * The build picks this source directory, src/client-3.8 or src/client-3.3 (property
 * kraftcheck.client); all have the same methods.
 */
final class Client {
    /** How the client is set up, for the reports: its quorum-state file carries the kraft.version. */
    static final String SETUP = "static voters, kraft.version 0";
    static final Compression NO_COMPRESSION = Compression.NONE;

    private Client() {
    }

    static MockNetworkChannel newChannel(AtomicInteger correlationIds, List<Integer> voters) {
        return new MockNetworkChannel(correlationIds);
    }

    /** The client built with its full constructor and initialized with the static voters. */
    static KafkaRaftClient<Integer> newClient(int nodeId, String clusterId, Map<Integer, InetSocketAddress> voters, Timeouts timeouts, NodeIo io,
                                              MockLog log, MockQuorumStateStore store, MockTime time, ExpirationService expirations, Random random,
                                              String logPrefix) {
        KafkaRaftClient<Integer> client = new KafkaRaftClient<>(
            OptionalInt.of(nodeId),
            new Uuid(0L, nodeId + 1L),
            new IntegerSerde(),
            io.channel(),
            io.queue(),
            log,
            new BatchMemoryPool(2, KafkaRaftClient.MAX_BATCH_SIZE_BYTES),
            time,
            expirations,
            Timeouts.FETCH_MAX_WAIT_MS,
            true,
            clusterId,
            List.of(),
            Api.endpoints(nodeId),
            Release.kraftVersions(),
            NodeIo.logContext(logPrefix),
            random,
            quorumConfig(timeouts)
        );
        Release.initialize(client, voters, store, new Metrics(time));
        return client;
    }

    private static QuorumConfig quorumConfig(Timeouts timeouts) {
        Map<String, Object> config = new HashMap<>();
        config.put(QuorumConfig.QUORUM_REQUEST_TIMEOUT_MS_CONFIG, timeouts.requestMs());
        config.put(QuorumConfig.QUORUM_RETRY_BACKOFF_MS_CONFIG, timeouts.retryBackoffMs());
        config.put(QuorumConfig.QUORUM_ELECTION_TIMEOUT_MS_CONFIG, timeouts.electionMs());
        config.put(QuorumConfig.QUORUM_ELECTION_BACKOFF_MAX_MS_CONFIG, timeouts.electionBackoffMaxMs());
        config.put(QuorumConfig.QUORUM_FETCH_TIMEOUT_MS_CONFIG, timeouts.fetchMs());
        config.put(QuorumConfig.QUORUM_LINGER_MS_CONFIG, 0);
        return new QuorumConfig(new AbstractConfig(QuorumConfig.CONFIG_DEF, config));
    }

    static int destination(RaftRequest.Outbound request) {
        return request.destination().id();
    }

    static RaftResponse.Inbound inboundResponse(int correlationId, ApiMessage data, int source) {
        InetSocketAddress address = Messages.address(source);
        return new RaftResponse.Inbound(correlationId, data, new Node(source, address.getHostString(), address.getPort()));
    }

    static void writeElection(MockQuorumStateStore store, Election election, List<Integer> voters) {
        QuorumStateData data = new QuorumStateData()
            .setLeaderEpoch(election.epoch())
            .setLeaderId(election.leaderId())
            .setVotedId(election.votedId())
            .setCurrentVoters(voters.stream().map(id -> new QuorumStateData.Voter().setVoterId(id)).toList());
        store.writeElectionState(ElectionState.fromQuorumStateData(data), KRaftVersion.KRAFT_VERSION_0);
    }

    static Optional<Election> readElection(MockQuorumStateStore store) {
        return store.readElectionState().map(election ->
            new Election(election.epoch(), election.optionalLeaderId().orElse(-1), election.optionalVotedKey().map(ReplicaKey::id).orElse(-1)));
    }
}
