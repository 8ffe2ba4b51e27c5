"""A trace printed as a scenario: readable, yet exact (parsing and compiling it gives the trace
back); and a scenario of the whole cluster printed as it parses.

Messages are written by name with only their non-default fields, error codes by name, records
and observed logs as epoch ranges (`e1[0..2]`, records with their values in braces). A step's
note and error names are left out where they are what the input and the response imply.
"""

import json

import msgspec

from conformance.corpus.reference import error_names, event_text
from conformance.scenario.parser import TERMINALS, ClusterScenario, UntilQuiet, reads_as
from conformance.scenario.notation import ERROR_NAMES, STATE_DEFAULTS, is_error_field, log_end, non_defaults
from model.cluster import Action, Append, CrashNode, Deliver, Drop, Fire, ResignLeader, RestartNode
from model.events import ClientAppend, Crash, Request, Resign, Response, Restart, Timer
from model.isr.cluster import Action as IsrAction
from model.isr.cluster import Elect, PowerFailure, Shrink, StartFetch
from model.isr.events import FetchNext, PowerLoss, ShrinkIsr, Startup
from model.isr.state import LeaderAndIsr
from model.messages import Record
from model.network import Envelope
from spec.trace import Alternative, Header, Observed, Outputs, Step, Trace, TraceCluster, TraceError

INDENT = "  "
_BARE = {Resign: "resign", Crash: "crash", Restart: "restart", FetchNext: "fetch_next"}
_NODE_ACTIONS = {ResignLeader: "resign", CrashNode: "crash", RestartNode: "restart", StartFetch: "fetch_next"}


def scenario_text(trace: Trace, comments: dict[int, list[str]] | None = None) -> str:
    """The trace as a scenario; `comments` (by step number, 0 for the header, len+1 for the end)
    are written before the statement they came before."""
    comments = comments or {}
    lines = [*comments.get(0, []), *header_lines(trace.header)]
    for step in trace.steps:
        lines.append("")
        lines.extend(comments.get(step.step, []))
        lines.extend(step_lines(step))
    if comments.get(len(trace.steps) + 1):
        lines.extend(["", *comments[len(trace.steps) + 1]])
    return "\n".join(lines) + "\n"


def header_lines(header: Header) -> list[str]:
    lines = [f"scenario {string(header.name)}"]
    if header.origin:
        lines.append(f"origin {string(header.origin)}")
    lines.extend(f"covers {string(cell)}" for cell in header.covers)
    lines.append(keyword_line("cluster" if header.cluster is not None else "partition", non_defaults(header.setting)))
    lines.append(f"node {header.node}")
    if not header.initial.empty:
        lines.append(keyword_line("initial", non_defaults(header.initial)))
    return lines


def step_lines(step: Step) -> list[str]:
    lines = [f"step {input_text(step.input)}"]
    lines.extend(INDENT + line for line in outcome_lines(step.expect, step.state))
    if step.rules:
        lines.append(f"{INDENT}rules {bare('RULE', *step.rules)}")
    if step.note != event_text(step.input):
        lines.append(f"{INDENT}note {string(step.note)}")
    if step.errors != error_names(step.expect):
        lines.append(f"{INDENT}errors " + " ".join(f"{string(field)}={bare('NAME', name)}" for field, name in step.errors.items()))
    for alternative in step.allowed:
        lines.extend(alternative_lines(alternative))
    return lines


def alternative_lines(alternative: Alternative) -> list[str]:
    picks = bare("CHOICE", *(f"{point}={pick}" for point, pick in alternative.choices.items()))
    return [f"{INDENT}allowed {picks}".rstrip(), *(INDENT * 2 + line for line in outcome_lines(alternative.expect, alternative.state))]


def outcome_lines(outputs: Outputs, state: Observed | None) -> list[str]:
    lines = []
    if outputs.response is not None:
        lines.append(f"expect response {value_text(outputs.response)}")
    lines.extend(f"expect send to {send.destination}: {value_text(send.message)}" for send in outputs.sends)
    lines.extend(f"expect answer to {answer.destination}: {value_text(answer.message)} for {value_text(answer.request)}" for answer in outputs.answers)
    if outputs.append_result is not None:
        lines.append(keyword_line("expect append_result", non_defaults(outputs.append_result)))
    if outputs.shutdown:
        lines.append("expect shutdown")
    if outputs.alter_isr is not None:
        lines.append(keyword_line("expect alter_isr", non_defaults(outputs.alter_isr)))
    lines.extend(f"expect timer {timer.kind} {timer.ms}" for timer in outputs.timers or ())
    if state is not None:
        lines.append(state_line(state))
    return lines


def state_line(state: Observed) -> str:
    shown = [("epoch", state.epoch)]
    for name in ("leader_id", "voted_id", "high_watermark", "log_end_offset", "log", "isr"):
        current = getattr(state, name)
        implied = log_end(state.log) if name == "log_end_offset" else STATE_DEFAULTS[name]
        if current != implied:
            shown.append((name, current))
    return keyword_line(f"expect state {bare('NAME', state.role)}", shown)


