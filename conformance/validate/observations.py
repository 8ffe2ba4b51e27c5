"""What a Kafka node's own log says it did, as observations in kraftcheck's vocabulary.

Read from unmodified logs: org.apache.kafka.raft.QuorumState's transitions (INFO) and
KafkaRaftClient's TRACE lines: every message received and sent ("Received inbound message",
"Sent response ... to inbound request ...", "Sent outbound request"), the leader's appends and
the follower's log end after each append. `kraftcheck cluster` writes its nodes' logs at those
levels (adapters/kafka_server.LOGGING); any deployment logging the same lines is read alike.

Each message is read into the model's message (model/messages.py) as the Kafka adapter reads the
real client's (adapters/kafka/.../Messages.java): the single partition's fields flattened. What
the model has no message for (UpdateRaftVoter, AddRaftVoter, ...) is an `Outside` observation,
counted and shown; a raft line of these kinds that cannot be read is `Unreadable`, never dropped.
"""

import datetime
import functools
import re
from collections.abc import Iterable

import msgspec

from conformance.cluster import server_log
from conformance.validate.java_text import JavaTextError, read_value
from model.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)

_LINE = re.compile(r"^(?P<wall>\S+) \[[^\]]*\] (?P<level>[A-Z]+) (?P<logger>\S+) - \[RaftManager id=(?P<node>\d+)\] (?P<text>.*)$")
_OFFSET_AND_EPOCH = r"OffsetAndEpoch[\[(]offset=(\d+), epoch=(\d+)[\])]"
_APPENDED = re.compile(r"Leader appended records at base offset (\d+), new end offset is " + _OFFSET_AND_EPOCH)
_REPLICATED = re.compile(r"Follower end offset updated to " + _OFFSET_AND_EPOCH + " after append")
_VOTERS = re.compile(r"voters=\[([\d, ]*)\]")
_FETCH_TIMEOUT = re.compile(r"FollowerState\(fetchTimeoutMs=(\d+)")
_PEER_IDS = re.compile(r"\(id: (-?\d+)")
_RECEIVED, _ANSWERED, _SENT = "Received inbound message ", "Sent response ", "Sent outbound request: "
_TO_REQUEST = " to inbound request "
WIRE_ERRORS = (7, 8, 13)  # REQUEST_TIMED_OUT, BROKER_NOT_AVAILABLE, NETWORK_EXCEPTION: a response the sender's own network client made up


