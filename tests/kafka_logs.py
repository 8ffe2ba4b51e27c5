"""Model runs written as Kafka 4.3 writes its logs, for testing `kraftcheck validate` on runs
whose every step is known: a random walk of the cluster model (one connection per pair of nodes,
so each pair's messages arrive in the order sent, or are lost), each node's inputs, transitions,
appends and outputs written as the QuorumState and KafkaRaftClient lines a real node writes.
A node may step with another step function (a mutant's) than the model's."""

import random
from collections import defaultdict, deque
from collections.abc import Callable
from pathlib import Path

import msgspec

from model import log as logs
from model import network
from model.choices import outcomes
from model.cluster import Bounds, Cluster, Deliver, Drop, counted, event_of, outgoing
from model.config import ClusterConfig
from model.events import Answer, ClientAppend, Request, Response, Restart, Send
from model.messages import (
    REQUEST_TYPES,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
    carried,
)
from model.node import step as reference_step
from model.state import NodeState, Role

TOPIC = "topicName='__cluster_metadata'"


def _cluster_id(message: object) -> str:
    return "null" if message.ClusterId is None else f"'{message.ClusterId}'"


def _answer(name: str, m: object, extra: str = "") -> str:
    return (f"{name}(errorCode={m.ErrorCode}, topics=[TopicData({TOPIC}, partitions=[PartitionData(partitionIndex=0, errorCode={m.PartitionErrorCode}, "
            f"leaderId={m.LeaderId}, leaderEpoch={m.LeaderEpoch}{extra})])])")  # fmt: skip


def message_text(m: object) -> str:
    """A model message as Kafka 4.3's generated class prints it."""
    if isinstance(m, VoteRequest):
        return (f"VoteRequestData(clusterId={_cluster_id(m)}, voterId=0, topics=[TopicData({TOPIC}, partitions=[PartitionData(partitionIndex=0, "
                f"replicaEpoch={m.CandidateEpoch}, replicaId={m.CandidateId}, lastOffsetEpoch={m.LastOffsetEpoch}, lastOffset={m.LastOffset}, "
                f"preVote={str(m.PreVote).lower()})])])")  # fmt: skip
    if isinstance(m, VoteResponse):
        return _answer("VoteResponseData", m, f", voteGranted={str(m.VoteGranted).lower()}")
    if isinstance(m, BeginQuorumEpochRequest):
        return f"BeginQuorumEpochRequestData(clusterId={_cluster_id(m)}, topics=[TopicData({TOPIC}, partitions=[PartitionData(partitionIndex=0, leaderId={m.LeaderId}, leaderEpoch={m.LeaderEpoch})])])"
    if isinstance(m, BeginQuorumEpochResponse):
        return _answer("BeginQuorumEpochResponseData", m)
    if isinstance(m, EndQuorumEpochRequest):
        candidates = ", ".join(f"ReplicaInfo(candidateId={c}, candidateDirectoryId=AAAAAAAAAAAAAAAAAAAAAA)" for c in m.PreferredSuccessors)
        return (f"EndQuorumEpochRequestData(clusterId={_cluster_id(m)}, topics=[TopicData({TOPIC}, partitions=[PartitionData(partitionIndex=0, "
                f"leaderId={m.LeaderId}, leaderEpoch={m.LeaderEpoch}, preferredCandidates=[{candidates}])])])")  # fmt: skip
    if isinstance(m, EndQuorumEpochResponse):
        return _answer("EndQuorumEpochResponseData", m)
    if isinstance(m, FetchRequest):
        watermark = "" if m.HighWatermark is msgspec.UNSET else f", highWatermark={m.HighWatermark}"
        return (f"FetchRequestData(clusterId={_cluster_id(m)}, replicaId=-1, replicaState=ReplicaState(replicaId={m.ReplicaId}, replicaEpoch=-1), "
                f"maxWaitMs={carried(m, 'MaxWaitMs')}, topics=[FetchTopic(topic='', partitions=[FetchPartition(partition=0, currentLeaderEpoch={m.CurrentLeaderEpoch}, "
                f"fetchOffset={m.FetchOffset}, lastFetchedEpoch={m.LastFetchedEpoch}{watermark})])])")  # fmt: skip
    if isinstance(m, FetchResponse):
        size = 60 * len(m.Records or ())
        return (f"FetchResponseData(errorCode={m.ErrorCode}, responses=[FetchableTopicResponse(topic='', partitions=[PartitionData(partitionIndex=0, "
                f"errorCode={m.PartitionErrorCode}, highWatermark={m.HighWatermark}, divergingEpoch=EpochEndOffset(epoch={m.DivergingEpoch.Epoch}, "
                f"endOffset={m.DivergingEpoch.EndOffset}), currentLeader=LeaderIdAndEpoch(leaderId={m.CurrentLeader.LeaderId}, leaderEpoch={m.CurrentLeader.LeaderEpoch}), "
                f"records=MemoryRecords(size={size}, buffer=java.nio.HeapByteBuffer[pos=0 lim={size} cap={size}]))])])")  # fmt: skip
    raise TypeError(f"no Kafka text for {type(m).__name__}")


