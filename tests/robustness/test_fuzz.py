"""Fuzzing the six boundaries where untrusted input becomes values (Hypothesis, fixed budget).

1. trace files: `spec.trace.read` / `read_header` return a Trace / Header or raise a TraceError
   whose message starts with the file's path; a trace they accept encodes again (JSON Lines and
   MessagePack) without raising;
2. subprocess replies: `SubprocessAdapter._decode` returns a reply of the asked type or raises
   AdapterError (the implementation said `"ok": false`) or the module's `_Invalid`;
3. message schemas: `spec.schema.load_schema` returns a MessageSchema or raises SchemaError
   naming the file (and line and column);
4. the command line: `build_parser().parse_args` returns a Namespace or exits with argparse's
   usage error (2), and `check`'s configuration layer (`configs.resolve`) returns a config or
   raises ConfigError. Commands are parsed, never run;
5. scenario files: `conformance.scenario.parser.read` returns a Scenario or ClusterScenario or
   raises a ScenarioError whose message starts with the file's path;
6. kept searches: `check --resume` of a kept smoke search with one of its files mutated resumes
   to the exact count (873 with one worker and the default reading, 1,041 with two and every
   choice) or says "damaged: FILE", exit 2; never a traceback, never another count.

The budget is fixed and the runs are derandomized without an example database, so CI is
deterministic: the same inputs every run (for the same corpus and schemas, which seed the
mutations). `test_zz_inputs_tried` prints how many inputs each target was given; with
`--hypothesis-show-statistics` every test also shows how its inputs ended (accepted, or which
error), to see that the mutations reach past the first check.
"""

import argparse
import collections
import contextlib
import functools
import io
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import spec.trace as traces
from adapters import subprocess_adapter
from adapters.contract import AdapterError
from adapters.subprocess_adapter import SubprocessAdapter
from conformance import cli
from conformance.cli import build_parser
from conformance.commands import check as check_command
from conformance.scenario import parser as scenario_parser
from conformance.explore import configs
from conformance.explore.kept import LOCK
from model.config import ConfigError
from spec.schema import MessageSchema, SchemaError, load_schema

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "traces"
SCHEMAS = ROOT / "spec" / "schemas"
PROTOCOL = ROOT / "spec" / "subprocess-protocol.md"

INPUTS: collections.Counter[str] = collections.Counter()  # inputs tried, per target


def budget(examples: int) -> settings:
    """A fixed, deterministic budget: the same inputs on every run, no example database."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example, HealthCheck.filter_too_much],
    )


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="kraftcheck-fuzz-") as directory:
        yield Path(directory)


# -- mutation helpers --------------------------------------------------------------------------

NASTY_BYTES = [
    b"\xff",
    b"\xc3\x28",  # invalid continuation
    b"\xed\xa0\x80",  # a UTF-8-encoded surrogate
    b"\xc0\x80",  # overlong NUL
    b"\x00",
    b"\n",
    b"\r\n",
    b'"',
    b"\\",
    b"\\ud800",
    b"\\u0000",
    b"{}",
    b"[]",
    b",",
    b":",
    b"null",
    b"true",
    b"-0",
    b"1e999",
    b"NaN",
    b"Infinity",
    b"18446744073709551616",  # 2**64
    b"-9223372036854775809",  # -2**63 - 1
    b"9" * 40,
    b"1" * 5000,  # beyond Python's int-from-string limit
    b"[" * 3000,
    b'{"a":' * 3000,
    # MessagePack: never-used byte, huge array/str/map lengths, 64-bit ints, ext, a non-UTF-8 str, deep arrays
    b"\xc1",
    b"\xdd\xff\xff\xff\xff",
    b"\xdb\xff\xff\xff\xff",
    b"\xdf\xff\xff\xff\xff",
    b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00",
    b"\xc7\x05\x01abcde",
    b"\xd9\x02\xff\xfe",
    b"\x91" * 3000 + b"\xc0",
]


@st.composite
def byte_mutations(draw, data: bytes) -> bytes:
    """A few byte-level edits: flips, cuts, insertions (random or nasty), deletions, duplications."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.integers(0, len(out)))
        edit = draw(st.sampled_from(["flip", "truncate", "insert", "nasty", "delete", "duplicate"]))
        if edit == "flip" and out:
            where = min(where, len(out) - 1)
            out[where] ^= draw(st.integers(1, 255))
        elif edit == "truncate":
            del out[where:]
        elif edit == "insert":
            out[where:where] = draw(st.binary(min_size=1, max_size=16))
        elif edit == "nasty":
            out[where:where] = draw(st.sampled_from(NASTY_BYTES))
        elif edit == "delete":
            del out[where : where + draw(st.integers(1, 64))]
        elif edit == "duplicate":
            end = min(len(out), where + draw(st.integers(1, 256)))
            out[end:end] = out[where:end]
    return bytes(out)


