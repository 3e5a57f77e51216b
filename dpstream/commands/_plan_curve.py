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


def hierarchy_curve_spec(
    history: pd.DataFrame,
    hierarchy: dict,
    *,
    alpha: float,
    epsilons: list[float],
    w: int = 48,
    names: dict[str, str] | None = None,
    title: str = "Predicted error per level against ε",
) -> dict:
    """The report's chart: predicted MAE/mean load per level of an OptStream release against
    ε, planned on ``history`` (public leaves' columns) with :func:`planner.optstream_forward`.

    ``names`` renames the levels (e.g. ``{"root": "national", "leaves": "regions"}``).
    """
    import functools

    import numpy as np

    from dpstream.pipelines._frames import prepare_frame
    from planner import epsilon_curve, optstream_forward

    sf = prepare_frame(history, owner="hierarchy_curve_spec", hierarchy=hierarchy)
    forward = functools.partial(
        optstream_forward, sf.values, alpha=alpha, w=w, matrix=sf.hierarchy.matrix,
        depth=sf.level, node_names=sf.nodes,
    )  # fmt: skip
    low, high = min(epsilons), max(epsilons)
    grid = sorted(set(np.geomspace(low / 4.0, high * 4.0, 13).tolist()) | set(epsilons))
    frame = epsilon_curve(forward, grid)
    if names:
        frame["level"] = frame["level"].map(lambda v: names.get(v, v))
    return curve_spec(frame, metric="mape", title=title)
