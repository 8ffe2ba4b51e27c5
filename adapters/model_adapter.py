"""Adapters backed by the model itself: the reference, and the mutants (one seeded bug each)."""

from adapters.node_models import NodeModel, StepFunction, model_for, outputs_of
from spec.trace import Header, Input, Observed, Outputs


class ModelAdapter:
    """One node of the model, stepped in-process: the reference step of the trace's system,
    unless `steps` replaces it (by system name, e.g. {"isr": a_mutant_step})."""

    def __init__(self, name: str, steps: dict[str, StepFunction] | None = None) -> None:
        self.name = name
        self.steps = steps or {}
        self.model: NodeModel | None = None
        self.step_function: StepFunction | None = None
        self.config = None
        self.state = None

    def start(self, header: Header) -> None:
        self.model = model_for(header.setting)
        self.step_function = self.steps.get(self.model.system, self.model.step)
        self.config = self.model.config(header.setting, header.node)
        self.state = self.model.start(self.config, header.initial)

    def step(self, event: Input) -> Outputs:
        transition = self.step_function(self.config, self.state, event)
        self.state = transition.state
        return outputs_of(event, transition)

    def observe(self) -> Observed:
        return self.model.observe(self.state)

    def close(self) -> None:
        self.state = None
