"""The node models a trace can follow, behind one interface: a KRaft node and an ISR replica.

Replay, corpus generation and the model-backed adapters handle both systems alike: they take
the node's configuration from the trace header, start it from the persisted state, step it,
and observe it through the functions here.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from model import node as nodes
from model.config import NodeConfig
from model.events import Answer, AppendResult, Request, Send, SetTimer, Shutdown
from model.isr import replica
from model.isr.config import ReplicaConfig
from model.isr.events import AlterIsr
from model.isr.state import ReplicaState
from model.isr.state import Role as IsrRole
from model.messages import REQUEST_TYPES
from model.state import NodeState, Role
from model.transitions import Transition
from spec.trace import Input, Observed, Outputs, Persisted, TraceCluster, TracePartition, timers_left

StepFunction = Callable[[Any, Any, Input], Transition]
"""model.node.step or model.isr.replica.step, or a variant of one (a mutant)."""


class NodeModel(NamedTuple):
    system: str  # "kraft" or "isr", as Header.system says
    config: Callable[[TraceCluster | TracePartition, int], Any]  # the node's static configuration
    start: Callable[[Any, Persisted], Any]  # its state before the first step
    step: StepFunction  # the reference step
    observe: Callable[[Any], Observed]
    role: Callable[[Any], str]  # the role name used in coverage cells and Observed.role


def kraft_start(config: NodeConfig, initial: Persisted) -> NodeState:
    """A fresh node for an empty persisted state, otherwise a shut-down one holding it."""
    if initial.empty:
        return nodes.initial_state(config)
    return NodeState(role=Role.DOWN, epoch=initial.epoch, leader_id=initial.leader_id, voted_id=initial.voted_id, log=initial.log)


def kraft_observe(state: NodeState) -> Observed:
    return Observed(
        role=state.role_name,
        epoch=state.epoch,
        leader_id=state.leader_id,
        voted_id=state.voted_id,
        log_end_offset=len(state.log),
        high_watermark=state.high_watermark if state.role != Role.DOWN else 0,
        log=tuple((r.Offset, r.Epoch) for r in state.log),
    )


def isr_start(config: ReplicaConfig, initial: Persisted) -> ReplicaState:
    """A replica of a new partition for an empty persisted state, otherwise a down one holding
    its log and high-watermark checkpoint."""
    if initial.empty:
        return replica.initial_state(config)
    return ReplicaState(role=IsrRole.DOWN, log=initial.log, high_watermark=initial.high_watermark)


def isr_role(state: ReplicaState) -> str:
    return state.role.name.lower()


def isr_observe(state: ReplicaState) -> Observed:
    return Observed(
        role=isr_role(state),
        epoch=state.epoch,
        leader_id=state.leader,
        voted_id=-1,
        log_end_offset=len(state.log),
        high_watermark=state.high_watermark,
        log=tuple((r.Offset, r.Epoch) for r in state.log),
        isr=state.isr,
    )


MODELS = {
    "kraft": NodeModel("kraft", lambda cluster, node: cluster.config().node(node), kraft_start, nodes.step, kraft_observe, lambda s: s.role_name),
    "isr": NodeModel("isr", lambda partition, node: partition.config().replica(node), isr_start, replica.step, isr_observe, isr_role),
}


def model_for(setting: TraceCluster | TracePartition) -> NodeModel:
    """The model of a node of this KRaft cluster or ISR partition (a trace header's `setting`)."""
    return MODELS["kraft" if type(setting) is TraceCluster else "isr"]


def outputs_of(event: Input, transition: Transition) -> Outputs:
    """A model step's outputs in the adapter contract's terms."""
    response = None
    sends = []
    answers = []
    append_result = None
    shutdown = False
    alter_isr = None
    timers = {}
    for output in transition.outputs:
        kind = type(output)
        if kind is Send:
            if type(output.message) in REQUEST_TYPES:
                sends.append(output)
            elif type(event) is Request and output.destination == event.source:
                response = output.message
        elif kind is Answer:
            answers.append(output)
        elif kind is AppendResult:
            append_result = output
        elif kind is Shutdown:
            shutdown = True
        elif kind is AlterIsr:
            alter_isr = output
        elif kind is SetTimer and output.jitter_ms == 0:  # a duration the specification fixes
            timers[output.kind.value] = output.delay_ms
    return Outputs(
        response=response, sends=tuple(sends), answers=tuple(answers), append_result=append_result, shutdown=shutdown, alter_isr=alter_isr, timers=timers_left(timers)
    )
