package org.apache.kafka.raft;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.feature.SupportedVersionRange;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.LeaderChangeMessage;
import org.apache.kafka.common.message.VoteRequestData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.ControlRecordUtils;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.Records;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.server.common.Features;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What differs between the Kafka releases the adapter builds against, for Kafka 3.9.x: the
 * record classes' package, KafkaRaftClient.initialize's arguments, the Vote request's field
 * names (no pre-vote yet), a candidate's backoff after a lost election. The build picks this
 * source directory or src/kafka-4 (property kraftcheck.release); both have the same methods.
 */
final class Release {
        private Release() {
    }

    static SupportedVersionRange kraftVersions() {
        return Features.KRAFT_VERSION.supportedVersionRange();
    }

    static void initialize(KafkaRaftClient<Integer> client, Map<Integer, InetSocketAddress> voters, QuorumStateStore store, Metrics metrics) {
        client.initialize(voters, store, metrics);
    }

    /** A Vote request; Kafka 3.9 predates pre-votes (KIP-996), so it cannot be sent one. */
    static VoteRequestData voteRequest(TopicPartition partition, String clusterId, int epoch, int candidateId, int voterId, int lastOffsetEpoch, long lastOffset, boolean preVote) {
        if (preVote) {
            throw new Unsupported("a pre-vote (a Vote request with PreVote true, KIP-996), which Kafka 3.9 predates");
        }
        return RaftUtil.singletonVoteRequest(partition, clusterId, epoch, ReplicaKey.of(candidateId, ReplicaKey.NO_DIRECTORY_ID),
            ReplicaKey.of(voterId, ReplicaKey.NO_DIRECTORY_ID), lastOffsetEpoch, lastOffset);
    }

    /** Candidate epoch, candidate id, last offset epoch, last offset and whether it is a pre-vote (never, before 4.0). */
    static long[] voteFields(VoteRequestData.PartitionData partition) {
        return new long[] {partition.candidateEpoch(), partition.candidateId(), partition.lastOffsetEpoch(), partition.lastOffset(), 0};
    }

    /** A MockLog that reads like Kafka's own log: every batch up to the fetch's byte limit (MockLog stops at two). */
    static MockLog newLog(TopicPartition partition, Uuid topicId, LogContext logContext) {
        return new MockLog(partition, topicId, logContext) {
            @Override
            public LogFetchInfo read(long startOffset, Isolation isolation) {
                LogFetchInfo first = super.read(startOffset, isolation);
                List<ByteBuffer> buffers = new ArrayList<>();
                long next = startOffset;
                int size = 0;
                for (LogFetchInfo info = first; info.records.sizeInBytes() > 0 && size < Messages.FETCH_MAX_BYTES; info = super.read(next, isolation)) {
                    for (RecordBatch batch : ((Records) info.records).batches()) {
                        next = batch.lastOffset() + 1;
                    }
                    buffers.add(((MemoryRecords) info.records).buffer().duplicate());
                    size += info.records.sizeInBytes();
                }
                return new LogFetchInfo(MemoryRecords.readableRecords(concatenate(buffers, size)), first.startOffsetMetadata);
            }
        };
    }

    private static ByteBuffer concatenate(List<ByteBuffer> buffers, int size) {
        ByteBuffer whole = ByteBuffer.allocate(size);
        buffers.forEach(whole::put);
        return whole.flip();
    }

    static void append(MockLog log, List<TraceRecord> records, List<Integer> voters) {
        for (TraceRecord record : records) {
            log.appendAsFollower(batch(record, voters), record.epoch());
        }
        log.flush(true);
    }

    private static MemoryRecords batch(TraceRecord record, List<Integer> voters) {
        if (record.isLeaderChange()) {
            return MemoryRecords.withLeaderChangeMessage(record.offset(), 0L, record.epoch(), ByteBuffer.allocate(256),
                record.leaderChangeMessage(voters));
        }
        ByteBuffer value = ByteBuffer.allocate(Integer.BYTES).putInt(0, record.value());
        return MemoryRecords.withRecords(record.offset(), Compression.NONE, record.epoch(), new SimpleRecord(0L, null, value));
    }

    static List<TraceRecord> logRecords(MockLog log) {
        return decode((Records) log.read(0, Isolation.UNCOMMITTED).records);
    }

    static List<TraceRecord> fetchedRecords(FetchResponseData.PartitionData partition) {
        return decode((Records) partition.records());
    }

    static void setFetchedRecords(FetchResponseData.PartitionData partition, List<TraceRecord> records, List<Integer> voters) {
        List<ByteBuffer> buffers = new ArrayList<>();
        int size = 0;
        for (TraceRecord record : records) {
            ByteBuffer buffer = batch(record, voters).buffer();
            buffers.add(buffer);
            size += buffer.remaining();
        }
        partition.setRecords(MemoryRecords.readableRecords(concatenate(buffers, size)));
    }

    private static List<TraceRecord> decode(Records records) {
        List<TraceRecord> decoded = new ArrayList<>();
        for (RecordBatch batch : records.batches()) {
            for (Record record : batch) {
                if (!batch.isControlBatch()) {
                    decoded.add(TraceRecord.value(record.offset(), batch.partitionLeaderEpoch(), record.value().getInt(record.value().position())));
                } else if (ControlRecordType.parse(record.key()) == ControlRecordType.LEADER_CHANGE) {
                    LeaderChangeMessage message = ControlRecordUtils.deserializeLeaderChangeMessage(record);
                    decoded.add(TraceRecord.leaderChange(record.offset(), batch.partitionLeaderEpoch(), message.leaderId(), TraceRecord.votedIds(message)));
                } else {
                    throw new Unsupported("a " + ControlRecordType.parse(record.key()) + " control record, which kraftcheck's logs do not have");
                }
            }
        }
        return decoded;
    }

    /** The role kraftcheck's observe names for a state only this release has, or null: 3.9 has none. */
    static String releaseRole(QuorumState quorum) {
        return null;
    }

    /** Whether the node is a candidate backing off after a lost election, waiting to stand again (3.x; 4.x has no such backoff). */
    static boolean candidateBackingOff(QuorumState quorum) {
        return quorum.isCandidate() && quorum.candidateStateOrThrow().isBackingOff();
    }

    /** Time until the election timer fires in the node's current state, or -1 if it has none. */
    static long electionTimerMs(QuorumState quorum, long now) {
        if (quorum.isUnattached()) {
            return quorum.unattachedStateOrThrow().remainingElectionTimeMs(now);
        } else if (quorum.isCandidate()) {
            CandidateState candidate = quorum.candidateStateOrThrow();
            return candidate.isBackingOff() ? candidate.remainingBackoffMs(now) : candidate.remainingElectionTimeMs(now);
        } else if (quorum.isResigned()) {
            return quorum.resignedStateOrThrow().remainingElectionTimeMs(now);
        }
        return -1;
    }
}
