"""The KRaft cluster as an explorable system, in a lean interned encoding.

A state is a flat tuple of small ints: one id per node state, one for the history, then the
ids of the messages in flight (sorted). Each distinct node state, message and history is
stored once; node steps, history updates, enabled actions, symmetry renamings and property
checks are computed once per distinct input and then looked up. The transitions themselves
are model.cluster's and model.node's: this module only chooses how states are stored.
"""

import bisect
import itertools
import sys
from collections.abc import Iterable, Iterator

import msgspec
import numpy as np

from conformance.explore.engine import Violation
from conformance.explore.interned import Interned, stable_fingerprint
from conformance.explore.packed import Packed
from model import choices, network, properties, symmetry
from model import node as nodes
from model.cluster import (
    Action,
    Append,
    Bounds,
    Cluster,
    ClusterState,
    CrashNode,
    Deliver,
    Drop,
    History,
    counted,
    event_of,
    link_actions,
    linked,
    links_cut,
    node_actions,
    outgoing,
    record,
)
from model.config import ClusterConfig, ConfigError
from model.messages import BeginQuorumEpochResponse, FetchResponse
from model.network import Envelope
from model.state import NodeState, held_fetches


# Symmetry reduction tries every order of nodes it cannot tell apart: up to voters! x observers!
# renamings per state, at most 6! = 720 here. Measured: 8,000 states/s at 6 voters, 3,000 at 7,
# 300 at 8 (without symmetry 20,000 or more); at 10 the first state alone takes 10! renamings.
MAX_SYMMETRIC_NODES = 6

# The caches keyed by (node states, history) prefixes, which grow with the state space, are
# emptied when full, so a long search's memory is its table and frontier, not its caches.
PREFIXES_CACHED = 2**15  # prefixes


def request_epoch(request: object) -> int:
    """The epoch a request was sent in (an OffsetsForLeaderEpoch's LeaderEpoch is the epoch it asks about)."""
    for field in ("CandidateEpoch", "CurrentLeaderEpoch", "LeaderEpoch"):
        if hasattr(request, field):
            return getattr(request, field)
    return -1


def dead_fields(faults: Bounds) -> tuple[str, ...]:
    """Volatile fields that no enabled action reads under these bounds, so they never tell states apart.

    `endorsed` and `refused` are read only when requests are re-sent (RETRY-1), `fetched` only by
    the leader progress timeout (PROGRESS-1); no safety property reads any of them.
    """
    dead = []
    if not faults.retries:
        dead += ["endorsed", "refused"]
    if not faults.progress_timeouts:
        dead.append("fetched")
    return tuple(dead)


