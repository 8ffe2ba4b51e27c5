"""The quorum views of KIP-595's tooling section, as Kafka's `kafka-metadata-quorum.sh describe
--status` and `--replication` print them, drawn from the leader's DescribeQuorum answer."""

from tabulate import tabulate

from adapters.node_models import model_for
from model.cluster import Cluster, ClusterState
from model.config import NodeConfig
from model.describe import handle_describe_request
from model.messages import DescribeQuorumRequest
from model.state import NodeState, Role
from spec.trace import Trace, TraceError

NO_LEADER = "no leader: DescribeQuorum answers NOT_LEADER_OR_FOLLOWER everywhere"


def cluster_views(cluster: Cluster, state: ClusterState) -> str:
    """The views of the cluster's leader (of the latest epoch, where a deposed one has not heard of it yet)."""
    leaders = [(node.epoch, index) for index, node in enumerate(state.nodes) if node.role == Role.LEADER]
    if not leaders:
        return NO_LEADER
    _, index = max(leaders)
    return leader_views(cluster.config.cluster_id, cluster.node_configs[index], state.nodes[index])


def trace_views(trace: Trace, step: int) -> str:
    """The views of a KRaft trace's node after a step (0: before the first), from the reference
    model along the trace's inputs; the node must lead then."""
    header = trace.header
    if header.cluster is None:
        raise TraceError(f"{header.name}: an ISR replica's trace; the quorum views are KRaft's")
    if not 0 <= step <= len(trace.steps):
        raise TraceError(f"{header.name}: no step {step}; expected 0 to {len(trace.steps)}")
    model = model_for(header.cluster)
    config = model.config(header.cluster, header.node)
    state = model.start(config, header.initial)
    for taken in trace.steps[:step]:
        state = model.step(config, state, taken.input).state
    if state.role != Role.LEADER:
        return f"node {header.node} is {state.role_name} after step {step}, not the leader: DescribeQuorum answers NOT_LEADER_OR_FOLLOWER"
    return leader_views(header.cluster.cluster_id, config, state)


def leader_views(cluster_id: str | None, config: NodeConfig, leader: NodeState) -> str:
    """`--describe status` and `--describe replication` from a leader's DescribeQuorum answer."""
    answer = handle_describe_request(config, leader, -1, DescribeQuorumRequest()).outputs[0].message
    leader_end = next(replica.LogEndOffset for replica in answer.CurrentVoters if replica.ReplicaId == answer.LeaderId)
    replicas = [(replica, "Leader" if replica.ReplicaId == answer.LeaderId else "Follower") for replica in answer.CurrentVoters]
    replicas += [(replica, "Observer") for replica in answer.Observers]
    lags = {replica.ReplicaId: leader_end - max(replica.LogEndOffset, 0) for replica, _ in replicas}
    followers = [lags[replica.ReplicaId] for replica, role in replicas if role == "Follower"]
    status = [
        ("ClusterId:", cluster_id),
        ("LeaderId:", answer.LeaderId),
        ("LeaderEpoch:", answer.LeaderEpoch),
        ("HighWatermark:", answer.HighWatermark),
        ("MaxFollowerLag:", max(followers, default=0)),
        ("CurrentVoters:", "[" + ",".join(str(replica.ReplicaId) for replica in answer.CurrentVoters) + "]"),
        ("CurrentObservers:", "[" + ",".join(str(replica.ReplicaId) for replica in answer.Observers) + "]"),
    ]
    replication = [(replica.ReplicaId, replica.LogEndOffset, lags[replica.ReplicaId], role) for replica, role in replicas]
    return (
        tabulate(status, tablefmt="plain", disable_numparse=True)
        + "\n\n"
        + tabulate(replication, headers=("ReplicaId", "LogEndOffset", "Lag", "Status"), tablefmt="plain", numalign="left")
    )