# Raw JSON text put in place of a value (it cannot be built as a Python value and dumped:
# dumping deep nesting recurses, and these are exactly the texts decoders choke on).
RAW_JSON = st.one_of(
    st.integers(1, 20_000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 20_000).map(lambda n: '{"a":' * n + "0" + "}" * n),
    st.integers(1, 8_000).map(lambda n: "9" * n),
    st.integers(1, 8_000).map(lambda n: "-" + "9" * n),
    st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1.5", "-0", "0.0", '"\\ud800"', '"\\u0000"', '"\xff\xfe"', "18446744073709551616", "-9223372036854775809"]),
)

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "FetchRequest", "VoteResponse", "Record", "Send", "request", "response", "timer", "leader", "isr", "kraftcheck-trace"]),
)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)


def value_paths(value, prefix=()):
    """Every place in a JSON value: the root, each object member and each array item."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from value_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from value_paths(item, (*prefix, index))


@st.composite
def similar_value(draw, value, words: list[str]):
    """A value of the same kind, near the original: what a slightly wrong writer produces."""
    if isinstance(value, bool):
        return draw(st.booleans())
    if isinstance(value, int):
        return draw(st.integers(-3, 5) | st.sampled_from([value + 1, value - 1, -value, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1]))
    if isinstance(value, float):
        return draw(st.floats())
    if isinstance(value, str):
        return draw(st.sampled_from(words) | st.text(max_size=8))
    if isinstance(value, list):
        edit = draw(st.sampled_from(["cut", "repeat", "reverse", "empty"]))
        if edit == "cut":
            return value[: draw(st.integers(0, len(value)))]
        if edit == "repeat":
            return value + value[:1] if value else [draw(JSON_SCALARS)]
        return value[::-1] if edit == "reverse" else []
    if isinstance(value, dict) and value:
        return {key: item for key, item in value.items() if key != draw(st.sampled_from(sorted(value)))}
    return draw(JSON_SCALARS)


@st.composite
def structural_mutation(draw, document, words: list[str], values=JSON_VALUES, raw=RAW_JSON):
    """One JSON value with a few members replaced by similar or random values (or raw texts),
    deleted or added. `words` are keys and strings of valid documents.

    Returns (value, raw texts): a string "@@RAW<i>@@" in the value stands for raw text i
    (never when `raw` is None).
    """
    document = json.loads(json.dumps(document))  # a private copy
    raws: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        paths = list(value_paths(document))
        path = draw(st.sampled_from(paths))
        edit = draw(st.sampled_from(["similar", "similar", "replace", "delete", "add"] + (["raw"] if raw is not None else [])))
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        old = parent[path[-1]] if path else document
        if edit in ("similar", "replace", "raw"):
            if edit == "raw":
                raws.append(draw(raw))
                new = f"@@RAW{len(raws) - 1}@@"
            elif edit == "similar":
                new = draw(similar_value(old, words))
            else:
                new = draw(values)
            if path:
                parent[path[-1]] = new
            else:
                document = new
        elif edit == "delete" and path:
            del parent[path[-1]]
        elif edit == "add" and isinstance(old, dict):
            old[draw(st.sampled_from(words) | st.text(max_size=8))] = draw(values)
        elif edit == "add" and isinstance(old, list):
            old.insert(draw(st.integers(0, len(old))), draw(values))
    return document, raws


def words_of(documents) -> list[str]:
    """The keys and short strings of some JSON values, sorted (for deterministic draws)."""
    found = set()
    for document in documents:
        for path in value_paths(document):
            found.update(key for key in path if isinstance(key, str))
            value = document
            for key in path:
                value = value[key]
            if isinstance(value, str) and len(value) < 40:
                found.add(value)
    return sorted(found)


def render_json(document, raws: list[str], ensure_ascii: bool) -> bytes:
    text = json.dumps(document, allow_nan=True, ensure_ascii=ensure_ascii, sort_keys=False)
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"@@RAW{index}@@"), raw)
    return text.encode("utf-8", errors="surrogatepass")


# -- 1. trace files ----------------------------------------------------------------------------


def seed_traces() -> list[traces.Trace]:
    """Small valid traces of every kind the corpus ships: for each family (cell, deep, diverge,
    ISR, walks) its two smallest files, walks cut down to their first steps."""
    families: dict[str, list[Path]] = collections.defaultdict(list)
    for path in sorted(CORPUS.glob("*.jsonl")):
        families[re.sub(r"-\d{4}-.*", "", path.name)].append(path)
    seeds = []
    for family, paths in sorted(families.items()):
        for path in sorted(paths, key=lambda p: (p.stat().st_size, p.name))[:2]:
            trace = traces.read(path)
            if len(trace.steps) > 12:
                header = msgspec.structs.replace(trace.header, steps=12)
                trace = traces.Trace(header=header, steps=trace.steps[:12])
            seeds.append(trace)
    return seeds


SEED_TRACES = seed_traces()
SEED_JSONL = [traces.to_jsonl(trace) for trace in SEED_TRACES]
SEED_MSGPACK = [traces.to_msgpack(trace) for trace in SEED_TRACES]
TRACE_WORDS = words_of(json.loads(line) for data in SEED_JSONL for line in data.splitlines())


def outcome(error: object, path: Path | None = None) -> str:
    """The kind of a rejection, for Hypothesis's statistics (--hypothesis-show-statistics)."""
    text = str(error)
    if path is not None:
        text = text.removeprefix(str(path))
    return re.sub(r"\d+|'[^']*'|\"[^\"]*\"|`[^`]*`|\(.*", "#", text)[:60]


