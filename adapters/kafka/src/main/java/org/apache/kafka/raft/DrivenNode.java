package org.apache.kafka.raft;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.raft.errors.NotLeaderException;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One KafkaRaftClient driven the way Kafka's RaftClientTestContext and RaftEventSimulationTest
 * drive theirs: mock time that moves only on `timer`, a mock network channel whose sends wait
 * for `drain`, an in-memory log and quorum-state store that survive crash and restart, and a
 * seeded random, so the same commands always give the same replies.
 */
final class DrivenNode {
    /** A timer with this much time left or more is one Kafka keeps unarmed (Long.MAX_VALUE deadlines). */
    static final long UNARMED_MS = Long.MAX_VALUE / 2;
    private static final long RANDOM_SEED = 595L;
    private static final String ADAPTER_JAR = DrivenNode.class.getProtectionDomain().getCodeSource().getLocation().getPath();
    private static final int MAX_POLLS = 64;
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private final int nodeId;
    private final Timeouts timeouts;
    private final List<Integer> voters;
    private final String clusterId;
    private final Messages messages;
    private final MockTime time = new MockTime(0, 1_000_000L, 0);
    private final AtomicInteger correlationIds = new AtomicInteger();
    private final MockLog log;
    private final MockQuorumStateStore store = new MockQuorumStateStore();
    private final Random random = new Random(RANDOM_SEED);
    private final List<RaftRequest.Outbound> undrained = new ArrayList<>();
    private final Map<Integer, RaftRequest.Outbound> awaitingResponse = new LinkedHashMap<>();
    private final List<Unanswered> unanswered = new ArrayList<>();  // requests not answered at their command, oldest first
    private Expirations expirations;
    private NodeIo io;
    private KafkaRaftClient<Integer> client;
    private boolean shutdown;

    DrivenNode(JsonNode start, Timeouts timeouts) {
        JsonNode cluster = start.path("cluster");
        nodeId = start.path("node").asInt();
        this.timeouts = timeouts;
        voters = new ArrayList<>();
        cluster.path("voters").forEach(id -> voters.add(id.asInt()));
        if (cluster.path("cluster_id").isNull()) {
            throw new Unsupported("a node without a cluster id: a Kafka node always has one (cluster.id)");
        }
        clusterId = cluster.path("cluster_id").asText();
        messages = new Messages(nodeId, voters);
        log = RecordCodec.newLog(Messages.PARTITION, Messages.TOPIC_ID, new LogContext("[node " + nodeId + "] "));
        JsonNode initial = start.path("initial");
        boolean empty = initial.path("epoch").asInt(0) == 0 && initial.path("leader_id").asInt(-1) == -1
            && initial.path("voted_id").asInt(-1) == -1 && initial.path("log").isEmpty();
        if (!empty) {
            persist(initial);
        } else if (!initial.path("down").asBoolean()) {
            bringUp();
        }
    }

    /** The quorum-state file and the log a trace starts from. */
    private void persist(JsonNode initial) {
        Election election = new Election(initial.path("epoch").asInt(0), initial.path("leader_id").asInt(-1), initial.path("voted_id").asInt(-1));
        Client.writeElection(store, election, voters);
        RecordCodec.append(log, Messages.traceRecords(initial.path("log")), voters);
    }

    private void bringUp() {
        io = new NodeIo(correlationIds, voters);
        awaitingResponse.clear();
        unanswered.clear();
        expirations = new Expirations();
        log.reopen();
        Map<Integer, InetSocketAddress> voterAddresses = new HashMap<>();
        voters.forEach(id -> voterAddresses.put(id, Messages.address(id)));
        client = Client.newClient(nodeId, clusterId, voterAddresses, timeouts, io, log, store, time, expirations, random, "[node " + nodeId + "] ");
        shutdown = false;
        pollUntilQuiet();
    }

    boolean isUp() {
        return client != null;
    }

