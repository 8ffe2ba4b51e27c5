package org.apache.kafka.raft;

/**
 * What the quorum-state file holds, as kraftcheck reads and writes it: the epoch, the leader
 * (-1: none known) and the vote (-1: none). Each release keeps it in its own ElectionState
 * (see Client).
 */
record Election(int epoch, int leaderId, int votedId) {
    /** What a node that has never written the file reads. */
    static final Election NONE = new Election(0, -1, -1);
}
