"""Coverage cells, for either system's nodes (KRaft and ISR).

A coverage cell is what one node step exercised: input kind | role | epoch relation |
outcome | rule ID, the outcome being the error code answered (or received) and what the step
changed. Where a seeded bug or another reading of the node's profile would answer otherwise than
every outcome the specification allows, the step is a cell of that reading too: the corpus is
aimed at catching each.
"""

from functools import cache, partial
from typing import NamedTuple

import msgspec

from adapters import mutants
from adapters.mutants import MUTANTS
from adapters.node_models import NodeModel, StepFunction, model_for, outputs_of
from conformance.explore.kraft_system import request_epoch
from model import node as nodes
from model.config import NodeConfig, OptionsRead, other_readings
from model.events import Request, Response, Restart, Timer
from model.isr.state import LeaderAndIsr
from model.messages import REQUEST_TYPES, FetchResponse, OffsetsForLeaderEpochResponse
from model.state import NodeState
from model.transitions import Transition
from model import choices
from model.choices import allowed_transitions
from spec import errors
from spec.trace import Input, Outputs, Persisted, Trace, TraceCluster, TracePartition

Setting = TraceCluster | TracePartition  # where a node under test belongs

DEDICATED = 3  # short traces sought per rule and outcome: each its own `rule ID | outcome #n` cell, the rule cited at its last step
CANDIDATES = 3 * DEDICATED  # places kept per rule and outcome, since several can project onto the same node trace


def dedicated_cell(cell: str) -> str:
    """The cell a `rule ID #n` cell stands for (the others stand for themselves)."""
    return cell.split(" #")[0]


def is_dedicated(cell: str) -> bool:
    """`rule ID | outcome` cells, and `reading NAME departs` cells (where a seeded bug or another
    reading of the profile fails the node): searches keep DEDICATED short traces of each."""
    return cell.startswith(("rule ", "reading "))


