"""The schema loader, its error reports, and the message types generated from the schemas."""

import pathlib
import typing

import msgspec
import pytest

from model.messages import (
    MESSAGE_TYPES,
    REQUEST_TYPES,
    RESPONSE_FOR,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    LeaderChangeMessage,
    LeaderIdAndEpoch,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    QuorumStateMessage,
    Record,
    ReplicaState,
    Voter,
    VoteRequest,
    VoteResponse,
)
from spec.schema import MessageSchema, SchemaError, load_all, load_schema

SCHEMA_DIR = pathlib.Path(__file__).parent.parent / "spec" / "schemas"

ERROR_CODE = ("ErrorCode", int, 0)
PARTITION_ERROR_CODE = ("PartitionErrorCode", int, 0)
CLUSTER_ID = ("ClusterId", str | None, None)

EXPECTED_FIELDS: dict[type, list[tuple[str, object, object]]] = {
    VoteRequest: [
        CLUSTER_ID,
        ("CandidateEpoch", int, 0),
        ("CandidateId", int, 0),
        ("LastOffsetEpoch", int, 0),
        ("LastOffset", int, 0),
        ("PreVote", bool, False),
    ],
    VoteResponse: [
        ERROR_CODE,
        PARTITION_ERROR_CODE,
        ("LeaderId", int, 0),
        ("LeaderEpoch", int, 0),
        ("VoteGranted", bool, False),
    ],
    BeginQuorumEpochRequest: [CLUSTER_ID, ("LeaderId", int, 0), ("LeaderEpoch", int, 0)],
    BeginQuorumEpochResponse: [ERROR_CODE, PARTITION_ERROR_CODE, ("LeaderId", int, 0), ("LeaderEpoch", int, 0)],
    EndQuorumEpochRequest: [
        CLUSTER_ID,
        ("ReplicaId", int, 0),
        ("LeaderId", int, 0),
        ("LeaderEpoch", int, 0),
        ("PreferredSuccessors", tuple[int, ...], ()),
    ],
    EndQuorumEpochResponse: [ERROR_CODE, PARTITION_ERROR_CODE, ("LeaderId", int, 0), ("LeaderEpoch", int, 0)],
    FetchRequest: [
        CLUSTER_ID,
        ("ReplicaId", int, 0),
        ("ReplicaEpoch", int | msgspec.UnsetType, msgspec.UNSET),  # omissible: not carried at its default
        ("MaxWaitMs", int | msgspec.UnsetType, msgspec.UNSET),
        ("CurrentLeaderEpoch", int, -1),
        ("FetchOffset", int, 0),
        ("LastFetchedEpoch", int, -1),
        ("HighWatermark", int | msgspec.UnsetType, msgspec.UNSET),
    ],
    FetchResponse: [
        ERROR_CODE,
        PARTITION_ERROR_CODE,
        ("HighWatermark", int, 0),
        ("DivergingEpoch", EpochEndOffset, EpochEndOffset(Epoch=-1, EndOffset=-1)),
        ("CurrentLeader", LeaderIdAndEpoch, LeaderIdAndEpoch(LeaderId=-1, LeaderEpoch=-1)),
        ("Records", tuple[Record, ...] | None, None),
    ],
    DescribeQuorumRequest: [],
    DescribeQuorumResponse: [
        ERROR_CODE,
        PARTITION_ERROR_CODE,
        ("LeaderId", int, 0),
        ("LeaderEpoch", int, 0),
        ("HighWatermark", int, 0),
        ("CurrentVoters", tuple[ReplicaState, ...], ()),
        ("Observers", tuple[ReplicaState, ...], ()),
    ],
    OffsetsForLeaderEpochRequest: [("ReplicaId", int, -1), ("CurrentLeaderEpoch", int, -1), ("LeaderEpoch", int, 0)],
    OffsetsForLeaderEpochResponse: [ERROR_CODE, ("LeaderEpoch", int, -1), ("EndOffset", int, -1)],
    QuorumStateMessage: [
        ("LeaderId", int, 0),
        ("LeaderEpoch", int, 0),
        ("VotedId", int, 0),
        ("AppliedOffset", int, 0),
        ("CurrentVoters", tuple[Voter, ...], ()),
    ],
    LeaderChangeMessage: [
        ("Version", int, 0),
        ("LeaderId", int, 0),
        ("VotedIds", tuple[int, ...], ()),
        ("Voters", tuple[int, ...], ()),
        ("GrantingVoters", tuple[int, ...], ()),
    ],
    EpochEndOffset: [("Epoch", int, -1), ("EndOffset", int, -1)],
    LeaderIdAndEpoch: [("LeaderId", int, -1), ("LeaderEpoch", int, -1)],
    ReplicaState: [("ReplicaId", int, 0), ("LogEndOffset", int, 0)],
    Voter: [("VoterId", int, 0)],
}

