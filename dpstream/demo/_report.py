"""A self-contained HTML report: sections of text, tables, interactive charts and PNG figures.

:func:`write_report` writes ``index.html`` (no external scripts, styles or fonts: the Vega
JavaScript of the interactive charts is inlined once, so the page works offline; static
figures are PNG files beside it), every table as CSV, and ``results.json`` holding all tables,
the privacy records and the run's metadata, so the numbers can be read back without parsing
HTML. Every number in the page goes through :func:`format_number` (one format: thousands
separators, three significant digits).

Written by hand rather than with a template engine: the page is a fixed, small layout and the
only dynamic parts are escaped text, :meth:`pandas.DataFrame.to_html` tables and JSON specs.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "ReportChart",
    "ReportFigure",
    "ReportSection",
    "ReportTable",
    "format_number",
    "write_report",
]


def format_number(value: object) -> str:
    """The report's one number format: thousands separators and three significant digits.

    Integers are shown in full (``521,669``); other numbers with three significant digits,
    without trailing zeros (``11,600``, ``4,190``, ``1.2``, ``0.0123``), and below 0.001 as
    ``1.23 × 10⁻⁵`` (never ``1.23e-05``). NaN is "–", infinities "∞". Booleans are yes/no.

    >>> [format_number(v) for v in (11620.4, 4185, 1.2, 0.01234, 1.234e-5, float("nan"))]
    ['11,600', '4,185', '1.2', '0.0123', '1.23 × 10⁻⁵', '–']
    """
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}"
    if not isinstance(value, float | np.floating):
        return str(value)
    v = float(value)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    if mag >= 2:  # halves round up, as a reader expects (4,185 -> 4,190), not to even
        step = Decimal(1).scaleb(mag - 2)  # 1E+2 for 11,620: three significant digits
        return f"{float(Decimal(v).quantize(step, rounding=ROUND_HALF_UP)):,.0f}"
    if mag >= -3:
        text = f"{v:,.{2 - mag}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa = f"{v / 10.0**mag:.3g}"
    if mantissa.startswith("10"):  # rounding carried into the next power of ten
        mantissa, mag = "1", mag + 1
    return f"{mantissa} × 10{str(mag).translate(_SUPERSCRIPT)}"


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportFigure:
    """A PNG already written into the report folder."""

    file: str
    """File name relative to the report folder."""
    caption: str
    """What the figure shows (one or two sentences)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportTable:
    """A table shown in the page and written as ``<name>.csv``."""

    name: str
    """File stem of the CSV and key in ``results.json`` (letters, digits, underscores)."""
    caption: str
    """What the table holds."""
    frame: pd.DataFrame = field(hash=False)
    """The numbers."""
    floatfmt: str | None = None
    """A format string for floats in the HTML; None: :func:`format_number` (the report's one
    format). The CSV keeps full precision."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportChart:
    """An interactive chart (a Vega-Lite specification), with a PNG for readers without JS."""

    name: str
    """Id of the chart in the page (letters, digits, underscores)."""
    caption: str
    """What the chart shows and how to use it."""
    spec: dict = field(hash=False)
    """The Vega-Lite specification (:mod:`dpstream.demo._charts`)."""
    png: str | None = None
    """A static PNG of the same figure in the report folder (shown without JavaScript)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportSection:
    """One question the report answers, with its evidence."""

    key: str
    """Anchor of the section in the page."""
    title: str
    """Heading."""
    paragraphs: tuple[str, ...] = ()
    """Plain-text paragraphs (escaped on output)."""
    tables: tuple[ReportTable, ...] = ()
    """Tables, shown before the figures."""
    charts: tuple[ReportChart, ...] = ()
    """Interactive charts, shown after the tables."""
    figures: tuple[ReportFigure, ...] = ()
    """Static figures, in order, after the charts."""
    csv_only: tuple[ReportTable, ...] = ()
    """Tables written as CSV and to ``results.json`` only (too long for the page)."""
    html_tail: str = ""
    """Raw HTML appended to the section (built by this package, never from user text)."""


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2330;
       background: #f7f8fa; line-height: 1.5; }
