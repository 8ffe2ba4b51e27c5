"""Fuzzing subprocess replies (Hypothesis, fixed budget: tests/robustness/fuzzing.py):
`SubprocessAdapter._decode` returns a reply of the asked type or raises AdapterError (the
implementation said `"ok": false`) or the module's `_Invalid`."""

import json
import tempfile

import msgspec
from hypothesis import event, given
from hypothesis import strategies as st

from adapters import subprocess_adapter
from adapters.contract import AdapterError
from adapters.subprocess_adapter import SubprocessAdapter

from fuzzing import INPUTS, JSON_VALUES, SEED_TRACES, PROTOCOL, budget, byte_mutations, outcome, render_json, structural_mutation, words_of


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
            if keys <= {"lacks", "protocol", "implementation", "timing"}:  # the reply to start (or to reset, stop)
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
