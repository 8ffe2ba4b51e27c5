package org.apache.kafka.raft;

/**
 * An input the adapter cannot give Kafka: refused with "unsupported: ...". With a capability
 * named (spec/trace.py, CAPABILITIES), the refusal says the node lacks it for this input, in this
 * state, and the trace is not applicable rather than failed.
 */
final class Unsupported extends RuntimeException {
    final String lacks;

    Unsupported(String what) {
        this(what, null);
    }

    Unsupported(String what, String lacks) {
        super("unsupported: " + what);
        this.lacks = lacks;
    }
}
