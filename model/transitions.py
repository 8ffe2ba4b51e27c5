"""Role changes shared by the RPC handlers: each returns the new state and the outputs it causes.

Every change of epoch, leader or vote goes through here, so the quorum-state rules (QSTATE-2,
ELECT-4, VOTE-RESP-3, BEGIN-REQ-4, COMMON-3) are written once, and so are the rules of standing
(standing_rules).
"""

from typing import NamedTuple

import msgspec

from model import log as logs
from model.config import NodeConfig
from model.events import Committed, Output, Send, SetTimer, Shutdown, TimerKind
from model.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    LeaderChangeMessage,
    VoteRequest,
)
from model.state import NodeState, Role
from spec import errors

replace = msgspec.structs.replace

NO_OUTPUTS: tuple[Output, ...] = ()


class Transition(NamedTuple):
    """What one step did: the next state, the outputs, and the rule IDs of the branches taken."""

    state: NodeState
    outputs: tuple[Output, ...]
    rules: tuple[str, ...]


def as_sent(config: NodeConfig, response: object) -> object:
    """COMMON-2: a response as the node sends it; one carrying a top-level error carries nothing
    else under Options.top_level_error_alone (every other field at its schema default)."""
    if config.options.top_level_error_alone and response.ErrorCode != 0:
        return type(response)(ErrorCode=response.ErrorCode)
    return response


def enter_role(state: NodeState, role: Role, **changes: object) -> NodeState:
    """The state in a new role with every volatile role field cleared unless given."""
    cleared = {
        "granted": frozenset(),
        "refused": frozenset(),
        "endorsed": frozenset(),
        "fetched": frozenset(),
        "replica_offsets": (),
        "fetching": None,
        "fetched_from_leader": False,
        "fetch_stalled": False,
        "aside": None,
    }
    return replace(state, role=role, **(cleared | changes))


def awaits(state: NodeState, role: Role, epoch: int) -> bool:
    """Whether a response to a request sent in `role` and `epoch` is still awaited: the node is
    in that role and epoch still (Options.stale_responses_ignored drops any other, COMMON-3)."""
    return state.role == role and state.epoch == epoch


def dropped(config: NodeConfig, state: NodeState, awaited: bool) -> bool:
    """Options.stale_responses_ignored: a response is dropped unless it answers a request still
    awaited; after a restart or a change of role in the epoch (NodeState.returned) an awaited-looking
    one may answer an identical request of the earlier stay, which the node forgot (COMMON-3B)."""
    if not awaited:
        return True
    return state.returned and config.choices.pick("COMMON-3B") == "earlier"


def shut_down(state: NodeState, reason: str, rules: tuple[str, ...], sent: tuple[Output, ...] = NO_OUTPUTS) -> Transition:
    """A fatal error: the node stops, its volatile state gone, after sending `sent`, and says why."""
    return Transition(enter_role(state, Role.DOWN, high_watermark=0), sent + (Shutdown(reason=reason),), rules)


def names_self_wrongly(config: NodeConfig, state: NodeState, leader_id: int, epoch: int) -> bool:
    """Options.conflicting_leader_fatal: a BeginQuorumEpoch or EndQuorumEpoch names the node itself
    as leader of an epoch it does not lead, which Kafka cannot follow (hasConsistentLeader asks
    isLeader; transitionToFollower refuses the local id)."""
    return leader_id == config.node_id and not (state.role == Role.LEADER and epoch == state.epoch)


def refused_as_invalid(config: NodeConfig, state: NodeState, error: int, epoch: int, observed: object) -> bool:
    """Options.invalid_request_response_fatal: a response refused INVALID_REQUEST in the node's
    epoch, naming no leader it follows (`observed` None), is fatal (maybeHandleCommonResponse)."""
    return config.options.invalid_request_response_fatal and error == errors.INVALID_REQUEST and epoch == state.epoch and observed is None


def fetch_request(config: NodeConfig, state: NodeState) -> FetchRequest:
    """FETCH-SEND-1: a Fetch describing the end of the local log; how long it may wait
    (Options.fetch_max_wait_ms) and the fetcher's high watermark (KIP-1166) where the profile
    carries them."""
    options = config.options
    return FetchRequest(
        ClusterId=config.cluster_id,
        ReplicaId=config.node_id,
        MaxWaitMs=options.fetch_max_wait_ms or msgspec.UNSET,
        CurrentLeaderEpoch=state.epoch,
        FetchOffset=len(state.log),
        LastFetchedEpoch=logs.last_epoch(state.log),
        HighWatermark=state.high_watermark if options.fetch_carries_high_watermark else msgspec.UNSET,
    )


