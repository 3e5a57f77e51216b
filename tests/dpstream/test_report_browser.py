"""The demo report in a real browser: every chart drawn, no JavaScript error, offline (issue 17).

Opens a ``dpstream demo --quick`` report in headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by selenium; ``.ci/run`` installs them) and saves screenshots.
Skips, saying why, where no browser or no selenium is installed. Set ``DPSTREAM_SCREENSHOTS``
to a folder to keep the screenshots (``docs/screenshots`` holds the committed ones).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpstream.cli import cli

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("selenium", reason="selenium is not installed (pip install selenium)")


def _shots():
    spec = importlib.util.spec_from_file_location(
        "screenshot_report", ROOT / "scripts" / "screenshot_report.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def browser():
    shots = _shots()
    if shots.find_browser() is None:
        pytest.skip(
            "no headless browser: install Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver), as .ci/run does"
        )
    web = shots.open_browser()
    yield shots, web
    shots.close_browser(web)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    result = CliRunner().invoke(
        cli, ["demo", "--quick", "--quiet", "--seed", "5", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def test_report_renders_every_chart_in_chromium(browser, quick_report, tmp_path):
    shots, web = browser
    check = shots.check_report(web, quick_report / "index.html")
    assert check.errors == [], "JavaScript errors in the console"
    assert check.failed == [], "charts that did not finish drawing"
    assert check.requests == [], "the report must load nothing from outside its folder"
    expected = {"chart-optstream_series", "chart-optstream_errors", "chart-forecast_day",
                "chart-forecast_errors", "chart-pak_sweeps",
                "chart-optstream_epsilon_curve"}  # fmt: skip
    assert set(check.charts) == expected
    # Data marks, not just axes: 6 lines per ε panel, 5 methods × 2 ε × 2 levels of bars,
    # 6 forecast lines, 6 forecast bars, two sweeps of lines with points.
    assert check.charts["chart-optstream_series"] >= 12
    assert check.charts["chart-optstream_errors"] >= 20
    assert check.charts["chart-forecast_day"] >= 6
    assert check.charts["chart-forecast_errors"] >= 6
    assert check.charts["chart-pak_sweeps"] >= 4
    # The tooltip carries the value and its unit (Vega writes it into the mark's aria-label).
    label = web.execute_script(
        "return document.querySelector('#chart-optstream_errors g.role-mark > path')"
        ".getAttribute('aria-label')"
    )
    assert "kW" in label and "share of the mean load" in label
    out = Path(os.environ.get("DPSTREAM_SCREENSHOTS", tmp_path))
    paths = shots.save_screenshots(web, out, prefix="report_quick")
    assert len(paths) >= 3
    assert all(p.stat().st_size > 20_000 for p in paths)
