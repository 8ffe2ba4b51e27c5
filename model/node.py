"""A KRaft node as a pure state machine: step(config, state, event) -> Transition.

One entry point for every input, as in etcd's raft `Step`: requests and responses go to their
RPC's handler, timers, client appends, resignation, crash and restart are handled here.
"""

from model.begin_epoch import handle_begin_request, handle_begin_response
from model.config import NodeConfig
from model.describe import handle_describe_request
from model.end_epoch import end_epoch, handle_end_request, handle_end_response, resend_end_epoch, resign
from model.events import AppendResult, ClientAppend, Crash, Event, Request, Resign, Response, Restart, Send, Timer, TimerKind
from model.fetch import handle_fetch_request, handle_fetch_response, look_again, looks_for_leader
from model import held
from model import log as logs
from model.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    VoteRequest,
    VoteResponse,
)
from model.offsets import handle_offsets_request
from model.state import NodeState, Role
from model.transitions import (
    NO_OUTPUTS,
    Transition,
    advance_high_watermark,
    become_leader,
    become_prospective,
    become_follower,
    become_unattached,
    election_timer,
    enter_role,
    lose_pre_vote,
    lost,
    replace,
    request_votes,
    send_fetch,
    stand,
    standing_rules,
)
from model.vote import handle_vote_request, handle_vote_response
from spec import errors

REQUEST_HANDLERS = {
    VoteRequest: handle_vote_request,
    BeginQuorumEpochRequest: handle_begin_request,
    EndQuorumEpochRequest: handle_end_request,
    FetchRequest: handle_fetch_request,
    DescribeQuorumRequest: handle_describe_request,
    OffsetsForLeaderEpochRequest: handle_offsets_request,
}

RESPONSE_HANDLERS = {
    VoteResponse: handle_vote_response,
    BeginQuorumEpochResponse: handle_begin_response,
    EndQuorumEpochResponse: handle_end_response,
    FetchResponse: handle_fetch_response,
}

UNCHANGED: tuple[str, ...] = ()


def initial_state(config: NodeConfig) -> NodeState:
    """A node on a freshly bootstrapped cluster: epoch 0, no leader, no vote, empty log. With
    Options.unattached_discovery or unattached_voter_waits it is down until it starts, as from an
    empty persisted state, so that what it sends on starting is an output like any other."""
    if config.options.unattached_discovery or config.options.unattached_voter_waits:
        return NodeState(role=Role.DOWN)
    return NodeState(role=Role.UNATTACHED if config.is_voter else Role.OBSERVER, high_watermark=unknown_or_zero(config))


def unknown_or_zero(config: NodeConfig) -> int:
    """The high watermark a node starts with: not persisted, so unknown (-1) where it can be (Options.unknown_high_watermark)."""
    return -1 if config.options.unknown_high_watermark else 0


def step(config: NodeConfig, state: NodeState, event: Event) -> Transition:
    """Apply one event to one node."""
    transition = handle(config, state, event)
    if state.held or transition.state.held:
        transition = held.settle(config, state, transition)
    if not config.options.stale_responses_ignored:
        return transition
    after = transition.state
    returned = after.epoch == state.epoch and (state.returned or after.role != state.role or isinstance(event, Restart))
    return transition if after.returned == returned else Transition(replace(after, returned=returned), transition.outputs, transition.rules)


def handle(config: NodeConfig, state: NodeState, event: Event) -> Transition:
    """The event at its handler."""
    if state.role == Role.DOWN and not isinstance(event, Restart):
        return Transition(state, NO_OUTPUTS, UNCHANGED)
    kind = type(event)
    if kind is Request:
        return REQUEST_HANDLERS[type(event.message)](config, state, event.source, event.message)
    if kind is Response:
        handler = RESPONSE_HANDLERS.get(type(event.message))
        return handler(config, state, event) if handler else Transition(state, NO_OUTPUTS, UNCHANGED)
    if kind is Timer:
        return on_timer(config, state, event.kind)
    if kind is ClientAppend:
        return on_client_append(config, state, event.value)
    if kind is Resign:
        return resign(config, state)
    if kind is Crash:
        return Transition(enter_role(state, Role.DOWN, high_watermark=0), NO_OUTPUTS, ("QSTATE-3", "LOG-3"))
    return restart(config, state)


