"""Cluster and node configuration, and profiles: named sets of model options.

Where the KIP text and an implementation differ, or where a deliberately faulty variant is
wanted, the model has one named option; a profile is a set of option values. Handlers read
options, they are never copied to vary.
"""

from collections.abc import Iterable
from typing import NamedTuple

import msgspec

from model.choices import CHOICE_POINTS, Choices, Picks, alternatives, with_picks


class ConfigError(ValueError):
    """A configuration that cannot describe a KRaft cluster; the message names what is wrong."""


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """Switches the handlers consult. The defaults are KIP-595 as written."""

    # FETCH-REQ-3A: "at_most" = the largest epoch <= LastFetchedEpoch (Kafka's semantics, the
    # model's reading); "below" = strictly below it, as the KIP's text literally says, which lets
    # a follower truncate committed records (the checker shows SAFE-9 and SAFE-6 break).
    diverging_epoch: str = "at_most"
    # FETCH-REQ-6: most records in one Fetch response; 0 sends all (Kafka bounds it by MaxBytes).
    fetch_max_records: int = 0
    # ELECT-4, VOTE-LOG-1: what a Vote request's LastOffset is. "last-record": the offset of the
    # candidate's last record, -1 for an empty log, as the KIP's schema says; "end-offset": its log
    # end offset (the next offset), as Kafka sends and reads it (KafkaRaftClient.buildVoteRequest,
    # handleVoteRequest, which answers INVALID_REQUEST to a negative one).
    vote_last_offset: str = "last-record"
    # BOOT-1, OBS-2 for voters too (KIP-853, Kafka 3.9 on): every replica that knows no leader,
    # voter or observer, looks for one by fetching from a voter, from its start on, and again on
    # its request timer and as soon as a Fetch is answered without naming one, as an observer does
    # (KafkaRaftClient.pollUnattachedCommon, maybeSendFetchToAnyBootstrap). A node starts as one
    # coming back from an empty persisted state, so its first Fetch is seen.
    unattached_discovery: bool = False
    # BOOT-1 at a voter, before KIP-853 (Kafka 3.3 to 3.8). False: a voter that knows no leader on
    # starting sends Fetch to the voters until its election timer expires (the KIP); True: it sends
    # nothing, on starting or later, and stands when its election timer expires, while an observer
    # fetches (KafkaRaftClient.pollUnattached: pollUnattachedAsVoter only waits). As under
    # unattached_discovery, a node starts down, so that what it sends on starting is seen.
    unattached_voter_waits: bool = False
    # OBS-2: which voters "a random voter" ranges over. False: the other voters (the model's
    # reading); True: every voter, the node itself included, as Kafka's bootstrap list of static
    # voters does (RequestManager.findReadyBootstrapServer), so a node may fetch from itself.
    discovery_includes_self: bool = False
    # QSTATE-1: whether the quorum-state file keeps the vote once a leader is known in the epoch.
    # True: the KIP's file holds both (and Kafka 4.x's); False: Kafka 3.x keeps the leader alone
    # (ElectionState.withElectedLeader), and a follower never grants a vote in its epoch anyway.
    vote_kept_with_leader: bool = True
    # QSTATE-1 at the leader itself. True: its file keeps its vote for itself beside its
    # leadership (the KIP's file holds both); False: leadership alone, as Kafka's leader writes it
    # (LeaderState.election: withElectedLeader(epoch, localId, Optional.empty()), 3.9 and 4.x).
    leader_keeps_vote: bool = True
    # QSTATE-4 for a file holding a leader and the node's own vote (a candidate that then
    # followed another's leadership in its epoch). False: it follows that leader (the model's
    # reading); True: it stands again as candidate of that epoch, as Kafka 4.x's
    # QuorumState.initialize checks isVotedCandidate before hasLeader.
    restart_candidate_first: bool = False
    # VOTE-REQ-3 at a follower that keeps its vote (vote_kept_with_leader): a Vote again from the
    # candidate it voted for. False: granted again, the vote it gave (the model's reading); True:
    # refused, as a Kafka follower refuses every standard Vote (FollowerState.canGrantVote).
    follower_refuses_votes: bool = False
    # HW-1..4: whether a node may not know its high watermark (-1 on the wire and when observed).
    # False: it starts at 0 and a new leader keeps the one it had (the model's reading); True:
    # unknown after a start, at a resigned leader, and at a new leader until it commits in its epoch, as Kafka's
    # EpochState.highWatermark() (an Optional) is; a follower keeps its own when the leader's is
    # unknown (KafkaRaftClient.updateFollowerHighWatermark).
    unknown_high_watermark: bool = False
    # COMMON-2 against a top-level error (INCONSISTENT_CLUSTER_ID): False: the response still
    # carries the responder's leader and epoch (the model's reading of "every response");
    # True: it carries the error alone, every other field at its schema default, as Kafka answers
    # a request it rejects before reading its partitions (e.g. `new VoteResponseData().setErrorCode`).
    top_level_error_alone: bool = False
    # PROGRESS-1: a leader that no majority fetched from within the check-quorum timeout.
    # False: it starts an election (the model's reading); True: it resigns, sending EndQuorumEpoch
    # (KafkaRaftClient.pollLeader: timeUntilCheckQuorumExpires == 0 -> transitionToResigned).
    progress_timeout_resigns: bool = False
    # PROGRESS-1: when the leader's count of voters that fetched starts again. False: when the
    # timeout fires (the model's reading: "within the timeout"); True: as soon as a majority has
    # fetched, the timer restarting with it, so a timeout that fires finds no majority since
    # (LeaderState.updateCheckQuorumForFollowingVoter).
    check_quorum_resets_on_majority: bool = False
    # QSTATE-4: a node restarted from a quorum-state file naming itself leader is resigned.
    # False: it sends nothing; True: it sends EndQuorumEpoch, with no preferred successor, to the
    # other voters (QuorumState.initialize -> ResignedState; KafkaRaftClient.pollResigned).
    restart_resigned_ends_epoch: bool = False
    # END-SEND-2: whether a resigned node re-sends its EndQuorumEpoch. False: never (the KIP);
    # True: to every other voter that has not acknowledged it (an answer without error in its
    # epoch), on its request timer, naming the same successors (KafkaRaftClient.pollResigned:
    # maybeSendRequests to ResignedState.unackedVoters; handleEndQuorumEpochResponse ->
    # acknowledgeResignation). When its election timer fires it stands and re-sends nothing: a
    # request still in flight then has not timed out (a node whose request timer would expire
    # first declines that timer: LateRequestTimeout).
    resigned_resends_end_epoch: bool = False
    # COMMON-3 for a response to a request the node no longer awaits (a Fetch other than the one
    # in flight, a Vote from an earlier candidacy, a BeginQuorumEpoch or EndQuorumEpoch from an
    # earlier leadership or resignation, a second answer from a voter to one election). False: its
    # leader and epoch are still taken (the model's reading); True: it is dropped unread, as Kafka's
    # RequestManager forgets every request on a change of state (resetConnections), keeps one in
    # flight per node, and drops a response it does not expect.
    stale_responses_ignored: bool = False
    # FETCH-RESP-3 with COMMON-3: a Fetch response that names the leader of the node's own epoch,
    # one it did not know. False: the node follows it and fetches again (the model's reading);
    # True: it follows it and takes the response as its leader's at once (appends its records, or
    # truncates on its DivergingEpoch), "so an observer discovers the leader and appends in the
    # same Fetch" (KafkaRaftClient.maybeHandleCommonResponse).
    discovery_appends: bool = False
    # OBS-1, RETRY-1: what a fetcher does when its Fetch goes unanswered. False: an observer's
    # fetch timeout forgets the leader and discovers it again, a follower's request timeout
    # re-sends to the leader (the model's reading); True: both keep the leader and send the
    # Fetch to a voter picked as in discovery (OBS-2), the leader and the node itself included;
    # an observer whose fetch timer expired (its Fetch still in flight: once that times out) goes
    # on so after every error answer, its timer not armed again, until a Fetch succeeds
    # (NodeState.fetch_stalled; RequestManager.findReadyBootstrapServer waits for the request in flight) (KafkaRaftClient.
    # pollFollowerAsObserver: hasFetchTimeoutExpired, maybeSendFetchToBestNode ->
    # maybeSendFetchToAnyBootstrap; handleFetchResponse -> resetFetchTimeout).
    stalled_fetch_any_voter: bool = False
    # RETRY-1 at an observer whose Fetch to its leader timed out, its fetch timer not expired
    # (with stalled_fetch_any_voter). False: the Fetch goes to a voter picked as in discovery;
    # True: it goes there and to the leader as well, two Fetches in flight (Kafka 3.3 to 3.7:
    # pollFollowerAsObserver sends to any voter, then resets the leader's connection, which the
    # next poll finds ready; 3.8 waits while any request is in flight, hasAnyInflightRequest).
    observer_refetches_leader: bool = False
    # COMMON-2 for a refused Fetch (an epoch or leadership error, COMMON-4). False: the response
    # carries the responder's high watermark (the model's reading of "every response"); True:
    # -1, as Kafka builds every refused Fetch's response without one
    # (KafkaRaftClient.tryCompleteFetchRequest -> buildEmptyFetchResponse(error, Optional.empty())).
    refused_fetch_without_high_watermark: bool = False
    # ELECT-1..4 with KIP-996's pre-vote (Kafka 4.x). False: a voter whose timer fires stands at
    # once in a bumped epoch (the KIP); True: it first becomes prospective, in its own epoch and
    # keeping its leader and vote, with nothing persisted, and asks every other voter with a Vote
    # whose PreVote is true; it stands (bumps the epoch) only once a majority, itself included,
    # grants, and otherwise goes back to following the leader it knew, or unattached. A pre-vote
    # never binds the voter's vote; it is granted to an up-to-date log by every voter except a
    # leader and a follower that has fetched from its leader since it started following
    # (QuorumState.transitionToProspective, KafkaRaftClient.handleVoteRequest,
    # FollowerState.canGrantVote, KafkaRaftClient.prospectiveTransitionAfterElectionLoss).
    pre_vote: bool = False
    # VOTER-ONLY-1, VOTE-REQ-4A, END-REQ-4 and COMMON-4's INCONSISTENT_VOTER_SET (KIP-853, Kafka
    # 3.9 on). False: a request naming a candidate, leader or successor outside the voter set, or
    # sent to an observer, is refused INCONSISTENT_VOTER_SET (the KIP); True: nothing checks
    # membership, since the voter set can change under a replica: an observer answers a Vote as a
    # voter does, and a candidate or leader outside the set is answered as any other
    # (KafkaRaftClient.handleVoteRequest, handleBeginQuorumEpochRequest and
    # handleEndQuorumEpochRequest have no voter-set check).
    voter_set_unchecked: bool = False
    # VOTER-ONLY-1, VOTE-REQ-4A, COMMON-4 with voter_set_unchecked: Kafka 3.3 to 3.7 check
    # membership in one place (KafkaRaftClient.validateVoterOnlyRequest). True: a Vote,
    # BeginQuorumEpoch or EndQuorumEpoch received by an observer, or naming a candidate or leader
    # outside the voter set, is refused INCONSISTENT_VOTER_SET once its cluster id, its impossible
    # values and a stale epoch (FENCED_LEADER_EPOCH) are checked, before it changes anything.
    voter_set_checked_late: bool = False
    # END-REQ-3..6: what an EndQuorumEpoch tells a voter. False: only a follower of that leader
    # acts on it, others refuse it (UNKNOWN_LEADER_EPOCH, INCONSISTENT_VOTER_SET); True: it is news
    # of its leader, as any request naming one: a larger epoch, or an unknown leader of the
    # node's own epoch, is adopted (the node follows the resigning leader) and the request
    # answered NONE; a voter that is not a preferred successor waits the longest backoff, one
    # place past the last successor (handleEndQuorumEpochRequest -> maybeTransition,
    # endEpochElectionBackoff).
    end_epoch_as_news: bool = False
    # BEGIN-REQ-3, END-REQ-3, COMMON-4: a BeginQuorumEpoch or EndQuorumEpoch naming another leader
    # for an epoch whose leader the node knows, naming the node itself as leader of an epoch it
    # does not lead (any epoch but its own, or its own while it is not its leader), or an
    # EndQuorumEpoch whose leader it would follow but cannot reach (outside its voter set, so
    # without an endpoint). False: refused (INVALID_QUORUM_STATE, UNKNOWN_LEADER_EPOCH,
    # INVALID_REQUEST for itself named); True: Kafka throws in maybeTransition ("is inconsistent
    # with current leader": hasConsistentLeader, which for the node's own id asks isLeader) or
    # transitionToFollower ("matches the local node.id"), and the node stops, while a leader named
    # in its own epoch answers NONE: a Kafka bug, class (d), the KIP refuses such a request.
    conflicting_leader_fatal: bool = False
    # BEGIN-REQ-1, FETCH-RESP-4, BOOT-2: a cluster-id conflict in a BeginQuorumEpoch or a Fetch
    # response. True: fatal, the node shuts down (the KIP); False: the request is answered
    # INCONSISTENT_CLUSTER_ID and the response taken as a failed Fetch, sent again elsewhere, as
    # Kafka does (handleBeginQuorumEpochRequest, handleTopLevelError; KAFKA-12465, class (d)).
    cluster_id_conflict_fatal: bool = True
    # COMMON-3 for a response refused INVALID_REQUEST in the node's own epoch, naming no leader it
    # would follow. False: taken as any other error (the model's reading); True: fatal, the node
    # stops, as Kafka throws "Received unexpected invalid request error"
    # (KafkaRaftClient.maybeHandleCommonResponse, for Vote, BeginQuorumEpoch, EndQuorumEpoch and
    # Fetch responses; an earlier epoch's is dropped first, a later one's followed).
    invalid_request_response_fatal: bool = False
    # HW-4: a Fetch response whose high watermark (bounded by the log end) is below the one the
    # follower knows. False: the follower takes it (the model's reading); True: fatal, the node
    # stops, as Kafka throws "Non-monotonic update of high watermark"
    # (KafkaRaftClient.updateFollowerHighWatermark -> FollowerState.updateHighWatermark).
    high_watermark_regression_fatal: bool = False
    # DESCRIBE-REQ-1 at a non-leader. False: NOT_LEADER_OR_FOLLOWER with the leader and epoch it
    # knows (COMMON-2); True: with leader 0 and epoch 0, the schema's defaults, as Kafka builds it
    # (DescribeQuorumResponse.singletonErrorResponse; class (d)).
    describe_refusal_defaults: bool = False
    # OBS-1: whether an observer acts on its fetch timeout. True: it does (the KIP); False: it has
    # none, as Kafka 4.x's observer (KafkaRaftClient.pollFollowerAsObserver): a stalled Fetch is
    # replaced on the request timeout.
    observer_fetch_timeout: bool = True
    # VOTE-RESP-3: the LeaderChange control record's fields. False: the KIP's {LeaderId, VotedIds};
    # True: Kafka's {Version, LeaderId, Voters, GrantingVoters}, the voter set beside the voters that
    # granted the election (LeaderState.appendStartOfEpochControlRecords; the Voter structs' ids).
    leader_change_lists_voters: bool = False
    # RETRY-1, BEGIN-RESP-1 at a leader whose BeginQuorumEpoch timer fired. False: re-sent to the
    # voters that have not acknowledged it (the model's reading); True: sent to every other voter,
    # a heartbeat whether or not it acknowledged (KafkaRaftClient.maybeSendBeginQuorumEpochRequests
    # to every voter key but its own; LeaderState.resetBeginQuorumEpochTimer).
    begin_epoch_heartbeat: bool = False
    # BEGIN-RESP-2: which Fetch from a voter acknowledges the leader (it is then sent no more
    # BeginQuorumEpoch, begin_epoch_heartbeat off). False: any in the leader's epoch (the model's
    # reading); True: one the leader serves from its log, not one it answers with a DivergingEpoch
    # (KafkaRaftClient.tryCompleteFetchRequest calls LeaderState.updateReplicaState, which sets
    # hasAcknowledgedLeader, for a valid offset only). Every release reads it so; from 3.9 the
    # leader sends its BeginQuorumEpoch to every voter, so it shows only in kafka-3.8 and kafka-3.7.
    served_fetch_acknowledges: bool = False
    # FETCH-RESP-1..5 at a follower or observer whose Fetch is answered with an error Kafka does
    # not expect (a top-level error such as INCONSISTENT_CLUSTER_ID where that is not fatal, or a
    # partition error other than FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER and
    # UNKNOWN_LEADER_EPOCH in an answer of the node's epoch). False: the Fetch goes again to the
    # leader (the model's reading); True: the connection to the voter that answered backs off and
    # the Fetch goes to another voter picked as in discovery (OBS-2) (handleUnexpectedError returns false ->
    # RequestManager.onResponseResult; maybeSendFetchToBestNode: isBackingOff(leader) ->
    # maybeSendFetchToAnyBootstrap).
    unexpected_fetch_error_elsewhere: bool = False
    # ELECT-3, QSTATE-4 for the only voter of its quorum. False: on start-up it waits for its
    # election timer as any voter (the model's reading); True: it stands at once, from the epoch
    # its files give (a resigned leader's, a candidate's own), and, a majority by itself, leads
    # (KafkaRaftClient's constructor: "When there is only a single voter, become candidate
    # immediately" (3.9) / transitionToProspective (4.x); onBecomeCandidate -> maybeTransitionToLeader).
    sole_voter_stands_at_start: bool = False
    # FETCH-RESP-2 where the fetcher's log holds no record of DivergingEpoch.Epoch. False: it
    # truncates to the smaller of EndOffset and the start of its first epoch above Epoch (the
    # rule); True: to that start alone, keeping what lies below it past EndOffset for the next
    # Fetch to settle (ReplicatedLog.truncateToEndOffset: the local endOffsetForEpoch is taken
    # whole unless its epoch is the leader's; every Kafka release from 3.3 on).
    truncate_by_own_epochs: bool = False
    # END-REQ-4..6 at a voter that EndQuorumEpoch does not list among the PreferredSuccessors
    # (Options.end_epoch_as_news). False: it waits the longest backoff, one place past the last
    # successor (Kafka 3.9 on); True: it stands at once, as the first successor does (Kafka 3.3 to
    # 3.8: endEpochElectionBackoff returns 0 for a position <= 0, indexOf's -1 included).
    end_epoch_unlisted_first: bool = False
    # END-REQ-6: how long a preferred successor at place N > 0 of S waits before it stands. False:
    # min(retry_backoff_max_ms, retry_backoff_ms * 2^(N-1)) (the KIP); True: Kafka's strict
    # exponential backoff, min(election_backoff_max_ms, (election_backoff_max_ms >> (S-1)) << (N-1)),
    # and a voter past the last place the whole election_backoff_max_ms
    # (KafkaRaftClient.endEpochElectionBackoff -> strictExponentialElectionBackoffMs, every release
    # from 3.3 on; its fetch timer is overridden with it, FollowerState.overrideFetchTimeout).
    successor_backoff_strict: bool = False
    # BEGIN-REQ-4, END-REQ-3 for a leader outside the voter set (before KIP-853, Kafka knows an
    # endpoint for voters only). False: it is followed (voter_set_unchecked) or refused (the KIP);
    # True: it is taken as no leader at all: a larger epoch is adopted without one, the node's own
    # epoch left as it is, and the request answered NONE (KafkaRaftClient 3.3 to 3.8:
    # lastVoterSet().voterNode(leaderId) is empty, maybeTransition(Optional.empty(), epoch)).
    leader_outside_voters_ignored: bool = False
    # FETCH-SEND-1: the MaxWaitMs a fetcher's Fetch carries, how long the leader may hold it when
    # nothing is new. 0: it asks to be answered at once (the field is then not carried: the KIP
    # names the field and says nothing of its use); Kafka's followers and observers ask 500
    # (KafkaRaftClient.buildFetchRequest: setMaxWaitMs(fetchMaxWaitMs), MAX_FETCH_WAIT_MS).
    fetch_max_wait_ms: int = 0
    # FETCH-REQ-7: a Fetch that asks to wait (MaxWaitMs above 0) and finds nothing new: no error,
    # no records, no DivergingEpoch (and, under fetch_carries_high_watermark, no newer high
    # watermark). False: answered at once (the model's reading); True: the leader holds it
    # (NodeState.held, model/held.py) and answers it afresh once records are appended past its
    # offset, NOT_LEADER_OR_FOLLOWER when it resigns or follows a leader, or as it would have been
    # answered on arrival when its wait runs out, the fetch_wait timer (KafkaRaftClient.
    # handleFetchRequest -> fetchPurgatory.await; updateLeaderEndOffsetAndTimestamp ->
    # maybeComplete; transitionToResigned and onBecomeFollower -> completeAllExceptionally).
    held_fetches: bool = False
    # FETCH-SEND-1, FETCH-REQ-7 with KIP-1166 (Kafka 4.1 on). False: a Fetch carries no high
    # watermark; True: it carries the fetcher's (-1 where it knows none), the leader answers at
    # once when its own is above it, and answers every held Fetch afresh when its high watermark
    # moves (buildFetchRequest: setHighWatermark; handleFetchRequest: isHighWatermarkUpdated;
    # onUpdateLeaderHighWatermark -> fetchPurgatory.completeAll).
    fetch_carries_high_watermark: bool = False
    # Faulty variants, each breaking one rule on purpose (the checker must find them).
    hw_any_epoch: bool = False  # HW-1 ignored: commit entries of earlier epochs by counting
    vote_without_log_check: bool = False  # VOTE-REQ-4B: grant without the up-to-date check
    forget_vote_on_restart: bool = False  # QSTATE-3: VotedId not persisted across restart
    truncate_to_hw: bool = False  # K101-3: a new follower truncates to its high watermark
    skip_leader_change: bool = False  # VOTE-RESP-3: no LeaderChange record on election
    # Liveness variants: each breaks no safety property, only a LIVE-* rule (check --liveness).
    leader_never_resigns: bool = False  # PROGRESS-1: no check-quorum timer, as Kafka 3.3 to 3.6 (KAFKA-15489)
    candidate_never_backs_off: bool = False  # ELECT-2: a candidate out of time asks again in its epoch
    prospective_never_gives_up: bool = False  # KIP-996: a prospective refused or out of time asks again


