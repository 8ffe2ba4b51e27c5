package org.apache.kafka.raft;

import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.common.utils.LogContext;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What carries messages to and from the client, for Kafka 3.3 to 4.3: Kafka's own mocks,
 * MockNetworkChannel (sends wait to be drained, responses are received) and MockMessageQueue, and
 * a request's answer in its `completion`. The build picks this source directory or src/io-4.4
 * (property kraftcheck.io); both have the same methods.
 */
final class NodeIo {
    private final MockNetworkChannel channel;
    private final MockMessageQueue queue = new MockMessageQueue();

    NodeIo(AtomicInteger correlationIds, List<Integer> voters) {
        channel = Client.newChannel(correlationIds, voters);
    }

    NetworkChannel channel() {
        return channel;
    }

    RaftMessageQueue queue() {
        return queue;
    }

    /** Whether a message waits for the client's next poll. */
    boolean hasQueued() {
        return !queue.isEmpty();
    }

    /** The requests the client has sent since the last call, in order. */
    List<RaftRequest.Outbound> drainSent() {
        return channel.drainSendQueue();
    }

    /** A response to one of the client's requests, for its next poll. */
    void receive(RaftResponse.Inbound response) {
        channel.mockReceive(response);
    }

    /** Hands a request to the client; its answer completes the future, when the client gives one. */
    static CompletableFuture<RaftResponse.Outbound> handle(KafkaRaftClient<Integer> client, RaftRequest.Inbound request) {
        client.handle(request);
        return request.completion;
    }

    static LogContext logContext(String prefix) {
        return new LogContext(prefix);
    }

    static String kafkaVersion() {
        return AppInfoParser.getVersion();
    }
}
