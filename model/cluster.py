"""A pure cluster of KRaft nodes: N voters, optional observers, a bag network, crashes,
partial partitions, history.

The history records what the safety properties need and no node remembers: every (epoch,
leader) ever elected, every vote ever cast, every record ever committed; and the links a
partial partition holds cut.
"""

import msgspec

from model import choices, network
from model.choices import Picks, with_picks
from model.config import ClusterConfig, NodeConfig
from model.events import Answer, ClientAppend, Crash, Event, Request, Resign, Response, Restart, Send, Timer, TimerKind
from model.messages import REQUEST_TYPES, Record
from model.network import Bag, Envelope
from model import node as nodes
from model.state import NodeState, Role
from model.transitions import Transition

replace = msgspec.structs.replace


class History(msgspec.Struct, frozen=True, kw_only=True):
    elected: frozenset[tuple[int, int]] = frozenset()  # (epoch, leader)
    votes: frozenset[tuple[int, int, int]] = frozenset()  # (voter, epoch, candidate)
    committed: tuple[tuple[Record, int], ...] = ()  # (record, epoch of the leader that committed it)
    max_epochs: tuple[int, ...] = ()  # the largest epoch each node has had
    violations: frozenset[str] = frozenset()  # step properties seen broken (SAFE-5)
    appended: int = 0  # client values appended so far
    crashes: int = 0
    elections: int = 0  # candidacies started (each bumps an epoch)
    # Links a partial partition cut, (source, destination), one way each: a message sent on one
    # is lost; one in flight when its link is cut waits, undeliverable (it may still be lost),
    # until the link heals. UNSET while no
    # link was ever cut, so that a history without partitions encodes (and fingerprints) as
    # before partitions existed.
    cut: frozenset[tuple[int, int]] | msgspec.UnsetType = msgspec.UNSET
    cuts: int | msgspec.UnsetType = msgspec.UNSET  # links cut so far (Bounds.max_cuts)


class ClusterState(msgspec.Struct, frozen=True, kw_only=True):
    nodes: tuple[NodeState, ...]  # in ClusterConfig.nodes order: voters, then observers
    network: Bag
    history: History


class Bounds(msgspec.Struct, frozen=True, kw_only=True):
    """Which faults may happen and how far the environment may go."""

    client_values: int = 1
    max_crashes: int = 0
    loss: bool = True
    duplication: bool = False
    resign: bool = False
    retries: bool = True  # request timeouts re-send unanswered requests (RETRY-1)
    progress_timeouts: bool = True  # a leader may time out for lack of fetches (PROGRESS-1)
    max_cuts: int = 0  # links a run may cut, one way each (a partial partition); each may heal