PROFILES: dict[str, Options] = {
    "kip595": Options(),
    "kip595-literal-diverging": Options(diverging_epoch="below"),
    # Apache Kafka 3.9 (adapters/kafka/README.md): KIP-595 with Kafka's readings of what the KIP
    # leaves open and the later KIPs it implements.
    "kafka-3.9": Options(
        vote_last_offset="end-offset", unattached_discovery=True, discovery_includes_self=True, vote_kept_with_leader=False, unknown_high_watermark=True,
        top_level_error_alone=True, progress_timeout_resigns=True, restart_resigned_ends_epoch=True, resigned_resends_end_epoch=True,
        stale_responses_ignored=True, discovery_appends=True, stalled_fetch_any_voter=True, refused_fetch_without_high_watermark=True,
        check_quorum_resets_on_majority=True, voter_set_unchecked=True, end_epoch_as_news=True, conflicting_leader_fatal=True,
        cluster_id_conflict_fatal=False, describe_refusal_defaults=True, invalid_request_response_fatal=True, high_watermark_regression_fatal=True,
        leader_change_lists_voters=True, begin_epoch_heartbeat=True, unexpected_fetch_error_elsewhere=True, sole_voter_stands_at_start=True,
        truncate_by_own_epochs=True, fetch_max_wait_ms=500, held_fetches=True, successor_backoff_strict=True,
    ),
}
# Apache Kafka 4.x: Kafka 3.9's readings, with pre-vote (KIP-996), a follower's vote kept in the
# quorum-state file beside its leader (ElectionState.withElectedLeader's votedKey), and a restart
# that stands again on its own vote first. Kafka 4.1 on (kafka-4.3) adds KIP-1166, the fetcher's
# high watermark in its Fetch; 4.0 and 4.3 differ otherwise at a choice point only (PINS: a 4.0
# candidate that lost still backs off for a random time).
PROFILES["kafka-4.0"] = msgspec.structs.replace(
    PROFILES["kafka-3.9"],
    pre_vote=True,
    vote_kept_with_leader=True,
    leader_keeps_vote=False,
    restart_candidate_first=True,
    observer_fetch_timeout=False,
    follower_refuses_votes=True,
)
PROFILES["kafka-4.3"] = msgspec.structs.replace(PROFILES["kafka-4.0"], fetch_carries_high_watermark=True)
# Apache Kafka 3.8, before KIP-853: a voter that knows no leader waits for its election timer
# (pollUnattachedAsVoter) instead of fetching, the leader re-sends BeginQuorumEpoch only to the
# voters that have not acknowledged it (pollLeader: state.nonAcknowledgingVoters()), a voter an
# EndQuorumEpoch does not list stands at once, and a leader outside the voter set has no endpoint.
PROFILES["kafka-3.8"] = msgspec.structs.replace(
    PROFILES["kafka-3.9"],
    unattached_discovery=False,
    unattached_voter_waits=True,
    begin_epoch_heartbeat=False,
    served_fetch_acknowledges=True,
    end_epoch_unlisted_first=True,
    leader_outside_voters_ignored=True,
)
# Apache Kafka 3.7: 3.8's readings, with the voter set checked where KIP-595 has it checked, in
# one place after the epoch (validateVoterOnlyRequest), and an observer's timed-out Fetch sent
# to its leader again beside the voter it picks. Kafka 3.3 to 3.6 are 3.7 without the
# leader's check-quorum (KAFKA-15489, fixed in 3.7.0): a defect, so they are judged under this profile.
PROFILES["kafka-3.7"] = msgspec.structs.replace(PROFILES["kafka-3.8"], voter_set_checked_late=True, observer_refetches_leader=True)

