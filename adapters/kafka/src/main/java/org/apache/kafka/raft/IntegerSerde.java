package org.apache.kafka.raft;

import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;
import org.apache.kafka.common.protocol.Writable;
import org.apache.kafka.server.common.serialization.RecordSerde;

/** kraftcheck's client values are integers: each is one 4-byte record value. */
final class IntegerSerde implements RecordSerde<Integer> {

    @Override
    public int recordSize(Integer data, ObjectSerializationCache serializationCache) {
        return Integer.BYTES;
    }

    @Override
    public void write(Integer data, ObjectSerializationCache serializationCache, Writable out) {
        out.writeInt(data);
    }

    @Override
    public Integer read(Readable input, int size) {
        return input.readInt();
    }
}
