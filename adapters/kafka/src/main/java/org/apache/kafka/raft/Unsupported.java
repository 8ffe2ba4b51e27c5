package org.apache.kafka.raft;

/** An input or an output kraftcheck's protocol cannot carry to or from this node: the reply is "unsupported: ...". */
final class Unsupported extends RuntimeException {
    Unsupported(String what) {
        super("unsupported: " + what);
    }
}