def check_trace_contract(path: Path, data: bytes) -> None:
    """read and read_header: a Trace/Header, or a TraceError starting with the path; nothing else."""
    INPUTS["trace"] += 1
    path.write_bytes(data)
    for reader, kind in ((traces.read, traces.Trace), (traces.read_header, traces.Header)):
        try:
            result = reader(path)
        except traces.TraceError as error:
            assert str(error).startswith(str(path)), f"{reader.__name__}: the message does not start with the path: {error}"
            event(f"{reader.__name__}: TraceError {outcome(error, path)}")
            continue
        except Exception as error:
            raise AssertionError(f"{reader.__name__} raised {type(error).__name__} (not TraceError): {error}") from error
        assert isinstance(result, kind)
        event(f"{reader.__name__}: accepted")
        if isinstance(result, traces.Trace):
            traces.to_jsonl(result)
            traces.to_msgpack(result)


@budget(250)
@given(data=st.binary(max_size=2048), suffix=st.sampled_from([".jsonl", ".msgpack", ".trace"]))
def test_trace_random_bytes(workdir, data, suffix):
    check_trace_contract(workdir / f"random{suffix}", data)


@budget(400)
@given(data=st.sampled_from(SEED_JSONL).flatmap(byte_mutations))
def test_trace_jsonl_byte_mutations(workdir, data):
    check_trace_contract(workdir / "mutated.jsonl", data)


@st.composite
def jsonl_field_mutations(draw) -> bytes:
    """A shipped trace with random JSON values (or raw texts: deep nesting, huge integers,
    invalid UTF-8) in place of fields, fields deleted, unknown fields added, lines dropped."""
    lines = [json.loads(line) for line in draw(st.sampled_from(SEED_JSONL)).splitlines()]
    index = draw(st.integers(0, len(lines) - 1))
    lines[index], raws = draw(structural_mutation(lines[index], TRACE_WORDS))
    ensure_ascii = draw(st.booleans())
    rendered = [render_json(line, raws if number == index else [], ensure_ascii) for number, line in enumerate(lines)]
    if draw(st.booleans()) and len(rendered) > 1:
        del rendered[draw(st.integers(1, len(rendered) - 1))]  # a missing step line
    return b"\n".join(rendered) + draw(st.sampled_from([b"\n", b"\n", b"", b"\n\n", b"\r\n"]))


@budget(400)
@given(data=jsonl_field_mutations())
def test_trace_jsonl_field_mutations(workdir, data):
    check_trace_contract(workdir / "fields.jsonl", data)