def send_fetch(config: NodeConfig, state: NodeState, *, any_voter: bool = False, backing_off: int = -1) -> tuple[NodeState, tuple[Output, ...]]:
    """Fetch from the known leader; with none known (or `any_voter`, the leader kept), from every
    other voter or from one (the OBS-2 choice point: "one-voter:N" is voter N, or the first
    other voter if N is not one), never from the voter `backing_off` (its connection failed)."""
    request = fetch_request(config, state)
    if state.leader_id != -1 and state.leader_id != config.node_id and not any_voter:
        targets: tuple[int, ...] = (state.leader_id,)
    else:
        targets = tuple(v for v in config.voters if v not in (config.node_id, backing_off))
        candidates = tuple(v for v in config.voters if v != backing_off) if config.options.discovery_includes_self else targets
        where = config.choices.pick("OBS-2") if candidates else "every-voter"
        if where != "every-voter":
            wanted = int(where.rpartition(":")[2])
            targets = (wanted if wanted in candidates else candidates[0],)
    return replace(state, fetching=request), tuple(Send(destination=t, message=request) for t in targets)


def become_follower(config: NodeConfig, state: NodeState, leader_id: int, epoch: int) -> tuple[NodeState, tuple[Output, ...]]:
    """Persist the leader and epoch, then fetch from it (BEGIN-REQ-4, COMMON-3)."""
    voted_id = state.voted_id if epoch == state.epoch and config.options.vote_kept_with_leader else -1
    log = state.log[: state.high_watermark] if config.options.truncate_to_hw else state.log
    role = Role.FOLLOWER if config.is_voter else Role.OBSERVER
    following = enter_role(state, role, epoch=epoch, leader_id=leader_id, voted_id=voted_id, log=log)
    return send_fetch(config, following)


def late_voter_set_refusal(config: NodeConfig, named_id: int, rule: str) -> tuple[str, ...]:
    """Options.voter_set_checked_late: the rules an INCONSISTENT_VOTER_SET refusal cites (the
    receiver an observer, or the candidate or leader it names, `rule`, outside the voter set),
    or () where the request passes."""
    if not config.options.voter_set_checked_late:
        return ()
    if not config.is_voter:
        return ("VOTER-ONLY-1",)
    return () if named_id in config.voters else (rule,)


def leader_membership(config: NodeConfig, state: NodeState, leader_id: int, epoch: int, rule: str) -> tuple[NodeState, tuple[str, ...], int, tuple[Output, ...]] | None:
    """A BeginQuorumEpoch or EndQuorumEpoch naming `leader_id`, as Kafka before KIP-853 takes it
    once its epoch is not stale: refused INCONSISTENT_VOTER_SET (Options.voter_set_checked_late),
    or a leader outside the voter set, for which it has no endpoint, taken as none, a larger epoch
    adopted without a leader (Options.leader_outside_voters_ignored; maybeTransition(Optional.empty())).
    The state, rules, error and outputs to answer with; None where neither applies."""
    outside = late_voter_set_refusal(config, leader_id, "COMMON-4")
    if outside:
        return state, outside, errors.INCONSISTENT_VOTER_SET, NO_OUTPUTS
    if not config.options.leader_outside_voters_ignored or leader_id in config.voters:
        return None
    taken, outputs = become_unattached(config, state, epoch) if epoch > state.epoch else (state, NO_OUTPUTS)
    return taken, (rule,), errors.NONE, outputs


def become_unattached(config: NodeConfig, state: NodeState, epoch: int, *, discover: bool = False) -> tuple[NodeState, tuple[Output, ...]]:
    """Adopt an epoch whose leader is unknown. Observers (and voters told to, unless
    Options.unattached_voter_waits) look for the leader."""
    voted_id = state.voted_id if epoch == state.epoch else -1
    role = Role.UNATTACHED if config.is_voter else Role.OBSERVER
    unattached = enter_role(state, role, epoch=epoch, leader_id=-1, voted_id=voted_id)
    if not config.is_voter or (discover and not config.options.unattached_voter_waits):
        return send_fetch(config, unattached)
    if config.options.unattached_discovery and config.choices.pick("FETCH-SEND-1") == "at-once":
        return send_fetch(config, unattached)
    return unattached, NO_OUTPUTS