class Pin(NamedTuple):
    """A choice point a release resolves one way, always: the alternative, and the code that makes it so."""

    alternative: str
    why: str


# What Kafka's raft client does at the choice points where it has one behaviour
# (KafkaRaftClient in kafka-raft 3.9.1 and 4.3.1; 3.7.2 and 3.8.1 have the same code at each). Left open: OBS-2 (RequestManager.
# findReadyBootstrapServer starts at a random bootstrap voter), BEGIN-RESP-1 (LeaderState's
# beginQuorumEpochTimer, half the fetch timeout, may or may not have fired when a request times
# out), ELECT-6 in 3.9 (binaryExponentialElectionBackoffMs: a random backoff, 0 included);
# END-REQ-3, VOTE-REQ-4A, VOTE-REQ-4C, VOTER-ONLY-1B and BOOT-1B are never consulted under these
# profiles (conflicting_leader_fatal, voter_set_unchecked, unattached_discovery). COMMON-3B is not
# Kafka's choice but the wire's: which of two identical requests a response answers. COMMON-3 stays open too: Kafka follows what a Vote response names
# (maybeHandleCommonResponse runs before handleVoteResponse looks at the role), but the Fetch an
# unattached voter then sends waits for a ready connection (RequestManager.isReady), so at that
# step its outputs are the candidate-only reading's. FETCH-REQ-3A is the log's answer, not the
# client's: ReplicatedLog.validateOffsetAndEpoch -> endOffsetForEpoch, which the server's log
# (KafkaMetadataLog over LeaderEpochFileCache.endOffsetFor) answers last-fetched-epoch and the
# raft module's MockLog zero. ELECT-2B (4.x) stays open: prospectiveTransitionAfterElectionLoss
# goes unattached with its election timer run out, so the next poll stands again, and what the
# poll between handles depends on what was queued.
_KAFKA_PINS = {
    "FETCH-REQ-5": Pin("epoch-first", "KafkaRaftClient.validateLeaderOnlyRequest: FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, then NOT_LEADER_OR_FOLLOWER"),
    "FETCH-REQ-3": Pin("none", "KafkaRaftClient.tryCompleteFetchRequest: buildFetchResponse(Errors.NONE, ...) with the DivergingEpoch set"),
    "VOTER-ONLY-1": Pin("follow", "KafkaRaftClient.handleBeginQuorumEpochRequest -> maybeTransition -> transitionToFollower, with no voter check"),
    "COMMON-4": Pin(
        "offsets-first",
        "KafkaRaftClient.handleFetchRequest and handleVoteRequest refuse impossible offsets and last epochs (INVALID_REQUEST) before "
        "validateLeaderOnlyRequest / validateVoterOnlyRequest check the epoch, which then check the ids named (candidate, leader)",
    ),
    "END-REQ-5": Pin("before-standing", "KafkaRaftClient.handleEndQuorumEpochRequest answers as the follower it still is; it stands on its next poll (pollFollowerAsVoter)"),
    "VOTE-REQ-3A": Pin("refuse", "FollowerState.canGrantVote never grants a standard vote; UnattachedState refuses once it knows a leader"),
    "FETCH-RESP-3": Pin("ignore", "RequestManager.isResponseExpected: one request in flight per node, a late response dropped"),
    "COMMON-4B": Pin("by-field", "KafkaRaftClient answers Errors.INVALID_REQUEST for every impossible value it checks (handleVoteRequest, validateVoterOnlyRequest, handleFetchRequest)"),
    "END-REQ-3B": Pin("impossible", "KafkaRaftClient.handleEndQuorumEpochRequest -> validateVoterOnlyRequest: a negative leader id is INVALID_REQUEST"),
    "QSTATE-4B": Pin("stand", "QuorumState.initialize: a file whose vote is the node's own resumes a CandidateState"),
    "RETRY-1": Pin("votes", "KafkaRaftClient.maybeSendVoteRequests re-sends to every voter that has not answered once its request times out (RequestManager.isReady)"),
}
PINS: dict[str, dict[str, Pin]] = {
    "kafka-3.7": _KAFKA_PINS,
    "kafka-3.8": _KAFKA_PINS,
    "kafka-3.9": _KAFKA_PINS,
    "kafka-4.0": _KAFKA_PINS,  # ELECT-6 open: pollCandidate backs off a random time (isBackingOff) before transitionToProspective
    "kafka-4.3": _KAFKA_PINS
    | {"ELECT-6": Pin("after-backoff", "KafkaRaftClient.pollCandidate: a candidate that lost waits its election timeout, then becomes prospective (no backoff from 4.1)")},
}


