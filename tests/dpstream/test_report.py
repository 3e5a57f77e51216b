"""The HTML report writer and the whole ``dpstream demo --quick`` job (issue 7)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
from click.testing import CliRunner

from dpstream.cli import cli
from dpstream.demo._report import ReportFigure, ReportSection, ReportTable, write_report


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


def test_demo_quick_writes_a_complete_report(tmp_path):
    out = tmp_path / "report"
    result = CliRunner().invoke(
        cli, ["demo", "--quick", "--quiet", "--seed", "5", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert str(out.resolve()) in result.output
    html = (out / "index.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', html)
    assert len(images) >= 5
    for name in images:
        assert (out / name).stat().st_size > 10_000, name  # a real plot, not an empty file
    results = json.loads((out / "results.json").read_text())
    key = results["key"]
    assert key["pak_predicted_IF"] > 1.0
    assert 0.0 <= key["pak_coverage"] <= 1.0
    errors = pd.DataFrame(results["tables"]["optstream_errors"])
    optstream = errors[errors["method"].str.startswith("OptStream")]
    assert (optstream["consistency_gap"] < 1e-6).all()
    assert (optstream["negative_values"] == 0).all()
    assert (errors[errors["method"] == "Laplace"]["consistency_gap"] > 1.0).all()
    # Every kind of release shown carries its privacy record; the demo is seeded: no release.
    records = results["privacy"]
    assert {r["mechanism"] for r in records} == {"optstream", "laplace", "dft", "pegasus"}
    assert all(r["unit"] == "(w, alpha)" and r["seeded"] and not r["release"] for r in records)
    assert all(r["w"] == 48 and r["alpha"] > 0 and r["epsilon"] > 0 for r in records)


def test_demo_rejects_bad_options(tmp_path):
    result = CliRunner().invoke(cli, ["demo", "--epsilon", "-1", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "epsilon" in result.output
