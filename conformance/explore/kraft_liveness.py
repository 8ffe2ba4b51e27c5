"""The KRaft cluster as the fair-cycle search sees it (conformance.explore.lasso.LivenessSystem).

The explorer's own encoding and steps (conformance.explore.kraft_system), with two differences
liveness needs: symmetry reduction is off (fairness is per message and per node, and a renamed
state would rename the actions owed), and a loss is a step of its own, a fault, even without a
bound on messages in flight (a message left undelivered forever is not a fair run). Which step
is a fault depends on the state (model.liveness.is_fault: a timeout beating its traffic).
"""

from collections.abc import Iterator

import msgspec

from conformance.explore.configs import CheckConfig
from conformance.explore.kraft_system import KraftSystem
from model import liveness


def without_picks(action: object) -> object:
    """An action whatever outcome its node's step took."""
    return msgspec.structs.replace(action, picks=()) if getattr(action, "picks", ()) else action


class KraftLiveness:
    def __init__(self, config: CheckConfig, fair_timers: frozenset = liveness.FAIR_TIMERS) -> None:
        self.system = KraftSystem(
            config.cluster(),
            config.faults(),
            max_epoch=config.max_epoch,
            max_in_flight=config.max_in_flight or None,
            max_elections=config.max_elections,
            symmetry=False,
            every_choice=config.every_choice,
            losses_as_steps=True,
        )
        self.cluster = self.system.cluster
        self.fair_timers = fair_timers
        self.symmetry = False

    def initial_states(self) -> list:
        return self.system.initial_states()

    def fingerprint(self, state: tuple) -> int:
        return self.system.fingerprint(state)

    def goal_ids(self) -> tuple[str, ...]:
        return liveness.checked_goals(self.cluster)

    def expand(self, state: tuple) -> tuple[list[tuple], frozenset, bool]:
        """The state's explored steps (key, successor, its fingerprint, fair action or None, fault), the fair
        actions it enables, and whether a step it enables (no fault) leaves the bounds."""
        system = self.system
        fps, handles = system.expand(state)
        decoded = system.decode(state)
        steps, explored = [], set()
        for fp, handle in zip(fps, handles):
            key = system.key(handle)
            action = system.action(key)
            explored.add(without_picks(action))
            steps.append((key, system.reach(handle), fp, liveness.fairness_of(action, self.fair_timers), liveness.is_fault(self.cluster, decoded, action)))
        enabled = self.cluster.enabled(decoded)
        fair = liveness.owed(self.cluster, decoded, enabled, self.fair_timers)
        cut = any(not liveness.is_fault(self.cluster, decoded, action) and without_picks(action) not in explored for action in enabled)
        return steps, fair, cut

    def goals(self, state: tuple) -> tuple[bool, ...]:
        missed = liveness.unmet(self.cluster, self.system.decode(state))
        return tuple(rule not in missed for rule in liveness.checked_goals(self.cluster))

    def violations(self, state: tuple) -> tuple:
        return self.system.violations(state)

    def property_ids(self) -> tuple[str, ...]:
        return self.system.property_ids()

    def successors(self, state: tuple) -> Iterator[tuple]:
        """(key, successor) pairs, as conformance.explore.check.counterexample_steps reads a path."""
        return self.system.successors(state)
