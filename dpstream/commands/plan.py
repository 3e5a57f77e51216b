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
#: ε range of the inverse PAK plan (``--epsilon-min``/``--epsilon-max``).
_EPSILON_MIN_PAK, _EPSILON_MAX_PAK = 1e-2, 100.0
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


def _load_prefix(path: str, cmd: str = "dpstream plan pak") -> np.ndarray:
    file = Path(path)
    if not file.is_file():
        raise ParameterError(f"The '--prefix' option of {cmd}: no file {path!r}.")
    try:
        if file.suffix == ".npy":
            values = np.load(file, allow_pickle=False)
        else:
            frame = pd.read_csv(file, header=None, comment="#")
            if frame.shape[1] != 1:
                raise ParameterError(
                    f"The '--prefix' file of {cmd} must have one column. Got "
                    f"{frame.shape[1]} columns."
                )
            col = pd.to_numeric(frame.iloc[:, 0], errors="coerce")
            if math.isnan(col.iloc[0]):  # a header line
                col = col.iloc[1:]
            if col.isna().any():
                raise ParameterError(
                    f"The '--prefix' file of {cmd} must hold numbers only; "
                    f"{int(col.isna().sum())} entries are not numbers."
                )
            values = col.to_numpy(dtype=np.float64)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError(
            f"The '--prefix' file of {cmd} could not be read as CSV or .npy ({type(exc).__name__})."
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
@click.option("--target-rmse", type=float, default=None,
              help="Inverse: the ε of this predicted RMSE of a range sum of L steps.")  # fmt: skip
@click.option("--range-length", type=int, default=None,
              help="L: range sums of L steps of the released suffix (L <= n - m), or the "
                   "prefix sum c(σ, L) (L > n - m; default n, the total).")  # fmt: skip
@click.option("--counter", type=str, default="auto", show_default=True,
              help="Counter of the mean-square plan (--target-rmse/--range-length).")  # fmt: skip
@click.option("--epsilon-min", type=float, default=_EPSILON_MIN_PAK, show_default=True)
@click.option("--epsilon-max", type=float, default=_EPSILON_MAX_PAK, show_default=True)
@click.option("--curve", type=str, default=None, help="Write the ε-error curve (.html) here.")
@click.option("--releases", type=int, default=None,
              help="Plan the --confidence quantile of the RMSE over this many releases "
                   "(default: the expected RMSE).")  # fmt: skip
@click.option("--confidence", type=float, default=0.9, show_default=True,
              help="With --releases: the probability that the RMSE over them is at most "
                   "the target.")  # fmt: skip
def pak(n, bound, epsilon, delta, beta, p_max, time_lag, prefix, as_json, plot, target_rmse,
        range_length, counter, epsilon_min, epsilon_max, curve, releases,
        confidence) -> None:  # fmt: skip
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
      dpstream plan pak --n 327346 --bound 1440 --prefix trips.npy --target-rmse 2000 --json
      dpstream plan pak --n 327346 --bound 1440 --prefix trips.npy --range-length 327346
      dpstream plan pak --n 327346 --bound 1440 --prefix trips.npy --range-length 1000 \
          --target-rmse 5000 --json
      dpstream plan pak --n 327346 --bound 1440 --prefix trips.npy --target-rmse 2000 \\
          --releases 30 --confidence 0.9

    With --target-rmse (inverse) or --range-length (forward at --epsilon) the plan is
    Mechanism 1 or the plain counter by predicted mean square error (plan_pak_mse: the
    threshold decision on the same footing as the counter). The whole --prefix file is the
    prefix m. With L <= n - m the answer is the RMSE of a range sum of L steps of the
    released suffix, averaged over 2,000 public ranges (a day's total, say); with L > n - m
    (default L = n) that of the released prefix sum c(σ, L), one query per release. An
    unreachable target exits with status 2 after the best RMSE. The RMSE of a few releases
    of one query scatters around the expected one; with --releases N the plan for c(σ, L)
    is for its --confidence quantile over N releases (planner.pak_rmse_quantile).
    """
    cmd = "dpstream plan pak"
    if releases is not None and target_rmse is None and range_length is None and curve is None:
        raise ParameterError(
            f"The '--releases' option of {cmd} applies to --target-rmse/--range-length/--curve."
        )
    if target_rmse is not None or range_length is not None or curve is not None:
        _plan_pak_inverse(
            cmd, n=n, bound=bound, epsilon=epsilon, delta=delta, beta=beta, p_max=p_max,
            prefix=prefix, as_json=as_json, target_rmse=target_rmse, range_length=range_length,
            counter=counter, epsilon_min=epsilon_min, epsilon_max=epsilon_max, curve=curve,
            time_lag=time_lag, plot=plot, releases=releases, confidence=confidence,
        )  # fmt: skip
        return
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


# -- inverse planning and the ε–error curve (issue 23) ---------------------------------------

_CURVE_POINTS = 13
_EPSILON_MIN, _EPSILON_MAX = 1e-3, 100.0


class UnreachableTarget(click.ClickException):
    """The target error is not met even at --epsilon-max (exit status 2, after the answer)."""

    exit_code = 2


def _check_mode(cmd: str, targets: dict[str, float | None], epsilon: float | None) -> None:
    given = [name for name, value in targets.items() if value is not None]
    count = len(given) + (epsilon is not None)
    if count != 1:
        names = " | ".join([*targets, "--epsilon"])
        raise ParameterError(
            f"{cmd} needs exactly one of {names}: a target error (inverse: the ε that meets it) "
            f"or --epsilon (forward: the error at that ε). Got {count} of them."
        )
    for name, value in targets.items():
        option_float(value, name, cmd)
    option_float(epsilon, "--epsilon", cmd)


def _check_range(cmd: str, low: float, high: float) -> None:
    option_float(low, "--epsilon-min", cmd)
    option_float(high, "--epsilon-max", cmd)
    if not low < high:
        raise ParameterError(
            f"The '--epsilon-min' option of {cmd} must be smaller than --epsilon-max. Got "
            f"{low:g} and {high:g}."
        )


def _check_curve(curve: str | None, cmd: str) -> None:
    if curve is None:
        return
    if Path(curve).suffix.lower() not in (".html", ".htm"):
        raise ParameterError(
            f"The '--curve' option of {cmd} must end in .html (an interactive page). Got "
            f"{Path(curve).name!r}."
        )
    check_writable(curve, "--curve", cmd)


def _percent(record: dict) -> dict:
    """MAPE values of a plan's record as percentages (the CLI's unit for --target-mape)."""
    out = dict(record)
    if out.get("predicted_mape") is not None:
        out["predicted_mape"] = 100.0 * out["predicted_mape"]
    if record.get("metric") == "mape" and out.get("target") is not None:
        out["target"] = 100.0 * out["target"]
    out["errors"] = {
        lvl: {m: (100.0 * v if m == "mape" else v) for m, v in errs.items()}
        for lvl, errs in record["errors"].items()
    }
    if record.get("metric") == "mape":
        out["mape_unit"] = "percent (mean absolute error / mean load, per node)"
    return out


def _answer(result, forward, *, cmd: str, as_json: bool, curve: str | None, title: str,
            extra: dict | None = None) -> None:  # fmt: skip
    """Print the plan (text or JSON), write the curve, exit 2 if the target is unreachable."""
    from planner import epsilon_curve

    record = _percent({**result.as_dict(), **(extra or {})})
    level, metric = result.level, result.metric
    record.setdefault(f"predicted_{metric}", record["errors"][level][metric])
    if curve is not None:
        from ._plan_curve import curve_spec, write_curve

        lo, hi = result.epsilon_range
        mid = result.epsilon
        grid = np.geomspace(max(lo, mid / 30.0), min(hi, mid * 30.0), _CURVE_POINTS)
        if not grid[0] < grid[-1]:
            grid = np.geomspace(mid / 30.0, mid * 30.0, _CURVE_POINTS)
        frame = epsilon_curve(forward, sorted(set(grid.tolist()) | {mid}))
        spec = curve_spec(
            frame, metric=metric, title=title, target=result.target,
            chosen=(result.epsilon, result.predicted),
        )  # fmt: skip
        write_curve(spec, curve, title=title)
        write_privacy(curve, {"release": False, "note": result.note})
        record["curve"] = str(curve)
    if as_json:
        click.echo(json.dumps(record, indent=2, default=float))
    else:
        unit = " %" if metric == "mape" else ""
        scale = 100.0 if metric == "mape" else 1.0
        if result.target is not None and not result.reachable:
            click.echo(
                f"Target {metric.upper()} {result.target * scale:.4g}{unit} at level {level!r} is "
                f"NOT reachable with epsilon <= {result.epsilon:g}; the best predicted there is "
                f"{result.predicted * scale:.4g}{unit}:"
            )
        elif result.target is not None:
            click.echo(
                f"Target {metric.upper()} {result.target * scale:.4g}{unit} at level {level!r}: "
                f"epsilon = {result.epsilon:.4g} (predicted {result.predicted * scale:.4g}{unit})."
            )
        else:
            click.echo(f"At epsilon = {result.epsilon:.4g}, predicted errors per level:")
        table = pd.DataFrame(record["errors"]).T.rename(columns={"mape": "mape (%)"})
        table.index.name = "level"
        click.echo(table.to_string(float_format=lambda v: f"{v:.4g}"))
        for key in ("k", "shares", "use_threshold", "counter", "threshold", "leaf_size"):
            if key in record:
                click.echo(f"  {key}: {record[key]}")
        if curve is not None:
            click.echo(f"Wrote {curve}.")
        click.echo(f"Note: {result.note}")
    if not result.reachable:
        unit = " %" if metric == "mape" else ""
        raise UnreachableTarget(
            f"the target {metric.upper()} {result.target * scale_of(metric):.4g}{unit} at level "
            f"{level!r} is not reachable with epsilon <= {result.epsilon:g}: the best predicted "
            f"there is {result.predicted * scale_of(metric):.4g}{unit}. Raise --epsilon-max or "
            "relax the target."
        )


def scale_of(metric: str) -> float:
    """100 for MAPE (shown in percent), else 1."""
    return 100.0 if metric == "mape" else 1.0


@plan.command("optstream")
@click.argument("history", type=str)
@click.option("--alpha", type=float, required=True, help="α of the (w, α) unit, data units.")
@click.option("--w", "w", type=int, default=48, show_default=True, help="Period length w.")
@click.option("--hierarchy", "hierarchy_path", type=str, default=None,
              help="JSON {parent: [children]}; leaves are HISTORY's columns.")  # fmt: skip
@click.option("--time-column", type=str, default=None, help="HISTORY's time column.")
@click.option("--target-mape", type=float, default=None,
              help="Target relative error in percent (MAE / mean load) -> ε.")  # fmt: skip
@click.option("--target-mae", type=float, default=None,
              help="Target mean absolute error (data units) -> ε.")  # fmt: skip
@click.option("--level", type=str, default=None,
              help="Level (root, leaves, level d, all) or node the target is for; "
                   "default the leaves.")  # fmt: skip
@click.option("--epsilon", type=float, default=None, help="Forward: the errors at this ε.")
@click.option("--epsilon-min", type=float, default=_EPSILON_MIN, show_default=True)
@click.option("--epsilon-max", type=float, default=_EPSILON_MAX, show_default=True,
              help="Largest ε considered; beyond it a target is reported unreachable.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--curve", type=str, default=None, help="Write the ε-error curve (.html) here.")
def optstream(history, alpha, w, hierarchy_path, time_column, target_mape, target_mae, level,
              epsilon, epsilon_min, epsilon_max, as_json, curve) -> None:  # fmt: skip
    """ε for an error target of OptStream, or the error per level at an ε (issue 23).

    HISTORY is a table in the release command's input format (CSV or Parquet, one column per
    leaf stream, a time column): public history or earlier releases, never the data to be
    released. The prediction is the in-stream planner's ([FV19] §4: noise of the k samples
    plus interpolation error from the history's variogram) for the best k and level shares.
    Errors per level: MAE and the relative error MAE / mean load (per node, in percent).
    An unreachable target prints the best error at --epsilon-max and exits with status 2.

    \b
    Examples:
      dpstream plan optstream last_month.csv --alpha 50 --hierarchy tree.json \\
          --target-mape 3 --level root
      dpstream plan optstream last_month.csv --alpha 50 --hierarchy tree.json \\
          --epsilon 1 --json
      dpstream plan optstream last_month.csv --alpha 50 --target-mae 40 --curve curve.html
    """
    cmd = "dpstream plan optstream"
    _check_mode(cmd, {"--target-mape": target_mape, "--target-mae": target_mae}, epsilon)
    option_float(alpha, "--alpha", cmd)
    option_int(w, "--w", cmd, minimum=2)
    _check_range(cmd, epsilon_min, epsilon_max)
    _check_curve(curve, cmd)
    import functools

    from dpstream.pipelines._frames import prepare_frame
    from planner import optstream_forward, plan_epsilon

    from .release import _read_hierarchy, _read_input

    names = {"frame": "HISTORY", "hierarchy": "The '--hierarchy' file", "history": "HISTORY"}
    with cli_terms(cmd, names, ("alpha", "w", "epsilon", "level")):
        hierarchy = _read_hierarchy(hierarchy_path)
        frame = _read_input(history, time_column)
        sf = prepare_frame(frame, owner=cmd, hierarchy=hierarchy, min_length=w, name="frame")
        matrix = sf.hierarchy.matrix if sf.hierarchy is not None else None
        forward = functools.partial(
            optstream_forward, sf.values, alpha=alpha, w=w, matrix=matrix, depth=sf.level,
            node_names=sf.nodes, level=level,
        )  # fmt: skip
        if epsilon is not None:
            result = forward(epsilon=epsilon)
            result = _with_range(result, epsilon_min, epsilon_max)
        else:
            metric = "mape" if target_mape is not None else "mae"
            target = target_mape / 100.0 if target_mape is not None else target_mae
            result = plan_epsilon(
                forward, target=target, metric=metric, epsilon_min=epsilon_min,
                epsilon_max=epsilon_max,
            )  # fmt: skip
    extra = {"predicted_mape": result.errors[result.level]["mape"],
             "predicted_mae": result.errors[result.level]["mae"]}  # fmt: skip
    title = f"OptStream: predicted error per level against ε (α = {alpha:g}, w = {w})"
    _answer(result, forward, cmd=cmd, as_json=as_json, curve=curve, title=title, extra=extra)


def _with_range(result, low: float, high: float):
    """A forward plan whose curve spans the analyst's ε range around the given ε."""
    from dataclasses import replace

    return replace(result, epsilon_range=(min(low, result.epsilon), max(high, result.epsilon)))


