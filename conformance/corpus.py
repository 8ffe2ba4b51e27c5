"""The conformance corpus: node-level traces chosen by coverage, generated from exploration.

A coverage cell is what one node step exercised: input kind x role x epoch relation x
outcome x rule ID. A breadth-first search of a configuration's cluster states notes, for every
node step it meets, the cells it covers; the first time a cell is met, the cluster path that
led there is the shortest, and it is projected onto the node that took the step. Probes add
inputs the cluster itself never sends (DescribeQuorum from an admin client, OffsetsForLeaderEpoch,
requests of another cluster, requests delivered to the wrong node) at every node state met, and
are kept when they reach a new cell. Seeded random walks add long interleavings.

Every trace's expected outputs come from the reference model stepping the projected inputs,
and its last step must cover the cell it was chosen for. Everything is deterministic: the same
configuration and options give the same bytes.
"""

import random
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec

from adapters.model_adapter import outputs_of, start_state
from conformance import trace as traces
from conformance.check import system_for
from conformance.check_config import CheckConfig
from conformance.describe_steps import message_text
from conformance.kraft_system import KraftSystem, request_epoch
from conformance.trace import Header, Observed, Outputs, Persisted, Step, Trace, TraceCluster
from model import node as nodes
from model.cluster import Cluster, Deliver, Drop, event_of
from model.config import NodeConfig
from model.network import Envelope
from model.events import AppendResult, ClientAppend, Crash, Event, Request, Resign, Response, Restart, Timer
from model.messages import (
    BeginQuorumEpochRequest,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    VoteRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    REQUEST_TYPES,
)
from model.state import NodeState
from model.transitions import Transition
from spec import errors

OTHER_CLUSTER = "other-cluster"
ADMIN_CLIENT = -1  # the source of DescribeQuorum requests: an admin client, not a replica
MANIFEST = "manifest.json"
DEFAULT_CORPUS = Path(__file__).resolve().parents[1] / "traces"  # the shipped corpus


class GenerateOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What fixes a corpus besides the configuration."""

    max_states: int = 150_000  # cluster states the search may visit
    walks: int = 8  # seeded random walks per configuration
    walk_steps: int = 250
    seed: int = 0


class CoverageRow(msgspec.Struct, frozen=True, kw_only=True):
    cell: str
    trace: str
    step: int


class Explored(msgspec.Struct, frozen=True, kw_only=True):
    """One configuration's search: how far it went and how many cells it met."""

    config: str
    bounds: CheckConfig
    states: int
    complete: bool  # the bounded state space was exhausted within max_states
    cells: int


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    format_version: int
    options: GenerateOptions
    searches: tuple[Explored, ...]
    traces: int
    steps: int
    cells: int
    rules: dict[str, int]  # rule ID -> steps exercising it
    coverage: tuple[CoverageRow, ...]  # each cell and the trace chosen for it
    files: dict[str, str]  # file name -> sha256
    content_hash: str  # sha256 over the files' names and hashes


# -- coverage cells -----------------------------------------------------------------------
def input_kind(event: Event) -> str:
    kind = type(event)
    if kind in (Request, Response):
        return type(event.message).__name__
    if kind is Timer:
        return f"timer:{event.kind.value}"
    return {ClientAppend: "append", Resign: "resign", Crash: "crash", Restart: "restart"}[kind]


def message_epoch(message: object) -> int | None:
    """The epoch a message speaks for: a request's, or the epoch piggy-backed on a response."""
    if type(message) in REQUEST_TYPES:
        epoch = request_epoch(message)
        return None if epoch == -1 else epoch
    if type(message) is FetchResponse:
        return message.CurrentLeader.LeaderEpoch
    return getattr(message, "LeaderEpoch", None)


def epoch_relation(state: NodeState, event: Event) -> str:
    if type(event) not in (Request, Response):
        return "-"
    epoch = message_epoch(event.message)
    if epoch is None:
        return "-"
    return "older" if epoch < state.epoch else ("same" if epoch == state.epoch else "newer")


