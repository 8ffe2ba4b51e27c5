"""Fuzzing trace files (Hypothesis, fixed budget: tests/robustness/fuzzing.py): `spec.trace.read`
and `read_header` return a Trace / Header or raise a TraceError whose message starts with the
file's path; a trace they accept encodes again (JSON Lines and MessagePack) without raising."""

import json
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

import spec.trace as traces

from fuzzing import INPUTS, JSON_VALUES, SEED_TRACES, budget, byte_mutations, read_or_refusal, render_json, structural_mutation, words_of



SEED_JSONL = [traces.to_jsonl(trace) for trace in SEED_TRACES]
SEED_MSGPACK = [traces.to_msgpack(trace) for trace in SEED_TRACES]
TRACE_WORDS = words_of(json.loads(line) for data in SEED_JSONL for line in data.splitlines())


def check_trace_contract(path: Path, data: bytes) -> None:
    """read and read_header: a Trace/Header, or a TraceError starting with the path; nothing else."""
    INPUTS["trace"] += 1
    path.write_bytes(data)
    for reader, kind in ((traces.read, traces.Trace), (traces.read_header, traces.Header)):
        result = read_or_refusal(reader, path, traces.TraceError, kind)
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
