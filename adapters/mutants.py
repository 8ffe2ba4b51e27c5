"""The `mutant:NAME` adapters: the model with one seeded bug each.

A conformance suite is only as good as the bugs it catches. Each mutant wraps the reference
step of its system (model.node.step for KRaft nodes, model.isr.replica.step for ISR replicas)
and breaks one rule of spec/rules.toml, cited in its description: it
switches on a faulty model option, or changes the step's input before the reference handles
it, or the step's result after. Every mutant changes something replay compares (a response,
the requests sent, the observable state) in some reachable situation, so a trace suite that
lets one pass has a gap.
"""

from collections.abc import Callable
from typing import NamedTuple

import msgspec

from adapters.model_adapter import ModelAdapter
from adapters.node_models import StepFunction
from model import log as logs
from model import node as nodes
from model.config import NodeConfig
from model.events import ClientAppend, Event, Request, Response, Restart, Send, SetTimer, TimerKind
from model.isr import replica
from model.isr.config import ReplicaConfig
from model.isr.events import AlterIsr
from model.isr.state import ReplicaState
from model.isr.state import Role as IsrRole
from model.messages import (
    RESPONSE_FOR,
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
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
    step: StepFunction  # same signature as the reference step of its system
    system: str = "kraft"  # the traces it changes: "kraft" (model.node.step) or "isr" (model.isr.replica.step)

    @property
    def kind(self) -> type | None:
        """The one input kind the bug can step otherwise on (before(), after()), None for any."""
        return getattr(self.step, "kind", None)

    @property
    def options(self) -> frozenset[str]:
        """The options the bug switches (with_options()): it steps otherwise only where one is read."""
        return getattr(self.step, "options", frozenset())


def input_kind(event: Event) -> type:
    """What a mutant keys on: the message type of a request or response, else the event's type."""
    return type(event.message) if isinstance(event, Request | Response) else type(event)


def before(kind: type, adjust: Before, reference: StepFunction = nodes.step) -> StepFunction:
    """The reference, handling inputs of one kind as if config, state or event were adjusted."""

    def mutant_step(config: NodeConfig, state: NodeState, event: Event) -> Transition:
        if input_kind(event) is kind:
            config, state, event = adjust(config, state, event)
        return reference(config, state, event)

    mutant_step.kind = kind
    return mutant_step


def after(kind: type, adjust: After, reference: StepFunction = nodes.step) -> StepFunction:
    """The reference, with its transition on inputs of one kind adjusted."""

    def mutant_step(config: NodeConfig, state: NodeState, event: Event) -> Transition:
        transition = reference(config, state, event)
        return adjust(config, state, event, transition) if input_kind(event) is kind else transition

    mutant_step.kind = kind
    return mutant_step


def with_options(**switches: object) -> StepFunction:
    """The reference with some of model.config.Options switched: the model's own faulty variants."""

    def mutant_step(config: NodeConfig, state: NodeState, event: Event) -> Transition:
        return nodes.step(replace(config, options=replace(config.options, **switches)), state, event)

    mutant_step.options = frozenset(switches)
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


def whole_fetch_timeout(config: NodeConfig, state: NodeState, event: Event, transition: Transition) -> Transition:
    """A later successor's fetch timer set to the whole fetch timeout, not its backoff."""
    def waited(output):
        if type(output) is SetTimer and output.kind == TimerKind.FETCH_TIMEOUT:
            return replace(output, delay_ms=config.timing.fetch_timeout_ms)
        return output

    return transition._replace(outputs=tuple(map(waited, transition.outputs)))


def serve_stale_epoch(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """The leader reads an older CurrentLeaderEpoch as its own."""
    if state.role == Role.LEADER and event.message.CurrentLeaderEpoch < state.epoch:
        event = with_message(event, CurrentLeaderEpoch=state.epoch)
    return config, state, event


def observers_as_voters(config: NodeConfig, state: NodeState, event: Event) -> Input:
    """Same replica order (voters then observers), so the leader's replica_offsets still line up."""
    return replace(config, voters=config.replicas, observers=()), state, event


def fence_newer_epoch(config: NodeConfig, state: NodeState, event: Event, transition: Transition) -> Transition:
    """A leader's UNKNOWN_LEADER_EPOCH answer to a Fetch of a newer epoch says FENCED_LEADER_EPOCH instead."""
    if state.role != Role.LEADER or event.message.CurrentLeaderEpoch <= state.epoch:
        return transition

    def fenced(output: object) -> object:
        message = getattr(output, "message", None)
        if type(message) is FetchResponse and message.PartitionErrorCode == errors.UNKNOWN_LEADER_EPOCH:
            return replace(output, message=replace(message, PartitionErrorCode=errors.FENCED_LEADER_EPOCH))
        return output

    return transition._replace(outputs=tuple(fenced(output) for output in transition.outputs))


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


# ISR replicas (KIP-101) ---------------------------------------------------------------------


def isr_configured(**changes: object) -> StepFunction:
    """The ISR reference with its replica configuration changed (min.isr, truncation mode)."""

    def mutant_step(config: ReplicaConfig, state: ReplicaState, event: Event) -> Transition:
        return replica.step(replace(config, **changes), state, event)

    return mutant_step


def unchecked_epoch(config: ReplicaConfig, state: ReplicaState, event: Event) -> Input:
    """CurrentLeaderEpoch -1 is the request that asks for no epoch check (K101-4)."""
    return config, state, with_message(event, CurrentLeaderEpoch=-1)


def min_isr_one(config: ReplicaConfig, state: ReplicaState, event: Event) -> Input:
    return replace(config, min_isr=1), state, event


def exact_epoch_only(config: ReplicaConfig, state: ReplicaState, event: Event, transition: Transition) -> Transition:
    """An answer for a smaller epoch than the one asked becomes UNDEFINED_EPOCH_OFFSET."""

    def exact(output: object) -> object:
        message = getattr(output, "message", None)
        if type(message) is OffsetsForLeaderEpochResponse and message.ErrorCode == errors.NONE and message.LeaderEpoch != event.message.LeaderEpoch:
            return replace(output, message=replace(message, LeaderEpoch=logs.NO_EPOCH.Epoch, EndOffset=logs.NO_EPOCH.EndOffset))
        return output

    return transition._replace(outputs=tuple(exact(output) for output in transition.outputs))


def expand_any_fetcher(config: ReplicaConfig, state: ReplicaState, event: Event, transition: Transition) -> Transition:
    """A leader serving a Fetch takes the fetcher into the ISR whether or not it reached the high watermark."""
    served = transition.state
    if served.role != IsrRole.LEADER or event.source in served.isr or "ISR-FETCH-2" not in transition.rules:
        return transition
    isr = tuple(sorted(served.isr + (event.source,)))
    return Transition(replace(served, isr=isr), (AlterIsr(LeaderEpoch=served.epoch, Isr=isr), *transition.outputs), transition.rules)


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
    Mutant(
        "end-successor-no-backoff",
        "a later preferred successor restarts its fetch timer for the whole fetch timeout instead of its backoff, so the most caught-up voters do not stand first (END-REQ-6)",
        after(EndQuorumEpochRequest, whole_fetch_timeout),
    ),
    # Fetch, leader side, and the high watermark
    Mutant(
        "fetch-stale-epoch-served",
        "a leader serves a Fetch whose CurrentLeaderEpoch is older than its epoch instead of answering FENCED_LEADER_EPOCH (FETCH-REQ-2A)",
        before(FetchRequest, serve_stale_epoch),
    ),
    Mutant(
        "fetch-newer-epoch-fenced",
        "a leader answers a Fetch whose CurrentLeaderEpoch is newer than its own FENCED_LEADER_EPOCH, as if the fetcher were the stale one, instead of UNKNOWN_LEADER_EPOCH (FETCH-REQ-2B)",
        after(FetchRequest, fence_newer_epoch),
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
    # ISR replicas: OffsetsForLeaderEpoch, truncation, the ISR, min.isr
    Mutant(
        "isr-truncate-to-hw",
        "an ISR follower that restarts or gets a new leader truncates its log to its high watermark, as before KIP-101, instead of asking the leader with OffsetsForLeaderEpoch (ISR-TRUNC-2)",
        isr_configured(truncation="hw"),
        system="isr",
    ),
    Mutant(
        "isr-offsets-unfenced",
        "an ISR leader answers OffsetsForLeaderEpoch of another leader epoch instead of FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH (K101-4)",
        before(OffsetsForLeaderEpochRequest, unchecked_epoch, replica.step),
        system="isr",
    ),
    Mutant(
        "isr-offsets-exact-epoch",
        "an ISR leader whose epoch cache lacks the asked epoch answers UNDEFINED_EPOCH_OFFSET instead of the end of the largest epoch below it (K101-2)",
        after(OffsetsForLeaderEpochRequest, exact_epoch_only, replica.step),
        system="isr",
    ),
    Mutant(
        "isr-expand-lagging",
        "an ISR leader takes a follower back into the ISR as soon as it fetches, before it has caught up to the high watermark (ISR-EXPAND-1)",
        after(FetchRequest, expand_any_fetcher, replica.step),
        system="isr",
    ),
    Mutant(
        "isr-ignore-min-isr",
        "an ISR leader appends an acks=all record while the ISR has fewer than min.isr members instead of answering NOT_ENOUGH_REPLICAS (ISR-PRODUCE-1)",
        before(ClientAppend, min_isr_one, replica.step),
        system="isr",
    ),
)


def mutant_adapter(name: str) -> ModelAdapter:
    """The adapter `mutant:NAME`: one node of the model with that mutant's bug."""
    if name not in MUTANTS:
        raise ValueError(f"unknown mutant {name!r}; known mutants: {', '.join(MUTANTS)}")
    mutant = MUTANTS[name]
    return ModelAdapter(f"mutant:{name}", {mutant.system: mutant.step})
