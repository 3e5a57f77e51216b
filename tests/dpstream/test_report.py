"""The HTML report writer and the whole ``dpstream demo --quick`` job (issue 7)."""

from __future__ import annotations

import json
import re
from html import unescape

import numpy as np
import pandas as pd
from click.testing import CliRunner

from dpstream.cli import cli
from dpstream.demo._report import (
    ReportFigure,
    ReportSection,
    ReportTable,
    format_number,
    write_report,
)


def _png(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    fig.savefig(path)
    plt.close(fig)


def test_write_report_escapes_text_and_writes_every_table(tmp_path):
    _png(tmp_path / "a.png")
    table = pd.DataFrame({"method": ["<b>x</b>", "y"], "error": [1.5, np.nan]})
    section = ReportSection(
        key="s1",
        title="Errors & more",
        paragraphs=("a < b",),
        tables=(ReportTable(name="errors", caption="cap", frame=table),),
        figures=(ReportFigure(file="a.png", caption="fig"),),
    )
    index = write_report(
        [section], tmp_path, title="T", subtitle="S", key_findings=["k1"], meta={"m": 1},
        numbers={"x": 2.0},
    )  # fmt: skip
    text = index.read_text()
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text
    assert "a &lt; b" in text and "Errors &amp; more" in text
    assert '<img src="a.png"' in text
    assert pd.read_csv(tmp_path / "errors.csv").shape == (2, 2)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["key"] == {"x": 2.0}
    assert results["tables"]["errors"][1]["error"] is None  # NaN -> null, valid JSON


def test_format_number_is_one_format():
    cases = [
        (11620.4, "11,600"), (4185, "4,185"), (4185.0, "4,190"), (1.2, "1.2"), (1.0, "1"),
        (0.0, "0"), (0.01234, "0.0123"), (123.456, "123"), (-5942.3, "-5,940"),
        (1.234e-5, "1.23 × 10⁻⁵"), (9.999e-5, "1 × 10⁻⁴"), (2.0**-20, "9.54 × 10⁻⁷"),
        (float("inf"), "∞"), (np.nan, "–"), (np.int64(521669), "521,669"),
        (np.float64(2.5e6), "2,500,000"), (True, "yes"),
    ]  # fmt: skip
    assert [format_number(v) for v, _ in cases] == [text for _, text in cases]


def test_demo_quick_writes_a_complete_report(tmp_path):
    out = tmp_path / "report"
    result = CliRunner().invoke(
        cli, ["demo", "--quick", "--quiet", "--seed", "5", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert str(out.resolve()) in result.output
    html = (out / "index.html").read_text()
    text = re.sub(r"<script.*?</script>", "", html, flags=re.S)  # the page without its JS
    images = re.findall(r'<img src="([^"]+)"', text)  # figures and the charts' PNG fallbacks
    assert len(images) >= 5
    for name in images:
        assert (out / name).stat().st_size > 10_000, name  # a real plot, not an empty file
    # Interactive charts: one div each, their specs and the Vega bundle inlined (offline).
    charts = re.findall(r'<div id="(chart-[a-z_]+)"', html)
    assert {"chart-optstream_series", "chart-optstream_errors", "chart-forecast_day",
            "chart-forecast_errors", "chart-pak_sweeps"} <= set(charts)  # fmt: skip
    assert "window.vegaEmbed=" in html and not re.search(r"<script[^>]+src=", html)
    # The first section is the privacy summary; no scientific notation, no "1 runs".
    assert html.index('id="privacy"') < html.index('id="summary"') < html.index('id="pak"')
    assert not re.search(r"\d\.\d+e[+-]\d", text), "numbers in one format, never 1.2e+04"
    assert not re.search(r"\b1 (runs|trials)\b", text)
    assert "% of a region's mean load" in unescape(text) and "MAPE" in text
    results = json.loads((out / "results.json").read_text())
    key = results["key"]
    assert key["pak_predicted_IF"] > 1.0
    assert 0.0 <= key["pak_coverage"] <= 1.0
    errors = pd.DataFrame(results["tables"]["optstream_errors"])
    optstream = errors[errors["method"].str.startswith("OptStream")]
    assert (optstream["consistency gap (kW)"] < 1e-6).all()
    assert (optstream["negative values"] == 0).all()
    assert (errors[errors["method"] == "Laplace"]["consistency gap (kW)"] > 1.0).all()
    shares = errors["national, % of mean load"]
    assert (shares > 0).all()
    mean_load = 100 * errors["national (kW)"] / shares  # one national mean load for every row
    assert np.allclose(mean_load, mean_load.iloc[0], rtol=1e-9)
    # Every kind of release shown carries its privacy record; the demo is seeded: no release.
    records = results["privacy"]
    hierarchy = [r for r in records if r["mechanism"] in {"optstream", "laplace", "dft", "pegasus"}]
    assert {r["mechanism"] for r in hierarchy} == {"optstream", "laplace", "dft", "pegasus"}
    assert all(r["unit"] == "(w, alpha)" and r["seeded"] and not r["release"] for r in hierarchy)
    assert all(r["w"] == 48 and r["alpha"] > 0 and r["epsilon"] > 0 for r in hierarchy)
    # ... and so do the event-stream releases, whose records the stages build.
    others = {(r["mechanism"], r["unit"]) for r in records} - {
        (r["mechanism"], r["unit"]) for r in hierarchy
    }
    assert others == {("pak-mechanism-1", "event"), ("binary-tree", "event"), ("tops", "event"),
                      ("topl", "local")}  # fmt: skip
    assert all(r["seeded"] and r["bound"] == 36 for r in records if r["unit"] != "(w, alpha)")
    summary = pd.DataFrame(results["tables"]["privacy_summary"])
    assert summary["what is hidden"].str.contains("50 kW in each half-hour").any()
    assert summary["what is hidden"].str.contains("one-minute reading").any()


def test_demo_rejects_bad_options(tmp_path):
    result = CliRunner().invoke(cli, ["demo", "--epsilon", "-1", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "epsilon" in result.output