def pinned(profile_name: str) -> Picks:
    """The choices a profile's release makes one way, as picks."""
    return tuple(sorted((name, pin.alternative) for name, pin in PINS.get(profile_name, {}).items()))


FAULTY_PROFILES: dict[str, Options] = {
    "faulty-hw-any-epoch": Options(hw_any_epoch=True),
    "faulty-vote-no-log-check": Options(vote_without_log_check=True),
    "faulty-forget-vote": Options(forget_vote_on_restart=True),
    "faulty-truncate-to-hw": Options(truncate_to_hw=True),
    "faulty-no-leader-change": Options(skip_leader_change=True),
    # The LeaderChange record is what keeps a new leader's first commit inside its own epoch
    # when whole logs are replicated at once; without it the weakened HW rule breaks safety.
    "faulty-no-leader-change-hw-any-epoch": Options(skip_leader_change=True, hw_any_epoch=True),
    # Liveness bugs (tests/test_liveness_mutants.py): a leader cut off from the voters leads for
    # ever; two candidates of one epoch ask each other again and again; a prospective keeps
    # asking a leader it could follow.
    "faulty-leader-never-resigns": Options(leader_never_resigns=True),
    "faulty-candidate-never-backs-off": Options(candidate_never_backs_off=True),
    "faulty-prospective-never-gives-up": Options(pre_vote=True, prospective_never_gives_up=True),
}


