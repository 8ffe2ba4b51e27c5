"""A node-level trace as a sequence diagram, and a divergence drawn at the step where an
implementation departs from it.

A trace follows one node: its peers (and the admin client, the ISR controller) get lifelines
too, so that every input arrives from someone and every output goes to someone, in the step
that carries it. Only the node under test's state is known; it is shown where it changes.
"""

import json
import re
from typing import Protocol

from adapters.node_models import model_for
from conformance.diagrams.labels import message_label
from conformance.diagrams.layout import render
from conformance.diagrams.sequence import Arrow, Box, Comparison, Diagram, Lifeline, Mark, Note, Row
from conformance.text import message_text
from model.events import ClientAppend, Crash, Request, Resign, Response, Restart, Timer
from model.isr.events import FetchNext, PowerLoss, ShrinkIsr, Startup
from model.isr.state import LeaderAndIsr
from spec import errors
from spec.trace import Observed, Step, Trace

ADMIN = -1  # the source id of an admin client's request (DescribeQuorum)
CONTROLLER = "controller"  # an ISR replica's controller: LeaderAndIsr, its record at startup, AlterIsr


def trace_svg(trace: Trace) -> str:
    return render(trace_diagram(trace))


class Departure(Protocol):
    """Where an implementation departs from a trace, as conformance.certify.replay.Divergence
    reports it: the first differing field, every differing field, and the part of the outputs
    they belong to (a response, the sends, a result, the state) as JSON on both sides."""

    step: int
    field: str
    expected: str
    actual: str
    rules: tuple[str, ...]
    differing: tuple[str, ...]
    expected_json: str
    actual_json: str


def divergence_svg(trace: Trace, departure: Departure) -> str:
    """The trace up to the step where the implementation departs, and that step's expected and
    actual outputs side by side, every differing field highlighted."""
    return render(divergence_diagram(trace, departure))


def trace_diagram(trace: Trace, last: int | None = None) -> Diagram:
    """The trace's steps (up to step `last`) as rows."""
    header = trace.header
    node = header.node
    model = model_for(header.setting)
    observed = model.observe(model.start(model.config(header.setting, node), header.initial))
    lifelines = _lifelines(trace, observed)
    rows: list[Row] = []
    arrows: list[Arrow] = []
    for index, step in enumerate(trace.steps[:last]):
        row, made = _row(index, step, node)
        if step.state is not None:
            note = _note(node, observed, step.state)
            if note:
                row.notes.append(note)
            observed = step.state
        rows.append(row)
        arrows += made
    if header.cluster is not None:
        member = f"node {node} of voters {list(header.cluster.voters)}" + (f", observers {list(header.cluster.observers)}" if header.cluster.observers else "") + f", profile {header.cluster.profile}"
    else:
        partition = header.partition
        member = f"replica {node} of partition {list(partition.replicas)}, min.isr {partition.min_isr}, truncation {partition.truncation}"
    shown = len(rows) if last is None else f"{len(rows)} of {len(trace.steps)}"
    return Diagram(title=header.name, subtitle=f"{member}; {shown} steps" + (f"; {header.origin}" if header.origin else ""), lifelines=lifelines, rows=rows, arrows=arrows)


def divergence_diagram(trace: Trace, departure: Departure) -> Diagram:
    diagram = trace_diagram(trace, last=departure.step)
    if not diagram.rows:
        return diagram
    row, index, node = diagram.rows[-1], len(diagram.rows) - 1, trace.header.node
    row.diverges = True
    lines = comparison_lines(departure)
    differs = [(name, actual) for name, _, actual, status in lines if status == "differs"]
    group = departure.field.partition(".")[0]
    answer = next((a for a in diagram.arrows if a.start[0] == index and a.source == node and a.tone == "response"), None)
    if group == "response" and answer is not None:
        answer.tone, answer.label = "expected", f"expected: {answer.label}"
        shown = departure.actual if departure.field == "response" else ", ".join(f"{name} = {value}" for name, value in differs)
        diagram.arrows.append(Arrow(node, answer.destination, f"actual: {shown}", f"actual: {departure.actual_json}", (index, row.lanes), (index, row.lanes), "delivered", "actual"))
        row.lanes += 1
    else:
        if group == "sends":  # the requests the node should have sent
            for arrow in diagram.arrows:
                if arrow.start[0] == index and arrow.source == node and arrow.tone == "request":
                    arrow.tone, arrow.label = "expected", f"expected: {arrow.label}"
        row.marks.append(Mark(node, "diverges", f"departs: {departure.field}", f"{departure.field}: expected {departure.expected}, actual {departure.actual}"))
    named = ", ".join(departure.differing or (departure.field,))
    heading = f"step {departure.step}: the implementation departs at {named}" + (f" (rules {' '.join(departure.rules)})" if departure.rules else "")
    diagram.comparison = Comparison(heading=heading, lines=lines)
    diagram.title = f"{trace.header.name}: departs at step {departure.step}"
    return diagram