def _optional_key(voted: int) -> str:
    return "Optional.empty" if voted == -1 else f"Optional[ReplicaKey(id={voted}, directoryId=<undefined>)]"


def state_text(node: int, state: NodeState, voters: tuple[int, ...]) -> str:
    """A node's state as Kafka 4.3's QuorumState prints it in a transition."""
    listed = "[" + ", ".join(map(str, voters)) + "]"
    leader = "OptionalInt.empty" if state.leader_id == -1 else f"OptionalInt[{state.leader_id}]"
    role = state.role
    if role == Role.UNATTACHED:
        return f"UnattachedState(epoch={state.epoch}, leaderId={leader}, votedKey={_optional_key(state.voted_id)}, voters={listed}, electionTimeoutMs=1000, highWatermark=Optional.empty)"
    if role == Role.FOLLOWER:
        return (f"FollowerState(fetchTimeoutMs=2000, epoch={state.epoch}, leader={state.leader_id}, leaderEndpoints=Endpoints(endpoints={{}}), "
                f"votedKey={_optional_key(state.voted_id)}, voters={listed}, highWatermark=Optional.empty, fetchingSnapshot=Optional.empty)")  # fmt: skip
    if role == Role.PROSPECTIVE:
        return f"ProspectiveState(epoch={state.epoch}, leaderId={leader}, votedKey={_optional_key(state.voted_id)}, electionTimeoutMs=1000, highWatermark=Optional.empty)"
    if role == Role.CANDIDATE:
        return f"CandidateState(localId={node}, localDirectoryId=AAAAAAAAAAAAAAAAAAAAAA, epoch={state.epoch}, electionTimeoutMs=1000)"
    if role == Role.LEADER:
        start = logs.epoch_start(state.log, state.epoch)
        return f"Leader(localVoterNode=VoterNode(voterKey=ReplicaKey(id={node}, directoryId=AAAAAAAAAAAAAAAAAAAAAA)), epoch={state.epoch}, epochStartOffset={start}, highWatermark=Optional.empty)"
    if role == Role.RESIGNED:
        return f"ResignedState(localId={node}, epoch={state.epoch}, voters={listed}, electionTimeoutMs=1000, unackedVoters=[], preferredSuccessors=[])"
    raise ValueError(f"no Kafka text for a {role.name} voter")


