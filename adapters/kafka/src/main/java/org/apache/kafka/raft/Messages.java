package org.apache.kafka.raft;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.BeginQuorumEpochRequestData;
import org.apache.kafka.common.message.BeginQuorumEpochResponseData;
import org.apache.kafka.common.message.DescribeQuorumResponseData;
import org.apache.kafka.common.message.EndQuorumEpochRequestData;
import org.apache.kafka.common.message.EndQuorumEpochResponseData;
import org.apache.kafka.common.message.FetchRequestData;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.VoteRequestData;
import org.apache.kafka.common.message.VoteResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.requests.FetchRequest;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;

/**
 * The one place where kraftcheck's messages (spec/subprocess-protocol.md: the flattened
 * single-partition view, Kafka's field names) and Kafka's message classes meet. Every
 * message crosses at the latest version of its RPC in the Kafka release built against (what
 * two nodes of that release use with each other), serialized and read back at that version
 * as Kafka's own RaftClientTestContext does, so a field the version lacks cannot slip through.
 * What other nodes send is built with that release's own builders (Api, Release.voteRequest).
 */
final class Messages {
    static final TopicPartition PARTITION = new TopicPartition("__cluster_metadata", 0);
    static final Uuid TOPIC_ID = Uuid.METADATA_TOPIC_ID;
    static final int FETCH_MAX_BYTES = 1024 * 1024;
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private final int nodeId;
    private final List<Integer> voters;

    Messages(int nodeId, List<Integer> voters) {
        this.nodeId = nodeId;
        this.voters = List.copyOf(voters);
    }

    /** Where a node is reached: a made-up, never resolved address (nothing is ever connected). */
    static InetSocketAddress address(int id) {
        return InetSocketAddress.createUnresolved("node-" + id, 9990);
    }

    static short version(ApiMessage message) {
        return ApiKeys.forId(message.apiKey()).latestVersion();
    }

    /** The version each RPC crosses at, for the report: "Vote v1, BeginQuorumEpoch v1, ...". */
    static String rpcVersions() {
        List<String> versions = new ArrayList<>();
        for (ApiKeys api : List.of(ApiKeys.VOTE, ApiKeys.BEGIN_QUORUM_EPOCH, ApiKeys.END_QUORUM_EPOCH, ApiKeys.FETCH, ApiKeys.DESCRIBE_QUORUM)) {
            versions.add(api.name + " v" + api.latestVersion());
        }
        return String.join(", ", versions);
    }

    /** Writes the message at its version and reads it back, as it would cross a real connection. */
    static <T extends ApiMessage> T overTheWire(T message) {
        short version = version(message);
        ObjectSerializationCache cache = new ObjectSerializationCache();
        ByteBuffer buffer = ByteBuffer.allocate(message.size(cache, version));
        message.write(new ByteBufferAccessor(buffer), cache, version);
        buffer.flip();
        message.read(new ByteBufferAccessor(buffer), version);
        return message;
    }

    // ---- requests other nodes send to the node under test

    ApiMessage peerRequest(JsonNode message) {
        String type = message.path("type").asText();
        String clusterId = message.path("ClusterId").isNull() ? null : message.path("ClusterId").asText();
        switch (type) {
            case "VoteRequest":
                return Release.voteRequest(PARTITION, clusterId, integer(message, "CandidateEpoch"), integer(message, "CandidateId"), nodeId,
                    integer(message, "LastOffsetEpoch"), message.path("LastOffset").asLong(), message.path("PreVote").asBoolean(false));
            case "BeginQuorumEpochRequest":
                return Api.beginQuorumEpochRequest(clusterId, integer(message, "LeaderEpoch"), integer(message, "LeaderId"), nodeId);
            case "EndQuorumEpochRequest":
                return Api.endQuorumEpochRequest(clusterId, integer(message, "LeaderEpoch"), integer(message, "LeaderId"), ids(message.path("PreferredSuccessors")));
            case "FetchRequest":
                return Api.fetchFrom(integer(message, "ReplicaId"), RaftUtil.singletonFetchRequest(PARTITION, TOPIC_ID, partition -> {
                        partition.setCurrentLeaderEpoch(integer(message, "CurrentLeaderEpoch"))
                            .setFetchOffset(message.path("FetchOffset").asLong())
                            .setLastFetchedEpoch(integer(message, "LastFetchedEpoch"));
                        setHighWatermark(partition, message);
                    })
                    .setClusterId(clusterId)
                    .setMaxWaitMs(message.path("MaxWaitMs").asInt(0))  // omissible: 0, answer at once, when not carried
                    .setMaxBytes(FETCH_MAX_BYTES));
            case "DescribeQuorumRequest":
                return Api.describeQuorumRequest();
            default:
                throw new Unsupported("a " + type + " request: KafkaRaftClient serves Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and DescribeQuorum");
        }
    }

