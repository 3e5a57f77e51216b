"""Interactive figures of the demo report: Vega-Lite specifications built with altair.

Each function turns a stage's public results (already computed tables and series) into a
Vega-Lite specification (a plain ``dict``) that :func:`dpstream.demo._report.write_report`
embeds in ``index.html`` with the Vega JavaScript inlined (``vl-convert-python``'s bundle), so
the page works offline. Every chart has titled axes with units, a tooltip with the value and
its unit, and (for curves) zoom and pan with the mouse wheel and drag.

altair rather than hand-written Vega-Lite: it validates the specification against the schema
when it is built, so a broken chart fails here and not silently in the reader's browser.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "chart_forecast_day",
    "chart_forecast_errors",
    "chart_hierarchy_errors",
    "chart_pak_sweeps",
    "chart_series",
    "javascript_bundle",
]

#: Colours of the methods, shared by every chart (the real data in black).
PALETTE = {
    "Real": "#111111",
    "OptStream (planned k)": "#d62728",
    "OptStream (L1 sampler, k = 10)": "#ff7f0e",
    "OptStream + noise-aware fit": "#8c564b",
    "Laplace": "#1f77b4",
    "DFT": "#2ca02c",
    "PeGaSus": "#9467bd",
}
_TIME = "%a %d %b %H:%M"


def _alt():
    import altair as alt  # heavy: imported when a report is written, not with the CLI

    return alt


def _color(alt, names):
    names = list(dict.fromkeys(names))
    return alt.Color(
        "method:N",
        title="data",
        scale=alt.Scale(domain=names, range=[PALETTE.get(n, "#7f7f7f") for n in names]),
        legend=alt.Legend(orient="bottom", columns=3, labelLimit=260),
    )


def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script (assigns ``window.vegaEmbed``)."""
    import vl_convert

    return vl_convert.javascript_bundle()


def chart_series(truth: pd.Series, releases: dict[float, dict[str, pd.Series]], *, unit: str,
                 clip: float, bands: dict[float, tuple[str, pd.Series, pd.Series]] | None = None,
                 ) -> dict:  # fmt: skip
    """The real series and its releases, one panel per ε; the y axis is clipped at ``clip``.

    Spikes of noisy releases would otherwise squash the real curve into a flat line: values
    above ``clip`` are drawn at the top edge and the tooltip still shows the true released
    value. ``bands[ε] = (method, low, high)`` shades an interval around that method's release
    (e.g. ± 1.96 standard errors from :func:`dpstream.std_errors`).
    """
    alt = _alt()
    panels = []
    for i, (eps, by_method) in enumerate(releases.items()):
        frames = [pd.DataFrame({"time": truth.index, "value": truth.to_numpy(), "method": "Real"})]
        for method, released in by_method.items():
            part = released.loc[truth.index]
            frames.append(
                pd.DataFrame({"time": part.index, "value": part.to_numpy(), "method": method})
            )
        data = pd.concat(frames, ignore_index=True)
        data["time"] = data["time"].dt.strftime("%Y-%m-%dT%H:%M:%S")
        # Click a legend entry to show that method alone (shift-click for several).
        pick = alt.selection_point(fields=["method"], bind="legend", name=f"pick_{i}")
        band = None
        if bands and eps in bands:
            method, low, high = bands[eps]
            low, high = low.loc[truth.index], high.loc[truth.index]
            shade = pd.DataFrame(
                {
                    "time": truth.index.strftime("%Y-%m-%dT%H:%M:%S"),
                    "low": low.clip(0, clip).to_numpy(),
                    "high": high.clip(0, clip).to_numpy(),
                    "method": method,
                }
            )
            band = (
                alt.Chart(shade)
                .mark_area(opacity=0.18, clip=True)
                .encode(
                    x="time:T",
                    y=alt.Y("low:Q", scale=alt.Scale(domain=[0, clip], clamp=True)),
                    y2="high:Q",
                    color=_color(alt, data["method"]),
                    tooltip=[
                        alt.Tooltip("method:N", title="band of"),
                        alt.Tooltip("low:Q", title=f"low ({unit})", format=",.0f"),
                        alt.Tooltip("high:Q", title=f"high ({unit})", format=",.0f"),
                    ],
                )
            )
        lines = (
            alt.Chart(data, title=f"National load and its releases, ε = {eps:g}")
            .mark_line(strokeWidth=1.4, clip=True)
            .encode(
                x=alt.X(
                    "time:T",
                    title="time (half-hour steps)",
                    axis=alt.Axis(format="%d %b %H:%M", labelAngle=0, tickCount=6),
                ),
                y=alt.Y(
                    "value:Q",
                    title=f"load ({unit})",
                    scale=alt.Scale(domain=[0, clip], clamp=True),
                    axis=alt.Axis(format=",.0f"),
                ),
                color=_color(alt, data["method"]),
                opacity=alt.condition(pick, alt.value(1.0), alt.value(0.07)),
                tooltip=[
                    alt.Tooltip("method:N", title="data"),
                    alt.Tooltip("time:T", title="time", format=_TIME),
                    alt.Tooltip("value:Q", title=f"load ({unit})", format=",.0f"),
                ],
            )  # fmt: skip
            .add_params(alt.selection_interval(bind="scales", name=f"zoom_{i}"), pick)
        )
        layered = lines if band is None else alt.layer(band, lines)
        panels.append(layered.properties(width=900, height=240))
    return alt.vconcat(*panels).to_dict()


