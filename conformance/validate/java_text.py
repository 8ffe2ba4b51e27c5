"""Kafka's messages as its log writes them: the toString of the generated message classes
(`VoteRequestData(clusterId='x', topics=[TopicData(...)])`), read back into plain values: an
object is a dict with its class name under "_type" and its fields by name, a list a list, every
other value the text as written (numbers are converted by who reads them, knowing the field).

A long run logs tens of thousands of messages of a few shapes. So a line's numbers and quoted
strings are taken out, what is left (its shape) is rewritten into a JSON template once, and the
values are put back into the template and read by the json module: all at C speed, but the
rewriting of each new shape. The generated classes write only `Name(field=value, ...)`, lists,
quoted strings and bare values, which is all the rewriting needs."""

import functools
import json
import re

_BUFFER = re.compile(r"buffer=java\.nio\.\w+\[[^\]]*\]")  # a ByteBuffer's toString, brackets and '=' inside
# Captured, so that a split gives shape, value, shape, ...; each branch starts with a character
# of its own (not "-?"), so the engine skips to the next [-0-9'] instead of trying every position.
_VALUE = re.compile(r"(-\d+|\d+|'[^'\\]*')")
SLOT = "\x01"
_REWRITES = (
    (re.compile(r"([A-Za-z_][\w.$]*)\(\)"), r'{"_type":"\1"}'),  # an object without fields
    (re.compile(r"([A-Za-z_][\w.$]*)\("), r'{"_type":"\1",'),  # an object
    (re.compile(r"\)"), "}"),
    (re.compile(r"(\w+)="), r'"\1":'),  # a field
    (re.compile(r'([:\[,]\s*)([^\s"{\[\],}][^,}\]]*)'), r'\1"\2"'),  # a bare value (a slot too): as written, a string
)
_DECODER = json.JSONDecoder()


class JavaTextError(ValueError):
    """Text that is not a toString this module reads."""


Value = dict | list | str


@functools.lru_cache(maxsize=4096)
def _template(shape: str) -> tuple[str, ...]:
    """A shape's JSON, cut at its slots."""
    rewritten = shape
    for pattern, replacement in _REWRITES:
        rewritten = pattern.sub(replacement, rewritten)
    return tuple(rewritten.split(SLOT))


def read_value(text: str) -> Value:
    """The value `text` starts with (what follows it is ignored)."""
    plain = _BUFFER.sub("buffer=_", text) if "buffer=java.nio" in text else text
    pieces = _VALUE.split(plain)
    values = pieces[1::2]
    parts = _template(SLOT.join(pieces[0::2]))
    if len(parts) != len(values) + 1:
        raise JavaTextError("a value the shape does not hold")
    filled = [parts[0]]
    for value, part in zip(values, parts[1:]):
        filled += (json.dumps(value[1:-1])[1:-1] if value[0] == "'" else value, part)
    try:
        found, _ = _DECODER.raw_decode("".join(filled))
    except ValueError as error:
        raise JavaTextError(f"not a message's toString ({error.msg} at character {error.pos})") from None
    return found