    // ---- the node's responses to them

    ObjectNode response(ApiMessage data) {
        if (data instanceof VoteResponseData vote) {
            VoteResponseData.PartitionData partition = vote.topics().isEmpty() ? new VoteResponseData.PartitionData() : vote.topics().get(0).partitions().get(0);
            return message("VoteResponse").put("ErrorCode", vote.errorCode()).put("PartitionErrorCode", partition.errorCode())
                .put("LeaderId", partition.leaderId()).put("LeaderEpoch", partition.leaderEpoch()).put("VoteGranted", partition.voteGranted());
        } else if (data instanceof BeginQuorumEpochResponseData begin) {
            BeginQuorumEpochResponseData.PartitionData partition = begin.topics().isEmpty() ? new BeginQuorumEpochResponseData.PartitionData() : begin.topics().get(0).partitions().get(0);
            return message("BeginQuorumEpochResponse").put("ErrorCode", begin.errorCode()).put("PartitionErrorCode", partition.errorCode())
                .put("LeaderId", partition.leaderId()).put("LeaderEpoch", partition.leaderEpoch());
        } else if (data instanceof EndQuorumEpochResponseData end) {
            EndQuorumEpochResponseData.PartitionData partition = end.topics().isEmpty() ? new EndQuorumEpochResponseData.PartitionData() : end.topics().get(0).partitions().get(0);
            return message("EndQuorumEpochResponse").put("ErrorCode", end.errorCode()).put("PartitionErrorCode", partition.errorCode())
                .put("LeaderId", partition.leaderId()).put("LeaderEpoch", partition.leaderEpoch());
        } else if (data instanceof FetchResponseData fetch) {
            FetchResponseData.PartitionData partition = fetch.responses().isEmpty() ? new FetchResponseData.PartitionData() : fetch.responses().get(0).partitions().get(0);
            ObjectNode reply = message("FetchResponse").put("ErrorCode", fetch.errorCode()).put("PartitionErrorCode", partition.errorCode())
                .put("HighWatermark", partition.highWatermark());
            reply.putObject("DivergingEpoch").put("Epoch", partition.divergingEpoch().epoch()).put("EndOffset", partition.divergingEpoch().endOffset());
            reply.putObject("CurrentLeader").put("LeaderId", partition.currentLeader().leaderId()).put("LeaderEpoch", partition.currentLeader().leaderEpoch());
            reply.set("Records", partition.records() == null ? NullNode.getInstance() : records(RecordCodec.fetchedRecords(partition)));
            return reply;
        } else if (data instanceof DescribeQuorumResponseData describe) {
            DescribeQuorumResponseData.PartitionData partition = describe.topics().isEmpty() ? new DescribeQuorumResponseData.PartitionData() : describe.topics().get(0).partitions().get(0);
            ObjectNode reply = message("DescribeQuorumResponse").put("ErrorCode", describe.errorCode()).put("PartitionErrorCode", partition.errorCode())
                .put("LeaderId", partition.leaderId()).put("LeaderEpoch", partition.leaderEpoch()).put("HighWatermark", partition.highWatermark());
            reply.set("CurrentVoters", replicaStates(partition.currentVoters()));
            reply.set("Observers", replicaStates(partition.observers()));
            return reply;
        }
        throw new Unsupported("a " + data.getClass().getSimpleName() + ", which kraftcheck's messages do not have");
    }

