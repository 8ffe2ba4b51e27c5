"""EndQuorumEpoch: a leader's graceful resignation and the successors' prioritised elections."""

from model.config import NodeConfig
from model.events import Response, Send, SetTimer, TimerKind
from model.messages import EndQuorumEpochRequest, EndQuorumEpochResponse
from model.state import NodeState, Role
from model.transitions import as_sent, NO_OUTPUTS, Transition, enter_role, become_candidate, observe_leader
from model.validity import end_refusal
from model.vote import cluster_id_conflicts
from spec import errors


def resign(config: NodeConfig, state: NodeState) -> Transition:
    """END-SEND-1: tell every other voter, most caught-up first, and stop leading (never retried)."""
    if state.role != Role.LEADER:
        return Transition(state, NO_OUTPUTS, ())
    others = [(offset, voter) for voter, offset in zip(config.voters, state.replica_offsets) if voter != config.node_id]
    successors = tuple(voter for offset, voter in sorted(others, key=lambda ov: (-ov[0], ov[1])))
    resigned = enter_role(state, Role.RESIGNED)
    return Transition(resigned, end_epoch(config, state.epoch, successors), ("END-SEND-1", "END-SEND-2"))


def end_epoch(config: NodeConfig, epoch: int, successors: tuple[int, ...]) -> tuple[Send, ...]:
    """EndQuorumEpoch to every other voter, the `successors` first, naming them in order of preference."""
    request = EndQuorumEpochRequest(ClusterId=config.cluster_id, ReplicaId=config.node_id, LeaderId=config.node_id, LeaderEpoch=epoch, PreferredSuccessors=successors)
    others = successors + tuple(v for v in config.voters if v != config.node_id and v not in successors)
    return tuple(Send(destination=v, message=request) for v in others)


def successor_backoff_ms(config: NodeConfig, position: int) -> int:
    """END-REQ-6: min(retryBackoffMaxMs, retryBackoffMs * 2^(N-1)) for priority N > 0."""
    return min(config.timing.retry_backoff_max_ms, config.timing.retry_backoff_ms * 2 ** (position - 1))


def handle_end_request(config: NodeConfig, state: NodeState, source: int, request: EndQuorumEpochRequest) -> Transition:
    def answer(s: NodeState, rules: tuple[str, ...], error: int = errors.NONE, *, top_error: int = errors.NONE, extra=()) -> Transition:
        response = EndQuorumEpochResponse(ErrorCode=top_error, PartitionErrorCode=error, LeaderId=s.leader_id, LeaderEpoch=s.epoch)
        return Transition(s, (Send(destination=source, message=as_sent(config, response)),) + extra, rules + ("COMMON-2",))

    if not config.is_voter:
        return answer(state, ("VOTER-ONLY-1",), errors.INCONSISTENT_VOTER_SET)
    if cluster_id_conflicts(config, request.ClusterId):
        return answer(state, ("END-REQ-1",), top_error=errors.INCONSISTENT_CLUSTER_ID)
    refusal = end_refusal(config, request)
    if refusal is not None:
        return answer(state, ("COMMON-4",), refusal)
    if request.LeaderEpoch < state.epoch:
        return answer(state, ("END-REQ-2", "COMMON-1"), errors.FENCED_LEADER_EPOCH)
    if request.LeaderEpoch > state.epoch or state.leader_id == -1:
        return answer(state, ("END-REQ-3", "COMMON-1"), errors.UNKNOWN_LEADER_EPOCH)
    if state.leader_id != request.LeaderId:
        code = errors.INVALID_QUORUM_STATE if config.choices.pick("END-REQ-3") == "invalid-quorum-state" else errors.UNKNOWN_LEADER_EPOCH
        return answer(state, ("END-REQ-3", "COMMON-1"), code)
    if config.node_id not in request.PreferredSuccessors:
        return answer(state, ("END-REQ-4",), errors.INCONSISTENT_VOTER_SET)
    position = request.PreferredSuccessors.index(config.node_id)
    if position == 0:
        candidate, outputs = become_candidate(config, state)
        return answer(candidate, ("END-REQ-5", "ELECT-4", "QSTATE-2"), extra=outputs)
    timer = SetTimer(kind=TimerKind.FETCH_TIMEOUT, delay_ms=successor_backoff_ms(config, position))
    return answer(state, ("END-REQ-6",), extra=(timer,))


def handle_end_response(config: NodeConfig, state: NodeState, event: Response) -> Transition:
    response: EndQuorumEpochResponse = event.message
    if response.ErrorCode == errors.INCONSISTENT_CLUSTER_ID:
        return Transition(state, NO_OUTPUTS, ("COMMON-3",))
    observed = observe_leader(config, state, response.LeaderId, response.LeaderEpoch)
    if observed is not None:
        fenced = response.PartitionErrorCode == errors.FENCED_LEADER_EPOCH
        return Transition(observed[0], observed[1], ("END-RESP-2", "COMMON-3") if fenced else ("COMMON-3",))
    return Transition(state, NO_OUTPUTS, ("END-RESP-1",))
