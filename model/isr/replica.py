"""One replica of the partition, as a pure state machine: step(config, state, event) -> Transition.

The leader appends producer records, serves Fetch and OffsetsForLeaderEpoch, keeps the ISR and
the high watermark. A follower fetches from the leader; when it restarts or gets a new leader it
truncates its log first: to its own high watermark (truncation "hw", before KIP-101) or to the
end of its last epoch as the leader knows it (truncation "epoch", KIP-101).
"""

import msgspec

from model import log as logs
from model.events import AppendResult, ClientAppend, Crash, Output, Request, Response, Send, Shutdown
from model.isr.config import ReplicaConfig
from model.isr.events import AlterIsr, FetchNext, IsrEvent, PowerLoss, ShrinkIsr, Startup
from model.isr.state import LeaderAndIsr, ReplicaState, Role
from model.messages import (
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Record,
)
from model.transitions import Transition
from spec import errors

replace = msgspec.structs.replace

NOT_ENOUGH_REPLICAS = errors.code_of("NOT_ENOUGH_REPLICAS")
NOT_ENOUGH_REPLICAS_AFTER_APPEND = errors.code_of("NOT_ENOUGH_REPLICAS_AFTER_APPEND")
OFFSET_OUT_OF_RANGE = errors.OFFSET_OUT_OF_RANGE


def initial_state(config: ReplicaConfig) -> ReplicaState:
    """A replica of a new partition: the first replica leads epoch 0 with every replica in the
    ISR, the others follow it; logs are empty."""
    leader = config.replicas[0]
    if config.node_id != leader:
        return ReplicaState(leader=leader)
    return ReplicaState(role=Role.LEADER, leader=leader, isr=tuple(sorted(config.replicas)), follower_ends=tuple((r, -1) for r in config.followers))


def unchanged(state: ReplicaState, *rules: str) -> Transition:
    return Transition(state, (), rules)


def step(config: ReplicaConfig, state: ReplicaState, event: IsrEvent | Request | Response | ClientAppend | Crash) -> Transition:
    """The single entry point: the next state, the outputs and the rules of the branches taken."""
    kind = type(event)
    if kind is PowerLoss:
        return power_loss(state, event.keep)
    if state.role == Role.DOWN:
        return start(config, state, event.partition) if kind is Startup else unchanged(state)
    if kind is Request:
        if type(event.message) is FetchRequest:
            return handle_fetch(config, state, event.source, event.message)
        return handle_offsets_request(state, event.source, event.message)
    if kind is Response:
        if type(event.message) is FetchResponse:
            return handle_fetch_response(state, event.message, event.request)
        return handle_offsets_response(state, event.message, event.request)
    if kind is ClientAppend:
        return produce(config, state, event.value)
    if kind is FetchNext:
        return send_fetch(config, state)
    if kind is ShrinkIsr:
        return shrink_isr(config, state, event.replica)
    if kind is LeaderAndIsr:
        if event.Leader == config.node_id:
            return become_leader(config, state, event)
        return follow(config, state, event.Leader, event.LeaderEpoch, "ISR-ELECT-2")
    if kind is Crash:
        return Transition(went_down(state, state.log), (), ("ISR-CRASH-1",))
    return unchanged(state)  # a Startup of a replica that is up


# Leader ----------------------------------------------------------------------------------


def end_of(config: ReplicaConfig, state: ReplicaState, replica: int) -> int:
    """A replica's log end offset as the leader knows it: its own exactly, a follower's from its last Fetch."""
    if replica == config.node_id:
        return len(state.log)
    return dict(state.follower_ends)[replica]


def advance_high_watermark(config: ReplicaConfig, state: ReplicaState) -> tuple[ReplicaState, tuple[Output, ...], tuple[str, ...]]:
    """ISR-HW-1: the high watermark is the smallest log end offset in the ISR and never moves back.

    Records of the leader's own epoch that it passes are answered (acks=all, ISR-PRODUCE-2):
    acknowledged if the ISR still has min.isr members, else NOT_ENOUGH_REPLICAS_AFTER_APPEND.
    A follower whose log end is unknown (-1, a new leader) holds the high watermark back.
    """
    reached = min(end_of(config, state, r) for r in state.isr)
    if reached <= state.high_watermark:
        return state, (), ("ISR-HW-1",)
    code = errors.NONE if len(state.isr) >= config.min_isr else NOT_ENOUGH_REPLICAS_AFTER_APPEND
    answers = tuple(AppendResult(ErrorCode=code, Offset=r.Offset) for r in state.log[state.high_watermark : reached] if r.Epoch == state.epoch)
    return replace(state, high_watermark=reached), answers, ("ISR-HW-1", "ISR-PRODUCE-2") if answers else ("ISR-HW-1",)


