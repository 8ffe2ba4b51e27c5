"""Fetch: pull replication, log reconciliation by DivergingEpoch, and the high watermark."""

from model import log as logs
from model.config import NodeConfig
from model.events import Response, Send
from model.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch, carried
from model.state import HeldFetch, NodeState, Role, held_fetches
from model.transitions import (
    as_sent,
    NO_OUTPUTS,
    Transition,
    advance_high_watermark,
    become_unattached,
    dropped,
    observe_leader,
    refused_as_invalid,
    replace,
    send_fetch,
    shut_down,
)
from model.validity import ahead_of_epoch_check, fetch_refusal
from model.vote import cluster_id_conflicts
from spec import errors


def handle_fetch_request(config: NodeConfig, state: NodeState, source: int, request: FetchRequest) -> Transition:
    def answer(s: NodeState, rules: tuple[str, ...], error: int = errors.NONE, *, top_error: int = errors.NONE, records=(), diverging=logs.NO_EPOCH, extra=()) -> Transition:
        response = fetch_response(config, s, error, top_error=top_error, records=records, diverging=diverging)
        return Transition(s, (Send(destination=source, message=response),) + extra, rules + ("COMMON-2",))

    if cluster_id_conflicts(config, request.ClusterId):
        return answer(state, ("FETCH-REQ-1",), top_error=errors.INCONSISTENT_CLUSTER_ID)
    refusal = ahead_of_epoch_check(config, fetch_refusal(config, request), request.CurrentLeaderEpoch, state.epoch)
    if refusal is not None:
        return answer(state, ("COMMON-4",), refusal)
    fenced = epoch_check(config, state, request.CurrentLeaderEpoch)
    if fenced is not None:
        error, rules = fenced
        return answer(state, rules, error)

    leader = state
    rules: tuple[str, ...] = ()
    consistent = logs.is_consistent(leader.log, request.FetchOffset, request.LastFetchedEpoch)
    if source in config.voters:
        fetched = leader.fetched | {source}
        if config.options.check_quorum_resets_on_majority and len(fetched) >= config.majority:
            fetched = frozenset((config.node_id,))
        acknowledged = consistent or not config.options.served_fetch_acknowledges
        leader = replace(leader, endorsed=leader.endorsed | {source} if acknowledged else leader.endorsed, fetched=fetched)
        rules = ("BEGIN-RESP-2",) if acknowledged else ()
    if not consistent:
        below = config.options.diverging_epoch == "below"
        diverging = logs.end_offset_for_epoch(leader.log, request.LastFetchedEpoch, strictly_below=below)
        if diverging == logs.NO_EPOCH:  # no epoch at or below the fetcher's: truncate from offset 0
            below_first = bool(leader.log) and config.choices.pick("FETCH-REQ-3A") == "last-fetched-epoch"
            diverging = replace(diverging, Epoch=request.LastFetchedEpoch if below_first else 0, EndOffset=0)
        code = errors.OFFSET_OUT_OF_RANGE if config.choices.pick("FETCH-REQ-3") == "offset-out-of-range" else errors.NONE
        return answer(leader, rules + ("FETCH-REQ-3", "FETCH-REQ-3A", "LOG-2"), code, diverging=diverging)

    committed = NO_OUTPUTS
    if source in config.replicas:
        index = config.replicas.index(source)
        offsets = leader.replica_offsets
        leader = replace(leader, replica_offsets=offsets[:index] + (request.FetchOffset,) + offsets[index + 1 :])
        if source in config.voters:
            leader, committed, decided = advance_high_watermark(config, leader)
            rules += ("FETCH-REQ-4",) + decided
        else:
            rules += ("HW-3",)
    limit = config.options.fetch_max_records
    records = leader.log[request.FetchOffset : request.FetchOffset + limit] if limit else leader.log[request.FetchOffset :]
    answered = answer(leader, rules + ("FETCH-REQ-3", "FETCH-REQ-6"), records=records, extra=committed)
    response = answered.outputs[0].message
    if not holds(config, request, response):
        return answered
    kept = HeldFetch(source=source, request=request, response=response)
    return Transition(replace(leader, held=held_fetches(leader) + (kept,)), committed, answered.rules + ("FETCH-REQ-7",))


