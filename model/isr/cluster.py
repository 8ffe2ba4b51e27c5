"""One partition's replicas, the controller and the network between them.

Actions are the environment's choices: deliver a message, a producer append, a follower's
next Fetch, a leader's ISR shrink, a crash, a restart, a controller election, a power failure.
Messages are never lost or duplicated, except that a replica going down loses every message to
or from it (its connections close), and a message sent to a down replica is lost.
"""

import itertools
from typing import NamedTuple

import msgspec

from model import network
from model.cluster import Append, CrashNode, Deliver, RestartNode
from model.events import AppendResult, ClientAppend, Crash, Request, Response, Send
from model.isr import controller, replica
from model.isr.config import IsrBounds, PartitionConfig
from model.isr.events import AlterIsr, FetchNext, PowerLoss, ShrinkIsr, Startup
from model.isr.state import History, LeaderAndIsr, PartitionState, ReplicaState, Role
from model.messages import REQUEST_TYPES, Record
from model.network import Envelope
from spec import errors

replace = msgspec.structs.replace


class StartFetch(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    node: int


class Shrink(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    node: int  # the leader
    replica: int


class Elect(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    node: int  # the replica the controller elects


class PowerFailure(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    keep: tuple[int, ...]  # per replica, the records that were on disk


Action = Deliver | Append | StartFetch | Shrink | CrashNode | RestartNode | Elect | PowerFailure


class Applied(NamedTuple):
    state: PartitionState
    rules: tuple[str, ...]  # the rule IDs of every replica and controller branch the action took
    inputs: tuple[tuple[int, object], ...]  # (replica, event) for every replica step, in order: the node-level view


def is_up(state: PartitionState, index: int) -> bool:
    return state.replicas[index].role != Role.DOWN


class Partition:
    """The static part of a run: the partition's configuration, the bounds, each replica's config."""

    def __init__(self, config: PartitionConfig, bounds: IsrBounds = IsrBounds()) -> None:
        self.config = config
        self.bounds = bounds
        self.ids = config.replicas
        self.replica_configs = tuple(config.replica(r) for r in self.ids)
        self.index = {r: i for i, r in enumerate(self.ids)}

    def initial(self) -> PartitionState:
        """The first replica leads epoch 0 with every replica in the ISR; logs are empty."""
        recorded = LeaderAndIsr(Leader=self.ids[0], LeaderEpoch=0, Isr=tuple(sorted(self.ids)))
        replicas = tuple(replica.initial_state(config) for config in self.replica_configs)
        return PartitionState(replicas=replicas, controller=recorded, network=network.EMPTY, history=History())

    def up(self, state: PartitionState) -> frozenset[int]:
        return frozenset(r for i, r in enumerate(self.ids) if is_up(state, i))

    def enabled(self, state: PartitionState) -> list[Action]:
        """Every action the environment may take in this state, in a fixed order."""
        bounds, history = self.bounds, state.history
        actions: list[Action] = [Deliver(envelope=e) for e in network.envelopes(state.network)]
        up = self.up(state)
        for node, current in zip(self.ids, state.replicas):
            if current.role == Role.DOWN:
                actions.append(RestartNode(node=node))
                continue
            if current.role == Role.LEADER:
                if history.appended < bounds.client_values:
                    actions.append(Append(node=node, value=history.appended + 1))
                actions.extend(Shrink(node=node, replica=r) for r in current.isr if r != node)
            elif current.leader in up and not current.fetching and not current.truncating:
                actions.append(StartFetch(node=node))  # a fetcher cannot connect to a down leader
            if history.crashes < bounds.max_crashes:
                actions.append(CrashNode(node=node))
        if history.elections < bounds.max_elections:
            actions.extend(Elect(node=c) for c in controller.candidates(state.controller, up))
        if bounds.unflushed_loss and not history.power_failures:
            # A power failure that loses nothing is every replica crashing (max_crashes covers it).
            whole = tuple(len(r.log) for r in state.replicas)
            keeps = itertools.product(*(range(n + 1) for n in whole))
            actions.extend(PowerFailure(keep=keep) for keep in keeps if keep != whole)
        return actions

    def apply(self, state: PartitionState, action: Action) -> Applied:
        """The state after an action, and the rules every step it caused cited."""
        kind = type(action)
        if kind is Elect:
            return self.elect(state, action.node)
        if kind is PowerFailure:
            return self.power_failure(state, action.keep)
        if kind is Deliver:
            envelope = action.envelope
            state = replace(state, network=network.remove(state.network, envelope))
            if envelope.request is None:
                event = Request(source=envelope.source, message=envelope.message)
            else:
                event = Response(source=envelope.source, message=envelope.message, request=envelope.request)
            return self.step(state, envelope.destination, event)
        if kind is Append:
            return self.step(state, action.node, ClientAppend(value=action.value))
        if kind is StartFetch:
            return self.step(state, action.node, FetchNext())
        if kind is Shrink:
            return self.step(state, action.node, ShrinkIsr(replica=action.replica))
        if kind is CrashNode:
            counted = replace(state, history=replace(state.history, crashes=state.history.crashes + 1))
            return self.step(counted, action.node, Crash())
        return self.step(state, action.node, Startup(partition=state.controller))  # RestartNode

    def step(self, state: PartitionState, node: int, event: object) -> Applied:
        """One replica's step and what follows from its outputs."""
        i = self.index[node]
        before = state.replicas[i]
        transition = replica.step(self.replica_configs[i], before, event)
        after = transition.state
        replicas = state.replicas[:i] + (after,) + state.replicas[i + 1 :]
        history = state.history
        if type(event) is ClientAppend and len(after.log) > len(before.log):
            history = replace(history, appended=history.appended + 1)
        bag = state.network
        if after.role == Role.DOWN and before.role != Role.DOWN:
            bag = tuple(entry for entry in bag if node not in (entry[1].source, entry[1].destination))
        stepped = replace(state, replicas=replicas, network=bag, history=history)
        return self.outputs(stepped, node, event, transition.outputs, transition.rules)

    def outputs(self, state: PartitionState, node: int, event: object, outputs: tuple, rules: tuple[str, ...]) -> Applied:
        """Put a replica's messages on the network, its ISR writes to the controller, its acks in the history."""
        answered = event.message if type(event) is Request else None
        bag, recorded, history = state.network, state.controller, state.history
        for output in outputs:
            kind = type(output)
            if kind is Send:
                if is_up(state, self.index[output.destination]):
                    request = None if type(output.message) in REQUEST_TYPES else answered
                    bag = network.add(bag, Envelope(source=node, destination=output.destination, message=output.message, request=request))
            elif kind is AlterIsr:
                recorded, written = controller.alter_isr(recorded, node, output)
                rules += written
            elif kind is AppendResult and output.ErrorCode == errors.NONE:
                acked = state.replicas[self.index[node]].log[output.Offset]
                history = replace(history, acked=tuple(sorted(history.acked + (acked,), key=record_order)))
        return Applied(replace(state, network=bag, controller=recorded, history=history), rules, ((node, event),))

    def elect(self, state: PartitionState, leader: int) -> Applied:
        """The controller's election, then its LeaderAndISR command to every live replica."""
        recorded, rules = controller.elect(state.controller, self.up(state), leader)
        history = replace(state.history, elections=state.history.elections + 1)
        state = replace(state, controller=recorded, history=history)
        inputs = ()
        for i, node in enumerate(self.ids):
            if is_up(state, i):
                state, stepped, stepped_inputs = self.step(state, node, recorded)
                rules += stepped
                inputs += stepped_inputs
        return Applied(state, rules, inputs)

    def power_failure(self, state: PartitionState, keep: tuple[int, ...]) -> Applied:
        """Every replica loses power at once, each keeping the records it had on disk."""
        replicas, rules, inputs = [], (), ()
        for node, config, current, kept in zip(self.ids, self.replica_configs, state.replicas, keep):
            event = PowerLoss(keep=kept)
            transition = replica.step(config, current, event)
            replicas.append(transition.state)
            rules += transition.rules
            inputs += ((node, event),)
        history = replace(state.history, power_failures=state.history.power_failures + 1)
        return Applied(replace(state, replicas=tuple(replicas), network=network.EMPTY, history=history), rules, inputs)


def holds(state: ReplicaState, record: Record) -> bool:
    """The replica's log has this record at its offset."""
    return record.Offset < len(state.log) and state.log[record.Offset] == record


def record_order(record: Record) -> tuple[int, int, int]:
    return (record.Offset, record.Epoch, record.Value)
