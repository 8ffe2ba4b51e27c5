"""The liveness properties and the fairness they assume; each speaks in its LIVE-* rule ID.

A liveness property here is "always eventually GOAL" for a predicate GOAL over cluster states:
it is violated by an infinite run that, from some point on, never reaches a GOAL state although
the environment is fair there. Fair means: faults (loss, duplication, crashes, cut links, a
timeout beating the traffic that would have reset it) happen only in a finite prefix, and every action of a fair kind that stays enabled is
eventually taken (weak fairness), one action per message in flight, per node and timer, per
crashed node's restart. A heal is never forced, so a partial partition may last for ever: the
goals then ask for progress only of what a majority of the voters that talk with one another
can do, and a node cut off from the majority is not asked to stop standing.

The model has no clock, so a timer is "enabled" whenever it is armed. A timer that traffic
resets (a follower's fetch timeout, a leader's progress timeout: RESET_BY_TRAFFIC) is owed only
once its node is quiet, nothing in flight or held that would reset it (a follower's Fetch and
its answer, a BeginQuorumEpoch to it; the Fetch requests a leader receives): then nothing can
reset it any more and real time makes it expire. Forcing it earlier would count
every run with a stable leader as unfair; never forcing it would let a follower whose Fetch
was lost wait for ever. Which timers are fair at all is a choice the check names (FAIR_TIMERS).
"""

import itertools
from collections.abc import Callable

from model import network
from model.cluster import Cluster, ClusterState, CrashNode, CutLink, Deliver, Drop, Fire, RestartNode, links_cut
from model.events import TimerKind
from model.messages import BeginQuorumEpochRequest, FetchRequest, FetchResponse, VoteRequest
from model.state import NodeState, Role, held_fetches

FAIR_TIMERS: frozenset[TimerKind] = frozenset(TimerKind)
RESET_BY_TRAFFIC: frozenset[TimerKind] = frozenset({TimerKind.FETCH_TIMEOUT, TimerKind.PROGRESS_TIMEOUT})
# Outcomes that take a message to be older than a timeout: an answer to an identical request sent
# before the node's last change of role or restart in its epoch (COMMON-3B), which only a
# timer's firing could have brought about while it was on its way.
LATE_PICKS: frozenset[tuple[str, str]] = frozenset({("COMMON-3B", "earlier")})


def talk(cut: frozenset[tuple[int, int]], a: int, b: int) -> bool:
    """Whether two nodes reach each other both ways (a partial partition cuts links one way)."""
    return (a, b) not in cut and (b, a) not in cut


def reaches_majority(cluster: Cluster, cut: frozenset[tuple[int, int]], node_id: int) -> bool:
    """Whether a node talks with a majority of the voters, itself included."""
    voters = cluster.config.voters
    return sum(1 for v in voters if v == node_id or talk(cut, node_id, v)) > len(voters) // 2


