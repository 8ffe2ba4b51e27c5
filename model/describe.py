"""DescribeQuorum: the leader's view of replication, and the admin client's reaction to answers."""

import enum
from typing import NamedTuple

from model.config import NodeConfig
from model.events import Send
from model.messages import DescribeQuorumRequest, DescribeQuorumResponse, ReplicaState
from model.state import NodeState, Role
from model.transitions import Transition
from spec import errors


def handle_describe_request(config: NodeConfig, state: NodeState, source: int, request: DescribeQuorumRequest) -> Transition:
    if state.role != Role.LEADER:
        defaults = config.options.describe_refusal_defaults
        response = DescribeQuorumResponse(
            PartitionErrorCode=errors.NOT_LEADER_OR_FOLLOWER, LeaderId=0 if defaults else state.leader_id, LeaderEpoch=0 if defaults else state.epoch
        )
        return Transition(state, (Send(destination=source, message=response),), ("DESCRIBE-REQ-1", "COMMON-2"))
    progress = dict(zip(config.replicas, state.replica_offsets))
    response = DescribeQuorumResponse(
        LeaderId=state.leader_id,
        LeaderEpoch=state.epoch,
        HighWatermark=state.high_watermark,
        CurrentVoters=tuple(ReplicaState(ReplicaId=v, LogEndOffset=progress[v]) for v in config.voters),
        Observers=tuple(ReplicaState(ReplicaId=o, LogEndOffset=progress[o]) for o in config.observers if progress[o] != -1),
    )
    return Transition(state, (Send(destination=source, message=response),), ("DESCRIBE-REQ-2", "COMMON-2"))


class AdminStep(enum.Enum):
    RETRY_AT_LEADER = "retry at the leader named in the response"
    BACKOFF_AND_RETRY = "back off, then retry through metadata"
    RETURN = "return the response to the application"


class AdminDecision(NamedTuple):
    """What the admin client does with a DescribeQuorum response, and the rule that says so."""

    step: AdminStep
    leader_id: int
    rules: tuple[str, ...]


def admin_next_step(response: DescribeQuorumResponse) -> AdminDecision:
    """DESCRIBE-RESP-1..3: follow the named leader, back off while there is none, else return."""
    if response.PartitionErrorCode == errors.NOT_LEADER_OR_FOLLOWER:
        if response.LeaderId != -1:
            return AdminDecision(AdminStep.RETRY_AT_LEADER, response.LeaderId, ("DESCRIBE-RESP-1",))
        return AdminDecision(AdminStep.BACKOFF_AND_RETRY, -1, ("DESCRIBE-RESP-2",))
    return AdminDecision(AdminStep.RETURN, response.LeaderId, ("DESCRIBE-RESP-3",))