@budget(200)
@given(
    nesting=st.integers(1, 200_000),
    line=st.sampled_from(["header", "step"]),
    opener=st.sampled_from(["[", '{"a":', '{"kind":']),
)
def test_trace_deep_nesting(workdir, nesting, line, opener):
    closer = "]" if opener == "[" else "}"
    deep = (opener * nesting + "0" + closer * nesting).encode()
    seed = SEED_JSONL[0].splitlines()
    lines = [deep] + seed[1:] if line == "header" else [seed[0], deep]
    check_trace_contract(workdir / "deep.jsonl", b"\n".join(lines) + b"\n")
    check_trace_contract(workdir / "deep.msgpack", b"\x91" * nesting + b"\xc0")


def msgpack_safe(value):
    """JSON values made encodable as MessagePack (integers clamped to its 64-bit range)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return max(-(2**63), min(value, 2**64 - 1))
    if isinstance(value, list):
        return [msgpack_safe(item) for item in value]
    if isinstance(value, dict):
        return {key: msgpack_safe(item) for key, item in value.items()}
    return value


MSGPACK_VALUES = st.one_of(JSON_VALUES, st.binary(max_size=8), st.sampled_from([b"", 2**64 - 1, -(2**63)]))


@st.composite
def msgpack_mutations(draw) -> bytes:
    """A shipped trace as MessagePack, its bytes mutated or its structure (values of any type)."""
    index = draw(st.integers(0, len(SEED_TRACES) - 1))
    if draw(st.booleans()):
        return draw(byte_mutations(SEED_MSGPACK[index]))
    document = msgspec.to_builtins(SEED_TRACES[index])
    mutated, _ = draw(structural_mutation(document, TRACE_WORDS, values=MSGPACK_VALUES.map(msgpack_safe), raw=None))
    return msgspec.msgpack.encode(msgpack_safe(mutated))


@budget(400)
@given(data=msgpack_mutations())
def test_trace_msgpack_mutations(workdir, data):
    check_trace_contract(workdir / "mutated.msgpack", data)


def test_trace_seeds_are_valid(workdir):
    """The mutations start from valid traces (else they would only test the first check)."""
    for number, (jsonl, packed) in enumerate(zip(SEED_JSONL, SEED_MSGPACK)):
        (workdir / f"seed{number}.jsonl").write_bytes(jsonl)
        (workdir / f"seed{number}.msgpack").write_bytes(packed)
        assert traces.read(workdir / f"seed{number}.jsonl") == traces.read(workdir / f"seed{number}.msgpack")


# -- 2. subprocess replies ---------------------------------------------------------------------

REPLY_TYPES = [
    subprocess_adapter._Reply,
    subprocess_adapter._InputReply,
    subprocess_adapter._IsrInputReply,
    subprocess_adapter._DrainReply,
    subprocess_adapter._ObserveReply,
]
COMMANDS = ["start", "request", "response", "timer", "append", "resign", "crash", "restart", "fetch_next", "drain", "observe"]


def seed_replies() -> list[tuple[type, bool, bytes]]:
    """Valid replies (type, ISR session, line): the protocol document's examples, and replies
    built from the seed traces' expected outputs and states, as an implementation would send them."""
    replies = []
    for line in PROTOCOL.read_text().splitlines():
        if line.startswith('{"ok":true'):
            raw = json.loads(line)
            keys = set(raw) - {"ok"}
            if keys <= {"lacks", "protocol", "implementation"}:  # the reply to start (or to reset, stop)
                replies.append((subprocess_adapter._Reply, False, line.encode()))
            elif "sends" in keys:
                replies.append((subprocess_adapter._DrainReply, False, line.encode()))
            elif "state" in keys:
                replies.append((subprocess_adapter._ObserveReply, "isr" in raw["state"], line.encode()))
            elif "alter_isr" in keys:
                replies.append((subprocess_adapter._IsrInputReply, True, line.encode()))
            else:
                replies.append((subprocess_adapter._InputReply, False, line.encode()))
    for trace in SEED_TRACES:
        isr = trace.header.system == "isr"
        for step in trace.steps:
            expect = step.expect
            answer = {"ok": True, "response": expect.response, "append_result": expect.append_result, "shutdown": expect.shutdown}
            if isr:
                answer["alter_isr"] = expect.alter_isr
            replies.append((subprocess_adapter._IsrInputReply if isr else subprocess_adapter._InputReply, isr, msgspec.json.encode(answer)))
            replies.append((subprocess_adapter._DrainReply, isr, msgspec.json.encode({"ok": True, "sends": expect.sends})))
            replies.append((subprocess_adapter._ObserveReply, isr, msgspec.json.encode({"ok": True, "state": step.state})))
    return sorted(set(replies), key=lambda reply: (len(reply[2]), reply[2], reply[0].__name__, reply[1]))