    /**
     * Polls until the client has handled every queued message and a poll that handled none
     * changes nothing. KafkaRaftClient handles one message per poll, after acting on its
     * current state (pollCurrentState, then handleInboundMessage), so what a message leads to
     * (a Fetch re-sent at once after an epoch error) is sent by the poll after the one that
     * handled it, even when that message changed nothing observable. A client whose own code
     * throws has failed the way a Kafka process would exit on a fatal error: the node is down,
     * and the reply says shutdown; an exception of the harness fails the command instead.
     */
    private void pollUntilQuiet() {
        for (int poll = 0; poll < MAX_POLLS; poll++) {
            String before = progress();
            boolean handlesMessage = io.hasQueued();
            try {
                client.poll();
            } catch (RuntimeException fatal) {
                if (thrownByHarness(fatal)) {
                    throw new IllegalStateException("the harness failed, not KafkaRaftClient (thrown in " + fatal.getStackTrace()[0] + "): " + fatal, fatal);
                }
                System.err.println("KafkaRaftClient failed; the node is down: " + fatal);
                fatal.printStackTrace(System.err);
                goDown();
                shutdown = true;
                return;
            }
            undrained.addAll(io.drainSent());
            if (!handlesMessage && !io.hasQueued() && before.equals(progress())) {
                return;
            }
        }
    }

    /**
     * Whether an exception out of poll comes from the harness rather than from Kafka: thrown (at
     * its first frame outside the JDK) by this adapter's classes or by the mocks of Kafka's test
     * jars. Only an exception of Kafka's own code is the fatal error that stops a Kafka process;
     * a fault of the harness is an error verdict, never a shutdown the model could take for one.
     */
    private static boolean thrownByHarness(Throwable thrown) {
        for (StackTraceElement frame : thrown.getStackTrace()) {
            CodeSource source;
            try {
                source = Class.forName(frame.getClassName(), false, DrivenNode.class.getClassLoader()).getProtectionDomain().getCodeSource();
            } catch (ClassNotFoundException | LinkageError hidden) {
                continue;  // a lambda's hidden class: its caller's frame follows
            }
            if (source != null) {  // none: a JDK class, called by the frame that follows
                String jar = source.getLocation().getPath();
                return jar.equals(ADAPTER_JAR) || jar.endsWith("-test.jar");
            }
        }
        return false;
    }

    private String progress() {
        QuorumState quorum = client.quorum();
        return role() + "|" + quorum.epoch() + "|" + quorum.leaderId() + "|" + undrained.size() + "|" + Api.offset(log.endOffset()) + "|" + quorum.highWatermark();
    }

    // ---- input commands; each returns the reply's response (or null) and sets append_result

    /** A request from `source`: the response, or null where the node holds it (a Fetch in its purgatory) or drops it. */
    ObjectNode request(int source, JsonNode message) {
        if (!isUp()) {
            return null;
        }
        ApiMessage data = Messages.overTheWire(messages.peerRequest(message));
        RaftRequest.Inbound inbound = Api.inboundRequest(correlationIds.getAndIncrement(), data, time.milliseconds());
        CompletableFuture<RaftResponse.Outbound> answer = NodeIo.handle(client, inbound);
        pollUntilQuiet();
        RaftResponse.Outbound response = answer.getNow(null);
        if (response == null) {
            unanswered.add(new Unanswered(source, message, answer));
            return null;
        }
        return messages.response(Messages.overTheWire(response.data()));
    }

    /** A request the node did not answer at its command, as it came from `source`. */
    private record Unanswered(int source, JsonNode message, CompletableFuture<RaftResponse.Outbound> answer) {
    }