class KraftSystem:
    """A cluster under exploration bounds: max epoch, max messages in flight (None: no bound), faults, symmetry.

    Without a bound on messages in flight, losses are not explored as steps of their own: a lost
    message is one never delivered, and keeping it in flight disables nothing (node actions never
    read the network, no safety property reads it, and there is no bound it could fill). Every
    node state and history reachable with losses is reachable without them, at no greater depth,
    so every verdict and every shortest counterexample's length stays (tests/test_exploration_exact.py).
    """

    def __init__(
        self,
        config: ClusterConfig,
        faults: Bounds,
        *,
        max_epoch: int,
        max_in_flight: int | None,
        max_elections: int | None = None,
        symmetry: bool = True,
        every_choice: bool = True,
        losses_as_steps: bool = False,
    ) -> None:
        """`every_choice`: a node's step may take any outcome the specification allows (every
        alternative of every choice point it consults, model/choices.py), or only the default.
        `losses_as_steps`: a loss is a step of its own even without a bound on messages in
        flight (the liveness search needs it: a message never delivered is not fair)."""
        self.cluster = Cluster(config, faults, every_choice)
        self.faults = faults
        self.max_epoch = max_epoch
        self.capacity = sys.maxsize if max_in_flight is None else max_in_flight
        self.drops = faults.loss and (max_in_flight is not None or losses_as_steps)
        self.max_elections = max_elections
        # Renaming nodes is exact only while every rule treats nodes alike; resignation (a fault,
        # or a leader's progress timeout under a profile that resigns on it) breaks
        # PreferredSuccessors ties by node id, so it turns symmetry off.
        resigns = faults.resign or (faults.progress_timeouts and config.options.progress_timeout_resigns)
        self.symmetry = symmetry and not resigns
        self.size = len(config.nodes)
        voters, observers = len(config.voters), len(config.observers)
        if self.symmetry and self.size > MAX_SYMMETRIC_NODES:
            raise ConfigError(
                f"symmetry reduction supports at most {MAX_SYMMETRIC_NODES} nodes (voters and observers), got {self.size}; use --no-symmetry for a larger cluster"
            )
        if self.capacity < voters - 1:  # a candidate sends a Vote request to every other voter at once
            raise ConfigError(f"max_in_flight must be at least {voters - 1} for {voters} voters, so that an election fits, got {max_in_flight}")
        self.dead_fields = dead_fields(faults)
        self.nodes = Interned(NodeState)
        self.messages = Interned(Envelope)
        self.histories = Interned(History)
        self._steps: dict = {}
        self._moves: dict[tuple[int, ...], tuple[dict, list]] = {}
        self._records: dict = {}
        self._node_actions: dict = {}
        self._checks: dict = {}
        self._held_counts: dict[int, int] = {}
        self._signatures: dict[int, tuple] = {}
        self._inert_below: dict[int, tuple[int, int]] = {}
        self._orders: dict[tuple[int, ...], list] = {}
        self._canonical: dict[tuple[int, ...], tuple[int, int, list]] = {}
        self._permutations: dict[tuple[int, ...], int] = {}
        self._renaming: list[tuple[dict, dict, dict]] = []
        self._groups = (range(voters), range(voters, voters + observers))

    # -- the System protocol -------------------------------------------------------------
    def property_ids(self) -> tuple[str, ...]:
        return tuple(properties.PROPERTIES)

    def initial_states(self) -> list[tuple[int, ...]]:
        return [self.encode(self.cluster.initial())]

    def successors(self, state: tuple[int, ...]) -> Iterator[tuple[tuple, tuple[int, ...]]]:
        _fps, handles = self.expand(state)
        return ((self.key(handle), self.reach(handle)) for handle in handles)

    def expand(self, state: tuple[int, ...]) -> tuple[list[int], list[tuple]]:
        """Every successor within the bounds, in a deterministic order, as two lists: fingerprints
        and handles (see reach and key): what the engines' hot loops take. Most successors
        have been seen before, so a successor's state is built only when asked for; its fingerprint
        is found without it.

        A handle is (state, move, at): the move a node event makes (see _move), and the place in the
        bag of the message it takes out (-1: none; -2 - place: a copy of that message delivered).
        """
        size = self.size
        prefix = state[: size + 1]
        bag = state[size + 1 :]
        moves = self._moves.get(prefix)
        if moves is None:
            if len(self._moves) >= PREFIXES_CACHED:
                self._moves.clear()
            canonical = self._canonical_of(prefix)
            drop = (prefix, (), 0, False, canonical, None, self._fast(canonical, False, ()))  # a loss: a move that changes no node
            moves = self._moves[prefix] = ({}, self._node_moves(prefix), drop)
        deliveries, node_moves, drop = moves
        room = self.capacity - len(bag) - sum(map(self._held, prefix[:size]))
        duplication, drops = self.faults.duplication, self.drops
        handles = []
        previous = -1
        for at, message_id in enumerate(bag):
            if message_id == previous:
                continue
            previous = message_id
            moves = deliveries.get(message_id)
            if moves is None:
                moves = deliveries[message_id] = [] if self._on_cut_link(prefix, message_id) else self._event_moves(prefix, ("deliver", message_id))
            for move in moves:
                if move[2] <= room + 1:
                    handles.append((state, move, at))
                if duplication and move[2] <= room:
                    handles.append((state, move, -2 - at))
            if drops:
                handles.append((state, drop, at))
        handles += [(state, move, -1) for move in node_moves if move[2] <= room]
        # Each successor's fingerprint, inlined (the hot loop). A bag's fingerprint is a sum, so
        # when no epoch changes (no message turns inert) and one renaming is canonical, it is the
        # bag's sum under that renaming, less the message taken out, plus the move's messages.
        fps = []
        sums = {}  # renaming -> this bag's sum under it
        for handle in handles:
            move = handle[1]
            fast = move[6]
            if fast is None:
                prefix_fp, renamings = move[4]
                fp = hash((prefix_fp, self._bag_fp(renamings, self.reach(handle)[size + 1 :])))
            else:
                prefix_fp, index, message_fps, sent_sum = fast
                total = sums.get(index)
                if total is None:
                    total = sums[index] = self._bag_fp(move[4][1], bag)  # fills message_fps with the bag's messages
                at = handle[2]
                if at >= 0:
                    total -= message_fps[bag[at]]
                fp = hash((prefix_fp, total + sent_sum))
            fps.append(fp)
        return fps, handles

    def reach(self, handle: tuple) -> tuple[int, ...]:
        """The state an expand() handle stands for.

        Every state's bag is live already (see _live), and only a node whose epoch changed can make
        a message inert, so the bag is filtered only then; the move's own messages were filtered
        once, when the move was made.
        """
        state, move, at = handle
        bag = state[self.size + 1 :]
        if at >= 0:
            bag = bag[:at] + bag[at + 1 :]
        if move[3]:  # an epoch changed
            bag = self._live(bag, move[0])
        sent = move[1]
        if sent:
            in_bag_order = self.messages.fps.__getitem__
            if len(sent) == 1:  # most moves send one message: put it in place (a third faster than sorting)
                place = bisect.bisect(bag, in_bag_order(sent[0]), key=in_bag_order)
                bag = bag[:place] + sent + bag[place:]
            else:
                bag = tuple(sorted(bag + sent, key=in_bag_order))
        return move[0] + bag

    def key(self, handle: tuple) -> tuple:
        """The action key of an expand() handle (see action())."""
        state, move, at = handle
        if at <= -2:
            return ("duplicate", state[self.size + 1 - 2 - at], move[5][2])
        if move[5] is None:
            return ("drop", state[self.size + 1 + at], ())
        return move[5]

    def fingerprint(self, state: tuple[int, ...]) -> int:
        """Taken from the canonical renaming: states equal up to symmetry get the same fingerprint
        wherever they are found (see _canonical_prefix)."""
        size = self.size
        prefix_fp, renamings = self._canonical_of(state[: size + 1])
        return hash((prefix_fp, self._bag_fp(renamings, state[size + 1 :])))

    def violations(self, state: tuple[int, ...]) -> tuple[Violation, ...]:
        key = state[: self.size + 1]
        found = self._checks.get(key)
        if found is None:
            if len(self._checks) >= PREFIXES_CACHED:
                self._checks.clear()
            cluster_state = ClusterState(
                nodes=tuple(self.nodes.values[n] for n in state[: self.size]),
                network=network.EMPTY,
                history=self.histories.values[state[self.size]],
            )
            found = self._checks[key] = tuple(Violation(v.rule, v.detail) for v in properties.violations(self.cluster, cluster_state))
        return found

    # -- between encodings -------------------------------------------------------------------
    def encode(self, state: ClusterState) -> tuple[int, ...]:
        bag = sorted((self.messages.id(envelope) for _key, envelope in state.network), key=self.messages.fps.__getitem__)
        return tuple(self.nodes.id(self._view(n)) for n in state.nodes) + (self.histories.id(state.history),) + tuple(bag)

    def decode(self, state: tuple[int, ...]) -> ClusterState:
        bag = network.EMPTY
        for message_id in state[self.size + 1 :]:
            bag = network.add(bag, self.messages.values[message_id])
        return ClusterState(
            nodes=tuple(self.nodes.values[n] for n in state[: self.size]),
            network=bag,
            history=self.histories.values[state[self.size]],
        )

    def pack(self, states: list[tuple[int, ...]]) -> Packed:
        """The states as their parts' stable fingerprints (8 bytes each), meaningful in every process
        that has been given the parts (see parts() and learn()): what the sharded and Spark engines send."""
        ids, ends, kinds = self._laid_out(states)
        fps = np.empty(len(ids), dtype=np.int64)
        for kind, interned in zip(kinds, self._interned()):
            fps[kind] = interned.fp_array()[ids[kind]]
        return Packed(fps.tobytes(), (ends * 8).tobytes())

    def _interned(self) -> tuple[Interned, Interned, Interned]:
        return self.nodes, self.histories, self.messages  # a part's kind is its place here

    def _laid_out(self, states: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """States end to end: their ids, where each ends, and which places hold each kind of part."""
        ends = np.cumsum(np.fromiter(map(len, states), dtype=np.int64, count=len(states)))
        total = int(ends[-1]) if len(ends) else 0
        return np.fromiter(itertools.chain.from_iterable(states), dtype=np.int64, count=total), ends, self._kinds(ends, total)

    def _kinds(self, ends: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Of states laid end to end, which places hold node states, the history, messages."""
        lengths = np.diff(ends, prepend=0)
        place = np.arange(total) - np.repeat(ends - lengths, lengths)
        return place < self.size, place == self.size, place > self.size

    def parts(self, packed: Packed, known: set[tuple[int, int]]) -> list[tuple[int, int, bytes]]:
        """(fingerprint, kind, encoding) of the parts of packed states that `known` lacks, once
        each: what another process needs to unpack them (see System.parts)."""
        fps = np.frombuffer(packed.data, dtype=np.int64)
        found = []
        for kind, (interned, places) in enumerate(zip(self._interned(), self._kinds(packed.offsets() // 8, len(fps)))):
            for fp in np.unique(fps[places]).tolist():
                if (kind, fp) not in known:
                    known.add((kind, fp))
                    found.append((fp, kind, interned.encoded(interned.by_fp[fp])))
        return found

    def learn(self, fp: int, kind: int, encoded: bytes) -> None:
        self._interned()[kind].learn(fp, encoded)

    def unpack(self, packed: Packed) -> list[tuple[int, ...]]:
        """Packed states in this process's ids; their parts must have been learned. pack(unpack(p)) == p."""
        fps = np.frombuffer(packed.data, dtype=np.int64)
        ends = packed.offsets() // 8
        ids = np.empty(len(fps), dtype=np.int64)
        for kind, interned in zip(self._kinds(ends, len(fps)), self._interned()):
            ids[kind] = interned.ids_of(fps[kind])
        ids, ends = ids.tolist(), ends.tolist()
        return [tuple(ids[start:end]) for start, end in zip([0, *ends[:-1]], ends)]

    def action(self, key: tuple) -> Action:
        """The model.cluster action an explorer action key (kind, what, picks) stands for."""
        kind, what, picks = key
        if kind == "node":
            return msgspec.structs.replace(what, picks=picks)
        if kind == "link":
            return what
        envelope = self.messages.values[what]
        if kind == "drop":
            return Drop(envelope=envelope)
        return Deliver(envelope=envelope, duplicate=kind == "duplicate", picks=picks)

    def _view(self, node: NodeState) -> NodeState:
        """The node with the fields no enabled action reads under these bounds blanked out."""
        if not self.dead_fields or not any(getattr(node, f) for f in self.dead_fields):
            return node
        return msgspec.structs.replace(node, **{f: frozenset() for f in self.dead_fields})

    # -- transitions -------------------------------------------------------------------------
    def _node_moves(self, prefix: tuple[int, ...]) -> list[tuple]:
        """The move of every node action that stays within the bounds, in slot order."""
        history = self.histories.values[prefix[self.size]]
        found = []
        for position, node_id in enumerate(prefix[: self.size]):
            key = (position, node_id, history.appended, history.crashes)
            actions = self._node_actions.get(key)
            if actions is None:
                config = self.cluster.node_configs[position]
                actions = self._node_actions[key] = node_actions(self.cluster.ids[position], config, self.nodes.values[node_id], history, self.faults)
            for action in actions:
                found += self._event_moves(prefix, ("node", action))
        return found + [self._link_move(prefix, action) for action in link_actions(self.cluster.ids, history, self.faults)]

    def _on_cut_link(self, prefix: tuple[int, ...], message_id: int) -> bool:
        """Whether a message waits on a link a partial partition cut (undeliverable, still losable)."""
        cut = links_cut(self.histories.values[prefix[self.size]])
        if not cut:
            return False
        envelope = self.messages.values[message_id]
        return (envelope.source, envelope.destination) in cut

    def _link_move(self, prefix: tuple[int, ...], action: Action) -> tuple:
        """The move of a cut or a heal (see _move): it changes the history alone."""
        history = self.histories.id(linked(self.histories.values[prefix[self.size]], action))
        next_prefix = prefix[: self.size] + (history,)
        canonical = self._canonical_of(next_prefix)
        return next_prefix, (), 0, False, canonical, ("link", action, ()), self._fast(canonical, False, ())

    def _steps_of(self, position: int, before: int, key: tuple) -> list[tuple]:
        """Each distinct outcome of one node event (the default first; only it unless every choice
        is explored): (node state id after, message ids sent, whether it leaves max_epoch, picks)."""
        step_key = (position, before, key)
        stepped = self._steps.get(step_key)
        if stepped is None:
            kind, what = key
            node_id, event = event_of(Deliver(envelope=self.messages.values[what]) if kind == "deliver" else what)
            config = self.cluster.node_configs[position]
            found = choices.outcomes(nodes.step, config, self.nodes.values[before], event)
            stepped, seen = [], set()
            for outcome in found if self.cluster.every_choice else found[:1]:
                transition = outcome.transition
                after = self.nodes.id(self._view(transition.state))
                sent = tuple(self.messages.id(e) for e in outgoing(node_id, event, transition))
                if (after, sent) not in seen:
                    seen.add((after, sent))
                    stepped.append((after, sent, transition.state.epoch > self.max_epoch, choices.taken(outcome, config.choices)))
            self._steps[step_key] = stepped
        return stepped

    def _event_moves(self, prefix: tuple[int, ...], key: tuple) -> list[tuple]:
        """What one node event may do to a (node ids, history id) prefix, whatever is in flight:
        per outcome within the bounds, (next prefix, the messages sent that are live there in bag
        order, how many were sent, whether the node's epoch changed, the next prefix's canonical
        renamings (_canonical_prefix), the action key (kind, what, picks), what fingerprints its
        successors fast (_fast))."""
        kind, what = key
        position = self.cluster.index[self.messages.values[what].destination if kind == "deliver" else what.node]
        before = prefix[position]
        return [
            move
            for after, sent, beyond, picks in self._steps_of(position, before, key)
            if not beyond and len(sent) <= self.capacity
            if (move := self._move(prefix, position, None if kind == "deliver" else what, after, sent, (kind, what, picks))) is not None
        ]

    def _move(self, prefix: tuple[int, ...], position: int, action: Action | None, after: int, sent: tuple[int, ...], key: tuple) -> tuple | None:
        """One outcome's move (see _event_moves), or None when its history leaves the bounds."""
        before = prefix[position]
        history_id = prefix[self.size]
        charge = type(action) if type(action) in (Append, CrashNode) else None
        record_key = (history_id, position, before, after, charge)
        next_history = self._records.get(record_key)
        if next_history is None:
            history = self.histories.values[history_id]
            if action is not None:
                history = counted(history, action)
            history = record(history, position, self.cluster.ids[position], self.nodes.values[before], self.nodes.values[after])
            if self.max_elections is not None and history.elections > self.max_elections:
                next_history = self._records[record_key] = -1
            else:
                next_history = self._records[record_key] = self.histories.id(history)
        if next_history == -1:
            return None
        cut = links_cut(self.histories.values[next_history])
        if cut:  # a message sent on a cut link is lost
            sent = tuple(m for m in sent if (self.messages.values[m].source, self.messages.values[m].destination) not in cut)
        node_ids = prefix[:position] + (after,) + prefix[position + 1 : self.size]
        live = self._live(tuple(sorted(sent, key=self.messages.fps.__getitem__)), node_ids)
        epoch_changed = self.nodes.values[after].epoch != self.nodes.values[before].epoch
        next_prefix = node_ids + (next_history,)
        canonical = self._canonical_of(next_prefix)
        held = self._held(after) - self._held(before)  # a held Fetch is a request the network still owes an answer
        return next_prefix, live, len(sent) + held, epoch_changed, canonical, key, self._fast(canonical, epoch_changed, live)

    def _held(self, node_id: int) -> int:
        """How many Fetches a node state holds unanswered (FETCH-REQ-7). They count against
        max_in_flight as the messages in flight do: each will put an answer in flight, and a
        fetcher's re-sends could otherwise pile up held Fetches without bound."""
        held = self._held_counts.get(node_id)
        if held is None:
            held = self._held_counts[node_id] = len(held_fetches(self.nodes.values[node_id]))
        return held

    def _fast(self, canonical: tuple, epoch_changed: bool, sent: tuple[int, ...]) -> tuple | None:
        """What expand() needs to fingerprint a move's successor from its parent's bag: (the next
        prefix's fingerprint, the renaming, its message fingerprints, the sent messages' sum under
        it); None when the successor must be built first (an epoch changed, so messages may turn
        inert, or renamings tie, so bags decide)."""
        prefix_fp, renamings = canonical
        if epoch_changed or len(renamings) > 1:
            return None
        index, message_fps = renamings[0]
        return prefix_fp, index, message_fps, self._bag_fp(renamings, sent)

    def _bag_fp(self, renamings: list[tuple[int, dict]], bag: tuple[int, ...]) -> int:
        """The fingerprint of a bag of messages under the canonical renamings (see _canonical_prefix)."""
        best = None
        for index, message_fps in renamings:
            try:
                total = sum(map(message_fps.__getitem__, bag))
            except KeyError:
                total = sum(self._renamed_fp(index, "message", m) for m in bag)
            if best is None or total < best:
                best = total
        return best

    def _live(self, bag: tuple[int, ...], node_ids: tuple[int, ...]) -> tuple[int, ...]:
        """The bag without inert messages: responses that can no longer change anything.

        A response whose piggy-backed epoch and whose request's epoch are both below its
        destination's epoch is ignored by every handler (epochs never decrease), so delivering or
        losing it are the same no-op. Without retries a BeginQuorumEpoch response without error
        only records an endorsement, which nothing then reads (see dead_fields).
        """
        values = self.nodes.values
        kept = []
        for m in bag:
            rule = self._inert_below.get(m)
            if rule is None:
                rule = self._inert_below[m] = self._inertness(m)
            position, epoch = rule
            if position < 0 or values[node_ids[position]].epoch <= epoch:
                kept.append(m)
        return tuple(kept) if len(kept) != len(bag) else bag

    def _inertness(self, message_id: int) -> tuple[int, int]:
        """(destination slot, epoch) such that the message is inert once the destination is past
        that epoch; (-1, 0) for messages that stay live; epoch -1 for messages inert from the start."""
        envelope = self.messages.values[message_id]
        if envelope.request is None:
            return (-1, 0)
        message = envelope.message
        position = self.cluster.index[envelope.destination]
        if "endorsed" in self.dead_fields and type(message) is BeginQuorumEpochResponse and not (message.ErrorCode or message.PartitionErrorCode):
            return (position, -1)
        piggybacked = message.CurrentLeader.LeaderEpoch if type(message) is FetchResponse else message.LeaderEpoch
        return (position, max(piggybacked, request_epoch(envelope.request)))

    # -- symmetry --------------------------------------------------------------------------------
    def _signature(self, node_id: int) -> tuple:
        """What renaming cannot change about a node: its orbit-invariant sort key."""
        found = self._signatures.get(node_id)
        if found is None:
            n = self.nodes.values[node_id]
            log = tuple((r.Epoch, r.Value if isinstance(r.Value, int) else -1) for r in n.log)
            found = self._signatures[node_id] = (n.role, n.epoch, n.high_watermark, log, n.voted_id == -1, n.leader_id == -1)
        return found

    def _canonical_of(self, prefix: tuple[int, ...]) -> tuple[int, list[tuple[int, dict]]]:
        """_canonical_prefix, once per prefix while the cache holds it."""
        found = self._canonical.get(prefix)
        if found is None:
            if len(self._canonical) >= PREFIXES_CACHED:
                self._canonical.clear()
            found = self._canonical[prefix] = self._canonical_prefix(prefix)
        return found

    def _canonical_prefix(self, prefix: tuple[int, ...]) -> tuple[int, list[tuple[int, dict]]]:
        """A (node states, history) prefix's canonical fingerprint and the renamings that give it,
        each with its cache of renamed message fingerprints.

        A state's canonical form is the smallest of its renamings as (node fingerprints, history
        fingerprint, bag fingerprint), a bag's fingerprint being the sum of its messages': the
        prefix decides it alone unless some renamings tie on the prefix (a prefix with
        interchangeable nodes), and only those have their bags compared.
        """
        history_id = prefix[self.size]
        best, ties = None, []
        for index, node_fps, message_fps in self._renamings(prefix[: self.size]):
            key = (node_fps, self._renamed_fp(index, "history", history_id))
            if best is None or key < best:
                best, ties = key, [(index, message_fps)]
            elif key == best:
                ties.append((index, message_fps))
        return hash(best), ties

    def _renamings(self, node_ids: tuple[int, ...]) -> list[tuple[int, tuple[int, ...], dict]]:
        """For a tuple of node states, per canonical order: (permutation index, renamed node fingerprints,
        that renaming's cache of renamed message fingerprints). Without symmetry, the identity alone.

        A canonical order sorts each interchangeable group by signature; tied nodes are tried in
        every order (hence MAX_SYMMETRIC_NODES).
        """
        found = self._orders.get(node_ids)
        if found is not None:
            return found
        per_group = []
        for group in self._groups:
            if not self.symmetry:
                per_group.append([tuple(group)])
                continue
            ranked = sorted(group, key=lambda p: self._signature(node_ids[p]))
            tied = [tuple(g) for _, g in itertools.groupby(ranked, key=lambda p: self._signature(node_ids[p]))]
            per_group.append([tuple(itertools.chain.from_iterable(c)) for c in itertools.product(*(itertools.permutations(t) for t in tied))])
        found = []
        for parts in itertools.product(*per_group):
            order = tuple(itertools.chain.from_iterable(parts))  # new slot i holds old slot order[i]
            index = self._permutation_index(tuple(order.index(old) for old in range(self.size)))
            node_fps = tuple(self._renamed_fp(index, "node", node_ids[old]) for old in order)
            found.append((index, node_fps, self._renaming[index][2]["message"]))
        self._orders[node_ids] = found
        return found

    def _permutation_index(self, position: tuple[int, ...]) -> int:
        """A small int for a slot permutation (old slot -> new slot), with its renaming caches."""
        index = self._permutations.get(position)
        if index is None:
            index = self._permutations[position] = len(self._renaming)
            ids = self.cluster.ids
            names = {ids[old]: ids[new] for old, new in enumerate(position)}
            self._renaming.append((dict(enumerate(position)), names, {"node": {}, "history": {}, "message": {}}))
        return index

    def _renamed_fp(self, index: int, kind: str, value_id: int) -> int:
        position, names, caches = self._renaming[index]
        cache = caches[kind]
        found = cache.get(value_id)
        if found is None:
            if kind == "node":
                renamed = symmetry.rename_node(self.nodes.values[value_id], names, position)
            elif kind == "history":
                renamed = symmetry.rename_history(self.histories.values[value_id], names, position)
            else:
                renamed = symmetry.rename_envelope(self.messages.values[value_id], names)
            found = cache[value_id] = stable_fingerprint(renamed)
        return found