def profile(name: str) -> Options:
    """The options of a named profile (faulty variants included)."""
    known = PROFILES | FAULTY_PROFILES
    if name not in known:
        raise ConfigError(f"unknown profile {name!r}; known profiles: {', '.join(sorted(known))}")
    return known[name]


class Timing(msgspec.Struct, frozen=True, kw_only=True):
    """The KIP's quorum.* timing configuration, in milliseconds (used only in emitted timers)."""

    fetch_timeout_ms: int = 2000
    election_timeout_ms: int = 1000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    retry_backoff_max_ms: int = 1000


class OptionsRead:
    """A node's options that note which of them are read: put in a NodeConfig's place of its
    Options, they tell which options a step depended on. The model is deterministic, so a step
    that never read an option steps the same whatever its value (what the corpus search and the
    deviation search skip on)."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> object:
        self.read.add(name)
        return getattr(self.options, name)


class NodeConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What one node knows statically: who it is, the voters, its cached cluster id, options."""

    node_id: int
    voters: tuple[int, ...]
    observers: tuple[int, ...] = ()
    cluster_id: str | None = "kraft-cluster"
    options: Options = Options()
    timing: Timing = Timing()
    choices: Choices = Choices()  # where the KIP allows several behaviours, which one this node takes (model/choices.py)

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def replicas(self) -> tuple[int, ...]:
        """Voters then observers: the order of the leader's per-replica progress."""
        return self.voters + self.observers


class ClusterConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A cluster: its voters, observers, shared cluster id and profile."""

    voters: tuple[int, ...]
    observers: tuple[int, ...] = ()
    cluster_id: str | None = "kraft-cluster"
    profile: str = "kip595"
    timing: Timing = Timing()
    fetch_max_records: int = 0  # overrides the profile's Options.fetch_max_records when set
    # Alternatives every node takes instead of the model's default reading (a search's reading:
    # OBS-2=one-voter:0 sends a discovery Fetch to one voter, as Kafka does, not to each); the
    # profile's pins hold over them.
    choices: Picks = ()

    def __post_init__(self) -> None:
        validate_members(self.voters, self.observers)
        profile(self.profile)

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.voters + self.observers

    @property
    def options(self) -> Options:
        chosen = profile(self.profile)
        if self.fetch_max_records:
            chosen = msgspec.structs.replace(chosen, fetch_max_records=self.fetch_max_records)
        return chosen

    def node(self, node_id: int) -> NodeConfig:
        """The static configuration of one member."""
        if node_id not in self.nodes:
            raise ConfigError(f"node {node_id} is neither a voter {list(self.voters)} nor an observer {list(self.observers)}")
        return NodeConfig(
            node_id=node_id,
            voters=self.voters,
            observers=self.observers,
            cluster_id=self.cluster_id,
            options=self.options,
            timing=self.timing,
            choices=with_picks(Choices(self.choices), pinned(self.profile)),
        )


def validate_members(voters: tuple[int, ...], observers: tuple[int, ...]) -> None:
    """Reject member lists that no cluster can have."""
    if not voters:
        raise ConfigError("the voter set is empty: a quorum needs at least one voter")
    members = list(voters) + list(observers)
    negative = sorted(n for n in members if n < 0)
    if negative:
        raise ConfigError(f"node ids must be non-negative, got {negative}")
    duplicates = sorted({n for n in members if members.count(n) > 1})
    if duplicates:
        raise ConfigError(f"duplicate node ids {duplicates} (a node is either one voter or one observer)")


SETTINGS = ("fetch_max_records",)  # options a trace's setting fixes (ClusterConfig.fetch_max_records): no reading of a profile


def other_readings(config: NodeConfig) -> dict[str, NodeConfig]:
    """How an implementation of the node's profile could read it otherwise, by name: each option in
    which the profile departs from the KIP's reading (Options()) set back alone ("option NAME
    flipped"), and each alternative its release does not take at a point it pins ("POINT=ALT").
    A corpus of the profile has power only if each of them fails some of its traces."""
    kip, found = Options(), {}
    for field in Options.__struct_fields__:
        value = getattr(kip, field)
        if field not in SETTINGS and getattr(config.options, field) != value:
            found[f"option {field} flipped"] = msgspec.structs.replace(config, options=msgspec.structs.replace(config.options, **{field: value}))
    for point, pinned_to in config.choices.picks:
        for other in alternatives(point, config.voters, config.node_id):
            if other != pinned_to:
                found[f"{point}={other}"] = msgspec.structs.replace(config, choices=with_picks(config.choices, ((point, other),)))
    return found


class Deviation(NamedTuple):
    """One way an implementation may read a profile otherwise: an option at a value another
    profile gives it ("option NAME=VALUE"), or a point the profile pins at another of its
    alternatives ("POINT=ALTERNATIVE"). A point the profile leaves open is no deviation: every
    alternative of it is allowed already."""

    name: str
    option: str  # the Options field it sets, "" for a pin
    point: str  # the choice point it pins, "" for an option
    value: str | bool  # the option's value or the point's alternative

    @property
    def key(self) -> str:
        """What it sets: two deviations with one key exclude each other."""
        return self.option or self.point


def deviations(profile_name: str) -> tuple[Deviation, ...]:
    """The catalogue of deviations from a profile, by name: every value the named profiles (PROFILES,
    not the faulty variants, which are bugs and not readings) give an option, other than this
    profile's; every other alternative of each point it pins."""
    kept = profile(profile_name)
    found = []
    for field in Options.__struct_fields__:
        if field not in SETTINGS:
            values = {getattr(options, field) for options in PROFILES.values()} - {getattr(kept, field)}
            found += [Deviation(f"option {field}={value}", field, "", value) for value in values]
    for point, pinned_to in pinned(profile_name):
        found += [Deviation(f"{point}={other}", "", point, other) for other in CHOICE_POINTS[point].alternatives if other != pinned_to]
    return tuple(sorted(found))


def read_with(config: NodeConfig, chosen: Iterable[Deviation]) -> NodeConfig:
    """A node's configuration read with the deviations chosen (at most one per key)."""
    chosen = tuple(chosen)
    options = msgspec.structs.replace(config.options, **{d.option: d.value for d in chosen if d.option})
    picks = tuple((d.point, d.value) for d in chosen if d.point)
    return msgspec.structs.replace(config, options=options, choices=with_picks(config.choices, picks))
