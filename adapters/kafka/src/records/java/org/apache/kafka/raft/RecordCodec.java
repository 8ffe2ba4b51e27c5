package org.apache.kafka.raft;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.FetchResponseData;
import org.apache.kafka.common.message.LeaderChangeMessage;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.ControlRecordUtils;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.Records;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.utils.LogContext;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Kafka's record batches and MockLog as the adapter reads and writes them, for Kafka 3.3 to
 * 4.2: record classes in org.apache.kafka.common.record, MockLog.read(offset, isolation). The
 * build picks this source directory or src/records-internal (property kraftcheck.records);
 * both have the same methods.
 */
final class RecordCodec {
    private RecordCodec() {
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

    /**
     * Writes a trace's log. MockLog.appendAsLeader is the append whose arguments every release
     * shares (appendAsFollower took the epoch from 3.9 on); given each batch's own epoch it stores
     * the batch as it is, as appendAsFollower does (MockLog.append).
     */
    static void append(MockLog log, List<TraceRecord> records, List<Integer> voters) {
        for (TraceRecord record : records) {
            log.appendAsLeader(batch(record, voters), record.epoch());
        }
        log.flush(true);
    }

    private static MemoryRecords batch(TraceRecord record, List<Integer> voters) {
        if (record.isLeaderChange()) {
            return MemoryRecords.withLeaderChangeMessage(record.offset(), 0L, record.epoch(), ByteBuffer.allocate(256),
                record.leaderChangeMessage(voters));
        }
        ByteBuffer value = ByteBuffer.allocate(Integer.BYTES).putInt(0, record.value());
        return MemoryRecords.withRecords(record.offset(), Client.NO_COMPRESSION, record.epoch(), new SimpleRecord(0L, null, value));  // Client: the compression class changed in 3.8
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
                    decoded.add(TraceRecord.leaderChange(record.offset(), batch.partitionLeaderEpoch(), message));
                } else {
                    throw new Unsupported("a " + ControlRecordType.parse(record.key()) + " control record, which kraftcheck's logs do not have");
                }
            }
        }
        return decoded;
    }
}