    /**
     * The responses the node has sent since the last call to requests of earlier commands (a held
     * Fetch completed by an append, a resignation, a new leader or its wait running out), each with
     * the request it answers as that request came.
     */
    ArrayNode takeAnswers() {
        ArrayNode answers = JSON.arrayNode();
        for (var pending = unanswered.iterator(); pending.hasNext(); ) {
            Unanswered request = pending.next();
            RaftResponse.Outbound response = request.answer().getNow(null);
            if (response != null) {
                pending.remove();
                ObjectNode answer = answers.addObject().put("destination", request.source());
                answer.set("message", messages.response(Messages.overTheWire(response.data())));
                answer.set("request", request.message());
            }
        }
        return answers;
    }

    /** Delivers a response to the newest request the node sent to `source` with these contents; one it is not awaiting is lost. */
    void response(int source, JsonNode request, JsonNode message) {
        if (!isUp()) {
            return;
        }
        Integer correlationId = null;
        for (RaftRequest.Outbound sent : awaitingResponse.values()) {
            if (Client.destination(sent) == source && Json.canonical(messages.sentRequest(sent.data())).equals(Json.canonical(request))) {
                correlationId = sent.correlationId();
            }
        }
        if (correlationId == null) {
            return;
        }
        awaitingResponse.remove(correlationId);
        io.receive(Client.inboundResponse(correlationId, Messages.overTheWire(messages.peerResponse(message)), source));
        pollUntilQuiet();
    }

    void timer(String kind) {
        if (!isUp()) {
            return;
        }
        switch (kind) {
            case "election_timeout" -> {
                // A 3.x candidate first backs off, then starts the next election: both belong to this timer.
                for (int step = 0; step == 0 || (step < 2 && isUp() && Release.candidateBackingOff(client.quorum())); step++) {
                    long remaining = Release.electionTimerMs(client.quorum(), time.milliseconds());
                    if (remaining < 0) {
                        return;
                    }
                    sleepAndPoll(requestsStillOut(kind, remaining));
                }
            }
            case "fetch_timeout" -> {
                QuorumState quorum = client.quorum();
                if (quorum.isFollower()) {
                    sleepAndPoll(requestsStillOut(kind, remainingMs(kind)));
                } else if (quorum.isObserver()) {
                    sleepAndPoll(requestsStillOut(kind, timeouts.fetchMs()));
                }
            }
            case "progress_timeout" -> {
                // Kafka 3.6 and older have no check-quorum timer: the timer does nothing there.
                long ms = remainingMs(kind);
                if (ms < Long.MAX_VALUE) {
                    sleepAndPoll(requestsStillOut(kind, ms));
                }
            }
            case "request_timeout" -> {
                long stateTimerMs = stateTimerMs();
                if (stateTimerMs < timeouts.requestMs() + timeouts.retryBackoffMs()) {
                    throw new Unsupported(String.format("a request_timeout over the %s's own timer: that timer expires in %,d ms, before its requests time out "
                        + "and go again (%,d ms; timeouts %s)", role(), stateTimerMs,
                        timeouts.requestMs() + timeouts.retryBackoffMs(), timeouts.name()), "EarlyRequestTimeout");
                }
                sleepAndPoll(timeouts.requestMs());
                if (isUp()) {
                    sleepAndPoll(timeouts.retryBackoffMs());
                }
            }
            case "fetch_wait" -> {
                // No time moves: the oldest held Fetch's wait runs out on its own (Expirations).
                if (expirations.expireOldest()) {
                    pollUntilQuiet();
                }
            }
            default -> throw new IllegalArgumentException("unknown timer kind " + kind);
        }
    }

    /**
     * `ms`, the time left on the timer `kind`, if no request the node has in flight times out
     * first or with it: a jump to Kafka's request timer would have it time out, and its request
     * sent again, on the way, where the trace fires this timer alone. The node declines it for want of
     * LateRequestTimeout (spec/trace.py): the trace is not applicable with these timeouts.
     */
    private long requestsStillOut(String kind, long ms) {
        long request = firstRequestTimeoutMs();
        if (ms < UNARMED_MS && request <= ms) {
            throw new Unsupported(String.format("a %s over a request in flight: Kafka's request timer expires in %,d ms, by this timer (%,d ms; timeouts %s), "
                + "and its request goes again on the way", kind, request, ms, timeouts.name()), "LateRequestTimeout");
        }
        return ms;
    }