def vote_request(config: NodeConfig, state: NodeState) -> VoteRequest:
    last_offset = len(state.log) - 1
    return VoteRequest(
        ClusterId=config.cluster_id,
        CandidateEpoch=state.epoch,
        CandidateId=config.node_id,
        LastOffsetEpoch=logs.last_epoch(state.log),
        LastOffset=last_offset + 1 if config.options.vote_last_offset == "end-offset" else last_offset,
        PreVote=state.role == Role.PROSPECTIVE,
    )


def last_record_offset(config: NodeConfig, request: VoteRequest) -> int:
    """The offset of the candidate's last record, whichever way its LastOffset is read (Options.vote_last_offset)."""
    return request.LastOffset - 1 if config.options.vote_last_offset == "end-offset" else request.LastOffset


def request_votes(config: NodeConfig, state: NodeState) -> tuple[Output, ...]:
    """Vote requests to every voter that has not answered yet."""
    request = vote_request(config, state)
    answered = state.granted | state.refused
    return tuple(Send(destination=v, message=request) for v in config.voters if v not in answered)


def election_timer(config: NodeConfig) -> SetTimer:
    """ELECT-2/ELECT-6: the election timeout plus a random backoff."""
    return SetTimer(
        kind=TimerKind.ELECTION_TIMEOUT,
        delay_ms=config.timing.election_timeout_ms,
        jitter_ms=config.timing.election_backoff_max_ms,
    )


def stand(config: NodeConfig, state: NodeState) -> tuple[NodeState, tuple[Output, ...]]:
    """ELECT-4, after a pre-vote under Options.pre_vote (a candidate again in its own epoch under
    the faulty Options.candidate_never_backs_off)."""
    if config.options.candidate_never_backs_off and state.role == Role.CANDIDATE:
        again = replace(state, granted=frozenset((config.node_id,)), refused=frozenset())
        return again, request_votes(config, again) + (election_timer(config),)
    return become_prospective(config, state) if config.options.pre_vote else become_candidate(config, state)


def lost(config: NodeConfig, state: NodeState) -> bool:
    """VOTE-RESP-2: refused by so many voters that no majority can grant the election (or pre-vote)."""
    return len(state.refused) > len(config.voters) - config.majority


def standing_rules(stood: NodeState) -> tuple[str, ...]:
    """The rules a node follows as it stands (`stand`, `become_candidate`), by the role it reached:
    a pre-vote asked, on its election timer (ELECT-6); an election started, its vote persisted
    (ELECT-4, QSTATE-2, ELECT-6); or an election a single voter won at once (VOTE-RESP-2/3)."""
    if stood.role == Role.PROSPECTIVE:
        return ("ELECT-6",)
    if stood.role == Role.LEADER:
        return ("ELECT-4", "VOTE-RESP-2", "VOTE-RESP-3", "QSTATE-2")
    return ("ELECT-4", "ELECT-6", "QSTATE-2")


def become_prospective(config: NodeConfig, state: NodeState) -> tuple[NodeState, tuple[Output, ...]]:
    """KIP-996: ask every other voter for a pre-vote in the current epoch, keeping the leader and
    the vote; nothing is persisted. A node that led its epoch (resigned, or a leader that lost its
    quorum) cannot ask again in it: it moves to the next epoch, unattached, first (persisted), as
    Kafka's resigned leader does. A majority of one stands at once."""
    if state.role in (Role.RESIGNED, Role.LEADER):
        state = replace(state, epoch=state.epoch + 1, leader_id=-1, voted_id=-1)
    prospective = enter_role(state, Role.PROSPECTIVE, granted=frozenset((config.node_id,)))
    if len(prospective.granted) >= config.majority:
        return become_candidate(config, prospective)
    return prospective, request_votes(config, prospective) + (election_timer(config),)


def lose_pre_vote(config: NodeConfig, state: NodeState) -> tuple[NodeState, tuple[Output, ...]]:
    """KIP-996: a prospective refused by a majority, or out of time, follows again the leader it
    knew, or waits unattached in its epoch, its vote kept (persisted, as Kafka writes it)."""
    if state.leader_id != -1:
        return become_follower(config, state, state.leader_id, state.epoch)
    unattached, outputs = become_unattached(config, state, state.epoch)
    return unattached, outputs + (election_timer(config),)


