"""A self-contained HTML report: sections of text, tables and PNG figures, plus the numbers.

:func:`write_report` writes ``index.html`` (no external scripts, styles or fonts; the
figures are PNG files beside it), every table as CSV, and ``results.json`` holding all tables
and the run's metadata, so the numbers can be read back without parsing HTML.

Written by hand rather than with a template engine: the page is a fixed, small layout and the
only dynamic parts are escaped text and :meth:`pandas.DataFrame.to_html` tables.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

__all__ = ["ReportFigure", "ReportSection", "ReportTable", "write_report"]


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
    floatfmt: str = "{:,.4g}"
    """How floats are shown in the HTML (the CSV keeps full precision)."""


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
    figures: tuple[ReportFigure, ...] = ()
    """Figures, in order."""


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
footer { font-size: .85rem; color: #667; text-align: center; padding: 1rem; }
"""


def _format_cell(value: object, floatfmt: str) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return floatfmt.format(value)
    return str(value)


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
    records) only go to ``results.json``. Returns the path of ``index.html``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nav = " ".join(f'<a href="#{s.key}">{html.escape(s.title)}</a>' for s in sections)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p></header>",
        f"<nav>{nav}</nav><main>",
    ]
    if key_findings:
        items = "".join(f"<li>{html.escape(k)}</li>" for k in key_findings)
        parts.append(
            f'<section id="summary"><h2>Answers</h2><ul class="key">{items}</ul></section>'
        )
    results: dict = {
        "meta": meta,
        "key": numbers or {},
        "privacy": list(privacy or []),
        "tables": {},
    }
    for section in sections:
        parts.append(
            f'<section id="{html.escape(section.key)}"><h2>{html.escape(section.title)}</h2>'
        )
        parts.extend(f"<p>{html.escape(p)}</p>" for p in section.paragraphs)
        for table in section.tables:
            parts.append(_table_html(table))
            table.frame.to_csv(out / f"{table.name}.csv", index=False)
            results["tables"][table.name] = _json_safe(table.frame)
        for figure in section.figures:
            caption = html.escape(figure.caption)
            parts.append(
                f'<figure><img src="{html.escape(figure.file)}" alt="{caption}">'
                f"<figcaption>{caption}</figcaption></figure>"
            )
        parts.append("</section>")
    meta_text = ", ".join(f"{k}: {v}" for k, v in meta.items())
    parts.append(f"</main><footer>{html.escape(meta_text)}</footer></body></html>")
    index = out / "index.html"
    index.write_text("\n".join(parts), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    return index