SEED_REPLIES = seed_replies()
REPLY_WORDS = words_of([json.loads(line) for _, _, line in SEED_REPLIES] + [{"error": ""}])


def new_adapter(isr: bool) -> SubprocessAdapter:
    adapter = SubprocessAdapter("true")  # no process is started: _decode only decodes
    adapter._isr = isr
    adapter._stderr = tempfile.TemporaryFile()  # in case a path quotes the stderr tail
    return adapter


def check_reply_contract(command: str, line: bytes, reply_type: type, isr: bool) -> None:
    """A reply of the asked type, AdapterError or _Invalid; nothing else."""
    INPUTS["reply"] += 1
    adapter = new_adapter(isr)
    try:
        reply = adapter._decode(command, line, reply_type)
    except (AdapterError, subprocess_adapter._Invalid) as error:
        event(f"{type(error).__name__} {outcome(error)}")
        return
    except Exception as error:
        raise AssertionError(f"_decode raised {type(error).__name__} (not AdapterError or _Invalid): {error}") from error
    finally:
        adapter._stderr.close()
    assert isinstance(reply, reply_type)
    event("accepted")


def test_reply_seeds_are_valid():
    assert len(SEED_REPLIES) >= 20
    for reply_type, isr, line in SEED_REPLIES:
        adapter = new_adapter(isr)
        with adapter._stderr:
            assert isinstance(adapter._decode("step", line, reply_type), reply_type), line


@st.composite
def replies(draw) -> tuple[type, bool, bytes]:
    """(reply type, ISR session, line): a valid reply mutated, mostly decoded as its own type."""
    reply_type, isr, line = draw(st.sampled_from(SEED_REPLIES))
    if draw(st.integers(0, 4)) == 0:
        reply_type = draw(st.sampled_from(REPLY_TYPES))
    if draw(st.integers(0, 4)) == 0:
        isr = not isr
    edit = draw(st.sampled_from(["bytes", "fields", "fields", "fields", "random json", "random bytes"]))
    if edit == "bytes":
        line = draw(byte_mutations(line))
    elif edit == "fields":
        document, raws = draw(structural_mutation(json.loads(line), REPLY_WORDS))
        line = render_json(document, raws, draw(st.booleans()))
    elif edit == "random json":
        line = render_json(draw(JSON_VALUES), [], draw(st.booleans()))
    else:
        line = draw(st.binary(max_size=512))
    return reply_type, isr, line


@budget(600)
@given(reply=replies(), command=st.sampled_from(COMMANDS))
def test_reply_decoding(reply, command):
    reply_type, isr, line = reply
    check_reply_contract(command, line, reply_type, isr)


@budget(150)
@given(
    nesting=st.integers(1, 200_000),
    opener=st.sampled_from(['{"ok":true,"response":', '{"ok":true,"sends":', '{"ok":true,"state":', "", '{"ok":true,"response":{"type":"FetchResponse","Records":']),
    reply_type=st.sampled_from(REPLY_TYPES),
    isr=st.booleans(),
)
def test_reply_deep_nesting(nesting, opener, reply_type, isr):
    closer = "}" if opener else ""
    closer += "}" if "Records" in opener else ""
    line = (opener + "[" * nesting + "]" * nesting + closer).encode()
    check_reply_contract("observe", line, reply_type, isr)


# -- 3. message schemas ------------------------------------------------------------------------

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


# -- 4. the command line -----------------------------------------------------------------------

SUBCOMMANDS = [["rules"], ["check"], ["check"], ["check"], ["simulate"], ["traces", "generate"], ["traces", "schema"], ["traces", "show"], ["certify"], ["mutants"], ["traces"], []]


def parser_actions() -> dict[tuple[str, ...], list[argparse.Action]]:
    """The optional arguments of every sub-command, as the parser itself declares them (help aside)."""
    found: dict[tuple[str, ...], list[argparse.Action]] = {}

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        found[prefix] = [action for action in parser._actions if action.option_strings and not isinstance(action, argparse._HelpAction)]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*prefix, name))

    walk(build_parser(), ())
    return found


