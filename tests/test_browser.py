"""The HTML report and a counterexample diagram, opened from disk in headless Chromium as a person
would: no console error, nothing fetched from anywhere, the key elements there and visible, and
screenshots kept for people to look at (CI keeps them under out/screenshots/, or where
KRAFTCHECK_SCREENSHOTS says)."""

import os
from pathlib import Path

import pytest
from headless_chromium import Browser, find_chromium
from matplotlib import image
from test_diagrams import figure8_counterexample

from adapters.mutants import mutant_adapter
from conformance.certify.certification import certify
from conformance.corpus.generate import DEFAULT_CORPUS
from conformance.diagrams.kraft import cluster_svg

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = Path(os.environ.get("KRAFTCHECK_SCREENSHOTS", ROOT / "out" / "screenshots"))
CHROMIUM = find_chromium()

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed and could not be: scripts/bootstrap installs Debian's chromium package (apt-get install chromium)",
)

# For each selector: does it exist, its size, and whether CSS shows it, once scrolled into view.
VISIBILITY = """
(selectors => Object.fromEntries(selectors.map(selector => {
  const found = document.querySelector(selector);
  if (!found) return [selector, null];
  found.scrollIntoView({block: "start"});
  const box = found.getBoundingClientRect(), style = getComputedStyle(found);
  return [selector, {width: box.width, height: box.height, shown: style.display !== "none" && style.visibility !== "hidden" && Number(style.opacity) > 0,
                     inView: box.bottom > 0 && box.top < innerHeight}];
})))(%s)
"""


def assert_visible(page, selectors: list[str]) -> None:
    found = page.evaluate(VISIBILITY % selectors)
    for selector in selectors:
        state = found[selector]
        assert state is not None, f"{selector}: not on the page"
        assert state["width"] > 0 and state["height"] > 0 and state["shown"] and state["inView"], f"{selector}: not visible: {state}"


def clip_of(page, selector: str, height: int = 1200, end: bool = False) -> dict:
    """The page region of the first element matching `selector`: its top `height` pixels, or its bottom ones."""
    return page.evaluate(
        f"""(() => {{ const box = document.querySelector({selector!r}).getBoundingClientRect();
        const shown = Math.min(box.height, {height});
        return {{x: box.left + scrollX, y: box.top + scrollY + ({'box.height - shown' if end else '0'}), width: box.width, height: shown}}; }})()"""
    )


def colour_share(png: Path, red: float, green: float, blue: float) -> float:
    """The share of a screenshot's pixels close to a colour (0-1 channels)."""
    pixels = image.imread(png)[:, :, :3]
    close = (abs(pixels[:, :, 0] - red) < 0.08) & (abs(pixels[:, :, 1] - green) < 0.08) & (abs(pixels[:, :, 2] - blue) < 0.08)
    return float(close.mean())


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    opened = Browser(CHROMIUM, tmp_path_factory.mktemp("chromium-profile"))
    yield opened
    opened.close()


def test_the_html_report_renders_in_chromium(browser, tmp_path):
    out = tmp_path / "certify"
    report = certify("mutant:hw-any-epoch", lambda: mutant_adapter("hw-any-epoch"), DEFAULT_CORPUS, out)
    page = browser.page(1280, 900)
    page.navigate((out / "report.html").as_uri())
    assert page.evaluate("document.title") == "kraftcheck certification: mutant:hw-any-epoch"
    assert page.evaluate("document.querySelectorAll('.divergence svg').length") == report.failed
    assert page.evaluate("document.querySelectorAll('#heat-map td.f3').length") > 0
    assert page.evaluate("[...document.querySelectorAll('a[href^=\"#\"]')].filter(a => !document.getElementById(a.getAttribute('href').slice(1))).length") == 0
    assert_visible(page, ["#verdict", "#summary table", "#rule-HW-1", "#heat-map", ".divergence svg", "#traces table"])
    assert page.evaluate("document.querySelector('.divergence svg').querySelectorAll('text').length") > 20
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(SCREENSHOTS / "report-summary.png")
    page.screenshot(SCREENSHOTS / "report-heat-map.png", clip_of(page, "#coverage"))
    # A divergence's diagram ends at the departing step: its highlighted row, the expected and the actual answer, the fields compared.
    divergence = page.screenshot(SCREENSHOTS / "report-divergence.png", clip_of(page, ".divergence svg", height=700, end=True))
    assert colour_share(divergence, 0xFE / 255, 0xE2 / 255, 0xE2 / 255) > 0.02  # the departing step and field, highlighted
    assert page.console_errors() == []
    assert [url for url in page.requested_urls() if not url.startswith("file:")] == []


def test_the_figure8_counterexample_renders_in_chromium(browser, tmp_path):
    cluster, actions = figure8_counterexample()
    svg = tmp_path / "counterexample-figure8-SAFE-6.svg"
    svg.write_text(cluster_svg(cluster, actions, "figure8: SAFE-6 violated after 28 steps"))
    page = browser.page(1280, 1000)
    page.navigate(svg.as_uri())
    size = page.evaluate("(() => { const box = document.documentElement.getBoundingClientRect(); return [box.width, box.height]; })()")
    assert 900 < size[0] <= 1280 and size[1] > 600
    shown = page.evaluate("[...document.querySelectorAll('text')].filter(t => t.getBBox().width > 0).map(t => t.textContent)")
    assert {"n1", "n2", "n3", "leader e3", "leader e4", "commits 0:e1", "lacks committed 0:e1"} <= set(shown)
    shot = page.screenshot(SCREENSHOTS / "figure8-counterexample.png")
    assert colour_share(shot, 0x1D / 255, 0x4E / 255, 0xD8 / 255) > 0.001  # leader lifelines (4 px wide)
    assert colour_share(shot, 0xD9 / 255, 0x77 / 255, 0x06 / 255) > 0.0005  # candidates, the committed record's outline
    assert colour_share(shot, 0xDC / 255, 0x26 / 255, 0x26 / 255) > 0.0005  # dropped messages, the lost record
    assert page.console_errors() == []
    assert [url for url in page.requested_urls() if not url.startswith("file:")] == []
