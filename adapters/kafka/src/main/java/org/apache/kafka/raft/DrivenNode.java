package org.apache.kafka.raft;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.raft.errors.NotLeaderException;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.MockTime;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One KafkaRaftClient driven the way Kafka's RaftClientTestContext and RaftEventSimulationTest
 * drive theirs: mock time that moves only on `timer`, a mock network channel whose sends wait
 * for `drain`, an in-memory log and quorum-state store that survive crash and restart, and a
 * seeded random, so the same commands always give the same replies.
 */
final class DrivenNode {
    static final int REQUEST_TIMEOUT_MS = 100;
    static final int RETRY_BACKOFF_MS = 10;
    static final int ELECTION_TIMEOUT_MS = 1000;
    static final int ELECTION_BACKOFF_MAX_MS = 1000;
    static final int FETCH_TIMEOUT_MS = 2000;
    /** A timer with this much time left or more is one Kafka keeps unarmed (Long.MAX_VALUE deadlines). */
    static final long UNARMED_MS = Long.MAX_VALUE / 2;
    private static final long RANDOM_SEED = 595L;
    private static final int MAX_POLLS = 64;
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private final int nodeId;
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
    private MockNetworkChannel channel;
    private MockMessageQueue queue;
    private KafkaRaftClient<Integer> client;
    private boolean shutdown;

    DrivenNode(JsonNode start) {
        JsonNode cluster = start.path("cluster");
        nodeId = start.path("node").asInt();
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
        channel = Client.newChannel(correlationIds, voters);
        queue = new MockMessageQueue();
        awaitingResponse.clear();
        log.reopen();
        Map<Integer, InetSocketAddress> voterAddresses = new HashMap<>();
        voters.forEach(id -> voterAddresses.put(id, Messages.address(id)));
        client = Client.newClient(nodeId, clusterId, voterAddresses, channel, queue, log, store, time, random, new LogContext("[node " + nodeId + "] "));
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
     * handled it, even when that message changed nothing observable. A client that throws has
     * failed the way a Kafka process would exit on a fatal error: the node is down, and the
     * reply says shutdown.
     */
    private void pollUntilQuiet() {
        for (int poll = 0; poll < MAX_POLLS; poll++) {
            String before = progress();
            boolean handlesMessage = !queue.isEmpty();
            try {
                client.poll();
            } catch (RuntimeException fatal) {
                System.err.println("KafkaRaftClient failed; the node is down: " + fatal);
                fatal.printStackTrace(System.err);
                goDown();
                shutdown = true;
                return;
            }
            undrained.addAll(channel.drainSendQueue());
            if (!handlesMessage && queue.isEmpty() && before.equals(progress())) {
                return;
            }
        }
    }

    private String progress() {
        QuorumState quorum = client.quorum();
        return role() + "|" + quorum.epoch() + "|" + quorum.leaderId() + "|" + undrained.size() + "|" + Api.offset(log.endOffset()) + "|" + quorum.highWatermark();
    }

    // ---- input commands; each returns the reply's response (or null) and sets append_result

    ObjectNode request(JsonNode message) {
        if (!isUp()) {
            return null;
        }
        ApiMessage data = Messages.overTheWire(messages.peerRequest(message));
        RaftRequest.Inbound inbound = Api.inboundRequest(correlationIds.getAndIncrement(), data, time.milliseconds());
        client.handle(inbound);
        pollUntilQuiet();
        RaftResponse.Outbound response = inbound.completion.getNow(null);
        return response == null ? null : messages.response(Messages.overTheWire(response.data()));
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
        channel.mockReceive(Client.inboundResponse(correlationId, Messages.overTheWire(messages.peerResponse(message)), source));
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
                    sleepAndPoll(remaining);
                }
            }
            case "fetch_timeout" -> {
                QuorumState quorum = client.quorum();
                if (quorum.isFollower()) {
                    sleepAndPoll(quorum.followerStateOrThrow().remainingFetchTimeMs(time.milliseconds()));
                } else if (quorum.isObserver()) {
                    sleepAndPoll(FETCH_TIMEOUT_MS);
                }
            }
            case "progress_timeout" -> {
                // Kafka 3.6 and older have no check-quorum timer: the timer does nothing there.
                if (client.quorum().isLeader()) {
                    Api.checkQuorumMs(client.quorum().leaderStateOrThrow(), time.milliseconds()).ifPresent(this::sleepAndPoll);
                }
            }
            case "request_timeout" -> {
                sleepAndPoll(REQUEST_TIMEOUT_MS);
                if (isUp()) {
                    sleepAndPoll(RETRY_BACKOFF_MS);
                }
            }
            default -> throw new IllegalArgumentException("unknown timer kind " + kind);
        }
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
