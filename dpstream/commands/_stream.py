"""Single-stream releases of ``dpstream release``: tops, topl, pak and bt ([ToPS21], [PAK19]).

Each reads one value column of INPUT, runs the mechanism and writes a values file and its JSON
sidecar in the format of :mod:`dpstream.commands.query` (answered by ``dpstream query``).
"""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
import pandas as pd

import mechanisms
from mechanisms import (
    Budget,
    DomainError,
    EventLevel,
    LocalDP,
    ParameterError,
    PrivacyRecord,
)
from mechanisms.core._validation import check_stream

from ._accounting import open_ledger, show_guarantee, write_privacy
from ._checks import cli_terms, option_float, option_int, option_probability
from .query import write_release

__all__ = ["release_stream"]

_TABLE_SUFFIXES = (".csv", ".parquet", ".pq")
#: Python parameters that are CLI options of the same name.
_OPTIONS = ("epsilon", "bound", "time_lag", "epsilon_threshold", "delta", "fanout", "smoother")


def _read_stream(path: str, time_column: str | None, column: str | None) -> pd.Series:
    """One value column of INPUT; the time column ('time', or --time-column) as the index, else
    the 0-based step."""
    file = Path(path)
    if file.suffix.lower() not in _TABLE_SUFFIXES:
        raise ParameterError(
            f"The INPUT argument of dpstream release must be a .csv or .parquet file. Got "
            f"{file.name!r}."
        )
    try:
        frame = pd.read_parquet(file) if file.suffix.lower() != ".csv" else pd.read_csv(file)
    except (OSError, ValueError, ImportError) as exc:
        raise ParameterError(
            f"The INPUT file {file.name!r} of dpstream release could not be read "
            f"({type(exc).__name__})."
        ) from None
    names = [str(c) for c in frame.columns]
    frame.columns = names
    stamp = time_column if time_column is not None else ("time" if "time" in names else None)
    if stamp is not None:
        if stamp not in names:
            raise ParameterError(
                f"The '--time-column' option of dpstream release must name a column of INPUT. "
                f"Got {stamp!r}; columns are {names[:10]}."
            )
        frame = frame.set_index(stamp)
    else:
        frame.index = pd.RangeIndex(len(frame), name="step")
    if column is None:
        if frame.shape[1] != 1:
            raise ParameterError(
                f"INPUT of dpstream release must hold one value column for a single-stream "
                f"method; it has {frame.shape[1]} ({[str(c) for c in frame.columns][:10]}). "
                "Pass --column (and --time-column if one of them is the time)."
            )
        column = str(frame.columns[0])
    if column not in frame.columns:
        raise ParameterError(
            f"The '--column' option of dpstream release must name a column of INPUT. Got "
            f"{column!r}; columns are {[str(c) for c in frame.columns][:10]}."
        )
    values = pd.to_numeric(frame[column], errors="coerce")
    if values.isna().any():
        raise DomainError(
            f"The value column {column!r} of INPUT must hold numbers only; some entries are "
            "missing or not numeric."
        )
    index = values.index
    if stamp is not None and not (index.is_monotonic_increasing and index.is_unique):
        raise DomainError(
            f"The time column {stamp!r} of INPUT must be strictly increasing (sorted, no "
            "duplicates). Sort the rows by time and drop duplicates first."
        )
    return values.astype(np.float64)


#: Counters with Gaussian noise: they spend the release's δ (mechanisms.counting._counters).
_GAUSSIAN_COUNTERS = ("smooth_binary", "sqrt_factorisation", "blt", "unbounded_blt")


def _budget(
    method: str, eps: float, eps_t: float | None, delta: float, counter: str = "auto"
) -> Budget:
    """The release's whole (ε, δ), from public options only (checked before any work)."""
    if method == "tops":  # threshold on the first m steps, perturber on the rest: parallel
        return Budget(max(eps, eps if eps_t is None else eps_t))
    if method == "pak" or (method == "bt" and counter in _GAUSSIAN_COUNTERS):
        return Budget(eps, delta)
    return Budget(eps)


