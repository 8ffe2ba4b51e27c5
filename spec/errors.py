"""The error-code table: KIP name, Kafka name and wire code of every error the protocol uses.

Models, traces and reports speak of errors by Kafka 4.0's name and compare them by wire code;
the KIP's older names are kept so rule texts and the seeds can be matched up.
"""

import functools
import tomllib
from pathlib import Path

import msgspec

TABLE_PATH = Path(__file__).parent / "errors.toml"


class ErrorCode(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kip_name: str
    kafka_name: str
    code: int
    meaning: str
    kafka_has_code: bool = True


class _Table(msgspec.Struct, forbid_unknown_fields=True):
    error: list[ErrorCode]


@functools.cache
def table() -> tuple[ErrorCode, ...]:
    """The error table, in wire-code order."""
    with TABLE_PATH.open("rb") as handle:
        parsed = msgspec.convert(tomllib.load(handle), _Table)
    return tuple(sorted(parsed.error, key=lambda e: e.code))


def by_code(code: int) -> ErrorCode:
    """The table entry for a wire code; unknown codes are reported, not guessed."""
    for entry in table():
        if entry.code == code:
            return entry
    raise KeyError(f"unknown error code {code}")


def code_of(name: str) -> int:
    """The wire code for a Kafka or KIP error name."""
    for entry in table():
        if name in (entry.kafka_name, entry.kip_name):
            return entry.code
    raise KeyError(f"unknown error name {name!r}")


def name_of(code: int) -> str:
    """Kafka's name for a wire code, or 'UNKNOWN(<code>)' for a code outside the table."""
    try:
        return by_code(code).kafka_name
    except KeyError:
        return f"UNKNOWN({code})"


NONE = code_of("NONE")
NOT_LEADER_OR_FOLLOWER = code_of("NOT_LEADER_OR_FOLLOWER")
FENCED_LEADER_EPOCH = code_of("FENCED_LEADER_EPOCH")
UNKNOWN_LEADER_EPOCH = code_of("UNKNOWN_LEADER_EPOCH")
INCONSISTENT_VOTER_SET = code_of("INCONSISTENT_VOTER_SET")
INCONSISTENT_CLUSTER_ID = code_of("INCONSISTENT_CLUSTER_ID")
INVALID_QUORUM_STATE = code_of("INVALID_QUORUM_STATE")
OFFSET_OUT_OF_RANGE = code_of("OFFSET_OUT_OF_RANGE")
INVALID_REQUEST = code_of("INVALID_REQUEST")
UNSUPPORTED_VERSION = code_of("UNSUPPORTED_VERSION")
