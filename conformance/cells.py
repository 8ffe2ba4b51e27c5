"""Coverage cells and reference traces, for either system's nodes (KRaft and ISR).

A coverage cell is what one node step exercised: input kind | role | epoch relation |
outcome | rule ID, the outcome being the error code answered (or received) and what the step
changed. A trace's expectations are always the reference model's, stepped over its inputs.
"""

import random
from collections.abc import Callable, Iterable

from adapters.node_models import NodeModel, model_for, outputs_of
from conformance import trace as traces
from conformance.describe_steps import message_text
from conformance.kraft_system import request_epoch
from conformance.trace import Header, Input, Outputs, Persisted, Step, Trace, TraceCluster, TracePartition
from model.events import ClientAppend, Request, Response, Timer
from model.isr.events import FetchNext, PowerLoss, ShrinkIsr, Startup
from model.isr.state import LeaderAndIsr
from model.messages import REQUEST_TYPES, FetchResponse, OffsetsForLeaderEpochResponse
from model.transitions import Transition
from spec import errors

Setting = TraceCluster | TracePartition
NodeInputs = tuple[int, list[Input]]  # a node and its inputs, in order


def input_kind(event: Input) -> str:
    """A request's or response's message type; a timer's kind; else the event's tag."""
    kind = type(event)
    if kind in (Request, Response):
        return type(event.message).__name__
    if kind is Timer:
        return f"timer:{event.kind.value}"
    return kind.__struct_config__.tag


def message_epoch(message: object) -> int | None:
    """The epoch a message speaks for: a request's, or the epoch piggy-backed on a response."""
    if type(message) in REQUEST_TYPES:
        epoch = request_epoch(message)
        return None if epoch == -1 else epoch
    if type(message) is FetchResponse:
        return message.CurrentLeader.LeaderEpoch
    return getattr(message, "LeaderEpoch", None)


def epoch_relation(epoch: int, event: Input) -> str:
    """How the epoch an input speaks for compares with the node's: older, same, newer, or -."""
    if type(event) in (Request, Response):
        spoken = message_epoch(event.message)
    elif type(event) is LeaderAndIsr:
        spoken = event.LeaderEpoch
    else:
        return "-"
    if spoken is None:
        return "-"
    return "older" if spoken < epoch else ("same" if spoken == epoch else "newer")


def outcome(event: Input, outputs: Outputs) -> str:
    """The error code a step answered with (or received), by name; Vote answers say granted or
    not, OffsetsForLeaderEpoch answers whether they name the epoch asked, an earlier one, or none."""
    message = outputs.response if type(event) is Request else (event.message if type(event) is Response else None)
    if message is not None:
        code = message.ErrorCode or getattr(message, "PartitionErrorCode", errors.NONE)
        name = errors.name_of(code)
        if hasattr(message, "VoteGranted") and code == errors.NONE:
            name += ":granted" if message.VoteGranted else ":refused"
        if type(message) is OffsetsForLeaderEpochResponse and code == errors.NONE:
            asked = (event.message if type(event) is Request else event.request).LeaderEpoch
            name += ":asked-epoch" if message.LeaderEpoch == asked else (":undefined" if message.LeaderEpoch == -1 else ":earlier-epoch")
        return name
    if outputs.append_result is not None:
        return errors.name_of(outputs.append_result.ErrorCode)
    return "shutdown" if outputs.shutdown else "-"


def changes(model: NodeModel, before: object, after: object, outputs: Outputs) -> str:
    """Which observable parts of the node a step changed, e.g. `role,epoch,log+,hw`."""
    a, b = model.observe(before), model.observe(after)
    changed = [field for field in ("role", "epoch", "leader_id", "voted_id") if getattr(a, field) != getattr(b, field)]
    if a.log != b.log:
        changed.append("log+" if b.log[: len(a.log)] == a.log else ("log-" if a.log[: len(b.log)] == b.log else "log~"))
    if a.high_watermark != b.high_watermark:
        changed.append("hw")
    if a.isr != b.isr or outputs.alter_isr is not None:
        changed.append("isr")
    return ",".join(changed) or "="


def cells(model: NodeModel, before: object, event: Input, transition: Transition) -> tuple[str, ...]:
    """The coverage cells of one node step, one per rule it cites; an ISR replica's start with `isr |`."""
    outputs = outputs_of(event, transition)
    answered = outcome(event, outputs)
    base = f"{input_kind(event)} | {model.role(before)} | {epoch_relation(before.epoch, event)} | {answered} {changes(model, before, transition.state, outputs)}"
    if model.system != "kraft":
        base = f"{model.system} | {base}"
    return tuple(f"{base} | {rule}" for rule in (transition.rules or ("-",)))