ACTIONS = parser_actions()
ALL_OPTIONS = sorted({option for actions in ACTIONS.values() for action in actions for option in action.option_strings})
CONFIG_NAMES = sorted(configs.named_configs())
VALUES = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["0", "1", "-1", "2", "3", "16", "17", "-0", "nan", "NaN", "inf", "-inf", "infinity", "1e9", "1e400", "0x10", "1_000", " 3", "3 ", "", "-", "--", "=", "abc", "∞", "３", "٣", "\x00", "\ud800", "9" * 5000]),
    st.sampled_from(CONFIG_NAMES + ["smoke", "custom", "nope"]),
    st.sampled_from(["kip595", "kip595-literal-diverging", "faulty-forget-vote", "kraft", "isr", "hw", "epoch", "reference", "mutant:x", "subprocess:true", "traces/", "/nonexistent"]),
    st.text(max_size=12),
)


@st.composite
def option_value(draw, action: argparse.Action, typed: bool = False) -> str:
    """A value for an option: one of its type (or choices), or (unless typed) sometimes anything."""
    if not typed and draw(st.integers(0, 3)) == 0:
        return draw(VALUES)
    if action.choices:
        return draw(st.sampled_from(sorted(action.choices)))
    if action.type is int:
        return str(draw(st.integers(-3, 20) | st.integers()))
    if action.type is float:
        return draw(st.floats().map(repr) | st.sampled_from(["nan", "inf", "-inf", "0", "3600", "3601", "1e-9"]))
    return draw(VALUES)


@st.composite
def argvs(draw) -> list[str]:
    """A sub-command, its required options, then options of it (values of their type; unless
    the argv is a clean one, also any values), options of other commands, `--opt=value` forms,
    stray values and noise."""
    argv = list(draw(st.sampled_from(SUBCOMMANDS)))
    clean = draw(st.booleans())  # only the sub-command's own options, with values of their type
    actions = ACTIONS.get(tuple(argv), [])
    for action in actions:
        if action.required and draw(st.integers(0, 5)):
            argv += [draw(st.sampled_from(action.option_strings)), draw(option_value(action, clean))]
    if argv == ["traces", "show"] and draw(st.integers(0, 5)):
        argv.append(draw(VALUES))  # its positional FILE
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["own", "joined"] if clean else ["own", "own", "own", "own", "value", "joined", "foreign", "noise"]))
        if kind in ("own", "joined") and actions:
            action = draw(st.sampled_from(actions))
            option = draw(st.sampled_from(action.option_strings))
            if action.nargs == 0 and (clean or draw(st.integers(0, 5))):
                argv.append(option)
            elif kind == "joined":
                argv.append(f"{option}={draw(option_value(action, clean))}")
            else:
                argv += [option, draw(option_value(action, clean))]
        elif kind == "foreign":
            argv.append(draw(st.sampled_from(ALL_OPTIONS)))
        elif kind == "noise":
            argv.append(draw(st.text(max_size=8)))
        else:
            argv.append(draw(VALUES))
    return argv


def asks_for_help(argv: list[str]) -> bool:
    """Whether a token is -h or an abbreviation of --help (argparse then exits 0 after printing help)."""
    for token in argv:
        if token.startswith("-h") or (len(token) >= 3 and "--help".startswith(token.split("=")[0])):
            return True
    return False


def asks_for_version(argv: list[str]) -> bool:
    """Whether a token is --version or an abbreviation of it (argparse then prints it and exits 0)."""
    return any(len(token) >= 3 and "--version".startswith(token.split("=")[0]) for token in argv)


def check_resolve_contract(resolve: Callable[[], object], shown: str) -> None:
    """resolve: a config, or ConfigError; nothing else."""
    INPUTS["config"] += 1
    try:
        config = resolve()
    except ConfigError as error:
        event(f"ConfigError {outcome(error)}")
        return
    except Exception as error:
        raise AssertionError(f"{shown} raised {type(error).__name__} (not ConfigError): {error}") from error
    if isinstance(config, tuple):  # (name, config), as the command resolves it
        config = config[1]
    assert isinstance(config, configs.CheckConfig | configs.IsrCheckConfig)
    event("config accepted")