def armed_timers(config: NodeConfig, state: NodeState) -> tuple[TimerKind, ...]:
    """The timers whose expiry changes something in this state (what the environment may fire):
    its role's, and the wait of the Fetches it holds (FETCH-REQ-7)."""
    timers = role_timers(config, state)
    return timers + (TimerKind.FETCH_WAIT,) if state.held else timers


def role_timers(config: NodeConfig, state: NodeState) -> tuple[TimerKind, ...]:
    role = state.role
    if role == Role.FOLLOWER or (role == Role.OBSERVER and config.options.observer_fetch_timeout and not state.fetch_stalled):
        return (TimerKind.FETCH_TIMEOUT, TimerKind.REQUEST_TIMEOUT)
    if role == Role.OBSERVER:
        return (TimerKind.REQUEST_TIMEOUT,)
    if role in (Role.CANDIDATE, Role.PROSPECTIVE):
        return (TimerKind.ELECTION_TIMEOUT, TimerKind.REQUEST_TIMEOUT)
    if role == Role.UNATTACHED and (config.options.unattached_discovery or looks_for_leader(config, state)):
        return (TimerKind.ELECTION_TIMEOUT, TimerKind.REQUEST_TIMEOUT)
    if role == Role.RESIGNED and config.options.resigned_resends_end_epoch:
        return (TimerKind.ELECTION_TIMEOUT, TimerKind.REQUEST_TIMEOUT)
    if role in (Role.UNATTACHED, Role.RESIGNED):
        return (TimerKind.ELECTION_TIMEOUT,)
    if role == Role.LEADER and config.options.leader_never_resigns:
        return (TimerKind.REQUEST_TIMEOUT,)
    if role == Role.LEADER:
        return (TimerKind.PROGRESS_TIMEOUT, TimerKind.REQUEST_TIMEOUT)
    return ()


def on_timer(config: NodeConfig, state: NodeState, kind: TimerKind) -> Transition:
    role = state.role
    if kind == TimerKind.FETCH_TIMEOUT:
        if role == Role.FOLLOWER:
            return candidacy(config, state, "ELECT-1")
        if role == Role.OBSERVER and (not config.options.observer_fetch_timeout or state.fetch_stalled):
            return Transition(state, NO_OUTPUTS, UNCHANGED)  # no fetch timer armed
        if role == Role.OBSERVER and config.options.stalled_fetch_any_voter:
            if state.fetching is not None:  # its Fetch still in flight: any voter is asked once that times out (RETRY-1)
                return Transition(replace(state, fetch_stalled=True), NO_OUTPUTS, ("OBS-1",))
            fetching, outputs = send_fetch(config, replace(state, fetch_stalled=True, aside=None), any_voter=True)
            return Transition(fetching, outputs, ("OBS-1", "OBS-2"))
        if role == Role.OBSERVER:
            unattached, outputs = become_unattached(config, state, state.epoch, discover=True)
            return Transition(unattached, outputs, ("OBS-1", "OBS-2", "BOOT-4"))
    elif kind == TimerKind.ELECTION_TIMEOUT and role == Role.PROSPECTIVE:
        # KIP-996: out of time, it follows the leader it knew again; without one, asks once more or waits unattached (ELECT-2B).
        # Under the faulty Options.prospective_never_gives_up it asks again, whatever it knows.
        gives_up = not config.options.prospective_never_gives_up and (state.leader_id != -1 or config.choices.pick("ELECT-2B") == "unattached-first")
        after, outputs = lose_pre_vote(config, state) if gives_up else become_prospective(config, state)
        return Transition(after, outputs, ("ELECT-2",))
    elif kind == TimerKind.ELECTION_TIMEOUT and role in (Role.CANDIDATE, Role.UNATTACHED, Role.RESIGNED):
        rule = {Role.CANDIDATE: "ELECT-2", Role.UNATTACHED: "ELECT-3", Role.RESIGNED: "RESIGN-1"}[role]
        return candidacy(config, state, rule)
    elif kind == TimerKind.PROGRESS_TIMEOUT and role == Role.LEADER:
        if len(state.fetched) >= config.majority:
            return Transition(replace(state, fetched=frozenset((config.node_id,))), NO_OUTPUTS, ("PROGRESS-1",))
        if config.options.progress_timeout_resigns:
            resigned = resign(config, state)
            return Transition(resigned.state, resigned.outputs, ("PROGRESS-1",) + resigned.rules)
        return candidacy(config, state, "PROGRESS-1")
    elif kind == TimerKind.REQUEST_TIMEOUT:
        return retry_requests(config, state)
    elif kind == TimerKind.FETCH_WAIT:
        return held.expire(state)
    return Transition(state, NO_OUTPUTS, UNCHANGED)


