"""The quorum views of KIP-595's tooling section, as Kafka's `kafka-metadata-quorum.sh describe
--status` and `--replication` print them, drawn from the leader's DescribeQuorum answer."""

from tabulate import tabulate

from model.cluster import Cluster, ClusterState
from model.describe import handle_describe_request
from model.messages import DescribeQuorumRequest
from model.state import Role


def quorum_views(cluster: Cluster, state: ClusterState) -> str:
    """`--describe status` and `--describe replication` of the cluster's leader (of the latest
    epoch, where a deposed one has not heard of it yet)."""
    leaders = [(node.epoch, index) for index, node in enumerate(state.nodes) if node.role == Role.LEADER]
    if not leaders:
        return "no leader: DescribeQuorum answers NOT_LEADER_OR_FOLLOWER everywhere"
    _, index = max(leaders)
    transition = handle_describe_request(cluster.node_configs[index], state.nodes[index], -1, DescribeQuorumRequest())
    answer = transition.outputs[0].message
    leader_end = next(replica.LogEndOffset for replica in answer.CurrentVoters if replica.ReplicaId == answer.LeaderId)
    replicas = [(replica, "Leader" if replica.ReplicaId == answer.LeaderId else "Follower") for replica in answer.CurrentVoters]
    replicas += [(replica, "Observer") for replica in answer.Observers]
    lags = {replica.ReplicaId: leader_end - replica.LogEndOffset if replica.LogEndOffset >= 0 else leader_end for replica, _ in replicas}
    status = [
        ("ClusterId:", cluster.config.cluster_id),
        ("LeaderId:", answer.LeaderId),
        ("LeaderEpoch:", answer.LeaderEpoch),
        ("HighWatermark:", answer.HighWatermark),
        ("MaxFollowerLag:", max(lags[replica.ReplicaId] for replica, role in replicas if role == "Follower") if len(answer.CurrentVoters) > 1 else 0),
        ("CurrentVoters:", "[" + ",".join(str(replica.ReplicaId) for replica in answer.CurrentVoters) + "]"),
        ("CurrentObservers:", "[" + ",".join(str(replica.ReplicaId) for replica in answer.Observers) + "]"),
    ]
    replication = [(replica.ReplicaId, replica.LogEndOffset, lags[replica.ReplicaId], role) for replica, role in replicas]
    return tabulate(status, tablefmt="plain", disable_numparse=True) + "\n\n" + tabulate(replication, headers=("ReplicaId", "LogEndOffset", "Lag", "Status"), tablefmt="plain", numalign="left")