@budget(600)
@given(argv=argvs())
def test_command_line(argv):
    INPUTS["cli"] += 1
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit as exit:
        event(f"exit {exit.code}")
        if exit.code == 0:
            helped = asks_for_help(argv) and out.getvalue().startswith("usage:")
            versioned = asks_for_version(argv) and re.fullmatch(r"kraftcheck \S+\n", out.getvalue()) is not None
            assert helped or versioned, (argv, out.getvalue()[:200])
        else:
            assert exit.code == 2, (argv, exit.code, err.getvalue()[-300:])
            assert "error:" in err.getvalue(), (argv, err.getvalue()[-300:])
        return
    except Exception as error:
        raise AssertionError(f"parse_args({argv!r}) raised {type(error).__name__} (not SystemExit): {error}") from error
    assert isinstance(args, argparse.Namespace) and callable(args.run)
    event(f"parsed: {args.command}")
    if args.command == "check":  # as the command resolves it, without running the check
        check_resolve_contract(lambda: check_command.configuration(args), f"configuration({argv!r})")


OVERRIDE_VALUES = {
    # the values argparse can hand over: int options, string options, BooleanOptionalAction flags
    **{key: st.none() | st.integers() | st.integers(-(2**70), 2**70) | st.sampled_from([0, 1, 16, 17, -1, 2**63]) for key in
       ("voters", "observers", "client_values", "max_epoch", "max_in_flight", "max_elections", "fetch_max_records", "max_crashes", "replicas", "min_isr")},
    **{key: st.none() | st.booleans() for key in ("loss", "duplication", "resign", "retries", "symmetry", "unflushed_loss")},
    "profile": st.none() | st.sampled_from(["kip595", "kip595-literal-diverging", "faulty-hw-any-epoch", "isr"]) | st.text(max_size=10),
    "truncation": st.none() | st.sampled_from(["hw", "epoch", "", "EPOCH"]) | st.text(max_size=6),
}


@budget(500)
@given(
    name=st.none() | st.sampled_from(CONFIG_NAMES) | st.text(max_size=10),
    overrides=st.fixed_dictionaries({}, optional=OVERRIDE_VALUES),
)
def test_check_configuration(name, overrides):
    check_resolve_contract(lambda: configs.resolve(name, overrides), f"resolve({name!r}, {overrides!r})")


@pytest.mark.parametrize(
    "overrides",
    [{"voters": "3"}, {"voters": 3.5}, {"min_isr": "1"}, {"loss": "yes"}, {"voters": True}],
    ids=["voters-str", "voters-float", "min_isr-str", "loss-str", "voters-bool"],
)
def test_check_configuration_of_the_wrong_type(overrides):
    with pytest.raises(ConfigError, match="Expected `(int|bool)`"):
        configs.resolve(None, overrides)


# -- 5. scenario files -------------------------------------------------------------------------

SEED_SCENARIOS = [path.read_bytes() for path in sorted((CORPUS / "scenarios").glob("*.scenario"))[::8]]
HOSTILE_TOKENS = {  # a token of the scenario language -> hostile ones of its kind
    rb"-?\b[0-9]+\b": [b"18446744073709551616", b"18446744073709551615", b"-9223372036854775809", b"9" * 5000, b"-1"],
    rb'"[^"\n]*"': [b'"../../x"', b'"a/b"', b'""', b'".hidden"', b'"\\u0000"', b'"\\ud800"', b'"' + b"n" * 300 + b'"'],
    rb"e-?[0-9]+\[[0-9]+\.\.[0-9]+\]": [b"e1[0..100000000]", b"e1[0..18446744073709551616]", b"e99999999999999999999[0..1]", b"e1[5..2]"],
    rb"\[": [b"[" * 3000],
}


@st.composite
def scenario_mutations(draw) -> bytes:
    """A library scenario with a few tokens replaced by hostile ones of the same kind (numbers
    beyond 64 bits, huge epoch ranges, names that are paths, lone surrogates, deep nesting), so
    that most still parse up to them; or its bytes mutated."""
    seed = draw(st.sampled_from(SEED_SCENARIOS))
    if draw(st.booleans()):
        return draw(byte_mutations(seed))
    for _ in range(draw(st.integers(1, 3))):
        pattern = draw(st.sampled_from(sorted(HOSTILE_TOKENS)))
        found = list(re.finditer(pattern, seed))
        if found:
            token = found[draw(st.integers(0, len(found) - 1))]
            seed = seed[: token.start()] + draw(st.sampled_from(HOSTILE_TOKENS[pattern])) + seed[token.end() :]
    return seed


