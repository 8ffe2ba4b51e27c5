"""A sequence diagram's layout as self-contained SVG.

The layout keeps long runs readable: rows are compact and grow only for the lanes they use, the
width depends on the number of lifelines, never on the number of steps, and whatever is cut
to fit is kept whole in a tooltip.
"""

import math
from collections.abc import Hashable

from conformance.diagrams.sequence import Arrow, Box, Diagram, Mark, Note
from conformance.diagrams.svg import GLYPH, document, element, fit, number, text, tooltip, width_of

MARGIN = 16
GUTTER = 34  # step numbers
LIFELINES_WIDTH = 660  # all lifeline columns together, when their number allows
COLUMN = (110, 230)  # a lifeline column's width, at least and at most
TEXT_COLUMN = 380  # each row's step in words, right of the lifelines
HEAD = 32  # a lifeline's head box
LANE = 20  # vertical distance between the lanes of one row
TOP, BOTTOM, NOTE_ROOM = 13, 8, 13  # a row's padding above its first lane and below its last (more with notes)
BOX = 12  # a log record's box
SIZE, SMALL = 10, 8.5  # font sizes

# Lifeline styles by role: colour, width, dash pattern.
ROLE_STYLES = {
    "leader": ("#1d4ed8", 4, None),
    "candidate": ("#d97706", 2.5, "6 3"),
    "prospective": ("#f59e0b", 1.5, "2 2"),
    "follower": ("#475569", 2, None),
    "voted": ("#64748b", 1.5, None),
    "unattached": ("#94a3b8", 1.5, None),
    "observer": ("#94a3b8", 1.5, "2 3"),
    "resigned": ("#8b5cf6", 2, "4 3"),
    "down": ("#dc2626", 1.2, "1 4"),
    "controller": ("#0f766e", 1.5, None),
    "": ("#cbd5e1", 1.5, None),  # not observed (a peer of the node under test)
}
ARROW_STYLES = {  # tone or fate: colour, width, dash pattern
    "request": ("#1e3a8a", 1.3, None),
    "response": ("#0f766e", 1.3, None),
    "expected": ("#16a34a", 2.2, None),
    "actual": ("#dc2626", 2.2, None),
    "dropped": ("#dc2626", 1.3, "5 3"),
    "lost": ("#dc2626", 1.3, "5 3"),
    "in flight": ("#94a3b8", 1.3, "2 3"),
}
MARK_COLOURS = {
    "timer": "#7c3aed",
    "append": "#2563eb",
    "crash": "#dc2626",
    "restart": "#16a34a",
    "resign": "#7c3aed",
    "commit": "#b45309",
    "power": "#dc2626",
    "elect": "#0f766e",
    "fetch": "#0f766e",
    "shrink": "#b45309",
    "shutdown": "#dc2626",
    "diverges": "#dc2626",
    "cut": "#dc2626",
    "heal": "#16a34a",
}
HALO = {"stroke": "#ffffff", "stroke_width": 3, "paint_order": "stroke", "stroke_linejoin": "round"}  # text readable over lines
BOX_FILLS = {"lc": "#e5e7eb", "value": "#bfdbfe", "plain": "#f1f5f9"}
BOX_STROKES = {"": ("#64748b", 1, None), "committed": ("#d97706", 2.2, None), "conflict": ("#dc2626", 2.2, None)}
LEGEND = [  # (kind, what it means), in the order shown; only the kinds a diagram uses are shown
    ("request", "request"),
    ("response", "response"),
    ("dropped", "dropped"),
    ("lost", "lost (connection closed)"),
    ("in flight", "never delivered"),
    ("expected", "expected"),
    ("actual", "actual"),
    ("timer", "timer"),
    ("append", "client append"),
    ("crash", "crash"),
    ("restart", "restart"),
    ("resign", "resign"),
    ("commit", "committed / acknowledged"),
    ("power", "power failure"),
    ("elect", "election"),
    ("fetch", "fetch"),
    ("shrink", "ISR shrink"),
    ("shutdown", "shutdown"),
    ("diverges", "departs here"),
    ("cut", "link cut (one way)"),
    ("heal", "link healed"),
    ("role:leader", "leader"),
    ("role:candidate", "candidate"),
    ("role:prospective", "prospective"),
    ("role:follower", "follower"),
    ("role:voted", "voted"),
    ("role:resigned", "resigned"),
    ("role:down", "down"),
    ("box:", "record (its epoch)"),
    ("box:committed", "committed record"),
    ("box:conflict", "differs from a committed record"),
]