def majority_talks(cluster: Cluster, cut: frozenset[tuple[int, int]]) -> bool:
    """Whether some majority of the voters all talk with one another: where progress is owed."""
    if not cut:
        return True
    voters = cluster.config.voters
    return any(all(talk(cut, a, b) for a, b in itertools.combinations(group, 2)) for group in itertools.combinations(voters, len(voters) // 2 + 1))


def _leaders(cluster: Cluster, state: ClusterState, cut: frozenset[tuple[int, int]]) -> list[tuple[int, NodeState]]:
    """The leaders that talk with a majority (every leader, without partitions)."""
    return [(n, node) for n, node in zip(cluster.ids, state.nodes) if node.role == Role.LEADER and reaches_majority(cluster, cut, n)]


def a_leader(cluster: Cluster, state: ClusterState) -> bool:
    """LIVE-1's goal: some node leads and talks with a majority, or no majority can talk."""
    cut = links_cut(state.history)
    return bool(_leaders(cluster, state, cut)) or not majority_talks(cluster, cut)


def leaders_committed(cluster: Cluster, state: ClusterState) -> bool:
    """LIVE-2's goal: every leader's log is committed (its high watermark is its log end), a
    leader cut off from the majority included; or no majority can talk."""
    committed = all(node.high_watermark >= len(node.log) for node in state.nodes if node.role == Role.LEADER)
    return committed or not majority_talks(cluster, links_cut(state.history))


def none_standing(cluster: Cluster, state: ClusterState) -> bool:
    """LIVE-3's goal: no voter that talks with a majority is a candidate or a prospective."""
    cut = links_cut(state.history)
    return not any(node.role in (Role.CANDIDATE, Role.PROSPECTIVE) and reaches_majority(cluster, cut, n) for n, node in zip(cluster.ids, state.nodes))


def watermarks_agree(cluster: Cluster, state: ClusterState) -> bool:
    """LIVE-4's goal: a leader that talks with a majority, and every node up that talks with it
    knows its high watermark; or no majority can talk."""
    cut = links_cut(state.history)
    leaders = _leaders(cluster, state, cut)
    if not leaders:
        return not majority_talks(cluster, cut)
    return all(
        node.high_watermark >= leader.high_watermark
        for leader_id, leader in leaders
        for n, node in zip(cluster.ids, state.nodes)
        if node.role != Role.DOWN and (n == leader_id or talk(cut, n, leader_id))
    )


def hears_majority(cluster: Cluster, cut: frozenset[tuple[int, int]], node_id: int) -> bool:
    """Whether a majority of the voters, the node included, can send to it: what a leader's
    progress timeout counts (PROGRESS-1: the Fetch requests it receives)."""
    voters = cluster.config.voters
    return sum(1 for v in voters if v == node_id or (v, node_id) not in cut) > len(voters) // 2


def no_unheard_leader(cluster: Cluster, state: ClusterState) -> bool:
    """LIVE-5's goal: every leader can hear from a majority of the voters."""
    cut = links_cut(state.history)
    return all(hears_majority(cluster, cut, n) for n, node in zip(cluster.ids, state.nodes) if node.role == Role.LEADER)


GOALS: dict[str, Callable[[Cluster, ClusterState], bool]] = {
    "LIVE-1": a_leader,
    "LIVE-2": leaders_committed,
    "LIVE-3": none_standing,
    "LIVE-4": watermarks_agree,
    "LIVE-5": no_unheard_leader,
}


def goal_view(state: ClusterState) -> tuple:
    """All that the goals read of a state: each node's role, high watermark and log length, and
    the links cut. States with the same view meet the same goals, so a search can judge a view once."""
    return tuple((node.role, node.high_watermark, len(node.log)) for node in state.nodes), links_cut(state.history)


# Goals that ask for a step the bounds may forbid: LIVE-5 needs a leader's progress timeout.
NEEDS_PROGRESS_TIMEOUTS: frozenset[str] = frozenset({"LIVE-5"})


def checked_goals(cluster: Cluster) -> tuple[str, ...]:
    """The goals a cluster's bounds let it meet (a leader that may not time out cannot resign)."""
    return tuple(rule for rule in GOALS if cluster.bounds.progress_timeouts or rule not in NEEDS_PROGRESS_TIMEOUTS)


def unmet(cluster: Cluster, state: ClusterState) -> tuple[str, ...]:
    """The checked liveness rules whose goal the state does not meet, in rule order (a run may
    pass through such states; it violates the rule only by never leaving them, fairly)."""
    return tuple(rule for rule in checked_goals(cluster) if not GOALS[rule](cluster, state))


def is_fault(cluster: Cluster, state: ClusterState, action: object) -> bool:
    """Whether an action is a fault: allowed only in a run's finite prefix, never on its cycle
    (see fault_condition)."""
    condition = fault_condition(action)
    if condition == "busy":
        return not quiet(state, action.node, cluster.index[action.node], action.timer)
    if condition == "canvassing":
        return canvassing(state, action.node, state.nodes[cluster.index[action.node]])
    return condition == "always"


def fault_condition(action: object) -> str | None:
    """When an action is a fault: "always" (a loss, a duplicate, a crash, a cut, and a step that
    reads a message as older than a timeout: LATE_PICKS); "busy" for a timer of RESET_BY_TRAFFIC,
    a fault while its node is not quiet: its own traffic was slower than its timeout, which
    Raft's timing requirement (broadcast time well below the timeouts) rules out once the
    network is fair; "canvassing" for a candidate's or a prospective's election timeout, a
    fault while its canvass is answered; None: never."""
    kind = type(action)
    if any(pick in LATE_PICKS for pick in getattr(action, "picks", ())):
        return "always"
    if kind in (Drop, CrashNode, CutLink) or (kind is Deliver and action.duplicate):
        return "always"
    if kind is Fire and action.timer in RESET_BY_TRAFFIC:
        return "busy"
    if kind is Fire and action.timer == TimerKind.ELECTION_TIMEOUT:
        return "canvassing"
    return None


def fairness_of(action: object, fair_timers: frozenset[TimerKind] = FAIR_TIMERS) -> tuple | None:
    """The weakly fair action an action takes (the same for every outcome of its step), or None
    when the run may leave it untaken forever (a client append, a resignation, a timer the check
    does not count as fair, a fault)."""
    kind = type(action)
    if kind is Deliver and not action.duplicate:
        return ("deliver", action.envelope)
    if kind is Fire and action.timer in fair_timers:
        return ("fire", action.node, action.timer)
    if kind is RestartNode:
        return ("restart", action.node)
    return None


def resets(timer: TimerKind, envelope: network.Envelope, node_id: int) -> bool:
    """Whether a message in flight will reset the node's timer: a leader's progress timeout is
    reset by the Fetch requests it receives (PROGRESS-1 counts nothing else: a Vote is no
    fetch), a follower's fetch timeout by its Fetch answered and by a BeginQuorumEpoch."""
    message = type(envelope.message)
    if timer == TimerKind.PROGRESS_TIMEOUT:
        return envelope.destination == node_id and message is FetchRequest
    return (envelope.source == node_id and message is FetchRequest) or (envelope.destination == node_id and message in (FetchResponse, BeginQuorumEpochRequest))


def quiet(state: ClusterState, node_id: int, at: int, timer: TimerKind) -> bool:
    """Nothing deliverable in flight that would reset the node's timer of RESET_BY_TRAFFIC (a
    message waiting on a cut link is not), and no Fetch held that would (held_resets)."""
    cut = links_cut(state.history)
    if any(resets(timer, envelope, node_id) and (envelope.source, envelope.destination) not in cut for envelope in network.envelopes(state.network)):
        return False
    return not held_resets(state.nodes, node_id, at, timer)


def held_resets(members: tuple[NodeState, ...], node_id: int, at: int, timer: TimerKind) -> bool:
    """Whether a Fetch held will reset the node's timer of RESET_BY_TRAFFIC: one held by the
    leader (`at`: its position), answered and fetched again, or one of the follower's held elsewhere."""
    if timer == TimerKind.PROGRESS_TIMEOUT:
        return bool(held_fetches(members[at]))
    return any(held.source == node_id for node in members for held in held_fetches(node))


def canvass_of(envelope: network.Envelope) -> tuple[int, int, bool] | None:
    """The round of a canvass a message belongs to, (candidate, epoch, pre-vote): a Vote request,
    or the answer to one on its way back to the node that asked; None for any other message."""
    request = envelope.message
    if type(request) is not VoteRequest:
        request = envelope.request
        if type(request) is not VoteRequest or envelope.destination != request.CandidateId:
            return None
    return (request.CandidateId, request.CandidateEpoch, request.PreVote)


def standing_round(node_id: int, node: NodeState) -> tuple[int, int, bool] | None:
    """The canvass a candidate or a prospective is holding, as canvass_of names it; None for any other role."""
    if node.role not in (Role.CANDIDATE, Role.PROSPECTIVE):
        return None
    return (node_id, node.epoch, node.role == Role.PROSPECTIVE)


def canvassing(state: ClusterState, node_id: int, node: NodeState) -> bool:
    """Whether a candidate's or a prospective's Vote requests of this round, or their answers,
    are still deliverable: it armed its election timer as it sent them, so under Raft's timing
    they are all answered before the timer fires."""
    standing = standing_round(node_id, node)
    if standing is None:
        return False
    cut = links_cut(state.history)
    return any((envelope.source, envelope.destination) not in cut and canvass_of(envelope) == standing for envelope in network.envelopes(state.network))


def owed(cluster: Cluster, state: ClusterState, actions: list, fair_timers: frozenset[TimerKind] = FAIR_TIMERS) -> frozenset[tuple]:
    """The weakly fair actions a state owes among its enabled `actions` (within the exploration's
    bounds or not): a timer of RESET_BY_TRAFFIC only once its node is quiet."""
    found = set()
    for action in actions:
        fair = fairness_of(action, fair_timers)
        if fair is None:
            continue
        if type(action) is Fire and action.timer in RESET_BY_TRAFFIC and not quiet(state, action.node, cluster.index[action.node], action.timer):
            continue
        found.add(fair)
    return frozenset(found)
