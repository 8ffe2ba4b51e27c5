package org.apache.kafka.raft;

import org.apache.kafka.common.message.LeaderChangeMessage;

import java.util.List;

/**
 * One record of a kraftcheck log: a client value, or (value null) a LeaderChange control
 * record. It is what crosses between kraftcheck's JSON and Kafka's record batches, whose
 * classes live in a different package in each Kafka release (see RecordCodec).
 *
 * A LeaderChange record keeps the fields of the schema it was written under: the KIP's
 * VotedIds, or Kafka's Version, Voters and GrantingVoters (an empty list: not written).
 */
record TraceRecord(long offset, int epoch, Integer value, int version, int leaderId,
                   List<Integer> votedIds, List<Integer> voters, List<Integer> grantingVoters) {

    static TraceRecord value(long offset, int epoch, int value) {
        return new TraceRecord(offset, epoch, value, 0, -1, List.of(), List.of(), List.of());
    }

    static TraceRecord leaderChange(long offset, int epoch, int version, int leaderId,
                                    List<Integer> votedIds, List<Integer> voters, List<Integer> grantingVoters) {
        return new TraceRecord(offset, epoch, null, version, leaderId, List.copyOf(votedIds), List.copyOf(voters), List.copyOf(grantingVoters));
    }

    /** A record as Kafka wrote it: every field of Kafka's schema, the id lists sorted (they are sets). */
    static TraceRecord leaderChange(long offset, int epoch, LeaderChangeMessage message) {
        return leaderChange(offset, epoch, message.version(), message.leaderId(), List.of(), ids(message.voters()), ids(message.grantingVoters()));
    }

    boolean isLeaderChange() {
        return value == null;
    }

    /**
     * Kafka's LeaderChange record for this one: a record written under the KIP's schema has no
     * Voters (the cluster's voter set stands in) and its VotedIds are the GrantingVoters.
     */
    LeaderChangeMessage leaderChangeMessage(List<Integer> clusterVoters) {
        return new LeaderChangeMessage()
            .setVersion((short) version)
            .setLeaderId(leaderId)
            .setVoters(voterStructs(voters.isEmpty() ? clusterVoters : voters))
            .setGrantingVoters(voterStructs(grantingVoters.isEmpty() ? votedIds : grantingVoters));
    }

    private static List<LeaderChangeMessage.Voter> voterStructs(List<Integer> ids) {
        return ids.stream().map(id -> new LeaderChangeMessage.Voter().setVoterId(id)).toList();
    }

    private static List<Integer> ids(List<LeaderChangeMessage.Voter> voters) {
        return voters.stream().map(LeaderChangeMessage.Voter::voterId).sorted().toList();
    }
}
