"""BeginQuorumEpoch: a new leader announcing its epoch to the voters, and their endorsements."""

from model.config import NodeConfig
from model.events import Response, Send
from model.messages import BeginQuorumEpochRequest, BeginQuorumEpochResponse
from model.state import NodeState, Role
from model.transitions import as_sent, Transition, awaits, become_follower, dropped, leader_membership, names_self_wrongly, observe_leader, refused_as_invalid, replace, shut_down
from model.validity import ahead_of_epoch_check, begin_refusal
from model.vote import cluster_id_conflicts
from spec import errors


def handle_begin_request(config: NodeConfig, state: NodeState, source: int, request: BeginQuorumEpochRequest) -> Transition:
    def answer(s: NodeState, rules: tuple[str, ...], error: int = errors.NONE, *, top_error: int = errors.NONE, extra=()) -> Transition:
        response = BeginQuorumEpochResponse(ErrorCode=top_error, PartitionErrorCode=error, LeaderId=s.leader_id, LeaderEpoch=s.epoch)
        return Transition(s, (Send(destination=source, message=as_sent(config, response)),) + extra, rules + ("COMMON-2",))

    if not config.is_voter and not config.options.voter_set_unchecked and config.choices.pick("VOTER-ONLY-1") == "reject":
        return answer(state, ("VOTER-ONLY-1",), errors.INCONSISTENT_VOTER_SET)
    if cluster_id_conflicts(config, request.ClusterId):
        refused = answer(state, ("BEGIN-REQ-1", "BOOT-2"), top_error=errors.INCONSISTENT_CLUSTER_ID)
        if not config.options.cluster_id_conflict_fatal:
            return refused
        reason = f"BeginQuorumEpoch from leader {request.LeaderId} carries cluster id {request.ClusterId!r}, ours is {config.cluster_id!r}"
        return shut_down(state, reason, refused.rules, refused.outputs)
    refusal = ahead_of_epoch_check(config, begin_refusal(config, request), request.LeaderEpoch, state.epoch)
    if refusal is not None:
        return answer(state, ("COMMON-4",), refusal)
    if request.LeaderEpoch < state.epoch:
        return answer(state, ("BEGIN-REQ-2", "COMMON-1"), errors.FENCED_LEADER_EPOCH)
    membership = leader_membership(config, state, request.LeaderId, request.LeaderEpoch, "BEGIN-REQ-4")
    if membership is not None:
        taken, rules, error, outputs = membership
        return answer(taken, rules, error, extra=outputs)
    if names_self_wrongly(config, state, request.LeaderId, request.LeaderEpoch):  # refused before, unless conflicting_leader_fatal
        return shut_down(state, f"BeginQuorumEpoch from {source} names this node leader of epoch {request.LeaderEpoch}, which it does not lead", ("BEGIN-REQ-3",))
    if request.LeaderEpoch == state.epoch and state.leader_id != -1:
        if state.leader_id != request.LeaderId and config.options.conflicting_leader_fatal:
            return shut_down(state, f"BeginQuorumEpoch names leader {request.LeaderId} of epoch {state.epoch}, whose leader is {state.leader_id}", ("BEGIN-REQ-3",))
        if state.leader_id != request.LeaderId:
            return answer(state, ("BEGIN-REQ-3",), errors.INVALID_QUORUM_STATE)
        return answer(state, ("BEGIN-REQ-4",))
    follower, outputs = become_follower(config, state, request.LeaderId, request.LeaderEpoch)
    return answer(follower, ("BEGIN-REQ-4", "QSTATE-2"), extra=outputs)


def handle_begin_response(config: NodeConfig, state: NodeState, event: Response) -> Transition:
    response: BeginQuorumEpochResponse = event.message
    if config.options.stale_responses_ignored and dropped(config, state, awaits(state, Role.LEADER, event.request.LeaderEpoch)):
        return Transition(state, (), ("COMMON-3",))
    if response.ErrorCode == errors.INCONSISTENT_CLUSTER_ID:
        return Transition(state, (), ("COMMON-3",))
    observed = observe_leader(config, state, response.LeaderId, response.LeaderEpoch)
    if refused_as_invalid(config, state, response.PartitionErrorCode, response.LeaderEpoch, observed):
        return shut_down(state, f"BeginQuorumEpoch response from {event.source}: INVALID_REQUEST", ("COMMON-3",))
    if observed is not None:
        fenced = response.PartitionErrorCode == errors.FENCED_LEADER_EPOCH
        return Transition(observed[0], observed[1], ("BEGIN-RESP-3", "COMMON-3") if fenced else ("COMMON-3",))
    if state.role == Role.LEADER and response.PartitionErrorCode == errors.NONE and response.LeaderEpoch == state.epoch:
        return Transition(replace(state, endorsed=state.endorsed | {event.source}), (), ("BEGIN-RESP-1",))
    return Transition(state, (), ())
