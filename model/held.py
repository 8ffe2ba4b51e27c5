"""Held Fetches (FETCH-REQ-7, Options.held_fetches): when and how a Fetch the leader held is answered.

The Fetch handler holds a Fetch that asks to wait and finds nothing new (model/fetch.py holds);
what answers it is the step after which the node's state says so, settled here once per step,
after the handler, as Kafka completes its purgatory after the change that completes it: afresh
once records come past it (or, under KIP-1166, the high watermark moves), NOT_LEADER_OR_FOLLOWER
once the node resigns or follows a leader, as it came when its wait runs out (the fetch_wait
timer), and never after a crash. Kafka keeps its purgatory through any other change of role, so
the held Fetches stay with the node until one of these.
"""

import msgspec

from model.config import NodeConfig
from model.events import Answer, Send
from model.fetch import fetch_response, handle_fetch_request
from model.state import HeldFetch, NodeState, Role, held_fetches
from model.transitions import NO_OUTPUTS, Transition, replace
from spec import errors


def settle(config: NodeConfig, before: NodeState, transition: Transition) -> Transition:
    """The step's transition with the Fetches it completes answered, and what it forgets dropped."""
    after = transition.state
    if after.role == Role.DOWN:
        return Transition(replace(after, held=msgspec.UNSET), transition.outputs, transition.rules)
    holding = held_fetches(after)
    waiting = holding[: len(held_fetches(before))]  # a Fetch held by this very step waits on
    if not waiting:
        return transition
    if leadership_ended(before, after):
        refused, answers = refuse(config, after, len(waiting))
        return Transition(refused, transition.outputs + answers, transition.rules + ("FETCH-REQ-7",))
    if after.role != Role.LEADER:
        return transition
    moved = config.options.fetch_carries_high_watermark and after.high_watermark != before.high_watermark
    due = [i for i, h in enumerate(waiting) if moved or h.request.FetchOffset < len(after.log)]
    if not due:
        return transition
    state = replace(after, held=tuple(h for i, h in enumerate(holding) if i not in due) or msgspec.UNSET)
    outputs, rules = transition.outputs, transition.rules + ("FETCH-REQ-7",)
    for i in due:
        state, answered = answer_afresh(config, state, waiting[i])
        outputs += answered
    return Transition(state, outputs, rules)


def refuse(config: NodeConfig, state: NodeState, count: int | None = None) -> tuple[NodeState, tuple[Answer, ...]]:
    """The first `count` held Fetches (all by default) answered NOT_LEADER_OR_FOLLOWER as `state`
    answers, as Kafka fails its purgatory on resigning or following (completeAllExceptionally),
    and the state without them. The EndQuorumEpoch handler calls it where a node follows and
    stands in one step, so the answers name the leader it followed in between."""
    holding = held_fetches(state)
    failed = holding if count is None else holding[:count]
    refusal = fetch_response(config, state, errors.NOT_LEADER_OR_FOLLOWER)
    answers = tuple(Answer(destination=h.source, message=refusal, request=h.request) for h in failed)
    return replace(state, held=holding[len(failed) :] or msgspec.UNSET), answers


def leadership_ended(before: NodeState, after: NodeState) -> bool:
    """Whether the step resigned the leader or made the node follow a leader (another, or in
    another epoch): where Kafka fails its held Fetches (transitionToResigned, onBecomeFollower)."""
    if after.role == Role.RESIGNED:
        return before.role == Role.LEADER
    following = (after.role, after.epoch, after.leader_id)
    return after.role in (Role.FOLLOWER, Role.OBSERVER) and following != (before.role, before.epoch, before.leader_id)


def answer_afresh(config: NodeConfig, state: NodeState, fetch: HeldFetch) -> tuple[NodeState, tuple]:
    """A held Fetch handled again as if it asked to wait no longer, its answer sent as an Answer."""
    again = handle_fetch_request(config, state, fetch.source, replace(fetch.request, MaxWaitMs=msgspec.UNSET))
    outputs = tuple(
        Answer(destination=o.destination, message=o.message, request=fetch.request) if type(o) is Send and o.destination == fetch.source else o
        for o in again.outputs
    )
    return again.state, outputs


def expire(state: NodeState) -> Transition:
    """The fetch_wait timer: the oldest held Fetch's wait runs out, and it gets the answer it had when it came."""
    if not state.held:
        return Transition(state, NO_OUTPUTS, ())
    oldest = state.held[0]
    return Transition(replace(state, held=state.held[1:] or msgspec.UNSET), (Answer(destination=oldest.source, message=oldest.response, request=oldest.request),), ("FETCH-REQ-7",))
