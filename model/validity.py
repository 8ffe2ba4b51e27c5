"""COMMON-4: requests no correct sender can produce, refused before they touch any state.

A negative epoch or offset, a leader id of -1 where a leader is named, a last epoch the
sender's own epoch could not have: followed, such a request would make a node adopt leader
-1 or an epoch it can never leave. Kafka answers them INVALID_REQUEST (KafkaRaftClient:
handleVoteRequest, validateVoterOnlyRequest, handleFetchRequest); a leader or successor
outside the voter set is a request "with inconsistent membership", INCONSISTENT_VOTER_SET.
"""

from typing import NamedTuple

from model.config import NodeConfig
from model.messages import BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, OffsetsForLeaderEpochRequest, VoteRequest
from model.transitions import last_record_offset
from spec import errors


class Refusal(NamedTuple):
    code: int
    of_offsets: bool  # an impossible offset or last epoch the request carries (not an id or epoch it names): COMMON-4's offsets-first


REFUSAL_CODES = {  # COMMON-4B's alternatives: any refusal the KIP defines, or INVALID_REQUEST
    "invalid-request": errors.INVALID_REQUEST,
    "inconsistent-voter-set": errors.INCONSISTENT_VOTER_SET,
    "fenced-leader-epoch": errors.FENCED_LEADER_EPOCH,
    "unknown-leader-epoch": errors.UNKNOWN_LEADER_EPOCH,
    "invalid-quorum-state": errors.INVALID_QUORUM_STATE,
}


def ahead_of_epoch_check(config: NodeConfig, refusal: Refusal | None, request_epoch: int, epoch: int) -> int | None:
    """The refusal's code (COMMON-4B), unless the request's epoch is stale and the node checks the
    epoch first (the COMMON-4 choice point): then the stale epoch's own refusal (COMMON-1) answers it."""
    if refusal is None:
        return None
    if request_epoch < epoch:
        order = config.choices.pick("COMMON-4")
        if not (order == "fields-first" or (order == "offsets-first" and refusal.of_offsets)):
            return None
    code = config.choices.pick("COMMON-4B")
    return refusal.code if code == "by-field" else REFUSAL_CODES[code]


def vote_refusal(config: NodeConfig, request: VoteRequest) -> Refusal | None:
    """The candidate's last record is of an earlier epoch than the one it stands in (it bumped it);
    a pre-vote's may be of the epoch it asks in."""
    if (
        request.LastOffsetEpoch < 0
        or request.LastOffsetEpoch > request.CandidateEpoch
        or (request.LastOffsetEpoch == request.CandidateEpoch and not request.PreVote)  # a pre-vote asks in the epoch it has
        or last_record_offset(config, request) < -1
    ):
        return Refusal(errors.INVALID_REQUEST, of_offsets=True)
    return Refusal(errors.INVALID_REQUEST, of_offsets=False) if request.CandidateEpoch < 0 or request.CandidateId < 0 else None


def leader_refusal(config: NodeConfig, leader_id: int, epoch: int, *, no_leader: bool = False) -> Refusal | None:
    """BeginQuorumEpoch and EndQuorumEpoch name a voter other than the receiver as leader (or,
    where `no_leader` allows it, none: a candidate's resignation, END-REQ-3B). The receiver
    itself named is left to the handler under Options.conflicting_leader_fatal (`names_self_wrongly`)."""
    if no_leader and leader_id == -1 and epoch >= 0:
        return None
    if epoch < 0 or leader_id < 0 or (leader_id == config.node_id and not config.options.conflicting_leader_fatal):
        return Refusal(errors.INVALID_REQUEST, of_offsets=False)
    return None if leader_id in config.voters or config.options.voter_set_unchecked else Refusal(errors.INCONSISTENT_VOTER_SET, of_offsets=False)


def begin_refusal(config: NodeConfig, request: BeginQuorumEpochRequest) -> Refusal | None:
    return leader_refusal(config, request.LeaderId, request.LeaderEpoch)


def end_refusal(config: NodeConfig, request: EndQuorumEpochRequest) -> Refusal | None:
    """LeaderId -1 is what the KIP's shutting-down candidate sends: refused as impossible (Kafka),
    or left to END-REQ-3 as a leader the voter does not know (the END-REQ-3B choice point)."""
    if request.ReplicaId < 0 or len(set(request.PreferredSuccessors)) != len(request.PreferredSuccessors):
        return Refusal(errors.INVALID_REQUEST, of_offsets=False)
    resignation = request.LeaderId == -1 and config.choices.pick("END-REQ-3B") == "unknown-leader"
    refusal = leader_refusal(config, request.LeaderId, request.LeaderEpoch, no_leader=resignation)
    if refusal is None and not set(request.PreferredSuccessors) <= set(config.voters) and not config.options.voter_set_unchecked:
        return Refusal(errors.INCONSISTENT_VOTER_SET, of_offsets=False)
    return refusal


def fetch_refusal(config: NodeConfig, request: FetchRequest) -> Refusal | None:
    """A fetcher's last fetched epoch is never above its own epoch."""
    if request.FetchOffset < 0 or request.LastFetchedEpoch < 0 or request.LastFetchedEpoch > request.CurrentLeaderEpoch:
        return Refusal(errors.INVALID_REQUEST, of_offsets=True)
    return Refusal(errors.INVALID_REQUEST, of_offsets=False) if request.CurrentLeaderEpoch < 0 else None


def offsets_refusal(config: NodeConfig, request: OffsetsForLeaderEpochRequest) -> int | None:
    """CurrentLeaderEpoch -1 asks for no epoch check (KIP-101); any other negative value is impossible."""
    return errors.INVALID_REQUEST if request.LeaderEpoch < 0 or request.CurrentLeaderEpoch < -1 else None
