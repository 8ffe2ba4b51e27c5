"""Fuzzing message schemas (Hypothesis, fixed budget: tests/robustness/fuzzing.py):
`spec.schema.load_schema` returns a MessageSchema or raises SchemaError naming the file (and line
and column)."""

import json
import re
from pathlib import Path

from hypothesis import event, given
from hypothesis import strategies as st

from spec.schema import MessageSchema, SchemaError, load_schema

from fuzzing import INPUTS, SCHEMAS, budget, byte_mutations, outcome


SEED_SCHEMAS = {path.stem: path.read_text(encoding="utf-8") for path in sorted(SCHEMAS.glob("*.json"))}
SCHEMA_TOKENS = [
    "{", "}", "[", "]", ",", ":", "N", "null", "true", "false", "0", "-1", "1.5", "1e999", "9" * 5000, "0x7fffffff",
    '"name"', '"type"', '"fields"', '"versions"', '"default"', '"nullableVersions"', '"commonStructs"', '"apiKey"', '"about"', '"entityType"',
    '"request"', '"response"', '"data"', '"int8"', '"int16"', '"int32"', '"int64"', '"uint16"', '"float64"', '"bool"', '"string"',
    '"bytes"', '"records"', '"uuid"', '"[]int32"', '"[]Foo"', '"Foo"', '"[][]int32"', '"0+"', '"null"', '"-1"', '"0x10"', '"' + "1" * 5000 + '"',
    '"\\ud800"', '"\\u0000"', '"\\x"', "//", "/*", "*/", "\n", "\t", "\ufeff", "\udcff", "\x00", "é", "\u2028",
    '"fields": [' * 300, "[" * 3000, '{"a":' * 3000, '{ "name": "X", "type": "X", "versions": "0+", "fields": [' * 60,
]


@st.composite
def schema_text_mutations(draw) -> tuple[str, bytes]:
    """A shipped schema file with a few token-level edits (or byte-level ones: invalid UTF-8)."""
    stem = draw(st.sampled_from(sorted(SEED_SCHEMAS)))
    text = SEED_SCHEMAS[stem]
    if draw(st.integers(0, 4)) == 0:
        return stem, draw(byte_mutations(text.encode("utf-8")))
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["insert", "insert", "delete", "replace", "truncate", "text"]))
        if edit == "insert":
            text = text[:where] + draw(st.sampled_from(SCHEMA_TOKENS)) + text[where:]
        elif edit == "delete":
            text = text[:where] + text[where + draw(st.integers(1, 40)) :]
        elif edit == "replace":
            # a quoted string or number replaced by a token
            found = list(re.finditer(r'"(?:[^"\\]|\\.)*"|-?\d+', text))
            if found:
                match = found[draw(st.integers(0, len(found) - 1))]
                text = text[: match.start()] + draw(st.sampled_from(SCHEMA_TOKENS)) + text[match.end() :]
        elif edit == "truncate":
            text = text[:where]
        else:
            text = text[:where] + draw(st.text(max_size=12)) + text[where:]
    return stem, text.encode("utf-8", errors="surrogatepass")


FIELD_TYPES = ["int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string", "bytes", "records", "uuid", "[]int32", "[]string", "Foo", "[]Foo", "Bar", "foo", "[]", ""]
DEFAULTS = st.one_of(
    st.sampled_from(["null", "-1", "0", "true", "false", "0x7f", "0x80", "-0x1", "1.5", "nan", "inf", "abc", "", "9" * 30, "1" * 5000, "00000000-0000-0000-0000-000000000000"]),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@st.composite
def schema_fields(draw, depth: int = 0) -> list:
    fields = []
    for _ in range(draw(st.integers(0, 3))):
        field = {"name": draw(st.sampled_from(["A", "B", "C", "Leader", ""]) | st.integers(0, 3)), "type": draw(st.sampled_from(FIELD_TYPES)), "versions": "0+"}
        if draw(st.booleans()):
            field["default"] = draw(DEFAULTS)
        if draw(st.integers(0, 3)) == 0:
            field["nullableVersions"] = "0+"
        if draw(st.integers(0, 4)) == 0:
            field["about"] = draw(st.text(max_size=10) | st.integers())
        if depth < 3 and draw(st.integers(0, 2)) == 0:
            field["fields"] = draw(schema_fields(depth + 1))
        if draw(st.integers(0, 6)) == 0:
            del field[draw(st.sampled_from(sorted(field)))]
        fields.append(field)
    return fields


@st.composite
def generated_schemas(draw) -> tuple[str, bytes]:
    """Schema documents built field by field: every check of the loader gets its chance."""
    document = {
        "apiKey": draw(st.sampled_from(["@@N@@", 1, -1, 1.5, "1", None, True])),
        "type": draw(st.sampled_from(["request", "response", "data", "header", 1])),
        "name": "Gen",
        "fields": draw(schema_fields()),
    }
    if draw(st.booleans()):
        document["commonStructs"] = [{"name": draw(st.sampled_from(["Foo", "Bar", "foo", 1])), "versions": "0+", "fields": draw(schema_fields(2))} for _ in range(draw(st.integers(0, 2)))]
    if draw(st.integers(0, 4)) == 0:
        del document[draw(st.sampled_from(sorted(document)))]
    text = json.dumps(document, indent=draw(st.sampled_from([None, 2])), allow_nan=True).replace('"@@N@@"', "N")
    if draw(st.booleans()):
        text = "// generated\n" + text.replace("]", ",]").replace("},]", "}, /* trailing */ ]")
    return "Gen", text.encode("utf-8")


def check_schema_contract(workdir: Path, stem: str, data: bytes) -> None:
    """load_schema: a MessageSchema, or a SchemaError naming the file; nothing else."""
    INPUTS["schema"] += 1
    path = workdir / "schemas" / f"{stem}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    try:
        schema = load_schema(path)
    except SchemaError as error:
        assert error.path == path and str(error).startswith(f"{path}:"), str(error)
        event(f"SchemaError {outcome(error.message)}")
        return
    except Exception as error:
        raise AssertionError(f"load_schema raised {type(error).__name__} (not SchemaError): {error}") from error
    assert isinstance(schema, MessageSchema)
    event("accepted")


@budget(500)
@given(mutated=schema_text_mutations())
def test_schema_text_mutations(workdir, mutated):
    check_schema_contract(workdir, *mutated)


@budget(300)
@given(document=generated_schemas())
def test_schema_generated_documents(workdir, document):
    check_schema_contract(workdir, *document)


@budget(200)
@given(text=st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")), raw=st.booleans(), data=st.binary(max_size=300))
def test_schema_random_input(workdir, text, raw, data):
    check_schema_contract(workdir, "Random", data if raw else text.encode("utf-8", errors="surrogatepass"))


@budget(60)
@given(nesting=st.integers(1, 5_000), shape=st.sampled_from(["arrays", "objects", "fields"]))
def test_schema_deep_nesting(workdir, nesting, shape):
    if shape == "arrays":
        text = "[" * nesting + "]" * nesting
    elif shape == "objects":
        text = '{"a":' * nesting + "0" + "}" * nesting
    else:  # structs within structs: the loader's own recursion
        inner = '{"name":"A","type":"S%d","versions":"0+","fields":['
        text = '{"name":"Deep","type":"data","fields":[' + "".join(inner % i for i in range(nesting)) + "]}" * nesting + "]}"
    check_schema_contract(workdir, "Deep", text.encode())
