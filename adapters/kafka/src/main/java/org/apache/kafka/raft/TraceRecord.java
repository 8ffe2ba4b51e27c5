package org.apache.kafka.raft;

import org.apache.kafka.common.message.LeaderChangeMessage;

import java.util.List;

/**
 * One record of a kraftcheck log: a client value, or (value null) a LeaderChange control
 * record. It is what crosses between kraftcheck's JSON and Kafka's record batches, whose
 * classes live in a different package in each Kafka release (see Release).
 */
record TraceRecord(long offset, int epoch, Integer value, int leaderId, List<Integer> votedIds) {

    static TraceRecord value(long offset, int epoch, int value) {
        return new TraceRecord(offset, epoch, value, -1, List.of());
    }

    static TraceRecord leaderChange(long offset, int epoch, int leaderId, List<Integer> votedIds) {
        return new TraceRecord(offset, epoch, null, leaderId, List.copyOf(votedIds));
    }

    boolean isLeaderChange() {
        return value == null;
    }

    /** Kafka's LeaderChange record: kraftcheck's VotedIds are its GrantingVoters; Voters is the voter set. */
    LeaderChangeMessage leaderChangeMessage(List<Integer> voters) {
        return new LeaderChangeMessage()
            .setLeaderId(leaderId)
            .setVoters(voters.stream().map(id -> new LeaderChangeMessage.Voter().setVoterId(id)).toList())
            .setGrantingVoters(votedIds.stream().map(id -> new LeaderChangeMessage.Voter().setVoterId(id)).toList());
    }

    static List<Integer> votedIds(LeaderChangeMessage message) {
        return message.grantingVoters().stream().map(LeaderChangeMessage.Voter::voterId).sorted().toList();
    }
}