    private static ArrayNode replicaStates(List<DescribeQuorumResponseData.ReplicaState> states) {
        ArrayNode array = JSON.arrayNode();
        states.forEach(state -> array.addObject().put("ReplicaId", state.replicaId()).put("LogEndOffset", state.logEndOffset()));
        return array;
    }

    // ---- requests the node sends, as they cross the wire (DrivenNode.drain)

    ObjectNode sentRequest(ApiMessage data) {
        if (data instanceof VoteRequestData vote) {
            long[] fields = Release.voteFields(vote.topics().get(0).partitions().get(0));
            return message("VoteRequest").put("ClusterId", vote.clusterId()).put("CandidateEpoch", (int) fields[0]).put("CandidateId", (int) fields[1])
                .put("LastOffsetEpoch", (int) fields[2]).put("LastOffset", fields[3]).put("PreVote", fields[4] == 1);
        } else if (data instanceof BeginQuorumEpochRequestData begin) {
            BeginQuorumEpochRequestData.PartitionData partition = begin.topics().get(0).partitions().get(0);
            return message("BeginQuorumEpochRequest").put("ClusterId", begin.clusterId()).put("LeaderId", partition.leaderId()).put("LeaderEpoch", partition.leaderEpoch());
        } else if (data instanceof EndQuorumEpochRequestData end) {
            EndQuorumEpochRequestData.PartitionData partition = end.topics().get(0).partitions().get(0);
            ObjectNode reply = message("EndQuorumEpochRequest").put("ClusterId", end.clusterId()).put("ReplicaId", nodeId)
                .put("LeaderId", partition.leaderId()).put("LeaderEpoch", partition.leaderEpoch());
            ArrayNode successors = reply.putArray("PreferredSuccessors");
            Api.preferredSuccessors(partition).forEach(successors::add);
            return reply;
        } else if (data instanceof FetchRequestData fetch) {
            FetchRequestData.FetchPartition partition = fetch.topics().get(0).partitions().get(0);
            int replicaId = new FetchRequest(fetch, version(fetch)).replicaId();  // where its version carries it (KIP-903 moved it in v15)
            ObjectNode sent = message("FetchRequest").put("ClusterId", fetch.clusterId()).put("ReplicaId", replicaId);
            if (fetch.maxWaitMs() != 0) {  // omissible: written where it is not its default, as kraftcheck writes it
                sent.put("MaxWaitMs", fetch.maxWaitMs());
            }
            sent.put("CurrentLeaderEpoch", partition.currentLeaderEpoch()).put("FetchOffset", partition.fetchOffset()).put("LastFetchedEpoch", partition.lastFetchedEpoch());
            highWatermark(partition).ifPresent(highWatermark -> sent.put("HighWatermark", highWatermark));
            return sent;
        }
        throw new Unsupported("a " + ApiKeys.forId(data.apiKey()).name + " request, which kraftcheck's messages do not have");
    }

    // ---- other nodes' responses to the node's requests

    ApiMessage peerResponse(JsonNode message) {
        String type = message.path("type").asText();
        Errors error = Errors.forCode((short) integer(message, "ErrorCode"));
        Errors partitionError = Errors.forCode((short) integer(message, "PartitionErrorCode"));
        int leaderId = integer(message, "LeaderId");
        switch (type) {
            case "VoteResponse":
                return Api.voteResponse(error, partitionError, integer(message, "LeaderEpoch"), leaderId, message.path("VoteGranted").asBoolean());
            case "BeginQuorumEpochResponse":
                return Api.beginQuorumEpochResponse(error, partitionError, integer(message, "LeaderEpoch"), leaderId);
            case "EndQuorumEpochResponse":
                return Api.endQuorumEpochResponse(error, partitionError, integer(message, "LeaderEpoch"), leaderId);
            case "FetchResponse": {
                JsonNode leader = message.path("CurrentLeader");
                JsonNode diverging = message.path("DivergingEpoch");
                int fetchLeaderId = integer(leader, "LeaderId");
                return Api.fetchResponse(error, fetchLeaderId, partition -> {
                    partition.setErrorCode(partitionError.code())
                        .setHighWatermark(message.path("HighWatermark").asLong())
                        .setDivergingEpoch(new FetchResponseData.EpochEndOffset().setEpoch(integer(diverging, "Epoch")).setEndOffset(diverging.path("EndOffset").asLong()))
                        .setCurrentLeader(new FetchResponseData.LeaderIdAndEpoch().setLeaderId(fetchLeaderId).setLeaderEpoch(integer(leader, "LeaderEpoch")));
                    RecordCodec.setFetchedRecords(partition, traceRecords(message.path("Records")), voters);
                });
            }
            default:
                throw new Unsupported("a " + type + " response: KafkaRaftClient sends Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch requests");
        }
    }

