"""Open a dpstream report in headless Chromium, check its charts, and save screenshots.

Usage: ``python scripts/screenshot_report.py REPORT_DIR [OUT_DIR] [--prefix NAME]`` (default
OUT_DIR: ``docs/screenshots``). Drives Debian's ``chromium`` through ``chromium-driver`` with
selenium (nothing is downloaded at run time), waits until every interactive chart has been
drawn, reports the charts that did not render and the JavaScript errors of the console, then
renders the whole page in a window as tall as the page and cuts it into parts at the section
boundaries (rows of background between the white section cards), each at most
``--max-height`` pixels tall: ``<prefix>_1.png``, ``<prefix>_2.png``, …

``tests/dpstream/test_report_browser.py`` uses :func:`open_browser`, :func:`check_report` and
:func:`save_screenshots` on a ``dpstream demo --quick`` report.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: Flags that work in containers and CI: no sandbox, GPU, network services or first-run UI.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


def find_browser() -> tuple[str, str] | None:
    """Paths of Chromium and its driver (Debian packages), or None when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        return None
    return browser, driver


def open_browser(width: int = 1280, height: int = 1000):
    """A headless Chromium driven by selenium, with a fresh profile and the console log on."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_browser()
    if found is None:
        raise RuntimeError("chromium or chromedriver not found: apt-get install chromium "
                           "chromium-driver")  # fmt: skip
    browser, driver = found
    profile = tempfile.mkdtemp(prefix="dpstream-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: selenium-manager would otherwise try to download one.
    web = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    web._dpstream_profile = profile  # removed by close_browser
    return web


def close_browser(web) -> None:
    profile = getattr(web, "_dpstream_profile", None)
    web.quit()
    if profile:
        shutil.rmtree(profile, ignore_errors=True)


@dataclass
class ReportCheck:
    """What the browser saw."""

    charts: dict[str, int] = field(default_factory=dict)
    """Chart id -> number of drawn data marks (bars, lines, points; not axes) in it."""
    failed: list[str] = field(default_factory=list)
    """Charts that did not finish drawing."""
    errors: list[str] = field(default_factory=list)
    """Console messages of level SEVERE (JavaScript errors, failed loads)."""
    requests: list[str] = field(default_factory=list)
    """Resources the page loaded from outside its folder (must be none: offline)."""


_MARKS = """
const out = {};
for (const div of document.querySelectorAll('[id^="chart-"]')) {
  const svg = div.querySelector('svg');
  out[div.id] = {rendered: div.dataset.rendered === 'yes',
                 marks: svg ? svg.querySelectorAll(
                   'g.role-mark > path, g.role-mark > line, g.role-mark > rect'
                 ).length : 0};
}
const external = performance.getEntriesByType('resource').map(e => e.name)
  .filter(n => !n.startsWith('file:') && !n.startsWith('data:'));
return {charts: out, external: external};
"""


def check_report(web, index: Path, timeout: float = 60.0) -> ReportCheck:
    """Load ``index`` and wait until every chart is drawn (or ``timeout`` seconds pass)."""
    web.get(index.resolve().as_uri())
    deadline = time.monotonic() + timeout
    while True:
        seen = web.execute_script(_MARKS)
        done = all(c["rendered"] for c in seen["charts"].values())
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    check = ReportCheck(requests=list(seen["external"]))
    for name, c in seen["charts"].items():
        check.charts[name] = int(c["marks"])
        if not c["rendered"]:
            check.failed.append(name)
    check.errors = [e["message"] for e in web.get_log("browser") if e["level"] == "SEVERE"]
    return check


def page_image(web, width: int = 1280):
    """The whole page as one image (the window resized to the page's height)."""
    from PIL import Image

    height = int(web.execute_script("return document.documentElement.scrollHeight"))
    web.set_window_size(width, min(height + 120, 30_000))
    time.sleep(0.5)  # let Vega re-lay out after the resize
    return Image.open(io.BytesIO(web.get_screenshot_as_png())).convert("RGB")


def cut_points(page: np.ndarray, max_height: int) -> list[int]:
    """Rows where the page is plain background across the content column (between cards)."""
    plain = (np.abs(page.astype(int) - page[-1, 2].astype(int)).sum(axis=2) < 8).all(axis=1)
    rows = np.flatnonzero(plain)
    cuts, start = [0], 0
    while page.shape[0] - start > max_height:
        window = rows[(rows > start + 300) & (rows <= start + max_height)]
        start = int(window[-1]) if window.size else start + max_height
        cuts.append(start)
    return [*cuts, page.shape[0]]


def save_screenshots(web, out: Path, *, prefix: str = "report", width: int = 1280,
                     max_height: int = 2000) -> list[Path]:  # fmt: skip
    """Screenshots of the loaded page, cut at section boundaries; returns the files."""
    from PIL import Image

    page = np.asarray(page_image(web, width))
    last = page[-1]
    content = np.flatnonzero((np.abs(page.astype(int) - last.astype(int)).sum(axis=2) > 8).any(1))
    page = page[: int(content[-1]) + 40]
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{prefix}_*.png"):
        old.unlink()
    cuts = cut_points(page, max_height)
    paths = []
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True), start=1):
        path = out / f"{prefix}_{i}.png"
        Image.fromarray(page[a:b]).save(path, optimize=True)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("out", type=Path, nargs="?", default=ROOT / "docs" / "screenshots")
    parser.add_argument("--prefix", default="report")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--max-height", type=int, default=2000)
    args = parser.parse_args()
    web = open_browser(args.width)
    try:
        check = check_report(web, args.report / "index.html")
        for name, marks in check.charts.items():
            print(f"{name}: {marks} marks")
        for problem in check.failed + check.errors + check.requests:
            print("PROBLEM:", problem, file=sys.stderr)
        for path in save_screenshots(web, args.out, prefix=args.prefix, width=args.width,
                                     max_height=args.max_height):  # fmt: skip
            print(f"wrote {path}")
    finally:
        close_browser(web)
    if check.failed or check.errors or check.requests:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
