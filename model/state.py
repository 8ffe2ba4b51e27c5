"""A node's state: the persisted quorum state and log, and the volatile role state.

States are immutable and hashable so exploration can deduplicate them. Only the fields a role
uses are non-empty; every transition clears the others (see model/transitions.py).
"""

import enum

import msgspec

from model.messages import FetchRequest, FetchResponse, QuorumStateMessage, Record, Voter


class Role(enum.IntEnum):
    UNATTACHED = 0  # a voter that knows no leader for its epoch (it may hold a vote)
    FOLLOWER = 1
    CANDIDATE = 2
    LEADER = 3
    RESIGNED = 4
    OBSERVER = 5  # a non-voter, following a leader or looking for one
    DOWN = 6  # crashed, or shut down after a fatal error
    PROSPECTIVE = 7  # a voter asking for pre-votes in its own epoch before it stands (Options.pre_vote, KIP-996)


class HeldFetch(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A Fetch the leader holds (Options.held_fetches, FETCH-REQ-7): who sent it, the request, and
    the answer it had when it came, sent as it is if its wait runs out."""

    source: int
    request: FetchRequest
    response: FetchResponse


class NodeState(msgspec.Struct, frozen=True, kw_only=True):
    role: Role = Role.UNATTACHED
    # Persisted: the quorum-state file (QSTATE-1) and the log (LOG-3).
    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    log: tuple[Record, ...] = ()
    # Volatile.
    high_watermark: int = 0
    granted: frozenset[int] = frozenset()  # candidate: voters that granted, self included
    refused: frozenset[int] = frozenset()  # candidate: voters that refused
    # Leader: voters known to accept its leadership; resigned: voters that acknowledged its
    # EndQuorumEpoch (Options.resigned_resends_end_epoch).
    endorsed: frozenset[int] = frozenset()
    fetched: frozenset[int] = frozenset()  # leader: voters that fetched since the last progress check
    # Leader: fetch offset per replica (NodeConfig.replicas), -1 unknown; kept by a resigned node
    # that re-sends its EndQuorumEpoch, whose successors they order (Options.resigned_resends_end_epoch).
    replica_offsets: tuple[int, ...] = ()
    fetching: FetchRequest | None = None  # follower/observer: the Fetch in flight
    fetched_from_leader: bool = False  # follower: a Fetch answered without error in this role (Options.pre_vote)
    # Observer: its fetch timer expired and no Fetch has succeeded since, so it fetches from any
    # voter and its fetch timer is not armed (Options.stalled_fetch_any_voter).
    fetch_stalled: bool = False
    # Observer (Options.observer_refetches_leader): a voter other than the leader whose answer to
    # an earlier Fetch, sent to both, is awaited beside the leader's, and that Fetch.
    aside: tuple[int, FetchRequest] | None = None
    # Options.stale_responses_ignored: the node restarted or changed role since its epoch began, so
    # a request it sends may repeat one sent before, whose answer it drops (COMMON-3B).
    returned: bool = False
    # Fetches held unanswered, oldest first (model/held.py). Kept across a change of role, as
    # Kafka's purgatory is, until they are answered; a crash forgets them. UNSET, not (), when
    # there are none, so that a state holding none encodes (and fingerprints) as before held
    # Fetches existed: use held_fetches(state).
    held: tuple[HeldFetch, ...] | msgspec.UnsetType = msgspec.UNSET

    @property
    def role_name(self) -> str:
        if self.role == Role.UNATTACHED and self.voted_id != -1:
            return "voted"
        return self.role.name.lower()


def held_fetches(state: NodeState) -> tuple[HeldFetch, ...]:
    return state.held or ()


def quorum_state_file(state: NodeState, voters: tuple[int, ...]) -> QuorumStateMessage:
    """The quorum-state file as the KIP's QuorumStateMessage (AppliedOffset: the high watermark)."""
    return QuorumStateMessage(
        LeaderId=state.leader_id,
        LeaderEpoch=state.epoch,
        VotedId=state.voted_id,
        AppliedOffset=state.high_watermark,
        CurrentVoters=tuple(Voter(VoterId=v) for v in voters),
    )
