"""A message-sequence (Lamport) diagram, as data.

Lifelines, one row per step (time runs down), arrows from the row that sent a message to the
row that delivered, dropped or lost it, marks on a lifeline (a timer, an append, a crash ...),
notes where a lifeline's state changed (its role and epoch, its log as boxes of epochs), its
final state, and for a divergence the expected and actual outputs side by side. The sources
(`kraft`, `isr`, `traces`) fill it; `layout.render` draws it.
"""

from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Box:
    """One log record, labelled with its epoch."""

    label: str
    title: str
    fill: str = "plain"  # lc (a LeaderChange record), value (a client value), plain (unknown)
    mark: str = ""  # committed, conflict (another record was committed at its offset)


@dataclass(frozen=True)
class Lifeline:
    key: Hashable  # a node id, or a name ("controller", "admin")
    label: str
    caption: str = ""
    role: str = ""  # the role it starts in (a ROLE_STYLES key)
    focus: bool = False  # the node under test


@dataclass
class Arrow:
    """A message from the row (and lane) that sent it to the row that delivered, dropped or lost
    it; `end` None: never delivered by the last row."""

    source: Hashable
    destination: Hashable
    label: str
    title: str
    start: tuple[int, int]  # (row, lane)
    end: tuple[int, int] | None
    fate: str = "delivered"  # delivered, dropped, lost, in flight
    tone: str = "request"  # request, response, expected, actual


@dataclass(frozen=True)
class Mark:
    lifeline: Hashable
    shape: str  # a MARK_COLOURS key
    label: str
    title: str = ""


@dataclass(frozen=True)
class Note:
    """A lifeline's state after a row, where it changed: text, the role from here on, its log."""

    lifeline: Hashable
    text: str
    role: str | None = None  # None: unchanged
    log: tuple[Box, ...] | None = None  # None: unchanged


@dataclass
class Row:
    step: str
    text: str  # the step in words
    title: str  # the step in full (a tooltip)
    lanes: int = 1
    marks: list[Mark] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    diverges: bool = False


@dataclass(frozen=True)
class Final:
    """A lifeline's state after the last row, with what is wrong in it."""

    lifeline: Hashable
    text: str
    log: tuple[Box, ...] | None  # None: it has no log (the ISR controller)
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """The outputs the specification expects beside those the implementation gave, field by field."""

    heading: str
    lines: tuple[tuple[str, str, str, str], ...]  # (field, expected, actual, status: same or differs)


@dataclass
class Diagram:
    title: str
    subtitle: str
    lifelines: list[Lifeline]
    rows: list[Row]
    arrows: list[Arrow]
    finals: list[Final] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)  # what the run breaks, in words
    comparison: Comparison | None = None
