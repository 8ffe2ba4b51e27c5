"""Readable renderings of cluster actions, messages and what each step changed, for people (every stage)."""

import html
import re
from collections.abc import Sequence

from tabulate import tabulate

from model.cluster import Action, Append, ClusterState, CrashNode, CutLink, Deliver, Drop, Fire, HealLink, ResignLeader, RestartNode
from model.state import NodeState


def message_text(message: object) -> str:
    """A message as `Name(Field=value, ...)`, leaving out fields that hold their default."""
    name = type(message).__name__
    defaults = type(message)()
    fields = [
        f"{field}={getattr(message, field)!r}"
        for field in message.__struct_fields__
        if getattr(message, field) != getattr(defaults, field)
    ]
    return f"{name}({', '.join(fields)})"


def action_text(action: Action) -> str:
    """An action in words; the alternatives its node took where they are not its own, in brackets."""
    picks = getattr(action, "picks", ())
    return _bare_action_text(action) + (f" [{', '.join(f'{name}={pick}' for name, pick in picks)}]" if picks else "")


def _bare_action_text(action: Action) -> str:
    kind = type(action)
    if kind in (Deliver, Drop):
        envelope = action.envelope
        verb = "drop" if kind is Drop else ("deliver again" if action.duplicate else "deliver")
        return f"{verb} {envelope.source}->{envelope.destination} {message_text(envelope.message)}"
    if kind is Fire:
        return f"node {action.node}: {action.timer.name.lower()}"
    if kind is Append:
        return f"node {action.node}: client append {action.value}"
    if kind is ResignLeader:
        return f"node {action.node}: resign"
    if kind is CrashNode:
        return f"node {action.node}: crash"
    if kind is RestartNode:
        return f"node {action.node}: restart"
    if kind in (CutLink, HealLink):
        return f"{'cut' if kind is CutLink else 'heal'} link {action.source}->{action.destination}"
    return repr(action)


def log_text(node: NodeState) -> str:
    """The log as epochs with client values: e.g. `1:LC 1:v1 2:LC`."""
    return " ".join(f"{r.Epoch}:{'v' + str(r.Value) if isinstance(r.Value, int) else 'LC'}" for r in node.log) or "-"


def node_summary(node: NodeState) -> dict[str, str]:
    return {
        "role": node.role_name,
        "epoch": str(node.epoch),
        "leader": str(node.leader_id),
        "voted": str(node.voted_id),
        "log": log_text(node),
        "hw": str(node.high_watermark),
    }


def changes(node_ids: tuple[int, ...], before: ClusterState, after: ClusterState) -> str:
    """Only what changed in the nodes, e.g. `n2 role follower->candidate, epoch 1->2`."""
    parts = []
    for node_id, old, new in zip(node_ids, before.nodes, after.nodes):
        if old == new:
            continue
        a, b = node_summary(old), node_summary(new)
        diffs = [f"{k} {a[k]}->{b[k]}" for k in a if a[k] != b[k]]
        if diffs:
            parts.append(f"n{node_id} " + ", ".join(diffs))
    return "; ".join(parts)


TEXT_LIMIT = 2000  # characters of outside text (an adapter's error, a differing value) a report keeps
# Control characters (ANSI colour codes, NULs, lone surrogates) and the bidirectional formatting
# characters, which reorder what a reader sees (a right-to-left override)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """Every character of `text` shown as itself: the invisible and reordering ones as escapes (\\u202e)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), text)


def readable(text: str, limit: int = TEXT_LIMIT) -> str:
    """Text from outside (an implementation's error, a value it sent) made safe to show and store:
    visible, and at most `limit` characters kept."""
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit:,} more characters)"
    return visible(text)


_MARKDOWN_INLINE = re.compile(r"[\\`*_\[\]<>&|~]")  # emphasis, code, links, HTML, entities, table cells, strike-through
_MARKDOWN_LINE_START = re.compile(r"^(\s*)([#+=-]|\d+[.)])")  # a heading, a list item, a rule


def markdown_text(text: str, limit: int = TEXT_LIMIT) -> str:
    """Text as Markdown that renders as exactly that text, on one line (a table cell too): readable,
    whatever Markdown or HTML could read as syntax backslash-escaped, line breaks as <br>."""
    escaped = _MARKDOWN_INLINE.sub(lambda m: "\\" + m.group(), readable(text, limit))
    escaped = _MARKDOWN_LINE_START.sub(lambda m: m.group(1) + (m.group(2)[:-1] + "\\" + m.group(2)[-1]), escaped)
    return escaped.replace("\n", "<br>")


def markdown_code(text: str, in_table: bool = False) -> str:
    """Text as a Markdown code span, shown verbatim: the fence longer than any run of backticks
    inside, line breaks as \\n, and in a table cell the cell separator escaped (GFM reads it first)."""
    shown = readable(text).replace("\n", "\\n")
    if in_table:
        shown = shown.replace("|", "\\|")
    fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", shown)), default=0))
    padded = f" {shown} " if shown[:1] in (" ", "`") or shown[-1:] in (" ", "`") else shown
    return f"{fence}{padded}{fence}"


def markdown_block(text: str, info: str = "") -> list[str]:
    """Text as a fenced block of Markdown: shown verbatim, the fence longer than any run of
    tildes inside, so no line of it can close the block."""
    fence = "~" * max(4, 1 + max((len(run) for run in re.findall(r"~+", text)), default=0))
    return [fence + info, visible(text), fence]


_NOT_XML = re.compile(r"[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")  # what XML 1.0 cannot hold


def markup(text: str, limit: int = TEXT_LIMIT) -> str:
    """Text as XML (or HTML) character data or attribute value: readable, &<>"' escaped, and
    nothing XML 1.0 forbids, whatever characters a trace or an implementation sent."""
    return _NOT_XML.sub("\ufffd", html.escape(readable(text, limit), quote=True))


WRAPPED_LINES = 12  # lines a wrapped cell may take before it is cut


def wrapped_table(rows: list[Sequence[object]], headers: Sequence[str], widths: Sequence[int | None]) -> str:
    """A table whose columns wrap at `widths`; a text cell is cut to WRAPPED_LINES lines first,
    since wrapping takes time quadratic in a cell's length (a 1 MB field would take minutes)."""
    clipped = [[readable(cell, width * WRAPPED_LINES) if width and isinstance(cell, str) else cell for cell, width in zip(row, widths)] for row in rows]
    return tabulate(clipped, headers=headers, tablefmt="simple", maxcolwidths=list(widths))
