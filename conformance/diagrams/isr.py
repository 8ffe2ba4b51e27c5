"""An ISR partition run (an ISR `check` counterexample) as a sequence diagram.

Replayed through model.isr from the initial state: one lifeline per replica and one for the
controller; Fetch and OffsetsForLeaderEpoch messages from the step that sent them to the one
that delivered them (or lost them when a replica went down); the controller's LeaderAndIsr
commands, the record a restarting replica reads, a leader's AlterIsr; each replica's role,
epoch, high watermark, ISR and log where they change, acknowledged records outlined, and after
the last step every acknowledged record a replica lacks.
"""

from collections.abc import Callable, Sequence

from conformance.diagrams.flights import Flights
from conformance.diagrams.labels import record_box
from conformance.diagrams.layout import render
from conformance.diagrams.sequence import Arrow, Diagram, Final, Lifeline, Mark, Note, Row
from model.cluster import Append, CrashNode, Deliver, RestartNode
from model.isr import properties
from model.isr.cluster import Action, Elect, Partition, PowerFailure, Shrink, StartFetch
from model.isr.events import Startup
from model.isr.state import LeaderAndIsr, PartitionState, ReplicaState, Role, record_text
from model.messages import Record
from spec.rules import rule

CONTROLLER = "controller"


def partition_svg(partition: Partition, actions: Sequence[Action], title: str, describe: Callable[[Action], str]) -> str:
    return render(partition_diagram(partition, actions, title, describe))


def partition_diagram(partition: Partition, actions: Sequence[Action], title: str, describe: Callable[[Action], str]) -> Diagram:
    """`describe` puts an action in words (conformance.explore.isr_system's, as `check` prints it)."""
    state = partition.initial()
    lifelines = [Lifeline(r, f"r{r}", f"replica, {_role(s)} e{s.epoch}", _role(s)) for r, s in zip(partition.ids, state.replicas)]
    lifelines.append(Lifeline(CONTROLLER, CONTROLLER, _record_text(state.controller), "controller"))
    flights = Flights()
    rows, arrows = [], []
    for index, action in enumerate(actions):
        applied = partition.apply(state, action)
        after = applied.state
        flights.step(index, state.network, after.network, delivered=action.envelope if type(action) is Deliver else None)
        words = describe(action)
        row = Row(step=str(index + 1), text=words, title=f"step {index + 1}: {words}\nrules: {' '.join(sorted(set(applied.rules))) or '-'}")
        row.marks += _marks(action, partition.ids)
        arrows += _controller_arrows(index, action, state, applied.inputs, after)
        for record in sorted(set(after.history.acked) - set(state.history.acked), key=record_text):
            row.marks.append(Mark(_stepping(action), "commit", f"acks {record_text(record)}", f"record {record_text(record)} acknowledged to the producer"))
        acked_before, acked = _acked(state), _acked(after)
        for replica, old, new in zip(partition.ids, state.replicas, after.replicas):
            note = _note(replica, old, new, _boxes(old.log, acked_before), _boxes(new.log, acked))
            if note:
                row.notes.append(note)
        if after.controller != state.controller:
            row.notes.append(Note(CONTROLLER, _record_text(after.controller)))
        rows.append(row)
        state = after
    config = partition.config
    subtitle = f"{len(partition.ids)} replicas, min.isr {config.min_isr}, truncation {config.truncation}; {len(actions)} steps"
    return Diagram(
        title=title,
        subtitle=subtitle,
        lifelines=lifelines,
        rows=rows,
        arrows=flights.finish() + arrows,
        finals=_finals(partition, state),
        verdicts=[f"{v.rule} {rule(v.rule).title}: {v.detail}" for v in properties.violations(partition, state)],
    )


def _role(replica: ReplicaState) -> str:
    return replica.role.name.lower()


def _record_text(record: LeaderAndIsr) -> str:
    return f"leader r{record.Leader} e{record.LeaderEpoch} ISR {','.join(map(str, record.Isr))}"


