"""The `mutant:NAME` adapters: the model with one seeded bug each.

A conformance suite is only as good as the bugs it catches. Each mutant wraps the reference
step (model.node.step) and breaks one rule of spec/rules.toml, cited in its description: it
switches on a faulty model option, or changes the step's input before the reference handles
it, or the step's result after. Every mutant changes something replay compares (a response,
the requests sent, the observable state) in some reachable situation, so a trace suite that
lets one pass has a gap.
"""

from collections.abc import Callable
from typing import NamedTuple

import msgspec

from adapters.model_adapter import ModelAdapter, StepFunction
from model import log as logs
from model import node as nodes
from model.config import NodeConfig
from model.events import Event, Request, Response, Restart, Send
from model.messages import (
    RESPONSE_FOR,
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Message,
    OffsetsForLeaderEpochRequest,
    VoteRequest,
    VoteResponse,
)
from model.state import NodeState, Role
from model.transitions import Transition, become_leader
from spec import errors

replace = msgspec.structs.replace

Input = tuple[NodeConfig, NodeState, Event]
Before = Callable[[NodeConfig, NodeState, Event], Input]
After = Callable[[NodeConfig, NodeState, Event, Transition], Transition]


class Mutant(NamedTuple):
    name: str  # kebab-case, the NAME of `mutant:NAME`
    description: str  # the bug, and the rule it breaks
    step: StepFunction  # same signature as model.node.step


def input_kind(event: Event) -> type:
    """What a mutant keys on: the message type of a request or response, else the event's type."""
    return type(event.message) if isinstance(event, Request | Response) else type(event)


def before(kind: type, adjust: Before) -> StepFunction:
    """The reference, handling inputs of one kind as if config, state or event were adjusted."""

    def mutant_step(config: NodeConfig, state: NodeState, event: Event) -> Transition:
        if input_kind(event) is kind:
            config, state, event = adjust(config, state, event)
        return nodes.step(config, state, event)

    return mutant_step


def after(kind: type, adjust: After) -> StepFunction:
    """The reference, with its transition on inputs of one kind adjusted."""

    def mutant_step(config: NodeConfig, state: NodeState, event: Event) -> Transition:
        transition = nodes.step(config, state, event)
        return adjust(config, state, event, transition) if input_kind(event) is kind else transition

    return mutant_step


def with_options(**switches: object) -> StepFunction:
    """The reference with some of model.config.Options switched: the model's own faulty variants."""

    def mutant_step(config: NodeConfig, state: NodeState, event: Event) -> Transition:
        return nodes.step(replace(config, options=replace(config.options, **switches)), state, event)

    return mutant_step


def answered_without_error(message: Message) -> bool:
    """Rewrites touch only successful answers: an error answer carries none of the rewritten fields."""
    return all(getattr(message, field) == errors.NONE for field in message.__struct_fields__ if field.endswith("ErrorCode"))


def answer_rewritten(kind: type, rewrite: Callable[[Message], Message]) -> StepFunction:
    """The reference, with its error-free answer to a `kind` request rewritten."""
    response_type = RESPONSE_FOR[kind]

    def rewritten(output: object) -> object:
        if type(output) is Send and type(output.message) is response_type and answered_without_error(output.message):
            return replace(output, message=rewrite(output.message))
        return output

    def adjust(config: NodeConfig, state: NodeState, event: Event, transition: Transition) -> Transition:
        return transition._replace(outputs=tuple(rewritten(output) for output in transition.outputs))

    return after(kind, adjust)


def shifted(field: str, delta: int) -> Callable[[Message], Message]:
    """An off-by-one in one offset field."""
    return lambda message: replace(message, **{field: getattr(message, field) + delta})


def with_message(event: Event, **changes: object) -> Event:
    """The request or response event with some fields of its message changed."""
    return replace(event, message=replace(event.message, **changes))


