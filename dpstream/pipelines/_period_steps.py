"""The period-level steps of ``release_optstream(k="auto")``: measure a period, post-process.

:func:`measure_period` is the only step that reads private values (sample, perturb,
reconstruct every level, [FV19] Alg. 2); :func:`as_measurement` rebuilds the same
:class:`Measurement` from published estimates and a public plan, which is how
``_autoplan.replan`` shows that planning is post-processing; :func:`post_process_periods` is
Algorithm 4 with the planner's variances and the prior (free). See ``_autoplan`` for the
method and the privacy argument.
"""

from __future__ import annotations

import numpy as np

from mechanisms.core._random import BitSource
from mechanisms.optstream._estimates import perturb_noise
from mechanisms.optstream._sampling import interpolation_matrix, reconstruct_observed
from mechanisms.wevent._gaussian import gaussian_window_noise
from planner._stream_plan import PeriodPlan
from planner._stream_planner import AutoConfig, Measurement
from postproc import FeatureSet, Hierarchy, project_consistent
from postproc._prior import ProfilePrior

__all__ = [
    "AutoConfig",
    "Measurement",
    "as_measurement",
    "history_measurements",
    "measure_period",
    "post_process_periods",
]

_UNMEASURED = 1e8  # variance multiplier for nodes of a level with share 0 (no estimate)
_BATCH_NUMBERS = 2**21  # periods x nodes x steps post-processed at once (16 MB per array)


def _level_noise(plan: PeriodPlan, cfg: AutoConfig, k: int, share: float, n_nodes: int):
    budget = plan.budget * share
    if plan.noise == "laplace":
        return perturb_noise(k=k, alpha=cfg.alpha, epsilon=budget, n_nodes=n_nodes)
    return gaussian_window_noise(k=k, alpha=cfg.alpha, rho=budget, n_nodes=n_nodes)


def measure_period(
    values: np.ndarray,
    plan: PeriodPlan,
    cfg: AutoConfig,
    *,
    bits: BitSource,
    observed: np.ndarray | None = None,
) -> Measurement:
    """The private step of one period: sample, perturb, reconstruct every level ([FV19] Alg. 2).

    ``values`` (N, r) holds every node's true values (aggregates included). Levels with share
    0 are not measured; their nodes get the sum of their leaves' estimates.

    ``observed`` (N, r), optional: the public mask of ``missing="unmeasured"`` (``values`` is 0
    where it is False; aggregates sum the observed leaves). The level's planned samples are
    drawn as planned (their budget spent, ``docs/privacy.md``); a node's sample at a reading it
    did not observe measured the constant 0 and is dropped: the node is reconstructed through
    its observed samples only (:func:`~mechanisms.optstream._sampling.reconstruct_observed`),
    and its estimate at an unmeasured reading is 0 (what the aggregates count there).
    """
    n, r = values.shape
    pos = plan.positions(r)
    mask = np.zeros((1, r), dtype=bool)
    mask[0, pos] = True
    m = interpolation_matrix(mask)[0]  # (r, r)
    est = np.full((n, r), np.nan)
    for li, nodes in enumerate(cfg.levels):
        share = plan.shares[li]
        if share <= 0:
            continue
        noise = _level_noise(plan, cfg, pos.size, share, len(nodes))
        noisy = noise.release(values[np.ix_(nodes, pos)], bits)  # [FV19 §3.2], (n_l, k)
        est[nodes] = noisy @ m[:, pos].T  # [FV19 §3.3]: x̃ = M y
        if observed is not None and not observed[nodes].all():  # unmeasured readings
            gap = ~observed[nodes].all(axis=1)
            sub = nodes[gap]
            rec, _ = reconstruct_observed(mask, noisy[gap][None], observed[sub][None])
            est[sub] = np.where(observed[sub], rec[0], 0.0)
    missing = np.isnan(est[:, 0])
    if missing.any():  # share-0 aggregates: the sum of their leaves' estimates
        est[missing] = cfg.matrix[missing] @ est[cfg.leaf_nodes]
    return as_measurement(est, plan, cfg, observed=observed)