def outcome(event: Event, outputs: Outputs) -> str:
    """The error code a step answered with (or received), by name; Vote answers say granted or not."""
    message = outputs.response if type(event) is Request else (event.message if type(event) is Response else None)
    if message is not None:
        code = message.ErrorCode or getattr(message, "PartitionErrorCode", errors.NONE)
        name = errors.name_of(code)
        if hasattr(message, "VoteGranted") and code == errors.NONE:
            name += ":granted" if message.VoteGranted else ":refused"
        return name
    if outputs.append_result is not None:
        return errors.name_of(outputs.append_result.ErrorCode)
    return "shutdown" if outputs.shutdown else "-"


def changes(before: NodeState, after: NodeState) -> str:
    """Which observable parts of the node a step changed, e.g. `role,epoch,log+,hw`."""
    a, b = Observed.of(before), Observed.of(after)
    changed = [field for field in ("role", "epoch", "leader_id", "voted_id") if getattr(a, field) != getattr(b, field)]
    if a.log != b.log:
        changed.append("log+" if b.log[: len(a.log)] == a.log else ("log-" if a.log[: len(b.log)] == b.log else "log~"))
    if a.high_watermark != b.high_watermark:
        changed.append("hw")
    return ",".join(changed) or "="


def cells(before: NodeState, event: Event, transition: Transition) -> tuple[str, ...]:
    """The coverage cells of one node step: input kind | role | epoch relation | outcome | rule.

    The outcome is the error code answered (or received) and what the step changed.
    """
    answered = outcome(event, outputs_of(event, transition))
    base = f"{input_kind(event)} | {before.role_name} | {epoch_relation(before, event)} | {answered} {changes(before, transition.state)}"
    return tuple(f"{base} | {rule}" for rule in (transition.rules or ("-",)))


# -- the reference run of a node's inputs -----------------------------------------------------
def build_trace(name: str, cluster: TraceCluster, node: int, inputs: list[Event], origin: str, covers: tuple[str, ...] = ()) -> Trace:
    """The trace of a node given its inputs: every expectation is the reference model's."""
    config = cluster.config().node(node)
    state = start_state(config, Persisted())
    steps = []
    for number, event in enumerate(inputs, start=1):
        transition = nodes.step(config, state, event)
        outputs = outputs_of(event, transition)
        steps.append(
            Step(
                step=number,
                input=event,
                expect=outputs,
                errors=error_names(outputs),
                state=Observed.of(transition.state),
                rules=transition.rules,
                note=event_text(event),
            )
        )
        state = transition.state
    header = Header(kind=traces.KIND, format_version=traces.FORMAT_VERSION, name=name, cluster=cluster, node=node, steps=len(steps), origin=origin, covers=covers)
    return Trace(header=header, steps=tuple(steps))


def error_names(outputs: Outputs) -> dict[str, str]:
    found = {}
    for prefix, value in (("response", outputs.response), ("append_result", outputs.append_result)):
        if value is not None:
            for field in value.__struct_fields__:
                if field.endswith("ErrorCode"):
                    found[f"{prefix}.{field}"] = errors.name_of(getattr(value, field))
    return found


def event_text(event: Event) -> str:
    kind = type(event)
    if kind is Request:
        return f"request from {event.source}: {message_text(event.message)}"
    if kind is Response:
        return f"response from {event.source}: {message_text(event.message)}"
    if kind is Timer:
        return f"{event.kind.value} fires"
    if kind is ClientAppend:
        return f"client appends {event.value}"
    return kind.__name__.lower()