def candidacy(config: NodeConfig, state: NodeState, reason: str) -> Transition:
    """Start an election, or its pre-vote (Options.pre_vote); a single voter wins it at once (ELECT-4, VOTE-RESP-2/3)."""
    candidate, outputs = stand(config, state)
    return Transition(candidate, outputs, (reason,) + standing_rules(candidate))


def retry_requests(config: NodeConfig, state: NodeState) -> Transition:
    """RETRY-1: re-send what is unanswered: the Fetch, the Vote requests, the BeginQuorumEpochs
    (and a resigned node's EndQuorumEpochs under Options.resigned_resends_end_epoch)."""
    role = state.role
    if role in (Role.FOLLOWER, Role.OBSERVER) or (role == Role.UNATTACHED and config.options.unattached_discovery):
        fetching, outputs = send_fetch(config, state, any_voter=config.options.stalled_fetch_any_voter)
        if config.options.observer_refetches_leader and role == Role.OBSERVER and state.leader_id != -1 and not state.fetch_stalled:
            picked = {output.destination for output in outputs}
            aside = (picked.pop(), fetching.fetching) if len(picked) == 1 and state.leader_id not in picked else None
            fetching, outputs = replace(fetching, aside=aside), outputs + (Send(destination=state.leader_id, message=fetching.fetching),)
        return Transition(fetching, outputs, ("RETRY-1", "FETCH-SEND-1"))
    if looks_for_leader(config, state):
        return look_again(config, state, ("RETRY-1",))
    if role == Role.CANDIDATE and lost(config, state) and config.choices.pick("ELECT-6") == "on-request-timer":
        again, outputs = stand(config, state)  # its random backoff ended before the request timer fired
        return Transition(again, outputs, ("RETRY-1", "VOTE-RESP-2") + standing_rules(again))
    if role in (Role.CANDIDATE, Role.PROSPECTIVE):
        if config.choices.pick("RETRY-1") == "nothing":
            return Transition(state, NO_OUTPUTS, ("RETRY-1",))
        return Transition(state, request_votes(config, state), ("RETRY-1",))
    if role == Role.RESIGNED and config.options.resigned_resends_end_epoch:
        return Transition(state, resend_end_epoch(config, state), ("RETRY-1", "END-SEND-2"))
    if role == Role.LEADER:
        if config.choices.pick("BEGIN-RESP-1") == "nothing":
            return Transition(state, NO_OUTPUTS, ("RETRY-1", "BEGIN-RESP-1"))
        announce = BeginQuorumEpochRequest(ClusterId=config.cluster_id, LeaderId=config.node_id, LeaderEpoch=state.epoch)
        heard = frozenset((config.node_id,)) if config.options.begin_epoch_heartbeat else state.endorsed
        outputs = tuple(Send(destination=v, message=announce) for v in config.voters if v not in heard)
        return Transition(state, outputs, ("RETRY-1", "BEGIN-RESP-1"))
    return Transition(state, NO_OUTPUTS, UNCHANGED)


