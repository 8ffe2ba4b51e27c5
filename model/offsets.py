"""KIP-101's OffsetsForLeaderEpoch, answered from the leader's epoch cache."""

from model import log as logs
from model.config import NodeConfig
from model.fetch import epoch_check
from model.events import Send
from model.messages import OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse
from model.state import NodeState
from model.transitions import Transition
from model.validity import offsets_refusal
from spec import errors


def handle_offsets_request(config: NodeConfig, state: NodeState, source: int, request: OffsetsForLeaderEpochRequest) -> Transition:
    def answer(rules: tuple[str, ...], error: int, epoch: int = -1, end_offset: int = -1) -> Transition:
        response = OffsetsForLeaderEpochResponse(ErrorCode=error, LeaderEpoch=epoch, EndOffset=end_offset)
        return Transition(state, (Send(destination=source, message=response),), rules)

    refusal = offsets_refusal(config, request)
    if refusal is not None:
        return answer(("COMMON-4",), refusal)
    unchecked = request.CurrentLeaderEpoch == -1  # asks for no epoch check
    refused = epoch_check(config, state, state.epoch if unchecked else request.CurrentLeaderEpoch)
    if refused is not None:
        error = refused[0]
        return answer(("K101-4",) if error == errors.NOT_LEADER_OR_FOLLOWER else ("K101-4", "COMMON-1"), error)
    found = logs.end_offset_for_epoch(state.log, request.LeaderEpoch)
    return answer(("K101-2", "K101-1", "LOG-2"), errors.NONE, found.Epoch, found.EndOffset)
