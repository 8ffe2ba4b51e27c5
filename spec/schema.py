"""Loader for the Kafka-style message schemas in spec/schemas.

The schema files are the single source of the messages' fields and defaults, written
as Kafka and the KIPs write them: JSON with comments and trailing commas. The loader
parses them with the lark grammar in schema.lark, checks what the message types are
built from, and reports every problem as a SchemaError naming file, line and column.
"""

from __future__ import annotations

import json
import pathlib
import re
import uuid
from typing import Any

import lark
import msgspec

_PARSER = lark.Lark(
    (pathlib.Path(__file__).parent / "schema.lark").read_text(encoding="utf-8"),
    parser="lalr",
    propagate_positions=True,
)

INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}
PRIMITIVE_TYPES: frozenset[str] = frozenset(INT_RANGES) | {
    "float64",
    "bool",
    "string",
    "bytes",
    "records",
    "uuid",
}
_NEVER_NULLABLE = frozenset(INT_RANGES) | {"float64", "bool", "uuid"}
_SCALAR_DEFAULTS = frozenset(INT_RANGES) | {"float64", "bool", "string", "uuid"}
_KIND_NAMES: dict[type, str] = {str: "a string", list: "an array", bool: "true or false"}
_MESSAGE_KINDS = ("request", "response", "data")
_INT_LITERAL = re.compile(r"-?(0[xX][0-9a-fA-F]+|[0-9]+)")
_STRUCT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
# Arrays and objects within each other; Kafka's deepest schemas use about a dozen, and the
# checks below recurse once per level.
MAX_NESTING = 100


class SchemaError(Exception):
    """A schema file that cannot be used, with the place to fix it."""

    def __init__(self, path: pathlib.Path, line: int, column: int, message: str) -> None:
        super().__init__(f"{path}:{line}:{column}: {message}")
        self.path = path
        self.line = line
        self.column = column
        self.message = message


class Field(msgspec.Struct, frozen=True, kw_only=True):
    """One field of a message or struct, as the schema file writes it.

    `default` is the parsed "default" value (None when absent or "null"); `fields` are
    the inline struct fields, empty for primitives and for commonStructs references.
    """

    name: str
    type: str
    versions: str
    nullable: bool
    default: int | float | bool | str | None
    about: str
    fields: tuple[Field, ...]
    line: int
    entity_type: str = ""  # Kafka's "entityType": "brokerId" marks node ids (symmetry remaps them)
    added_by: str = ""  # "addedBy": the later KIP that added the field (PreVote: "KIP-996"); a node that predates it may leave it out
    # "omissible": at its default the field is not carried at all (msgspec.UNSET), so traces and
    # commands leave it out, and a node may too: what Kafka's tagged fields and later versions are
    omissible: bool = False

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def item_type(self) -> str:
        """The element type of an array, else the type itself."""
        return self.type.removeprefix("[]")


class StructSchema(msgspec.Struct, frozen=True, kw_only=True):
    """A named struct from "commonStructs", shared by several fields of a message."""

    name: str
    versions: str
    fields: tuple[Field, ...]
    line: int


class MessageSchema(msgspec.Struct, frozen=True, kw_only=True):
    """One schema file: a request, a response or a data (on-disk) message."""

    name: str
    type: str
    api_key: int | None
    fields: tuple[Field, ...]
    common_structs: tuple[StructSchema, ...]
    path: pathlib.Path

    def struct_fields(self, field: Field) -> tuple[Field, ...]:
        """The fields of a struct-typed field, whether given inline or in commonStructs."""
        if field.fields:
            return field.fields
        for struct in self.common_structs:
            if struct.name == field.item_type:
                return struct.fields
        return ()


class _Placeholder:
    """The KIP's bare `N`: an API key not assigned yet."""


_PLACEHOLDER = _Placeholder()


class _Node(msgspec.Struct, frozen=True):
    """A parsed JSON value with the position it starts at."""

    value: Any
    line: int
    column: int


def load_schema(path: pathlib.Path) -> MessageSchema:
    """Parse and check one schema file."""
    return _Loader(path).message(_parse(path))


def load_all(directory: pathlib.Path | None = None) -> dict[str, MessageSchema]:
    """Every schema in a directory (by default the shipped spec/schemas), by message name."""
    if directory is None:
        directory = pathlib.Path(__file__).parent / "schemas"
    schemas = (load_schema(path) for path in sorted(directory.glob("*.json")))
    return {schema.name: schema for schema in schemas}


def _parse(path: pathlib.Path) -> _Node:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = len(data[data.rfind(b"\n", 0, error.start) + 1 : error.start].decode("utf-8")) + 1  # in characters, as lark counts
        raise SchemaError(path, line, column, f"not UTF-8: byte 0x{data[error.start]:02x} ({error.reason})") from None
    try:
        tree = _PARSER.parse(text)
    except lark.UnexpectedInput as error:
        raise SchemaError(path, error.line, error.column, _syntax_message(error)) from None
    return _node(tree, path)


