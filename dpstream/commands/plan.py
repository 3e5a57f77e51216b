"""``dpstream plan``: choose privacy parameters and predict the error before releasing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import numpy as np
import pandas as pd

from mechanisms import ParameterError
from planner import pak_table, plot_sweeps, sweep_epsilon, sweep_time_lag, time_lag_heuristic
from planner._pak_plan import ANALYSIS_NOTE

from ._accounting import check_writable, write_privacy
from ._checks import cli_terms, option_float, option_int, option_probability

__all__ = ["plan"]

_EPSILON_GRID = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Formats matplotlib writes without extra dependencies.
_PLOT_SUFFIXES = (".png", ".pdf", ".svg")
_JSON_KEYS = {"λ": "lam", "ε₁/ε": "eps1_share"} | {
    f"β_{k}/β": f"beta_{k}_share" for k in ("qt", "lt", "lap", "out", "rt")
}


@click.group()
def plan() -> None:
    """Choose privacy parameters and predict the error they give."""


def _time_lags(values: tuple[str, ...]) -> list[int]:
    out: list[int] = []
    for item in values:
        for part in str(item).replace(",", " ").split():
            try:
                out.append(int(float(part)))
            except ValueError:
                raise ParameterError(
                    f"The '--time-lag' option of dpstream plan pak must be integers. Got "
                    f"{part!r} instead."
                ) from None
    return out


def _load_prefix(path: str) -> np.ndarray:
    file = Path(path)
    if not file.is_file():
        raise ParameterError(f"The '--prefix' option of dpstream plan pak: no file {path!r}.")
    try:
        if file.suffix == ".npy":
            values = np.load(file, allow_pickle=False)
        else:
            frame = pd.read_csv(file, header=None, comment="#")
            if frame.shape[1] != 1:
                raise ParameterError(
                    f"The '--prefix' file of dpstream plan pak must have one column. Got "
                    f"{frame.shape[1]} columns."
                )
            col = pd.to_numeric(frame.iloc[:, 0], errors="coerce")
            if math.isnan(col.iloc[0]):  # a header line
                col = col.iloc[1:]
            if col.isna().any():
                raise ParameterError(
                    f"The '--prefix' file of dpstream plan pak must hold numbers only; "
                    f"{int(col.isna().sum())} entries are not numbers."
                )
            values = col.to_numpy(dtype=np.float64)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError(
            f"The '--prefix' file of dpstream plan pak could not be read as CSV or .npy "
            f"({type(exc).__name__})."
        ) from None
    return np.asarray(values, dtype=np.float64).ravel()


@plan.command("pak")
@click.option("--n", "n", type=int, required=True, help="Stream length n.")
@click.option("--bound", type=float, required=True, help="Public bound B on every value.")
@click.option("--epsilon", type=float, default=1.0, show_default=True, help="Total ε.")
@click.option("--delta", type=float, default=2.0**-20, show_default=True, help="δ.")
@click.option("--beta", type=float, default=0.02, show_default=True, help="Failure prob. β.")
@click.option("--p-max", type=float, default=0.005, show_default=True, help="Largest p.")
@click.option(
    "--time-lag",
    "--m",
    "time_lag",
    multiple=True,
    help="Time lag(s) m to tabulate (repeat or comma-separate). Default: the prefix length.",
)
@click.option(
    "--prefix",
    type=str,
    default=None,
    help="CSV (one column) or .npy file of the first values: data-driven analysis.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--plot", type=str, default=None, help="Write the IF sweeps (Fig. 7) here.")
def pak(n, bound, epsilon, delta, beta, p_max, time_lag, prefix, as_json, plot) -> None:
    """Parameters of PAK's Mechanism 1 ([PAK19] §VI) and the error they predict.

    Without --prefix only public inputs are used: prints the private time lag m of §VI-B
    (criteria 1 and 2), which may be published. With --prefix the parameters are optimised
    on the data (Eq. 16, scipy TNC): an analysis, NOT a private choice.

    \b
    Examples:
      dpstream plan pak --n 25000000 --bound 1440 --epsilon 1 --delta 9.5367e-7
      dpstream plan pak --n 25000000 --bound 1440 --prefix trips.npy --m 50000,100000
      dpstream plan pak --n 36969 --bound 10000 --prefix retail.csv --json
      dpstream plan pak --n 25000000 --bound 1440 --prefix trips.npy --plot fig7.png
    """
    cmd = "dpstream plan pak"
    option_int(n, "--n", cmd)
    option_float(bound, "--bound", cmd)
    option_float(epsilon, "--epsilon", cmd)
    for value, name in ((delta, "--delta"), (beta, "--beta"), (p_max, "--p-max")):
        option_probability(value, name, cmd)
    lags = _time_lags(time_lag)
    for lag_value in lags:
        option_int(lag_value, "--time-lag", cmd, minimum=2)
    if plot is not None:
        if Path(plot).suffix.lower() not in _PLOT_SUFFIXES:
            raise ParameterError(
                f"The '--plot' option of {cmd} must end in one of {list(_PLOT_SUFFIXES)}. Got "
                f"{Path(plot).name!r}."
            )
        check_writable(plot, "--plot", cmd)
    names = {
        "values": "The '--prefix' file",
        "prefix": "The '--prefix' file",
        "time_lags": "The '--time-lag' option",
    }
    with cli_terms(cmd, names, ("n", "bound", "epsilon", "delta", "beta", "p_max")):
        _plan_pak(n, bound, epsilon, delta, beta, p_max, lags, prefix, as_json, plot)


def _plan_pak(n, bound, epsilon, delta, beta, p_max, lags, prefix, as_json, plot) -> None:
    if prefix is None:
        if plot:
            raise ParameterError("The '--plot' option of dpstream plan pak needs --prefix.")
        lag = time_lag_heuristic(epsilon=epsilon, delta=delta, beta=beta, p_max=p_max)
        record = {
            "criterion1": lag.criterion1,
            "criterion2": lag.criterion2,
            "m": lag.m,
            "criterion2_bound": lag.criterion2_bound,
            "kappa": lag.kappa,
            "private": True,
        }
        if as_json:
            click.echo(json.dumps(record, indent=2))
            return

        def shown(m: int) -> str:  # no absurd figures: beyond n, only "more than n"
            return f"{m:,}" if m <= n else f"more than n = {n:,}"

        click.echo("Private time lag ([PAK19] §VI-B, public inputs only):")
        click.echo(f"  criterion 1 (g(0.5, p_max, m) < β):   m >= {shown(lag.criterion1)}")
        click.echo(f"  criterion 2 (Eqs. 17-19):             m >= {shown(lag.criterion2)}")
        click.echo(f"  time lag m:                           {shown(lag.m)}")
        if lag.m >= n:
            click.echo(f"  m >= n = {n:,}: the threshold cannot pay here; use plain BT.")
        return
    values = _load_prefix(prefix)
    lags = lags or [int(values.size)]
    table = pak_table(
        values, lags, n=n, bound=bound, epsilon=epsilon, delta=delta, beta=beta, p_max=p_max,
        full=True,
    )  # fmt: skip
    if plot:
        grid = sorted({max(2, int(values.size * f)) for f in (0.25, 0.5, 1.0)})
        lag_sweep = sweep_time_lag(
            values, sorted(set(lags) | set(grid)), n=n, bound=bound, epsilon=epsilon,
            delta=delta, beta=beta, p_max=p_max,
        )  # fmt: skip
        eps_sweep = sweep_epsilon(
            values, _EPSILON_GRID, time_lag=max(lags), n=n, bound=bound, delta=delta,
            beta=beta, p_max=p_max,
        )  # fmt: skip
        plot_sweeps(eps_sweep, lag_sweep, plot)
        write_privacy(plot, {"release": False, "note": f"{ANALYSIS_NOTE}."})
    if as_json:
        records = table.rename(columns=_JSON_KEYS).to_dict(orient="records")
        click.echo(
            json.dumps({"plans": records, "private": False, "note": ANALYSIS_NOTE}, indent=2)
        )
        return
    terms = ("laplace_error_bound", "outlier_error_bound", "tau_max")
    shown = table.drop(columns=[c for c in terms if c in table])
    click.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    click.echo(f"Note: {ANALYSIS_NOTE}.")
    if plot:
        click.echo(f"Wrote {plot}.")
