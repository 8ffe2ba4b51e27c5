package org.apache.kafka.common.utils;

import org.slf4j.Logger;

/**
 * Kafka 4.4 moved LogContext to org.apache.kafka.common.utils.internals. MockLog of 4.3.1 (the
 * newest test jar Maven Central serves; 4.4.0 has none) still takes one from here: this passes
 * its loggers on to the moved class.
 */
public class LogContext {
    private final org.apache.kafka.common.utils.internals.LogContext moved;

    public LogContext(String prefix) {
        moved = new org.apache.kafka.common.utils.internals.LogContext(prefix);
    }

    public Logger logger(Class<?> owner) {
        return moved.logger(owner);
    }
}