    /**
     * The time until the first request in flight times out in Kafka's RequestManager (which
     * forgets its requests on every change of state), Long.MAX_VALUE with none. Its connections are
     * private; every release names them alike (connections, remainingRequestTimeMs).
     */
    private long firstRequestTimeoutMs() {
        try {
            Object manager = field(client, KafkaRaftClient.class, "requestManager");
            long first = Long.MAX_VALUE;
            for (Object connection : ((Map<?, ?>) field(manager, manager.getClass(), "connections")).values()) {
                Method remaining = connection.getClass().getDeclaredMethod("remainingRequestTimeMs", long.class);
                remaining.setAccessible(true);
                long ms = (long) remaining.invoke(connection, time.milliseconds());
                if (ms > 0) {
                    first = Math.min(first, ms);
                }
            }
            return first;
        } catch (ReflectiveOperationException unreadable) {
            throw new IllegalStateException("the harness cannot read Kafka's RequestManager: " + unreadable, unreadable);
        }
    }

    private static Object field(Object owner, Class<?> type, String name) throws ReflectiveOperationException {
        Field field = type.getDeclaredField(name);
        field.setAccessible(true);
        return field.get(owner);
    }

    /**
     * The time left on the node's election, fetch or check-quorum timer, whichever its state runs;
     * Long.MAX_VALUE with none, and for a candidate backing off: that random backoff may end
     * within a request timeout (ELECT-6's on-request-timer).
     */
    private long stateTimerMs() {
        QuorumState quorum = client.quorum();
        if (Release.candidateBackingOff(quorum)) {
            return Long.MAX_VALUE;
        }
        return remainingMs(quorum.isFollower() ? "fetch_timeout" : quorum.isLeader() ? "progress_timeout" : "election_timeout");
    }

    /**
     * The time left on the node's timer of a trace's kind, as Kafka's state keeps it, Long.MAX_VALUE
     * where it runs none: a follower's fetch timer (an EndQuorumEpoch overrides it with the
     * successor's backoff, END-REQ-6), a voter's election timer (a 3.x candidate's backoff), a
     * leader's check-quorum timer (none before 3.7), the first request in flight.
     */
    private long remainingMs(String kind) {
        QuorumState quorum = client.quorum();
        long now = time.milliseconds();
        return switch (kind) {
            case "fetch_timeout" -> quorum.isFollower() ? quorum.followerStateOrThrow().remainingFetchTimeMs(now) : Long.MAX_VALUE;
            case "election_timeout" -> {
                long election = quorum.isObserver() ? -1 : Release.electionTimerMs(quorum, now);
                yield election < 0 ? Long.MAX_VALUE : election;
            }
            case "progress_timeout" -> quorum.isLeader() ? Api.checkQuorumMs(quorum.leaderStateOrThrow(), now).orElse(Long.MAX_VALUE) : Long.MAX_VALUE;
            case "request_timeout" -> firstRequestTimeoutMs();
            default -> throw new IllegalArgumentException("unknown timer kind " + kind);
        };
    }

    /** The time left on every timer the node runs (remainingMs), by kind, for the reply to observe; none while it is down. */
    ObjectNode timers() {
        ObjectNode timers = JSON.objectNode();
        if (isUp()) {
            for (String kind : List.of("fetch_timeout", "election_timeout", "progress_timeout", "request_timeout")) {
                long ms = remainingMs(kind);
                if (ms < UNARMED_MS) {
                    timers.put(kind, ms);
                }
            }
        }
        return timers;
    }

