import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;

import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.message.LeaderChangeMessage;
import org.apache.kafka.common.metadata.ConfigRecord;
import org.apache.kafka.common.metadata.MetadataRecordType;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.ControlRecordUtils;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.utils.ByteUtils;

/**
 * A node's metadata log (__cluster_metadata-0's segments and snapshots) as kraftcheck's cluster
 * history reads it, through Kafka's own record classes: one JSON line per record batch, with its
 * offsets, epoch and checksum, the leader a LeaderChange record names, and the numbers of
 * kraftcheck's writes (Workload.java: the cluster's log.retention.ms set to BASE + N) it holds.
 *
 * Arguments: the files, each a segment (.log) or a snapshot (.checkpoint).
 */
public final class LogDump {

    public static void main(String[] args) throws IOException {
        for (String path : args) {
            try (FileRecords records = FileRecords.open(new File(path), false)) {
                for (RecordBatch batch : records.batches()) {
                    System.out.println(line(path, batch));
                }
            }
        }
    }

    private static String line(String path, RecordBatch batch) {
        StringBuilder writes = new StringBuilder();
        int leader = -1;
        for (Record record : batch) {
            if (batch.isControlBatch()) {
                if (ControlRecordType.parse(record.key()) == ControlRecordType.LEADER_CHANGE) {
                    LeaderChangeMessage message = ControlRecordUtils.deserializeLeaderChangeMessage(record);
                    leader = message.leaderId();
                }
                continue;
            }
            ByteBuffer value = record.value();
            if (value == null) {
                continue;
            }
            ByteUtils.readUnsignedVarint(value); // the frame version
            short apiKey = (short) ByteUtils.readUnsignedVarint(value);
            short version = (short) ByteUtils.readUnsignedVarint(value);
            if (apiKey == MetadataRecordType.CONFIG_RECORD.id()) {
                ConfigRecord config = new ConfigRecord(new ByteBufferAccessor(value), version);
                if (config.resourceType() == ConfigResource.Type.BROKER.id() && config.resourceName().isEmpty() && Workload.KEY.equals(config.name()) && config.value() != null) {
                    writes.append(writes.length() == 0 ? "" : ",").append(Long.parseLong(config.value()) - Workload.BASE);
                }
            }
        }
        return "{\"file\":\"" + new File(path).getName() + "\",\"base\":" + batch.baseOffset() + ",\"last\":" + batch.lastOffset()
            + ",\"epoch\":" + batch.partitionLeaderEpoch() + ",\"control\":" + batch.isControlBatch() + ",\"crc\":" + batch.checksum()
            + ",\"leader\":" + leader + ",\"writes\":[" + writes + "]}";
    }
}