def fetch_response(config: NodeConfig, state: NodeState, error: int, *, top_error: int = errors.NONE, records=(), diverging=logs.NO_EPOCH) -> FetchResponse:
    """COMMON-2: a Fetch answer as `state` sends it, with its leader and epoch; a refused one
    without the high watermark under Options.refused_fetch_without_high_watermark."""
    refused = error not in (errors.NONE, errors.OFFSET_OUT_OF_RANGE) and config.options.refused_fetch_without_high_watermark
    response = FetchResponse(
        ErrorCode=top_error,
        PartitionErrorCode=error,
        HighWatermark=-1 if refused else state.high_watermark,
        DivergingEpoch=diverging,
        CurrentLeader=LeaderIdAndEpoch(LeaderId=state.leader_id, LeaderEpoch=state.epoch),
        Records=records,
    )
    return as_sent(config, response)


def holds(config: NodeConfig, request: FetchRequest, response: FetchResponse) -> bool:
    """FETCH-REQ-7: whether the leader holds a Fetch rather than send `response` now: it asks to
    wait and would get nothing new (no error, records or DivergingEpoch; under
    Options.fetch_carries_high_watermark, no high watermark above the fetcher's)."""
    options = config.options
    if not options.held_fetches or carried(request, "MaxWaitMs") <= 0 or response.Records:
        return False
    if response.ErrorCode != errors.NONE or response.PartitionErrorCode != errors.NONE or response.DivergingEpoch.Epoch != -1:
        return False
    return not (options.fetch_carries_high_watermark and response.HighWatermark > carried(request, "HighWatermark"))


def epoch_check(config: NodeConfig, state: NodeState, current_leader_epoch: int) -> tuple[int, tuple[str, ...]] | None:
    """FETCH-REQ-2A/2B/5 (and K101-4, checked the same way): the refusal of a fetch that names
    another epoch or reaches a non-leader, with its rules; None when the leader may serve it.
    Where both apply, the order is the FETCH-REQ-5 choice point."""
    other_epoch = current_leader_epoch != state.epoch
    not_leader = state.role != Role.LEADER
    if not_leader and (not other_epoch or config.choices.pick("FETCH-REQ-5") == "leadership-first"):
        return errors.NOT_LEADER_OR_FOLLOWER, ("FETCH-REQ-5", "RESIGN-1") if state.role == Role.RESIGNED else ("FETCH-REQ-5",)
    if other_epoch and current_leader_epoch < state.epoch:
        return errors.FENCED_LEADER_EPOCH, ("FETCH-REQ-2A", "COMMON-1")
    if other_epoch:
        return errors.UNKNOWN_LEADER_EPOCH, ("FETCH-REQ-2B", "COMMON-1")
    return None