def become_candidate(config: NodeConfig, state: NodeState) -> tuple[NodeState, tuple[Output, ...]]:
    """ELECT-4: bump the epoch, vote for self (persisted), then ask every other voter."""
    candidate = enter_role(
        state,
        Role.CANDIDATE,
        epoch=state.epoch + 1,
        leader_id=-1,
        voted_id=config.node_id,
        granted=frozenset((config.node_id,)),
    )
    if len(candidate.granted) >= config.majority:
        return become_leader(config, candidate)
    return candidate, request_votes(config, candidate) + (election_timer(config),)


def become_leader(config: NodeConfig, state: NodeState) -> tuple[NodeState, tuple[Output, ...]]:
    """VOTE-RESP-2/3: persist leadership, append the LeaderChange record, announce the epoch."""
    log = state.log
    if not config.options.skip_leader_change:
        log = logs.append(log, state.epoch, leader_change(config, state.granted))
    me = config.node_id
    offsets = tuple(len(log) if r == me else -1 for r in config.replicas)
    leader = enter_role(
        state,
        Role.LEADER,
        leader_id=me,
        voted_id=state.voted_id if config.options.vote_kept_with_leader and config.options.leader_keeps_vote else -1,
        high_watermark=-1 if config.options.unknown_high_watermark else state.high_watermark,
        log=log,
        endorsed=frozenset((me,)),
        fetched=frozenset((me,)),
        replica_offsets=offsets,
    )
    leader, committed, _ = advance_high_watermark(config, leader)
    announce = BeginQuorumEpochRequest(ClusterId=config.cluster_id, LeaderId=me, LeaderEpoch=state.epoch)
    sends = tuple(Send(destination=v, message=announce) for v in config.voters if v != me)
    return leader, sends + committed


def leader_change(config: NodeConfig, granted: frozenset[int]) -> LeaderChangeMessage:
    """VOTE-RESP-3: the LeaderChange record, in the KIP's fields or in Kafka's (Options.leader_change_lists_voters)."""
    if config.options.leader_change_lists_voters:
        return LeaderChangeMessage(LeaderId=config.node_id, Voters=tuple(sorted(config.voters)), GrantingVoters=tuple(sorted(granted)))
    return LeaderChangeMessage(LeaderId=config.node_id, VotedIds=tuple(sorted(granted)))


def advance_high_watermark(config: NodeConfig, state: NodeState) -> tuple[NodeState, tuple[Output, ...], tuple[str, ...]]:
    """HW-1/HW-2: the largest offset on a majority of voters, once it covers an entry of this epoch.

    The rules returned are those that decided: HW-2 alone when no majority is beyond the high
    watermark, HW-1 alone when one is but holds no record of this epoch, both on an advance.
    """
    voter_offsets = sorted((state.replica_offsets[i] for i in range(len(config.voters))), reverse=True)
    majority_offset = voter_offsets[config.majority - 1]
    if majority_offset <= state.high_watermark:
        return state, NO_OUTPUTS, ("HW-2",)
    if not config.options.hw_any_epoch:
        start = logs.epoch_start(state.log, state.epoch)
        if start is None or majority_offset <= start:
            return state, NO_OUTPUTS, ("HW-1",)
    return replace(state, high_watermark=majority_offset), (Committed(HighWatermark=majority_offset),), ("HW-1", "HW-2")


def observe_leader(config: NodeConfig, state: NodeState, leader_id: int, epoch: int) -> tuple[NodeState, tuple[Output, ...]] | None:
    """COMMON-3: act on the leader and epoch piggy-backed on a response; None if nothing new.

    A larger epoch is adopted (following its leader if named); in the node's own epoch a named
    leader is followed when the node knows none and is not itself a leader.
    """
    if state.role == Role.DOWN or leader_id == config.node_id:
        if epoch > state.epoch:
            return become_unattached(config, state, epoch)
        return None
    if epoch > state.epoch:
        if leader_id != -1:
            return become_follower(config, state, leader_id, epoch)
        return become_unattached(config, state, epoch)
    if epoch == state.epoch and leader_id != -1 and state.leader_id == -1 and state.role != Role.LEADER:
        return become_follower(config, state, leader_id, epoch)
    return None
