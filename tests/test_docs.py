"""The documentation: the site builds with no warning, the README's links resolve, and the
commands the pages mark run as the pages say.

A page marks a command for this test with an HTML comment right before a fenced block:

    <!-- run: exit 1; prints "SAFE-2 violated after 5 steps" -->
    ```sh
    .venv/bin/kraftcheck check --config faults --profile faulty-forget-vote
    ```

The block runs under `bash -e` in a fresh directory laid out like the checkout's root (every
top-level entry linked, `out/` empty), with `.venv` standing for the running interpreter's
environment; its exit code must be the one named and its output (stdout and stderr) must hold
each `prints` string. `<!-- file: NAME -->` before a code block writes the block to NAME first. A page's
blocks run in order, in one directory.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
GUIDE_PAGES = ("index", "installing", "model-checking", "certifying", "kafka", "scenarios", "spark", "troubleshooting")

MARKER = re.compile(r"^<!--\s*(run|file):\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w-]*)\s*$")
OPTION = re.compile(r'(exit)\s+(\d+)|(prints)\s+"((?:[^"\\]|\\.)*)"')
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
LEFT_OUT = {".git", "out", "runs", "site", ".venv", "build", "dist", ".pytest_cache", ".hypothesis"}


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def marked_pages() -> list[Path]:
    return [page for page in pages() if blocks(page)]


def prose_lines(text: str):
    """(number, line, inside fenced code) for every line of a Markdown text."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line.strip()) if fence is None else None
        if opened:
            fence = opened.group(1)
            yield number, line, True
        elif fence is not None:
            if line.strip() and set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence):
                fence = None
            yield number, line, True
        else:
            yield number, line, False


def blocks(page: Path) -> list[dict]:
    """The marked blocks of a page, in order: {"kind", "options", "body", "line"}."""
    text = page.read_text()
    lines = text.splitlines()
    in_code = {number - 1 for number, _, code in prose_lines(text) if code}
    found = []
    for index, line in enumerate(lines):
        marker = MARKER.match(line.strip()) if index not in in_code else None
        if not marker:
            continue
        where = f"{page.relative_to(ROOT)}:{index + 1}"
        following = index + 1
        while following < len(lines) and not lines[following].strip():
            following += 1
        opened = FENCE.match(lines[following].strip()) if following < len(lines) else None
        assert opened, f"{where}: a {marker.group(1)} marker must stand right before a fenced block"
        fence = opened.group(1)
        end = following + 1
        while end < len(lines) and not (set(lines[end].strip()) == {fence[0]} and len(lines[end].strip()) >= len(fence)):
            end += 1
        assert end < len(lines), f"{where}: the fenced block after the marker is never closed"
        body = "\n".join(lines[following + 1 : end]) + "\n"
        if marker.group(1) == "file":
            found.append({"kind": "file", "name": marker.group(2), "body": body, "line": where})
            continue
        assert opened.group(2) == "sh", f"{where}: a run marker stands before a ```sh block"
        options = {"exit": None, "prints": []}
        rest = marker.group(2)
        for part in [p.strip() for p in rest.split(";") if p.strip()]:
            option = OPTION.fullmatch(part)
            assert option, f"{where}: cannot read {part!r} (exit N; prints \"TEXT\")"
            if option.group(1):
                options["exit"] = int(option.group(2))
            else:
                options[option.group(3)].append(option.group(4).replace('\\"', '"'))
        assert options["exit"] is not None, f"{where}: a run marker names the exit code"
        found.append({"kind": "run", "options": options, "body": body, "line": where})
    return found


