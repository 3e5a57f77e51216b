"""A prior from earlier releases: the mean daily profile, weighted by empirical Bayes.

At strong privacy every release of a period can be worse than repeating an average earlier day
(issue 13). This module forecasts each period from *earlier released measurements only* (or
from history the user declares public) and adds the forecast to Algorithm 4 as one more
weighted estimate of every step ([FV19] Alg. 4, O1)::

    minimise  Σ_{a,s} W[a,s] (ẋ[a,s] − c̃[a,s])²  +  Σ_{a,t} (ẋ[a,t] − f[a,t])² / τ²[a]

subject to the same consistency and non-negativity constraints. For a step ``t`` both terms
are quadratics in the same variable, so their sum is ``(W + 1/τ²)(ẋ − c̄)²`` plus a constant
with the precision-weighted mean ``c̄ = (W c̃ + f/τ²)/(W + 1/τ²)`` (:func:`merge_prior`):
the prior enters through the existing ``Problem`` (estimates and weights), so every solver
handles it and consistency and non-negativity still hold. The optimum is exactly that of the
problem with the extra term; only the reported objective differs by a constant.

Forecast and its error variance (:func:`profile_prior`)
-------------------------------------------------------
Model (assumptions, not fitted to any data set): measured period q of node n is
``y_q,t = x_q,t + e_q,t`` with the true day ``x_q,t = μ_t + d_q,t`` a common profile plus
independent day-to-day deviations of variance ``σ²_t`` (changing smoothly over the period),
and ``e_q,t`` the measurement's error of *known* variance: the noise ``s²_q,t`` at sampled
steps (unbiased), noise plus the planner's predicted interpolation error at the others, 0 for
public history.

1. ``σ²_t`` by the method of moments (empirical Bayes; Efron and Morris 1973) on the sampled
   steps: the leave-one-out residual of the equal-weight mean of P days,
   ``r_q = y_q − f_{−q} = P/(P−1)(y_q − f)``, has ``E[r²] = σ²·P/(P−1) + s²_q + Σ_{j≠q}
   s²_j/(P−1)²``. Each excess is weighted by its inverse variance (∝ 1/(σ² + s² …)², so a
   public day's counts far more than a noisy released day's), iterated from equal weights.
   The excesses can be pooled over neighbouring steps and shrunk to the node's mean
   (:func:`_pooled`); by default one σ² per node.
2. The forecast weighs each day by its precision ``1/(σ²_t + e²_q,t)`` (a noise-free public
   day counts more than a noisy released one: with the equal mean, released days pushed last
   month's true days out of the average and the forecast got *worse* over the month), and its
   error variance is exact under the model: with normalised weights ``a_q``,
   ``τ²_t = σ²_t (1 + Σ a²) + Σ a² e²``.

3. Optionally (``calibration="backtest"``) each node's model part is scaled by κ, fitted on
   one-step forecasts of its own earlier periods (each from the periods before it, same
   weights): ``τ² = κ σ²(1 + Σa²) + Σ a² e²`` (:func:`_backtest_inflation`). Measured (issue
   13, ``docs/results/optstream_defaults_findings.md``): when the regional national node was
   the sum of its leaves, its forecast erred 4,188 kW (RMS) against a predicted 1,748, and
   3,972 with κ (≈ 8); with such aggregates left without a prior (4.) it changes the
   release's error by ≤ 1 % either way, so it is not the default. It cannot see an error that
   grows with the look-back (a level that walks): its forecasts use fewer earlier periods.
4. An aggregate whose estimate in a period is the sum of its leaves' (its level had no share,
   or public history) holds nothing its leaves' forecasts lack; a prior on it too counts
   the same days twice in Algorithm 4 (the leaves' priors already constrain the sum through
   consistency). Those periods are left out of the aggregate's forecast (``independent``);
   with fewer than two of its own it has no prior (τ² = ∞, weight 0).

5. The profile is shrunk towards a smooth version of itself (its first harmonics), step by
   step, by empirical Bayes across the steps (:func:`_shrunk_profile`): where the released
   periods are so noisy that the profile's error swamps its shape (strong privacy, no public
   history), the forecast is the smooth part, estimated from every step of every period,
   instead of a noisy profile that Algorithm 4's non-negativity then biases upwards
   (household α/ε = 500: the kitchen, 29 Wh on average, was released +313 Wh too high).

The previous estimator compared each day with the mean of the days *before* it (fewer days than
the forecast averages), which overstated τ² by up to 2x in standard deviation on released
days and gave the measurements too much weight (``docs/results/optstream_defaults_findings.md``).
With fewer than two measured periods there is no prior. The interpolation errors of a
forecast and of the measurement it is merged with share a systematic part (the same sampled
steps every day); the weights treat them as independent (a known approximation).

*Privacy*: the measurements are the outputs of the private mechanism of earlier periods (and
public history); everything here is post-processing ([FV19] Theorem 3) and spends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mechanisms import ParameterError

__all__ = ["PriorState", "ProfilePrior", "merge_prior", "profile_prior"]

_FLOOR = 1e-6  # τ̂² floor, relative to the mean noise variance of the periods compared
_CALIBRATIONS = ("backtest", "moments")
#: Numbers per temporary array of :func:`profile_prior` (its nodes are taken in blocks).
_CHUNK_NUMBERS = 4_000_000
#: Most harmonics of the period in the smooth part a noisy profile is shrunk towards (for a
#: day: the 24, 12, 8 and 6 h cycles); each node's number is chosen by predicted error.
_MAX_HARMONICS = 4
#: Lowest backtest factor κ: a noisy backtest may tighten the moment estimate of the day-to-day
#: variance at most 4x (2x in standard deviation); it may widen it without limit.
_KAPPA_FLOOR = 0.25
#: :class:`PriorState`: correct the frozen weights of its folded periods to first order in σ²
#: (their derivatives summed beside them, 15 more (N, w) arrays; class Notes). Opt-in, off by
#: default (issue 22: measured in ``scripts/optstream_prior_gap.py``, not yet on the tables).
FOLD_LINEAR = False
#: :class:`PriorState`: fold a period's weights *relative* to a reference measurement of each
#: node (its noise, and each step's error variance, in the newest held period at the first
#: fold), and weigh the folded sums at the current σ̂² through the reference (class Notes). Exact
#: for periods measured like the reference (a plan kept from day to day: every folded day of
#: the 30-trial tables but the first), where the frozen weights biased σ̂² 5-25 % low (issue
#: 22). The default; False: session 7's absolute frozen weights.
FOLD_RELATIVE = True
#: :class:`PriorState`: hold a stream's first period (planned without a prior: measured unlike
#: the days after it, so not like the reference of :data:`FOLD_RELATIVE`) until it leaves the
#: look-back, weighted exactly, then drop it as the exact window drops its oldest period,
#: instead of folding it (class Notes). One period's arrays more for the first ``days``
#: periods of a stream. The default; False: it is folded as any other.
HOLD_FIRST = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilePrior:
    """A forecast of one period and its error variance."""

    mean: np.ndarray = field(hash=False)
    """(N, w) forecast f of every node and step."""
    variance: np.ndarray = field(hash=False)
    """(N, w) error variance τ² of the forecast of every node and step."""
    n_periods: int
    """Measured periods averaged into the forecast."""
    n_pairs: int
    """(period, forecast) pairs behind τ̂² (leave-one-out: one per period averaged)."""


def profile_prior(
    measurements: np.ndarray,
    noise: np.ndarray,
    sampled: np.ndarray,
    *,
    days: int = 28,
    bandwidth: float = np.inf,
    prior_count: float = 4.0,
    error: np.ndarray | None = None,
    independent: np.ndarray | None = None,
    calibration: str = "moments",
    min_predecessors: int = 3,
    shrink: bool = True,
    period: int | None = None,
) -> ProfilePrior | None:
    """Forecast the next period by the precision-weighted mean profile of the last ``days``
    measured periods, with its error variance (module Notes).

    Parameters
    ----------
    measurements
        (P, N, w) measured periods, oldest first: released estimates before post-processing
        (or public history). This and ``noise``, ``sampled`` and ``error`` may also be
        sequences of P (N, w) arrays: they are then read a block of nodes at a time and never
        stacked whole (at 100,000 feeders x 56 periods each stacked copy is 2 GB).
    noise
        (P, N, w) known noise variance of each measurement (0 for public history).
    sampled
        (P, N, w) True where the measurement is unbiased (a sampled step, or public history).
    days
        Periods averaged into a forecast.
    bandwidth, prior_count
        Pooling of the day-to-day variance over steps (:func:`_pooled`): a circular Gaussian
        kernel of ``bandwidth`` steps (0: per step; ``np.inf``, the default: one value per
        node) and ``prior_count`` pseudo-observations at the node's mean. Per-step pooling
        (bandwidth w/24) gained ~3 % on the household at α/ε = 1 and nothing on the regional
        data, and with the precision-weighted moments it underestimated σ² by ~25 % in
        simulation (test_pp_prior), so it is off by default.
    error
        (P, N, w) full error variance of each measurement (noise plus the predicted
        interpolation error of unsampled steps), for the precision weights; default ``noise``.

    independent
        (P, N) True where the period's measurement of the node is its own (default: all). An
        aggregate that was not measured (its estimate is the sum of its leaves', or public
        history summed) adds nothing its leaves' priors lack, so such periods are left out
        of its forecast; with fewer than two of its own it gets no prior (variance ∞).
    calibration
        ``"moments"`` (default): the exchangeable-days formula; ``"backtest"``: scaled per
        node by how far the one-step forecasts of its earlier periods missed (module Notes, 3).
    min_predecessors
        Periods before the first one the backtest forecasts.
    shrink
        Shrink each node's profile towards its smooth part where the profile is noisier than
        its shape (empirical Bayes across the steps, module Notes, 5); False: the raw profile.
    period
        Steps of a whole period, for the harmonics of a partial one (default: w of the input).

    Returns
    -------
    ProfilePrior or None
        None with fewer than two measured periods.
    """
    x = _periods(measurements, np.float64)
    v = _periods(noise, np.float64)
    s = _periods(sampled, bool)
    e = v if error is None else _periods(error, np.float64)
    shapes = {a.shape for a in (*x, *v, *s, *e)}
    if len(shapes) != 1 or len(x) != len(v) or len(x) != len(s) or len(x) != len(e):
        raise ParameterError(
            "The 'measurements', 'noise', 'sampled' and 'error' parameters of profile_prior must "
            f"have one shape (P, N, w) (or be P arrays of one shape (N, w)). Got {len(x)}, "
            f"{len(v)}, {len(s)} and {len(e)} periods of shapes {sorted(shapes)}."
        )
    if calibration not in _CALIBRATIONS:
        raise ParameterError(
            f"The 'calibration' parameter of profile_prior must be one of {_CALIBRATIONS}. "
            f"Got {calibration!r} instead."
        )
    n_nodes, w = x[0].shape if x else (0, 0)
    if not isinstance(shrink, bool):
        raise ParameterError(
            f"The 'shrink' parameter of profile_prior must be True or False. Got {shrink!r}."
        )
    checks = [("min_predecessors", min_predecessors, 1, "")]
    if period is not None:
        checks.append(("period", period, w, " (a whole period: at least the steps given)"))
    for name, value, least, why in checks:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
            raise ParameterError(
                f"The {name!r} parameter of profile_prior must be an int >= {least}{why}. "
                f"Got {value!r} instead."
            )
    own = np.ones((len(x), n_nodes), dtype=bool) if independent is None else np.asarray(independent)
    if own.shape != (len(x), n_nodes):
        raise ParameterError(
            "The 'independent' parameter of profile_prior must have shape (P, N) = "
            f"{(len(x), n_nodes)}. Got {own.shape}."
        )
    recent, rv, rs, re = x[-days:], v[-days:], s[-days:], e[-days:]
    own = own[-days:].astype(bool)
    n_days = len(recent)
    if n_days < 2:
        return None
    # Node by node (every step below is per node; the floor is global): in blocks of nodes,
    # so that the temporaries stay near _CHUNK_NUMBERS numbers each (100,000 feeders x 56
    # periods x 48 steps at once took 22 GB).
    block = max(1, _CHUNK_NUMBERS // (n_days * w))
    floor = _variance_floor(recent, rv, rs, own, block)
    opts = dict(
        bandwidth=float(bandwidth),
        prior_count=prior_count,
        calibration=calibration,
        min_predecessors=min_predecessors,
        shrink=shrink,
        period=period or w,
        floor=floor,
    )
    parts = [
        _node_block(*(_stacked(a, j, block) for a in (recent, rv, rs, re)),
                    own[:, j : j + block], **opts)
        for j in range(0, n_nodes, block)
    ]  # fmt: skip
    return ProfilePrior(
        mean=np.concatenate([p[0] for p in parts]),
        variance=np.concatenate([p[1] for p in parts]),
        n_periods=int(n_days),
        n_pairs=int(n_days),
    )


def _periods(values: object, dtype: type) -> list[np.ndarray]:
    """P periods of (N, w) values as a list of 2-D arrays (views of a 3-D array, no copy)."""
    if isinstance(values, np.ndarray):
        arr = np.asarray(values, dtype=dtype)
        return list(arr) if arr.ndim == 3 else [arr]
    return [np.asarray(a, dtype=dtype) for a in values]


def _stacked(periods: list[np.ndarray], start: int, size: int) -> np.ndarray:
    """(P, size, w): a block of nodes of every period (only the block is copied)."""
    return np.stack([a[start : start + size] for a in periods])


def _variance_floor(recent, rv, rs, own, block: int) -> float:
    """τ̂² floor: :data:`_FLOOR` times the mean known noise of the unbiased steps (or the
    squared mean level when every period is public). One period at a time (no stacked
    copies); ``block`` is unused (kept for the signature)."""
    noise = count = level = size = 0.0
    for q in range(len(recent)):
        mask = rs[q] & own[q][:, None]
        noise += float(np.where(mask, rv[q], 0.0).sum())
        count += float(mask.sum())
        level += float(np.abs(recent[q]).sum())
        size += recent[q].size
    known = noise / max(count, 1.0)
    scale_ref = known if known > 0 else (level / size) ** 2
    return _FLOOR * max(scale_ref, 1e-12)


def _columns(rs: np.ndarray) -> list[np.ndarray] | None:
    """The sampled steps of each period when every node of the block shares them (the
    pipeline's measurements: equally spaced samples per period), else None."""
    cols = []
    for q in range(rs.shape[0]):
        row = rs[q, 0]
        if not (rs[q] == row[None]).all():
            return None
        cols.append(np.flatnonzero(row))
    return cols


def _sigma2_compact(recent, rv, own, cols, *, count, scale, prior_count):
    """Step 1 of :func:`_node_block` with one σ² per node (``bandwidth=inf``), on the
    sampled steps only (k of w per period: the moments read nothing else). The same sums as
    the dense form, term by term: (n, w) σ² (one value per node, broadcast)."""
    n = recent.shape[1]
    mean_eq = np.einsum("pn,pnw->nw", own.astype(np.float64), recent) / count
    noise_sum = np.einsum("pn,pnw->nw", own.astype(np.float64), rv)
    ex, sp, ok = [], [], []
    for q, c in enumerate(cols):
        if c.size == 0:
            continue
        rvq = rv[q][:, c]
        others = (noise_sum[:, c] - rvq) / (count - 1.0) ** 2
        resid = scale * (recent[q][:, c] - mean_eq[:, c])
        ex.append((resid * resid - rvq - others) / scale)
        sp.append((rvq + others) / scale)
        ok.append(np.broadcast_to(own[q][:, None], (n, c.size)))
    if not ex:
        return np.zeros(recent.shape[1:])
    ok_arr = np.concatenate(ok, axis=1)
    excess = np.where(ok_arr, np.concatenate(ex, axis=1), 0.0)  # (n, M)
    spread = np.where(ok_arr, np.concatenate(sp, axis=1), 0.0)
    n_obs = max(int(ok_arr.sum()), 1)
    sigma2 = np.zeros((n, 1))
    for it in range(4):
        wgt = ok_arr / (sigma2 + spread + _FLOOR) ** 2 if it else ok_arr.astype(np.float64)
        wgt = wgt / max(float(wgt.max()), 1e-300)
        num = np.einsum("nm,nm->n", wgt, excess)[:, None]
        cnt = wgt.sum(axis=1, keepdims=True)
        per_obs = float(cnt.sum() / n_obs)
        pc = prior_count * per_obs
        overall = num / np.maximum(cnt, 1.0)
        sigma2 = np.maximum((num + pc * overall) / (cnt + pc), 0.0)
    return np.broadcast_to(sigma2, recent.shape[1:])


def _node_block(recent, rv, rs, re, own, *, bandwidth, prior_count, calibration,
                min_predecessors, shrink, period, floor):  # fmt: skip
    """:func:`profile_prior` for a block of nodes: (mean, τ²), each (n, w)."""
    cols = _columns(rs) if np.isinf(bandwidth) else None
    rs = rs & own[:, :, None]
    # 1. Day-to-day variance σ²_t of the true values around the profile, by the method of
    #    moments on the measured (unbiased) steps: the leave-one-out residual of the equal-
    #    weight mean, y_q − f_{−q} = P/(P−1)(y_q − f), has E[r²] = σ²·P/(P−1) + s²_q + Σ_{j≠q}
    #    s²_j/(P−1)² (days independent given the profile).
    #    Per node over its own periods only (``independent``).
    mine = own[:, :, None]
    count = np.maximum(own.sum(axis=0), 2.0)[:, None]  # (N, 1); nodes with < 2 get no prior
    scale = count / (count - 1.0)
    if cols is not None:  # the default: the same, on the sampled steps only
        sigma2 = _sigma2_compact(
            recent, rv, own, cols, count=count, scale=scale, prior_count=prior_count
        )
        return _forecast(recent, rv, rs, re, own, sigma2, calibration=calibration,
                         min_predecessors=min_predecessors, shrink=shrink, period=period,
                         floor=floor)  # fmt: skip
    resid = scale * (recent - np.where(mine, recent, 0.0).sum(axis=0) / count)
    noise_sum = np.where(mine, rv, 0.0).sum(axis=0)
    others = (noise_sum[None] - rv) / (count - 1.0) ** 2
    excess = np.where(rs, (resid * resid - rv - others) / scale, 0.0)  # unbiased for σ²_t
    del resid
    # Each excess weighted by its inverse variance, ∝ 1/(σ² + s²_q + ...)² for a normal residual
    # (a noisy released day's excess is far less informative than a public day's); the weights
    # need σ², so iterate from the equal-weight estimate (a few steps suffice).
    spread = np.where(rs, (rv + others) / scale, 0.0)  # (P, N, w)
    del others
    sigma2 = np.zeros(excess.shape[1:])
    for it in range(4):
        wgt = rs / (sigma2[None] + spread + _FLOOR) ** 2 if it else rs.astype(np.float64)
        wgt = wgt / max(float(wgt.max()), 1e-300)
        num, cnt = (wgt * excess).sum(axis=0), wgt.sum(axis=0)
        per_obs = float(cnt.sum() / max(rs.sum(), 1))  # pseudo-observations in weight units
        sigma2 = np.maximum(
            _pooled(num, cnt, bandwidth=bandwidth, prior_count=prior_count * per_obs), 0.0
        )
    del wgt, spread, excess
    return _forecast(recent, rv, rs, re, own, sigma2, calibration=calibration,
                     min_predecessors=min_predecessors, shrink=shrink, period=period,
                     floor=floor)  # fmt: skip


def _forecast(recent, rv, rs, re, own, sigma2, *, calibration, min_predecessors, shrink, period,
              floor):  # fmt: skip
    """Step 2 of :func:`_node_block`: the precision-weighted forecast and τ² given σ²."""
    mine = own[:, :, None]
    # 2. The forecast: each day weighted by its precision 1/(σ² + e²_q) (a noise-free public
    #    day counts more than a noisy released one), and its error variance
    #    τ² = σ²(1 + Σ a²) + Σ a² e² with a the normalised weights.
    wts = np.maximum(re + sigma2[None], floor)  # in place below: the weights 1/(σ² + e²)
    np.reciprocal(wts, out=wts)
    wts *= mine  # 0 where the period is not the node's own
    usable = own.sum(axis=0) >= 2  # (N,) nodes with two periods of their own
    total = np.where(usable[:, None], wts.sum(axis=0), 1.0)
    # with a = wts / total: Σ a·y, Σ a², Σ a²·e² (einsum: no (P, N, w) temporaries)
    mean = np.where(usable[:, None], np.einsum("pnw,pnw->nw", wts, recent) / total, 0.0)
    a2 = np.einsum("pnw,pnw->nw", wts, wts) / (total * total)
    a2e = np.einsum("pnw,pnw,pnw->nw", wts, wts, re) / (total * total)
    kappa = np.ones(sigma2.shape[0])
    if calibration == "backtest":
        kappa = _backtest_inflation(recent, rv, rs, re, wts, sigma2, min_predecessors, floor)
    day = kappa[:, None] * sigma2  # the new day's own deviation
    estimation = kappa[:, None] * sigma2 * a2 + a2e  # the profile's error
    if shrink:
        mean = _shrunk_profile(mean, estimation, period=period)
    tau2 = np.maximum(day + estimation, floor)
    return mean, np.where(usable[:, None], tau2, np.inf)


#: Nodes shrunk at once (:func:`_shrunk_profile`): its (rows, w) temporaries stay in cache.
_SHRINK_ROWS = 1024


def _shrunk_profile(mean: np.ndarray, estimation: np.ndarray, *, period: int) -> np.ndarray:
    """:func:`_shrunk_block` a block of ``_SHRINK_ROWS`` nodes at a time: every step of it is
    per node, so the result is bitwise the same, and its dozen (N, w) temporaries per
    harmonic stay in cache (2.5x less CPU at 100,000 nodes; out of cache the cost grew
    faster than the nodes, issue 22)."""
    n = mean.shape[0]
    if n <= _SHRINK_ROWS:
        return _shrunk_block(mean, estimation, period=period)
    out = np.empty(mean.shape, dtype=np.result_type(mean, estimation, np.float64))
    for i in range(0, n, _SHRINK_ROWS):
        rows = slice(i, i + _SHRINK_ROWS)
        out[rows] = _shrunk_block(mean[rows], estimation[rows], period=period)
    return out


def _shrunk_block(mean: np.ndarray, estimation: np.ndarray, *, period: int) -> np.ndarray:
    """Each node's profile shrunk towards a smooth version of itself, step by step (module
    Notes, 5).

    Model: the profile is ``μ_t = g_t + d_t``, ``g`` its projection on the first H harmonics
    of the period (H = 0: the level) and ``d`` a residual shape of variance ``s²_H`` across
    the steps; the forecast ``f_t`` errs by ``ν_t`` of known variance (``estimation``).
    ``s²_H`` is estimated by the moments of ``f − ĝ`` with the known part taken out (positive
    part), and the forecast becomes the normal-normal posterior mean ``ĝ_t + λ_t (f_t −
    ĝ_t)``, ``λ_t = s²_H/(s²_H + ν_t)`` (James and Stein 1961; Efron and Morris 1973). Per
    node H (0 to :data:`_MAX_HARMONICS`) is the one of lowest predicted error, ``mean_t[λ_t ν_t
    + (1 − λ_t)² (2H + 1) ν̄/w]``. Without noise λ = 1 (the profile is kept); where the noise
    swamps the shape the forecast is the smooth part, estimated from every step of every
    period, instead of a noisy profile that Algorithm 4's non-negativity then biases upwards.

    The error variance stays ``ν_t`` (returned unchanged by the caller): the model's smaller
    one takes the residual shape as random across steps, but a daily shape is the same in
    every period and every leaf, so what shrinkage removes from it is a systematic error, and
    the smaller variance over-weighted the forecast (measured with the level as target: the
    regional leaves' forecasts erred 1,636 kW against a predicted 1,456 at α/ε = 500 and the
    national node, their sum, 12 % more than without shrinkage).
    """
    n, w = mean.shape  # w < period for the last, partial period
    steps = np.arange(w) * (2.0 * np.pi / period)
    h_max = min(_MAX_HARMONICS, (w - 1) // 2)
    cols = [np.ones(w)]
    for h in range(1, h_max + 1):
        cols += [np.cos(h * steps), np.sin(h * steps)]
    basis = np.stack(cols, axis=1)  # (w, 1 + 2 h_max), public
    nu_bar = estimation.mean(axis=1, keepdims=True)
    best = np.full((n, 1), np.inf)
    out = mean
    for h in range(h_max + 1):
        b = basis[:, : 2 * h + 1]
        smooth = mean @ (b @ np.linalg.pinv(b)).T  # least-squares projection, every node
        dev = mean - smooth
        df = (2 * h + 1) / w
        shape = np.maximum((dev * dev).mean(axis=1, keepdims=True) - nu_bar * (1.0 - df), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            lam = np.where(estimation > 0, shape / (shape + estimation), 1.0)
        lam = np.nan_to_num(lam, nan=1.0)
        risk = (lam * estimation + (1.0 - lam) ** 2 * nu_bar * df).mean(axis=1, keepdims=True)
        better = risk < best
        best = np.where(better, risk, best)
        out = np.where(better, smooth + lam * dev, out)
    return out


def _backtest_inflation(
    y: np.ndarray,
    v: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    wts: np.ndarray,
    sigma2: np.ndarray,
    start: int,
    floor: float,
) -> np.ndarray:
    """Per node, the factor κ by which the one-step forecasts of the earlier periods missed
    more (or less) than the exchangeable-days model says (module Notes, 3).

    For period q the forecast is the precision-weighted mean of the periods before it (the
    same weights as the forecast itself). At its unbiased steps ``E[(y_q − f_q)²] = κ σ²(1 +
    Σa²) + s²_q + Σ a² e²`` (the noise of y_q is independent of earlier periods'), so κ is the
    weighted least-squares slope of the excess ``(y_q − f_q)² − s²_q − Σ a² e²`` on the
    model's ``σ²(1 + Σa²)``, each term weighted by its inverse variance (∝ 1/total²). Running
    sums keep it O(P N w) in time and O(N w) in memory (100,000 nodes x 56 periods).
    """
    n, w = y.shape[1], y.shape[2]
    s0 = np.zeros((n, w))
    s1 = np.zeros((n, w))
    s2 = np.zeros((n, w))
    s3 = np.zeros((n, w))
    num = np.zeros(n)
    den = np.zeros(n)
    for q in range(y.shape[0]):
        if q >= start:
            ok = s[q] & (s0 > 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                f = s1 / s0
                a2 = s2 / (s0 * s0)
                known = v[q] + s3 / (s0 * s0)
            model = sigma2 * (1.0 + a2)
            excess = (y[q] - f) ** 2 - known
            g = np.where(ok, model / np.maximum(model + known, floor) ** 2, 0.0)
            num += np.where(ok, g * excess, 0.0).sum(axis=1)
            den += np.where(ok, g * model, 0.0).sum(axis=1)
        s0 += wts[q]
        s1 += wts[q] * y[q]
        s2 += wts[q] * wts[q]
        s3 += wts[q] * wts[q] * e[q]
    kappa = np.where(den > 0, num / np.maximum(den, 1e-300), 1.0)
    return np.maximum(kappa, _KAPPA_FLOOR)


def _pooled(
    num: np.ndarray, cnt: np.ndarray, *, bandwidth: float, prior_count: float
) -> np.ndarray:
    """Per-step σ̂² pooled over neighbouring steps (day-parts) and shrunk to the node's mean.

    Model assumption: the day-to-day variance of a step changes smoothly over the period.
    Sums over a circular Gaussian kernel of ``bandwidth`` steps, then ``prior_count`` pseudo
    observations at the node's overall mean (shrinkage where few steps were measured).
    """
    n, w = num.shape
    overall = num.sum(axis=1, keepdims=True) / np.maximum(cnt.sum(axis=1, keepdims=True), 1.0)
    if np.isinf(bandwidth):  # one value per node (the default): the kernel is all ones
        num_s = np.broadcast_to(num.sum(axis=1, keepdims=True), num.shape)
        cnt_s = np.broadcast_to(cnt.sum(axis=1, keepdims=True), cnt.shape)
        return (num_s + prior_count * overall) / (cnt_s + prior_count)
    lag = np.minimum(np.arange(w), w - np.arange(w))
    kern = np.exp(-0.5 * (lag / max(bandwidth, 1e-9)) ** 2)
    # circular convolution via FFT-free dense form: (w, w) is small
    kmat = kern[(np.arange(w)[:, None] - np.arange(w)[None, :]) % w]
    num_s = num @ kmat.T
    cnt_s = cnt @ kmat.T
    return (num_s + prior_count * overall) / (cnt_s + prior_count)


def merge_prior(
    estimates: np.ndarray, weights: np.ndarray, prior_mean: np.ndarray, prior_variances: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Fold a prior on the singletons into the estimates and weights (module Notes).

    Parameters
    ----------
    estimates, weights
        (B, N, P) estimates ``c̃`` and weights ``W`` (the singletons are the first w parts).
    prior_mean, prior_variances
        (N, w) or (B, N, w): the forecast f and its error variance τ² (> 0).

    Returns
    -------
    (estimates, weights)
        The precision-weighted estimates and the summed weights, (B, N, P).

    Examples
    --------
    >>> c = np.array([[[10.0, 4.0]]]); wt = np.array([[[1.0, 1.0]]])
    >>> e, wgt = merge_prior(c, wt, np.array([[[20.0]]]), np.array([[[1.0]]]))
    >>> e.tolist(), wgt.tolist()   # the first part is a singleton of w = 1
    ([[[15.0, 4.0]]], [[[2.0, 1.0]]])
    """
    c = np.asarray(estimates, dtype=np.float64)
    wt = np.asarray(weights, dtype=np.float64)
    w = np.shape(prior_mean)[-1]
    f = np.broadcast_to(np.asarray(prior_mean, dtype=np.float64), c.shape[:2] + (w,))
    tau2 = np.broadcast_to(np.asarray(prior_variances, dtype=np.float64), f.shape)
    wp = 1.0 / tau2
    out_c = c.copy()
    out_w = np.array(np.broadcast_to(wt, c.shape), dtype=np.float64)
    total = out_w[:, :, :w] + wp
    out_c[:, :, :w] = (out_w[:, :, :w] * c[:, :, :w] + wp * f) / total
    out_w[:, :, :w] = total
    return out_c, out_w


class PriorState:
    """:func:`profile_prior` as running sums: O(N w) state, whatever the look-back (issue 22.1).

    The planner used to hold the last ``days`` measured periods, (N, w) arrays each, and call
    :func:`profile_prior` on them (6.4 GB at 100,000 feeders x 56 periods). This object holds
    sums per node and step instead, updated as each period is released, plus the last
    ``recent`` released periods themselves, and gives the same forecast (:meth:`prior`) under
    two approximations:

    * *Frozen weights.* The moments' weights ``1/(σ̂² + spread)²`` and the forecast's
      ``1/(σ̂² + e²)`` (module Notes, 1 and 2) are nonlinear in σ², so a period's weighted
      terms cannot be re-weighted once summed. The last ``recent`` released periods are held
      and weighted at the current σ̂² (exactly as :func:`profile_prior`); an older one is
      added to the sums with the σ̂² of the moment it leaves (estimated from at least
      ``recent + 1`` periods), not the final one. Public history (noise-free, every step) is
      summed unweighted: its weights are common to its periods at a step and are applied
      exactly. The leave-one-out mean, the "others" noise term and the variance floor are
      expanded into sums and are exact. With at most ``recent`` released periods the prior
      is :func:`profile_prior`'s, to rounding.
    * *A look-back by forgetting.* Up to ``days`` periods the sums are plain (an equal-weight
      window, as :func:`profile_prior`); after that every sum is multiplied by
      ``(days − 1)/days`` before a period is added, so the total weight stays ``days`` (an
      exponential window of mean age ``days``) instead of dropping the oldest period, which
      would need its arrays.

    *Relative weights* (:data:`FOLD_RELATIVE`, the default). A folded period's weight
    ``g(σ²; s_q) = 1/(σ² + s_q)²`` (s_q: its spread, from its noise) is not frozen whole: it
    is split as ``g(σ²; s̄)·ρ_q`` with ``s̄`` the spread, at the same moment, of a reference
    noise ``v̄`` per node (the newest held period's at the first fold) and
    ``ρ_q = g(σ_q²; s_q)/g(σ_q²; s̄)`` frozen; the sums hold ``Σ ρ_q X_q`` and are weighed by
    ``g(σ̂²; s̄)`` (s̄ from the current noise sums) at every iterate of σ̂². The forecast's
    weights ``1/(σ² + e_q)`` likewise, relative to a reference error variance ``ē`` per node
    and step. A period measured as the reference (ρ_q = 1: the plan of the newest day, kept
    from day to day; every folded period of the 30-trial tables but the first) is weighted
    exactly as :func:`profile_prior` weighs it at any σ̂², whatever σ̂² was when it was folded;
    the others keep their weight *relative* to the reference's frozen, an error of the order
    of (s_q − s̄)(σ̂² − σ_q²). The one period that is never like the rest, the stream's first
    (planned without a prior), is not folded but held (:data:`HOLD_FIRST`) until it leaves
    the look-back, when it is dropped exactly as the exact window drops its oldest period
    (no forgetting at that step). With these, a month whose days after the first share one
    plan gets :func:`profile_prior`'s prior to rounding (``tests/postproc/
    test_prior_fold_relative.py``); what is left is the forgetting past ``days`` periods.
    Why: frozen whole, a period's weight was set at a σ̂² of ~8 periods that held its own
    excess, so large excesses got less weight and σ̂² ended the month 5-25 % low
    (``scripts/optstream_prior_gap.py``, issue 22). State: one (N,) and one (N, w) array more.

    With :data:`FOLD_LINEAR` (opt-in, ``linear=True``; it excludes relative weights) the
    absolute frozen weights are corrected to first order in σ² instead: a period folded at
    σ_q² also adds its weighted terms' derivatives (15 more (N, w) sums: ``k = f/(σ_q² +
    spread)³`` times 1, y, y², rv, and the same times σ_q², for the moments; ``u = 1/(σ_q² +
    e)``'s u²y, u³, u³e and σ_q² times u², u²y, u³, u³e for the forecast), and the sums are
    re-weighted at the current σ̂², ``Σ g(σ²)X ≈ Σ g(σ_q²)X + (σ² − σ_q²) Σ g'(σ_q²)X``,
    where that keeps at least half the frozen weight (else the frozen terms). Measured
    (``scripts/optstream_prior_gap.py``, 10 trials against the exact planner): regional Feb
    α/ε = 100 national +0.63 → +0.08 % (relative weights: −0.03 %), household Oct 10 total
    +0.20 → +0.36 % (relative: +0.08 %, the look-back's forgetting): the relative weights are
    the default.

    State: 12 arrays (N, w) float64 and 3 (N,) (relative weights: 13 and 4), plus
    ``recent`` periods of 3 float64 and 1 bool (N, w) arrays (``recent`` + 1 while the first
    period is held, :data:`HOLD_FIRST`: the first ``days`` periods of a stream): ≈ (104 +
    25·recent)·N·w bytes (1.2 GB at 100,000 feeders, w = 48, ``recent`` = 6; 1.3 GB with the
    first period held), independent of ``days``. Six held periods, not seven (session 7-12):
    with relative weights a fold is exact for a period like the reference, and six measured
    the same against the exact planner (``scripts/optstream_prior_gap.py``, state
    ``recent6``); with the first period held the state is no larger than before
    (:attr:`nbytes`). ``calibration="backtest"``
    and pooled bandwidths are not available here (not the defaults: :func:`profile_prior`).

    *Privacy*: the inputs are released measurements and public history (post-processing,
    [FV19] Theorem 3).
    """

    _ARRAYS = ("g", "gy", "gyy", "grv", "sy", "sv", "hy", "hyy", "wt", "wy", "w2", "w2e")
    #: :data:`FOLD_LINEAR`'s sums: the moments' weight derivatives (k = f/(σ_q² + spread)³,
    #: times 1, y, y², rv, and the same times σ_q²) and the forecast's (u = 1/(σ_q² + e):
    #: u²y, σ_q²u², σ_q²u²y, u³, σ_q²u³, u³e, σ_q²u³e).
    _LINEAR = ("ka", "kay", "kayy", "karv", "kb", "kby", "kbyy", "kbrv",
               "u2y", "su2", "su2y", "u3", "su3", "u3e", "su3e")  # fmt: skip

    def __init__(
        self,
        n_nodes: int,
        w: int,
        *,
        days: int = 28,
        recent: int = 6,
        shrink: bool = True,
        linear: bool | None = None,
        relative: bool | None = None,
        hold_first: bool | None = None,
    ) -> None:
        for name, value, least in (("days", days, 2), ("recent", recent, 0)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
                raise ParameterError(
                    f"The {name!r} parameter of PriorState must be an int >= {least}. "
                    f"Got {value!r} instead."
                )
        self.days, self.recent = int(days), int(recent)
        self.shrink = shrink
        if linear is not None and not isinstance(linear, bool | np.bool_):
            raise ParameterError(
                f"The 'linear' parameter of PriorState must be True, False or None (the module's "
                f"FOLD_LINEAR). Got {linear!r} instead."
            )
        self.linear = bool(FOLD_LINEAR if linear is None else linear)
        """Frozen weights corrected to first order in σ² (:data:`FOLD_LINEAR`)."""
        if relative is not None and not isinstance(relative, bool | np.bool_):
            raise ParameterError(
                f"The 'relative' parameter of PriorState must be True, False or None (the "
                f"module's FOLD_RELATIVE). Got {relative!r} instead."
            )
        if relative and self.linear:
            raise ParameterError(
                "The 'relative' and 'linear' parameters of PriorState exclude each other (the "
                "first-order correction is of absolute frozen weights). Got both True."
            )
        self.relative = bool(FOLD_RELATIVE and not self.linear if relative is None else relative)
        """Folded weights relative to a reference measurement per node (:data:`FOLD_RELATIVE`)."""
        if hold_first is not None and not isinstance(hold_first, bool | np.bool_):
            raise ParameterError(
                f"The 'hold_first' parameter of PriorState must be True, False or None (the "
                f"module's HOLD_FIRST). Got {hold_first!r} instead."
            )
        self.hold_first = bool(HOLD_FIRST if hold_first is None else hold_first)
        """Hold the stream's first period until it leaves the look-back (:data:`HOLD_FIRST`)."""
        self._first: list | None = None  # the first period while it is among the held ones
        self._pinned: list | None = None  # ... once held past them (dropped after ``days``)
        self.vref: np.ndarray | None = None
        """Relative weights: (N,) the reference noise variance v̄ (set at the first fold)."""
        self.eref: np.ndarray | None = None
        """Relative weights: (N, w) the reference error variance ē (set at the first fold)."""
        self._arrays = self._ARRAYS + (self._LINEAR if self.linear else ())
        self.n_nodes, self.w = int(n_nodes), int(w)
        for name in self._arrays:
            setattr(self, name, np.zeros((self.n_nodes, self.w)))
        self.count = np.zeros(self.n_nodes)  # own periods (decayed)
        self.hn = np.zeros(self.n_nodes)  # own periods of public history (decayed)
        self.sigma2 = np.zeros(self.n_nodes)  # σ̂² after the last period added
        self.n_periods = 0
        self._held: list[list] = []  # [y, rv, sampled & own, e, own, weight] of recent periods
        # the variance floor's sums (global scalars, decayed)
        self._noise = self._obs = self._level = self._size = 0.0
        self.floor_others = (0.0, 0.0, 0.0, 0.0)
        """The floor's sums (:meth:`floor_sums`) of the nodes planned in other parts of the
        tree (a tree planned in subtrees, issue 22.2: the engine sets them before a plan, so
        every part's floor is the whole tree's)."""

    @property
    def nbytes(self) -> int:
        """Bytes of the state's arrays."""
        names = (*self._arrays, "count", "hn", "sigma2")
        total = sum(getattr(self, a).nbytes for a in names)
        total += sum(a.nbytes for a in (self.vref, self.eref) if a is not None)
        return int(total + sum(a.nbytes for h in self._exact() for a in h[:5]))

    def _decay(self) -> None:
        if self.n_periods < self.days:
            return
        f = (self.days - 1.0) / self.days
        for name in (*self._arrays, "count", "hn"):
            getattr(self, name)[...] *= f
        for h in self._exact():
            h[5] *= f
        self._noise *= f
        self._obs *= f
        self._level *= f
        self._size *= f

    def export(self) -> tuple[dict, dict]:
        """The state without its held periods, to be saved (the release store, issue 22):
        ``(arrays, scalars)`` -- the running sums and the JSON-able counters, the held periods'
        forgetting weights included; the held periods themselves are the caller's to keep
        (their measurements) and give back to :meth:`restore`."""
        arrays = {a: getattr(self, a) for a in (*self._arrays, "count", "hn", "sigma2")}
        scalars = {
            "days": self.days, "recent": self.recent, "shrink": bool(self.shrink),
            "n_nodes": self.n_nodes, "w": self.w, "n_periods": self.n_periods,
            "floor": [self._noise, self._obs, self._level, self._size],
            "held_weights": [float(h[5]) for h in self._held],
        }  # fmt: skip
        if self.hold_first:  # (the first period: among the held ones, or pinned past them)
            scalars["hold_first"] = True
            scalars["first_held"] = self._first is not None
            if self._pinned is not None:
                y, rv, s, e, own, f = self._pinned
                arrays.update(pinned_values=y, pinned_noise=rv, pinned_sampled=s,
                              pinned_error=e, pinned_own=own)  # fmt: skip
                scalars["pinned_weight"] = float(f)
        if self.linear:  # (only then: a default state's export is unchanged)
            scalars["linear"] = True
        if self.relative:  # (a state saved without it and folded goes on with absolute weights)
            scalars["relative"] = True
            if self.vref is not None:
                arrays.update(vref=self.vref, eref=self.eref)
        return arrays, scalars

    @classmethod
    def restore(cls, arrays: dict, scalars: dict, held: list, *, copy: bool = True) -> PriorState:
        """Inverse of :meth:`export`: ``held`` gives the held periods oldest first, each
        ``(values, noise, sampled, error, own)`` as :meth:`add` took them (bitwise the state
        that was exported). ``copy=False``: the sums are ``arrays``' own float64 arrays, not
        copies (arrays read back from a file for this state alone: no second copy held)."""
        relative = scalars.get("relative")
        if relative is None:  # saved before relative weights: absolute sums once one is folded
            folded = any(np.any(arrays[k]) for k in ("g", "wt"))
            relative = False if folded else None  # None: the module's (nothing folded yet)
        st = cls(scalars["n_nodes"], scalars["w"], days=scalars["days"],
                 recent=scalars["recent"], shrink=scalars["shrink"],
                 linear=bool(scalars.get("linear", False)),
                 relative=None if relative is None else bool(relative),
                 hold_first=bool(scalars.get("hold_first", False)))  # fmt: skip
        if st.relative and "vref" in arrays:
            st.vref = np.array(arrays["vref"], dtype=np.float64)
            st.eref = np.array(arrays["eref"], dtype=np.float64)
        for name in (*st._arrays, "count", "hn", "sigma2"):
            a = arrays[name]
            setattr(st, name, np.array(a, dtype=np.float64) if copy else np.asarray(a, np.float64))
        st.n_periods = int(scalars["n_periods"])
        st._noise, st._obs, st._level, st._size = (float(v) for v in scalars["floor"])
        weights = scalars["held_weights"]
        if len(held) != len(weights):
            raise ValueError(f"PriorState.restore: {len(held)} held periods, not {len(weights)}")
        for (y, rv, sampled, e, own), f in zip(held, weights, strict=True):
            own = np.asarray(own, dtype=bool)
            s = np.asarray(sampled, dtype=bool) & own[:, None]
            st._held.append([np.asarray(y, dtype=np.float64), np.asarray(rv, dtype=np.float64),
                             s, np.asarray(e, dtype=np.float64), own, float(f)])  # fmt: skip
        if scalars.get("first_held") and st._held:
            st._first = st._held[0]
        if "pinned_values" in arrays:
            own = np.asarray(arrays["pinned_own"], dtype=bool)
            st._pinned = [np.array(arrays["pinned_values"], dtype=np.float64),
                          np.array(arrays["pinned_noise"], dtype=np.float64),
                          np.asarray(arrays["pinned_sampled"], dtype=bool) & own[:, None],
                          np.array(arrays["pinned_error"], dtype=np.float64), own,
                          float(scalars["pinned_weight"])]  # fmt: skip
        return st

    def _exact(self) -> list[list]:
        """The periods weighted exactly at the current σ̂²: the held ones and a pinned first."""
        return self._held if self._pinned is None else [self._pinned, *self._held]

    def _drop_pinned(self) -> None:
        """The pinned first period leaves the look-back: its plain sums are taken out (it
        has no folded terms), as the exact window drops its oldest period."""
        y, rv, s, _, own, f = self._pinned
        mine = own[:, None]
        self._noise -= f * float(np.where(s, rv, 0.0).sum())
        self._obs -= f * float(s.sum())
        self._level -= f * float(np.abs(y).sum())
        self._size -= f * y.size
        self.count -= f * own
        self.sy -= f * np.where(mine, y, 0.0)
        self.sv -= f * np.where(mine, rv, 0.0)
        self._pinned = None

    def floor_sums(self) -> tuple[float, float, float, float]:
        """The variance floor's sums over this state's nodes (known noise, its observations,
        |level|, values): additive over disjoint sets of nodes."""
        return (self._noise, self._obs, self._level, self._size)

    def _floor(self) -> float:
        on, oo, ol, osz = self.floor_others
        known = (self._noise + on) / max(self._obs + oo, 1.0)
        level, size = self._level + ol, self._size + osz
        scale_ref = known if known > 0 else (level / max(size, 1.0)) ** 2
        return _FLOOR * max(scale_ref, 1e-12)

    def add(
        self,
        values: np.ndarray,
        noise: np.ndarray,
        sampled: np.ndarray,
        error: np.ndarray,
        own: np.ndarray,
        *,
        public: bool = False,
    ) -> None:
        """Add one full period (N, w): its measurement, noise variance, sampled steps, full
        error variance and ``own`` (N,) (``profile_prior``'s ``independent``); ``public``:
        noise-free history measured at every step."""
        y = np.asarray(values, dtype=np.float64)
        rv = np.asarray(noise, dtype=np.float64)
        own = np.asarray(own, dtype=bool)
        s = np.asarray(sampled, dtype=bool) & own[:, None]
        if self._pinned is not None and self.n_periods >= self.days:
            self._drop_pinned()  # the look-back's oldest period leaves (exact, no forgetting)
        else:
            self._decay()
        self.n_periods += 1
        mine = own[:, None]
        self._noise += float(np.where(s, rv, 0.0).sum())
        self._obs += float(s.sum())
        self._level += float(np.abs(y).sum())
        self._size += y.size
        self.count += own
        self.sy += np.where(mine, y, 0.0)
        if public:
            self.hn += own
            self.hy += np.where(mine, y, 0.0)
            self.hyy += np.where(mine, y * y, 0.0)
        else:
            self.sv += np.where(mine, rv, 0.0)
            e = np.asarray(error, dtype=np.float64)
            self._held.append([y, rv, s, e, own, 1.0])
            if self.hold_first and self.n_periods == 1:  # the stream's first period
                self._first = self._held[-1]
            if len(self._held) > self.recent:
                if self._held[0] is self._first:  # held on, not folded (HOLD_FIRST)
                    self._pinned, self._first = self._first, None
                else:
                    self.sigma2 = self._sigma2(self.w)
                    self._fold(self._held[0], self.sigma2)
                del self._held[0]
        self.sigma2 = self._sigma2(self.w)

    def _fold(self, held: list, sigma2: np.ndarray) -> None:
        """Add a held period's weighted terms to the sums, at ``sigma2``: a block of
        ``_SHRINK_ROWS`` nodes at a time (every term is per node: bitwise the same; the
        temporaries, a dozen (N, w) arrays whole, stay small)."""
        y, rv, s, e, own, f = held
        c = np.flatnonzero(s[:, : self.w].any(axis=0))  # the steps some node sampled
        if self.relative and self.vref is None:
            self._set_reference(held)
        floor = self._floor()
        for i in range(0, self.n_nodes, _SHRINK_ROWS):
            rows = slice(i, i + _SHRINK_ROWS)
            common = self._common(self.w, rows)
            parts = self._excess(held, self.w, common, c, rows)
            g = self._weight(parts, sigma2[rows], equal=False)  # f included; columns c only
            if self.relative:  # ρ_q = g(σ_q²; s_q)/g(σ_q²; s̄) (class Notes)
                g /= self._reference_weight(sigma2[rows], common, rows, c)
            yc, rvc = y[rows][:, c], rv[rows][:, c]
            self.g[rows, c] += g
            self.gy[rows, c] += g * yc
            self.gyy[rows, c] += g * yc * yc
            self.grv[rows, c] += g * rvc
            del g
            terms = self._weights(held, sigma2[rows], self.w, rows)
            if self.relative:  # relative to ū = 1/(σ_q² + ē): u/ū, u y/ū, u²/ū², u² e/ū²
                inv = np.maximum(self.eref[rows] + sigma2[rows, None], floor)
                for j, t in enumerate(terms):  # (in place: the terms are this fold's own)
                    if j == 2:
                        inv *= inv
                    t *= inv
                del inv
            for name, term in zip(("wt", "wy", "w2", "w2e"), terms, strict=True):
                getattr(self, name)[rows] += f * term
            if self.linear:
                q2 = sigma2[rows, None]
                k = np.where(parts[2], f / (q2 + parts[1] + _FLOOR) ** 3, 0.0)
                for x, a, b in ((1.0, "ka", "kb"), (yc, "kay", "kby"),
                                (yc * yc, "kayy", "kbyy"), (rvc, "karv", "kbrv")):  # fmt: skip
                    getattr(self, a)[rows, c] += k * x
                    getattr(self, b)[rows, c] += q2 * k * x
                u = terms[0]
                u2, u3 = f * u * u, f * u * u * u
                yr, er = y[rows], e[rows]
                self.u2y[rows] += u2 * yr
                self.su2[rows] += q2 * u2
                self.su2y[rows] += q2 * u2 * yr
                self.u3[rows] += u3
                self.su3[rows] += q2 * u3
                self.u3e[rows] += u3 * er
                self.su3e[rows] += q2 * u3 * er
                del k, u, u2, u3
            del parts, yc, rvc, terms

    def _set_reference(self, folding: list) -> None:
        """Relative weights: the reference measurement of each node, from the newest held
        period (its noise on the steps it sampled, and its error variance; nodes it did not
        measure: the period being folded's). A block of nodes at a time (no (N, w)
        temporaries: the arrays set are the state's own)."""
        newest = self._held[-1]
        self.vref = np.zeros(self.n_nodes)
        self.eref = np.empty((self.n_nodes, self.w))
        for i in range(0, self.n_nodes, _SHRINK_ROWS):
            rows = slice(i, i + _SHRINK_ROWS)
            v = np.zeros(self.vref[rows].shape)
            for h in (folding, newest):  # the newest's where it sampled, else the folded's
                s = h[2][rows]
                n = s.sum(axis=1)
                got = np.where(s, h[1][rows], 0.0).sum(axis=1)
                v = np.where(n > 0, got / np.maximum(n, 1), v)
            self.vref[rows] = v
            self.eref[rows] = np.where(newest[4][rows, None], newest[3][rows], folding[3][rows])

    def _reference_weight(self, sigma2: np.ndarray, common, rows: slice, cols) -> np.ndarray:
        """Relative weights: ``g(σ²; s̄) = 1/(σ² + s̄)²`` of the reference noise v̄ of the
        nodes ``rows`` at the steps ``cols`` (s̄ as a period's spread, :meth:`_excess`)."""
        _, scale, cm1, _, sv = common
        v = self.vref[rows, None]
        spread = (v + (sv[:, cols] - v) / cm1) / scale
        return 1.0 / (sigma2[:, None] + spread + _FLOOR) ** 2

    def _common(self, r: int, rows: slice = slice(None)):
        count = np.maximum(self.count[rows], 2.0)[:, None]
        scale = count / (count - 1.0)
        return count, scale, (count - 1.0) ** 2, self.sy[rows, :r] / count, self.sv[rows, :r]

    def _excess(self, held: list, r: int, common, cols=None, rows: slice = slice(None)):
        """A held period's excess and spread at the steps some node sampled (among the first
        r), (N, c) each (module Notes, 1: the moments of :func:`_node_block`; zero elsewhere),
        its mask there, its forgetting factor and those c steps (``cols``: given, for the
        nodes ``rows`` only)."""
        y, rv, s, _, _, f = held
        if cols is None:
            cols = np.flatnonzero(s[:, :r].any(axis=0))
        y, rv, s = y[rows][:, cols], rv[rows][:, cols], s[rows][:, cols]
        count, scale, cm1, m, sv = common
        others = (sv[:, cols] - rv) / cm1
        resid = scale * (y - m[:, cols])
        excess = np.where(s, (resid * resid - rv - others) / scale, 0.0)
        return excess, (rv + others) / scale, s, f, cols

    @staticmethod
    def _weight(parts, sigma2: np.ndarray, *, equal: bool) -> np.ndarray:
        _, spread, s, f, _ = parts
        if equal:
            return f * s
        return np.where(s, f / (sigma2[:, None] + spread + _FLOOR) ** 2, 0.0)

    def _weights(self, held: list, sigma2: np.ndarray, r: int, rows: slice = slice(None)):
        """A held period's forecast terms (Σ-parts of wts, wts·y, wts², wts²·e), (N, r)
        (of the nodes ``rows``; ``sigma2`` theirs)."""
        y, _, _, e, own, _ = held
        wts = np.maximum(e[rows, :r] + sigma2[:, None], self._floor())
        np.reciprocal(wts, out=wts)
        wts *= own[rows, None]
        return wts, wts * y[rows, :r], wts * wts, wts * wts * e[rows, :r]

    def _sigma2(self, r: int) -> np.ndarray:
        """(N,) σ̂² from the first r steps (module Notes, 1; ``bandwidth=inf``): the folded
        sums, the history and the held periods, reweighted as in :func:`_node_block` (equal
        weights, then three passes) when nothing is folded yet or the folded weights are
        relative (equal weights: the relative sums themselves); absolute frozen weights:
        three passes from the last σ̂².

        Every step is per node, so it runs a block of ``_SHRINK_ROWS`` nodes at a time (its
        (N, r) temporaries in cache; bitwise the same): what is common to the nodes, whether
        anything is folded and each held period's sampled steps, is found first."""
        folded = bool(self.g[:, :r].sum(axis=1).any())
        cols = [np.flatnonzero(h[2][:, :r].any(axis=0)) for h in self._exact()]
        out = np.empty(self.n_nodes)
        for i in range(0, self.n_nodes, _SHRINK_ROWS):
            rows = slice(i, i + _SHRINK_ROWS)
            out[rows] = self._sigma2_rows(r, rows, folded, cols)
        return out

    def _sigma2_rows(self, r: int, rows: slice, folded: bool, cols: list) -> np.ndarray:
        count, scale, cm1, m, sv = self._common(r, rows)
        frozen = [a[rows, :r] for a in (self.g, self.gy, self.gyy, self.grv)]

        def moments(g, gy, gyy, grv):
            # folded periods: Σ_q g (scale²(y − m)² − rv − others_q) / scale, with
            # others_q = (Σ rv − rv_q)/(count − 1)²
            num = scale * scale * (gyy - 2.0 * m * gy + m * m * g) - grv - (sv * g - grv) / cm1
            return (num / scale).sum(axis=1), g.sum(axis=1)

        num_f, cnt_f = moments(*frozen)
        linear = self.linear and folded  # FOLD_LINEAR: re-weighted at each iterate
        relative = self.relative and folded  # FOLD_RELATIVE: weighed at each iterate
        if linear:
            ka = [getattr(self, a)[rows, :r] for a in ("ka", "kay", "kayy", "karv")]
            kb = [getattr(self, a)[rows, :r] for a in ("kb", "kby", "kbyy", "kbrv")]
        hn = self.hn[rows, None]
        ex_h = (scale * scale * (self.hyy[rows, :r] - 2.0 * m * self.hy[rows, :r] + m * m * hn)
                - sv * hn / cm1) / scale  # fmt: skip
        spread_h = sv / cm1 / scale  # history: rv = 0
        sigma2 = self.sigma2[rows] if folded else np.zeros(cnt_f.size)
        common = count, scale, cm1, m, sv
        held = [self._excess(h, r, common, c, rows)
                for h, c in zip(self._exact(), cols, strict=True)]  # fmt: skip
        restart = relative or not folded  # from equal weights, as profile_prior (4 iterates)
        for it in range(4 if restart else 3):
            equal = it == 0 and restart
            if linear:  # Σ g(σ²)X ≈ Σ g(σ_q²)X − 2 Σ (σ² − σ_q²) k X, k = f/(σ_q² + spread)³
                q2 = sigma2[:, None]
                fix = [x + 2.0 * (b - q2 * a) for x, a, b in zip(frozen, ka, kb, strict=True)]
                ok = fix[0] >= 0.5 * frozen[0]  # too far to extrapolate: frozen
                num_f, cnt_f = moments(
                    *(np.where(ok, c, x) for c, x in zip(fix, frozen, strict=True))
                )
            # relative: equal weights (the first pass) are the sums Σ ρ_q X themselves, as
            # summed above (ρ_q = 1 for a period like the reference); then
            # Σ g(σ²; s_q) X ≈ g(σ²; s̄) Σ ρ_q X (exact where s_q = s̄)
            if relative and not equal:
                gbar = self._reference_weight(sigma2, common, rows, slice(0, r))
                num_f, cnt_f = moments(*(x * gbar for x in frozen))
            gw = 1.0 if equal else 1.0 / (sigma2[:, None] + spread_h + _FLOOR) ** 2
            num = num_f + (gw * ex_h).sum(axis=1)
            cnt = cnt_f + np.broadcast_to(gw * hn, ex_h.shape).sum(axis=1)
            for parts in held:
                ex, gq = parts[0], self._weight(parts, sigma2, equal=equal)
                num += (gq * ex).sum(axis=1)
                cnt += gq.sum(axis=1)
            sigma2 = np.maximum(np.divide(num, cnt, out=np.zeros_like(num), where=cnt > 0), 0.0)
        return sigma2

    def prior(self, r: int | None = None, *, period: int | None = None) -> ProfilePrior | None:
        """The forecast of the next period's first r steps (default w) and its error variance,
        as :func:`profile_prior` of the periods added (class Notes); None before two.

        Per node once σ̂² and the floor are known: a block of ``_SHRINK_ROWS`` nodes at a
        time (bitwise the same; the temporaries stay in cache)."""
        r = self.w if r is None else int(r)
        if self.n_periods < 2:
            return None
        sigma2v = self._sigma2(r)
        floor = self._floor()
        mean = np.empty((self.n_nodes, r))
        variance = np.empty((self.n_nodes, r))
        for i in range(0, self.n_nodes, _SHRINK_ROWS):
            rows = slice(i, i + _SHRINK_ROWS)
            mean[rows], variance[rows] = self._prior_rows(r, rows, sigma2v[rows], floor, period)
        n = min(self.n_periods, self.days)
        return ProfilePrior(mean=mean, variance=variance, n_periods=n, n_pairs=n)

    def _prior_rows(self, r: int, rows: slice, sigma2v: np.ndarray, floor: float, period):
        sigma2 = sigma2v[:, None]
        hw = 1.0 / np.maximum(sigma2, floor)  # public history: e = 0, one weight per node
        hn = self.hn[rows, None]
        wt, wy, w2, w2e = (a[rows, :r] for a in (self.wt, self.wy, self.w2, self.w2e))
        if self.relative and self.eref is not None:  # the folded Σ ρ X times ū = 1/(σ² + ē)
            ub = 1.0 / np.maximum(self.eref[rows, :r] + sigma2, floor)
            wt, wy, w2, w2e = wt * ub, wy * ub, w2 * ub * ub, w2e * ub * ub
        if self.linear:  # the folded weights u = 1/(σ_q² + e) at σ², to first order (u' = −u²)
            u2y, su2, su2y, u3, su3, u3e, su3e = (getattr(self, a)[rows, :r]
                                                  for a in self._LINEAR[8:])  # fmt: skip
            lin = (wt - sigma2 * w2 + su2, wy - sigma2 * u2y + su2y,
                   w2 - 2.0 * sigma2 * u3 + 2.0 * su3,
                   w2e - 2.0 * sigma2 * u3e + 2.0 * su3e)  # fmt: skip
            ok = (lin[0] >= 0.5 * wt) & (lin[2] >= 0.25 * w2)  # too far to extrapolate: frozen
            wt, wy, w2, w2e = (np.where(ok, a, b) for a, b in zip(lin, (wt, wy, w2, w2e),
                                                                  strict=True))  # fmt: skip
        total = wt + hn * hw
        wy = wy + self.hy[rows, :r] * hw
        w2 = w2 + hn * hw * hw
        w2e = w2e.copy()
        for held in self._exact():
            f = held[5]
            t, ty, t2, t2e = self._weights(held, sigma2v, r, rows)
            total = total + f * t
            wy += f * ty
            w2 += f * t2
            w2e += f * t2e
        usable = (self.count[rows] >= 2.0 - 1e-9)[:, None]
        total = np.where(usable & (total > 0), total, 1.0)
        mean = np.where(usable, wy / total, 0.0)
        a2 = w2 / (total * total)
        a2e = w2e / (total * total)
        day = np.broadcast_to(sigma2, mean.shape)
        estimation = sigma2 * a2 + a2e
        if self.shrink:
            mean = _shrunk_profile(mean, estimation, period=period or self.w)
        tau2 = np.maximum(day + estimation, floor)
        return mean, np.where(usable, tau2, np.inf)