def input_text(event: object) -> str:
    kind = type(event)
    if kind is Request:
        return f"request from {event.source}: {value_text(event.message)}"
    if kind is Response:
        return f"response from {event.source}: {value_text(event.message)} for {value_text(event.request)}"
    if kind is Timer:
        return f"timer {event.kind.value}"
    if kind is ClientAppend:
        return f"append {event.value}"
    if kind is ShrinkIsr:
        return f"shrink_isr {event.replica}"
    if kind is PowerLoss:
        return f"power_loss {event.keep}"
    if kind is Startup:
        return keyword_line("startup", non_defaults(event.partition))
    if kind is LeaderAndIsr:
        return keyword_line("leader_and_isr", non_defaults(event))
    return _BARE[kind]


def keyword_line(keyword: str, fields: list[tuple[str, object]]) -> str:
    return " ".join([keyword, *(f"{name}={field_text(name, value)}" for name, value in fields)])


def field_text(name: str, value: object) -> str:
    if is_error_field(name) and type(value) is int and value in ERROR_NAMES:
        return ERROR_NAMES[value]
    return value_text(value)


def value_text(value: object) -> str:
    """One value in the scenario notation (spec/scenario.lark's `value`)."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is int:
        return str(value)
    if type(value) is str:
        return string(value)
    if isinstance(value, msgspec.Struct):
        return f"{type(value).__name__}(" + ", ".join(f"{name}={field_text(name, field)}" for name, field in non_defaults(value)) + ")"
    if type(value) is tuple and value and all(type(item) is Record for item in value):
        return " ".join(_record_range(run) for run in _runs(value, lambda record: (record.Offset, record.Epoch)))
    if type(value) is tuple and value and all(_is_entry(item) for item in value):
        return " ".join(f"e{run[0][1]}[{run[0][0]}..{run[-1][0]}]" for run in _runs(value, lambda entry: entry))
    if type(value) is tuple:
        return "[" + ", ".join(value_text(item) for item in value) + "]"
    raise TypeError(f"a scenario cannot hold a value of type {type(value).__name__}")


def string(text: str) -> str:
    return json.dumps(text)


def bare(terminal: str, *texts: str) -> str:
    """Texts printed without quotes, each as the grammar's `terminal` reads it: other text (a
    rule ID holding a newline, in a trace from elsewhere) would read as other statements."""
    for text in texts:
        if not reads_as(terminal, text):
            raise TraceError(f"{text!r} cannot be printed in a scenario: expected {TERMINALS[terminal]}")
    return " ".join(texts)


def _is_entry(item: object) -> bool:
    return type(item) is tuple and len(item) == 2 and all(type(part) is int for part in item)


def _runs(items: tuple, position) -> list[list]:
    """Consecutive items of one epoch at consecutive offsets, each run one epoch range."""
    runs: list[list] = []
    for item in items:
        offset, epoch = position(item)
        if runs and position(runs[-1][-1]) == (offset - 1, epoch):
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


def _record_range(run: list[Record]) -> str:
    return f"e{run[0].Epoch}[{run[0].Offset}..{run[-1].Offset}]{{" + ", ".join(value_text(record.Value) for record in run) + "}"


def cluster_scenario_text(scenario: ClusterScenario) -> str:
    """A scenario of the whole cluster (`do` statements), its comments where they were."""
    comments = scenario.comments
    lines = [*comments.get(0, []), f"scenario {string(scenario.name)}", keyword_line("cluster" if type(scenario.setting) is TraceCluster else "partition", non_defaults(scenario.setting))]
    lines.extend(keyword_line(f"initial node {node}", non_defaults(initial)) for node, initial in scenario.initial)
    for number, step in enumerate(scenario.steps, start=1):
        lines.extend(comments.get(number, []))
        picks = getattr(step.action, "picks", ())
        lines.append(f"do {action_text(step.action)}" + (f" choosing {bare('CHOICE', *(f'{name}={pick}' for name, pick in picks))}" if picks else ""))
        for verdict, rules in (("violated", step.violated), ("holds", step.holds)):
            if rules:
                lines.append(f"{INDENT}expect {verdict} {bare('RULE', *rules)}")
        lines.extend(f"{INDENT}expect node {node} {state_line(state).removeprefix('expect ')}" for node, state in step.states)
        lines.extend(f"{INDENT}expect in flight {envelope_text(envelope)}" for envelope in step.in_flight)
        if step.describe:
            lines.append(f"{INDENT}describe")
    lines.extend(comments.get(len(scenario.steps) + 1, []))
    return "\n".join(lines) + "\n"


def action_text(action: Action | IsrAction | UntilQuiet) -> str:
    """A cluster action in the scenario language."""
    kind = type(action)
    if kind is UntilQuiet:
        return "run until quiet"
    if kind is Shrink:
        return f"shrink_isr {action.node} {action.replica}"
    if kind is Elect:
        return f"elect {action.node}"
    if kind is PowerFailure:
        return keyword_line("power_failure", non_defaults(action))
    if kind in (Deliver, Drop):
        verb = "drop" if kind is Drop else "duplicate" if action.duplicate else "deliver"
        return f"{verb} {envelope_text(action.envelope)}"
    if kind is Fire:
        return f"timer {action.node} {action.timer.value}"
    if kind is Append:
        return f"append {action.node} {action.value}"
    return f"{_NODE_ACTIONS[kind]} {action.node}"


def envelope_text(envelope: Envelope) -> str:
    """A message in flight: `from S to D: MESSAGE`, a response followed by `for REQUEST`."""
    answered = f" for {value_text(envelope.request)}" if envelope.request is not None else ""
    return f"from {envelope.source} to {envelope.destination}: {value_text(envelope.message)}{answered}"