header { background: #1d3557; color: #fff; padding: 1.4rem 2rem; }
header h1 { margin: 0 0 .3rem 0; font-size: 1.6rem; }
header p { margin: .1rem 0; opacity: .9; }
nav { background: #fff; border-bottom: 1px solid #dde; padding: .6rem 2rem; position: sticky;
      top: 0; }
nav a { margin-right: 1.2rem; color: #1d3557; text-decoration: none; font-weight: 600; }
main { max-width: 1100px; margin: 0 auto; padding: 1rem 2rem 3rem 2rem; }
section { background: #fff; border: 1px solid #e3e6ec; border-radius: 8px; padding: 1rem 1.5rem;
          margin: 1.2rem 0; }
h2 { color: #1d3557; margin-top: .2rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem 0; font-size: .9rem; }
th, td { border: 1px solid #dde; padding: .25rem .6rem; text-align: right; }
th { background: #eef1f6; }
td:first-child, th:first-child { text-align: left; }
caption { caption-side: top; text-align: left; font-weight: 600; padding-bottom: .3rem; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; border: 1px solid #e3e6ec; border-radius: 4px; }
figcaption { font-size: .9rem; color: #4a5263; }
.key { background: #eef6ee; border-left: 4px solid #2a9d8f; padding: .5rem 1rem; }
.chart { overflow-x: auto; }
.chart > div { min-height: 120px; }
.muted { color: #4a5263; font-size: .9rem; }
dl.terms { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.terms dt { font-weight: 600; }
dl.terms dd { margin: 0; }
#privacy td { text-align: left; vertical-align: top; }
footer { font-size: .85rem; color: #667; text-align: center; padding: 1rem; }
"""


def _format_cell(value: object, floatfmt: str | None) -> str:
    if floatfmt is not None and isinstance(value, float) and not math.isnan(value):
        return floatfmt.format(value)
    return format_number(value)


def _table_html(table: ReportTable) -> str:
    frame = table.frame.map(lambda v: _format_cell(v, table.floatfmt))
    body = frame.to_html(index=False, escape=True, border=0)
    caption = f"<caption>{html.escape(table.caption)}</caption>"
    return body.replace(">\n  <thead>", f">\n  {caption}\n  <thead>", 1)


def _json_safe(frame: pd.DataFrame) -> list[dict]:
    records = frame.to_dict(orient="records")
    return [
        {
            str(k): (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in r.items()
        }
        for r in records
    ]


def _chart_html(chart: ReportChart) -> str:
    caption = html.escape(chart.caption)
    fallback = (
        f'<noscript><img src="{html.escape(chart.png)}" alt="{caption}"></noscript>'
        if chart.png
        else ""
    )
    return (
        f'<figure class="chart"><div id="chart-{html.escape(chart.name)}" '
        f'role="img" aria-label="{caption}"></div>{fallback}'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def _charts_script(charts: list[ReportChart]) -> str:
    """The Vega bundle once, then one ``vegaEmbed`` per chart (SVG, no external links)."""
    from dpstream.demo._charts import javascript_bundle

    specs = {f"chart-{c.name}": c.spec for c in charts}
    # "</" inside a script would end it early: JSON allows "<\/" for "</".
    payload = json.dumps(specs, default=str, ensure_ascii=False).replace("</", "<\\/")
    embed = (
        f"const specs = {payload};\n"
        "for (const [id, spec] of Object.entries(specs)) {\n"
        "  window.vegaEmbed('#' + id, spec, {actions: false, renderer: 'svg'})\n"
        "    .then(() => document.getElementById(id).dataset.rendered = 'yes')\n"
        "    .catch((e) => { console.error('chart ' + id + ': ' + e);\n"
        "      document.getElementById(id).textContent = 'This chart could not be drawn.'; });\n"
        "}\n"
    )
    return (
        f'<script type="module">{javascript_bundle()}</script>\n'
        f'<script type="module">{embed}</script>'
    )


def write_report(
    sections: list[ReportSection],
    out_dir: str | Path,
    *,
    title: str,
    subtitle: str,
    key_findings: list[str],
    meta: dict,
    numbers: dict | None = None,
    privacy: list[dict] | None = None,
) -> Path:
    """Write ``index.html``, one CSV per table and ``results.json`` into ``out_dir``.

    Figures must already be in ``out_dir``; ``meta`` is shown in the footer, ``numbers`` (the
    key figures) and ``privacy`` (the releases' :meth:`mechanisms.PrivacyRecord.to_dict`
    records) go to ``results.json`` (the page shows the records through a section the caller
    builds). The key findings are shown after the first section. Returns the path of
    ``index.html``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nav = " ".join(f'<a href="#{s.key}">{html.escape(s.title.split("?")[0])}</a>' for s in sections)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p></header>",
        f"<nav>{nav}</nav><main>",
    ]
    summary = ""
    if key_findings:
        items = "".join(f"<li>{html.escape(k)}</li>" for k in key_findings)
        summary = f'<section id="summary"><h2>Answers</h2><ul class="key">{items}</ul></section>'
    results: dict = {
        "meta": meta,
        "key": numbers or {},
        "privacy": list(privacy or []),
        "tables": {},
    }
    charts: list[ReportChart] = []
    for i, section in enumerate(sections):
        parts.append(
            f'<section id="{html.escape(section.key)}"><h2>{html.escape(section.title)}</h2>'
        )
        parts.extend(f"<p>{html.escape(p)}</p>" for p in section.paragraphs)
        for table in section.tables:
            parts.append(_table_html(table))
            table.frame.to_csv(out / f"{table.name}.csv", index=False)
            results["tables"][table.name] = _json_safe(table.frame)
        for table in section.csv_only:
            table.frame.to_csv(out / f"{table.name}.csv", index=False)
            results["tables"][table.name] = _json_safe(table.frame)
        for chart in section.charts:
            parts.append(_chart_html(chart))
            charts.append(chart)
        for figure in section.figures:
            caption = html.escape(figure.caption)
            parts.append(
                f'<figure><img src="{html.escape(figure.file)}" alt="{caption}">'
                f"<figcaption>{caption}</figcaption></figure>"
            )
        parts.append(section.html_tail)
        parts.append("</section>")
        if i == 0 and summary:
            parts.append(summary)
            summary = ""
    parts.append(summary)
    meta_text = ", ".join(f"{k}: {v}" for k, v in meta.items())
    parts.append(f"</main><footer>{html.escape(meta_text)}</footer>")
    if charts:
        parts.append(_charts_script(charts))
    parts.append("</body></html>")
    index = out / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    return index