    // ---- records

    static List<TraceRecord> traceRecords(JsonNode records) {
        List<TraceRecord> list = new ArrayList<>();
        for (JsonNode record : records) {
            JsonNode value = record.path("Value");
            long offset = record.path("Offset").asLong();
            int epoch = integer(record, "Epoch");
            if (value.isObject()) {
                list.add(TraceRecord.leaderChange(offset, epoch, value.path("Version").asInt(0), integer(value, "LeaderId"),
                    ids(value.path("VotedIds")), ids(value.path("Voters")), ids(value.path("GrantingVoters"))));
            } else {
                list.add(TraceRecord.value(offset, epoch, value.asInt()));
            }
        }
        return list;
    }

    private static List<Integer> ids(JsonNode array) {
        List<Integer> ids = new ArrayList<>();
        array.forEach(id -> ids.add(id.asInt()));
        return ids;
    }

    /** An id list of a LeaderChange record, left out when empty as kraftcheck leaves out a data record's defaults. */
    private static void putIds(ObjectNode change, String field, List<Integer> ids) {
        if (!ids.isEmpty()) {
            ArrayNode array = change.putArray(field);
            ids.forEach(array::add);
        }
    }

    static ArrayNode records(List<TraceRecord> records) {
        ArrayNode array = JSON.arrayNode();
        for (TraceRecord record : records) {
            ObjectNode node = array.addObject().put("type", "Record").put("Offset", record.offset()).put("Epoch", record.epoch());
            if (record.isLeaderChange()) {
                ObjectNode change = node.putObject("Value").put("type", "LeaderChangeMessage");
                if (record.version() != 0) {
                    change.put("Version", record.version());
                }
                change.put("LeaderId", record.leaderId());
                putIds(change, "VotedIds", record.votedIds());
                putIds(change, "Voters", record.voters());
                putIds(change, "GrantingVoters", record.grantingVoters());
            } else {
                node.put("Value", record.value());
            }
        }
        return array;
    }

    static ObjectNode message(String type) {
        return JSON.objectNode().put("type", type);
    }

    /**
     * A Fetch's HighWatermark (KIP-1166: Fetch v18, Kafka 4.1 on), where the message carries one and
     * the release's classes have the field; before, the Fetch at the release's version carries none.
     */
    private static void setHighWatermark(FetchRequestData.FetchPartition partition, JsonNode message) {
        if (!message.has("HighWatermark")) {
            return;
        }
        try {
            FetchRequestData.FetchPartition.class.getMethod("setHighWatermark", long.class).invoke(partition, message.path("HighWatermark").asLong());
        } catch (NoSuchMethodException before) {
            // a release before KIP-1166: nothing to set
        } catch (ReflectiveOperationException failed) {
            throw new IllegalStateException("FetchPartition.setHighWatermark", failed);
        }
    }

    /**
     * The HighWatermark a Fetch carries (KIP-1166, Kafka 4.1 on), where it is not the schema's
     * default (Long.MAX_VALUE: omissible, so not carried); before, the release's classes have no such field.
     */
    private static OptionalLong highWatermark(FetchRequestData.FetchPartition partition) {
        try {
            long highWatermark = (long) FetchRequestData.FetchPartition.class.getMethod("highWatermark").invoke(partition);
            return highWatermark == Long.MAX_VALUE ? OptionalLong.empty() : OptionalLong.of(highWatermark);
        } catch (NoSuchMethodException before) {
            return OptionalLong.empty();
        } catch (ReflectiveOperationException failed) {
            throw new IllegalStateException("FetchPartition.highWatermark", failed);
        }
    }

    static int integer(JsonNode message, String field) {
        return message.path(field).asInt();
    }
}