RECORDS = (
    Record(Offset=0, Epoch=1, Value=LeaderChangeMessage(LeaderId=1, VotedIds=(1, 2))),
    Record(Offset=1, Epoch=1, Value=42),
)

SAMPLES = [
    VoteRequest(ClusterId="c1", CandidateEpoch=3, CandidateId=1, LastOffsetEpoch=2, LastOffset=7),
    VoteResponse(ErrorCode=0, PartitionErrorCode=74, LeaderId=2, LeaderEpoch=4, VoteGranted=True),
    BeginQuorumEpochRequest(LeaderId=1, LeaderEpoch=3),
    BeginQuorumEpochResponse(PartitionErrorCode=74, LeaderId=2, LeaderEpoch=4),
    EndQuorumEpochRequest(ReplicaId=1, LeaderId=1, LeaderEpoch=3, PreferredSuccessors=(2, 3)),
    EndQuorumEpochResponse(LeaderId=-1, LeaderEpoch=3),
    FetchRequest(ReplicaId=2, CurrentLeaderEpoch=3, FetchOffset=5, LastFetchedEpoch=2),
    FetchResponse(HighWatermark=1, Records=RECORDS),
    FetchResponse(
        DivergingEpoch=EpochEndOffset(Epoch=1, EndOffset=4),
        CurrentLeader=LeaderIdAndEpoch(LeaderId=1, LeaderEpoch=3),
        Records=(),
    ),
    DescribeQuorumRequest(),
    DescribeQuorumResponse(
        LeaderId=1,
        LeaderEpoch=3,
        HighWatermark=9,
        CurrentVoters=(ReplicaState(ReplicaId=1, LogEndOffset=10), ReplicaState(ReplicaId=2, LogEndOffset=9)),
        Observers=(ReplicaState(ReplicaId=4, LogEndOffset=-1),),
    ),
    OffsetsForLeaderEpochRequest(ReplicaId=2, CurrentLeaderEpoch=3, LeaderEpoch=1),
    OffsetsForLeaderEpochResponse(LeaderEpoch=1, EndOffset=12),
    QuorumStateMessage(LeaderId=1, LeaderEpoch=3, VotedId=1, AppliedOffset=8, CurrentVoters=(Voter(VoterId=1),)),
    LeaderChangeMessage(LeaderId=1, VotedIds=(1, 3)),
    *RECORDS,
]


def write(tmp_path: pathlib.Path, text: str, name: str = "Bad") -> pathlib.Path:
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    return path


def schema_text(fields: str) -> str:
    """A request schema named Bad whose fields start on line 5."""
    return '{\n  "type": "request",\n  "name": "Bad",\n  "fields": [\n' + fields + "\n  ]\n}\n"


def column_of(line: str, fragment: str) -> int:
    """The 1-based column where `fragment` starts in `line`."""
    return line.index(fragment) + 1


def load_error(path: pathlib.Path) -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        load_schema(path)
    return caught.value


# --- the shipped schema files ---