def _syntax_message(error: lark.UnexpectedInput) -> str:
    if isinstance(error, lark.UnexpectedCharacters):
        found = f"character {json.dumps(error.char)}"
        expected = error.allowed
    elif isinstance(error, lark.UnexpectedToken):
        found = _token_description(error.token)
        expected = error.accepts or error.expected
    else:
        return "syntax error"
    names = sorted(_terminal_description(name) for name in expected)
    wanted = names[0] if len(names) == 1 else "one of " + ", ".join(names)
    return f"syntax error: unexpected {found}, expected {wanted}"


def _token_description(token: lark.Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "STRING":
        return str(token)
    return json.dumps(str(token))


def _terminal_description(name: str) -> str:
    if name == "$END":  # not a terminal of the grammar: the parser's end of input
        return "end of file"
    pattern = _PARSER.get_terminal(name).pattern
    if isinstance(pattern, lark.lexer.PatternStr):
        return json.dumps(pattern.value)
    return f"a {name.lower()}"


def _node(tree: lark.Tree | lark.Token, path: pathlib.Path, depth: int = 1) -> _Node:
    """Turn the parse tree into plain values, rejecting duplicate object keys, numbers Python
    will not convert and nesting deeper than MAX_NESTING."""
    if isinstance(tree, lark.Token):
        try:
            return _Node(_scalar(tree), tree.line, tree.column)
        except ValueError:  # an integer of more digits than int() converts (sys.get_int_max_str_digits)
            raise SchemaError(path, tree.line, tree.column, f"number too long ({len(tree)} characters)") from None
    if depth > MAX_NESTING:
        raise SchemaError(path, tree.meta.line, tree.meta.column, f"nested too deeply (more than {MAX_NESTING} arrays and objects)")
    if tree.data == "array":
        items = [_node(child, path, depth + 1) for child in tree.children]
        return _Node(items, tree.meta.line, tree.meta.column)
    members: dict[str, _Node] = {}
    for pair in tree.children:
        key_token, value = pair.children
        key = json.loads(key_token)
        if key in members:
            raise SchemaError(path, key_token.line, key_token.column, f'duplicate key "{key}"')
        members[key] = _node(value, path, depth + 1)
    return _Node(members, tree.meta.line, tree.meta.column)


def _scalar(token: lark.Token) -> Any:
    if token.type == "PLACEHOLDER":
        return _PLACEHOLDER
    return json.loads(token)


class _Loader:
    """Checks one parsed file and builds its MessageSchema."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.common_names: frozenset[str] = frozenset()
        self.defined_structs: set[str] = set()

    def error(self, node: _Node, message: str) -> SchemaError:
        return SchemaError(self.path, node.line, node.column, message)

    def member(self, obj: _Node, key: str, kind: type, what: str) -> _Node | None:
        """The member `key` of `obj`, checked to hold a `kind`; None when absent."""
        member = obj.value.get(key)
        if member is not None and not isinstance(member.value, kind):
            raise self.error(member, f'{what}: "{key}" must be {_KIND_NAMES[kind]}')
        return member

    def required(self, obj: _Node, key: str, kind: type, what: str) -> _Node:
        member = self.member(obj, key, kind, what)
        if member is None:
            raise self.error(obj, f'{what}: missing "{key}"')
        return member

    def flag(self, obj: _Node, key: str, what: str) -> bool:
        member = self.member(obj, key, bool, what)
        return False if member is None else member.value

    def text(self, obj: _Node, key: str, what: str) -> str:
        member = self.member(obj, key, str, what)
        return "" if member is None else member.value

    def message(self, root: _Node) -> MessageSchema:
        if not isinstance(root.value, dict):
            raise self.error(root, "a schema must be a JSON object")
        name_node = self.required(root, "name", str, "message")
        name = name_node.value
        if name != self.path.stem:
            raise self.error(name_node, f'message "{name}" must be in a file named {name}.json')
        kind_node = self.required(root, "type", str, f'message "{name}"')
        if kind_node.value not in _MESSAGE_KINDS:
            raise self.error(kind_node, f'message "{name}" has unknown type "{kind_node.value}"')
        fields_node = self.required(root, "fields", list, f'message "{name}"')
        common_node = self.member(root, "commonStructs", list, f'message "{name}"')
        common_items = [] if common_node is None else common_node.value
        self.common_names = frozenset(self.struct_name(item) for item in common_items)
        common_structs = tuple(self.struct(item) for item in common_items)
        return MessageSchema(
            name=name,
            type=kind_node.value,
            api_key=self.api_key(root, name),
            fields=self.fields(fields_node),
            common_structs=common_structs,
            path=self.path,
        )

    def api_key(self, root: _Node, name: str) -> int | None:
        node = root.value.get("apiKey")
        if node is None or node.value is _PLACEHOLDER:
            return None
        if not isinstance(node.value, int) or isinstance(node.value, bool):
            raise self.error(node, f'message "{name}": "apiKey" must be an integer or N')
        return node.value

    def struct_name(self, item: _Node) -> str:
        if not isinstance(item.value, dict):
            raise self.error(item, "a common struct must be a JSON object")
        name = self.required(item, "name", str, "common struct")
        self.define_struct(name, name.value)
        return name.value

    def define_struct(self, node: _Node, name: str) -> None:
        if name in self.defined_structs:
            raise self.error(node, f'struct type "{name}" is defined twice')
        self.defined_structs.add(name)

    def struct(self, item: _Node) -> StructSchema:
        name = item.value["name"].value
        what = f'struct "{name}"'
        return StructSchema(
            name=name,
            versions=self.text(item, "versions", what),
            fields=self.fields(self.required(item, "fields", list, what)),
            line=item.line,
        )

    def fields(self, fields_node: _Node) -> tuple[Field, ...]:
        fields = []
        seen: set[str] = set()
        for item in fields_node.value:
            field = self.field(item)
            if field.name in seen:
                raise self.error(item.value["name"], f'duplicate field "{field.name}"')
            seen.add(field.name)
            fields.append(field)
        return tuple(fields)

    def field(self, item: _Node) -> Field:
        if not isinstance(item.value, dict):
            raise self.error(item, "a field must be a JSON object")
        name = self.required(item, "name", str, "field").value
        what = f'field "{name}"'
        type_node = self.required(item, "type", str, what)
        fields_node = self.member(item, "fields", list, what)
        self.check_type(name, type_node, fields_node)
        nullable = "nullableVersions" in item.value
        if nullable and type_node.value in _NEVER_NULLABLE:
            raise self.error(type_node, f'{what} of type "{type_node.value}" cannot be nullable')
        default_node = item.value.get("default")
        return Field(
            name=name,
            type=type_node.value,
            versions=self.required(item, "versions", str, what).value,
            nullable=nullable,
            default=None if default_node is None else self.default(name, type_node.value, nullable, default_node),
            about=self.text(item, "about", what),
            fields=() if fields_node is None else self.fields(fields_node),
            line=item.line,
            entity_type=self.text(item, "entityType", what),
            added_by=self.text(item, "addedBy", what),
            omissible=self.flag(item, "omissible", what),
        )

    def check_type(self, name: str, type_node: _Node, fields_node: _Node | None) -> None:
        type_name = type_node.value
        item_type = type_name.removeprefix("[]")
        if item_type in PRIMITIVE_TYPES:
            if fields_node is not None:
                raise self.error(fields_node, f'field "{name}" of type "{type_name}" cannot have "fields"')
        elif _STRUCT_NAME.fullmatch(item_type):
            if fields_node is not None:
                self.define_struct(type_node, item_type)
            elif item_type not in self.common_names:
                raise self.error(type_node, f'field "{name}" uses struct type "{item_type}", which is not defined')
        else:
            raise self.error(type_node, f'field "{name}" has unknown type "{type_name}"')

    def default(self, name: str, type_name: str, nullable: bool, node: _Node) -> int | float | bool | str | None:
        """The parsed default; Kafka writes them as strings but also accepts JSON scalars."""
        raw = node.value
        if isinstance(raw, bool):
            text = "true" if raw else "false"
        elif isinstance(raw, int | float):
            text = json.dumps(raw)
        elif isinstance(raw, str):
            text = raw
        else:
            raise self.error(node, f'field "{name}": "default" must be a string')
        if text == "null":
            if not nullable:
                raise self.error(node, f'field "{name}" has default "null" but is not nullable')
            return None
        if type_name not in _SCALAR_DEFAULTS:
            raise self.error(node, f'field "{name}" of type "{type_name}" can only default to "null"')
        value = _parse_default(type_name, text)
        if value is None:
            raise self.error(node, f'field "{name}" has default "{text}", which is not a valid {type_name}')
        return value


def _parse_default(type_name: str, text: str) -> int | float | bool | str | None:
    """The value `text` stands for in a field of scalar type `type_name`, or None if none."""
    if type_name in INT_RANGES:
        if not _INT_LITERAL.fullmatch(text):
            return None
        try:
            value = int(text, 16 if "x" in text.lower() else 10)
        except ValueError:  # more digits than int() converts: out of every range anyway
            return None
        low, high = INT_RANGES[type_name]
        return value if low <= value <= high else None
    if type_name == "float64":
        try:
            return float(text)
        except ValueError:
            return None
    if type_name == "bool":
        return {"true": True, "false": False}.get(text)
    if type_name == "string":
        return text
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None