def build_trace(name: str, setting: Setting, node: int, inputs: list[Input], origin: str, covers: tuple[str, ...] = ()) -> Trace:
    """The trace of a node given its inputs: every expectation is the reference model's."""
    model = model_for(setting)
    config = model.config(setting, node)
    state = model.start(config, Persisted())
    steps = []
    for number, event in enumerate(inputs, start=1):
        transition = model.step(config, state, event)
        outputs = outputs_of(event, transition)
        steps.append(
            Step(
                step=number,
                input=event,
                expect=outputs,
                errors=error_names(outputs),
                state=model.observe(transition.state),
                rules=transition.rules,
                note=event_text(event),
            )
        )
        state = transition.state
    where = {"cluster": setting} if type(setting) is TraceCluster else {"partition": setting}
    header = Header(kind=traces.KIND, format_version=traces.FORMAT_VERSION, name=name, node=node, steps=len(steps), origin=origin, covers=covers, **where)
    return Trace(header=header, steps=tuple(steps))


def cells_of_last_step(setting: Setting, node: int, built: Trace) -> tuple[str, ...]:
    """The cells a trace's last step covers, recomputed by stepping the reference model."""
    model = model_for(setting)
    config = model.config(setting, node)
    state = model.start(config, Persisted())
    for step in built.steps[:-1]:
        state = model.step(config, state, step.input).state
    last = built.steps[-1].input
    return cells(model, state, last, model.step(config, state, last))


def error_names(outputs: Outputs) -> dict[str, str]:
    found = {}
    for prefix, value in (("response", outputs.response), ("append_result", outputs.append_result)):
        if value is not None:
            for field in value.__struct_fields__:
                if field.endswith("ErrorCode"):
                    found[f"{prefix}.{field}"] = errors.name_of(getattr(value, field))
    return found


def event_text(event: Input) -> str:
    kind = type(event)
    if kind is Request:
        return f"request from {event.source}: {message_text(event.message)}"
    if kind is Response:
        return f"response from {event.source}: {message_text(event.message)}"
    if kind is Timer:
        return f"{event.kind.value} fires"
    if kind is ClientAppend:
        return f"client appends {event.value}"
    if kind is LeaderAndIsr:
        return f"LeaderAndIsr: leader {event.Leader}, epoch {event.LeaderEpoch}, ISR {list(event.Isr)}"
    if kind is Startup:
        return f"starts; the controller records leader {event.partition.Leader}, epoch {event.partition.LeaderEpoch}"
    if kind is PowerLoss:
        return f"power failure, {event.keep} records were on disk"
    if kind is ShrinkIsr:
        return f"lag check drops replica {event.replica} from the ISR"
    if kind is FetchNext:
        return "the fetcher sends its next Fetch"
    return input_kind(event)  # crash, restart, resign


def path_to(parents: dict[int, tuple[int, object]], fp: int) -> list:
    """The actions from the initial state to the state `fp`, given each state's (parent, action);
    the initial state is its own parent."""
    actions = []
    while parents[fp][0] != fp:
        fp, action = parents[fp]
        actions.append(action)
    actions.reverse()
    return actions


def random_walk(
    initial: object, enabled: Callable[[object], list], apply: Callable[[object, object], tuple[object, Iterable[tuple[int, Input]]]],
    nodes: Iterable[int], seed: int, steps: int, is_delivery: Callable[[object], bool], deliver_bias: float = 0.7,
) -> dict[int, list[Input]]:
    """A seeded random run, projected onto each node: its inputs, by node.

    Deliveries are favoured (as in `kraftcheck simulate`) so that runs make progress and reach
    deep states: elections won, records replicated, logs diverging and truncated.
    """
    rng = random.Random(seed)
    state = initial
    inputs: dict[int, list[Input]] = {n: [] for n in nodes}
    for _ in range(steps):
        actions = enabled(state)
        if not actions:
            break
        deliveries = [a for a in actions if is_delivery(a)]
        action = rng.choice(deliveries) if deliveries and rng.random() < deliver_bias else rng.choice(actions)
        state, stepped = apply(state, action)
        for node, event in stepped:
            inputs[node].append(event)
    return inputs