def on_client_append(config: NodeConfig, state: NodeState, value: int) -> Transition:
    """CLIENT-1: only the leader appends, in its own epoch."""
    if state.role != Role.LEADER:
        rules = ("CLIENT-1", "RESIGN-1") if state.role == Role.RESIGNED else ("CLIENT-1",)
        return Transition(state, (AppendResult(ErrorCode=errors.NOT_LEADER_OR_FOLLOWER, Offset=-1),), rules)
    log = logs.append(state.log, state.epoch, value)
    me = config.replicas.index(config.node_id)
    offsets = state.replica_offsets[:me] + (len(log),) + state.replica_offsets[me + 1 :]
    leader, committed, _ = advance_high_watermark(config, replace(state, log=log, replica_offsets=offsets))
    return Transition(leader, (AppendResult(ErrorCode=errors.NONE, Offset=len(log) - 1),) + committed, ("CLIENT-1", "CLIENT-2", "LOG-1"))


def restart(config: NodeConfig, state: NodeState) -> Transition:
    """QSTATE-3/4: come back from the quorum-state file and the log; volatile state starts afresh.
    The only voter of its quorum then stands at once under Options.sole_voter_stands_at_start."""
    resumed = resume(config, state)
    alone = config.voters == (config.node_id,)
    if not (alone and config.options.sole_voter_stands_at_start and resumed.state.role in (Role.UNATTACHED, Role.FOLLOWER, Role.RESIGNED)):
        return resumed
    # It stands in the epoch its files give, a resigned leader's too (no epoch of its own first),
    # before it sends anything in the role it resumed.
    stood, outputs = stand(config, replace(resumed.state, role=Role.UNATTACHED))
    return Transition(stood, outputs, resumed.rules + ("ELECT-3",) + standing_rules(stood))


def resume(config: NodeConfig, state: NodeState) -> Transition:
    """The state and outputs a restart resumes from the quorum-state file and the log."""
    voted_id = -1 if config.options.forget_vote_on_restart else state.voted_id
    durable = NodeState(role=Role.DOWN, epoch=state.epoch, leader_id=state.leader_id, voted_id=voted_id, log=state.log, high_watermark=unknown_or_zero(config))
    if logs.last_epoch(state.log) > state.epoch:
        # The log has seen a later epoch than the file (a stale or hand-edited file): the file's
        # leader and vote belong to an epoch that is over, so it starts unattached in the log's.
        durable = replace(durable, epoch=logs.last_epoch(state.log), leader_id=-1, voted_id=-1)
    me = config.node_id
    if durable.leader_id == me:
        outputs = end_epoch(config, durable.epoch, ()) if config.options.restart_resigned_ends_epoch else NO_OUTPUTS
        return Transition(replace(durable, role=Role.RESIGNED), outputs, ("QSTATE-1", "QSTATE-3", "QSTATE-4"))
    own_vote = durable.voted_id == me and config.is_voter
    if durable.leader_id != -1 and not (own_vote and config.options.restart_candidate_first):
        follower, outputs = become_follower(config, durable, durable.leader_id, durable.epoch)
        return Transition(follower, outputs, ("QSTATE-1", "QSTATE-3", "QSTATE-4", "FETCH-SEND-1"))
    if own_vote and config.choices.pick("QSTATE-4B") == "stand":
        candidate = replace(durable, role=Role.CANDIDATE, leader_id=-1, granted=frozenset((me,)))
        if len(candidate.granted) >= config.majority:  # the only voter: its own vote elects it (VOTE-RESP-2)
            leader, outputs = become_leader(config, candidate)
            return Transition(leader, outputs, ("QSTATE-1", "QSTATE-3", "QSTATE-4", "VOTE-RESP-2", "VOTE-RESP-3"))
        outputs = request_votes(config, candidate) + (election_timer(config),)
        return Transition(candidate, outputs, ("QSTATE-1", "QSTATE-3", "QSTATE-4"))
    unattached, outputs = become_unattached(config, durable, durable.epoch, discover=True)
    return Transition(unattached, outputs, ("QSTATE-1", "QSTATE-3", "QSTATE-4", "BOOT-1"))
