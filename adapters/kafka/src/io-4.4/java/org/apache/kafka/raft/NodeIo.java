package org.apache.kafka.raft;

import org.apache.kafka.common.network.ListenerName;
import org.apache.kafka.common.utils.internals.AppInfoParser;
import org.apache.kafka.common.utils.internals.LogContext;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What carries messages to and from the client, for Kafka 4.4 on, where every message is answered
 * through a future: NetworkChannel.send returns the response to come, RaftMessageQueue.add the
 * answer to the message, and handle the answer to a request. Maven Central serves no test jars of
 * 4.4.0, and MockNetworkChannel and MockMessageQueue of 4.3.1 implement the interfaces as they
 * were, so this channel and queue are the adapter's: sends wait to be drained, a response
 * completes the future of the request it answers, and the queue hands the client one message a
 * poll, never waiting (time moves only on the driver's `timer`). The build picks this source
 * directory or src/io-3.3 (property kraftcheck.io); both have the same methods.
 */
final class NodeIo {
    private final AtomicInteger correlationIds;
    private final List<RaftRequest.Outbound> sent = new ArrayList<>();
    private final Map<Integer, CompletableFuture<RaftResponse.Inbound>> awaited = new HashMap<>();
    private final Queue<RaftMessageQueue.QueueEntry> queued = new ArrayDeque<>();

    private final NetworkChannel channel = new NetworkChannel() {
        @Override
        public int newCorrelationId() {
            return correlationIds.getAndIncrement();
        }

        @Override
        public CompletionStage<RaftResponse.Inbound> send(RaftRequest.Outbound request) {
            sent.add(request);
            CompletableFuture<RaftResponse.Inbound> response = new CompletableFuture<>();
            awaited.put(request.correlationId(), response);
            return response;
        }

        @Override
        public ListenerName listenerName() {
            return MockNetworkChannel.LISTENER_NAME;  // a constant of the 4.3.1 test jar, as the requests it names
        }

        @Override
        public void close() {
        }
    };

    private final RaftMessageQueue queue = new RaftMessageQueue() {
        @Override
        public Optional<QueueEntry> poll(long timeoutMs) {
            return Optional.ofNullable(queued.poll());
        }

        @Override
        public CompletionStage<RaftMessage> add(RaftMessage message) {
            CompletableFuture<RaftMessage> answer = new CompletableFuture<>();
            queued.add(new Entry(message, answer));
            return answer;
        }

        @Override
        public boolean isEmpty() {
            return queued.isEmpty();
        }

        @Override
        public void wakeup() {
        }
    };

    NodeIo(AtomicInteger correlationIds, List<Integer> voters) {  // the voters only 3.3 to 3.7's MockNetworkChannel takes
        this.correlationIds = correlationIds;
    }

    NetworkChannel channel() {
        return channel;
    }

    RaftMessageQueue queue() {
        return queue;
    }

    private record Entry(RaftMessage message, CompletableFuture<RaftMessage> future) implements RaftMessageQueue.QueueEntry {
    }

    /** Whether a message waits for the client's next poll. */
    boolean hasQueued() {
        return !queued.isEmpty();
    }

    /** The requests the client has sent since the last call, in order. */
    List<RaftRequest.Outbound> drainSent() {
        List<RaftRequest.Outbound> drained = List.copyOf(sent);
        sent.clear();
        return drained;
    }

    /** A response to one of the client's requests, for its next poll: one it does not await is lost. */
    void receive(RaftResponse.Inbound response) {
        CompletableFuture<RaftResponse.Inbound> awaiting = awaited.remove(response.correlationId());
        if (awaiting != null) {
            awaiting.complete(response);
        }
    }

    /** Hands a request to the client; its answer completes the future, when the client gives one. */
    static CompletableFuture<RaftResponse.Outbound> handle(KafkaRaftClient<Integer> client, RaftRequest.Inbound request) {
        return client.handle(request).toCompletableFuture();
    }

    static LogContext logContext(String prefix) {
        return new LogContext(prefix);
    }

    static String kafkaVersion() {
        return AppInfoParser.getVersion();
    }
}