def test_every_shipped_schema_loads() -> None:
    schemas = load_all()
    assert sorted(schemas) == sorted(path.stem for path in SCHEMA_DIR.glob("*.json"))
    assert sorted(schemas) == sorted([*MESSAGE_TYPES, "LeaderChangeMessage", "QuorumStateMessage"])
    assert all(isinstance(schema, MessageSchema) for schema in schemas.values())


def test_default_directory_is_spec_schemas() -> None:
    assert load_all() == load_all(SCHEMA_DIR)


def test_schema_tree_of_vote_request() -> None:
    path = SCHEMA_DIR / "VoteRequest.json"
    schema = load_schema(path)
    assert (schema.name, schema.type, schema.api_key, schema.path) == ("VoteRequest", "request", None, path)
    cluster_id, topics = schema.fields
    assert (cluster_id.type, cluster_id.nullable, cluster_id.default) == ("string", True, None)
    assert (topics.type, topics.is_array, topics.item_type) == ("[]TopicData", True, "TopicData")
    topic_name, partitions = topics.fields
    assert topic_name.about == "The topic name."
    assert [field.name for field in partitions.fields] == [
        "PartitionIndex",
        "CandidateEpoch",
        "CandidateId",
        "LastOffsetEpoch",
        "LastOffset",
        "PreVote",
    ]
    pre_vote = partitions.fields[-1]
    assert (pre_vote.type, pre_vote.versions, pre_vote.default, pre_vote.added_by) == ("bool", "1+", False, "KIP-996")
    assert not any(field.added_by for field in partitions.fields[:-1])
    candidate_epoch = partitions.fields[1]
    lines = path.read_text().splitlines()
    assert '"name": "CandidateEpoch"' in lines[candidate_epoch.line - 1]
    assert (candidate_epoch.type, candidate_epoch.versions, candidate_epoch.default) == ("int32", "0+", None)


def test_fetch_schemas_keep_kafka_api_key_and_defaults() -> None:
    schemas = load_all()
    assert schemas["FetchRequest"].api_key == 1
    assert schemas["OffsetsForLeaderEpochRequest"].api_key == 23
    partition = schemas["FetchResponse"].fields[1].fields[1].fields
    records = partition[-1]
    assert (records.name, records.type, records.nullable) == ("Records", "records", True)
    diverging = partition[3]
    assert [(field.name, field.default) for field in diverging.fields] == [("Epoch", -1), ("EndOffset", -1)]


def test_common_structs_are_resolved_by_name() -> None:
    schema = load_all()["DescribeQuorumResponse"]
    (replica_state,) = schema.common_structs
    assert replica_state.name == "ReplicaState"
    voters = schema.fields[1].fields[1].fields[-2]
    assert (voters.name, voters.fields) == ("CurrentVoters", ())
    assert schema.struct_fields(voters) == replica_state.fields
    assert [field.name for field in replica_state.fields] == ["ReplicaId", "LogEndOffset"]


# --- the generated message types ---


@pytest.mark.parametrize("message_type", EXPECTED_FIELDS, ids=lambda t: t.__name__)
def test_generated_fields_and_defaults(message_type: type) -> None:
    fields = [(field.name, field.type, field.default) for field in msgspec.structs.fields(message_type)]
    assert fields == EXPECTED_FIELDS[message_type]
    assert message_type() == message_type(**{name: default for name, _, default in fields})


def test_message_tables() -> None:
    requests = [
        VoteRequest,
        BeginQuorumEpochRequest,
        EndQuorumEpochRequest,
        FetchRequest,
        DescribeQuorumRequest,
        OffsetsForLeaderEpochRequest,
    ]
    responses = [
        VoteResponse,
        BeginQuorumEpochResponse,
        EndQuorumEpochResponse,
        FetchResponse,
        DescribeQuorumResponse,
        OffsetsForLeaderEpochResponse,
    ]
    assert set(REQUEST_TYPES) == set(requests)
    assert RESPONSE_FOR == dict(zip(requests, responses))
    assert MESSAGE_TYPES == {t.__name__: t for t in requests + responses}
    assert set(typing.get_args(Message)) == set(requests + responses)