@plan.command("tops")
@click.option("--prefix", type=str, required=True,
              help="CSV (one column) or .npy standing for the stream (the first m).")  # fmt: skip
@click.option("--bound", type=float, required=True, help="Public bound B on every value.")
@click.option("--horizon", type=int, required=True, help="r: steps released by the perturber.")
@click.option("--range-length", type=int, required=True, help="L: steps of the range sum.")
@click.option("--fanout", type=int, default=16, show_default=True, help="Fan-out F.")
@click.option("--target-rmse", type=float, default=None, help="Target RMSE of a range sum -> ε.")
@click.option("--epsilon", type=float, default=None, help="Forward: the RMSE at this ε.")
@click.option("--epsilon-threshold", type=float, default=None,
              help="ε_θ of the release's threshold (default: ε, as `release tops`).")  # fmt: skip
@click.option("--epsilon-min", type=float, default=_EPSILON_MIN, show_default=True)
@click.option("--epsilon-max", type=float, default=_EPSILON_MAX, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--curve", type=str, default=None, help="Write the ε-error curve (.html) here.")
def tops(prefix, bound, horizon, range_length, fanout, target_rmse, epsilon, epsilon_threshold,
         epsilon_min, epsilon_max, as_json, curve) -> None:  # fmt: skip
    """ε of ToPS for a target RMSE of a range sum of L steps, or the RMSE at an ε.

    ε is the perturber's ε_r (the threshold's ε_θ, default ε, reads the disjoint prefix: the
    release is max(ε_θ, ε_r)-DP, event level). The prediction is that of `release tops` with
    its defaults: its threshold and shape rule is simulated on --prefix (32 seeded runs) and
    the error of a range of L steps averaged over the runs' θ, g and L; `threshold` is their
    median θ, `best_threshold` the grid's θ of least predicted error. An analysis of
    --prefix, not a private choice. An unreachable target (the clipping bias does not fall
    with ε) prints the best RMSE at --epsilon-max and exits with status 2.

    \b
    Examples:
      dpstream plan tops --prefix minutes.npy --bound 36 --horizon 471669 \\
          --range-length 1440 --target-rmse 50
      dpstream plan tops --prefix minutes.npy --bound 36 --horizon 471669 \\
          --range-length 1440 --epsilon 1 --json
    """
    cmd = "dpstream plan tops"
    _check_mode(cmd, {"--target-rmse": target_rmse}, epsilon)
    option_float(bound, "--bound", cmd)
    option_int(horizon, "--horizon", cmd, minimum=2)
    option_int(range_length, "--range-length", cmd, minimum=1, maximum=horizon)
    option_int(fanout, "--fanout", cmd, minimum=2)
    if epsilon_threshold is not None:
        option_float(epsilon_threshold, "--epsilon-threshold", cmd)
    _check_range(cmd, epsilon_min, epsilon_max)
    _check_curve(curve, cmd)
    import functools

    from planner import plan_epsilon, tops_forward

    names = {"prefix": "The '--prefix' file"}
    terms = ("bound", "horizon", "range_length", "fanout", "epsilon", "epsilon_threshold")
    with cli_terms(cmd, names, terms):
        values = _load_prefix(prefix, cmd)
        forward = functools.partial(
            tops_forward, values, range_length=range_length, horizon=horizon, bound=bound,
            fanout=fanout, epsilon_threshold=epsilon_threshold,
        )  # fmt: skip
        if epsilon is not None:
            result = _with_range(forward(epsilon=epsilon), epsilon_min, epsilon_max)
        else:
            result = plan_epsilon(
                forward, target=target_rmse, epsilon_min=epsilon_min, epsilon_max=epsilon_max
            )
    title = f"ToPS: predicted RMSE of a range sum of {range_length:,} steps against ε"
    _answer(result, forward, cmd=cmd, as_json=as_json, curve=curve, title=title)


def _plan_pak_inverse(cmd, *, n, bound, epsilon, delta, beta, p_max, prefix, as_json,
                      target_rmse, range_length, counter, epsilon_min, epsilon_max, curve,
                      time_lag, plot, releases, confidence) -> None:  # fmt: skip
    """``plan pak --target-rmse/--range-length``: the mean-square plan, forward or inverse."""
    import functools

    from planner import pak_forward, plan_epsilon

    if prefix is None:
        raise ParameterError(
            f"The '--target-rmse'/'--range-length' options of {cmd} need --prefix (the values "
            "the threshold reads)."
        )
    if plot is not None or time_lag:
        raise ParameterError(
            f"The '--plot' and '--time-lag' options of {cmd} do not combine with "
            "--target-rmse/--range-length (the whole --prefix file is the prefix)."
        )
    option_int(n, "--n", cmd, minimum=3)
    option_float(bound, "--bound", cmd)
    option_float(target_rmse, "--target-rmse", cmd)
    length = n if range_length is None else range_length
    option_int(length, "--range-length", cmd, minimum=3, maximum=n)
    for value, name in ((delta, "--delta"), (beta, "--beta"), (p_max, "--p-max")):
        option_probability(value, name, cmd)
    _check_range(cmd, epsilon_min, epsilon_max)
    _check_curve(curve, cmd)
    quantile = {}
    if releases is not None:
        option_int(releases, "--releases", cmd, minimum=1)
        if not 0.0 < confidence < 1.0:
            raise ParameterError(
                f"The '--confidence' option of {cmd} must be a probability in (0, 1). Got "
                f"{confidence!r} instead."
            )
        quantile = {"releases": releases, "confidence": confidence}
    names = {"prefix": "The '--prefix' file", "values": "The '--prefix' file"}
    options = ("n", "bound", "epsilon", "delta", "beta", "p_max", "counter")
    with cli_terms(cmd, names, options):
        values = _load_prefix(prefix, cmd)
        m = values.size
        ranges = m < n and length <= n - m
        if not ranges and m >= length:
            raise ParameterError(
                f"The '--range-length' option of {cmd} must be at most n - m = {n - m:,} "
                f"(range sums of the released suffix) or exceed the prefix length m = {m:,} "
                f"(the prefix sum c(σ, L); the threshold reads the first m steps). Got "
                f"{length:,}."
            )
        if ranges and releases is not None:
            raise ParameterError(
                f"The '--releases' option of {cmd} applies to the prefix sum c(σ, L) (one "
                f"query per release, L > n - m = {n - m:,}); a range sum of L = {length:,} "
                "steps averages over 2,000 ranges of each release. Drop --releases."
            )
        forward = functools.partial(
            pak_forward, values, range_length=length, bound=bound, delta=delta,
            counter=counter, beta=beta, p_max=p_max, horizon=n, **quantile,
        )  # fmt: skip
        if target_rmse is None:
            option_float(epsilon, "--epsilon", cmd)
            result = _with_range(forward(epsilon=epsilon), epsilon_min, epsilon_max)
        else:
            result = plan_epsilon(
                forward, target=target_rmse, epsilon_min=epsilon_min, epsilon_max=epsilon_max
            )
    what = f"a range sum of {length:,} steps" if ranges else f"c(σ, {length:,})"
    title = f"PAK: predicted RMSE of {what} against ε (m = {values.size:,})"
    _answer(result, forward, cmd=cmd, as_json=as_json, curve=curve, title=title)