# -- probes: inputs the cluster never sends --------------------------------------------------
def admin_probes(system: KraftSystem, position: int, node: NodeState) -> list[Event]:
    """DescribeQuorum from an admin client; OffsetsForLeaderEpoch around the node's epoch."""
    me = system.cluster.ids[position]
    peer = next((n for n in system.cluster.ids if n != me), me)
    found: list[Event] = [Request(source=ADMIN_CLIENT, message=DescribeQuorumRequest())]
    for current in sorted({-1, max(node.epoch - 1, 0), node.epoch, node.epoch + 1}):
        for asked in sorted({0, node.epoch, node.log[-1].Epoch if node.log else 0}):
            found.append(Request(source=peer, message=OffsetsForLeaderEpochRequest(ReplicaId=peer, CurrentLeaderEpoch=current, LeaderEpoch=asked)))
    return found


def message_probes(envelope: Envelope, me: int, voters: tuple[int, ...], observers: tuple[int, ...]) -> list[Event]:
    """Variants of a message in flight that the cluster itself never produces.

    A request: delivered to a node it was not sent to; as another cluster's; as sent by a
    non-voter; naming another leader; an EndQuorumEpoch that does not prefer the receiver.
    A response to the node's own request: the answer of a node of another cluster.
    """
    message = envelope.message
    if envelope.request is not None:
        if envelope.destination != me:
            return []
        foreign = type(message)(ErrorCode=errors.INCONSISTENT_CLUSTER_ID)
        return [Response(source=envelope.source, message=foreign, request=envelope.request)]
    if envelope.source == me:
        return []
    replace = msgspec.structs.replace
    variants = [(envelope.source, message)] if envelope.destination != me else []
    if getattr(message, "ClusterId", None) is not None:
        variants.append((envelope.source, replace(message, ClusterId=OTHER_CLUSTER)))
    leader_field = "CandidateId" if type(message) is VoteRequest else ("LeaderId" if type(message) in (BeginQuorumEpochRequest, EndQuorumEpochRequest) else None)
    if leader_field:
        for other in (observers[:1] + tuple(v for v in voters if v not in (me, getattr(message, leader_field)))[:1]):
            variants.append((other, replace(message, **{leader_field: other})))
    if type(message) is EndQuorumEpochRequest and me in message.PreferredSuccessors:
        variants.append((envelope.source, replace(message, PreferredSuccessors=tuple(v for v in message.PreferredSuccessors if v != me))))
    return [Request(source=source, message=m) for source, m in variants]


# -- the coverage-guided search -------------------------------------------------------------
class Found(msgspec.Struct, frozen=True):
    """Where a cell was first met: the cluster state's fingerprint and the step taken from it."""

    state_fp: int
    key: tuple  # an explorer action key, or ("probe", position, event)


def search(system: KraftSystem, max_states: int) -> tuple[dict[str, Found], dict[int, tuple[int, tuple]], bool]:
    """Breadth-first, noting the first (shallowest) step reaching each cell.

    Returns the cells, each state's (parent fingerprint, action key), and whether the bounded
    state space was exhausted.
    """
    first: dict[str, Found] = {}
    parents: dict[int, tuple[int, tuple]] = {}
    step_cells: dict[tuple, tuple[str, ...]] = {}
    probed: set[tuple] = set()  # (position, node) and (position, node, message) already probed
    cluster = system.cluster
    frontier = []
    for state in system.initial_states():
        fp = system.fingerprint(state)
        parents[fp] = (fp, ())
        frontier.append((fp, state))

    def note(found: tuple[str, ...], where: Found) -> None:
        for cell in found:
            if cell not in first:
                first[cell] = where

    while frontier and len(parents) < max_states:
        level = []
        for fp, state in frontier:
            for position in range(system.size):
                node_id = state[position]
                node = system.nodes.values[node_id]
                config = cluster.node_configs[position]
                candidates = []
                if (position, node_id) not in probed:
                    probed.add((position, node_id))
                    candidates = admin_probes(system, position, node)
                for message_id in set(state[system.size + 1 :]):
                    if (position, node_id, message_id) not in probed:
                        probed.add((position, node_id, message_id))
                        envelope = system.messages.values[message_id]
                        candidates += message_probes(envelope, cluster.ids[position], cluster.config.voters, cluster.config.observers)
                for event in candidates:
                    note(cells(node, event, nodes.step(config, node, event)), Found(fp, ("probe", position, event)))
            for key, successor in system.successors(state):
                if key[0] != "drop":
                    action = system.action(key)
                    node, event = event_of(action)
                    position = cluster.index[node]
                    memo = (position, state[position], key)
                    found = step_cells.get(memo)
                    if found is None:
                        before = system.nodes.values[state[position]]
                        found = step_cells[memo] = cells(before, event, nodes.step(cluster.node_configs[position], before, event))
                    note(found, Found(fp, key))
                successor_fp = system.fingerprint(successor)
                if successor_fp not in parents:
                    parents[successor_fp] = (fp, key)
                    level.append((successor_fp, successor))
        frontier = level
    return first, parents, not frontier