def ignore_cluster_id(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """A null ClusterId is never refused (BOOT-2), so this skips the check."""
    return config, state, with_message(event, ClusterId=None)


def revote_in_epoch(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """The vote already given in the candidate's epoch is overlooked."""
    if event.message.CandidateEpoch == state.epoch:
        state = replace(state, voted_id=-1)
    return config, state, event


def count_any_epoch(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """A candidate taking a response from an earlier election as one for its current epoch."""
    if state.role == Role.CANDIDATE and event.message.LeaderEpoch < state.epoch:
        event = replace(
            event,
            message=replace(event.message, LeaderEpoch=state.epoch),
            request=replace(event.request, CandidateEpoch=state.epoch),
        )
    return config, state, event


def skip_fenced_check(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """Handled as if the node were still in the stale epoch, knowing no leader and no vote there."""
    if event.message.LeaderEpoch < state.epoch:
        state = replace(state, epoch=event.message.LeaderEpoch, leader_id=-1, voted_id=-1)
    return config, state, event


def first_successor_last(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """The node reads its position 0 as the last one, so it backs off (END-REQ-6) instead."""
    successors = event.message.PreferredSuccessors
    if successors[:1] == (config.node_id,):
        event = with_message(event, PreferredSuccessors=successors[1:] + successors[:1])
    return config, state, event


def serve_stale_epoch(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """The leader reads an older CurrentLeaderEpoch as its own."""
    if state.role == Role.LEADER and event.message.CurrentLeaderEpoch < state.epoch:
        event = with_message(event, CurrentLeaderEpoch=state.epoch)
    return config, state, event


def observers_as_voters(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """Same replica order (voters then observers), so the leader's replica_offsets still line up."""
    return replace(config, voters=config.replicas, observers=()), state, event


def unbounded_high_watermark(config: NodeConfig, state: NodeState, event: Event, transition: Transition) -> Transition:
    """Where the reference applies HW-4, the response's HighWatermark is taken as it is."""
    if "HW-4" not in transition.rules:
        return transition
    return transition._replace(state=replace(transition.state, high_watermark=event.message.HighWatermark))


def truncate_by_offset(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """No local record has an epoch above the follower's last one, so only EndOffset cuts."""
    diverging = event.message.DivergingEpoch
    if diverging.Epoch != -1:
        event = with_message(event, DivergingEpoch=replace(diverging, Epoch=max(diverging.Epoch, logs.last_epoch(state.log))))
    return config, state, event


def resume_leadership(config: NodeConfig, state: NodeState, event: Event, transition: Transition) -> Transition:
    """Where the reference comes back resigned, the node takes up leadership of its epoch again."""
    if transition.state.role != Role.RESIGNED:
        return transition
    leader, outputs = become_leader(config, replace(transition.state, granted=frozenset((config.node_id,))))
    return Transition(leader, outputs, transition.rules)


def _catalogue(*mutants: Mutant) -> dict[str, Mutant]:
    """By name, in the order given."""
    return {mutant.name: mutant for mutant in mutants}


MUTANTS: dict[str, Mutant] = _catalogue(
    # Vote request
    Mutant(
        "vote-foreign-cluster",
        "a voter ignores the Vote request's ClusterId: it may grant a candidate of another cluster instead of answering INCONSISTENT_CLUSTER_ID (VOTE-REQ-1)",
        before(VoteRequest, ignore_cluster_id),
    ),
    Mutant(
        "vote-grant-twice",
        "a voter that already voted in the epoch votes again for another candidate of that epoch (VOTE-REQ-3)",
        before(VoteRequest, revote_in_epoch),
    ),
    Mutant(
        "vote-no-log-check",
        "a voter grants without checking that the candidate's log is at least as up to date as its own (VOTE-REQ-4B)",
        with_options(vote_without_log_check=True),
    ),
    # Vote response and the LeaderChange record
    Mutant(
        "vote-response-other-epoch",
        "a candidate counts a Vote response answering its request of an earlier epoch toward its current election (VOTE-RESP-1)",
        before(VoteResponse, count_any_epoch),
    ),
    Mutant(
        "leader-change-skipped",
        "a new leader appends no LeaderChange record in its epoch (VOTE-RESP-3)",
        with_options(skip_leader_change=True),
    ),
    # BeginQuorumEpoch
    Mutant(
        "begin-stale-epoch",
        "a voter accepts a BeginQuorumEpoch of an older epoch instead of answering FENCED_LEADER_EPOCH, going back to that epoch (BEGIN-REQ-2)",
        before(BeginQuorumEpochRequest, skip_fenced_check),
    ),
    # EndQuorumEpoch
    Mutant(
        "end-successor-waits",
        "the first preferred successor keeps following the resigned leader and waits a backoff like the others instead of starting an election at once (END-REQ-5)",
        before(EndQuorumEpochRequest, first_successor_last),
    ),
    # Fetch, leader side, and the high watermark
    Mutant(
        "fetch-stale-epoch-served",
        "a leader serves a Fetch whose CurrentLeaderEpoch is older than its epoch instead of answering FENCED_LEADER_EPOCH (FETCH-REQ-2A)",
        before(FetchRequest, serve_stale_epoch),
    ),
    Mutant(
        "fetch-no-diverging-epoch",
        "a leader answers a Fetch inconsistent with its log without the DivergingEpoch, so the fetcher never truncates (FETCH-REQ-3)",
        answer_rewritten(FetchRequest, lambda answer: replace(answer, DivergingEpoch=logs.NO_EPOCH)),
    ),
    Mutant(
        "fetch-diverging-below",
        "a leader's DivergingEpoch names the largest epoch strictly below LastFetchedEpoch, not the largest one at most it (FETCH-REQ-3A)",
        with_options(diverging_epoch="below"),
    ),
    Mutant(
        "hw-any-epoch",
        "a leader advances its high watermark before a record of its own epoch is on a majority (HW-1)",
        with_options(hw_any_epoch=True),
    ),
    Mutant(
        "hw-counts-observers",
        "a leader counts observers' replicated offsets toward the high-watermark majority, as if they were voters (HW-3)",
        before(FetchRequest, observers_as_voters),
    ),
    # Fetch, follower side, and truncation
    Mutant(
        "follower-hw-unbounded",
        "a follower takes the leader's HighWatermark without bounding it by its own log end offset (HW-4)",
        after(FetchResponse, unbounded_high_watermark),
    ),
    Mutant(
        "truncate-by-offset-only",
        "a follower given a DivergingEpoch truncates only at its EndOffset, keeping the records below it of epochs larger than its Epoch (FETCH-RESP-2)",
        before(FetchResponse, truncate_by_offset),
    ),
    Mutant(
        "truncate-to-hw",
        "a node that starts following a leader truncates its log to its high watermark (K101-3)",
        with_options(truncate_to_hw=True),
    ),
    # DescribeQuorum, OffsetsForLeaderEpoch
    Mutant(
        "describe-hw-last-offset",
        "DescribeQuorum reports the offset of the last committed record (high watermark - 1) as HighWatermark, which is an end offset (DESCRIBE-REQ-2)",
        answer_rewritten(DescribeQuorumRequest, shifted("HighWatermark", -1)),
    ),
    Mutant(
        "offsets-end-offset-plus-one",
        "a leader answers OffsetsForLeaderEpoch with the epoch's end offset + 1 (K101-2)",
        answer_rewritten(OffsetsForLeaderEpochRequest, shifted("EndOffset", +1)),
    ),
    # Restart and the quorum-state file
    Mutant(
        "restart-forgets-vote",
        "VotedId is not kept across a restart, so the voter may vote again in the same epoch (QSTATE-3)",
        with_options(forget_vote_on_restart=True),
    ),
    Mutant(
        "restart-resumes-leadership",
        "a voter whose quorum-state file names itself as leader leads that epoch again after a restart instead of coming back resigned (QSTATE-4)",
        after(Restart, resume_leadership),
    ),
)


def mutant_adapter(name: str) -> ModelAdapter:
    """The adapter `mutant:NAME`: one node of the model with that mutant's bug."""
    if name not in MUTANTS:
        raise ValueError(f"unknown mutant {name!r}; known mutants: {', '.join(MUTANTS)}")
    return ModelAdapter(f"mutant:{name}", MUTANTS[name].step)
