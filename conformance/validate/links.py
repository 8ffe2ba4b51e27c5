"""The messages between the nodes' logs: every request a node logged receiving, its sender
logged sending, and every response it received (but those its own network client made up, a
timeout or a lost connection), the responder logged answering, with the same fields and in the order they
were sent (the correlation ids differ: the raft client numbers its requests, the wire its own). What one node's log claims about another is checked against the other's."""

from collections import defaultdict
from collections.abc import Iterable

import msgspec

from conformance.validate.observations import Answered, NodeLog, Received, Replied, Sent


class Unlinked(msgspec.Struct, frozen=True, kw_only=True):
    node: int
    line: int
    peer: int
    what: str


def _key(message: object) -> bytes:
    return msgspec.msgpack.encode(message)


def unlinked(node_logs: dict[int, NodeLog]) -> tuple[int, tuple[Unlinked, ...]]:
    """How many received messages were matched to their sender's line, and those that were not
    (only towards nodes whose log is given: a client's requests, DescribeQuorum, are not). Between
    two nodes the messages keep their order (one connection, TCP; kraftcheck's relays too), so
    what one received must be a subsequence of what the other sent: a lost message is skipped,
    one received out of its place or never sent is not."""
    sent: dict[tuple, list[bytes]] = defaultdict(list)
    for log in node_logs.values():
        for observation in log.observations:
            if isinstance(observation, (Sent, Answered)):
                sent[(type(observation) is Sent, log.node, observation.destination)].append(_key(observation.message))
    position: dict[tuple, int] = defaultdict(int)
    linked, missing = 0, []
    for log in node_logs.values():
        for observation in _received(log.observations):
            if observation.source not in node_logs:
                continue
            pair = (isinstance(observation, Received), observation.source, log.node)
            key, messages = _key(observation.message), sent[pair]
            found = next((index for index in range(position[pair], len(messages)) if messages[index] == key), None)
            if found is None:
                kind = "request" if pair[0] else "response"
                missing.append(Unlinked(node=log.node, line=observation.line, peer=observation.source, what=f"{kind} {type(observation.message).__name__}"))
            else:
                position[pair] = found + 1
                linked += 1
    return linked, tuple(missing)


def _received(observations: Iterable) -> Iterable[Received | Replied]:
    return (o for o in observations if isinstance(o, Received) or (isinstance(o, Replied) and not o.wire))