def node_inputs(system: KraftSystem, parents: dict[int, tuple[int, tuple]], found: Found) -> tuple[int, list[Event]]:
    """The node that took a cell's step, and its inputs along the cluster path there."""
    keys = []
    fp = found.state_fp
    while parents[fp][0] != fp:
        fp, key = parents[fp]
        keys.append(key)
    keys.reverse()
    if found.key[0] == "probe":
        _, position, last = found.key
        node = system.cluster.ids[position]
    else:
        node, last = event_of(system.action(found.key))
    events = []
    for key in keys:
        action = system.action(key)
        if type(action) is not Drop:
            target, event = event_of(action)
            if target == node:
                events.append(event)
    return node, events + [last]


def walk_inputs(cluster: Cluster, seed: int, steps: int, deliver_bias: float = 0.7) -> dict[int, list[Event]]:
    """A seeded random cluster run, projected onto each node: its inputs, by node.

    Deliveries are favoured (as in `kraftcheck simulate`) so that runs make progress and reach
    deep states: elections won, records replicated, logs diverging and truncated.
    """
    rng = random.Random(seed)
    state = cluster.initial()
    inputs: dict[int, list[Event]] = {n: [] for n in cluster.ids}
    for _ in range(steps):
        actions = cluster.enabled(state)
        if not actions:
            break
        deliveries = [a for a in actions if type(a) is Deliver and not a.duplicate]
        action = rng.choice(deliveries) if deliveries and rng.random() < deliver_bias else rng.choice(actions)
        if type(action) is not Drop:
            node, event = event_of(action)
            inputs[node].append(event)
        state, _ = cluster.apply(state, action)
    return inputs


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def cluster_of(config: CheckConfig) -> TraceCluster:
    chosen = config.cluster()
    return TraceCluster(
        voters=chosen.voters, observers=chosen.observers, cluster_id=chosen.cluster_id, profile=chosen.profile, fetch_max_records=chosen.fetch_max_records
    )


