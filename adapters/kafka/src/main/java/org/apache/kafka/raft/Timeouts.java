package org.apache.kafka.raft;

/**
 * The node's timeouts. "short", the default, is the adapter's own (a request times out long before
 * an election timer, as with Kafka's RaftClientTestContext); "kafka" is Kafka's defaults
 * (QuorumConfig's, RaftConfig's before 3.8: DEFAULT_QUORUM_*_MS); "long" a request timeout
 * (quorum.request.timeout.ms) longer than every other timer, a leader's check-quorum timer (1.5
 * fetch timeouts) included. A `timer` command moves mock time to that timer's expiry in one jump,
 * so which of the trace's orders of timers the node can take depends on these: the reply to start
 * names them, and every report with it.
 */
record Timeouts(String name, int requestMs, int retryBackoffMs, int electionMs, int electionBackoffMaxMs, int fetchMs) {
    static final Timeouts SHORT = new Timeouts("short", 100, 10, 1_000, 1_000, 2_000);
    static final Timeouts KAFKA = new Timeouts("kafka", 2_000, 20, 1_000, 1_000, 2_000);
    static final Timeouts LONG = new Timeouts("long", 10_000, 20, 1_000, 1_000, 2_000);
    /**
     * How long the node's Fetch asks its leader to hold it when nothing is new, under either
     * timeouts: Kafka's own (KafkaRaftClient.MAX_FETCH_WAIT_MS, what the raft manager passes), the
     * Kafka profiles' fetch_max_wait_ms. A held Fetch's wait runs out on `fetch_wait` alone (Expirations).
     */
    static final int FETCH_MAX_WAIT_MS = 500;

    static Timeouts named(String name) {
        return switch (name) {
            case "short" -> SHORT;
            case "kafka" -> KAFKA;
            case "long" -> LONG;
            default -> throw new IllegalArgumentException("unknown timeouts " + name + ": short, kafka or long");
        };
    }

    /**
     * Whether a request times out, and is retried, before an election or fetch timer that was
     * running when it was sent can expire, and twice before a leader's check-quorum timer (1.5
     * fetch timeouts): the capability EarlyRequestTimeout (spec/trace.py), which Kafka's defaults
     * lack (a 2,000 ms request timeout against 1,000 to 2,000 ms).
     */
    boolean requestsTimeOutEarly() {
        int retried = requestMs + retryBackoffMs;
        return retried < Math.min(electionMs, fetchMs) && 2 * retried < fetchMs * 3 / 2;
    }

    /** "timeouts short: request 100 ms, retry backoff 10 ms, election 1,000 ms (+ up to 1,000 ms), fetch 2,000 ms". */
    String describe() {
        return String.format("timeouts %s: request %,d ms, retry backoff %,d ms, election %,d ms (+ up to %,d ms), fetch %,d ms",
            name, requestMs, retryBackoffMs, electionMs, electionBackoffMaxMs, fetchMs);
    }
}