def comparison_lines(departure: Departure) -> tuple[tuple[str, str, str, str], ...]:
    """The part of the outputs that differs, field by field (element by element for the sends):
    (name, expected, actual, same or differs)."""
    try:
        expected, actual = json.loads(departure.expected_json), json.loads(departure.actual_json)
    except (ValueError, RecursionError):  # parts cut short (too long to keep whole), or none given
        return ((departure.field, departure.expected, departure.actual, "differs"),)
    if isinstance(expected, dict) and isinstance(actual, dict) and expected.get("type") == actual.get("type"):
        names = [name for name in expected if name != "type"] + [name for name in actual if name not in expected]
        group = departure.field.partition(".")[0]
        flagged = {re.split(r"[.\[ ]", path.removeprefix(f"{group}."), maxsplit=1)[0] for path in departure.differing or (departure.field,)}
        pairs = [(name, expected.get(name), actual.get(name)) for name in names]
        return tuple((name, _value(name, a), _value(name, b), "differs" if name in flagged or a != b else "same") for name, a, b in pairs)
    if isinstance(expected, list) and isinstance(actual, list):
        count = max(len(expected), len(actual))
        pairs = [(f"[{i}]", expected[i] if i < len(expected) else None, actual[i] if i < len(actual) else None) for i in range(count)]
        return tuple((name, _value(name, a), _value(name, b), "differs" if a != b else "same") for name, a, b in pairs)
    return ((departure.field, _value(departure.field, expected), _value(departure.field, actual), "differs"),)


def _value(name: str, value: object) -> str:
    if value is None:
        return "-"
    if name.endswith("ErrorCode") and isinstance(value, int):
        return f"{value} {errors.name_of(value)}"
    return json.dumps(value, separators=(",", ":"))


def _lifelines(trace: Trace, initial: Observed) -> list[Lifeline]:
    """The cluster's members, then any other id the trace names, the admin client, the controller."""
    header = trace.header
    isr = header.cluster is None
    members = header.partition.replicas if isr else header.cluster.voters + header.cluster.observers
    named: set[object] = set()
    for step in trace.steps:
        source = getattr(step.input, "source", None)
        if source is not None:
            named.add(source)
        if type(step.input) in (Startup, LeaderAndIsr) or step.expect.alter_isr is not None:
            named.add(CONTROLLER)
        named.update(send.destination for send in step.expect.sends)
    extra = sorted(n for n in named if isinstance(n, int) and n not in members and n != ADMIN)
    prefix = "r" if isr else "n"
    lines = []
    for member in (*members, *extra):
        if member == header.node:
            lines.append(Lifeline(member, f"{prefix}{member}", f"under test, {initial.role} e{initial.epoch}", initial.role, focus=True))
        elif member in members:
            kind = "replica" if isr else ("voter" if member in header.cluster.voters else "observer")
            lines.append(Lifeline(member, f"{prefix}{member}", kind))
        else:
            lines.append(Lifeline(member, f"{prefix}{member}", "not a member"))
    if ADMIN in named:
        lines.append(Lifeline(ADMIN, "admin", "admin client"))
    if CONTROLLER in named:
        lines.append(Lifeline(CONTROLLER, CONTROLLER, "LeaderAndIsr record", "controller"))
    return lines


