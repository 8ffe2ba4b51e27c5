"""EndQuorumEpoch: a leader's graceful resignation and the successors' prioritised elections."""

from model import held
from model.config import NodeConfig
from model.events import Response, Send, SetTimer, TimerKind
from model.messages import EndQuorumEpochRequest, EndQuorumEpochResponse
from model.state import NodeState, Role
from model.transitions import (
    as_sent,
    NO_OUTPUTS,
    Transition,
    awaits,
    become_follower,
    dropped,
    enter_role,
    leader_membership,
    names_self_wrongly,
    observe_leader,
    refused_as_invalid,
    replace,
    shut_down,
    stand,
    standing_rules,
)
from model.validity import ahead_of_epoch_check, end_refusal
from model.vote import cluster_id_conflicts
from spec import errors


def resign(config: NodeConfig, state: NodeState) -> Transition:
    """END-SEND-1: tell every other voter, most caught-up first, and stop leading (re-sent only
    under Options.resigned_resends_end_epoch, which keeps the offsets that order the successors)."""
    if state.role != Role.LEADER:
        return Transition(state, NO_OUTPUTS, ())
    kept = {"replica_offsets": state.replica_offsets} if config.options.resigned_resends_end_epoch else {}
    resigned = enter_role(state, Role.RESIGNED, high_watermark=-1 if config.options.unknown_high_watermark else state.high_watermark, **kept)
    return Transition(resigned, end_epoch(config, state.epoch, successors(config, state.replica_offsets)), ("END-SEND-1", "END-SEND-2"))


def successors(config: NodeConfig, replica_offsets: tuple[int, ...]) -> tuple[int, ...]:
    """END-SEND-1: the other voters, most caught-up first, ties by the smaller id (none without offsets: a restarted leader)."""
    others = [(offset, voter) for voter, offset in zip(config.voters, replica_offsets) if voter != config.node_id]
    return tuple(voter for offset, voter in sorted(others, key=lambda ov: (-ov[0], ov[1])))


def resend_end_epoch(config: NodeConfig, state: NodeState) -> tuple[Send, ...]:
    """Options.resigned_resends_end_epoch: the resigned node's EndQuorumEpoch again, to the voters that have not acknowledged it."""
    return tuple(send for send in end_epoch(config, state.epoch, successors(config, state.replica_offsets)) if send.destination not in state.endorsed)


def end_epoch(config: NodeConfig, epoch: int, successors: tuple[int, ...]) -> tuple[Send, ...]:
    """EndQuorumEpoch to every other voter, the `successors` first, naming them in order of preference."""
    request = EndQuorumEpochRequest(ClusterId=config.cluster_id, ReplicaId=config.node_id, LeaderId=config.node_id, LeaderEpoch=epoch, PreferredSuccessors=successors)
    others = successors + tuple(v for v in config.voters if v != config.node_id and v not in successors)
    return tuple(Send(destination=v, message=request) for v in others)


def successor_backoff_ms(config: NodeConfig, position: int, successors: int) -> int:
    """END-REQ-6: how long the successor at `position` > 0 of `successors` waits: the KIP's
    min(retryBackoffMaxMs, retryBackoffMs * 2^(N-1)), or Kafka's (Options.successor_backoff_strict)."""
    timing = config.timing
    if not config.options.successor_backoff_strict:
        return min(timing.retry_backoff_max_ms, timing.retry_backoff_ms * 2 ** (position - 1))
    if position >= successors:
        return timing.election_backoff_max_ms
    return min(timing.election_backoff_max_ms, (timing.election_backoff_max_ms >> (successors - 1)) << (position - 1))