def release_stream(
    method, input_path, time_column, column, options, out_path, ledger_args=(None, None, None)
) -> None:
    """Run tops/topl/pak/bt on one stream and write the values file, its query sidecar and
    its privacy record (``OUT.privacy.json``); charge ``--ledger`` when given."""
    owner = f"dpstream release {method}"
    if options["bound"] is None:
        raise ParameterError(
            f"The '--bound' option of {owner} is required: the public bound B on every value."
        )
    bound = option_float(options["bound"], "--bound", owner)
    eps = option_float(options["epsilon"], "--epsilon", owner)
    lag = option_int(options["time_lag"], "--time-lag", owner)
    if method != "bt" and lag is None:
        raise ParameterError(
            f"The '--time-lag' option of {owner} is required: m, the values used for the "
            "threshold (e.g. --time-lag 65536)."
        )
    eps_t = option_float(options["epsilon_threshold"], "--epsilon-threshold", owner)
    delta = option_probability(options["delta"], "--delta", owner)
    option_int(options["fanout"], "--fanout", owner, minimum=2)
    if options.get("counter") in ("unbounded", "unbounded_blt") and method not in ("bt", "pak"):
        raise ParameterError(
            f"The '--counter' option of {owner} may be 'unbounded' or 'unbounded_blt' for bt "
            f"and pak only. Got it for {method}."
        )
    unit = LocalDP() if method == "topl" else EventLevel()
    budget = _budget(method, eps, eps_t, delta, options.get("counter", "auto"))
    series = _read_stream(input_path, time_column, column)  # read and checked first:
    _check_stream(series, bound)  # nothing may touch the data set's ledger for a bad INPUT
    ledger = None if options.get("no_ledger") else open_ledger(
        *ledger_args, budget=budget, unit=unit, command=owner, streams=[str(series.name)],
        seeded=options["seed"] is not None,
    )  # fmt: skip
    try:
        names = {"values": "INPUT", "x": "INPUT", "epsilon_perturb": "The '--epsilon' option"}
        with cli_terms(owner, names, _OPTIONS):
            _release_one(
                method, series, options, out_path, ledger,
                owner=owner, bound=bound, eps=eps, lag=lag, budget=budget, unit=unit,
            )  # fmt: skip
    finally:
        if ledger is not None:
            ledger.close()


def _check_stream(series: pd.Series, bound: float) -> None:
    x = series.to_numpy()
    if not np.all(np.isfinite(x)) or np.any(x < 0) or np.any(x > bound):
        raise DomainError(  # the rule, never a count of offending (private) values
            f"The value column {str(series.name)!r} of INPUT must lie in [0, {bound:g}] (the "
            "--bound of every value). Clip the data to the bound or declare a larger --bound."
        )