def _input_row(index: int, step: Step, node: int) -> tuple[list[Mark], list[Arrow]]:
    """The step's input: an arrow into the node, or a mark on it."""
    event = step.input
    kind = type(event)
    if kind in (Request, Response):
        tone = "request" if kind is Request else "response"
        title = f"{event.source} -> {node}: {message_text(event.message)}"
        return [], [Arrow(event.source, node, message_label(event.message), title, (index, 0), (index, 0), "delivered", tone)]
    if kind in (Startup, LeaderAndIsr):
        record = event.partition if kind is Startup else event
        words = f"r{record.Leader} e{record.LeaderEpoch} ISR {','.join(map(str, record.Isr))}"
        arrow = Arrow(CONTROLLER, node, ("record " if kind is Startup else "LeaderAndIsr ") + words, step.note, (index, 0), (index, 0), "delivered", "request")
        return ([Mark(node, "restart", "startup")] if kind is Startup else []), [arrow]
    marks = {
        Timer: lambda: ("timer", event.kind.value.replace("_", " ")),
        ClientAppend: lambda: ("append", f"append v{event.value}"),
        Resign: lambda: ("resign", "resign"),
        Crash: lambda: ("crash", "crash"),
        Restart: lambda: ("restart", "restart"),
        FetchNext: lambda: ("fetch", "fetch next"),
        ShrinkIsr: lambda: ("shrink", f"ISR shrink: drop r{event.replica}"),
        PowerLoss: lambda: ("power", f"power loss, keeps {event.keep}"),
    }
    shape, label = marks[kind]()
    return [Mark(node, shape, label, step.note)], []


def _row(index: int, step: Step, node: int) -> tuple[Row, list[Arrow]]:
    marks, arrows = _input_row(index, step, node)
    expect = step.expect
    outputs: list[tuple[object, str, str, str]] = []  # (destination, label, title, tone)
    if expect.response is not None:
        outputs.append((step.input.source, message_label(expect.response), f"{node} -> {step.input.source}: {message_text(expect.response)}", "response"))
    for send in expect.sends:
        outputs.append((send.destination, message_label(send.message), f"{node} -> {send.destination}: {message_text(send.message)}", "request"))
    if expect.alter_isr is not None:
        isr = ",".join(map(str, expect.alter_isr.Isr))
        outputs.append((CONTROLLER, f"AlterIsr e{expect.alter_isr.LeaderEpoch} ISR {isr}", f"{node} -> controller: AlterIsr(LeaderEpoch={expect.alter_isr.LeaderEpoch}, Isr={isr})", "request"))
    for lane, (destination, label, title, tone) in enumerate(outputs, start=1):
        arrows.append(Arrow(node, destination, label, title, (index, lane), (index, lane), "delivered", tone))
    if expect.append_result is not None:
        result = expect.append_result
        words = f"appended at {result.Offset}" if result.ErrorCode == errors.NONE else f"append refused: {errors.name_of(result.ErrorCode)}"
        marks.append(Mark(node, "append", words))
    if expect.shutdown:
        marks.append(Mark(node, "shutdown", "shuts down"))
    answer = "; ".join(title for _, _, title, _ in outputs) or "no output"
    errors_text = ", ".join(f"{k}={v}" for k, v in step.errors.items())
    title = f"step {step.step}: {step.note}\nexpected: {answer}" + (f"\nerrors: {errors_text}" if errors_text else "") + f"\nrules: {' '.join(step.rules) or '-'}"
    return Row(step=str(step.step), text=step.note, title=title, lanes=1 + len(outputs), marks=marks), arrows


def _note(node: int, old: Observed, new: Observed) -> Note | None:
    words = []
    role_changed = (old.role, old.epoch) != (new.role, new.epoch)
    if role_changed:
        words.append(f"{new.role} e{new.epoch}")
    if new.voted_id not in (-1, node) and (new.voted_id, new.epoch) != (old.voted_id, old.epoch):
        words.append(f"for {new.voted_id}")
    if new.leader_id not in (-1, old.leader_id, node):
        words.append(f"leader {new.leader_id}")
    if new.high_watermark != old.high_watermark:
        words.append(f"hw {new.high_watermark}")
    if new.isr is not None and new.isr != old.isr and new.isr:
        words.append("ISR " + ",".join(map(str, new.isr)))
    old_log, new_log = _boxes(old), _boxes(new)
    if not words and old_log == new_log:
        return None
    return Note(node, " ".join(words), new.role if role_changed else None, new_log if new_log != old_log else None)


def _boxes(state: Observed) -> tuple[Box, ...]:
    """The observed log: (offset, epoch) pairs, those below the high watermark committed."""
    return tuple(Box(label=str(epoch), title=f"offset {offset}, epoch {epoch}", mark="committed" if offset < state.high_watermark else "") for offset, epoch in state.log)
