"""A node's state transitions as Kafka's own log tells them: every "Completed transition to
STATE(...)" line that org.apache.kafka.raft.QuorumState writes at INFO, in every release from 3.3
(each writes its states' toString: Unattached or UnattachedState, Voted, FollowerState,
ProspectiveState, CandidateState, Leader, ResignedState), read into what a quorum-state sample
holds: the epoch, the leader the node knows (itself when it leads or resigned), the candidate it
voted for (itself as a candidate). Unlike the quorum-state file, read every 50 ms, the log misses
no transition, however quick. A transition line none of these patterns reads is counted, never
dropped silently."""

import datetime
import re

import msgspec

TRANSITION = re.compile(r"^(?P<wall>\S+) .*?\[RaftManager id=(?P<node>\d+)\] Completed transition to (?P<state>[A-Za-z]+)\((?P<body>.*?)\) from ")
EPOCH = re.compile(r"(?<![A-Za-z])epoch=(\d+)")
LEADER = re.compile(r"(?<![A-Za-z])leader(?:Id)?=(?:OptionalInt\[)?(\d+)")
VOTED = re.compile(r"votedId=(\d+)|votedKey=(?:Optional\[)?ReplicaKey\(id=(\d+)")
ROLES = {
    "Unattached": "unattached", "UnattachedState": "unattached", "Voted": "voted", "FollowerState": "follower", "ProspectiveState": "prospective",
    "CandidateState": "candidate", "Leader": "leader", "ResignedState": "resigned",
}  # fmt: skip
LEADS = ("leader", "resigned")  # a resigned leader still names itself leader of its epoch, as its quorum-state file does


class Transition(msgspec.Struct, frozen=True, kw_only=True):
    """A node entered `role` of `epoch` at `wall` (seconds since the Unix epoch, as its log says),
    knowing `leader` and having voted for `voted` (-1: none)."""

    wall: float
    node: int
    role: str
    epoch: int
    leader: int
    voted: int


class ServerLog(msgspec.Struct, frozen=True, kw_only=True):
    transitions: tuple[Transition, ...]
    unreadable: tuple[str, ...]  # transition lines none of the patterns reads


def read(text: str) -> ServerLog:
    """The transitions of one node's log, in the order it wrote them (its runs one after another)."""
    transitions, unreadable = [], []
    for line in text.splitlines():
        if "Completed transition to " not in line:
            continue
        found = TRANSITION.match(line)
        transition = _transition(found) if found else None
        if transition is None:
            unreadable.append(line)
        else:
            transitions.append(transition)
    return ServerLog(transitions=tuple(transitions), unreadable=tuple(unreadable))


def _transition(found: re.Match) -> Transition | None:
    role, body, node = ROLES.get(found["state"]), found["body"], int(found["node"])
    epoch = EPOCH.search(body)
    try:
        wall = datetime.datetime.strptime(found["wall"], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    except ValueError:
        return None
    if role is None or epoch is None:
        return None
    leader = LEADER.search(body)
    voted = VOTED.search(body)
    return Transition(
        wall=wall,
        node=node,
        role=role,
        epoch=int(epoch[1]),
        leader=node if role in LEADS else int(leader[1]) if leader else -1,
        voted=node if role == "candidate" else int(voted[1] or voted[2]) if voted else -1,
    )
