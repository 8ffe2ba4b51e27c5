"""The rule catalogue: every normative clause of the seeds under a stable ID.

The model cites these IDs in its branches and reports speak in them, so the catalogue
(rules.toml) is checked hard when it is loaded: a broken catalogue must fail loudly,
naming the file and the rule, rather than let a citation point at nothing.
"""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from pathlib import Path
from typing import Annotated

import msgspec

DEFAULT_PATH = Path(__file__).with_name("rules.toml")

SEED_FILES = frozenset(
    {
        "kip-595-raft-metadata-quorum.ko.txt",
        "kip-595-revision-diff.en.txt",
        "kip-101-leader-epoch.ko.txt",
        "raft-paper-summary.ko.txt",
        "kafka-replication-design-v3.zh.txt",
    }
)

ID_PATTERN = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z][A-Z0-9]*)*-[0-9]+[A-Z]?$")
_NUMBER_SUFFIX = re.compile(r"-[0-9]+[A-Z]?$")

_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class CatalogueError(Exception):
    """A rule catalogue that cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class Rule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One normative clause: what must hold, where the seeds say it, and how it is read."""

    id: _NonEmpty
    title: Annotated[str, msgspec.Meta(min_length=1, max_length=60)]
    text: _NonEmpty
    source: _NonEmpty
    section: _NonEmpty
    note: str = ""

    @property
    def group(self) -> str:
        """The ID without its number, e.g. "VOTE-REQ" for "VOTE-REQ-4A"."""
        return _NUMBER_SUFFIX.sub("", self.id)


def load_rules(path: Path | None = None) -> tuple[Rule, ...]:
    """Load and check a catalogue; the shipped one (the default) is read once."""
    if path is None:
        return _load_default()
    return _load(Path(path))


def rule(rule_id: str) -> Rule:
    """The rule of the shipped catalogue with this ID; KeyError suggests near misses."""
    rules = _default_index()
    try:
        return rules[rule_id]
    except KeyError:
        close = difflib.get_close_matches(rule_id, list(rules), n=5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown rule id {rule_id!r}{hint}") from None


@functools.cache
def _load_default() -> tuple[Rule, ...]:
    return _load(DEFAULT_PATH)


@functools.cache
def _default_index() -> dict[str, Rule]:
    return {r.id: r for r in _load_default()}


def _load(path: Path) -> tuple[Rule, ...]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogueError(path, f"cannot read the catalogue: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise CatalogueError(path, f"not UTF-8 text: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(path, f"TOML syntax error: {exc}") from exc

    extra = sorted(set(data) - {"rule"})
    if extra:
        keys = ", ".join(extra)
        raise CatalogueError(path, f"unknown top-level key(s) {keys}; only [[rule]] tables go here")
    tables = data.get("rule")
    if not isinstance(tables, list) or not tables:
        raise CatalogueError(path, "no [[rule]] tables")

    rules: list[Rule] = []
    first_index: dict[str, int] = {}
    for index, table in enumerate(tables, start=1):
        where = _describe(index, table)
        try:
            item = msgspec.convert(table, type=Rule)
        except msgspec.ValidationError as exc:
            raise CatalogueError(path, f"{where}: {exc}") from exc
        if not ID_PATTERN.match(item.id):
            raise CatalogueError(path, f"{where}: id does not match {ID_PATTERN.pattern}")
        if item.source not in SEED_FILES:
            known = ", ".join(sorted(SEED_FILES))
            message = f"unknown source {item.source!r}; expected one of {known}"
            raise CatalogueError(path, f"{where}: {message}")
        if item.id in first_index:
            first = first_index[item.id]
            raise CatalogueError(path, f"{where}: duplicate id (first used by [[rule]] #{first})")
        first_index[item.id] = index
        rules.append(item)
    return tuple(rules)


def _describe(index: int, table: object) -> str:
    """Name a [[rule]] table by position and, when it has a usable one, by id."""
    rule_id = table.get("id") if isinstance(table, dict) else None
    if isinstance(rule_id, str) and rule_id:
        return f"[[rule]] #{index} ({rule_id})"
    return f"[[rule]] #{index}"