def chart_hierarchy_errors(table: pd.DataFrame, *, unit: str) -> dict:
    """Mean absolute error per step by method, ε and level (log scale), with the share of load.

    ``table`` has columns ``epsilon``, ``method``, ``level``, ``error`` (in ``unit``) and
    ``share`` (error / mean load, a fraction).
    """
    alt = _alt()
    data = table.assign(eps=[f"ε = {e:g}" for e in table["epsilon"]])
    # Bars on a log axis need an explicit base (log 0 is undefined): the power of ten below
    # the smallest bar.
    base = float(10.0 ** np.floor(np.log10(max(float(data["error"].min()), 1e-9))))
    top = float(data["error"].max())
    ticks = [v for v in base * np.array([1, 3, 10, 30, 100, 300, 1e3, 3e3]) if v <= 3 * top]
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("method:N", title=None, sort=None, axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y(
                "error:Q",
                title=f"error ({unit} per half-hour, log scale)",
                scale=alt.Scale(type="log", domainMin=base),
                axis=alt.Axis(format=",.0f", values=ticks),
            ),
            y2=alt.Y2(datum=base),
            color=_color(alt, data["method"]),
            tooltip=[
                alt.Tooltip("method:N", title="method"),
                alt.Tooltip("eps:N", title="privacy loss"),
                alt.Tooltip("level:N", title="series"),
                alt.Tooltip("error:Q", title=f"error ({unit} per half-hour)", format=",.3r"),
                alt.Tooltip("share:Q", title="share of the mean load", format=".1%"),
            ],
        )  # fmt: skip
        .properties(width=230, height=240)
        .facet(
            column=alt.Column("eps:N", title=None, sort="descending"),
            row=alt.Row("level:N", title=None),
        )  # fmt: skip
        .to_dict()
    )


def chart_pak_sweeps(eps_sweep: pd.DataFrame, lag_sweep: pd.DataFrame, *, m: int,
                     epsilon: float) -> dict:  # fmt: skip
    """[PAK19] Fig. 7: planned improvement factor against ε and against the time lag m.

    Points on every planned value so a sweep of two values is not mistaken for a curve.
    """
    alt = _alt()

    def panel(frame, x, title, xtitle, scale, fmt):
        data = pd.DataFrame({"x": frame[x].to_numpy(), "IF": frame["IF"].to_numpy()})
        return (
            alt.Chart(data, title=title)
            .mark_line(point=alt.OverlayMarkDef(size=60))
            .encode(
                x=alt.X(
                    "x:Q",
                    title=xtitle,
                    scale=scale,
                    axis=alt.Axis(format=fmt, tickCount=5, labelAngle=0),
                ),
                y=alt.Y(
                    "IF:Q",
                    title="improvement factor over the binary tree (×)",
                    scale=alt.Scale(zero=False),
                ),
                tooltip=[
                    alt.Tooltip("x:Q", title=xtitle, format=",~r"),
                    alt.Tooltip("IF:Q", title="improvement (×)", format=".3r"),
                ],
            )  # fmt: skip
            .properties(width=400, height=240)
        )

    return alt.hconcat(
        panel(eps_sweep, "epsilon", f"against ε (m = {m:,})", "privacy loss ε (log scale)",
              alt.Scale(type="log"), "~g"),
        panel(lag_sweep, "m", f"against the time lag m (ε = {epsilon:g})",
              "time lag m (readings held back; k = thousand)", alt.Scale(zero=False), "~s"),
    ).to_dict()  # fmt: skip


