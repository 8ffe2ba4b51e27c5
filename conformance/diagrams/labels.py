"""Short words for what a diagram draws: a message on an arrow, a record in a log box.

An arrow has room for a dozen characters, so a label keeps what a protocol engineer follows a
run by (the epoch, the offset, granted or not, the error); the full message is its tooltip.
"""

from collections.abc import Callable

from conformance.diagrams.sequence import Box
from model.messages import Record
from spec import errors

_NAMES = {"BeginQuorumEpoch": "BeginEpoch", "EndQuorumEpoch": "EndEpoch", "OffsetsForLeaderEpoch": "OffsetsForEpoch", "DescribeQuorum": "Describe"}


def _fetch_response(message: object) -> list[str]:
    words = [f"hw {message.HighWatermark}"]
    if message.Records:
        words.append("records e" + ",".join(str(r.Epoch) for r in message.Records))
    if message.DivergingEpoch.EndOffset >= 0:
        words.append(f"diverging e{message.DivergingEpoch.Epoch}@{message.DivergingEpoch.EndOffset}")
    return words


_DETAILS: dict[str, Callable[[object], list[str]]] = {
    "VoteRequest": lambda m: [f"e{m.CandidateEpoch}"],
    "VoteResponse": lambda m: ["granted" if m.VoteGranted else "refused", f"e{m.LeaderEpoch}"],
    "BeginQuorumEpochRequest": lambda m: [f"e{m.LeaderEpoch}"],
    "BeginQuorumEpochResponse": lambda m: [f"e{m.LeaderEpoch}"],
    "EndQuorumEpochRequest": lambda m: [f"e{m.LeaderEpoch}"],
    "EndQuorumEpochResponse": lambda m: [f"e{m.LeaderEpoch}"],
    "FetchRequest": lambda m: [f"@{m.FetchOffset}", f"last e{m.LastFetchedEpoch}"],
    "FetchResponse": _fetch_response,
    "OffsetsForLeaderEpochRequest": lambda m: [f"e{m.LeaderEpoch}"],
    "OffsetsForLeaderEpochResponse": lambda m: [f"e{m.LeaderEpoch}", f"end {m.EndOffset}"],
    "DescribeQuorumResponse": lambda m: [f"leader {m.LeaderId}", f"hw {m.HighWatermark}"],
}


def message_label(message: object) -> str:
    """E.g. `Vote e2`, `Vote resp granted e2`, `Fetch @1 last e1`, `Fetch resp hw 1 records e3`, plus
    the error's name where the message carries one."""
    name = type(message).__name__
    base = name.removesuffix("Request").removesuffix("Response")
    words = [_NAMES.get(base, base) + (" resp" if name.endswith("Response") else "")]
    words += _DETAILS.get(name, lambda m: [])(message)
    code = getattr(message, "ErrorCode", 0) or getattr(message, "PartitionErrorCode", 0)
    if code:
        words.append(errors.name_of(code))
    return " ".join(words)


def record_box(record: Record, mark: str = "") -> Box:
    """A record of a log: its epoch in the box, offset and value in the tooltip."""
    value = f"client value v{record.Value}" if isinstance(record.Value, int) else "LeaderChange record"
    return Box(label=str(record.Epoch), title=f"offset {record.Offset}, epoch {record.Epoch}, {value}", fill="value" if isinstance(record.Value, int) else "lc", mark=mark)


def record_name(record: Record) -> str:
    """`0:e1`: offset and epoch, as a diagram's text names a record."""
    return f"{record.Offset}:e{record.Epoch}"
