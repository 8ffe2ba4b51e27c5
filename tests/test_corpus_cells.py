"""conformance.corpus.cells: the cells a node step covers, and the dedicated ones the corpus aims at."""

from adapters.node_models import MODELS
from conformance.corpus.cells import cells, is_dedicated, walk_cells
from model.config import ClusterConfig
from model.events import Request, Restart, Timer, TimerKind
from model.messages import FetchRequest
from model.state import NodeState, Role
from spec.trace import TraceCluster

KRAFT = MODELS["kraft"]


def leader(config, epoch: int = 1) -> NodeState:
    return NodeState(
        role=Role.LEADER, epoch=epoch, leader_id=config.node_id, voted_id=config.node_id,
        endorsed=frozenset({config.node_id}), fetched=frozenset({config.node_id}), replica_offsets=(0, -1, -1),
    )


def newer_fetch(epoch: int) -> Request:
    return Request(source=2, message=FetchRequest(ClusterId="kraft-cluster", ReplicaId=2, CurrentLeaderEpoch=epoch, FetchOffset=0, LastFetchedEpoch=0))


def test_a_stale_leader_given_a_newer_fetch_has_its_own_dedicated_cell_and_the_seeded_bug_departs_there():
    config = ClusterConfig(voters=(1, 2, 3)).node(1)
    found = cells(KRAFT, config, leader(config), newer_fetch(2))
    assert "rule FETCH-REQ-2B | UNKNOWN_LEADER_EPOCH | stale leader" in found
    assert "reading mutant fetch-newer-epoch-fenced departs" in found
    assert "reading mutant fetch-stale-epoch-served departs" not in found
    same = cells(KRAFT, config, leader(config), newer_fetch(1))
    assert not any(cell.endswith("stale leader") for cell in same)


def test_a_profile_reading_that_answers_otherwise_is_a_cell_of_that_reading():
    """kafka-4.3 answers a refused Fetch without a high watermark; set back to the KIP's, it would carry one."""
    config = ClusterConfig(voters=(1, 2, 3), profile="kafka-4.3").node(1)
    found = cells(KRAFT, config, leader(config), newer_fetch(2))
    assert [cell for cell in found if cell.startswith("reading ")] == [
        "reading mutant fetch-newer-epoch-fenced departs",
        "reading option refused_fetch_without_high_watermark flipped departs",
    ]
    assert all(is_dedicated(cell) == cell.startswith(("rule ", "reading ")) for cell in found)


def test_walk_cells_step_the_reference_along_a_nodes_inputs():
    setting = TraceCluster(voters=(1, 2, 3))
    inputs = [Timer(kind=TimerKind.ELECTION_TIMEOUT), Restart()]
    found = walk_cells(setting, 1, inputs)
    assert [at for at, _ in found] == [0, 1]
    assert all(is_dedicated(cell) for _, families in found for cell in families)
    assert any(cell.startswith("rule ELECT-") for cell in found[0][1])
