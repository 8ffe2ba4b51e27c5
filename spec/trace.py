"""Conformance traces: one node's inputs and the outputs the specification expects, step by step.

A trace is node-level, so any implementation can replay it without a cluster: the header says
which cluster the node belongs to (a KRaft quorum, or an ISR-replicated partition), who it is
and what it starts from; each step gives one input (a model event, stored as it is) and what
the node must answer. Two encodings of the
same structures: JSON Lines (line 1 the header, one step per line after it) for people and
diffs, MessagePack (one `Trace` object) for volume. spec/trace-format.md documents the format
and spec/trace.schema.json is its JSON Schema (`kraftcheck traces schema` prints it).
"""

import hashlib
import inspect
import json
import os
import tempfile
from pathlib import Path

import msgspec

from model.config import ClusterConfig, ConfigError
from model.events import Answer, AppendResult, Event, Request, Send, Timer, TimerKind
from model.isr.config import PartitionConfig
from model.isr.events import AlterIsr, IsrEvent
from model.messages import DescribeQuorumRequest, FetchRequest, Message, OffsetsForLeaderEpochRequest, Record

FORMAT_VERSION = 1
KIND = "kraftcheck-trace"
INTEGERS = range(-(2**63), 2**64)
"""The integers a trace can hold: MessagePack's, signed and unsigned 64-bit (a trace holding
another is refused as it is read)."""

CAPABILITIES = {
    "OffsetsForLeaderEpoch": "answers KIP-101's OffsetsForLeaderEpoch (KRaft reconciles logs through Fetch and DivergingEpoch instead)",
    "DescribeQuorum": "answers KIP-595's DescribeQuorum (the tooling API)",
    "FetchRecordLimit": "as leader, limits the records of one Fetch response to the trace's fetch_max_records (as Kafka's MaxBytes limits bytes)",
    "EarlyRequestTimeout": "times a request out while the node's election, fetch or check-quorum timer runs (a request timeout well "
    "below the election and fetch timeouts; with Kafka's defaults, 2,000 ms against 1,000 to 2,000 ms, those expire first)",
    "LateRequestTimeout": "fires the node's election, fetch or check-quorum timer while a request it sent is in flight, neither "
    "answered nor timed out (a request timeout longer than what is left of that timer; with a request timeout of 100 ms the "
    "request times out, and goes again, first). Declined at the step, not declared at start: it depends on the node's timers",
}
"""Optional capabilities of a KRaft node, by name: a trace that needs one is not applicable to
an implementation that declares it lacks it (`required_capabilities`)."""

_REQUESTS_NEEDING = {OffsetsForLeaderEpochRequest: "OffsetsForLeaderEpoch", DescribeQuorumRequest: "DescribeQuorum"}


class TraceError(ValueError):
    """A trace that cannot be read; the message names the file and the line."""


