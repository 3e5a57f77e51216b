"""The ε–error curve of a plan as an interactive chart (issue 23 item 3).

One line per level of the predicted error against ε (both axes logarithmic), the target as a
horizontal rule and the returned ε as a point, realised points where the caller has them.
Written as one HTML page with the Vega JavaScript inlined (``vl-convert-python``'s bundle, as
the report), so it opens offline. altair is imported when a chart is written, not at CLI
start-up.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

__all__ = ["curve_spec", "write_curve"]

_METRIC_TITLES = {
    "mape": "predicted relative error (MAE / mean load)",
    "mae": "predicted mean absolute error",
    "rmse": "predicted root mean square error",
}


def curve_spec(
    curve: pd.DataFrame,
    *,
    metric: str,
    title: str,
    target: float | None = None,
    chosen: tuple[float, float] | None = None,
    realised: pd.DataFrame | None = None,
) -> dict:
    """Vega-Lite specification of the curve (``curve``: epsilon, level, metric, predicted).

    ``realised``: optional rows (epsilon, level, realised) drawn as points.
    """
    import altair as alt

    data = curve[curve["metric"] == metric]
    x = alt.X("epsilon:Q", scale=alt.Scale(type="log"), title="ε")
    y_title = _METRIC_TITLES.get(metric, metric)
    fmt = ".2%" if metric == "mape" else ".4~g"
    lines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y(
                "predicted:Q", scale=alt.Scale(type="log"), title=y_title, axis=alt.Axis(format=fmt)
            ),  # fmt: skip
            color=alt.Color("level:N", title="level"),
            tooltip=[
                alt.Tooltip("level:N"),
                alt.Tooltip("epsilon:Q", format=".4~g", title="ε"),
                alt.Tooltip("predicted:Q", format=fmt, title="predicted"),
            ],
        )
    )
    layers = [lines]
    if target is not None:
        layers.append(
            alt.Chart(pd.DataFrame({"target": [target]}))
            .mark_rule(strokeDash=[6, 4], color="#444")
            .encode(y="target:Q", tooltip=[alt.Tooltip("target:Q", format=fmt)])
        )
    if chosen is not None:
        layers.append(
            alt.Chart(pd.DataFrame({"epsilon": [chosen[0]], "predicted": [chosen[1]]}))
            .mark_point(size=160, shape="diamond", filled=True, color="#d62728")
            .encode(
                x="epsilon:Q",
                y="predicted:Q",
                tooltip=[alt.Tooltip("epsilon:Q", format=".4~g", title="chosen ε")],
            )  # fmt: skip
        )
    if realised is not None and len(realised):
        layers.append(
            alt.Chart(realised)
            .mark_point(shape="cross", size=90, filled=True)
            .encode(
                x="epsilon:Q",
                y="realised:Q",
                color=alt.Color("level:N"),
                tooltip=[alt.Tooltip("level:N"), alt.Tooltip("realised:Q", format=fmt)],
            )  # fmt: skip
        )
    chart = alt.layer(*layers).properties(width=560, height=340, title=title).interactive()
    return chart.to_dict()


def write_curve(spec: dict, path: str, *, title: str) -> None:
    """One self-contained HTML page with the chart (Vega inlined: works offline)."""
    from dpstream.demo._charts import javascript_bundle

    payload = json.dumps(spec, default=str, ensure_ascii=False).replace("</", "<\\/")
    embed = (
        f"const spec = {payload};\n"
        "window.vegaEmbed('#curve', spec, {actions: false, renderer: 'svg'})\n"
        "  .then(() => document.getElementById('curve').dataset.rendered = 'yes')\n"
        "  .catch((e) => { document.getElementById('curve').textContent = "
        "'This chart could not be drawn: ' + e; });\n"
    )
    page = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head><body>"
        f"<h1 style='font-family:sans-serif;font-size:1.2rem'>{html.escape(title)}</h1>"
        "<div id='curve'></div>"
        f'<script type="module">{javascript_bundle()}</script>\n'
        f'<script type="module">{embed}</script></body></html>\n'
    )
    Path(path).write_text(page, encoding="utf-8")
