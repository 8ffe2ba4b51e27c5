"""MkDocs hooks: repository files linked from the docs become pages of the site.

The docs link to files outside docs/ (spec/subprocess-protocol.md, adapters/example_node.py)
with links from the repository's root: `[the protocol](/spec/subprocess-protocol.md)`. On a
repository host such a link opens the file. In the site, this hook publishes every file so
linked as a page under `repository/` (Markdown as it is, anything else as a code block) and
rewrites the link to point at that page, so MkDocs validates it like any other link: a link to
a file that does not exist, or to a heading it lacks, fails the strict build.
"""

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files, InclusionLevel

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "repository"

# A Markdown link or image whose target starts at the repository's root: ](/path) or ](/path#anchor).
ROOT_LINK = re.compile(r"\]\(/(?!/)([^)\s#]+)(#[^)\s]*)?\)")
FENCE = re.compile(r"^(`{3,}|~{3,})")
LANGUAGES = {".py": "python", ".toml": "toml", ".json": "json", ".lark": "text", ".java": "java", ".xml": "xml"}


def outside_code(markdown: str):
    """The lines of a page, each with whether it is outside fenced code."""
    fence = None
    for line in markdown.splitlines(keepends=True):
        opened = FENCE.match(line.lstrip())
        if fence is None and opened:
            fence = opened.group(1)
            yield line, False
        elif fence is not None:
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                fence = None
            yield line, False
        else:
            yield line, True


def page_uri(path: str) -> str:
    """Where a repository file is published in the site's sources."""
    return f"{PREFIX}/{path}" if path.endswith(".md") else f"{PREFIX}/{path}.md"


def page_content(path: str) -> str:
    text = (ROOT / path).read_text()
    note = f"*This is `{path}` from the repository, published with the documentation as it is.*\n\n"
    if path.endswith(".md"):
        return note + text
    fence = "````" if "```" in text else "```"
    return f"# {path}\n\n{note}{fence}{LANGUAGES.get(Path(path).suffix, 'text')}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{fence}\n"


def on_files(files: Files, config) -> Files:
    linked = set()
    for file in files.documentation_pages():
        for line, prose in outside_code(Path(file.abs_src_path).read_text()):
            if prose:
                linked.update(match.group(1) for match in ROOT_LINK.finditer(line))
    for path in sorted(linked):
        target = ROOT / path
        if path.startswith("docs/") or not target.is_file():
            continue  # left as it is: MkDocs reports the link as not found
        files.append(File.generated(config, page_uri(path), content=page_content(path), inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Rewrite root links to the published pages, relative to this page."""
    here = posixpath.dirname(page.file.src_uri)

    def relative(match: re.Match) -> str:
        path, anchor = match.group(1), match.group(2) or ""
        return f"]({posixpath.relpath(page_uri(path), here or '.')}{anchor})"

    return "".join(ROOT_LINK.sub(relative, line) if prose else line for line, prose in outside_code(markdown))