def test_samples_cover_every_message_type() -> None:
    assert {type(sample) for sample in SAMPLES} == {*MESSAGE_TYPES.values(), QuorumStateMessage, LeaderChangeMessage, Record}


def test_fields_are_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        VoteRequest(None, 1)  # type: ignore[misc]
    request = VoteRequest(CandidateEpoch=1)
    with pytest.raises(AttributeError):
        request.CandidateEpoch = 2  # type: ignore[misc]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: type(sample).__name__)
def test_json_round_trip(sample: msgspec.Struct) -> None:
    encoded = msgspec.json.encode(sample)
    assert msgspec.json.decode(encoded, type=type(sample)) == sample
    if type(sample) in MESSAGE_TYPES.values():
        assert msgspec.json.Decoder(Message).decode(encoded) == sample


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: type(sample).__name__)
def test_msgpack_round_trip(sample: msgspec.Struct) -> None:
    encoded = msgspec.msgpack.encode(sample)
    assert msgspec.msgpack.decode(encoded, type=type(sample)) == sample
    if type(sample) in MESSAGE_TYPES.values():
        assert msgspec.msgpack.Decoder(Message).decode(encoded) == sample


def test_messages_are_tagged_with_their_name() -> None:
    assert msgspec.json.decode(msgspec.json.encode(VoteRequest()))["type"] == "VoteRequest"
    record = {"type": "Record", "Offset": 1, "Epoch": 1, "Value": 42}
    assert msgspec.json.decode(msgspec.json.encode(RECORDS[1])) == record


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda sample: type(sample).__name__)
def test_equal_by_value_and_hashable(sample: msgspec.Struct) -> None:
    copy = msgspec.json.decode(msgspec.json.encode(sample), type=type(sample))
    assert copy is not sample
    assert copy == sample
    assert hash(copy) == hash(sample)
    assert len({sample, copy}) == 1


def test_different_values_are_different_messages() -> None:
    assert VoteRequest(CandidateEpoch=1) != VoteRequest(CandidateEpoch=2)
    assert FetchResponse(Records=()) != FetchResponse(Records=None)
    assert len({FetchRequest(FetchOffset=1), FetchRequest(FetchOffset=2), FetchRequest(FetchOffset=1)}) == 2


# --- the dialect: comments, trailing commas, placeholders ---


def test_comments_and_trailing_commas_are_accepted(tmp_path: pathlib.Path) -> None:
    text = """// a line comment before the object
{
  /* a block
     comment */
  "apiKey": N, // the KIP's placeholder
  "type": "request",
  "name": "Ok",
  "fields": [
    { "name": "A", "type": "int32", "versions": "0+", "default": "0x7fffffff", },
    { "name": "B", "type": "[]int64", "versions": "0+", },  // trailing comma in the array too
  ],
}
"""
    schema = load_schema(write(tmp_path, text, "Ok"))
    assert schema.api_key is None
    assert [(field.name, field.type, field.default) for field in schema.fields] == [
        ("A", "int32", 0x7FFFFFFF),
        ("B", "[]int64", None),
    ]


def test_load_all_reads_a_given_directory(tmp_path: pathlib.Path) -> None:
    write(tmp_path, schema_text('    { "name": "A", "type": "bool", "versions": "0+", "default": "true" }'), "Bad")
    (tmp_path / "notes.txt").write_text("not a schema")
    schemas = load_all(tmp_path)
    assert list(schemas) == ["Bad"]
    assert schemas["Bad"].fields[0].default is True


# --- error reports ---


def test_syntax_error_reports_line_and_column(tmp_path: pathlib.Path) -> None:
    field = '    { "name": "A", "type": "int32", "versions" "0+" }'
    path = write(tmp_path, schema_text(field))
    error = load_error(path)
    assert (error.path, error.line, error.column) == (path, 5, column_of(field, '"0+"'))
    assert str(error) == f'{path}:5:48: syntax error: unexpected "0+", expected ":"'