class TraceCluster(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The cluster the node under test belongs to, and the model profile the trace follows."""

    voters: tuple[int, ...]
    observers: tuple[int, ...] = ()
    cluster_id: str | None = "kraft-cluster"
    profile: str = "kip595"
    fetch_max_records: int = 0

    def config(self) -> ClusterConfig:
        return ClusterConfig(
            voters=self.voters, observers=self.observers, cluster_id=self.cluster_id, profile=self.profile, fetch_max_records=self.fetch_max_records
        )


class TracePartition(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ISR-replicated partition (KIP-101) the replica under test belongs to."""

    replicas: tuple[int, ...]  # the first is the leader of epoch 0
    min_isr: int = 1
    truncation: str = "epoch"

    def config(self) -> PartitionConfig:
        return PartitionConfig(replicas=self.replicas, min_isr=self.min_isr, truncation=self.truncation)


class Persisted(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What survives a restart: the quorum-state file (QSTATE-1) and the log (LOG-3) of a KRaft
    node; the log and the high-watermark checkpoint of an ISR replica.

    A node whose persisted state is empty starts as a freshly bootstrapped one, without
    outputs; any other node starts shut down, and its trace begins with a restart. `down` starts
    a node shut down with nothing persisted, so that what it sends as it starts (BOOT-1) is its
    first step's output: every KRaft trace of the shipped corpora with nothing persisted does.
    """

    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    log: tuple[Record, ...] = ()
    high_watermark: int = 0  # ISR replicas only
    down: bool = False

    @property
    def empty(self) -> bool:
        return self == Persisted()


class Observed(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What an adapter may be able to observe of a node (compared only where it can).

    adapters/node_models.py says how each system's node state maps onto it.
    """

    role: str  # KRaft: unattached, voted, follower, prospective, candidate, leader, resigned, observer, down; ISR: leader, follower, down
    epoch: int
    leader_id: int
    voted_id: int  # -1 for an ISR replica
    log_end_offset: int
    high_watermark: int
    log: tuple[tuple[int, int], ...]  # (offset, epoch) per record
    isr: tuple[int, ...] | None = None  # an ISR leader's in-sync replicas (empty for a follower); None for KRaft


class Outputs(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """What a node does in answer to one input: the one thing every adapter reports per step.

    `response` answers a request input; `sends` are the requests the node sends (compared as a
    multiset, in any order); `append_result` answers a client append; `shutdown` says the node
    stopped on a fatal error; `alter_isr` is the ISR an ISR leader asks the controller to record;
    `answers` are responses to requests of earlier steps, sent now (a held Fetch, FETCH-REQ-7),
    each naming the request it answers, compared as a multiset. `timers` are the timers the
    step arms for a duration the specification fixes (END-REQ-6's successor backoff), by kind,
    in ms: what the node reports is the time left on each timer it runs, compared for those
    kinds only, and only where it reports any (None: it cannot tell). A timer armed for a random
    time (an election timer) is the implementation's own.
    """

    response: Message | None = None
    sends: tuple[Send, ...] = ()
    answers: tuple[Answer, ...] = ()
    append_result: AppendResult | None = None
    shutdown: bool = False
    alter_isr: AlterIsr | None = None
    timers: tuple["TimerLeft", ...] | None = None


class TimerLeft(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One of a node's timers and the time left on it, in ms (Outputs.timers), sorted by kind."""

    kind: str
    ms: int


def timers_left(table: dict[str, int]) -> tuple[TimerLeft, ...] | None:
    """Outputs.timers from a table kind -> ms (None for an empty one)."""
    return tuple(TimerLeft(kind=kind, ms=ms) for kind, ms in sorted(table.items())) or None


Input = Event | IsrEvent
"""A step's input: a KRaft node's events, or an ISR replica's (model/isr/events.py)."""


class Alternative(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Another outcome the specification allows at a step (model/choices.py): the alternatives
    taken at its choice points, what the node then does, and its state after."""

    choices: dict[str, str]  # choice point (a rule ID) -> the alternative taken
    expect: Outputs
    state: Observed | None = None


class Step(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    step: int  # 1-based
    input: Input
    expect: Outputs  # what the node does under the model's default reading
    errors: dict[str, str] = {}  # the expected error codes by name, for readers: field -> Kafka name
    state: Observed | None = None  # the node's observable state after the step
    rules: tuple[str, ...] = ()  # the rule IDs the step exercises
    note: str = ""  # the step in words
    allowed: tuple[Alternative, ...] = ()  # the other outcomes the specification allows here, from the same state


class Header(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    kind: str
    format_version: int
    name: str
    cluster: TraceCluster | None = None  # a KRaft node's quorum, or
    partition: TracePartition | None = None  # an ISR replica's partition: exactly one of the two
    node: int  # the node under test
    steps: int  # how many steps follow (a truncated file is detected)
    initial: Persisted = Persisted()
    origin: str = ""  # how the trace was made
    covers: tuple[str, ...] = ()  # the coverage cells it was kept for


    @property
    def setting(self) -> TraceCluster | TracePartition:
        """What the node belongs to: its KRaft cluster or its ISR partition."""
        return self.cluster if self.cluster is not None else self.partition

    @property
    def system(self) -> str:
        return "kraft" if self.cluster is not None else "isr"


class Trace(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    header: Header
    steps: tuple[Step, ...]


_json_encoder = msgspec.json.Encoder(order="deterministic")
_msgpack_encoder = msgspec.msgpack.Encoder(order="deterministic")
_header_decoder = msgspec.json.Decoder(Header)
_step_decoder = msgspec.json.Decoder(Step)
_msgpack_decoder = msgspec.msgpack.Decoder(Trace)


def to_jsonl(trace: Trace) -> bytes:
    lines = [_json_encoder.encode(trace.header)] + [_json_encoder.encode(step) for step in trace.steps]
    return b"\n".join(lines) + b"\n"


def to_msgpack(trace: Trace) -> bytes:
    return _msgpack_encoder.encode(trace)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def creation_mode(directory: bool = False) -> int:
    """The mode a new file or directory gets from the user's umask (mkstemp and mkdtemp make
    private ones, which would hide a corpus or a report from the rest of a team)."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """The whole file or nothing: a temporary file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            os.fchmod(out.fileno(), creation_mode())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def write(path: Path, trace: Trace) -> None:
    """Write a trace, as MessagePack if the name ends in .msgpack, else as JSON Lines."""
    write_bytes_atomically(path, to_msgpack(trace) if path.suffix == ".msgpack" else to_jsonl(trace))


def read(path: Path) -> Trace:
    """Read and validate a trace file; every problem is a TraceError naming the file and line."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error.strerror}") from None
    return parse(path, data)


def parse(path: Path, data: bytes) -> Trace:
    """Validate a trace file's bytes read elsewhere (`path` names it in errors and picks the format)."""
    return _untrusted(path, lambda: _decode(path, data))


def read_header(path: Path) -> Header:
    """Only the header of a trace (for choosing traces without reading them whole)."""
    if path.suffix == ".msgpack":
        return read(path).header
    try:
        with path.open("rb") as handle:
            first = handle.readline()
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error.strerror}") from None
    return _untrusted(path, lambda: _header(path, 1, first, _header_decoder.decode))


def _untrusted(path: Path, decode):
    """The one boundary where a trace file's bytes become values: whatever goes wrong in there
    (nesting too deep, invalid UTF-8, integers too large) is a TraceError naming the file."""
    try:
        return decode()
    except TraceError:
        raise
    except Exception as error:  # noqa: BLE001 - untrusted bytes may fail in any way; none may end the run
        raise TraceError(f"{path}: not a readable trace: {type(error).__name__}: {error}") from None


def _decode(path: Path, data: bytes) -> Trace:
    trace = _read_msgpack(path, data) if path.suffix == ".msgpack" else _read_jsonl(path, data)
    _check_steps(path, trace)
    check_integers(trace, str(path))
    return trace


def check_integers(trace: Trace, where: str) -> None:
    """Every integer is in INTEGERS: replay and shortening encode the trace as MessagePack."""
    try:
        _msgpack_encoder.encode(trace)
    except OverflowError:
        raise TraceError(f"{where}: an integer is out of range (beyond 64 bits)") from None


def _read_jsonl(path: Path, data: bytes) -> Trace:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        raise TraceError(f"{path}:{len(lines)}: the last line does not end in a newline (truncated file?)")
    if not lines:
        raise TraceError(f"{path}:1: empty file, expected a trace header")
    header = _header(path, 1, lines[0], _header_decoder.decode)
    steps = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            steps.append(_step_decoder.decode(line))
        except (ValueError, RecursionError) as error:  # msgspec's errors, invalid UTF-8, nesting too deep
            raise TraceError(f"{path}:{number}: invalid step: {_reason(error)}") from None
    return Trace(header=header, steps=tuple(steps))


def _reason(error: Exception) -> str:
    return "nested too deeply" if isinstance(error, RecursionError) else str(error)


def _read_msgpack(path: Path, data: bytes) -> Trace:
    try:
        raw = msgspec.msgpack.decode(data)
    except msgspec.DecodeError as error:
        raise TraceError(f"{path}: invalid MessagePack: {error}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("header"), dict):
        raise TraceError(f"{path}: not a kraftcheck trace (no header object)")
    _check_version(path, 1, raw["header"])
    try:
        return _msgpack_decoder.decode(data)
    except msgspec.ValidationError as error:
        raise TraceError(f"{path}: invalid trace: {error}") from None


def _header(path: Path, line: int, raw_line: bytes, decode) -> Header:
    try:
        raw = json.loads(raw_line)
    except (ValueError, RecursionError) as error:
        raise TraceError(f"{path}:{line}: invalid JSON in the header: {_reason(error)}") from None
    if not isinstance(raw, dict):
        raise TraceError(f"{path}:{line}: the header must be a JSON object")
    _check_version(path, line, raw)
    try:
        return decode(raw_line)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise TraceError(f"{path}:{line}: invalid header: {error}") from None


def _check_version(path: Path, line: int, raw: dict) -> None:
    if raw.get("kind") != KIND:
        raise TraceError(f"{path}:{line}: not a kraftcheck trace (kind {raw.get('kind')!r}, expected {KIND!r})")
    if raw.get("format_version") != FORMAT_VERSION:
        raise TraceError(f"{path}:{line}: unknown trace format version {raw.get('format_version')!r}; this kraftcheck reads version {FORMAT_VERSION}")


def _check_steps(path: Path, trace: Trace) -> None:
    header = trace.header
    if len(trace.steps) != header.steps:
        raise TraceError(f"{path}: the header promises {header.steps} steps, the file has {len(trace.steps)} (truncated?)")
    for position, step in enumerate(trace.steps, start=1):
        if step.step != position:
            raise TraceError(f"{path}:{position + 1}: step numbered {step.step}, expected {position}")
    if (header.cluster is None) == (header.partition is None):
        raise TraceError(f"{path}:1: the header needs exactly one of cluster (KRaft) and partition (ISR)")
    try:
        members = header.cluster.config().nodes if header.cluster is not None else header.partition.config().replicas
    except ConfigError as error:
        raise TraceError(f"{path}:1: invalid {'cluster' if header.cluster is not None else 'partition'}: {error}") from None
    if header.node not in members:
        raise TraceError(f"{path}:1: node {header.node} is not a member of the {'cluster' if header.cluster is not None else 'partition'} {list(members)}")


def schema() -> dict:
    """The JSON Schema of the JSON Lines encoding: the header line, then step lines."""
    (header, step), components = msgspec.json.schema_components([Header, Step], ref_template="#/$defs/{name}")
    for component in components.values():  # docstrings as msgspec 0.23 gives them, whatever the version
        if "description" in component:
            component["description"] = inspect.cleandoc(component["description"])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"kraftcheck conformance trace, format version {FORMAT_VERSION}",
        "description": "JSON Lines: line 1 is a Header, every following line a Step. See spec/trace-format.md.",
        "oneOf": [header, step],
        "$defs": components,
    }


def required_capabilities(trace: Trace) -> tuple[str, ...]:
    """The optional capabilities a KRaft trace needs: an OffsetsForLeaderEpoch or DescribeQuorum
    request among its inputs, a Fetch served under a record limit (fetch_max_records > 0), or a
    request timing out while the node's election or fetch timer runs (`_times_out_early`).
    LateRequestTimeout is never required in advance: whether a request is still in flight when a
    timer fires depends on the node's own timeouts, so a node declines that step instead.
    ISR replicas have none: OffsetsForLeaderEpoch is their truncation protocol (KIP-101)."""
    if trace.header.cluster is None:
        return ()
    kinds = {type(step.input.message) for step in trace.steps if type(step.input) is Request}
    needed = {_REQUESTS_NEEDING[kind] for kind in kinds if kind in _REQUESTS_NEEDING}
    if trace.header.cluster.fetch_max_records and FetchRequest in kinds:
        needed.add("FetchRecordLimit")
    if _times_out_early(trace):
        needed.add("EarlyRequestTimeout")
    return tuple(name for name in CAPABILITIES if name in needed)


_TIMED_ROLES = frozenset({"unattached", "voted", "prospective", "candidate", "resigned", "follower"})
"""The roles in which a voter's election timer (or, as follower, its fetch timer) runs."""


def _times_out_early(trace: Trace) -> bool:
    """Whether the trace has a request time out while another of the node's timers runs that a
    request timeout as long as the fetch timeout would let expire first (Kafka's defaults):

    - a request_timeout input while the node is a voter in one of _TIMED_ROLES or an observer that
      follows a leader (its fetch timer), as the step before left it (a voter that starts up with
      nothing persisted starts unattached);
    - a leader's second request_timeout with no majority of the voters fetching in between (its
      check-quorum timer, 1.5 fetch timeouts, is not reset)."""
    cluster, initial, node = trace.header.cluster, trace.header.initial, trace.header.node
    majority = len(cluster.voters) // 2 + 1
    role, leader = ("unattached" if node in cluster.voters and initial.empty and not initial.down else "down"), -1  # as the step before left the node
    timeouts, fetched = 0, set()  # a leader's request timeouts and the voters that fetched since its check-quorum timer last reset
    for step in trace.steps:
        event = step.input
        if role != "leader":
            timeouts, fetched = 0, set()
        if type(event) is Request and type(event.message) is FetchRequest and role == "leader" and event.source in cluster.voters:
            fetched.add(event.source)
            if len(fetched) + 1 >= majority:
                timeouts, fetched = 0, set()
        if type(event) is Timer:
            if event.kind == TimerKind.REQUEST_TIMEOUT:
                if role in _TIMED_ROLES or (role == "observer" and leader != -1):
                    return True
                timeouts += role == "leader"
                if timeouts > 1:
                    return True
            if event.kind == TimerKind.PROGRESS_TIMEOUT:
                timeouts, fetched = 0, set()
        if step.state is not None:
            role, leader = step.state.role, step.state.leader_id
    return False

