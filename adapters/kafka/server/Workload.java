import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.RetriableException;

/**
 * kraftcheck's workload on a controller quorum, through Kafka's own admin client talking to the
 * controllers (bootstrap.controllers, KIP-919, Kafka 3.7 on): write N sets the cluster-wide
 * broker default log.retention.ms to BASE + N (IncrementalAlterConfigs, which the controllers
 * take themselves; a broker setting, of no effect on a controller), one metadata record
 * (ConfigRecord) the quorum commits before it answers; every second it reads the quorum (DescribeQuorum): leader,
 * epoch, high watermark. One JSON line per event on standard output, as it happens; it runs until
 * it is killed.
 *
 * A write's outcome: "ack" when the controller answered that it is done, "failed" when it refused
 * it for good (a non-retriable error: it was not applied), "unknown" otherwise (a timeout, a lost
 * connection, a controller that stopped leading: it may or may not have been applied).
 *
 * Arguments: the controllers (host:port,...), and the pause between writes in milliseconds.
 */
public final class Workload {
    private static final long QUORUM_EVERY_MS = 1000;
    static final String KEY = "log.retention.ms";
    static final long BASE = 604_800_000L; // Kafka's default, seven days: write N sets it N ms longer

    public static void main(String[] args) throws InterruptedException {
        Map<String, Object> config = Map.of(
            "bootstrap.controllers", args[0],
            "request.timeout.ms", 2000,
            "default.api.timeout.ms", 4000,
            "retry.backoff.ms", 100,
            "reconnect.backoff.max.ms", 500,
            "socket.connection.setup.timeout.ms", 1000,
            "socket.connection.setup.timeout.max.ms", 2000);
        long pauseMs = Long.parseLong(args[1]);
        try (Admin admin = Admin.create(config)) {
            long lastQuorum = 0;
            for (long n = 1; ; n++) {
                System.out.println("{\"write\":" + n + ",\"invoked\":true}");
                System.out.println(write(admin, n));
                if (System.currentTimeMillis() - lastQuorum >= QUORUM_EVERY_MS) {
                    lastQuorum = System.currentTimeMillis();
                    System.out.println(quorum(admin));
                }
                Thread.sleep(pauseMs);
            }
        }
    }

    private static String write(Admin admin, long n) throws InterruptedException {
        ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
        AlterConfigOp set = new AlterConfigOp(new ConfigEntry(KEY, String.valueOf(BASE + n)), AlterConfigOp.OpType.SET);
        try {
            admin.incrementalAlterConfigs(Map.of(cluster, List.of(set))).all().get(5, TimeUnit.SECONDS);
            return "{\"write\":" + n + ",\"outcome\":\"ack\"}";
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            String outcome = cause instanceof ApiException && !(cause instanceof RetriableException) ? "failed" : "unknown";
            return "{\"write\":" + n + ",\"outcome\":\"" + outcome + "\",\"error\":" + quoted(cause.getClass().getSimpleName() + ": " + cause.getMessage()) + "}";
        } catch (java.util.concurrent.TimeoutException e) {
            return "{\"write\":" + n + ",\"outcome\":\"unknown\",\"error\":\"no answer within 5 s\"}";
        }
    }

    private static String quorum(Admin admin) throws InterruptedException {
        try {
            QuorumInfo info = admin.describeMetadataQuorum().quorumInfo().get(5, TimeUnit.SECONDS);
            return "{\"quorum\":{\"leader\":" + info.leaderId() + ",\"epoch\":" + info.leaderEpoch() + ",\"hw\":" + info.highWatermark() + "}}";
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            return "{\"quorum\":null}";
        }
    }

    private static String quoted(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : String.valueOf(text).toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
