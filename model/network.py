"""The network as a bag of in-flight messages: any order, and (as faults) loss and duplication.

A bag is a tuple of (key, envelope) pairs sorted by key, the envelope's MessagePack encoding,
so two bags holding the same messages are equal whatever order they were sent in, and every
run walks them in the same order (string hashes differ between processes; encodings do not).
"""

import bisect

import msgspec

from model.messages import Message

_encode = msgspec.msgpack.Encoder().encode


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """A message in flight; a response carries the request it answers (its correlation)."""

    source: int
    destination: int
    message: Message
    request: Message | None = None


Bag = tuple[tuple[bytes, Envelope], ...]

EMPTY: Bag = ()


def add(bag: Bag, envelope: Envelope) -> Bag:
    entry = (_encode(envelope), envelope)
    at = bisect.bisect_left(bag, entry[0], key=lambda held: held[0])
    return bag[:at] + (entry,) + bag[at:]


def remove(bag: Bag, envelope: Envelope) -> Bag:
    key = _encode(envelope)
    at = bisect.bisect_left(bag, key, key=lambda held: held[0])
    if at == len(bag) or bag[at][0] != key:
        raise KeyError("message not in flight")
    return bag[:at] + bag[at + 1 :]


def envelopes(bag: Bag) -> list[Envelope]:
    """The distinct messages in flight, in key order."""
    distinct: list[Envelope] = []
    previous = None
    for key, envelope in bag:
        if key != previous:
            distinct.append(envelope)
            previous = key
    return distinct
