"""The messages between the nodes' logs: every request a node logged receiving, its sender
logged sending, and every response it received (but those its own network client made up, a
timeout or a lost connection), the responder logged answering, with the same fields and in the order they
were sent (the correlation ids differ: the raft client numbers its requests, the wire its own). What one node's log claims about another is checked against the other's.

One message a process may send without logging it: Kafka's raft client hands a message to its
network thread and only then writes "Sent outbound request" (or "Sent response"), so a SIGKILL
between the two leaves a message on the wire that its sender's log never shows. Each run of a
node (from its first transition to the next "from null") is allowed one such message, received
no earlier than the last message that run logged sending, and it is reported as such."""

from collections import defaultdict
from collections.abc import Iterable

import msgspec

from conformance.validate.observations import Answered, NodeLog, Received, Replied, Sent, Started


class Unlinked(msgspec.Struct, frozen=True, kw_only=True):
    node: int
    line: int
    peer: int
    what: str


class Links(msgspec.Struct, frozen=True, kw_only=True):
    linked: int  # received messages matched to their sender's line
    unlinked: tuple[Unlinked, ...]  # received, never sent
    sent_at_kill: tuple[Unlinked, ...]  # received, sent as the sender's run was killed, before it could log it


def _key(message: object) -> bytes:
    return msgspec.msgpack.encode(message)


def links(node_logs: dict[int, NodeLog]) -> Links:
    """Received messages matched to their senders' lines (only towards nodes whose log is given: a
    client's requests, DescribeQuorum, are not). Between two nodes the messages keep their order
    (one connection, TCP; kraftcheck's relays too), so what one received must be a subsequence of
    what the other sent: a lost message is skipped, one received out of its place or never sent is
    not, but for the one message each run of the sender may leave unlogged as it is killed."""
    sent: dict[tuple, list[tuple[bytes, int]]] = defaultdict(list)  # (request?, sender, receiver) -> (message, sender's run), in order
    last_sent: dict[tuple[int, int], float] = {}  # (sender, run) -> when that run last logged sending (or started)
    for log in node_logs.values():
        run = -1
        for observation in log.observations:
            if isinstance(observation, Started):
                run += 1
                last_sent[(log.node, run)] = observation.wall
            elif isinstance(observation, (Sent, Answered)):
                sent[(type(observation) is Sent, log.node, observation.destination)].append((_key(observation.message), max(run, 0)))
                last_sent[(log.node, max(run, 0))] = observation.wall
    position: dict[tuple, int] = defaultdict(int)
    excused: set[tuple[int, int]] = set()
    linked, unlinked, sent_at_kill = 0, [], []
    for log in node_logs.values():
        for observation in _received(log.observations):
            if observation.source not in node_logs:
                continue
            pair = (isinstance(observation, Received), observation.source, log.node)
            key, messages = _key(observation.message), sent[pair]
            found = next((index for index in range(position[pair], len(messages)) if messages[index][0] == key), None)
            if found is not None:
                position[pair] = found + 1
                linked += 1
                continue
            kind = "request" if pair[0] else "response"
            missing = Unlinked(node=log.node, line=observation.line, peer=observation.source, what=f"{kind} {type(observation.message).__name__}")
            run = _killed_run(observation, messages[position[pair] - 1][1] if position[pair] else 0, last_sent, excused)
            if run is None:
                unlinked.append(missing)
                continue
            excused.add((observation.source, run))
            sent_at_kill.append(missing)
            position[pair] = next((index for index in range(position[pair], len(messages)) if messages[index][1] > run), len(messages))
    return Links(linked=linked, unlinked=tuple(unlinked), sent_at_kill=tuple(sent_at_kill))


def _killed_run(received: Received | Replied, current: int, last_sent: dict[tuple[int, int], float], excused: set[tuple[int, int]]) -> int | None:
    """The first run of the sender, from the one its last linked message came from, that can have
    sent `received` unlogged: its one allowance unused, its last logged send no later than the receipt."""
    runs = sorted(run for sender, run in last_sent if sender == received.source and run >= current)
    return next((run for run in runs if (received.source, run) not in excused and last_sent[(received.source, run)] <= received.wall), None)


def _received(observations: Iterable) -> Iterable[Received | Replied]:
    return (o for o in observations if isinstance(o, Received) or (isinstance(o, Replied) and not o.wire))