def slug(heading: str) -> str:
    """A heading's anchor as MkDocs (Python-Markdown's toc) makes it."""
    text = re.sub(r"`|\*\*?|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for _, line, code in prose_lines(page.read_text()) if not code and (m := HEADING.match(line))}


# The site -------------------------------------------------------------------------------


def test_the_site_builds_strictly_without_a_warning(tmp_path):
    """`mkdocs build --strict`: a broken link or anchor, a link to a missing repository file, or
    a page left out of the nav is a warning, and a warning fails the build."""
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        pytest.fail("mkdocs is not installed: it is in the test extra, which scripts/bootstrap installs")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "WARNING" not in log, log
    assert (site / "index.html").is_file()
    for name in GUIDE_PAGES:
        assert (site / "guide" / ("" if name == "index" else name) / "index.html").is_file(), name
    assert (site / "repository" / "spec" / "subprocess-protocol" / "index.html").is_file()


def test_the_guide_has_its_pages_in_the_nav():
    """Other code (each command's --help) points at these pages by name."""
    nav = (ROOT / "mkdocs.yml").read_text()
    for name in GUIDE_PAGES:
        assert (DOCS / "guide" / f"{name}.md").is_file(), name
        assert f"guide/{name}.md" in nav, name


# The README ----------------------------------------------------------------------------


def test_the_readme_links_resolve_to_files_of_the_repository():
    """README.md is outside docs/, so MkDocs does not check it: every relative link and image must
    name a file or directory of the repository, and every anchor a heading of the page it names."""
    checked = 0
    for number, line, code in prose_lines(README.read_text()):
        if code:
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path, _, anchor = target.partition("#")
            resolved = (ROOT / path.lstrip("/")) if path.startswith("/") else (README.parent / path)
            assert resolved.exists(), f"README.md:{number}: {target} names no file of the repository"
            if anchor:
                assert resolved.suffix == ".md" and anchor in anchors(resolved), f"README.md:{number}: {target}: no heading with that anchor"
            checked += 1
    assert checked >= 20


TWO_COMMANDS = """```sh
scripts/bootstrap && .venv/bin/kraftcheck check --config tlc-kraft-if4   # set up, then model-check tlc-kraft-if4 (34 million states: about 10 minutes on 2 cores)
scripts/test                                                         # run the test suite
```"""


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    text = README.read_text()
    assert text.index("```") == text.index(TWO_COMMANDS), "the first code block of the README is the two commands, exactly"
    assert len(text.splitlines()) <= 260


# The commands the pages show -----------------------------------------------------------


def test_the_marked_blocks_are_well_formed():
    """Every marker stands before a fenced block and names what it expects; the README's tour is marked."""
    found = {page: blocks(page) for page in pages()}
    readme_runs = [b for b in found[README] if b["kind"] == "run"]
    assert len(readme_runs) >= 3
    assert any("check --config" in b["body"] for b in readme_runs) and any("certify" in b["body"] for b in readme_runs)


def workdir(tmp_path: Path) -> Path:
    """A directory laid out like the checkout's root: every top-level entry linked, no out/."""
    where = tmp_path / "checkout"
    where.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in LEFT_OUT:
            (where / entry.name).symlink_to(entry)
    (where / ".venv").symlink_to(Path(sys.prefix))
    return where


@pytest.mark.parametrize("page", marked_pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_the_commands_a_page_shows_run_as_it_says(page, tmp_path):
    where = workdir(tmp_path)
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    environment.pop("PYTEST_ADDOPTS", None)
    ran = 0
    for block in blocks(page):
        if block["kind"] == "file":
            (where / block["name"]).write_text(block["body"])
            continue
        options = block["options"]
        done = subprocess.run(
            ["bash", "-e", "-c", block["body"]], cwd=where, env=environment, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
        )
        output = done.stdout + done.stderr
        shown = f"{block['line']}: {shlex.quote(block['body'].strip())}\n--- output ---\n{output[-4000:]}"
        assert done.returncode == options["exit"], f"exit {done.returncode}, the page says {options['exit']}\n{shown}"
        for text in options["prints"]:
            assert text in output, f"no {text!r} in the output\n{shown}"
        ran += 1
    assert ran
