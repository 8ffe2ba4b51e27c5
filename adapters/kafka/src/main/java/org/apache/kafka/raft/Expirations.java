package org.apache.kafka.raft;

import org.apache.kafka.common.errors.TimeoutException;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The expiration service KafkaRaftClient's purgatories wait on, run by kraftcheck's fetch_wait
 * timer alone. Kafka's MockExpirationService lets a wait run out whenever mock time passes it, so
 * any timer command (the adapter moves time in one jump) would also time out every Fetch the
 * leader holds; the model has no time, and a held Fetch's wait runs out only when the trace says
 * so (FETCH-REQ-7). A wait of Integer.MAX_VALUE ms or more (the append purgatory's) never does.
 */
final class Expirations implements ExpirationService {
    private final List<CompletableFuture<?>> running = new ArrayList<>();  // in the order the waits began

    @Override
    public <T> CompletableFuture<T> failAfter(long timeoutMs) {
        CompletableFuture<T> future = new CompletableFuture<>();
        if (timeoutMs < Integer.MAX_VALUE) {
            running.add(future);
        }
        return future;
    }

    /** The oldest wait still running runs out, as MockExpirationService fails it; false if none runs. */
    boolean expireOldest() {
        running.removeIf(CompletableFuture::isDone);
        if (running.isEmpty()) {
            return false;
        }
        running.remove(0).completeExceptionally(new TimeoutException("the wait ran out (kraftcheck's fetch_wait timer)"));
        return true;
    }
}