def _stepping(action: Action) -> object:
    """The lifeline an action happens at."""
    if type(action) is Deliver:
        return action.envelope.destination
    if type(action) in (Elect, PowerFailure):
        return CONTROLLER
    return action.node


def _marks(action: Action, ids: tuple[int, ...]) -> list[Mark]:
    kind = type(action)
    if kind is Append:
        return [Mark(action.node, "append", f"append v{action.value}")]
    if kind is StartFetch:
        return [Mark(action.node, "fetch", "fetch")]
    if kind is Shrink:
        return [Mark(action.node, "shrink", f"ISR shrink: drop r{action.replica}")]
    if kind is CrashNode:
        return [Mark(action.node, "crash", "crash")]
    if kind is RestartNode:
        return [Mark(action.node, "restart", "restart")]
    if kind is Elect:
        return [Mark(CONTROLLER, "elect", f"elects r{action.node}")]
    if kind is PowerFailure:
        return [Mark(replica, "power", f"power failure, keeps {kept}") for replica, kept in zip(ids, action.keep)]
    return []  # a delivery: its arrow shows it


def _controller_arrows(index: int, action: Action, before: PartitionState, inputs: tuple, after: PartitionState) -> list[Arrow]:
    """What passes between the controller and the replicas in one step, drawn within its row."""
    arrows = []
    for node, event in inputs:
        if type(event) is LeaderAndIsr:
            arrows.append(Arrow(CONTROLLER, node, f"LeaderAndIsr r{event.Leader} e{event.LeaderEpoch}", _record_text(event), (index, 0), (index, 0)))
        elif type(event) is Startup:
            arrows.append(Arrow(CONTROLLER, node, f"record r{event.partition.Leader} e{event.partition.LeaderEpoch}", f"reads {_record_text(event.partition)}", (index, 0), (index, 0)))
    if type(action) not in (Elect, PowerFailure) and after.controller != before.controller:
        isr = ",".join(map(str, after.controller.Isr))
        arrows.append(Arrow(_stepping(action), CONTROLLER, f"AlterIsr ISR {isr}", f"the leader records ISR {isr}", (index, 0), (index, 0)))
    return arrows


def _acked(state: PartitionState) -> dict[int, Record]:
    return {record.Offset: record for record in state.history.acked}


def _boxes(log: tuple[Record, ...], acked: dict[int, Record]) -> tuple:
    return tuple(record_box(r, "" if r.Offset not in acked else ("committed" if acked[r.Offset] == r else "conflict")) for r in log)


def _note(replica: int, old: ReplicaState, new: ReplicaState, old_log: tuple, new_log: tuple) -> Note | None:
    words = []
    role_changed = (old.role, old.epoch) != (new.role, new.epoch)
    if role_changed:
        words.append(f"{_role(new)} e{new.epoch}")
    if new.truncating and not old.truncating:
        words.append("truncating")
    if new.high_watermark != old.high_watermark:
        words.append(f"hw {new.high_watermark}")
    if new.isr != old.isr and new.role == Role.LEADER:
        words.append("ISR " + ",".join(map(str, new.isr)))
    if not words and new_log == old_log:
        return None
    return Note(replica, " ".join(words), _role(new) if role_changed else None, new_log if new_log != old_log else None)


def _finals(partition: Partition, state: PartitionState) -> list[Final]:
    acked = _acked(state)
    finals = []
    for replica, current in zip(partition.ids, state.replicas):
        lacks = tuple(f"lacks acked {record_text(r)}" for offset, r in sorted(acked.items()) if offset >= len(current.log) or current.log[offset] != r)
        finals.append(Final(replica, f"{_role(current)} e{current.epoch}, hw {current.high_watermark}", _boxes(current.log, acked), lacks))
    finals.append(Final(CONTROLLER, _record_text(state.controller), None))
    return finals