def handle_fetch_response(config: NodeConfig, state: NodeState, event: Response) -> Transition:
    if state.aside == (event.source, event.request):
        return answer_aside(config, state, event)
    response: FetchResponse = event.message
    if config.options.stale_responses_ignored and dropped(config, state, event.request == state.fetching):
        return Transition(state, NO_OUTPUTS, ("COMMON-3",))
    if response.ErrorCode == errors.INCONSISTENT_CLUSTER_ID and not config.options.cluster_id_conflict_fatal:
        elsewhere = config.options.unexpected_fetch_error_elsewhere
        retrying, outputs = send_fetch(config, state, any_voter=elsewhere, backing_off=event.source if elsewhere else -1)
        return Transition(retrying, outputs, ("FETCH-RESP-4",))
    if response.ErrorCode == errors.INCONSISTENT_CLUSTER_ID:
        reason = f"Fetch response from {event.source}: cluster id conflicts with ours ({config.cluster_id!r})"
        return shut_down(state, reason, ("FETCH-RESP-4", "BOOT-2"))
    leader = response.CurrentLeader
    observed = observe_leader(config, state, leader.LeaderId, leader.LeaderEpoch)
    if refused_as_invalid(config, state, response.PartitionErrorCode, leader.LeaderEpoch, observed):
        return shut_down(state, f"Fetch response from {event.source}: INVALID_REQUEST", ("COMMON-3",))
    fenced = response.PartitionErrorCode == errors.FENCED_LEADER_EPOCH
    clean = response.ErrorCode == errors.NONE and response.PartitionErrorCode == errors.NONE and response.DivergingEpoch.Epoch == -1
    if observed is not None:
        if fenced and leader.LeaderId == -1:
            unattached, outputs = become_unattached(config, state, leader.LeaderEpoch, discover=True)
            return Transition(unattached, outputs, ("FETCH-RESP-1", "OBS-2"))
        error_free = response.ErrorCode == errors.NONE and response.PartitionErrorCode == errors.NONE
        if config.options.discovery_appends and error_free and leader.LeaderEpoch == state.epoch and observed[0].leader_id == leader.LeaderId:
            taken = take_answer(config, observed[0], event)
            return Transition(taken.state, taken.outputs, ("COMMON-3", "OBS-2") + taken.rules)
        return Transition(observed[0], observed[1], ("FETCH-RESP-1", "COMMON-3") if fenced else ("COMMON-3", "OBS-2"))
    discovering = state.role == Role.UNATTACHED and config.options.unattached_discovery  # fetches like a leaderless observer
    following = state.role in (Role.FOLLOWER, Role.OBSERVER) or discovering
    if looks_for_leader(config, state):
        return look_again(config, state, ())
    if event.request != state.fetching or not following:
        # A late or repeated answer of its epoch, from its leader (or from a voter while it knows none).
        late = following and leader.LeaderEpoch == state.epoch and event.source in (state.leader_id, *(config.voters if state.leader_id == -1 else ()))
        reading = config.choices.pick("FETCH-RESP-3") if late else "ignore"
        if reading == "take-as-answer":
            return take_answer(config, state, event)
        if reading == "apply" and clean and event.source == state.leader_id:
            return Transition(replicate(config, state, response), NO_OUTPUTS, ("FETCH-RESP-3", "HW-4"))
        return Transition(state, NO_OUTPUTS, ())
    return take_answer(config, state, event)


def answer_aside(config: NodeConfig, state: NodeState, event: Response) -> Transition:
    """Options.observer_refetches_leader: the other voter's answer to a Fetch also sent to the
    leader is handled as the one awaited; while the node follows that leader still, its Fetch
    there is in flight, so nothing is sent again (Kafka 3.7: the leader's connection is busy)."""
    taken = handle_fetch_response(config, replace(state, aside=None, fetching=event.request), event)
    after = taken.state
    if (after.role, after.epoch, after.leader_id) != (state.role, state.epoch, state.leader_id):
        return taken
    kept = tuple(output for output in taken.outputs if not (type(output) is Send and type(output.message) is FetchRequest))
    return Transition(replace(after, fetching=state.fetching), kept, taken.rules)


def looks_for_leader(config: NodeConfig, state: NodeState) -> bool:
    """A voter that started without a known leader (BOOT-1) and has not found it: its Fetch went to
    the voters, and it stands when its election timer expires (Options.unattached_discovery, where
    it fetches like a leaderless observer instead, excepted)."""
    return state.role == Role.UNATTACHED and state.fetching is not None and not config.options.unattached_discovery


def look_again(config: NodeConfig, state: NodeState, rules: tuple[str, ...]) -> Transition:
    """BOOT-1B: such a voter "keeps retrying Fetch to random voters until the election timeout",
    at no stated moment: on an answer that names no leader, on its request timer, or never."""
    if config.choices.pick("BOOT-1B") == "wait":
        return Transition(state, NO_OUTPUTS, rules)
    retrying, outputs = send_fetch(config, state)
    return Transition(retrying, outputs, rules + ("BOOT-1", "OBS-2"))


# The partition errors a Fetch answer of the node's epoch may carry that Kafka handles as news of
# the epoch (KafkaRaftClient.maybeHandleCommonResponse); Options.unexpected_fetch_error_elsewhere.
EXPECTED_FETCH_ERRORS = (errors.NONE, errors.FENCED_LEADER_EPOCH, errors.NOT_LEADER_OR_FOLLOWER, errors.UNKNOWN_LEADER_EPOCH)


