"""Adapters backed by the model itself: the reference, and the mutants (one seeded bug each)."""

from collections.abc import Callable

from conformance.trace import Header, Observed, Outputs, Persisted
from model import node as nodes
from model.config import NodeConfig
from model.events import AppendResult, Event, Request, Send, Shutdown
from model.messages import REQUEST_TYPES
from model.state import NodeState, Role
from model.transitions import Transition

StepFunction = Callable[[NodeConfig, NodeState, Event], Transition]


def start_state(config: NodeConfig, initial: Persisted) -> NodeState:
    """A fresh node for an empty persisted state, otherwise a shut-down one holding it."""
    if initial.empty:
        return nodes.initial_state(config)
    return NodeState(role=Role.DOWN, epoch=initial.epoch, leader_id=initial.leader_id, voted_id=initial.voted_id, log=initial.log)


def outputs_of(event: Event, transition: Transition) -> Outputs:
    """A model step's outputs in the adapter contract's terms."""
    response = None
    sends = []
    append_result = None
    shutdown = False
    for output in transition.outputs:
        kind = type(output)
        if kind is Send:
            if type(output.message) in REQUEST_TYPES:
                sends.append(output)
            elif type(event) is Request and output.destination == event.source:
                response = output.message
        elif kind is AppendResult:
            append_result = output
        elif kind is Shutdown:
            shutdown = True
    return Outputs(response=response, sends=tuple(sends), append_result=append_result, shutdown=shutdown)


class ModelAdapter:
    """One node of the model, stepped in-process by a step function."""

    def __init__(self, name: str, step_function: StepFunction = nodes.step) -> None:
        self.name = name
        self.step_function = step_function
        self.config: NodeConfig | None = None
        self.state: NodeState | None = None
        self.last: Transition | None = None

    def start(self, header: Header) -> None:
        self.config = header.cluster.config().node(header.node)
        self.state = start_state(self.config, header.initial)

    def step(self, event: Event) -> Outputs:
        self.last = self.step_function(self.config, self.state, event)
        self.state = self.last.state
        return outputs_of(event, self.last)

    def observe(self) -> Observed:
        return Observed.of(self.state)

    def close(self) -> None:
        self.state = None
