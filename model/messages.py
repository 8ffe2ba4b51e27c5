"""The protocol's messages, as msgspec Structs generated from spec/schemas.

The schema files are the one source of field names, order and defaults: at import
time each becomes a frozen, keyword-only Struct tagged with its name, so that one
msgspec decoder for `Message` tells every request and response apart.

KRaft sends each request for a single partition (`__cluster_metadata`, partition 0),
so request and response types are the flattened single-partition view of a schema:

- the message's top-level fields except the `Topics` array, then
- the fields of the single topic element except its name (`TopicName` or `Name`)
  and its `Partitions` array, then
- the fields of the single partition element except `PartitionIndex`. A partition
  field named like a top-level one gets the prefix `Partition`, so responses have
  `ErrorCode` (the top-level code) and `PartitionErrorCode` (the partition's).

Data messages (QuorumStateMessage, LeaderChangeMessage) are not flattened.

Every field has a default: the schema's "default" when it gives one, otherwise 0,
False, "", () for arrays, None for nullable fields, and for a struct field an instance
built from the struct's own defaults.

Exploration builds millions of messages, so the types are plain Structs with no
validation on construction, and untracked by the garbage collector (gc=False): being
immutable, they cannot form reference cycles.
"""

import typing

import msgspec

from spec.schema import INT_RANGES, Field, MessageSchema, load_all

_PRIMITIVES: dict[str, type] = dict.fromkeys(INT_RANGES, int) | {
    "float64": float,
    "bool": bool,
    "string": str,
    "uuid": str,
    "bytes": bytes,
}
_TOPIC_NAME_FIELDS = ("TopicName", "Name")


class Record(msgspec.Struct, frozen=True, kw_only=True, tag=True, gc=False):
    """One entry of the replicated log, the KIP's `Record => Offset LeaderEpoch ControlType Key Value`.

    Value is a client value or a LeaderChange control record; the model needs no more.
    LeaderChangeMessage is generated from its schema below, hence the forward reference,
    which msgspec resolves on first use.
    """

    Offset: int
    Epoch: int
    Value: "int | LeaderChangeMessage"


_SCHEMAS = load_all()
_STRUCT_TYPES: dict[str, type] = {}
_STRUCT_SPECS: dict[str, list[tuple[str, object, object]]] = {}


def _python_type(schema: MessageSchema, field: Field) -> tuple[object, object]:
    """A field's Python type, and its default when the schema gives none."""
    if field.type == "records":
        python_type, zero = tuple[Record, ...], ()
    elif field.item_type in _PRIMITIVES:
        python_type = _PRIMITIVES[field.item_type]
        zero = python_type()
    else:
        python_type = _struct_type(schema, field)
        zero = python_type()
    if field.is_array:
        python_type, zero = tuple[python_type, ...], ()
    if field.nullable:
        python_type, zero = python_type | None, None
    return python_type, zero


def _field_spec(schema: MessageSchema, name: str, field: Field) -> tuple[str, object, object]:
    python_type, zero = _python_type(schema, field)
    if field.omissible:  # not carried at its default (spec/schema.py): UNSET is left out of every encoding
        return name, python_type | msgspec.UnsetType, msgspec.UNSET
    return name, python_type, zero if field.default is None else field.default


def _struct_type(schema: MessageSchema, field: Field) -> type:
    """The Struct of a struct-typed field; one type per name, shared by all messages."""
    name = field.item_type
    spec = [_field_spec(schema, nested.name, nested) for nested in schema.struct_fields(field)]
    if name not in _STRUCT_TYPES:
        _STRUCT_SPECS[name] = spec
        _STRUCT_TYPES[name] = msgspec.defstruct(name, spec, module=__name__, frozen=True, kw_only=True, gc=False)
        _note_node_ids(_STRUCT_TYPES[name], [(nested.name, nested) for nested in schema.struct_fields(field)])
    elif _STRUCT_SPECS[name] != spec:
        raise ValueError(f'{schema.path}: struct type "{name}" differs from its definition in another schema')
    return _STRUCT_TYPES[name]


def _element_fields(fields: tuple[Field, ...], name: str) -> tuple[Field, ...]:
    """The element fields of the array field `name`, or none if there is no such field."""
    return next((field.fields for field in fields if field.name == name), ())


def _flattened(schema: MessageSchema) -> list[tuple[str, Field]]:
    """The fields of the single-partition view, named as the module docstring says."""
    top = [field for field in schema.fields if field.name != "Topics"]
    topic = _element_fields(schema.fields, "Topics")
    partition = _element_fields(topic, "Partitions")
    top_names = {field.name for field in top}
    return [
        *((field.name, field) for field in top),
        *((field.name, field) for field in topic if field.name not in (*_TOPIC_NAME_FIELDS, "Partitions")),
        *(
            ("Partition" + field.name if field.name in top_names else field.name, field)
            for field in partition
            if field.name != "PartitionIndex"
        ),
    ]