def post_process_periods(
    measured: list[Measurement],
    plans: list[PeriodPlan],
    priors: list[ProfilePrior | None],
    hierarchy: Hierarchy | None,
) -> list[np.ndarray]:
    """Algorithm 4 for each period: released (N, r) values.

    Weights are inverse predicted error variances (noise plus predicted interpolation error);
    nodes of a level with share 0 get a negligible weight; the prior is one more weighted term.
    An unmeasured reading (``Measurement.observed``) is pinned to 0 with a negligible variance,
    so the aggregates above it are sums over the observed leaves (the pipeline publishes it as
    NaN). Free: reads measurements, plans, priors and the public mask only.

    The constants the periods of one length share (the share-0 variance, the pinned readings'
    variance, whether any has a prior) are found first; the periods are then solved a batch
    of at most ``_BATCH_NUMBERS`` numbers at a time (each period's problem is its own), so
    the temporaries do not grow with the number of periods (issue 22: a month at 100,000
    feeders stacked 1.2 GB per array).
    """
    by_len: dict[int, list[int]] = {}
    for i, m in enumerate(measured):
        by_len.setdefault(m.values.shape[1], []).append(i)
    result: dict[int, np.ndarray] = {}
    for r, idx in by_len.items():
        tops = []
        for i in idx:
            v = plans[i].variances[:, :r]
            finite = np.isfinite(v)
            tops.append(float(v[finite].max()) if finite.any() else np.nan)
        big = np.nanmax(np.array(tops)) * _UNMEASURED
        floor = 1e-12 * big / _UNMEASURED

        def variances(i: int, r=r, floor=floor, big=big) -> np.ndarray:
            v = plans[i].variances[:, :r]
            return np.where(np.isfinite(v), np.maximum(v, floor), big)

        has_gaps = any(measured[i].observed is not None for i in idx)
        least = 1.0
        if has_gaps:  # missing="unmeasured": the smallest variance of an observed reading
            for i in idx:
                if (o := measured[i].observed) is not None:
                    least = min(least, float(variances(i)[o].min(initial=1.0)))
                else:
                    least = min(least, float(variances(i).min(initial=1.0)))
        has_prior = any(priors[i] is not None for i in idx)
        n_nodes = measured[idx[0]].values.shape[0]
        batch = max(1, _BATCH_NUMBERS // max(n_nodes * r, 1))
        for start in range(0, len(idx), batch):
            part = idx[start : start + batch]
            c = np.stack([measured[i].values for i in part])
            v = np.stack([variances(i) for i in part])
            gap = None
            if has_gaps:
                gap = ~np.stack(
                    [np.ones(c.shape[1:], bool) if (o := measured[i].observed) is None else o
                     for i in part]
                )  # fmt: skip
                c = np.where(gap, 0.0, c)  # pinned to 0: aggregates sum the observed leaves
                v = np.where(gap, 1e-9 * least, v)
            pm = pv = None
            if has_prior:
                pm = np.stack(
                    [priors[i].mean[:, :r] if priors[i] is not None else c[j]
                     for j, i in enumerate(part)]
                )  # fmt: skip
                pv = np.stack(
                    [priors[i].variance[:, :r] if priors[i] is not None
                     else np.full_like(c[j], big * 1e4) for j, i in enumerate(part)]
                )  # fmt: skip
            if gap is not None and pv is not None:  # the prior does not pull a pinned reading
                pv = np.where(gap, big * 1e4, pv)
            if hierarchy is None:
                x = c
                if pm is not None:
                    x = (c / v + pm / pv) / (1.0 / v + 1.0 / pv)
                res = np.maximum(x, 0.0)
            else:
                fs = FeatureSet.from_breaks(r, [])
                res = project_consistent(
                    c, hierarchy=hierarchy, features=fs, variances=v, prior_mean=pm,
                    prior_variances=pv,
                ).values  # fmt: skip
            del c, v, pm, pv, gap
            for j, i in enumerate(part):
                result[i] = res[j]
    return [result[i] for i in range(len(measured))]


def history_measurements(history: np.ndarray | None, w: int) -> list[Measurement]:
    """Public history (T, N) cut into whole periods, as noise-free measurements."""
    if history is None:
        return []
    n_full = history.shape[0] // w
    out = []
    for p in range(n_full):
        vals = history[p * w : (p + 1) * w].T.copy()
        out.append(
            Measurement(
                values=vals,
                noise=np.zeros_like(vals),
                sampled=np.broadcast_to(np.True_, vals.shape),
            )
        )
    return out


def as_measurement(
    est: np.ndarray, plan: PeriodPlan, cfg: AutoConfig, *, level_sizes=None, observed=None
) -> Measurement:
    """The :class:`Measurement` of published estimates under a (public) plan; ``level_sizes``:
    the whole tree's node count per level when ``cfg`` is one subtree's (the lattice's);
    ``observed`` (N, r): the public mask of ``missing="unmeasured"`` (a node's sampled steps
    are those it observed, its noise that of its interpolation through them)."""
    n, r = est.shape
    pos = plan.positions(r)
    k = pos.size
    mask = np.zeros((1, r), dtype=bool)
    mask[0, pos] = True
    m = interpolation_matrix(mask)[0]
    mmt = m @ m.T
    var_sample = np.full(n, np.nan)
    for li, nodes in enumerate(cfg.levels):
        if plan.shares[li] > 0:
            size = len(nodes) if level_sizes is None else int(level_sizes[li])
            var_sample[nodes] = _level_noise(plan, cfg, k, plan.shares[li], size).variance
    missing = np.isnan(var_sample)
    if missing.any():
        var_sample[missing] = cfg.matrix[missing] @ var_sample[cfg.leaf_nodes]
    row = np.zeros(r, dtype=bool)
    row[pos] = True
    sampled = np.broadcast_to(row, (n, r))  # one row for every node: a read-only view
    noise = var_sample[:, None] * np.diag(mmt)[None, :]
    if observed is not None and not np.all(observed):
        observed = np.asarray(observed, dtype=bool)
        gap = ~observed.all(axis=1)
        zeros = np.zeros((1, int(gap.sum()), k))
        _, wts = reconstruct_observed(mask, zeros, observed[gap][None])
        wts = np.where(np.isfinite(wts[0]), wts[0], 1.0)  # no sample observed: estimate 0
        noise[gap] = var_sample[gap, None] * wts
        sampled = sampled & observed
    else:
        observed = None
    return Measurement(
        values=np.array(est, dtype=np.float64),
        noise=noise,
        sampled=sampled,
        observed=observed,
    )