def produce(config: ReplicaConfig, state: ReplicaState, value: int) -> Transition:
    """ISR-PRODUCE-1: acks=all appends only while the ISR has min.isr members; the record carries the leader's epoch."""
    if state.role != Role.LEADER:
        return Transition(state, (AppendResult(ErrorCode=errors.NOT_LEADER_OR_FOLLOWER, Offset=-1),), ("ISR-PRODUCE-1",))
    if len(state.isr) < config.min_isr:
        return Transition(state, (AppendResult(ErrorCode=NOT_ENOUGH_REPLICAS, Offset=-1),), ("ISR-PRODUCE-1",))
    appended = replace(state, log=logs.append(state.log, state.epoch, value))
    first_of_epoch = logs.last_epoch(state.log) != state.epoch
    advanced, answers, rules = advance_high_watermark(config, appended)
    return Transition(advanced, answers, ("ISR-PRODUCE-1", *(("K101-1",) if first_of_epoch else ()), *rules))


def refusal(state: ReplicaState, current_epoch: int) -> int:
    """The error for a request from another epoch or to a replica that is not the leader (K101-4's checks)."""
    if current_epoch != -1 and current_epoch < state.epoch:
        return errors.FENCED_LEADER_EPOCH
    if current_epoch > state.epoch:
        return errors.UNKNOWN_LEADER_EPOCH
    if state.role != Role.LEADER:
        return errors.NOT_LEADER_OR_FOLLOWER
    return errors.NONE


def handle_fetch(config: ReplicaConfig, state: ReplicaState, source: int, request: FetchRequest) -> Transition:
    """ISR-FETCH-2: note the follower's log end, maybe take it back into the ISR, answer with the
    records from its offset and the high watermark updated by this very Fetch."""
    current = LeaderIdAndEpoch(LeaderId=state.leader, LeaderEpoch=state.epoch)

    def answer(rules: tuple[str, ...], error: int) -> Transition:
        return Transition(state, (Send(destination=source, message=FetchResponse(ErrorCode=error, CurrentLeader=current)),), rules)

    error = refusal(state, request.CurrentLeaderEpoch)
    if error:
        return answer(("ISR-FETCH-2",), error)
    if request.FetchOffset > len(state.log):
        return answer(("ISR-FETCH-4",), OFFSET_OUT_OF_RANGE)
    ends = tuple((r, request.FetchOffset if r == source else end) for r, end in state.follower_ends)
    fetched = replace(state, follower_ends=ends)
    outputs: tuple[Output, ...] = ()
    rules: tuple[str, ...] = ("ISR-FETCH-2",)
    if source not in state.isr and request.FetchOffset >= state.high_watermark:
        fetched = replace(fetched, isr=tuple(sorted(state.isr + (source,))))
        outputs = (AlterIsr(LeaderEpoch=state.epoch, Isr=fetched.isr),)
        rules += ("ISR-EXPAND-1",)
    advanced, answers, hw_rules = advance_high_watermark(config, fetched)
    response = FetchResponse(HighWatermark=advanced.high_watermark, CurrentLeader=current, Records=state.log[request.FetchOffset :])
    return Transition(advanced, outputs + answers + (Send(destination=source, message=response),), rules + hw_rules)


def handle_offsets_request(state: ReplicaState, source: int, request: OffsetsForLeaderEpochRequest) -> Transition:
    """K101-4 checks, then K101-2: the largest epoch <= the asked one in the leader's epoch cache, and where it ends."""

    def answer(rules: tuple[str, ...], error: int, found: EpochEndOffset = logs.NO_EPOCH) -> Transition:
        response = OffsetsForLeaderEpochResponse(ErrorCode=error, LeaderEpoch=found.Epoch, EndOffset=found.EndOffset)
        return Transition(state, (Send(destination=source, message=response),), rules)

    error = refusal(state, request.CurrentLeaderEpoch)
    if error:
        return answer(("K101-4",), error)
    return answer(("K101-2", "K101-1"), errors.NONE, logs.end_offset_for_epoch(state.log, request.LeaderEpoch))


def shrink_isr(config: ReplicaConfig, state: ReplicaState, replica: int) -> Transition:
    """ISR-SHRINK-1: the leader drops a lagging follower from the ISR; the high watermark may then advance."""
    if state.role != Role.LEADER or replica == config.node_id or replica not in state.isr:
        return unchanged(state)
    shrunk = replace(state, isr=tuple(r for r in state.isr if r != replica))
    advanced, answers, rules = advance_high_watermark(config, shrunk)
    return Transition(advanced, (AlterIsr(LeaderEpoch=state.epoch, Isr=shrunk.isr), *answers), ("ISR-SHRINK-1", *rules))


def become_leader(config: ReplicaConfig, state: ReplicaState, command: LeaderAndIsr) -> Transition:
    """ISR-ELECT-2: lead the new epoch with the controller's ISR; followers' log ends are unknown
    until they fetch. A leader never truncates (KIP-101: it does no leader-epoch exchange)."""
    leading = replace(
        state,
        role=Role.LEADER,
        epoch=command.LeaderEpoch,
        leader=config.node_id,
        fetching=False,
        truncating=False,
        isr=command.Isr,
        follower_ends=tuple((r, -1) for r in config.followers),
    )
    advanced, answers, rules = advance_high_watermark(config, leading)
    return Transition(advanced, answers, ("ISR-ELECT-2", *rules))


# Follower --------------------------------------------------------------------------------