def _named_fields(schema: MessageSchema) -> list[tuple[str, Field]]:
    return [(field.name, field) for field in schema.fields] if schema.type == "data" else _flattened(schema)


def _message_type(schema: MessageSchema) -> type:
    named = _named_fields(schema)
    spec = [_field_spec(schema, name, field) for name, field in named]
    # A data record carries only the fields of the schema it was written under (the KIP's or Kafka's
    # LeaderChange record): fields at their defaults are left out of its encoding and its repr.
    message_type = msgspec.defstruct(schema.name, spec, module=__name__, frozen=True, kw_only=True, tag=True, gc=False, omit_defaults=schema.type == "data", repr_omit_defaults=schema.type == "data")
    _note_node_ids(message_type, named)
    return message_type


NODE_ID_FIELDS: dict[type, tuple[str, ...]] = {}
"""Per type, the fields holding node ids (Kafka's "entityType": "brokerId"): what symmetry remaps."""


def _note_node_ids(struct_type: type, named: list[tuple[str, Field]]) -> None:
    ids = tuple(name for name, field in named if field.entity_type == "brokerId")
    if ids:
        NODE_ID_FIELDS[struct_type] = ids


_TYPES: dict[str, type] = {name: _message_type(schema) for name, schema in _SCHEMAS.items()}

VoteRequest = _TYPES["VoteRequest"]
VoteResponse = _TYPES["VoteResponse"]
BeginQuorumEpochRequest = _TYPES["BeginQuorumEpochRequest"]
BeginQuorumEpochResponse = _TYPES["BeginQuorumEpochResponse"]
EndQuorumEpochRequest = _TYPES["EndQuorumEpochRequest"]
EndQuorumEpochResponse = _TYPES["EndQuorumEpochResponse"]
FetchRequest = _TYPES["FetchRequest"]
FetchResponse = _TYPES["FetchResponse"]
DescribeQuorumRequest = _TYPES["DescribeQuorumRequest"]
DescribeQuorumResponse = _TYPES["DescribeQuorumResponse"]
OffsetsForLeaderEpochRequest = _TYPES["OffsetsForLeaderEpochRequest"]
OffsetsForLeaderEpochResponse = _TYPES["OffsetsForLeaderEpochResponse"]
QuorumStateMessage = _TYPES["QuorumStateMessage"]
LeaderChangeMessage = _TYPES["LeaderChangeMessage"]

EpochEndOffset = _STRUCT_TYPES["EpochEndOffset"]
LeaderIdAndEpoch = _STRUCT_TYPES["LeaderIdAndEpoch"]
ReplicaState = _STRUCT_TYPES["ReplicaState"]
Voter = _STRUCT_TYPES["Voter"]

LATER_FIELDS: dict[str, frozenset[str]] = {
    name: frozenset(field_name for field_name, field in _named_fields(schema) if field.added_by or field.omissible)
    for name, schema in _SCHEMAS.items()
}
"""Per message, the fields a later KIP added ("addedBy": PreVote, KIP-996) or that are not
carried at their defaults ("omissible"): a node may leave them out."""

OMISSIBLE_DEFAULTS: dict[type, dict[str, object]] = {
    _TYPES[name]: defaults
    for name, schema in _SCHEMAS.items()
    if (defaults := {field_name: field.default for field_name, field in _named_fields(schema) if field.omissible})
}
"""Per message type, its omissible fields and the schema default each stands for when not carried."""


def carried(message: object, name: str) -> object:
    """An omissible field's value, its schema default where the message does not carry it."""
    value = getattr(message, name)
    return OMISSIBLE_DEFAULTS[type(message)][name] if value is msgspec.UNSET else value


def as_carried(message: object) -> object:
    """The message with every omissible field at its default not carried, as kraftcheck writes
    it: a node that writes such a field out, at its default, says the same as one that leaves it out."""
    defaults = OMISSIBLE_DEFAULTS.get(type(message))
    if not defaults:
        return message
    unset = {name: msgspec.UNSET for name, default in defaults.items() if getattr(message, name) == default}
    return msgspec.structs.replace(message, **unset) if unset else message

MESSAGE_TYPES: dict[str, type] = {name: _TYPES[name] for name, schema in _SCHEMAS.items() if schema.type != "data"}
REQUEST_TYPES: tuple[type, ...] = tuple(_TYPES[name] for name, schema in _SCHEMAS.items() if schema.type == "request")
RESPONSE_FOR: dict[type, type] = {
    request: MESSAGE_TYPES[request.__name__.removesuffix("Request") + "Response"] for request in REQUEST_TYPES
}
Message = typing.Union[tuple(MESSAGE_TYPES.values())]