def _release_one(
    method, series, options, out_path, ledger, *, owner, bound, eps, lag, budget, unit,
) -> None:  # fmt: skip
    x, seed = series.to_numpy(), options["seed"]
    if lag is not None and lag >= x.size:
        raise ParameterError(
            f"The '--time-lag' option of {owner} must be smaller than the number of values "
            f"of INPUT ({x.size}). Got {lag} instead."
        )
    if seed is not None:
        click.secho("Seeded run: an experiment, NOT a private release.", fg="yellow", err=True)
    parameters = {
        "time_lag": lag,
        "epsilon_threshold": options["epsilon_threshold"] if method == "tops" else None,
        "delta": options["delta"] if method == "pak" else None,
        "fanout": options["fanout"] if method == "tops" else None,
        "smoother": options["smoother"] if method == "tops" else None,
    }
    counter = options.get("counter", "auto")
    parameters = {key: val for key, val in parameters.items() if val is not None}
    meta: dict = {"method": method, "column": str(series.name), "n_input": int(x.size)}
    if method == "tops":
        eps_t = eps if options["epsilon_threshold"] is None else options["epsilon_threshold"]
        rel = mechanisms.tops_release(
            x,
            bound=bound,
            epsilon_threshold=eps_t,
            epsilon_perturb=eps,
            time_lag=lag,
            fanout=options["fanout"],
            smoother=options["smoother"],
            seed=seed,
            ledger=ledger,
        )
        values, cumulative, m = rel.values, np.cumsum(rel.values), rel.time_lag
        meta["tops"] = {
            "epsilon_threshold": rel.epsilon_threshold,
            "epsilon_perturb": rel.epsilon_perturb,
            "fanout": rel.fanout,
            "leaf_size": rel.leaf_size,
            "levels": rel.levels,
            "tree_size": rel.tree_size,
            "smoother": rel.smoother,
            "node_scale": rel.noise.scale,
            "node_variance": rel.noise.variance,
            "nodes_stored": False,
            "nodes": "node (l, k) = sum of value over released steps [k*g*F^l, (k+1)*g*F^l)",
        }
    elif method == "topl":
        rel = mechanisms.topl_release(
            x, bound=bound, epsilon=eps, time_lag=lag, seed=seed, ledger=ledger
        )
        values, cumulative, m = rel.values, np.cumsum(rel.values), rel.time_lag
        meta["step_variance"] = float(rel.variance)
    elif method == "pak":
        from ..pipelines import release_pak  # planned from public inputs, or Table I

        rel = release_pak(
            x,
            bound=bound,
            epsilon=eps,
            delta=options["delta"],
            time_lag=lag,
            parameters=options.get("pak_parameters", "planned"),
            counter=counter,
            seed=seed,
            ledger=False if options.get("no_ledger") else ledger,  # charged by the CLI, or none
        )
        parameters.update(
            {k: getattr(rel.parameters, k) for k in ("r", "lam", "p", "eps1_share", "beta_lt")}
        )
        parameters["parameters"] = options.get("pak_parameters", "planned")
        parameters["threshold"] = bool(rel.parameters.threshold)  # False: the plain counter
        m = rel.time_lag  # 0 where the planned default is the plain counter (pak_defaults)
        before = float(rel.prefix_sums[m - 1]) if m > 0 else 0.0
        cumulative = rel.prefix_sums[m:] - before
        values = np.diff(cumulative, prepend=0.0)
        parameters["counter"] = meta["counter"] = rel.counter.counter
        meta["pak"] = {
            "epsilon1": rel.epsilon1,
            "epsilon2": rel.epsilon2,
            "prefix_sum_at_lag": before,
        }
    else:
        # charged under this command's name: validate the stream, then charge, then draw.
        check_stream(x, "INPUT", owner, bound=bound)
        if ledger is not None:
            ledger.charge(budget, owner, unit=unit)
        if counter == "unbounded":  # no n: an open stream's prefix never changes
            rel = mechanisms.counting.unbounded_kary_release(x, epsilon=eps, bound=bound, seed=seed)
            parameters["counter"] = meta["counter"] = "unbounded"
        elif counter == "unbounded_blt":  # Gaussian, no n: calibrated for 2^32 rows
            rel = mechanisms.counting.unbounded_blt_release(
                x, epsilon=eps, delta=budget.delta, bound=bound, seed=seed
            )
            parameters["counter"] = meta["counter"] = "unbounded_blt"
        elif counter == "binary_tree" or x.size < 2:  # the paper's BT
            rel = mechanisms.binary_tree_release(x, epsilon=eps, bound=bound, seed=seed)
            parameters["counter"] = meta["counter"] = "binary_tree"
        else:  # a better counter over the whole stream: Mechanism 1 without threshold
            rel = mechanisms.pak_release(
                x,
                bound=bound,
                epsilon=eps,
                delta=budget.delta,
                time_lag=1,  # unused without the threshold (nothing withheld)
                threshold=False,
                seed=seed,
                counter=counter,
            )
            parameters["counter"] = meta["counter"] = rel.counter.counter
        m, cumulative = 0, rel.prefix_sums
        values = np.diff(cumulative, prepend=0.0)
    budget = rel.guarantee.budget
    meta.update(
        {
            "time_lag": int(m),
            "released_steps": int(x.size - m),
            "indexing": "row k is input step k (0-based); the first time_lag rows are withheld",
            "bound": bound,
            "epsilon": budget.epsilon,
            "delta": budget.delta,
            "threshold": float(getattr(rel, "threshold", bound)),
            "guarantee": str(rel.guarantee),
            "seeded": seed is not None,
        }
    )
    # one row per input step, indexed like INPUT; the m withheld steps are empty (NaN)
    frame = pd.DataFrame(
        {
            "value": np.concatenate([np.full(m, np.nan), np.asarray(values)]),
            "cumulative": np.concatenate([np.full(m, np.nan), np.asarray(cumulative)]),
        },
        index=series.index,
    )
    record = PrivacyRecord.from_guarantee(
        rel.guarantee,
        mechanism=method,
        parameters=parameters,
        bound=bound,
        seeded=seed is not None,
    )
    meta["privacy"] = record.to_dict()
    if getattr(rel, "ledger", None) is not None:  # the data set's ledger that paid (pak)
        meta["privacy"]["ledger"] = dict(rel.ledger)
    if options.get("no_ledger"):  # loud in the record too
        meta["privacy"]["ledger"] = {"accounted": False, "why": "--no-ledger"}
    side = write_release(frame, meta, out_path)
    write_privacy(out_path, meta["privacy"])
    show_guarantee(record)  # after the release succeeded, never before an error
    label = " (seeded: NOT private)" if seed is not None else ""
    how = f"after a time lag of {m}"
    clip = f"threshold {meta['threshold']:.6g}"
    if method == "pak" and not parameters["threshold"]:  # the plain counter: nothing withheld
        how = (
            f"every step: the planned default is the plain counter, no threshold, so the "
            f"--time-lag of {lag} withholds nothing"
        )
        clip = f"clipped at the --bound {bound:g}"
    click.echo(
        f"Released {x.size - m} steps ({how}) with {method}, {rel.guarantee.budget}, {clip}, "
        f"to {out_path} and {side.name}{label}."
    )
