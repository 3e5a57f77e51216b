"""Coherent hierarchical forecasts: every node forecast, then reconciled with ``postproc``.

Forecasts of every node of a hierarchy (national → regions → feeders) are incoherent: the
national forecast is not the sum of the regions'. :func:`reconcile` projects them with the
same weighted least squares as the releases ([FV19] Alg. 4 extended to hierarchies, §5.2;
:func:`postproc.project_consistent`) over the singleton feature of the horizon: minimise
Σ_{a,t} (x̂[a,t] − f[a,t])² / σ²[a,t] subject to parents = sum of children and x̂ >= 0, with
σ²[a,t] the forecast variances (a diagonal MinT / WLS reconciliation, [WAH19] §2.4 with the
variance scaling of [HLAS16] §3). Consistency is exact up to floating point (parents are
sums of the leaves).

Intervals after reconciliation by simulation ([PGAH23] §3, reconciling sample paths): draw
``simulations`` joint samples of the base forecasts, N(f, Σ_t) with the standard deviations
σ[:, t] and the correlation across nodes of the backtest errors (:attr:`Forecast.correlation`),
reconcile every sample with the same projection (non-negativity binds sample by sample), and
take the quantiles of the reconciled samples. The draws are a simulation (numpy, seeded): they
release nothing.

References
----------
[FV19]   Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[WAH19]  Wickramasuriya, Athanasopoulos, Hyndman. Optimal Forecast Reconciliation for
         Hierarchical and Grouped Time Series Through Trace Minimization. JASA 114, 2019.
[HLAS16] Hyndman, Lee, Wang. Fast computation of reconciled forecasts for hierarchical and
         grouped time series. CSDA 97, 2016.
[PGAH23] Panagiotelis, Gamakumara, Athanasopoulos, Hyndman. Probabilistic forecast
         reconciliation: Properties, evaluation and score optimisation. EJOR 306, 2023.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from mechanisms import ParameterError
from mechanisms.core._validation import check_integer

__all__ = ["check_hierarchy", "reconcile"]

#: Simulated sample paths of the reconciled intervals.
SIMULATIONS = 1000


def check_hierarchy(hierarchy: object, names: Sequence[str], owner: str):
    """A :class:`postproc.Hierarchy` whose nodes are all among ``names``."""
    from postproc import Hierarchy

    if isinstance(hierarchy, Hierarchy):
        tree = hierarchy
    elif isinstance(hierarchy, Mapping):
        tree = Hierarchy(children={str(k): [str(c) for c in v] for k, v in hierarchy.items()})
    else:
        raise ParameterError(
            f"The 'hierarchy' parameter of {owner} must be a mapping parent -> children (or a "
            f"postproc.Hierarchy). Got {type(hierarchy).__name__} instead."
        )
    missing = [node for node in tree.nodes if node not in set(names)]
    if missing:
        raise ParameterError(
            f"The 'hierarchy' parameter of {owner} names nodes that are not series of the "
            f"history: {missing[:5]}. Forecast every node (leaves and aggregates) together."
        )
    return tree


def reconcile(forecast, hierarchy: object, *, simulations: int = SIMULATIONS, seed=None):
    """Reconcile a :class:`forecasting.Forecast` to a hierarchy (see the module notes).

    Parameters
    ----------
    forecast : Forecast
        Forecasts of every node of ``hierarchy`` (other series pass through unchanged).
    hierarchy : mapping parent -> children or postproc.Hierarchy
        The aggregation tree (e.g. ``{"national": ["rural", "urban", ...]}``).
    simulations : int, default 1000
        Sample paths of the intervals.
    seed : int, optional
        Seed of the simulation (numpy; it releases nothing).

    Returns
    -------
    Forecast
        Coherent means (parents = sums of children, >= 0), the standard deviations and the
        interval quantiles of the reconciled samples (``samples`` set, ``coherent=True``).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from forecasting import forecast
    >>> idx = pd.date_range("2016-01-04", periods=21 * 48, freq="30min")
    >>> t = np.arange(idx.size)
    >>> a = 50 + 10 * np.sin(2 * np.pi * t / 48)
    >>> frame = pd.DataFrame({"a": a, "b": a + 5, "total": 2 * a + 5 + np.cos(t)}, index=idx)
    >>> fc = forecast(frame, 48, hierarchy={"total": ["a", "b"]}, seed=1)
    >>> bool(np.allclose(fc.mean["total"], fc.mean["a"] + fc.mean["b"], atol=1e-9))
    True
    """
    from postproc import FeatureSet, project_consistent

    owner = "reconcile"
    simulations = check_integer(simulations, "simulations", owner, minimum=10)
    mean, std = forecast._frames()
    tree = check_hierarchy(hierarchy, list(mean.columns), owner)
    cols = [list(mean.columns).index(node) for node in tree.nodes]
    h = len(mean)
    f = mean.to_numpy()[:, cols].T  # (nodes, h)
    sd = np.maximum(std.to_numpy()[:, cols].T, 1e-12 * (1.0 + np.abs(f)))
    features = FeatureSet.from_breaks(h, [])
    var = sd**2
    point = project_consistent(f, hierarchy=tree, features=features, variances=var)
    rng = np.random.default_rng(seed)  # a simulation: numpy draws release nothing
    corr = forecast.correlation
    corr = np.eye(len(cols)) if corr is None else corr[np.ix_(cols, cols)]
    root = np.linalg.cholesky(corr + 1e-9 * np.eye(len(cols)))
    shocks = np.einsum("ij,sjt->sit", root, rng.standard_normal((simulations, len(cols), h)))
    draws = f[None] + sd[None] * shocks
    sims = project_consistent(
        draws, hierarchy=tree, features=features, variances=np.broadcast_to(var, draws.shape)
    ).values  # (simulations, nodes, h)
    new_mean = mean.copy()
    new_std = std.copy()
    new_mean.iloc[:, cols] = point.values[0].T
    new_std.iloc[:, cols] = sims.std(axis=0).T
    samples = np.repeat(mean.to_numpy()[None], simulations, axis=0)
    if len(cols) < mean.shape[1]:  # series outside the hierarchy: Gaussian samples
        others = [j for j in range(mean.shape[1]) if j not in cols]
        z = rng.standard_normal((simulations, h, len(others)))
        samples[:, :, others] = (
            mean.to_numpy()[None, :, others] + std.to_numpy()[None, :, others] * z
        )
    samples[:, :, cols] = np.transpose(sims, (0, 2, 1))
    single = isinstance(forecast.mean, pd.Series)
    return dataclasses.replace(
        forecast,
        mean=new_mean.iloc[:, 0] if single else new_mean,
        std=new_std.iloc[:, 0] if single else new_std,
        samples=samples,
        coherent=True,
    )
