"""The figures of [FV19] §6.1.3: a day-ahead forecast (Fig. 5) and the error by method (Fig. 6).

Both draw on a :class:`matplotlib.figure.Figure` created without pyplot (no global state, no
GUI: it renders with the Agg canvas when saved), or on an ``ax`` the caller passes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mechanisms import DomainError, ParameterError
from mechanisms.core._validation import check_integer

from ._series import as_series

__all__ = ["plot_forecast", "plot_forecast_errors"]

_RED = "#c0392b"


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    return Figure(figsize=figsize, layout="constrained").add_subplot()


def plot_forecast(
    truth: pd.Series,
    forecasts: pd.DataFrame,
    *,
    released: pd.Series | None = None,
    origin: object = None,
    history: int = 144,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Draw one day-ahead forecast as in [FV19] Fig. 5.

    Black: the real series over the ``history`` steps before the origin; gray: the real day
    being forecast; dotted red: the (released) history the model was trained on; solid red:
    the forecast, with its interval shaded when ``forecasts`` has ``lower``/``upper``.

    Parameters
    ----------
    truth : pandas.Series
        The real series, indexed like ``forecasts["time"]``.
    forecasts : pandas.DataFrame
        Output of :func:`forecasting.rolling_forecast`.
    released : pandas.Series, optional
        The series the forecasts were fitted on, when it is not ``truth``.
    origin : optional
        Which origin to draw (a value of ``forecasts["origin"]``); default the first.
    history : int, default 144
        Steps of history drawn before the origin (three days of half-hours).
    ax : matplotlib Axes, optional
        Draw there; default a new figure.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    owner = "plot_forecast"
    history = check_integer(history, "history", owner)
    if not isinstance(forecasts, pd.DataFrame) or not {"origin", "time", "forecast"} <= set(
        forecasts.columns
    ):
        raise ParameterError(
            f"The 'forecasts' parameter of {owner} must be the output of rolling_forecast."
        )
    origins = pd.unique(forecasts["origin"])
    if origin is None:
        origin = origins[0]
    one = forecasts[forecasts["origin"] == origin]
    if one.empty:
        raise ParameterError(
            f"The 'origin' parameter of {owner} must be one of the forecast origins. "
            f"Got {origin!r} instead."
        )
    real = as_series(truth, "truth", owner)
    if origin not in real.index:
        raise DomainError(f"The 'truth' argument of {owner} must contain the origin {origin}.")
    at = real.index.get_loc(origin)
    past = real.iloc[max(at - history, 0) : at]
    ax = _axes(ax, (7.0, 3.0))
    ax.plot(past.index, past.to_numpy(), color="black", lw=1.2, label="real")
    day = real.reindex(pd.Index(one["time"]))
    ax.plot(day.index, day.to_numpy(), color="0.6", lw=1.2, label="real (forecast day)")
    if released is not None:
        rel = as_series(released, "released", owner)
        rel = rel[(rel.index >= past.index[0]) & (rel.index < origin)] if len(past) else rel[:0]
        ax.plot(rel.index, rel.to_numpy(), color=_RED, lw=1.0, ls=":", label="released")
    if {"lower", "upper"} <= set(one.columns):
        ax.fill_between(one["time"], one["lower"], one["upper"], color=_RED, alpha=0.15, lw=0)
    ax.plot(one["time"], one["forecast"], color=_RED, lw=1.6, label="forecast")
    ax.axvline(origin, color="0.3", lw=0.6, ls="--")
    if title:
        ax.set_title(title)
    ax.legend(fontsize="x-small", loc="upper left")
    ax.tick_params(axis="x", labelrotation=30, labelsize="small")
    return ax.figure


def plot_forecast_errors(
    table: pd.DataFrame,
    *,
    value: str = "l1",
    by: str = "month",
    method: str = "method",
    reference: str | None = "Real",
    order: Sequence[str] | None = None,
    log: bool = True,
    ax: Axes | None = None,
    title: str | None = None,
    ylabel: str | None = None,
) -> Figure:
    """Draw the mean forecast error per method, grouped by ``by``, as in [FV19] Fig. 6.

    Parameters
    ----------
    table : pandas.DataFrame
        Long format: columns ``by``, ``method`` and ``value`` (rows of one group and method
        are averaged).
    value, by, method : str
        Column names (defaults: ``l1`` per ``month`` per ``method``).
    reference : str, optional
        The method drawn first, in black (the real-data forecast); None: no special method.
    order : sequence of str, optional
        Method order; default ``reference`` then order of appearance.
    log : bool, default True
        Logarithmic error axis (the paper plots log10 of the mean error).
    ax : matplotlib Axes, optional
    title, ylabel : str, optional
        Default y label: "mean <value> error".

    Returns
    -------
    matplotlib.figure.Figure
    """
    owner = "plot_forecast_errors"
    if not isinstance(table, pd.DataFrame) or not {value, by, method} <= set(table.columns):
        raise ParameterError(
            f"The 'table' parameter of {owner} must be a DataFrame with columns "
            f"{[by, method, value]}."
        )
    if table.empty:
        raise ParameterError(f"The 'table' parameter of {owner} must not be empty.")
    means = table.groupby([by, method], sort=False)[value].mean()
    groups = list(pd.unique(table[by]))
    if order is None:
        order = list(pd.unique(table[method]))
        if reference in order:
            order = [reference, *[m for m in order if m != reference]]
    order = list(order)
    ax = _axes(ax, (7.0, 3.2))
    width = 0.8 / len(order)
    colors = {m: f"C{i}" for i, m in enumerate(m for m in order if m != reference)}
    colors[reference] = "black"  # type: ignore[index]
    x = np.arange(len(groups))
    for i, name in enumerate(order):
        heights = [means.get((g, name), np.nan) for g in groups]
        ax.bar(
            x + (i - (len(order) - 1) / 2) * width,
            heights,
            width,
            label=name,
            color=colors.get(name),
        )
    ax.set_xticks(x, [str(g) for g in groups])
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel if ylabel is not None else f"mean {value} error")
    if title:
        ax.set_title(title)
    ax.legend(
        fontsize="x-small", ncols=min(len(order), 5), loc="upper center",
        bbox_to_anchor=(0.5, -0.08), frameon=False,
    )  # fmt: skip
    return ax.figure