def follow(config: ReplicaConfig, state: ReplicaState, leader: int, epoch: int, why: str) -> Transition:
    """Follow `leader` in `epoch` (-1: none known yet), truncating first as the configuration says.

    hw (ISR-TRUNC-1): cut the log at the local high watermark. epoch (ISR-TRUNC-2): ask the
    leader where the epoch of the last record ends (OffsetsForLeaderEpoch) and fetch only after
    truncating to its answer (K101-3); an empty log has nothing to truncate.
    """
    following = replace(state, role=Role.FOLLOWER, epoch=epoch, leader=leader, fetching=False, truncating=False, isr=(), follower_ends=())
    if config.truncation == "hw":
        return Transition(replace(following, log=state.log[: state.high_watermark]), (), (why, "ISR-TRUNC-1"))
    if leader == -1 or not state.log:
        return Transition(following, (), (why, "ISR-TRUNC-2"))
    request = OffsetsForLeaderEpochRequest(ReplicaId=config.node_id, CurrentLeaderEpoch=epoch, LeaderEpoch=logs.last_epoch(state.log))
    return Transition(replace(following, truncating=True), (Send(destination=leader, message=request),), (why, "ISR-TRUNC-2"))


def send_fetch(config: ReplicaConfig, state: ReplicaState) -> Transition:
    """ISR-FETCH-1: one Fetch at a time, from the log end, to a known leader, once truncation is done."""
    if state.role != Role.FOLLOWER or state.leader == -1 or state.fetching or state.truncating:
        return unchanged(state)
    request = FetchRequest(ReplicaId=config.node_id, CurrentLeaderEpoch=state.epoch, FetchOffset=len(state.log))
    return Transition(replace(state, fetching=True), (Send(destination=state.leader, message=request),), ("ISR-FETCH-1",))


def handle_fetch_response(state: ReplicaState, response: FetchResponse, request: FetchRequest) -> Transition:
    """ISR-FETCH-3: append the records and take the leader's high watermark, capped by the log end
    (ISR-HW-2: so a follower's high watermark lags the leader's by one Fetch)."""
    if state.role != Role.FOLLOWER or not state.fetching or request.CurrentLeaderEpoch != state.epoch:
        return unchanged(state, "ISR-FETCH-3")  # the answer to a Fetch of another epoch
    if response.ErrorCode == OFFSET_OUT_OF_RANGE:
        halt = Shutdown(reason="the leader's log ends before this follower's (OFFSET_OUT_OF_RANGE, unclean election off)")
        return Transition(went_down(state, state.log), (halt,), ("ISR-FETCH-4",))
    if response.ErrorCode != errors.NONE:
        return Transition(replace(state, fetching=False), (), ("ISR-FETCH-3",))
    log = state.log + response.Records
    rules = ("ISR-FETCH-3", "ISR-HW-2")
    if response.Records and response.Records[-1].Epoch != logs.last_epoch(state.log):
        rules += ("K101-1",)
    return Transition(replace(state, log=log, high_watermark=min(response.HighWatermark, len(log)), fetching=False), (), rules)


def handle_offsets_response(state: ReplicaState, response: OffsetsForLeaderEpochResponse, request: OffsetsForLeaderEpochRequest) -> Transition:
    """K101-3: truncate to min(EndOffset, start of the follower's first epoch above the answered
    one); UNDEFINED (-1) means no shared epoch, so nothing is kept. An error (the leader moved on)
    leaves the follower waiting for the controller's next LeaderAndISR."""
    if not state.truncating or request.CurrentLeaderEpoch != state.epoch or response.ErrorCode != errors.NONE:
        return unchanged(state, "K101-3")
    if response.LeaderEpoch == -1:
        log = ()
    else:
        log = logs.truncate_diverging(state.log, EpochEndOffset(Epoch=response.LeaderEpoch, EndOffset=response.EndOffset))
    truncated = replace(state, log=log, high_watermark=min(state.high_watermark, len(log)), truncating=False)
    return Transition(truncated, (), ("K101-3", "K101-1") if len(log) < len(state.log) else ("K101-3",))


# Crashes and restarts --------------------------------------------------------------------


def went_down(state: ReplicaState, log: tuple[Record, ...]) -> ReplicaState:
    """Down with only the persisted state: the log given and the high-watermark checkpoint
    (the epoch and leader are read again from the controller's record at startup)."""
    return ReplicaState(role=Role.DOWN, log=log, high_watermark=state.high_watermark)


def power_loss(state: ReplicaState, keep: int) -> Transition:
    """ISR-POWER-1: down, keeping only the first `keep` records (the flushed ones)."""
    return Transition(went_down(state, state.log[:keep]), (), ("ISR-POWER-1",))


def start(config: ReplicaConfig, state: ReplicaState, partition: LeaderAndIsr) -> Transition:
    """ISR-START-1: cap the high watermark at the surviving log, then follow the recorded leader;
    a replica recorded as leader itself waits for the controller to elect one."""
    leader = partition.Leader if partition.Leader != config.node_id else -1
    restarted = replace(state, high_watermark=min(state.high_watermark, len(state.log)))
    return follow(config, restarted, leader, partition.LeaderEpoch, "ISR-START-1")
