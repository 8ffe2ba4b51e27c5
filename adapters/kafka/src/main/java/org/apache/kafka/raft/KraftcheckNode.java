package org.apache.kafka.raft;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * One Apache Kafka KRaft node (KafkaRaftClient) behind kraftcheck's subprocess protocol,
 * version 2: a JSON command per line on stdin, a JSON reply per line on stdout, logs on stderr
 * (spec/subprocess-protocol.md). One JVM serves trace after trace; `reset` forgets the node.
 */
public final class KraftcheckNode {
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;
    private static final int PROTOCOL = 2;
    private final Timeouts timeouts;
    private DrivenNode node;
    private boolean stopped;

    private KraftcheckNode(Timeouts timeouts) {
        this.timeouts = timeouts;
    }

    /** Arguments: none, or --timeouts=short|kafka (Timeouts). */
    public static void main(String[] args) throws IOException {
        Timeouts timeouts = Timeouts.SHORT;
        for (String arg : args) {
            if (!arg.startsWith("--timeouts=")) {
                throw new IllegalArgumentException("unknown argument " + arg + ": the one argument is --timeouts=short|kafka");
            }
            timeouts = Timeouts.named(arg.substring("--timeouts=".length()));
        }
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        System.setOut(System.err);  // a stray print from a library must not reach the replies
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        KraftcheckNode server = new KraftcheckNode(timeouts);
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            out.println(Json.text(server.answer(line)));
            out.flush();
            if (server.stopped) {
                return;
            }
        }
    }

    ObjectNode answer(String line) {
        try {
            JsonNode command = Json.parse(line);
            String name = command.path("command").asText();
            if ("stop".equals(name)) {
                stopped = true;
                return ok();
            }
            return handle(name, command);
        } catch (Unsupported refused) {
            ObjectNode reply = failure(refused.getMessage());
            return refused.lacks == null ? reply : reply.put("lacks", refused.lacks);
        } catch (IllegalArgumentException refused) {
            return failure(refused.getMessage());
        } catch (Exception failed) {
            failed.printStackTrace(System.err);
            return failure(failed.getClass().getSimpleName() + ": " + failed.getMessage());
        }
    }

    private ObjectNode handle(String name, JsonNode command) {
        switch (name) {
            case "start":
                if (command.has("partition")) {
                    throw new Unsupported("ISR replicas: this is a KRaft node");
                }
                node = new DrivenNode(command, timeouts);
                ObjectNode started = ok().put("protocol", PROTOCOL).put("implementation", implementation());
                ArrayNode lacks = started.putArray("lacks").add("OffsetsForLeaderEpoch").add("FetchRecordLimit");
                if (!timeouts.requestsTimeOutEarly()) {
                    lacks.add("EarlyRequestTimeout");
                }
                return started.set("timing", timing());
            case "reset":
                node = null;
                return ok();
            case "drain": {
                ObjectNode reply = ok();
                reply.set("sends", started().drain());
                return reply;
            }
            case "observe": {
                ObjectNode reply = ok();
                reply.set("state", started().observe());
                reply.set("timers", started().timers());
                return reply;
            }
            default:
                return input(name, command);
        }
    }

    private ObjectNode input(String name, JsonNode command) {
        DrivenNode driven = started();
        ObjectNode response = null;
        ObjectNode appendResult = null;
        switch (name) {
            case "request" -> response = driven.request(command.path("source").asInt(), command.path("message"));
            case "response" -> driven.response(command.path("source").asInt(), command.path("request"), command.path("message"));
            case "timer" -> driven.timer(command.path("kind").asText());
            case "append" -> appendResult = driven.append(command.path("value").asInt());
            case "resign" -> driven.resign();
            case "crash" -> driven.crash();
            case "restart" -> driven.restart();
            default -> throw new IllegalArgumentException("unknown command " + name);
        }
        ObjectNode reply = ok();
        reply.set("response", response);
        reply.set("append_result", appendResult);
        reply.put("shutdown", driven.takeShutdown());
        ArrayNode answers = driven.takeAnswers();
        if (!answers.isEmpty()) {  // optional in the protocol: left out where there is none
            reply.set("answers", answers);
        }
        return reply;
    }

    /** The timeouts the node runs with, in the names of model.config.Timing (Kafka's raft client has no largest retry backoff). */
    private ObjectNode timing() {
        return JSON.objectNode().put("request_timeout_ms", timeouts.requestMs()).put("retry_backoff_ms", timeouts.retryBackoffMs())
            .put("election_timeout_ms", timeouts.electionMs()).put("election_backoff_max_ms", timeouts.electionBackoffMaxMs())
            .put("fetch_timeout_ms", timeouts.fetchMs());
    }

    /** What the reports name: the release, how the client is set up, the RPC versions, the timeouts. */
    private String implementation() {
        return "Apache Kafka " + NodeIo.kafkaVersion() + " KafkaRaftClient (" + Client.SETUP + "); RPC versions: "
            + Messages.rpcVersions() + "; " + timeouts.describe();
    }

    private DrivenNode started() {
        if (node == null) {
            throw new IllegalArgumentException("no node: the session has not started");
        }
        return node;
    }

    private static ObjectNode ok() {
        return JSON.objectNode().put("ok", true);
    }

    private static ObjectNode failure(String error) {
        return JSON.objectNode().put("ok", false).put("error", String.valueOf(error));
    }
}