class LogWriter:
    """Each node's lines, one model step at a time, a millisecond apart."""

    def __init__(self, voters: tuple[int, ...]) -> None:
        self.voters = voters
        self.lines: dict[int, list[str]] = {node: [] for node in voters}
        self.clock = 0
        self.correlations: dict[int, int] = defaultdict(int)
        self.awaited: dict[tuple[int, int, bytes], deque[int]] = defaultdict(deque)  # (node, peer, request) -> correlation ids sent
        self.first_line: dict[int, int] = {}  # step -> the first line it wrote on its node

    def line(self, node: int, level: str, logger: str, text: str) -> None:
        self.clock += 1
        seconds, millis = divmod(self.clock, 1000)
        minutes, seconds = divmod(seconds, 60)
        self.lines[node].append(f"2026-12-02T00:{minutes:02d}:{seconds:02d}.{millis:03d}+0000 [kafka-{node}-raft-io-thread] {level} org.apache.kafka.raft.{logger} - [RaftManager id={node}] {text}")

    def trace(self, node: int, text: str) -> None:
        self.line(node, "TRACE", "KafkaRaftClient", text)

    def step(self, number: int, node: int, event: object, before: NodeState, after: NodeState, outputs: tuple) -> None:
        if before.role == Role.DOWN and type(event) is not Restart:
            return  # a process that is not running logs nothing
        self.first_line.setdefault(number, len(self.lines[node]) + 1)
        if type(event) is Request:
            self.correlations[node] += 1
            asked = self.correlations[node]
            self.trace(node, f"Received inbound message InboundRequest(correlationId={asked}, data={message_text(event.message)}, createdTimeMs=0)")
        elif type(event) is Response:
            waiting = self.awaited[(node, event.source, msgspec.msgpack.encode(event.request))]
            correlation = waiting.popleft() if waiting else 0
            self.trace(node, f"Received inbound message InboundResponse(correlationId={correlation}, data={message_text(event.message)}, "
                             f"source=127.0.0.1:1 (id: {event.source} rack: null isFenced: false))")  # fmt: skip
        if type(event) is Restart:
            for key in [key for key in self.awaited if key[0] == node]:
                del self.awaited[key]  # a new process: its requests are numbered afresh
            self.line(node, "INFO", "QuorumState", f"Completed transition to {state_text(node, after, self.voters)} from null")
        elif (after.role, after.epoch, after.leader_id, after.voted_id) != (before.role, before.epoch, before.leader_id, before.voted_id) and after.role != Role.DOWN:
            self.line(node, "INFO", "QuorumState", f"Completed transition to {state_text(node, after, self.voters)} from {state_text(node, before, self.voters) if before.role != Role.DOWN else 'null'}")
        if type(event) is ClientAppend and len(after.log) > len(before.log):
            self.trace(node, f"Leader appended records at base offset {len(before.log)}, new end offset is OffsetAndEpoch[offset={len(after.log)}, epoch={after.epoch}]")
        if type(event) is Response and isinstance(event.message, FetchResponse) and event.message.Records and after.log != before.log and len(after.log) > 0:
            if after.log[-1] in event.message.Records:
                self.trace(node, f"Follower end offset updated to OffsetAndEpoch[offset={len(after.log)}, epoch={after.log[-1].Epoch}] after append")
        for output in outputs:
            if type(output) is Send and type(output.message) in REQUEST_TYPES:
                self.correlations[node] += 1
                sent = self.correlations[node]
                self.awaited[(node, output.destination, msgspec.msgpack.encode(output.message))].append(sent)
                self.trace(node, f"Sent outbound request: OutboundRequest(correlationId={sent}, data={message_text(output.message)}, createdTimeMs=0, "
                                 f"destination=127.0.0.1:1 (id: {output.destination} rack: null isFenced: false))")  # fmt: skip
            elif type(output) in (Send, Answer):
                request = output.request if type(output) is Answer else event.message
                self.trace(node, f"Sent response OutboundResponse(correlationId=0, data={message_text(output.message)}) to inbound request "
                                 f"InboundRequest(correlationId=0, data={message_text(request)}, createdTimeMs=0)")  # fmt: skip

    def write(self, directory: Path) -> None:
        for node, lines in self.lines.items():
            (directory / f"node-{node}").mkdir(parents=True, exist_ok=True)
            (directory / f"node-{node}" / "server.log").write_text("".join(line + "\n" for line in lines))