def chart_forecast_day(truth: pd.Series, forecasts: dict[str, pd.DataFrame], *, unit: str) -> dict:
    """The first forecast day: the real load and each method's day-ahead forecast."""
    alt = _alt()
    first = {name: fc[fc["origin"] == fc["origin"].min()] for name, fc in forecasts.items()}
    times = next(iter(first.values()))["time"]
    frames = [
        pd.DataFrame(
            {"time": times.to_numpy(), "value": truth.loc[times].to_numpy(), "method": "Real"}
        )
    ]
    for name, fc in first.items():
        frames.append(
            pd.DataFrame(
                {"time": fc["time"].to_numpy(), "value": fc["forecast"].to_numpy(),
                 "method": f"forecast on {name}" if name != "Real" else "forecast on real data"}
            )
        )  # fmt: skip
    data = pd.concat(frames, ignore_index=True)
    data["time"] = pd.to_datetime(data["time"]).dt.strftime("%Y-%m-%dT%H:%M:%S")
    names = list(dict.fromkeys(data["method"]))
    colours = ["#111111", "#7f7f7f"] + [
        PALETTE.get(n.removeprefix("forecast on "), "#17becf") for n in names[2:]
    ]
    return (
        alt.Chart(data, title="The first forecast day: real load and day-ahead forecasts")
        .mark_line(strokeWidth=1.6)
        .encode(
            x=alt.X(
                "time:T",
                title="time (half-hour steps)",
                axis=alt.Axis(format="%H:%M", labelAngle=0, tickCount=8),
            ),
            y=alt.Y(
                "value:Q",
                title=f"national load ({unit})",
                scale=alt.Scale(zero=False),
                axis=alt.Axis(format=",.0f"),
            ),
            color=alt.Color(
                "method:N",
                title=None,
                scale=alt.Scale(domain=names, range=colours),
                legend=alt.Legend(orient="bottom", columns=3, labelLimit=300),
            ),
            strokeDash=alt.condition(
                alt.datum.method == "Real", alt.value([1, 0]), alt.value([5, 2])
            ),
            tooltip=[
                alt.Tooltip("method:N", title="data"),
                alt.Tooltip("time:T", title="time", format=_TIME),
                alt.Tooltip("value:Q", title=f"load ({unit})", format=",.0f"),
            ],
        )  # fmt: skip
        .properties(width=900, height=280)
        .interactive()
        .to_dict()
    )


def chart_forecast_errors(table: pd.DataFrame, *, unit: str) -> dict:
    """Mean absolute error of the day-ahead forecasts by the data they were fitted on."""
    alt = _alt()
    data = table.rename(columns={f"mean absolute error ({unit})": "error", "MAPE (%)": "mape"})[
        ["method", "error", "mape"]
    ].assign(mape=lambda d: d["mape"] / 100.0)
    data = data.replace({np.inf: None})
    return (
        alt.Chart(data, title="Day-ahead forecast error by the data the model was fitted on")
        .mark_bar()
        .encode(
            y=alt.Y("method:N", title=None, sort=None, axis=alt.Axis(labelLimit=300)),
            x=alt.X(
                "error:Q",
                title=f"mean absolute error per half-hour ({unit})",
                axis=alt.Axis(format=",.0f"),
            ),
            color=alt.Color(
                "method:N",
                legend=None,
                scale=alt.Scale(
                    domain=list(data["method"]),
                    range=[PALETTE.get(m, "#7f7f7f") for m in data["method"]],
                ),
            ),
            tooltip=[
                alt.Tooltip("method:N", title="fitted on"),
                alt.Tooltip("error:Q", title=f"error ({unit} per half-hour)", format=",.3r"),
                alt.Tooltip("mape:Q", title="MAPE (share of the load)", format=".1%"),
            ],
        )  # fmt: skip
        .properties(width=700, height=28 * len(data))
        .to_dict()
    )
