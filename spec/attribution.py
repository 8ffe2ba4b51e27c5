"""The rule a divergence breaks: each differing field attributed to the rules that decide it.

spec/field-rules.toml says which rules decide which output field; a divergence is attributed
to the rules its step cites that decide one of its differing fields, or to every rule the
step cites when none does.
"""

import fnmatch
import functools
import re
import tomllib
from pathlib import Path

TABLE_PATH = Path(__file__).parent / "field-rules.toml"


@functools.cache
def field_rules() -> dict[str, dict[str, tuple[str, ...]]]:
    """part ("top", "response", "state", ...) -> field name -> rule ID patterns."""
    with TABLE_PATH.open("rb") as table:
        return {part: {field: tuple(patterns) for field, patterns in fields.items()} for part, fields in tomllib.load(table).items()}


def deciding_patterns(path: str) -> tuple[str, ...] | None:
    """The rule patterns deciding a differing field's path (`response.CurrentLeader.LeaderEpoch`,
    `sends`, `state.log length`), or None when the table does not narrow it (`response` itself)."""
    names = [name for name in re.split(r"[.\[\] ]+", path) if name and not name.isdigit()]
    table = field_rules()
    if names and names[0] in table["top"]:
        return table["top"][names[0]]
    if len(names) >= 2 and names[0] in table:
        return table[names[0]].get(names[1])
    return None


def attributed_rules(step_rules: tuple[str, ...], differing: tuple[str, ...]) -> tuple[str, ...]:
    """The step's rules that decide one of the differing fields; all of them if none does."""
    found = []
    for path in differing:
        patterns = deciding_patterns(path)
        if patterns is None:
            return step_rules
        found += [rule for rule in step_rules if any(fnmatch.fnmatchcase(rule, p) for p in patterns)]
    chosen = set(found)
    return tuple(rule for rule in step_rules if rule in chosen) or step_rules