class Walk(msgspec.Struct, frozen=True, kw_only=True):
    steps: int
    departed_at: int | None  # the first step the odd node took that the model allows no outcome of
    line: int | None  # that step's first line on the odd node


def walk(config: ClusterConfig, directory: Path, seed: int, steps: int, odd: tuple[int, Callable] | None = None, bounds: Bounds = Bounds(max_crashes=1, client_values=3)) -> Walk:
    """A random walk of the cluster, logged under `directory`; `odd`: (node, step function) that
    node steps with instead of the model's. Messages between two nodes arrive in order or not at all."""
    rng = random.Random(seed)
    cluster = Cluster(config, bounds)
    writer = LogWriter(config.voters)
    state = cluster.initial()
    queues: dict[tuple[int, int], deque] = defaultdict(deque)
    asked: dict[int, set] = defaultdict(set)  # node -> (peer, request) its current process sent
    departed = None
    for number in range(steps):
        heads = {id(queue[0]) for queue in queues.values() if queue}
        actions = [a for a in cluster.enabled(state) if type(a) not in (Deliver, Drop) or id(_queued(queues, a.envelope)) in heads]
        actions = [a for a in actions if not (type(a) is Deliver and a.duplicate)]
        if not actions:
            break
        deliveries = [a for a in actions if type(a) is Deliver]
        action = rng.choice(deliveries) if deliveries and rng.random() < 0.7 else rng.choice(actions)
        if type(action) in (Deliver, Drop):
            queues[(action.envelope.source, action.envelope.destination)].popleft()
        if type(action) is Drop:
            state, _ = cluster.apply(state, action)
            continue
        node, event = event_of(action)
        index = cluster.index[node]
        before = state.nodes[index]
        stepping = odd[1] if odd and odd[0] == node else reference_step
        transition = stepping(cluster.node_configs[index], before, event)
        if stepping is not reference_step and departed is None:
            allowed = {(o.transition.state, o.transition.outputs) for o in outcomes(reference_step, cluster.node_configs[index], before, event)}
            if (transition.state, transition.outputs) not in allowed:
                departed = number
        writer.step(number, node, event, before, transition.state, transition.outputs)
        bag = state.network
        if type(action) is Deliver:
            bag = network.remove(bag, action.envelope)
        if type(event) is Restart:  # a new process: the old one's connections, and what was on them for it, are gone
            asked[node].clear()
            def gone(envelope: object) -> bool:  # an answer on its way to it, or a request of its old process
                return (envelope.destination == node and envelope.request is not None) or (envelope.source == node and envelope.request is None)

            for envelope in network.envelopes(bag):
                while gone(envelope) and envelope in network.envelopes(bag):
                    bag = network.remove(bag, envelope)
            for pair, queue in queues.items():
                queues[pair] = deque(e for e in queue if not gone(e))
        for envelope in outgoing(node, event, transition):
            if envelope.request is None:
                asked[node].add((envelope.destination, msgspec.msgpack.encode(envelope.message)))
            elif (envelope.source, msgspec.msgpack.encode(envelope.request)) not in asked[envelope.destination]:
                continue  # an answer to a request of an earlier process of its destination: no connection carries it
            bag = network.add(bag, envelope)
            queues[(envelope.source, envelope.destination)].append(envelope)
        members = state.nodes[:index] + (transition.state,) + state.nodes[index + 1 :]
        state = msgspec.structs.replace(state, nodes=members, network=bag, history=counted(state.history, action))
    writer.write(directory)
    line = writer.first_line.get(departed) if departed is not None else None
    return Walk(steps=number + 1, departed_at=departed, line=line)


def _queued(queues: dict, envelope: object) -> object:
    """The queued envelope equal to `envelope` at the head of its pair's queue, if it is there."""
    queue = queues.get((envelope.source, envelope.destination))
    return queue[0] if queue and queue[0] == envelope else None