def render(diagram: Diagram) -> str:
    """The diagram as a self-contained SVG document."""
    return _Layout(diagram).svg()


class _Layout:
    """Where everything goes: x per lifeline, y per row and lane; then the drawing, layer by layer."""

    def __init__(self, diagram: Diagram) -> None:
        self.d = diagram
        count = max(len(diagram.lifelines), 1)
        self.column = min(max(LIFELINES_WIDTH // count, COLUMN[0]), COLUMN[1])
        left = MARGIN + GUTTER
        self.x = {line.key: left + index * self.column + 40 for index, line in enumerate(diagram.lifelines)}
        self.text_x = left + count * self.column + 8
        self.width = self.text_x + TEXT_COLUMN + MARGIN
        self.header, self.legend_height = self._header()
        self.heads_top = self.header + self.legend_height + 6
        self.crowded = self._arrivals_from_the_right()
        self.tops = []
        y = self.heads_top + HEAD + 8
        for index, row in enumerate(diagram.rows):
            self.tops.append(y)
            y += TOP + LANE * (row.lanes - 1) + (NOTE_ROOM if self._state_lines(index) else BOTTOM)
        self.rows_end = y
        self.finals_top = y + 10
        self.finals_height = self._finals_height()
        self.verdicts_top = self.finals_top + self.finals_height
        self.comparison_top = self.verdicts_top + 16 * len(diagram.verdicts) + (8 if diagram.verdicts else 0)
        self.comparison_lines = self._comparison_lines()
        self.height = self.comparison_top + self._comparison_height() + MARGIN

    # Geometry.

    def lane_y(self, row: int, lane: int) -> int:
        return self.tops[row] + TOP + LANE * lane

    def note_y(self, row: int) -> int:
        return self.lane_y(row, self.d.rows[row].lanes - 1) + 10

    def room_right_of(self, key: Hashable) -> int:
        """Width to the right of a lifeline before the next one (or the text column)."""
        later = sorted(x for x in self.x.values() if x > self.x[key])
        return (later[0] if later else self.text_x) - self.x[key] - 16

    # The drawing.

    def svg(self) -> str:
        body = [
            *self._title(),
            *self._legend(),
            self._rows_background(),
            self._lifelines(),
            self._heads(),
            self._arrows(),
            self._marks(),
            self._notes(),
            self._row_texts(),
            self._finals(),
            self._verdicts(),
            self._comparison(),
        ]
        return document(self.width, self.height, f"{self.d.title}\n{self.d.subtitle}".strip(), [part for part in body if part])

    def _header(self) -> tuple[int, int]:
        height = MARGIN + 18 + (16 if self.d.subtitle else 0)
        rows = len(self._legend_items())
        return height, (18 * rows if rows else 0)

    def _title(self) -> list[str]:
        room = self.width - 2 * MARGIN
        parts = [text(MARGIN, MARGIN + 12, fit(self.d.title, room, 13), font_size=13, font_weight="bold", fill="#0f172a")]
        if self.d.subtitle:
            parts.append(text(MARGIN, MARGIN + 28, fit(self.d.subtitle, room, SIZE), fill="#475569"))
        return parts

    def _used(self) -> set[str]:
        used = set()
        for arrow in self.d.arrows:
            used.add(arrow.tone if arrow.fate == "delivered" else arrow.fate)
        for row in self.d.rows:
            used.update(mark.shape for mark in row.marks)
            for note in row.notes:
                if note.role:
                    used.add(f"role:{note.role}")
                used.update(f"box:{box.mark}" for box in note.log or ())
        used.update(f"role:{line.role}" for line in self.d.lifelines)
        for final in self.d.finals:
            used.update(f"box:{box.mark}" for box in final.log or ())
        return used

    def _legend_items(self) -> list[list[tuple[str, str, int]]]:
        """The legend's entries that the diagram uses, flowed into lines: (kind, label, x)."""
        used = self._used()
        lines: list[list[tuple[str, str, int]]] = []
        x = self.width  # start a new line
        for kind, label in LEGEND:
            if kind not in used:
                continue
            width = 30 + int(width_of(label, SIZE)) + 14
            if x + width > self.width - MARGIN:
                lines.append([])
                x = MARGIN
            lines[-1].append((kind, label, x))
            x += width
        return lines

    def _legend(self) -> list[str]:
        parts = []
        for index, line in enumerate(self._legend_items()):
            y = self.header + 18 * index + 8
            for kind, label, x in line:
                parts.append(self._legend_sample(kind, x, y))
                parts.append(text(x + 30, y + 3.5, label, fill="#334155"))
        return [element("g", "".join(parts))] if parts else []

    def _legend_sample(self, kind: str, x: int, y: int) -> str:
        if kind in ARROW_STYLES:
            colour, width, dash = ARROW_STYLES[kind]
            end = x + 24
            line = element("line", x1=x, y1=y, x2=end - (7 if kind in ("dropped", "lost", "in flight") else 0), y2=y, stroke=colour, stroke_width=width, stroke_dasharray=dash)
            tip = _cross(end - 4, y, colour) if kind in ("dropped", "lost") else ("" if kind == "in flight" else _arrowhead(x, y, end, y, colour))
            return line + tip
        if kind.startswith("role:"):
            colour, width, dash = ROLE_STYLES[kind.removeprefix("role:")]
            return element("line", x1=x, y1=y, x2=x + 24, y2=y, stroke=colour, stroke_width=width, stroke_dasharray=dash)
        if kind.startswith("box:"):
            return _box(x + 6, y - BOX // 2, Box(label="1", title="", fill="lc", mark=kind.removeprefix("box:")))
        return _shape(kind, x + 12, y)

    def _rows_background(self) -> str:
        parts = []
        for index, row in enumerate(self.d.rows):
            top = self.tops[index]
            bottom = self.tops[index + 1] if index + 1 < len(self.tops) else self.rows_end
            fill = "#fee2e2" if row.diverges else ("#f5f7fa" if index % 2 else "#ffffff")
            kind = "seq-row seq-diverges" if row.diverges else "seq-row"
            parts.append(element("rect", tooltip(row.title), class_=kind, x=MARGIN, y=top, width=self.width - 2 * MARGIN, height=bottom - top, fill=fill))
        return element("g", "".join(parts))

    def _lifelines(self) -> str:
        """Each lifeline styled by the role it holds, segment by segment."""
        lifelines = []
        for line in self.d.lifelines:
            x = self.x[line.key]
            parts = [tooltip(line.label)]
            role, start = line.role, self.heads_top + HEAD
            for index, row in enumerate(self.d.rows):
                for note in row.notes:
                    if note.lifeline == line.key and note.role is not None and note.role != role:
                        y = self.lane_y(index, 0)
                        parts.append(_segment(x, start, y, role))
                        role, start = note.role, y
            parts.append(_segment(x, start, self.rows_end, role))
            lifelines.append(element("g", "".join(parts), class_="seq-lifeline"))
        return element("g", "".join(lifelines), stroke_linecap="butt")

    def _heads(self) -> str:
        parts = []
        for line in self.d.lifelines:
            x, top = self.x[line.key] - 36, self.heads_top
            width = min(self.column - 8, 150)
            fill, stroke = ("#fef3c7", "#b45309") if line.focus else ("#f8fafc", "#475569")
            title = f"{line.label}: {line.caption}" if line.caption else line.label
            parts.append(element("rect", tooltip(title), x=x, y=top, width=width, height=HEAD, rx=4, fill=fill, stroke=stroke, stroke_width=2 if line.focus else 1))
            parts.append(text(x + 6, top + 13, fit(line.label, width - 12, 11), font_size=11, font_weight="bold", fill="#0f172a"))
            if line.caption:
                parts.append(text(x + 6, top + 26, fit(line.caption, width - 12, SMALL), font_size=SMALL, fill="#475569"))
        return element("g", "".join(parts))

    def _arrows(self) -> str:
        lines, labels = [], []
        for arrow in self.d.arrows:
            drawn, label = self._arrow(arrow)
            lines.append(drawn)
            labels.append(label)
        return element("g", "".join(lines)) + element("g", "".join(labels), **HALO)

    def _arrow(self, arrow: Arrow) -> tuple[str, str]:
        x1, y1 = self.x[arrow.source], self.lane_y(*arrow.start)
        target = self.x[arrow.destination]
        style = arrow.tone if arrow.fate == "delivered" else arrow.fate
        colour, width, dash = ARROW_STYLES[style]
        if arrow.fate == "delivered":
            x2, y2 = target, self.lane_y(*arrow.end)
            tip = _arrowhead(x1, y1, x2, y2, colour)
        elif arrow.end is not None:  # dropped or lost on the way: it stops half-way, crossed out
            x2, y2 = (x1 + target) / 2, self.lane_y(*arrow.end)
            tip = _cross(x2, y2, colour)
        else:  # still in flight after the last row
            x2, y2 = (x1 + target) / 2, self.rows_end - 4
            tip = ""
        line = element("line", x1=x1, y1=y1, x2=x2, y2=y2, stroke=colour, stroke_width=width, stroke_dasharray=dash)
        drawn = element("g", tooltip(arrow.title) + line + tip, class_=f"seq-message seq-{style.replace(' ', '-')}")
        if arrow.end is None:  # labels of messages never delivered would pile up at the bottom
            return drawn, ""
        rightward = target > x1
        if arrow.tone in ("expected", "actual"):  # their lanes are their own: the label starts at the head, rightwards
            room, x, anchor = self.text_x - x2 - 16, x2 + 8, "start"
        else:
            room = abs(x2 - x1) - 22
            x, anchor = (x2 - 11, "end") if rightward else (x2 + 11, "start")
        label = fit(arrow.label, max(room, 40), SIZE)
        return drawn, text(x, y2 - 4, label, text_anchor=anchor, fill=colour, font_weight="bold" if arrow.tone in ("expected", "actual") else None)

    def _arrivals_from_the_right(self) -> set[tuple[int, Hashable]]:
        """(row, lifeline) where an arriving arrow's label takes the room right of the lifeline on
        lane 0; a mark there has its label moved down to the lifeline's state line."""
        found = set()
        for arrow in self.d.arrows:
            if arrow.end is not None and arrow.end[1] == 0 and self.x[arrow.source] > self.x[arrow.destination]:
                found.add((arrow.end[0], arrow.destination))
        return found

    def _state_lines(self, index: int) -> dict[Hashable, tuple[list[Mark], Note | None]]:
        """Per lifeline, what a row writes under its last lane: moved mark labels, then the note."""
        row = self.d.rows[index]
        lines: dict[Hashable, tuple[list[Mark], Note | None]] = {}
        for mark in row.marks:
            if (index, mark.lifeline) in self.crowded:
                lines.setdefault(mark.lifeline, ([], None))[0].append(mark)
        for note in row.notes:
            lines[note.lifeline] = (lines.get(note.lifeline, ([], None))[0], note)
        return lines

    def _marks(self) -> str:
        shapes, labels = [], []
        for index, row in enumerate(self.d.rows):
            y = self.lane_y(index, 0)
            placed: dict[Hashable, int] = {}  # lifeline -> marks so far: each next one goes further right
            for mark in row.marks:
                x = self.x[mark.lifeline]
                offset = placed.get(mark.lifeline, 0)
                placed[mark.lifeline] = offset + 1
                shapes.append(element("g", tooltip(mark.title or mark.label) + _shape(mark.shape, x + 14 * offset, y), class_=f"seq-mark seq-{mark.shape}"))
                if (index, mark.lifeline) not in self.crowded:
                    label = fit(mark.label, self.room_right_of(mark.lifeline) - 4, SIZE)
                    labels.append(text(x + 9 + 14 * offset, y - 4 - 11 * offset, label, fill=MARK_COLOURS[mark.shape]))
        return element("g", "".join(shapes)) + element("g", "".join(labels), **HALO)

    def _notes(self) -> str:
        parts = []
        for index in range(len(self.d.rows)):
            y = self.note_y(index)
            for key, (marks, note) in self._state_lines(index).items():
                x = self.x[key] + 8
                room = self.room_right_of(key)
                for mark in marks:
                    label = fit(mark.label, room, SIZE)
                    parts.append(_chip(x, y, int(width_of(label, SIZE))) + text(x, y, label, fill=MARK_COLOURS[mark.shape]))
                    used = int(width_of(label, SIZE)) + 6
                    x, room = x + used, room - used
                if note is not None:
                    parts.append(self._state_line(x, y, note.text, note.log, room, note.role))
        return element("g", "".join(parts))

    def _state_line(self, x: int, y: int, words: str, log: tuple[Box, ...] | None, room: int, role: str | None) -> str:
        """Text, then the log as boxes, in `room` pixels; boxes that do not fit are counted."""
        shown = fit(words, room, SIZE) if words else ""
        colour = ROLE_STYLES.get(role, ROLE_STYLES[""])[0] if role else "#334155"
        parts = [text(x, y, shown, fill=colour, font_weight="bold" if role else None)] if shown else []
        end = x + int(width_of(shown, SIZE))
        if log is not None:
            start = end + 6 if shown else x
            boxes, width = _log(start, y - 9, log, x + room - start)
            parts.append(boxes)
            end = start + width
        return _chip(x, y, end - x) + "".join(parts)

    def _row_texts(self) -> str:
        parts = []
        for index, row in enumerate(self.d.rows):
            y = self.lane_y(index, 0) + 3.5
            parts.append(text(MARGIN + GUTTER - 8, y, row.step, text_anchor="end", fill="#64748b"))
            parts.append(text(self.text_x, y, fit(row.text, TEXT_COLUMN - 4, SIZE), fill="#dc2626" if row.diverges else "#334155"))
        return element("g", "".join(parts))

    def _finals_height(self) -> int:
        if not self.d.finals:
            return 0
        return 48 + 13 * max(len(final.problems) for final in self.d.finals)

    def _finals(self) -> str:
        if not self.d.finals:
            return ""
        top = self.finals_top
        parts = [text(MARGIN, top + 10, "after the last step", fill="#475569", font_weight="bold")]
        for final in self.d.finals:
            x = self.x[final.lifeline] - 36
            room = self.column - 12
            parts.append(text(x, top + 26, fit(final.text, room, SIZE), fill="#0f172a"))
            if final.log is not None:
                parts.append(_log(x, top + 31, final.log, room)[0])
            for index, problem in enumerate(final.problems):
                parts.append(text(x, top + 56 + 13 * index, fit(problem, room, SIZE), fill="#dc2626", font_weight="bold"))
        return element("g", "".join(parts), class_="seq-finals")

    def _verdicts(self) -> str:
        parts = [text(MARGIN, self.verdicts_top + 12 + 16 * index, fit(line, self.width - 2 * MARGIN, 11), font_size=11, font_weight="bold", fill="#b91c1c") for index, line in enumerate(self.d.verdicts)]
        return element("g", "".join(parts), class_="seq-verdicts") if parts else ""

    # The divergence panel: expected and actual side by side, field by field.

    def _comparison_columns(self) -> tuple[int, int, int]:
        """x of the field, expected and actual columns, and each value column's width."""
        field_width = 170
        value_width = (self.width - 2 * MARGIN - field_width - 16) // 2
        return MARGIN + 8, value_width, field_width

    def _comparison_lines(self) -> list[tuple[list[str], list[str], list[str], str]]:
        if self.d.comparison is None:
            return []
        _, value_width, field_width = self._comparison_columns()
        return [
            (_wrap(name, field_width - 8), _wrap(expected, value_width - 8), _wrap(actual, value_width - 8), status)
            for name, expected, actual, status in self.d.comparison.lines
        ]

    def _comparison_height(self) -> int:
        if self.d.comparison is None:
            return 0
        return 44 + sum(13 * max(len(a), len(b), len(c)) + 6 for a, b, c, _ in self.comparison_lines)

    def _comparison(self) -> str:
        if self.d.comparison is None:
            return ""
        left, value_width, field_width = self._comparison_columns()
        expected_x = left + field_width
        actual_x = expected_x + value_width + 8
        top = self.comparison_top
        parts = [
            element("rect", x=MARGIN, y=top, width=self.width - 2 * MARGIN, height=self._comparison_height() - 4, fill="#ffffff", stroke="#dc2626", stroke_width=1.5, rx=4),
            text(left, top + 16, fit(self.d.comparison.heading, self.width - 2 * MARGIN - 16, 11), font_size=11, font_weight="bold", fill="#b91c1c"),
            text(expected_x, top + 34, "expected (the specification)", font_weight="bold", fill="#15803d"),
            text(actual_x, top + 34, "actual (the implementation)", font_weight="bold", fill="#b91c1c"),
        ]
        y = top + 44
        for name, expected, actual, status in self.comparison_lines:
            height = 13 * max(len(name), len(expected), len(actual)) + 6
            if status == "differs":
                parts.append(element("rect", class_="seq-differs", x=MARGIN + 2, y=y, width=self.width - 2 * MARGIN - 4, height=height, fill="#fee2e2"))
            differs = status == "differs"
            for column_x, lines, colour in (
                (left, name, "#0f172a"),
                (expected_x, expected, "#15803d" if differs else "#334155"),
                (actual_x, actual, "#b91c1c" if differs else "#334155"),
            ):
                for index, line in enumerate(lines):
                    parts.append(text(column_x, y + 13 + 13 * index, line, fill=colour, font_weight="bold" if differs else None))
            y += height
        return element("g", "".join(parts), class_="seq-comparison")


def _chip(x: float, baseline: float, width: float) -> str:
    """A white ground under a state line, so that arrows crossing it do not hide it."""
    return element("rect", x=x - 2, y=baseline - 10, width=width + 4, height=13, rx=2, fill="#ffffff", fill_opacity=0.85)


def _segment(x: int, top: float, bottom: float, role: str) -> str:
    colour, width, dash = ROLE_STYLES.get(role, ROLE_STYLES[""])
    return element("line", x1=x, y1=top, x2=x, y2=bottom, stroke=colour, stroke_width=width, stroke_dasharray=dash)


def _arrowhead(x1: float, y1: float, x2: float, y2: float, colour: str) -> str:
    length = math.hypot(x2 - x1, y2 - y1) or 1
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    bx, by = x2 - 8 * ux, y2 - 8 * uy
    points = [(x2, y2), (bx - 3.5 * uy, by + 3.5 * ux), (bx + 3.5 * uy, by - 3.5 * ux)]
    return element("polygon", points=" ".join(f"{number(px)},{number(py)}" for px, py in points), fill=colour)


def _cross(x: float, y: float, colour: str) -> str:
    return element("path", d=f"M{number(x - 5)} {number(y - 5)}L{number(x + 5)} {number(y + 5)}M{number(x - 5)} {number(y + 5)}L{number(x + 5)} {number(y - 5)}", stroke=colour, stroke_width=2.2)


def _shape(shape: str, x: float, y: float) -> str:
    colour = MARK_COLOURS[shape]
    if shape == "timer":
        return element("circle", cx=x, cy=y, r=5, fill="#ffffff", stroke=colour, stroke_width=1.6) + element("path", d=f"M{number(x)} {number(y)}V{number(y - 3.5)}M{number(x)} {number(y)}H{number(x + 3)}", stroke=colour, stroke_width=1.2)
    if shape == "append":
        return element("rect", x=x - 4, y=y - 4, width=8, height=8, fill=colour)
    if shape in ("crash", "diverges"):
        ring = element("circle", cx=x, cy=y, r=7, fill="none", stroke=colour, stroke_width=1.5) if shape == "diverges" else ""
        return ring + _cross(x, y, colour)
    if shape == "restart":
        return element("polygon", points=f"{number(x)},{number(y - 5)} {number(x + 5)},{number(y + 4)} {number(x - 5)},{number(y + 4)}", fill=colour)
    if shape == "resign":
        return element("polygon", points=f"{number(x - 5)},{number(y - 4)} {number(x + 5)},{number(y - 4)} {number(x)},{number(y + 5)}", fill=colour)
    if shape == "commit":
        return element("polygon", points=f"{number(x)},{number(y - 6)} {number(x + 6)},{number(y)} {number(x)},{number(y + 6)} {number(x - 6)},{number(y)}", fill="#fbbf24", stroke=colour, stroke_width=1.2)
    if shape == "power":
        return element("polyline", points=f"{number(x + 2)},{number(y - 6)} {number(x - 3)},{number(y + 1)} {number(x + 3)},{number(y - 1)} {number(x - 2)},{number(y + 6)}", fill="none", stroke=colour, stroke_width=2)
    if shape == "elect":
        return element("rect", x=x - 5, y=y - 5, width=10, height=10, fill="#ffffff", stroke=colour, stroke_width=2)
    if shape == "shrink":
        return element("rect", x=x - 5, y=y - 1.5, width=10, height=3, fill=colour)
    if shape == "shutdown":
        return element("circle", cx=x, cy=y, r=5, fill=colour)
    if shape in ("cut", "heal"):  # a ring, struck through (cut) or joined across (heal)
        line = f"M{number(x - 3.5)} {number(y + 3.5)}L{number(x + 3.5)} {number(y - 3.5)}" if shape == "cut" else f"M{number(x - 5)} {number(y)}H{number(x + 5)}"
        return element("circle", cx=x, cy=y, r=5, fill="#ffffff", stroke=colour, stroke_width=1.6) + element("path", d=line, stroke=colour, stroke_width=1.6)
    return element("circle", cx=x, cy=y, r=3.5, fill=colour)  # fetch


def _box(x: float, y: float, box: Box) -> str:
    stroke, width, dash = BOX_STROKES[box.mark]
    rect = element("rect", tooltip(box.title) if box.title else "", x=x, y=y, width=BOX, height=BOX - 1, rx=1.5, fill=BOX_FILLS[box.fill], stroke=stroke, stroke_width=width, stroke_dasharray=dash)
    label = text(x + BOX / 2, y + 8.5, box.label, font_size=8, text_anchor="middle", fill="#b91c1c" if box.mark == "conflict" else "#0f172a")
    return rect + label


def _log(x: float, y: float, log: tuple[Box, ...], room: float) -> tuple[str, int]:
    """Boxes from x on, as many as fit in `room`, "+N" counting the rest ("empty log" for none);
    and the width they take."""
    if not log:
        return text(x, y + 9, "empty log", font_size=SMALL, fill="#64748b"), int(width_of("empty log", SMALL))
    fits = max(int((room - 24) // (BOX + 1)), 1)
    shown = log[:fits]
    parts = [_box(x + index * (BOX + 1), y, box) for index, box in enumerate(shown)]
    width = len(shown) * (BOX + 1)
    if len(shown) < len(log):
        more = f"+{len(log) - len(shown)}"
        parts.append(text(x + width + 2, y + 9, more, font_size=SMALL, fill="#64748b"))
        width += 2 + int(width_of(more, SMALL))
    return "".join(parts), width


def _wrap(value: str, width: int, lines: int = 6) -> list[str]:
    """Text broken into lines of what fits in `width` pixels, at most `lines` of them."""
    room = max(int(width / (SIZE * GLYPH)), 8)
    chunks = [value[start : start + room] for start in range(0, len(value), room)] or [""]
    if len(chunks) > lines:
        chunks = chunks[: lines - 1] + [fit(chunks[lines - 1] + "...", width, SIZE)]
    return chunks