def handle_end_request(config: NodeConfig, state: NodeState, source: int, request: EndQuorumEpochRequest) -> Transition:
    def answer(s: NodeState, rules: tuple[str, ...], error: int = errors.NONE, *, top_error: int = errors.NONE, extra=()) -> Transition:
        response = EndQuorumEpochResponse(ErrorCode=top_error, PartitionErrorCode=error, LeaderId=s.leader_id, LeaderEpoch=s.epoch)
        return Transition(s, (Send(destination=source, message=as_sent(config, response)),) + extra, rules + ("COMMON-2",))

    if not config.is_voter and not config.options.voter_set_unchecked:
        return answer(state, ("VOTER-ONLY-1",), errors.INCONSISTENT_VOTER_SET)
    if cluster_id_conflicts(config, request.ClusterId):
        return answer(state, ("END-REQ-1",), top_error=errors.INCONSISTENT_CLUSTER_ID)
    refusal = ahead_of_epoch_check(config, end_refusal(config, request), request.LeaderEpoch, state.epoch)
    if refusal is not None:
        return answer(state, ("COMMON-4",), refusal)
    if request.LeaderEpoch < state.epoch:
        return answer(state, ("END-REQ-2", "COMMON-1"), errors.FENCED_LEADER_EPOCH)
    membership = leader_membership(config, state, request.LeaderId, request.LeaderEpoch, "END-REQ-3")
    if membership is not None:
        taken, rules, error, outputs = membership
        return answer(taken, rules, error, extra=outputs)
    if names_self_wrongly(config, state, request.LeaderId, request.LeaderEpoch):  # refused before, unless conflicting_leader_fatal
        return shut_down(state, f"EndQuorumEpoch from {source} names this node leader of epoch {request.LeaderEpoch}, which it does not lead", ("END-REQ-3",))
    news = config.options.end_epoch_as_news and request.LeaderId != -1  # a candidate's resignation (END-REQ-3B) names no leader to follow
    unknown = request.LeaderEpoch > state.epoch or state.leader_id == -1
    if unknown and not news:
        return answer(state, ("END-REQ-3", "COMMON-1"), errors.UNKNOWN_LEADER_EPOCH)
    if not unknown and state.leader_id != request.LeaderId:
        if config.options.conflicting_leader_fatal:
            return shut_down(state, f"EndQuorumEpoch names leader {request.LeaderId} of epoch {state.epoch}, whose leader is {state.leader_id}", ("END-REQ-3",))
        reading = config.choices.pick("END-REQ-3")
        if reading != "accept":
            code = errors.INVALID_QUORUM_STATE if reading == "invalid-quorum-state" else errors.UNKNOWN_LEADER_EPOCH
            return answer(state, ("END-REQ-3", "COMMON-1"), code)
    rules: tuple[str, ...] = ()
    followed: tuple = ()
    if unknown:  # Options.end_epoch_as_news: the resigning leader is followed first
        if request.LeaderId not in config.voters and config.options.conflicting_leader_fatal:
            return shut_down(state, f"EndQuorumEpoch names leader {request.LeaderId}, which has no endpoint (outside the voter set)", ("END-REQ-3",))
        state, followed = become_follower(config, state, request.LeaderId, request.LeaderEpoch)
        rules = ("END-REQ-3", "COMMON-3", "QSTATE-2")
    if state.role != Role.FOLLOWER:  # a prospective already asking (Options.pre_vote), an observer: only a follower acts on it
        return answer(state, rules + ("END-REQ-5",), extra=followed)
    if config.node_id not in request.PreferredSuccessors and not news:
        return answer(state, ("END-REQ-4",), errors.INCONSISTENT_VOTER_SET)
    successors = request.PreferredSuccessors
    unlisted = 0 if config.options.end_epoch_unlisted_first else len(successors)
    position = successors.index(config.node_id) if config.node_id in successors else unlisted
    if position == 0:  # stands at once, before the follower it just became fetches
        refused: tuple = ()
        if unknown and state.held:  # becoming a follower failed the Fetches it held (a leader until now)
            state, refused = held.refuse(config, state)
            rules += ("FETCH-REQ-7",)
        candidate, outputs = stand(config, state)
        answered = answer(candidate if config.choices.pick("END-REQ-5") == "after-standing" else state, rules, extra=refused + outputs)
        return Transition(candidate, answered.outputs, answered.rules + ("END-REQ-5",) + standing_rules(candidate))
    timer = SetTimer(kind=TimerKind.FETCH_TIMEOUT, delay_ms=successor_backoff_ms(config, position, len(successors)))
    return answer(state, rules + ("END-REQ-6",), extra=followed + (timer,))


def handle_end_response(config: NodeConfig, state: NodeState, event: Response) -> Transition:
    response: EndQuorumEpochResponse = event.message
    if config.options.stale_responses_ignored and dropped(config, state, awaits(state, Role.RESIGNED, event.request.LeaderEpoch)):
        return Transition(state, NO_OUTPUTS, ("COMMON-3",))
    if response.ErrorCode == errors.INCONSISTENT_CLUSTER_ID:
        return Transition(state, NO_OUTPUTS, ("COMMON-3",))
    observed = observe_leader(config, state, response.LeaderId, response.LeaderEpoch)
    if refused_as_invalid(config, state, response.PartitionErrorCode, response.LeaderEpoch, observed):
        return shut_down(state, f"EndQuorumEpoch response from {event.source}: INVALID_REQUEST", ("COMMON-3",))
    if observed is not None:
        fenced = response.PartitionErrorCode == errors.FENCED_LEADER_EPOCH
        return Transition(observed[0], observed[1], ("END-RESP-2", "COMMON-3") if fenced else ("COMMON-3",))
    acknowledged = response.ErrorCode == errors.NONE and response.PartitionErrorCode == errors.NONE and response.LeaderEpoch == state.epoch
    if config.options.resigned_resends_end_epoch and state.role == Role.RESIGNED and acknowledged:
        return Transition(replace(state, endorsed=state.endorsed | {event.source}), NO_OUTPUTS, ("END-RESP-1", "END-SEND-2"))
    return Transition(state, NO_OUTPUTS, ("END-RESP-1",))