    /**
     * Moves mock time to a timer's expiry, then polls. A timer Kafka keeps unarmed (Long.MAX_VALUE
     * left, or close to it: a sole voter's check-quorum timer, an observer's election timer) never
     * fires, so no time moves: a jump that far would wrap MockTime's clock.
     */
    private void sleepAndPoll(long ms) {
        if (ms < UNARMED_MS) {
            time.sleep(Math.max(0, ms));
        }
        pollUntilQuiet();
    }

    /** A client append: the offset the leader gave the value, or NOT_LEADER_OR_FOLLOWER. */
    ObjectNode append(int value) {
        if (!isUp()) {
            return null;
        }
        ObjectNode result = JSON.objectNode();
        try {
            long offset = Api.append(client, value);
            pollUntilQuiet();
            return result.put("ErrorCode", 0).put("Offset", offset);
        } catch (NotLeaderException notLeader) {
            return result.put("ErrorCode", 6).put("Offset", -1);
        }
    }

    void resign() {
        if (isUp() && client.quorum().isLeader()) {
            client.resign(client.quorum().epoch());
            pollUntilQuiet();
        }
    }

    void crash() {
        if (isUp()) {
            goDown();
        }
    }

    /**
     * The process stops, by a crash or a fatal error: what the node wrote to its log survives (the
     * operating system has it), flushed or not (an observer of Kafka 3.5 to 3.8 does not flush
     * what it appends: KafkaRaftClient.appendAsFollower); nothing else does.
     */
    private void goDown() {
        log.flush(true);
        client = null;
        unanswered.clear();  // the process is gone: what it held is never answered
    }

    void restart() {
        if (!isUp()) {
            bringUp();
        }
    }

    boolean takeShutdown() {
        boolean happened = shutdown;
        shutdown = false;
        return happened;
    }

    ArrayNode drain() {
        ArrayNode sends = JSON.arrayNode();
        undrained.sort(Comparator.comparingInt(RaftRequest.Outbound::correlationId));
        for (RaftRequest.Outbound sent : undrained) {
            Messages.overTheWire(sent.data());  // what the peer reads: only the fields of the version sent
            awaitingResponse.put(sent.correlationId(), sent);
            ObjectNode send = sends.addObject().put("destination", Client.destination(sent));
            send.set("message", messages.sentRequest(sent.data()));
        }
        undrained.clear();
        return sends;
    }

    ObjectNode observe() {
        ObjectNode state = JSON.objectNode();
        List<TraceRecord> records = RecordCodec.logRecords(log);
        if (!isUp()) {
            Election election = Client.readElection(store).orElse(Election.NONE);
            state.put("role", "down").put("epoch", election.epoch()).put("leader_id", election.leaderId())
                .put("voted_id", election.votedId()).put("high_watermark", 0);
        } else {
            QuorumState quorum = client.quorum();
            Election election = Client.readElection(store).orElseThrow();
            state.put("role", role()).put("epoch", quorum.epoch()).put("leader_id", quorum.leaderId().orElse(-1))
                .put("voted_id", election.votedId())
                .put("high_watermark", quorum.highWatermark().map(Api::offset).orElse(-1L));
        }
        state.put("log_end_offset", records.size());
        ArrayNode entries = state.putArray("log");
        records.forEach(record -> entries.addArray().add(record.offset()).add(record.epoch()));
        return state;
    }

    private String role() {
        QuorumState quorum = client.quorum();
        String releaseRole = Release.releaseRole(quorum);
        if (releaseRole != null) {
            return releaseRole;
        } else if (quorum.isLeader()) {
            return "leader";
        } else if (quorum.isCandidate()) {
            return "candidate";
        } else if (quorum.isResigned()) {
            return "resigned";
        } else if (quorum.isObserver()) {
            return "observer";
        } else if (quorum.isFollower()) {
            return "follower";
        }
        return Api.isVoted(quorum) ? "voted" : "unattached";
    }
}
