"""Adapters backed by the model itself: the reference, and the mutants (one seeded bug each).

The reference can resolve the specification's choice points (model/choices.py) other than the
model's default, as a fixed alternative per point or a seeded random one (drawn once for a
one-way point, anew at each step for an each-time one), and can declare optional capabilities
lacking: the precision tests run it so, as an implementation that reads the KIP another
allowed way.
"""

import zlib

import msgspec

from adapters.node_models import NodeModel, StepFunction, model_for, outputs_of
from model.choices import Picks, RandomChoices, with_picks
from spec.trace import Header, Input, Observed, Outputs


class ModelAdapter:
    """One node of the model, stepped in-process: the reference step of the trace's system,
    unless `steps` replaces it (by system name, e.g. {"isr": a_mutant_step}).

    `picks` fixes alternatives at choice points; `random_seed` (if not None) draws every other
    choice point's alternative at random instead (model.choices.RandomChoices: a one-way point
    once per trace, an each-time point anew at each step); `lacks` is declared at start;
    `profile` (if not None) reads a KRaft trace's cluster under that profile instead of its own:
    an implementation of that profile, certified against another's corpus."""

    def __init__(
        self,
        name: str,
        steps: dict[str, StepFunction] | None = None,
        picks: Picks = (),
        random_seed: int | None = None,
        lacks: frozenset[str] = frozenset(),
        profile: str | None = None,
    ) -> None:
        self.name = name
        self.steps = steps or {}
        self.picks = picks
        self.random_seed = random_seed
        self.lacks = lacks
        self.profile = profile
        self.model: NodeModel | None = None
        self.step_function: StepFunction | None = None
        self.config = None
        self.state = None
        self.draw: RandomChoices | None = None

    def start(self, header: Header) -> None:
        if self.profile is not None and header.cluster is not None:
            header = msgspec.structs.replace(header, cluster=msgspec.structs.replace(header.cluster, profile=self.profile))
        self.model = model_for(header.setting)
        self.step_function = self.steps.get(self.model.system, self.model.step)
        self.config = self.model.config(header.setting, header.node)
        if hasattr(self.config, "choices"):
            self.config = msgspec.structs.replace(self.config, choices=with_picks(self.config.choices, self.picks))
        self.state = self.model.start(self.config, header.initial)
        self.draw = None
        if self.random_seed is not None and hasattr(self.config, "choices"):
            seed = zlib.crc32(header.name.encode()) ^ self.random_seed
            self.draw = RandomChoices(seed, self.config.voters, self.config.node_id, fixed=self.config.choices.picks)

    def step(self, event: Input) -> Outputs:
        config = self.config
        if self.draw is not None:
            config = msgspec.structs.replace(config, choices=self.draw)
        transition = self.step_function(config, self.state, event)
        self.state = transition.state
        if self.draw is not None:
            self.draw.next_step()
        return outputs_of(event, transition)

    def observe(self) -> Observed:
        return self.model.observe(self.state)

    def close(self) -> None:
        self.state = None