def generate(
    configs: list[tuple[str, CheckConfig]], options: GenerateOptions, progress: Callable[[str], None] | None = None
) -> tuple[dict[str, Trace], Manifest]:
    """The corpus of one or more configurations: traces by file name, and the manifest.

    A cell met by an earlier configuration's search is not sought again in a later one.
    """
    corpus: dict[str, Trace] = {}
    coverage: list[CoverageRow] = []
    explored = []
    for name, config in configs:
        config = msgspec.structs.replace(config, symmetry=False)  # paths must be real, not renamed
        system = system_for(config)
        cluster = cluster_of(config)
        first, parents, complete = search(system, options.max_states)
        explored.append(Explored(config=name, bounds=config, states=len(parents), complete=complete, cells=len(first)))
        known = {row.cell for row in coverage}
        by_inputs: dict[tuple[int, bytes], list[str]] = {}
        chosen: dict[tuple[int, bytes], list[Event]] = {}
        for cell in sorted(set(first) - known):
            node, inputs = node_inputs(system, parents, first[cell])
            identity = (node, msgspec.msgpack.encode(inputs))
            by_inputs.setdefault(identity, []).append(cell)
            chosen[identity] = inputs
        ordered = sorted(by_inputs, key=lambda k: (len(chosen[k]), by_inputs[k][0]))
        for number, identity in enumerate(ordered, start=1):
            covers = tuple(by_inputs[identity])
            file_name = f"{name}-cell-{number:04d}-{slug(covers[0])}.jsonl"
            built = build_trace(file_name.removesuffix(".jsonl"), cluster, identity[0], chosen[identity], f"{name}: shortest path to its cells", covers)
            reached = set(cells_of_step(cluster, identity[0], built))
            missing = [c for c in covers if c not in reached]
            if missing:
                raise AssertionError(f"{file_name}: projected trace does not reproduce {missing[0]}")
            corpus[file_name] = built
            coverage.extend(CoverageRow(cell=c, trace=file_name, step=len(built.steps)) for c in covers)
        walk_cluster = Cluster(config.cluster(), config.faults())
        for index in range(options.walks):
            seed = options.seed + index
            for node, inputs in walk_inputs(walk_cluster, seed, options.walk_steps).items():
                if inputs:
                    file_name = f"{name}-walk-{seed:04d}-node{node}.jsonl"
                    origin = f"{name}: random walk, seed {seed}, {options.walk_steps} cluster steps, node {node}'s inputs"
                    corpus[file_name] = build_trace(file_name.removesuffix(".jsonl"), cluster, node, inputs, origin)
        if progress:
            progress(f"{name}: searched {len(parents):,} cluster states, {len(first):,} coverage cells ({len(ordered)} new traces), {options.walks} walks")
    rules: dict[str, int] = {}
    for built in corpus.values():
        for step in built.steps:
            for rule in step.rules:
                rules[rule] = rules.get(rule, 0) + 1
    files = {file_name: traces.content_hash(traces.to_jsonl(built)) for file_name, built in sorted(corpus.items())}
    manifest = Manifest(
        kind="kraftcheck-corpus",
        format_version=traces.FORMAT_VERSION,
        options=options,
        searches=tuple(explored),
        traces=len(corpus),
        steps=sum(len(t.steps) for t in corpus.values()),
        cells=len(coverage),
        rules=dict(sorted(rules.items())),
        coverage=tuple(sorted(coverage, key=lambda row: row.cell)),
        files=files,
        content_hash=traces.content_hash("".join(f"{k} {v}\n" for k, v in files.items()).encode()),
    )
    return corpus, manifest


def cells_of_step(cluster: TraceCluster, node: int, built: Trace) -> tuple[str, ...]:
    """The cells a trace's last step covers, recomputed by stepping the reference model."""
    config = cluster.config().node(node)
    state = start_state(config, Persisted())
    for step in built.steps[:-1]:
        state = nodes.step(config, state, step.input).state
    last = built.steps[-1].input
    return cells(state, last, nodes.step(config, state, last))


def write_corpus(out: Path, corpus: dict[str, Trace], manifest: Manifest) -> None:
    """Replace `out` with the corpus in one move, so a failed run leaves the old one whole."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        for file_name, built in corpus.items():
            (staging / file_name).write_bytes(traces.to_jsonl(built))
        (staging / MANIFEST).write_bytes(msgspec.json.format(msgspec.json.encode(manifest), indent=1) + b"\n")
        if out.is_dir():  # files other than traces (a README beside them) are kept
            for extra in out.iterdir():
                if extra.is_file() and extra.suffix not in (".jsonl", ".msgpack") and extra.name != MANIFEST:
                    shutil.copy2(extra, staging / extra.name)
        retired = out.with_name(f".{out.name}.old")
        if out.exists():
            if retired.exists():
                shutil.rmtree(retired)
            out.rename(retired)
        staging.rename(out)
        if retired.exists():
            shutil.rmtree(retired)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
