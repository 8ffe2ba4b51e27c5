"""SVG as text, written in one fixed form, so that the same diagram always gives the same bytes.

Everything a diagram shows comes from traces and implementations, so every text and attribute
value goes through conformance.text.markup (escaped, nothing XML 1.0 forbids). Text is set in a
monospace font so that its width can be known without measuring it.
"""

from conformance.text import markup

FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
GLYPH = 0.6  # a monospace glyph's advance, as a fraction of the font size
LABEL_LIMIT = 400  # characters of one text element; tooltips keep more (conformance.text.TEXT_LIMIT)


def number(value: float) -> str:
    """A coordinate with at most one decimal, never "-0"."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def element(name: str, content: str = "", **attributes: object) -> str:
    """`<name key="value" ...>content</name>` (self-closed when empty). A trailing underscore is
    dropped from a key and other underscores become hyphens (`class_`, `font_size`); None values
    are left out; numbers keep at most one decimal."""
    parts = [name]
    for key, value in attributes.items():
        if value is None:
            continue
        shown = number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else markup(str(value))
        parts.append(f'{key.rstrip("_").replace("_", "-")}="{shown}"')
    opening = " ".join(parts)
    return f"<{opening}>{content}</{name}>" if content else f"<{opening}/>"


def text(x: float, y: float, value: str, **attributes: object) -> str:
    return element("text", markup(value, LABEL_LIMIT), x=x, y=y, **attributes)


def tooltip(value: str) -> str:
    """A <title> child: the full text a reader sees on hovering, where the drawing shows less."""
    return element("title", markup(value))


def width_of(value: str, size: float) -> float:
    return len(value) * size * GLYPH


def fit(value: str, width: float, size: float) -> str:
    """The text, cut with an ellipsis to what fits in `width` at font size `size`."""
    room = max(int(width / (size * GLYPH)), 1)
    return value if len(value) <= room else value[: max(room - 1, 0)] + "\u2026"


def document(width: int, height: int, title: str, body: list[str]) -> str:
    """A standalone SVG document (also valid inline in HTML): white background, one font."""
    head = element("svg", "", xmlns="http://www.w3.org/2000/svg", width=width, height=height, viewBox=f"0 0 {width} {height}", font_family=FONT, font_size=10, role="img")
    opening = head.removesuffix("/>") + ">"
    return "\n".join([opening, tooltip(title), element("rect", width=width, height=height, fill="#ffffff"), *body, "</svg>", ""])