class Started(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The node (re)started: the first transition of a process, "from null"."""

    line: int
    wall: float
    view: server_log.Transition


class Entered(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A logged transition: the role, epoch, leader and vote the node now has."""

    line: int
    wall: float
    view: server_log.Transition


class Received(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A request from another node (or, source -1, from a client: DescribeQuorum)."""

    line: int
    wall: float
    source: int
    correlation: int
    message: object


class Answered(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The node's response to a request it received (`request`, as it came)."""

    line: int
    wall: float
    destination: int
    correlation: int
    message: object
    request: object


class Sent(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A request the node sent."""

    line: int
    wall: float
    destination: int
    correlation: int
    message: object


class Replied(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A response to one of the node's requests; `wire`: made up by its own network client
    (a timeout, a lost connection), not sent by the peer."""

    line: int
    wall: float
    source: int
    correlation: int
    message: object
    wire: bool


class Appended(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The leader appended offsets base to end - 1 in `epoch`."""

    line: int
    wall: float
    base: int
    end: int
    epoch: int


class Replicated(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """After appending what a Fetch brought, the follower's log ends at `end`, its last epoch `epoch`."""

    line: int
    wall: float
    end: int
    epoch: int


class Outside(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A message of an RPC the model does not have (KIP-853's UpdateRaftVoter, ...)."""

    line: int
    wall: float
    correlation: int
    what: str


Observation = Started | Entered | Received | Answered | Sent | Replied | Appended | Replicated | Outside


class Unreadable(msgspec.Struct, frozen=True, kw_only=True):
    line: int
    text: str
    why: str


class NodeLog(msgspec.Struct, frozen=True, kw_only=True):
    """One node's observations, in the order its log has them, and the lines it could not read."""

    node: int
    observations: tuple[Observation, ...]
    unreadable: tuple[Unreadable, ...]
    cluster_id: str | None
    fetch_timeout_ms: int | None  # quorum.fetch.timeout.ms, as a FollowerState it logged says
    voters: tuple[int, ...]  # the voter set its first transition names


def _integer(fields: dict, name: str, default: int = 0) -> int:
    value = fields.get(name)
    return default if value is None or value == "null" else int(value)


def _partition(data: dict, topics: str = "topics") -> dict:
    """The single partition of a KRaft message (an empty dict where it carries none: the
    defaults of Kafka's PartitionData, as its error responses leave them)."""
    for topic in data.get(topics) or ():
        for partition in topic.get("partitions") or ():
            return partition
    return {}


def _cluster_id(data: dict) -> str | None:
    value = data.get("clusterId")
    return None if value in (None, "null") else value


def _vote_request(data: dict) -> VoteRequest:
    partition = _partition(data)
    epoch = partition.get("candidateEpoch", partition.get("replicaEpoch"))  # renamed by KIP-853 (3.9)
    candidate = partition.get("candidateId", partition.get("replicaId"))
    return VoteRequest(
        ClusterId=_cluster_id(data),
        CandidateEpoch=int(epoch),
        CandidateId=int(candidate),
        LastOffsetEpoch=_integer(partition, "lastOffsetEpoch"),
        LastOffset=_integer(partition, "lastOffset"),
        PreVote=partition.get("preVote") == "true",
    )


def _answer_fields(data: dict) -> dict:
    partition = _partition(data)
    return {
        "ErrorCode": _integer(data, "errorCode"),
        "PartitionErrorCode": _integer(partition, "errorCode"),
        "LeaderId": _integer(partition, "leaderId"),
        "LeaderEpoch": _integer(partition, "leaderEpoch"),
    }


def _successors(partition: dict) -> tuple[int, ...]:
    if "preferredCandidates" in partition:  # KIP-853 (3.9): ReplicaInfo(candidateId=..., candidateDirectoryId=...)
        return tuple(int(candidate["candidateId"]) for candidate in partition["preferredCandidates"])
    return tuple(int(successor) for successor in partition.get("preferredSuccessors") or ())


def _fetch_request(data: dict) -> FetchRequest:
    partition = _partition(data)
    replica = _integer(data, "replicaId", -1)
    if replica < 0 and isinstance(data.get("replicaState"), dict):  # KIP-903 (v15) moved it
        replica = _integer(data["replicaState"], "replicaId", -1)
    high_watermark = partition.get("highWatermark")
    wait = _integer(data, "maxWaitMs")
    return FetchRequest(
        ClusterId=_cluster_id(data),
        ReplicaId=replica,
        MaxWaitMs=wait if wait else msgspec.UNSET,
        CurrentLeaderEpoch=_integer(partition, "currentLeaderEpoch", -1),
        FetchOffset=_integer(partition, "fetchOffset"),
        LastFetchedEpoch=_integer(partition, "lastFetchedEpoch", -1),
        HighWatermark=msgspec.UNSET if high_watermark is None else int(high_watermark),
    )


class RecordsSeen(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A Fetch answer's records as the log shows them: only their size in bytes."""

    size: int


def _fetch_response(data: dict) -> FetchResponse:
    partition = _partition(data, "responses")
    diverging = partition.get("divergingEpoch") or {}
    leader = partition.get("currentLeader") or {}
    records = partition.get("records")
    size = _integer(records, "size") if isinstance(records, dict) else 0
    return FetchResponse(
        ErrorCode=_integer(data, "errorCode"),
        PartitionErrorCode=_integer(partition, "errorCode"),
        HighWatermark=_integer(partition, "highWatermark"),
        DivergingEpoch=EpochEndOffset(Epoch=_integer(diverging, "epoch", -1), EndOffset=_integer(diverging, "endOffset", -1)),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=_integer(leader, "leaderId", -1), LeaderEpoch=_integer(leader, "leaderEpoch", -1)),
        Records=RecordsSeen(size=size) if size else (),
    )


def _describe_response(data: dict) -> DescribeQuorumResponse:
    partition = _partition(data)

    def replicas(name: str) -> tuple:
        return tuple(ReplicaState(ReplicaId=int(r["replicaId"]), LogEndOffset=int(r["logEndOffset"])) for r in partition.get(name) or ())

    return DescribeQuorumResponse(
        **_answer_fields(data), HighWatermark=_integer(partition, "highWatermark"), CurrentVoters=replicas("currentVoters"), Observers=replicas("observers")
    )


READERS = {
    "VoteRequestData": _vote_request,
    "VoteResponseData": lambda data: VoteResponse(**_answer_fields(data), VoteGranted=_partition(data).get("voteGranted") == "true"),
    "BeginQuorumEpochRequestData": lambda data: BeginQuorumEpochRequest(
        ClusterId=_cluster_id(data), LeaderId=_integer(_partition(data), "leaderId"), LeaderEpoch=_integer(_partition(data), "leaderEpoch")
    ),
    "BeginQuorumEpochResponseData": lambda data: BeginQuorumEpochResponse(**_answer_fields(data)),
    "EndQuorumEpochRequestData": lambda data: EndQuorumEpochRequest(
        ClusterId=_cluster_id(data),
        ReplicaId=_integer(_partition(data), "leaderId"),
        LeaderId=_integer(_partition(data), "leaderId"),
        LeaderEpoch=_integer(_partition(data), "leaderEpoch"),
        PreferredSuccessors=_successors(_partition(data)),
    ),
    "EndQuorumEpochResponseData": lambda data: EndQuorumEpochResponse(**_answer_fields(data)),
    "FetchRequestData": _fetch_request,
    "FetchResponseData": _fetch_response,
    "DescribeQuorumRequestData": lambda data: DescribeQuorumRequest(),
    "DescribeQuorumResponseData": _describe_response,
}


def message(data: dict) -> object | None:
    """The model's message for a Kafka message's toString, None for an RPC the model lacks."""
    reader = READERS.get(data.get("_type", ""))
    return reader(data) if reader else None


def request_source(request: object) -> int:
    """Who sent a request: KafkaRaftClient's log of an inbound request does not say (3.9 on), its data does."""
    if isinstance(request, VoteRequest):
        return request.CandidateId
    if isinstance(request, (BeginQuorumEpochRequest, EndQuorumEpochRequest)):
        return request.LeaderId
    if isinstance(request, FetchRequest):
        return request.ReplicaId
    return -1  # DescribeQuorum: an admin client


def _peer(text: str, field: str) -> int:
    """The other node of a sent request or a received response: 3.7, 3.8 write `destinationId=2`
    or `sourceId=2`; 3.9 on the node itself, `127.0.0.1:9093 (id: 2 rack: null)`, last on the line."""
    found = re.search(field + r"=(-?\d+)", text) or (_PEER_IDS.findall(text) or [None])[-1]
    if found is None:
        raise JavaTextError(f"no {field} and no node id on the line")
    return int(found[1] if isinstance(found, re.Match) else found)


def _wall(text: str) -> float:
    """Seconds since the Unix epoch of a log line's time (2026-12-02T11:34:55.103+0000)."""
    second, dot, rest = text.partition(".")
    return _second(second, rest[3:]) + int(rest[:3]) / 1000 if dot and rest[:3].isdigit() else datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


@functools.lru_cache(maxsize=1024)
def _second(second: str, zone: str) -> float:
    return datetime.datetime.strptime(second + zone, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def _outside(kind: str, data: object) -> Outside:
    name = data.get("_type", "?") if isinstance(data, dict) else "?"
    return Outside(line=0, wall=0.0, correlation=0, what=f"{kind} {name.removesuffix('Data')}")


_CORRELATION = re.compile(r"correlationId=(\d+)")
_VARYING = re.compile(r"(correlationId|createdTimeMs)=\d+")


def _message_line(line: int, wall: float, text: str) -> Observation | None:
    """A Received/Answered/Sent/Replied observation of a TRACE line of KafkaRaftClient; None if it is none of these."""
    if not text.startswith((_RECEIVED, _ANSWERED, _SENT)):
        return None
    found = _CORRELATION.search(text)
    correlation = int(found[1]) if found else 0
    # The same message recurs (an idle follower's Fetch, every half second): read once, its correlation put back.
    return msgspec.structs.replace(_read_message(_VARYING.sub(r"\1=0", text)), line=line, wall=wall, correlation=correlation)


def clear_caches() -> None:
    """Forget the messages read (a benchmark reads every line afresh)."""
    _read_message.cache_clear()


@functools.lru_cache(maxsize=4096)
def _read_message(text: str) -> Observation:
    if text.startswith(_ANSWERED):
        answer, to, asked = text.partition(_TO_REQUEST)
        if not to:
            raise JavaTextError("no inbound request after the response")
        data, question = _data(answer), message(_data(asked))
        found = message(data)
        if found is None or question is None:
            return _outside("answered", data)
        return Answered(line=0, wall=0.0, destination=request_source(question), correlation=0, message=found, request=question)
    data = _data(text)
    found = message(data)
    if text.startswith(_SENT):
        if found is None:
            return _outside("sent", data)
        return Sent(line=0, wall=0.0, destination=_peer(text, "destinationId"), correlation=0, message=found)
    if found is None:
        return _outside("received", data)
    if text.startswith(_RECEIVED + "InboundResponse("):
        wire = _integer(data, "errorCode") in WIRE_ERRORS
        return Replied(line=0, wall=0.0, source=_peer(text, "sourceId"), correlation=0, message=found, wire=wire)
    return Received(line=0, wall=0.0, source=request_source(found), correlation=0, message=found)


def _data(text: str) -> dict:
    """The message a wrapper's toString carries (InboundRequest(..., data=VoteRequestData(...), ...))."""
    at = text.find("data=")
    data = read_value(text[at + 5 :]) if at >= 0 else None
    if not isinstance(data, dict):
        raise JavaTextError("no message data")
    return data


def _observation(number: int, found: re.Match) -> Observation | None:
    text, wall = found["text"], _wall(found["wall"])
    if text.startswith("Completed transition to "):
        view = server_log.read(found.string).transitions
        if not view:
            raise JavaTextError("a transition none of the release's states reads")
        kind = Started if text.endswith(" from null") else Entered
        return kind(line=number, wall=wall, view=view[0])
    if found["level"] != "TRACE":
        return None
    appended = _APPENDED.match(text)
    if appended:
        return Appended(line=number, wall=wall, base=int(appended[1]), end=int(appended[2]), epoch=int(appended[3]))
    replicated = _REPLICATED.match(text)
    if replicated:
        return Replicated(line=number, wall=wall, end=int(replicated[1]), epoch=int(replicated[2]))
    return _message_line(number, wall, text)


def read(node: int, lines: Iterable[str]) -> NodeLog:
    """One node's log (its runs one after another, as `kraftcheck cluster` keeps it)."""
    observations: list[Observation] = []
    unreadable: list[Unreadable] = []
    cluster_id = fetch_timeout = None
    voters: tuple[int, ...] = ()
    for number, line in enumerate(lines, 1):
        if "[RaftManager id=" not in line:
            continue
        found = _LINE.match(line.rstrip("\n"))
        if not found or int(found["node"]) != node:
            continue
        try:
            observation = _observation(number, found)
        except (JavaTextError, ValueError, KeyError, TypeError, AttributeError) as error:
            unreadable.append(Unreadable(line=number, text=line.rstrip("\n")[:400], why=str(error) or type(error).__name__))
            continue
        if isinstance(observation, (Started, Entered)) and fetch_timeout is None:
            timeout = _FETCH_TIMEOUT.search(found["text"])
            fetch_timeout = int(timeout[1]) if timeout else None
        if isinstance(observation, (Started, Entered)) and not voters:
            named = _VOTERS.search(found["text"])
            voters = tuple(int(v) for v in named[1].split(",") if v.strip()) if named else ()
        if observation is not None:
            observations.append(observation)
            message_seen = getattr(observation, "message", None)
            cluster_id = cluster_id or getattr(message_seen, "ClusterId", None)
    return NodeLog(node=node, observations=tuple(observations), unreadable=tuple(unreadable), cluster_id=cluster_id, fetch_timeout_ms=fetch_timeout, voters=voters)
