"""A KRaft cluster run as a sequence diagram: a `check` counterexample, or any run of actions.

The run is replayed through model.cluster from the initial state, so the diagram shows what the
model does: one lifeline per node, styled by its role; every message from the step that sent
it to the step that delivered or dropped it; timers, appends, resignations, crashes and
restarts; each node's role, epoch, vote, high watermark and log where they change, committed
records outlined, and after the last step every committed record a node lacks.
"""

from collections.abc import Sequence

from conformance.diagrams.flights import Flights
from conformance.diagrams.labels import record_box, record_name
from conformance.diagrams.layout import render
from conformance.diagrams.sequence import Diagram, Final, Lifeline, Mark, Note, Row
from conformance.text import action_text, changes
from model import properties
from model.cluster import LINK_ACTIONS, Action, Append, Cluster, ClusterState, CrashNode, CutLink, Deliver, Drop, Fire, ResignLeader, RestartNode, event_of
from model.messages import Record
from model.state import NodeState, Role
from spec.rules import rule

_SHAPES = {Fire: "timer", Append: "append", ResignLeader: "resign", CrashNode: "crash", RestartNode: "restart"}


def cluster_svg(cluster: Cluster, actions: Sequence[Action], title: str, cycle_from: int | None = None, verdicts: Sequence[str] = ()) -> str:
    return render(cluster_diagram(cluster, actions, title, cycle_from, verdicts))


def cluster_diagram(cluster: Cluster, actions: Sequence[Action], title: str, cycle_from: int | None = None, verdicts: Sequence[str] = ()) -> Diagram:
    """The run as a sequence diagram; `cycle_from`: the index of the first action of a lasso's
    cycle, whose steps are numbered with a ↻ (they repeat for ever)."""
    state = cluster.initial()
    voters = cluster.config.voters
    lifelines = [
        Lifeline(key=n, label=f"n{n}", caption=f"{'voter' if n in voters else 'observer'}, {node.role_name} e{node.epoch}", role=node.role_name)
        for n, node in zip(cluster.ids, state.nodes)
    ]
    flights = Flights()
    rows = []
    for index, action in enumerate(actions):
        after, transition = cluster.apply(state, action)
        kind = type(action)
        flights.step(
            index,
            state.network,
            after.network,
            delivered=action.envelope if kind is Deliver else None,
            copy=kind is Deliver and action.duplicate,
            dropped=action.envelope if kind is Drop else None,
        )
        words = action_text(action)
        changed = changes(cluster.ids, state, after)
        cited = " ".join(transition.rules) if transition else ""
        number = f"↻{index + 1}" if cycle_from is not None and index >= cycle_from else str(index + 1)
        row = Row(step=number, text=words, title=f"step {index + 1}: {words}\n{changed or 'no change'}\nrules: {cited or '-'}")
        if kind in _SHAPES:
            node = action.node
            row.marks.append(Mark(node, _SHAPES[kind], _mark_label(action), words))
        elif kind in LINK_ACTIONS:  # on the lifeline of the node whose messages it stops or lets through
            shape = "cut" if kind is CutLink else "heal"
            row.marks.append(Mark(action.source, shape, f"{shape} →n{action.destination}", words))
        committed_before, committed = _committed(state), _committed(after)
        for record, epoch in after.history.committed[len(state.history.committed) :]:
            node = event_of(action)[0]
            row.marks.append(Mark(node, "commit", f"commits {record_name(record)}", f"record {record_name(record)} committed in epoch {epoch}"))
        for node_id, old, new in zip(cluster.ids, state.nodes, after.nodes):
            note = _note(node_id, old, new, _boxes(old.log, committed_before), _boxes(new.log, committed))
            if note:
                row.notes.append(note)
        rows.append(row)
        state = after
    subtitle = f"{len(voters)} voters" + (f", {len(cluster.config.observers)} observers" if cluster.config.observers else "") + f", profile {cluster.config.profile}; {len(actions)} steps"
    return Diagram(
        title=title,
        subtitle=subtitle,
        lifelines=lifelines,
        rows=rows,
        arrows=flights.finish(),
        finals=_finals(cluster, state),
        verdicts=[f"{v.rule} {rule(v.rule).title}: {v.detail}" for v in properties.violations(cluster, state)] + list(verdicts),
    )


def _mark_label(action: Action) -> str:
    kind = type(action)
    if kind is Fire:
        return action.timer.value.replace("_", " ")
    if kind is Append:
        return f"append v{action.value}"
    return {ResignLeader: "resign", CrashNode: "crash", RestartNode: "restart"}[kind]


def _committed(state: ClusterState) -> dict[int, Record]:
    """Offset -> the record committed there (SAFE-7 keeps it to one per offset in a correct run)."""
    return {record.Offset: record for record, _ in state.history.committed}


def _boxes(log: tuple[Record, ...], committed: dict[int, Record]) -> tuple:
    """The log, each record outlined as committed, or as differing from the record committed at its offset."""
    return tuple(record_box(r, "" if r.Offset not in committed else ("committed" if committed[r.Offset] == r else "conflict")) for r in log)


def _note(node_id: int, old: NodeState, new: NodeState, old_log: tuple, new_log: tuple) -> Note | None:
    """What changed in a node, in words; its log when a record came, went or was committed."""
    words = []
    role_changed = (old.role_name, old.epoch) != (new.role_name, new.epoch)
    votes = new.voted_id not in (-1, node_id) and (new.voted_id, new.epoch) != (old.voted_id, old.epoch)
    if role_changed:
        words.append(f"{new.role_name} e{new.epoch}")
    if votes:
        words.append(f"for n{new.voted_id}")
    if new.leader_id not in (-1, old.leader_id, node_id):
        words.append(f"leader n{new.leader_id}")
    if new.high_watermark != old.high_watermark and new.role != Role.DOWN:
        words.append(f"hw {new.high_watermark}")
    log_changed = new_log != old_log
    if not words and not log_changed:
        return None
    return Note(node_id, " ".join(words), new.role_name if role_changed else None, new_log if log_changed else None)


def _finals(cluster: Cluster, state: ClusterState) -> list[Final]:
    committed = _committed(state)
    finals = []
    for node_id, node in zip(cluster.ids, state.nodes):
        lacks = tuple(f"lacks committed {record_name(r)}" for offset, r in sorted(committed.items()) if offset >= len(node.log) or node.log[offset] != r)
        finals.append(Final(node_id, f"{node.role_name} e{node.epoch}, hw {node.high_watermark}", _boxes(node.log, committed), lacks))
    return finals