def take_answer(config: NodeConfig, state: NodeState, event: Response) -> Transition:
    """FETCH-RESP-1..5: a fetcher's answer to the Fetch it awaits: re-send on an error, truncate on
    DivergingEpoch, else append and take the high watermark; then fetch again."""
    response: FetchResponse = event.message
    diverging = response.DivergingEpoch.Epoch != -1 and response.PartitionErrorCode in (errors.NONE, errors.OFFSET_OUT_OF_RANGE)
    if not diverging and (response.PartitionErrorCode != errors.NONE or response.ErrorCode != errors.NONE):
        # An answer of an earlier epoch is no longer relevant, whatever its partition error (the
        # top-level one is read first).
        current = response.CurrentLeader.LeaderEpoch >= state.epoch
        unexpected = response.ErrorCode != errors.NONE or (current and response.PartitionErrorCode not in EXPECTED_FETCH_ERRORS)
        backs_off = config.options.unexpected_fetch_error_elsewhere and unexpected
        retrying, outputs = send_fetch(config, state, any_voter=state.fetch_stalled or backs_off, backing_off=event.source if backs_off else -1)
        fenced = response.PartitionErrorCode == errors.FENCED_LEADER_EPOCH
        return Transition(retrying, outputs, ("FETCH-RESP-1",) if fenced else ("FETCH-SEND-2", "FETCH-SEND-1"))
    if diverging:
        log = logs.truncate_diverging(state.log, response.DivergingEpoch, own_epochs=config.options.truncate_by_own_epochs)
        if len(log) < state.high_watermark:
            reason = (
                f"Fetch response from {event.source}: DivergingEpoch (epoch {response.DivergingEpoch.Epoch}, end offset "
                f"{response.DivergingEpoch.EndOffset}) would truncate to offset {len(log)}, below our high watermark {state.high_watermark}"
            )
            return shut_down(state, reason, ("FETCH-RESP-2",))
        answered = response.PartitionErrorCode == errors.NONE  # the leader answered: the fetch timer starts again
        truncated, outputs = send_fetch(config, replace(state, log=log, fetched_from_leader=heard_from_leader(config, state) and answered, fetch_stalled=state.fetch_stalled and not answered))
        return Transition(truncated, outputs, ("FETCH-RESP-2", "K101-3", "FETCH-SEND-2", "FETCH-SEND-1"))
    rules: tuple[str, ...] = ("FETCH-RESP-3", "HW-4", "FETCH-SEND-2", "FETCH-SEND-1")
    replicated = replicate(config, state, response)
    if config.options.high_watermark_regression_fatal and 0 <= replicated.high_watermark < state.high_watermark:
        # Kafka appends the records first (handleFetchResponse: appendAsFollower, then
        # updateFollowerHighWatermark throws), so the node stops with them in its log.
        reason = f"Fetch response from {event.source}: high watermark {response.HighWatermark} is below ours, {state.high_watermark}"
        return shut_down(replace(state, log=replicated.log), reason, ("HW-4",))
    records = response.Records or ()
    if records and records[0].Offset == len(state.log) and any(not isinstance(r.Value, int) for r in records):
        rules += ("FETCH-RESP-5",)
    fetching, outputs = send_fetch(config, replicated)
    return Transition(fetching, outputs, rules)


def replicate(config: NodeConfig, state: NodeState, response: FetchResponse) -> NodeState:
    """FETCH-RESP-3, HW-4: append the records if they start at the log end, then take the high
    watermark, unless the leader does not know it (-1: the follower keeps its own). The node has
    now heard from its leader in this role (what a pre-vote asks, Options.pre_vote), and its fetch
    timer starts again (Options.stalled_fetch_any_voter)."""
    log = state.log
    records = response.Records or ()
    if records and records[0].Offset == len(log):
        log = log + tuple(records)
    known = response.HighWatermark >= 0
    return replace(
        state,
        log=log,
        high_watermark=min(response.HighWatermark, len(log)) if known else state.high_watermark,
        fetched_from_leader=heard_from_leader(config, state),
        fetch_stalled=False,
    )


def heard_from_leader(config: NodeConfig, state: NodeState) -> bool:
    """Whether a follower has had a Fetch answered by its leader: kept only where pre-votes ask it (Options.pre_vote)."""
    return config.options.pre_vote and state.role == Role.FOLLOWER
