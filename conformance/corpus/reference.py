"""A node's trace from its inputs alone: every expectation is the reference model's.

Used wherever a trace is made: corpus generation, counterexamples saved as traces, and
certification when it shortens a divergent trace.
"""

import msgspec

from adapters.node_models import model_for, outputs_of
from model import choices
from model.choices import allowed_transitions
from conformance.corpus.cells import Setting, input_kind
from conformance.text import message_text
from model.events import ClientAppend, Request, Response, Timer
from model.isr.events import FetchNext, PowerLoss, ShrinkIsr, Startup
from model.isr.state import LeaderAndIsr
from spec import errors
from spec import trace as traces
from spec.trace import Alternative, Header, Input, Outputs, Persisted, Step, Trace, TraceCluster

NodeInputs = tuple[int, list[Input]]  # a node and its inputs, in order


def build_trace(
    name: str, setting: Setting, node: int, inputs: list[Input], origin: str, covers: tuple[str, ...] = (), initial: Persisted = Persisted()
) -> Trace:
    """The trace of a node given its inputs: every expectation is the reference model's, its
    default reading first and the other outcomes the specification allows beside it."""
    model = model_for(setting)
    config = model.config(setting, node)
    state = model.start(config, initial)
    if initial.empty and model.observe(state).role == "down":
        initial = Persisted(down=True)  # the profile starts nodes down: the implementation must know
    steps = []
    for number, event in enumerate(inputs, start=1):
        default, *others = allowed_transitions(model.step, config, state, event)
        transition = default.transition
        outputs = outputs_of(event, transition)
        observed = model.observe(transition.state)
        allowed: dict[bytes, Alternative] = {}
        for outcome in others:
            alternative = Alternative(
                choices={name: pick for name, pick in outcome.picks if pick != choices.default(name)},
                expect=outputs_of(event, outcome.transition),
                state=model.observe(outcome.transition.state),
            )
            if (alternative.expect, alternative.state) != (outputs, observed):
                allowed.setdefault(msgspec.msgpack.encode((alternative.expect, alternative.state)), alternative)
        steps.append(
            Step(
                step=number,
                input=event,
                expect=outputs,
                errors=error_names(outputs),
                state=observed,
                rules=transition.rules,
                note=event_text(event),
                allowed=tuple(allowed.values()),
            )
        )
        state = transition.state
    where = {"cluster": setting} if type(setting) is TraceCluster else {"partition": setting}
    header = Header(
        kind=traces.KIND, format_version=traces.FORMAT_VERSION, name=name, node=node, steps=len(steps), initial=initial, origin=origin, covers=covers, **where
    )
    return Trace(header=header, steps=tuple(steps))


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