def check_scenario_contract(path: Path, data: bytes) -> None:
    """read: a Scenario or ClusterScenario, or a ScenarioError starting with the path; nothing else."""
    INPUTS["scenario"] += 1
    path.write_bytes(data)
    try:
        result = scenario_parser.read(path)
    except scenario_parser.ScenarioError as error:
        assert str(error).startswith(str(path)), f"the message does not start with the path: {error}"
        event(f"ScenarioError {outcome(error, path)}")
        return
    except Exception as error:
        raise AssertionError(f"read raised {type(error).__name__} (not ScenarioError): {error}") from error
    assert isinstance(result, (scenario_parser.Scenario, scenario_parser.ClusterScenario))
    event("accepted")


@budget(300)
@given(data=scenario_mutations())
def test_scenario_mutations(workdir, data):
    check_scenario_contract(workdir / "mutated.scenario", data)


@budget(100)
@given(data=st.binary(max_size=512))
def test_scenario_random_bytes(workdir, data):
    check_scenario_contract(workdir / "random.scenario", data)


def test_scenario_seeds_are_valid(workdir):
    """The mutations start from scenarios that parse (else they would only test the first check)."""
    for number, seed in enumerate(SEED_SCENARIOS):
        (workdir / f"seed{number}.scenario").write_bytes(seed)
        assert isinstance(scenario_parser.read(workdir / f"seed{number}.scenario"), (scenario_parser.Scenario, scenario_parser.ClusterScenario))


# -- 6. kept searches --------------------------------------------------------------------------

# Per worker count: smoke's options and its states (tests/test_check_configs.py).
KEPT_SMOKE = {1: (["--no-every-choice"], 873), 2: ([], 1_041)}


@functools.cache
def kept_smoke(workdir: Path, workers: int) -> Path:
    """Smoke kept on disk, stopped by --max-states between levels: a search to resume."""
    options, _states = KEPT_SMOKE[workers]
    kept = workdir / f"kept-{workers}"
    argv = ["check", "--config", "smoke", *options, "--workers", str(workers), "--max-states", "300", "--state-dir", str(kept), "--out", str(workdir), "--json"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(argv) == 0
    return kept


def check_kept_contract(workdir: Path, workers: int, name: str, data: bytes) -> None:
    """check --resume with `name` holding `data`: the exact count, or "damaged: FILE" and exit 2."""
    INPUTS["kept"] += 1
    kept = workdir / "kept-mutated"
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(kept_smoke(workdir, workers), kept)
    (kept / name).write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["check", "--resume", str(kept), "--json", "--out", str(workdir)])
    if code == 0:
        summary = json.loads(out.getvalue())
        assert summary["complete"] and summary["distinct_states"] == KEPT_SMOKE[workers][1], (name, summary["distinct_states"])
        event("resumed to the exact count")
        return
    assert code == 2 and not out.getvalue(), (name, code, err.getvalue()[-500:])
    assert err.getvalue().startswith("kraftcheck: damaged: ") and len(err.getvalue().strip().splitlines()) == 1, (name, err.getvalue()[-500:])
    event(f"damaged: {kind_of(name)}")


def kind_of(name: str) -> str:
    """A kept file's kind: its name without numbers (seen-N-N.fps.npy, states-N.bin, ...)."""
    return re.sub(r"[0-9]+", "N", Path(name).name)


@budget(150)
@given(data=st.data())
def test_kept_search_mutations(workdir, data):
    """A kind of file first, then one of that kind: a table's 32 files would crowd out the rest."""
    workers = data.draw(st.sampled_from(sorted(KEPT_SMOKE)))
    original = kept_smoke(workdir, workers)
    names = sorted(str(path.relative_to(original)) for path in original.rglob("*") if path.is_file() and path.name != LOCK)
    kind = data.draw(st.sampled_from(sorted({kind_of(name) for name in names})))
    name = data.draw(st.sampled_from([name for name in names if kind_of(name) == kind]))
    check_kept_contract(workdir, workers, name, data.draw(byte_mutations((original / name).read_bytes())))


# -- the inputs tried --------------------------------------------------------------------------


def test_zz_inputs_tried(capsys):
    """Runs last (file order): how many inputs each target got in this run."""
    line = "fuzz inputs per target: " + ", ".join(f"{target} {count}" for target, count in sorted(INPUTS.items()))
    with capsys.disabled():
        print(f"\n{line}")
