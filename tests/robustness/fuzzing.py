"""What the fuzzing tests share (tests/robustness/test_fuzz_*.py, one file per boundary where
untrusted input becomes values: trace files, subprocess replies, message schemas, the command
line, scenario files, kept searches): the fixed budget, the seeds' locations, the count of inputs
tried, and the mutations of bytes and JSON documents.

The budget is fixed and the runs are derandomized without an example database, so CI is
deterministic: the same inputs every run (for the same corpus and schemas, which seed the
mutations). After each fuzzing file, tests/robustness/conftest.py prints how many inputs each
of its targets was given (INPUTS); with `--hypothesis-show-statistics` every test also shows how
its inputs ended (accepted, or which error), to see that the mutations reach past the first check.
"""

import collections
import json
import re
from collections.abc import Callable
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

import spec.trace as traces

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


def outcome(error: object, path: Path | None = None) -> str:
    """The kind of a rejection, for Hypothesis's statistics (--hypothesis-show-statistics)."""
    text = str(error)
    if path is not None:
        text = text.removeprefix(str(path))
    return re.sub(r"\d+|'[^']*'|\"[^\"]*\"|`[^`]*`|\(.*", "#", text)[:60]


def read_or_refusal(reader: Callable[[Path], object], path: Path, refusal: type[Exception], kinds: type | tuple[type, ...]) -> object | None:
    """What `reader` makes of the file: a value of `kinds`, or None where it refused with `refusal`,
    its message starting with the path; any other outcome fails the test."""
    name = getattr(reader, "__name__", "read")
    try:
        result = reader(path)
    except refusal as error:
        assert str(error).startswith(str(path)), f"{name}: the message does not start with the path: {error}"
        event(f"{name}: {refusal.__name__} {outcome(error, path)}")
        return None
    except Exception as error:
        raise AssertionError(f"{name} raised {type(error).__name__} (not {refusal.__name__}): {error}") from error
    assert isinstance(result, kinds)
    event(f"{name}: accepted")
    return result


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