def note_cells(first: dict[str, object], found: tuple[str, ...], where: object) -> bool:
    """A search met `found` cells at `where`: keep the first (shallowest) place of each cell, and
    of each `rule ID | outcome` cell the first CANDIDATES distinct places, as `... #1`, `#2`...
    (generation keeps DEDICATED of them that give distinct traces). Whether every one of the cells
    now has all the places it keeps, so that meeting them again changes nothing."""
    full = True
    for cell in found:
        if not is_dedicated(cell):
            first.setdefault(cell, where)
            continue
        if f"{cell} #{CANDIDATES}" in first:
            continue  # the places fill in number order: all are kept already
        full = False
        for number in range(1, CANDIDATES + 1):
            kept = first.setdefault(f"{cell} #{number}", where)
            if kept == where:
                break
    return full


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
    not, OffsetsForLeaderEpoch answers whether they name the epoch asked, an earlier one, or none,
    and a Fetch answered with DivergingEpoch whether it names the fetcher's last epoch or an
    earlier one (where FETCH-REQ-3A's "largest epoch <=" and a literal "< " part)."""
    message = outputs.response if type(event) is Request else (event.message if type(event) is Response else None)
    if message is not None:
        code = message.ErrorCode or getattr(message, "PartitionErrorCode", errors.NONE)
        name = errors.name_of(code)
        if hasattr(message, "VoteGranted") and code == errors.NONE:
            name += ":granted" if message.VoteGranted else ":refused"
        if type(message) is OffsetsForLeaderEpochResponse and code == errors.NONE:
            asked = (event.message if type(event) is Request else event.request).LeaderEpoch
            name += ":asked-epoch" if message.LeaderEpoch == asked else (":undefined" if message.LeaderEpoch == -1 else ":earlier-epoch")
        if type(message) is FetchResponse and message.DivergingEpoch.Epoch != -1 and code in (errors.NONE, errors.OFFSET_OUT_OF_RANGE):
            asked = (event.message if type(event) is Request else event.request).LastFetchedEpoch
            name += ":diverging-at-asked-epoch" if message.DivergingEpoch.Epoch == asked else ":diverging-at-earlier-epoch"
        return name
    if outputs.append_result is not None:
        return errors.name_of(outputs.append_result.ErrorCode)
    return "shutdown" if outputs.shutdown else "-"


def quorum_file(config: NodeConfig, state: NodeState) -> str:
    """What a restarting node's quorum-state file holds (QSTATE-1): the restarts that keep a vote
    or a leadership are cells of their own, so each gets its dedicated traces."""
    held = []
    if state.leader_id != -1:
        held.append("own-leadership" if state.leader_id == config.node_id else "leader")
    if state.voted_id != -1:
        held.append("own-vote" if state.voted_id == config.node_id else "vote")
    return "file:" + ("+".join(held) or "empty")


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


def stale_leader(model: NodeModel, before: object, event: Input) -> bool:
    """A leader given a request of a newer epoch: it leads no more and does not know it yet. Its
    rules and outcomes get dedicated traces of their own, apart from those the rules have at
    other roles, since a leader answering such a request (a Fetch as fenced, say) is its own bug."""
    return type(event) is Request and model.role(before) == "leader" and epoch_relation(before.epoch, event) == "newer"


def cells(model: NodeModel, config: object, before: object, event: Input) -> tuple[str, ...]:
    """The coverage cells of one node step: one per rule it cites (an ISR replica's start with
    `isr |`), `rule ID | outcome` for each rule (searches keep DEDICATED shortest traces of those;
    at a stale leader `rule ID | outcome | stale leader` too), one per alternative of a choice point the step tells apart from the default
    (`choice FETCH-REQ-5=leadership-first | FetchRequest | follower`), the default included, and
    `reading NAME departs` for each of readings() that no allowed outcome matches here."""
    default, *others = allowed_transitions(model.step, config, before, event)
    transition = default.transition
    outputs = outputs_of(event, transition)
    answered = quorum_file(config, before) if type(event) is Restart else outcome(event, outputs)
    where = f"{input_kind(event)} | {model.role(before)}"
    base = f"{where} | {epoch_relation(before.epoch, event)} | {answered} {changes(model, before, transition.state, outputs)}"
    if model.system != "kraft":
        base = f"{model.system} | {base}"
    found = [f"{base} | {rule}" for rule in (transition.rules or ("-",))] + [f"rule {rule} | {answered}" for rule in transition.rules]
    if stale_leader(model, before, event):
        found += [f"rule {rule} | {answered} | stale leader" for rule in transition.rules]
    seen = (outputs, model.observe(transition.state))
    allowed = {seen}
    for other in others:
        if not same_step(other.transition, transition):
            shown = (outputs_of(event, other.transition), model.observe(other.transition.state))
            allowed.add(shown)
            if shown != seen:
                for name, pick in other.picks:
                    if pick != choices.default(name):
                        found += [f"choice {name}={choices.default(name)} | {where}", f"choice {name}={pick.split(':')[0]} | {where}"]
    touched = Touched(model.step, config, before, event, frozenset(default.consulted))
    for reading in readings(model, config):
        if not reading.may_differ(touched):
            continue
        read = reading.step(config, before, event)
        if not same_step(read, transition) and (outputs_of(event, read), model.observe(read.state)) not in allowed:
            found.append(f"reading {reading.name} departs")
    return tuple(dict.fromkeys(found))


def same_step(one: Transition, other: Transition) -> bool:
    """The same state and outputs, so the same observations: most readings and alternatives step
    as the default does, and this spares projecting them (the corpus search's main cost)."""
    return one.state == other.state and one.outputs == other.outputs


class Touched:
    """What one node step depends on, as far as a reading can change it: its input kind, the
    choice points the default consulted, and (found when first asked, by stepping once more)
    the options it read. The model is deterministic, so a step that never reads an option or
    consults a point steps the same whatever that option's value or that point's pick."""

    def __init__(self, step: StepFunction, config: object, state: object, event: Input, consulted: frozenset[str]) -> None:
        self.kind = mutants.input_kind(event)
        self.consulted = consulted
        self.step, self.config, self.state, self.event = step, config, state, event
        self.read: frozenset[str] | None = None

    @property
    def options(self) -> frozenset[str]:
        if self.read is None:
            trail = OptionsRead(self.config.options)
            self.step(msgspec.structs.replace(self.config, options=trail), self.state, self.event)
            self.read = frozenset(trail.read)
        return self.read


class Reading(NamedTuple):
    """A way a node could step otherwise (a seeded bug, another reading of its profile), and
    where alone it can: on one input kind, where the step reads one of some options, or where it
    consults one of some choice points. Elsewhere it steps as the reference does and is not run
    (the corpus search's main cost was running them all at every step)."""

    name: str
    step: StepFunction
    kind: type | None = None
    options: frozenset[str] = frozenset()
    points: frozenset[str] = frozenset()

    def may_differ(self, touched: Touched) -> bool:
        if self.kind is not None and touched.kind is not self.kind:
            return False
        if self.points and not self.points & touched.consulted:
            return False
        return not self.options or bool(self.options & touched.options)


@cache
def readings(model: NodeModel, config: object) -> list[Reading]:
    """What the corpus must catch at a node of this system: every seeded bug (adapters/mutants.py)
    and, under a Kafka profile, its other readings (model.config.other_readings), as steps."""
    found = [Reading(f"mutant {mutant.name}", mutant.step, mutant.kind, mutant.options) for mutant in MUTANTS.values() if mutant.system == model.system]
    if model.system == "kraft":
        for name, reading in other_readings(config).items():
            options = frozenset(f for f in reading.options.__struct_fields__ if getattr(reading.options, f) != getattr(config.options, f))
            points = frozenset(point for point, _ in reading.choices.picks if reading.choices.pick(point) != config.choices.pick(point))
            found.append(Reading(name, partial(reread, reading), options=options, points=points))
    return found


def reread(reading: NodeConfig, config: NodeConfig, state: NodeState, event: Input) -> Transition:
    """The reference step of a node read otherwise."""
    return nodes.step(reading, state, event)


def walk_cells(setting: Setting, node: int, inputs: list[Input], initial: Persisted = Persisted()) -> list[tuple[int, tuple[str, ...]]]:
    """The dedicated cells (is_dedicated) each of a node's inputs covers, by its index, where it covers any."""
    model = model_for(setting)
    config = model.config(setting, node)
    state = model.start(config, initial)
    found = []
    for at, event in enumerate(inputs):
        families = tuple(cell for cell in cells(model, config, state, event) if is_dedicated(cell))
        if families:
            found.append((at, families))
        state = model.step(config, state, event).state
    return found


def cells_of_last_step(setting: Setting, node: int, built: Trace) -> tuple[str, ...]:
    """The cells a trace's last step covers, recomputed by stepping the reference model."""
    model = model_for(setting)
    config = model.config(setting, node)
    state = model.start(config, built.header.initial)
    for step in built.steps[:-1]:
        state = model.step(config, state, step.input).state
    return cells(model, config, state, built.steps[-1].input)
