"""What the scenario printer and parser share: the structs a scenario names, error codes by
name, and which field values are defaults (and so left out of a printed scenario)."""

import msgspec

from model.events import AppendResult
from model.isr.cluster import PowerFailure
from model.isr.events import AlterIsr
from model.isr.state import LeaderAndIsr
from model.messages import Message, Record
from spec import errors
from spec.trace import Persisted, TraceCluster, TracePartition


def _struct_types(roots: list) -> dict[str, type]:
    """Every Struct type reachable from the roots' fields, by name."""
    found: dict[str, type] = {}

    def walk(info: msgspec.inspect.Type) -> None:
        if isinstance(info, msgspec.inspect.StructType):
            if info.cls.__name__ not in found:
                found[info.cls.__name__] = info.cls
                for field in info.fields:
                    walk(field.type)
        elif isinstance(info, msgspec.inspect.UnionType):
            for member in info.types:
                walk(member)
        elif isinstance(info, (msgspec.inspect.VarTupleType, msgspec.inspect.ListType)):
            walk(info.item_type)

    for info in msgspec.inspect.multi_type_info(roots):
        walk(info)
    return found


STRUCTS: dict[str, type] = _struct_types([Message, Record])
"""The messages and their nested structs, by the name a scenario writes them with."""

KEYWORD_STRUCTS: dict[str, type] = {
    "cluster": TraceCluster,
    "partition": TracePartition,
    "initial": Persisted,
    "startup": LeaderAndIsr,
    "leader_and_isr": LeaderAndIsr,
    "append_result": AppendResult,
    "alter_isr": AlterIsr,
    "power_failure": PowerFailure,
}
"""The statements written as `KEYWORD field=value ...`, and the struct their fields belong to."""

_TABLE = errors.table()
ERROR_CODES: dict[str, int] = {name: entry.code for entry in _TABLE for name in (entry.kip_name, entry.kafka_name)}
ERROR_NAMES: dict[int, str] = {entry.code: entry.kafka_name for entry in _TABLE}


def is_error_field(name: str) -> bool:
    return name.endswith("ErrorCode")


def non_defaults(value: msgspec.Struct) -> list[tuple[str, object]]:
    """A struct's fields that differ from their defaults, in declaration order."""
    shown = []
    for field in msgspec.structs.fields(value):
        current = getattr(value, field.name)
        if field.default is not msgspec.NODEFAULT:
            default = field.default
        elif field.default_factory is not msgspec.NODEFAULT:
            default = field.default_factory()
        else:
            shown.append((field.name, current))
            continue
        if type(current) is not type(default) or current != default:
            shown.append((field.name, current))
    return shown


def log_end(log: tuple[tuple[int, int], ...]) -> int:
    """The log end offset an observed log implies (left out of a printed state when it is that)."""
    return log[-1][0] + 1 if log else 0


STATE_DEFAULTS: dict[str, object] = {"leader_id": -1, "voted_id": -1, "high_watermark": 0, "log": (), "isr": None}
"""The fields an `expect state` line may leave out, and what they then are (log_end_offset: the
end of the log)."""
