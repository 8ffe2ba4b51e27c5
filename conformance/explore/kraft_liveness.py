"""The KRaft cluster as the fair-cycle search sees it (conformance.explore.lasso.LivenessSystem).

The explorer's own system (conformance.explore.kraft_system), explored by the same engines, with
two differences liveness needs: symmetry reduction is off (fairness is per message and per node,
and a renamed state would rename the actions owed), and a loss is a step of its own, a fault,
even without a bound on messages in flight (a message left undelivered forever is not a fair
run). What liveness adds is labels(): which fair action each step takes, which are owed, and the
goals, read from caches per (node states, history) prefix and per message, since the search
asks it of every state (the rules are model.liveness's; which step is a fault depends on the
state: a timeout beating its traffic); and leaves(), asked only of a lasso's states.
"""

from conformance.explore.configs import CheckConfig
from conformance.explore.interned import Interned
from conformance.explore.kraft_system import PREFIXES_CACHED, KraftSystem
from conformance.explore.lasso import FAULT, NO_FAIRNESS
from model import liveness
from model import network
from model.cluster import ClusterState, CutLink, link_actions, links_cut, node_actions

class KraftLiveness(KraftSystem):
    def __init__(self, config: CheckConfig, fair_timers: frozenset = liveness.FAIR_TIMERS) -> None:
        super().__init__(
            config.cluster(),
            config.faults(),
            max_epoch=config.max_epoch,
            max_in_flight=config.max_in_flight or None,
            max_elections=config.max_elections,
            symmetry=False,
            every_choice=config.every_choice,
            losses_as_steps=True,
        )
        self.fair_timers = fair_timers
        self.goal_rules = liveness.checked_goals(self.cluster)
        self.fair_actions = Interned(tuple)  # model.liveness.fairness_of's, numbered as this process meets them
        self._prefix_labels: dict[tuple[int, ...], tuple] = {}
        self._message_labels: dict[int, tuple] = {}
        self._node_labels: dict[tuple, tuple] = {}
        self._goals: dict[tuple, int] = {}  # by model.liveness.goal_view

    def goal_ids(self) -> tuple[str, ...]:
        return self.goal_rules

    def action_ids(self) -> list[int]:
        """Each fair action numbered so far as an id that is the same in every process."""
        return self.fair_actions.fps

    def labels(self, state: tuple[int, ...], handles: list) -> tuple[list[int], list[int], int]:
        """For expand()'s handles of a state: each step's label (a fair action's number, see
        action_ids; NO_FAIRNESS or FAULT), the fair actions the state owes (enabled, within the
        bounds or not; a timer of RESET_BY_TRAFFIC only once its node is quiet), each once, and
        the goals it meets (bit i: goal_ids()[i])."""
        goals, fair_of, node_labels, owed, _heals = self._read(state)
        labels = []
        for _state, move, at in handles:
            key = move[5]
            if key is None or at <= -2:  # a loss, or a duplicate delivered
                labels.append(FAULT)
                continue
            kind, what, picks = key
            if picks and any(pick in liveness.LATE_PICKS for pick in picks):
                labels.append(FAULT)
            elif kind == "deliver":
                labels.append(fair_of[what])
            elif kind == "node":
                labels.append(node_labels[what])
            else:
                labels.append(FAULT if type(what) is CutLink else NO_FAIRNESS)
        return labels, owed, goals

    def leaves(self, state: tuple[int, ...], handles: list) -> bool:
        """Whether a step the state enables that is no fault is beyond the bounds (none of expand()'s handles takes it)."""
        _goals, fair_of, node_labels, _owed, heals = self._read(state)
        explored = {move[5][1] for _state, move, at in handles if move[5] is not None and at > -2}
        return not explored.issuperset(fair_of) or not explored.issuperset(heals) or any(label != FAULT and action not in explored for action, label in node_labels.items())

    def _read(self, state: tuple[int, ...]) -> tuple[int, dict, dict, list[int], list]:
        """What labels() and leaves() read of a state: the goals it meets, the fair action of each
        deliverable message's delivery, each node action's label, the fair actions owed (the fair
        ones among the node actions that are no fault here, and each delivery), the heals enabled."""
        size = self.size
        goals, cut, node_labels, owed, busy, canvassers, heals, held, standing = self._prefix_of(state[: size + 1])
        fair_of = {}
        unquiet, canvassing = held, ()
        messages = self._message_labels
        for message_id in state[size + 1 :]:
            found = messages.get(message_id) or self._message_of(message_id)
            if found[1] in cut:
                continue
            fair_of[message_id] = found[0]
            if found[2]:
                unquiet = unquiet.union(found[2])
            if found[3] is not None and standing.get(found[3][0]) == found[3]:
                canvassing = (*canvassing, found[3][0])
        owed = owed + list(fair_of.values())
        if unquiet or canvassing:
            node_labels = dict(node_labels)
            for action, fair in busy:
                if (action.node, action.timer) in unquiet:
                    node_labels[action] = FAULT
                elif fair >= 0:
                    owed.append(fair)
            for action in canvassers:
                if action.node in canvassing:
                    node_labels[action] = FAULT
        else:
            owed += [fair for _action, fair in busy if fair >= 0]
        return goals, fair_of, node_labels, owed, heals

    def _prefix_of(self, prefix: tuple[int, ...]) -> tuple:
        """What labels() reads of the node states and history, once per prefix: the goals met, the
        links cut, each node action's label where nothing is in flight, the fair actions owed
        whatever is in flight, the timers of RESET_BY_TRAFFIC (owed, and no fault, only once their
        node is quiet) with their fair ids, the election timeouts (a fault while their node's
        canvass is answered), the heals enabled, the (node, timer) pairs a held
        Fetch will reset, and each standing node's canvass round."""
        found = self._prefix_labels.get(prefix)
        if found is None:
            if len(self._prefix_labels) >= PREFIXES_CACHED:
                self._prefix_labels.clear()
            cluster, size = self.cluster, self.size
            members = tuple(self.nodes.values[n] for n in prefix[:size])
            history_id = prefix[size]
            history = self.histories.values[history_id]
            state = ClusterState(nodes=members, network=network.EMPTY, history=history)
            view = liveness.goal_view(state)
            goals = self._goals.get(view)
            if goals is None:
                goals = self._goals[view] = sum(1 << place for place, rule in enumerate(self.goal_rules) if liveness.GOALS[rule](cluster, state))
            node_labels, owed, busy, canvassers, standing = {}, [], [], [], {}
            for at in range(size):
                labelled, canvass = self._node_of(at, prefix[at], history)
                for action, fair, condition in labelled:
                    node_labels[action] = FAULT if condition == "always" else fair
                    if condition == "busy":
                        busy.append((action, fair))
                    elif fair >= 0:
                        owed.append(fair)
                    if condition == "canvassing":
                        canvassers.append(action)
                if canvass is not None:
                    standing[canvass[0]] = canvass
            held = frozenset()
            if any(self._held(n) for n in prefix[:size]):
                held = frozenset(
                    (node_id, timer) for at, node_id in enumerate(cluster.ids) for timer in liveness.RESET_BY_TRAFFIC if liveness.held_resets(members, node_id, at, timer)
                )
            cut = links_cut(history)
            heals = [action for action in link_actions(cluster.ids, history, self.faults) if type(action) is not CutLink] if cut else []
            found = self._prefix_labels[prefix] = (goals, cut, node_labels, owed, busy, canvassers, heals, held, standing)
        return found

    def _node_of(self, at: int, node_id: int, history) -> tuple[list[tuple], tuple | None]:
        """One node's actions, each with its fair id and when it is a fault, and its canvass
        round: once per node state and what of the history node actions read."""
        key = (at, node_id, history.appended, history.crashes)
        found = self._node_labels.get(key)
        if found is None:
            name, config, node = self.cluster.ids[at], self.cluster.node_configs[at], self.nodes.values[node_id]
            labelled = []
            for action in node_actions(name, config, node, history, self.faults):
                fairness = liveness.fairness_of(action, self.fair_timers)
                labelled.append((action, NO_FAIRNESS if fairness is None else self.fair_actions.id(fairness), liveness.fault_condition(action)))
            found = self._node_labels[key] = (labelled, liveness.standing_round(name, node))
        return found

    def _message_of(self, message_id: int) -> tuple:
        """What labels() reads of a message, once: its delivery's fair id, its link, the (node,
        timer) pairs its delivery resets, and the canvass round it belongs to."""
        found = self._message_labels.get(message_id)
        if found is None:
            envelope = self.messages.values[message_id]
            resets = tuple((n, timer) for n in self.cluster.ids for timer in liveness.RESET_BY_TRAFFIC if liveness.resets(timer, envelope, n))
            fair = self.fair_actions.id(("deliver", envelope))
            found = self._message_labels[message_id] = (fair, (envelope.source, envelope.destination), resets, liveness.canvass_of(envelope))
        return found