def test_the_kips_fetch_request_typo_is_a_syntax_error(tmp_path: pathlib.Path) -> None:
    text = (SCHEMA_DIR / "FetchRequest.json").read_text()
    correct = '"ClusterId", "type": "string", "versions": "12+"'
    broken = text.replace(correct, correct.replace('"versions":', '"versions"'))
    assert broken != text
    lines = broken.splitlines()
    line = next(number for number, content in enumerate(lines, 1) if '"versions" "12+"' in content)
    error = load_error(write(tmp_path, broken, "FetchRequest"))
    assert (error.line, error.column) == (line, column_of(lines[line - 1], '"12+"'))
    assert f"FetchRequest.json:{error.line}:{error.column}: syntax error" in str(error)


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ('{\n  "name": "Bad",\n  "type": request\n}\n', 3, 11, 'unexpected character "r"'),
        ('{\n  "name": "Bad",\n  "fields": [\n', 3, 13, "unexpected end of file"),
        ('{\n  "name": "Bad",,\n}\n', 2, 17, 'unexpected ","'),
        ('{\n  "name": "Bad"\n  /* never closed\n}\n', 3, 3, 'unexpected character "/"'),
        ("", 1, 1, "unexpected end of file"),
    ],
)
def test_syntax_errors(tmp_path: pathlib.Path, text: str, line: int, column: int, message: str) -> None:
    error = load_error(write(tmp_path, text))
    assert (error.line, error.column) == (line, column)
    assert f"Bad.json:{line}:{column}: syntax error: {message}" in str(error)


def test_unknown_field_type(tmp_path: pathlib.Path) -> None:
    field = '    { "name": "CandidateEpoch", "type": "int33", "versions": "0+" }'
    first = '    { "name": "A", "type": "int32", "versions": "0+" },'
    error = load_error(write(tmp_path, schema_text(first + "\n" + field)))
    assert column_of(field, '"int33"') == 41
    assert str(error).endswith('Bad.json:6:41: field "CandidateEpoch" has unknown type "int33"')


def test_duplicate_field_in_one_struct(tmp_path: pathlib.Path) -> None:
    duplicate = '      { "name": "LeaderId", "type": "int64", "versions": "0+" }'
    fields = f"""    {{ "name": "Topics", "type": "[]TopicData", "versions": "0+", "fields": [
      {{ "name": "LeaderId", "type": "int32", "versions": "0+" }},
{duplicate}
    ]}}"""
    error = load_error(write(tmp_path, schema_text(fields)))
    assert column_of(duplicate, '"LeaderId"') == 17
    assert 'Bad.json:7:17: duplicate field "LeaderId"' in str(error)


def test_same_name_in_different_structs_is_allowed(tmp_path: pathlib.Path) -> None:
    fields = """    { "name": "ErrorCode", "type": "int16", "versions": "0+" },
    { "name": "Topics", "type": "[]TopicData", "versions": "0+", "fields": [
      { "name": "ErrorCode", "type": "int16", "versions": "0+" }
    ]}"""
    assert len(load_schema(write(tmp_path, schema_text(fields))).fields) == 2


def test_undefined_struct_type(tmp_path: pathlib.Path) -> None:
    field = '    { "name": "Voters", "type": "[]ReplicaState", "versions": "0+" }'
    error = load_error(write(tmp_path, schema_text(field)))
    assert column_of(field, '"[]ReplicaState"') == 33
    assert 'Bad.json:5:33: field "Voters" uses struct type "ReplicaState", which is not defined' in str(error)


def test_struct_defined_twice(tmp_path: pathlib.Path) -> None:
    second = '    { "name": "B", "type": "Pair", "versions": "0+", "fields": [] }'
    fields = '    { "name": "A", "type": "Pair", "versions": "0+", "fields": [] },\n' + second
    error = load_error(write(tmp_path, schema_text(fields)))
    assert column_of(second, '"Pair"') == 28
    assert 'Bad.json:6:28: struct type "Pair" is defined twice' in str(error)


