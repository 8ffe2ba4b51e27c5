"""report.html: one self-contained page with the summary, the verdict and normative sentence of
every rule, the coverage heat map, each divergence with its diagram and shortened trace, and
links from rules to traces that all land on the page."""

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from adapters.mutants import mutant_adapter
from conformance.certify.certification import certify
from conformance.certify.reports.html import html as render_html
from conformance.certify.reports.publish import replayed_traces
from conformance.corpus.generate import DEFAULT_CORPUS
from spec import trace as traces
from spec.rules import load_rules

MUTANT = "hw-any-epoch"


class Page(HTMLParser):
    """The ids, links and resource references of a page, and each section's text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.sources: list[str] = []
        self.tags: list[str] = []
        self.sentences: list[str] = []  # the text of each normative-sentence cell
        self.in_sentence = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        self.tags.append(tag)
        if "id" in attributes:
            assert attributes["id"] not in self.ids, f"duplicate id {attributes['id']}"
            self.ids.add(attributes["id"])
        if tag == "a" and "href" in attributes:
            self.links.append(attributes["href"])
        if "src" in attributes:
            self.sources.append(attributes["src"])
        if tag == "td" and attributes.get("class") == "sentence":
            self.in_sentence = True
            self.sentences.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self.in_sentence = False

    def handle_data(self, data: str) -> None:
        if self.in_sentence:
            self.sentences[-1] += data


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    out = tmp_path_factory.mktemp("certify") / "out"
    report = certify(f"mutant:{MUTANT}", lambda: mutant_adapter(MUTANT), DEFAULT_CORPUS, out)
    return report, out, (out / "report.html").read_text()


def test_the_page_has_its_sections_and_nothing_external(certified):
    report, out, text = certified
    page = Page(text)
    assert {"summary", "rules", "coverage", "heat-map", "divergences", "traces"} <= page.ids
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert page.sources == []  # no image, script or frame to load
    assert set(re.findall(r"https?://[^\s\"'<>)]*", text)) == {"http://www.w3.org/2000/svg"}  # the SVG namespace names, loads nothing
    assert "@import" not in text and "url(" not in text


def test_every_rule_has_its_verdict_and_normative_sentence(certified):
    report, _, text = certified
    rules = load_rules()
    assert Page(text).sentences == [rule.text for rule in rules]
    for rule in rules:
        assert f'id="rule-{rule.id}"' in text
    verdicts = {v.rule: v.verdict for v in report.rules}
    row = text.split('id="rule-HW-1"')[1].split("</tr>")[0]
    assert verdicts["HW-1"] == "departs" and ">departs<" in row


def test_links_land_on_the_page_or_on_published_files(certified):
    report, out, text = certified
    page = Page(text)
    internal = [link[1:] for link in page.links if link.startswith("#")]
    assert internal and not [anchor for anchor in internal if anchor not in page.ids]
    files = [link for link in page.links if not link.startswith("#")]
    assert "report.md" in files and len([f for f in files if f.startswith("divergences/")]) == len(report.shortened)
    assert all((out / link).is_file() for link in files)
    # A rule departed from links to every trace failing on it.
    row = text.split('id="rule-HW-1"')[1].split("</tr>")[0]
    failing = re.findall(r'<li class="failing"><a href="#(trace-[^"]+)">', row)
    assert len(failing) == next(v.traces_failed for v in report.rules if v.rule == "HW-1") > 0


def test_each_divergence_has_its_diagram_and_its_shortened_trace(certified):
    report, out, text = certified
    sections = text.split('<div class="divergence"')[1:]
    assert len(sections) == report.failed
    for section in sections:
        assert "<svg" in section and "expected (the specification)" in section
        assert 'href="divergences/' in section and "Shortened reproducing trace" in section


def test_the_heat_map_marks_where_traces_fail(certified):
    _, _, text = certified
    heat = text.split('id="heat-map"')[1].split("</table>")[0]
    row = re.search(r'<tr><td class="rule"><a href="#rule-COMMON-2">COMMON-2</a></td>(.*?)</tr>', heat).group(1)
    failing = re.search(r'class="f[1-4]" title="COMMON-2 x FetchRequest: \d+ passing, (\d+) failing">(\d+)&#x2717;', row)
    assert failing and failing.group(1) == failing.group(2) and int(failing.group(1)) > 0
    assert 'class="p4"' in row  # and where it passes


def test_the_same_certification_gives_the_same_page(certified):
    report, out, text = certified
    shortened = {published: traces.read(Path(published)) for published in report.shortened.values()}
    reproductions = {original: (Path(published).relative_to(out).as_posix(), shortened[published]) for original, published in report.shortened.items()}
    assert render_html(report, replayed_traces(report), reproductions) == text
    certify(f"mutant:{MUTANT}", lambda: mutant_adapter(MUTANT), DEFAULT_CORPUS, out)  # a second run: only its timing differs
    seconds = re.compile(r"<tr><td>seconds</td><td>[0-9.]+</td></tr>")
    assert seconds.sub("", (out / "report.html").read_text()) == seconds.sub("", text)


def test_certify_lists_report_html_among_the_reports(tmp_path):
    result = subprocess.run([sys.executable, "-m", "conformance.cli", "certify", "--adapter", "reference", "--system", "isr", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0
    assert str(tmp_path / "report.html") in result.stdout
    assert "None: no trace departs and the adapter failed on none." in (tmp_path / "report.html").read_text()