# Actions: the environment's choices, one per step of a cluster run. An action that steps a node
# carries the alternatives its node took at the choice points the step consulted, where they are
# not the node's own (model/choices.py): its `picks`.
class Deliver(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    envelope: Envelope
    duplicate: bool = False  # deliver a copy and leave the message in flight
    picks: Picks = ()


class Drop(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    envelope: Envelope


class Fire(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    node: int
    timer: TimerKind
    picks: Picks = ()


class Append(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    node: int
    value: int
    picks: Picks = ()


class ResignLeader(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    node: int
    picks: Picks = ()


class CrashNode(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    node: int
    picks: Picks = ()


class RestartNode(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    node: int
    picks: Picks = ()


class CutLink(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A partial partition: messages from `source` to `destination` stop arriving (one way)."""

    source: int
    destination: int


class HealLink(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    source: int
    destination: int


Action = Deliver | Drop | Fire | Append | ResignLeader | CrashNode | RestartNode | CutLink | HealLink
LINK_ACTIONS = (CutLink, HealLink)


class Cluster:
    """The static part of a cluster run: its configuration and each member's node config."""

    def __init__(self, config: ClusterConfig, bounds: Bounds = Bounds(), every_choice: bool = False) -> None:
        """`every_choice`: whether a run may take, at each node step, any outcome the
        specification allows (alternatives()), or only its nodes' own choices."""
        self.config = config
        self.bounds = bounds
        self.every_choice = every_choice
        self.ids = config.nodes
        self.node_configs = tuple(config.node(n) for n in self.ids)
        self.index = {n: i for i, n in enumerate(self.ids)}

    def initial(self) -> ClusterState:
        states = tuple(nodes.initial_state(c) for c in self.node_configs)
        return ClusterState(nodes=states, network=network.EMPTY, history=History(max_epochs=(0,) * len(states)))

    def enabled(self, state: ClusterState) -> list[Action]:
        """Every action the environment may take in this state."""
        actions = message_actions(network.envelopes(state.network), self.bounds, links_cut(state.history))
        for node_id, config, node in zip(self.ids, self.node_configs, state.nodes):
            actions.extend(node_actions(node_id, config, node, state.history, self.bounds))
        return actions + link_actions(self.ids, state.history, self.bounds)

    def chosen(self, position: int, picks: Picks) -> NodeConfig:
        """The configuration of the node at `position` with `picks` fixed as well."""
        config = self.node_configs[position]
        return replace(config, choices=with_picks(config.choices, picks)) if picks else config

    def alternatives(self, state: ClusterState, action: Action) -> list[Action]:
        """The action under each distinct outcome the specification allows its node's step (the
        default first, no picks); a drop, a cut and a heal have one."""
        if type(action) is Drop or type(action) in LINK_ACTIONS:
            return [action]
        node_id, event = event_of(action)
        i = self.index[node_id]
        config = self.node_configs[i]
        found, seen = [], set()
        for outcome in choices.outcomes(nodes.step, config, state.nodes[i], event):
            result = (outcome.transition.state, outcome.transition.outputs)
            if result not in seen:
                seen.add(result)
                found.append(replace(action, picks=choices.taken(outcome, config.choices)))
        return found

    def apply(self, state: ClusterState, action: Action) -> tuple[ClusterState, Transition | None]:
        """The state after an action, and the node transition it caused (None for a drop, a cut, a heal)."""
        if type(action) is Drop:
            return replace(state, network=network.remove(state.network, action.envelope)), None
        if type(action) in LINK_ACTIONS:
            return replace(state, history=linked(state.history, action)), None
        bag = state.network
        if type(action) is Deliver and not action.duplicate:
            bag = network.remove(bag, action.envelope)
        node_id, event = event_of(action)
        i = self.index[node_id]
        before = state.nodes[i]
        transition = nodes.step(self.chosen(i, action.picks), before, event)
        cut = links_cut(state.history)
        for envelope in outgoing(node_id, event, transition):
            if (envelope.source, envelope.destination) not in cut:  # sent on a cut link: lost
                bag = network.add(bag, envelope)
        members = state.nodes[:i] + (transition.state,) + state.nodes[i + 1 :]
        history = record(counted(state.history, action), i, node_id, before, transition.state)
        return ClusterState(nodes=members, network=bag, history=history), transition


def message_actions(in_flight: list[Envelope], bounds: Bounds, cut: frozenset[tuple[int, int]] = frozenset()) -> list[Action]:
    """Deliver each distinct message in flight unless its link is `cut`; duplicate or lose it
    where those faults are on (a message on a cut link may be lost)."""
    actions: list[Action] = []
    for envelope in in_flight:
        if (envelope.source, envelope.destination) not in cut:
            actions.append(Deliver(envelope=envelope))
            if bounds.duplication:
                actions.append(Deliver(envelope=envelope, duplicate=True))
        if bounds.loss:
            actions.append(Drop(envelope=envelope))
    return actions


def node_actions(node_id: int, config: NodeConfig, node: NodeState, history: History, bounds: Bounds) -> list[Action]:
    """What may happen to one node: its armed timers, client appends, resignation, crash, restart."""
    if node.role == Role.DOWN:
        return [RestartNode(node=node_id)]
    timers = nodes.armed_timers(config, node)
    if not bounds.retries:
        timers = tuple(t for t in timers if t != TimerKind.REQUEST_TIMEOUT)
    if not bounds.progress_timeouts:
        timers = tuple(t for t in timers if t != TimerKind.PROGRESS_TIMEOUT)
    actions: list[Action] = [Fire(node=node_id, timer=t) for t in timers]
    if node.role == Role.LEADER:
        if history.appended < bounds.client_values:
            actions.append(Append(node=node_id, value=history.appended + 1))
        if bounds.resign:
            actions.append(ResignLeader(node=node_id))
    if history.crashes < bounds.max_crashes:
        actions.append(CrashNode(node=node_id))
    return actions


def links_cut(history: History) -> frozenset[tuple[int, int]]:
    return history.cut or frozenset()


def link_actions(ids: tuple[int, ...], history: History, bounds: Bounds) -> list[Action]:
    """Heal each link cut; while the bound allows, cut any other (one way)."""
    cut = links_cut(history)
    healing: list[Action] = [HealLink(source=source, destination=destination) for source, destination in sorted(cut)]
    if (history.cuts or 0) >= bounds.max_cuts:
        return healing
    return [CutLink(source=s, destination=d) for s in ids for d in ids if s != d and (s, d) not in cut] + healing


def linked(history: History, action: CutLink | HealLink) -> History:
    """The history once a link is cut (charged to Bounds.max_cuts) or healed."""
    link = (action.source, action.destination)
    if type(action) is CutLink:
        return replace(history, cut=links_cut(history) | {link}, cuts=(history.cuts or 0) + 1)
    return replace(history, cut=links_cut(history) - {link})


def event_of(action: Action) -> tuple[int, Event]:
    """The node an action (other than a drop) reaches, and the event it delivers there."""
    kind = type(action)
    if kind is Deliver:
        envelope = action.envelope
        if envelope.request is None:
            return envelope.destination, Request(source=envelope.source, message=envelope.message)
        return envelope.destination, Response(source=envelope.source, message=envelope.message, request=envelope.request)
    if kind is Fire:
        return action.node, Timer(kind=action.timer)
    if kind is Append:
        return action.node, ClientAppend(value=action.value)
    if kind is ResignLeader:
        return action.node, Resign()
    if kind is CrashNode:
        return action.node, Crash()
    return action.node, Restart()


def counted(history: History, action: Action) -> History:
    """The history with the environment's budgets (client values, crashes) charged for an action."""
    if type(action) is Append:
        return replace(history, appended=history.appended + 1)
    if type(action) is CrashNode:
        return replace(history, crashes=history.crashes + 1)
    return history


def outgoing(node_id: int, event: Event, transition: Transition) -> list[Envelope]:
    """The messages a node's step puts on the network; a response carries the request it answers
    (the step's own, or a held one's: an Answer)."""
    answered = event.message if type(event) is Request else None
    envelopes = []
    for output in transition.outputs:
        kind = type(output)
        if kind is Send:
            request = None if type(output.message) in REQUEST_TYPES else answered
            envelopes.append(Envelope(source=node_id, destination=output.destination, message=output.message, request=request))
        elif kind is Answer:
            envelopes.append(Envelope(source=node_id, destination=output.destination, message=output.message, request=output.request))
    return envelopes


def record(history: History, index: int, node_id: int, before: NodeState, after: NodeState) -> History:
    """Add what a node's step did to the history the safety properties read."""
    changes: dict[str, object] = {}
    if after.epoch > history.max_epochs[index]:
        epochs = history.max_epochs
        changes["max_epochs"] = epochs[:index] + (after.epoch,) + epochs[index + 1 :]
    if after.role == Role.CANDIDATE and after.epoch > before.epoch:
        changes["elections"] = history.elections + 1
    if after.voted_id != -1 and (after.epoch, after.voted_id) != (before.epoch, before.voted_id):
        changes["votes"] = history.votes | {(node_id, after.epoch, after.voted_id)}
    if after.role == Role.LEADER:
        if before.role != Role.LEADER or before.epoch != after.epoch:
            changes["elected"] = history.elected | {(after.epoch, node_id)}
        elif after.log[: len(before.log)] != before.log:
            changes["violations"] = history.violations | {"SAFE-5"}
        if after.high_watermark > before.high_watermark:
            known = {entry for entry, _ in history.committed}
            fresh = tuple((r, after.epoch) for r in after.log[max(before.high_watermark, 0) : after.high_watermark] if r not in known)
            if fresh:
                changes["committed"] = tuple(sorted(history.committed + fresh, key=lambda rc: rc[0].Offset))
    return replace(history, **changes) if changes else history