@pytest.mark.parametrize(
    ("type_name", "default", "message"),
    [
        ("int32", '"abc"', 'field "A" has default "abc", which is not a valid int32'),
        ("int8", '"128"', 'field "A" has default "128", which is not a valid int8'),
        ("uint16", '"-1"', 'field "A" has default "-1", which is not a valid uint16'),
        ("bool", '"yes"', 'field "A" has default "yes", which is not a valid bool'),
        ("float64", '"fast"', 'field "A" has default "fast", which is not a valid float64'),
        ("uuid", '"not-a-uuid"', 'field "A" has default "not-a-uuid", which is not a valid uuid'),
        ("int32", '"null"', 'field "A" has default "null" but is not nullable'),
        ("[]int32", '"1"', 'field "A" of type "[]int32" can only default to "null"'),
        ("int32", "[]", 'field "A": "default" must be a string'),
    ],
)
def test_bad_default(tmp_path: pathlib.Path, type_name: str, default: str, message: str) -> None:
    fields = f'    {{ "name": "A", "type": "{type_name}", "versions": "0+", "default": {default} }}'
    error = load_error(write(tmp_path, schema_text(fields)))
    assert str(error).endswith(f"Bad.json:5:{column_of(fields, default)}: {message}")


def test_json_scalar_defaults_are_accepted(tmp_path: pathlib.Path) -> None:
    fields = """    { "name": "A", "type": "int32", "versions": "0+", "default": -2 },
    { "name": "B", "type": "bool", "versions": "0+", "default": true },
    { "name": "C", "type": "float64", "versions": "0+", "default": "1.5" },
    { "name": "D", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null" }"""
    schema = load_schema(write(tmp_path, schema_text(fields)))
    assert [field.default for field in schema.fields] == [-2, True, 1.5, None]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{ "type": "request", "fields": [] }', 1, 'message: missing "name"'),
        ('{ "name": "Bad", "fields": [] }', 1, 'message "Bad": missing "type"'),
        ('{ "name": "Bad", "type": "request" }', 1, 'message "Bad": missing "fields"'),
        ('{ "name": "Bad", "type": "header", "fields": [] }', 1, 'message "Bad" has unknown type "header"'),
        ('{ "name": "Other", "type": "data", "fields": [] }', 1, '"Other" must be in a file named Other.json'),
        ('{ "name": "Bad", "type": "data", "fields": {} }', 1, 'message "Bad": "fields" must be an array'),
        ('{ "name": "Bad", "type": "data", "apiKey": "1", "fields": [] }', 1, '"apiKey" must be an integer or N'),
        ('{ "name": "Bad", "type": "data",\n  "name": "Bad", "fields": [] }', 2, 'duplicate key "name"'),
        ("[]", 1, "a schema must be a JSON object"),
    ],
)
def test_malformed_message(tmp_path: pathlib.Path, text: str, line: int, message: str) -> None:
    error = load_error(write(tmp_path, text))
    assert f"Bad.json:{line}:" in str(error)
    assert str(error).endswith(message)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ('{ "type": "int32", "versions": "0+" }', 'field: missing "name"'),
        ('{ "name": "A", "versions": "0+" }', 'field "A": missing "type"'),
        ('{ "name": "A", "type": "int32" }', 'field "A": missing "versions"'),
        ('{ "name": N, "type": "int32", "versions": "0+" }', 'field: "name" must be a string'),
        ('{ "name": "A", "type": "int32", "versions": "0+", "nullableVersions": "" }', '"int32" cannot be nullable'),
        ('{ "name": "A", "type": "int32", "versions": "0+", "fields": [] }', '"int32" cannot have "fields"'),
        ('{ "name": "A", "type": "[][]int32", "versions": "0+" }', 'field "A" has unknown type "[][]int32"'),
        ("7", "a field must be a JSON object"),
    ],
)
def test_malformed_field(tmp_path: pathlib.Path, field: str, message: str) -> None:
    error = load_error(write(tmp_path, schema_text("    " + field)))
    assert "Bad.json:5:" in str(error)
    assert str(error).endswith(message)
