"""The standard error of every released value, from public parameters and released values only.

``dpstream.std_errors(released)`` returns a frame aligned with a release (same index, same
columns): the root-mean-square error each published value is stated to carry. It reads the
release's ``attrs`` (the privacy record and, for OptStream's default ``k="auto"``, the published
measurements and plan configuration) and never the private data: it is post-processing of the
release ([FV19] Theorem 3) and costs no budget.

OptStream, ``k="auto"`` (the default, :mod:`dpstream.pipelines._autoplan`)
-------------------------------------------------------------------------
The release publishes its measurements x̃ (``attrs["measurements"]``) and every plan is a
function of them (``_autoplan.replan``), so the weights of Algorithm 4 -- the predicted error
variance ``v`` of each measurement (noise, plus the interpolation error between samples the
planner estimates from the variogram of earlier measurements), and the prior's mean and
variance ``τ²`` -- are recomputed exactly. With singleton features the problem of [FV19]
Alg. 4 separates by step; per step it is generalised least squares on a tree: every node ``a``
observes the sum of its leaves twice (measurement, variance ``v_a``; prior, ``τ²_a``), the
two combined into one observation of precision ``1/v_a + 1/τ²_a``. When non-negativity does not
bind the estimate is linear in the observations and, the weights being the error variances,
its error covariance is the inverse of the information matrix (the BLUE). Its diagonal is
computed in O(nodes) per step by the two passes of a Kalman smoother on a tree:

* upward: ``u_a = 1 / (1/o_a + 1/Σ_c u_c)`` (leaves: ``u_a = o_a``), the variance of the
  estimate of ``a`` from its subtree;
* downward: ``P_root = u_root`` and for a child ``c`` of ``p`` with ``U_p = Σ_c u_c``,
  ``P_c = u_c − u_c²/U_p + (u_c/U_p)² P_p``

(the child's error splits into a part ``(u_c/U_p)·E`` along the siblings' sum error ``E`` and an
orthogonal rest of variance ``u_c − u_c²/U_p``; the parent's final error replaces ``E``).
These passes treat the errors as independent between nodes; trees of at most
:data:`DENSE_LEAVES` leaves (and single streams) use the covariance with shared errors below.
Larger trees use the passes scaled per node for the errors shared between nodes
(:func:`_shared_factor`: a Monte Carlo of the same error model through Algorithm 4's own
solver, with common random numbers against the independent model; O(draws · nodes · w), no
nodes × nodes matrix): alone, the passes understated the national of an 80-leaf tree 5x
(``docs/results/std_errors_large_tree.md``).

Where non-negativity binds (a released value is 0) Algorithm 4 is not linear. It separates by
step (singleton features), so only the steps holding a 0 (in any node) are affected; there the
linear figure is scaled per value by what non-negativity does to the error under a
**parametric bootstrap from the known noise**: the released values are taken as the truth,
measurements and prior means are redrawn around them with the variances above (Gaussian,
independent between nodes), the same weighted least squares is solved with non-negativity and,
for the same draws, shifted far from 0 (linear), and the ratio of the two root-mean-square
differences from the released values multiplies the linear figure. (Until the issue 30
follow-up the bootstrap's own figure replaced every value of a period holding a 0: its
independent draws miss the errors the nodes share, and around released values near 0 it counts
draws crossing 0 that the release did not have; a household's total was understated 1.5x by
it, its sub-meters 1.3-1.6x.) The bootstrap's own draws are simulation, not release: they come
from ``numpy`` seeded by ``seed`` and publish nothing private.

Errors shared between nodes and between the two observations of a node. The noise is
independent between nodes; the interpolation error and the forecast error are linear in the
values, so an aggregate's is the sum of its leaves' (additive over the tree), with one
correlation between leaves: inferred from the root's own variance (interpolation; a prior of
the root), or, where the root has no prior of its own, from the published forecast residuals
``x̃ − f`` of the leaves. With equally spaced samples at the same positions every day the
forecast (a profile of earlier measurements) shares the measurement's interpolation error: the
covariance of the two, ``C = (v + τ² − E[(x̃ − f)²]) / 2`` per node between samples, enters the
covariance too, and the prior's stated τ² is checked against the residuals at the sampled steps
(where the measurement is the value plus noise of known variance): a one-step-ahead backtest
of published values (:func:`_residual_check`). The prior's error variance is fitted there as
``s·τ² + b²`` (:func:`_prior_error_fit`): τ² shrinks as released periods accumulate, the
forecast's own bias against the true period (``b²``) does not. With one factor on τ² pooled
over the month, the late periods at ε = 0.1 were understated (regional, 28 days, late half:
national 1.40, semiurban 1.43, commercial 1.44; 60 days, rural 1.49), the early ones
overstated; per half-month then 0.81-1.18 at ε = 1 and 0.1, 20 seeds, also over 60 days
(0.79-1.12 with the step-of-day term below)
(``docs/results/std_errors_calibration.md``).
Periods planned blind (the first, without history) get their interpolation error from the
variogram of the other periods' measurements.

By step of day (issue 30 follow-up): the planner's variogram is one roughness for the whole day,
so its interpolation error between two samples is the same over the night's flat load as over
the morning ramp. From 2016-01-04 (samples at 04:30 and 09:30 most days) the regional figures
were understated 1.1-1.7x per node, about 15x in variance at 08:00. The interpolation error is
now at least the Brownian bridge of a roughness by step of day
(:func:`_local_roughness`, :func:`_bridge`): the squared increments of consecutive published
samples, noise taken out, pooled over the periods and the nodes of a level, shrunk by
empirical Bayes. Their mean slope is included (a ramp's curvature cannot be told from it
between two samples), so the figure is an upper one there: regional, per node, 0.75-1.01 on
both slices at ε = 1, 3 seeds each, against 0.88-1.74 before
(``docs/results/std_errors_time_of_day.md``).

A nugget (issue 30 follow-up for single households): a household's load between samples is
spiky (appliances), closer to white noise around the day's profile than to a random walk. With
``V(h) = c + σ²h`` (``h ≥ 1``) linear interpolation misses ``σ²(t − i)(j − t)/(j − i) +
(c/2)(1 + (1 − λ)² + λ²)`` (:func:`_bridge`), at mid-spacing ``3c/4``: three times the bridge
fitted to the increments of a pure nugget. ``c`` is read from the anti-correlation of
consecutive increments between published samples, within each sample position over the
periods (the day's profile out), the noise taken out, shrunk by its sampling variance
(:func:`_nugget_share`); it follows the step of day as the roughness does. The stated
interpolation error is the larger of the bridge and the white noise, step by step
(:func:`_between_samples`), and the white noise's share is spread over the tree with a
correlation of its own (appliances switch independently).

What the figure includes: the noise, the interpolation error (as the planner predicts it), the
prior's shrinkage (as its empirical-Bayes variance states it), the errors they share. What it
cannot include: errors of the planner's own variance estimates (checked by the calibration in
``docs/results/std_errors_calibration.md``).

A release keeps its plans and priors (``attrs["planning"]``, :class:`PlanningRecord`: public
by-products of planning) so that the figures need not replay the planner (CPU 0.03 s against
0.32 s replaying, the release 0.77 s, regional 28 days); a release read back from a file
replays them from the published measurements. A store's periods: :func:`store_std_errors`.

Unmeasured readings (``missing="unmeasured"``, in memory or through the store): the release
publishes them empty, and their stated error is empty too. Algorithm 4 pinned them to an exact
0 (``post_process_periods``), and the error model pins them the same way (no error, no prior
weight, no bootstrap for the pinned 0: :func:`_pinned_inputs`). The aggregates' figures are
then errors against the sum of the *observed* leaves, the quantity they release. An observed
value's figure carries the noise of its node's interpolation through its observed samples;
the interpolation error is as planned, not widened where a sample was dropped. The residual
checks below (the prior's scale, the measurement-prior covariance, the leaves' forecast
correlation) skip unmeasured readings and priors of ~0 weight (an unmeasured history).
Regional hierarchy, 28 days, 5 % of the leaf readings missing and one 6-hour outage, 6 seeds
(``docs/results/std_errors_unmeasured.md``): empirical / stated 0.95-1.01 at ε = 1 and
0.91-0.98 at ε = 0.1, against 0.92-1.01 and 0.90-0.99 without gaps (session 11's code).

Where the figures hold: the interpolation error between samples is the planner's prediction,
from a variogram the published samples only see at multiples of the sample spacing (the same
steps every day), at least the bridge or the nugget above. Aggregated loads (the regional
hierarchy) are calibrated; a household's sub-meters switch within a spacing: 0.92-1.68 per
node with the nugget, 1.39-2.29 without (issue 28's slice, ``docs/results/std_errors_domain.md``),
the spikiest (laundry, kitchen) still understated.

OptStream, ``k`` an int
-----------------------
The release publishes, per period (``attrs["estimates"]``), its measurements c̃ (the
reconstructed singletons and the noisy feature answers), their noise variances, the weights
Algorithm 4 used, each level's sample set and the feature chain: the outputs of Sample,
Perturb and the feature queries that [FV19] Lemma 1 and Theorem 13 compose, so its ε already
covers them (the L1 sampler's sample set is the SVT's own output; see
:func:`dpstream.pipelines._period.published_estimates`). The estimate is linear in c̃ where
non-negativity does not bind: ``K = (A ⊗ I)(Hᵀ W H)⁻¹ Hᵀ W`` (H: singletons and feature parts
of every node's sum of leaves, W: the weights), and its error covariance ``K Σ Kᵀ`` is exact
under the error model Σ: the noise at the samples interpolated (independent between nodes),
the feature noise, and the interpolation error through each level's samples by the kriging
identity with the leaves' variograms estimated from the published samples (one random-walk
variogram per node, its sill pooled over all long-lag pairs of samples with the noise taken out,
:func:`dpstream._std_errors_fixed._pooled_variogram`; cross-variogram ``ρ·√(γ_l γ_m)``, ρ from
the root's own). Up to 64 leaves; a parametric bootstrap where a released value is 0 (around
each leaf's linear estimate shrunk to the truth's spread, with Laplace noise as the release
draws it: :mod:`dpstream._std_errors_fixed`). The L1
sampler's sample steps depend on the data (the SVT); the model takes them as given. Calibrated
for both samplers at ε = 1 and 0.1 (``docs/results/std_errors_fixed_k.md``, which also splits
the error into its noise and interpolation parts).

Other releases
--------------
* ToPS, PAK and BT range queries: ``dpstream query`` states their noise error.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mechanisms import ParameterError

__all__ = ["PlanningRecord", "std_errors", "store_std_errors", "tree_posterior_variance"]

_OWNER = "std_errors"


def tree_posterior_variance(obs: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Error variance of the tree-consistent GLS estimate of every node, per column.

    Parameters
    ----------
    obs : numpy.ndarray
        (N, S) error variance of each node's own observation (``inf``: none), nodes in
        breadth-first order (every parent before its children), ``S`` independent steps.
    parent : numpy.ndarray
        (N,) row of each node's parent, -1 for the root.

    Returns
    -------
    numpy.ndarray
        (N, S) diagonal of the posterior covariance of the consistent estimate (every node the
        sum of its leaves) when every observation is unbiased with the variance given: the
        inverse information matrix of the generalised least-squares problem of [FV19] Alg. 4
        (§5.2) at one step. See the module notes for the two passes.
    """
    o = np.asarray(obs, dtype=np.float64)
    n = o.shape[0]
    parent = np.asarray(parent)
    u = np.empty_like(o)
    child_sum = np.zeros_like(o)
    has_child = np.zeros(n, dtype=bool)
    has_child[parent[parent >= 0]] = True
    for a in range(n - 1, -1, -1):  # children before parents (breadth-first order reversed)
        if has_child[a]:
            with np.errstate(divide="ignore"):
                u[a] = 1.0 / (1.0 / o[a] + 1.0 / child_sum[a])
        else:
            u[a] = o[a]
        if parent[a] >= 0:
            child_sum[parent[a]] += u[a]
    p = np.empty_like(o)
    for a in range(n):  # parents before children
        q = parent[a]
        if q < 0:
            p[a] = u[a]
        else:
            share = u[a] / child_sum[q]
            p[a] = u[a] - u[a] * share + share**2 * p[q]
    return np.maximum(p, 0.0)


def _hierarchy(released: pd.DataFrame, hierarchy: object):
    from postproc import Hierarchy

    if hierarchy is None:
        hierarchy = released.attrs.get("hierarchy")
    if hierarchy is None:
        levels = ((released.attrs.get("privacy") or {}).get("parameters") or {}).get("levels")
        if isinstance(levels, int) and levels > 1:  # never the tree's figures as columns'
            raise ParameterError(
                f"The 'hierarchy' parameter of {_OWNER} is required: the release was made with "
                f"a hierarchy of {levels} levels and carries none (attrs['hierarchy']). Pass "
                "the mapping parent -> children it was made with."
            )
        return None
    tree = hierarchy if isinstance(hierarchy, Hierarchy) else None
    if tree is None:
        if not isinstance(hierarchy, Mapping):
            raise ParameterError(
                f"The 'hierarchy' parameter of {_OWNER} must be the mapping parent -> children "
                f"the release was made with. Got {type(hierarchy).__name__} instead."
            )
        tree = Hierarchy(children={str(k): [str(c) for c in v] for k, v in hierarchy.items()})
    if tuple(str(c) for c in released.columns) != tree.nodes:
        raise ParameterError(
            f"The 'hierarchy' parameter of {_OWNER} must be the one the release was made with: "
            f"its nodes {list(tree.nodes)[:5]} are not the release's columns "
            f"{[str(c) for c in released.columns][:5]}."
        )
    return tree


def _auto_config(released: pd.DataFrame, tree, record: dict):
    from dpstream.pipelines._autoplan import _config

    pc = released.attrs["plan_config"]
    shares = record.get("parameters", {}).get("level_shares")
    nodes = tuple(str(c) for c in released.columns)
    return _config(
        epsilon=pc["epsilon"], alpha=pc["alpha"], w=pc["w"], delta=pc["delta"],
        noise=pc["noise"], target=pc["target"], level_shares=shares, hierarchy=tree,
        nodes=nodes, prior=pc["prior"],
    )  # fmt: skip


def _weights(plan, prior, r: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The variances Algorithm 4 used (``post_process_periods``): measurement, prior."""
    from dpstream.pipelines._period_steps import _UNMEASURED

    v = np.array(plan.variances[:, :r], dtype=np.float64)
    finite = np.isfinite(v)
    big = np.nanmax(np.where(finite, v, np.nan)) * _UNMEASURED
    v = np.where(finite, np.maximum(v, 1e-12 * big / _UNMEASURED), big)
    pv = None if prior is None else np.array(prior.variance[:, :r], dtype=np.float64)
    return v, pv


def _bootstrap(
    x_hat, v, pv, tree, n_boot: int, rng: np.random.Generator, prior_error=None
) -> tuple[np.ndarray, np.ndarray]:
    """Parametric bootstrap of one period (N, r) whose released values hit 0: the RMSE with
    non-negativity and, from the same draws, without it.

    Measurements are drawn around ``x_hat`` with variance ``v``, prior means with
    ``prior_error`` (the prior's error variance as the residual check states it; ``pv``, the
    variance Algorithm 4 weights it by, if None), and solved with Algorithm 4's weights; the
    twin solves the same draws shifted far from 0 (every leaf by the same large constant, so
    (O3) never binds; Algorithm 4 is then linear and the shift comes back out). Their ratio is
    what non-negativity does to the error under this simplified model (draws independent
    between nodes), common random numbers making it far less noisy than either.
    """
    from postproc import FeatureSet, project_consistent

    n, r = x_hat.shape
    c = x_hat[None] + np.sqrt(v)[None] * rng.standard_normal((n_boot, n, r))
    pm = None
    if pv is not None:  # an infinite prior variance is no prior (weight 0): its mean is unused
        draw = pv if prior_error is None else prior_error
        sd = np.sqrt(np.where(np.isfinite(pv) & np.isfinite(draw), draw, 0.0))
        pm = x_hat[None] + sd[None] * rng.standard_normal(c.shape)
    vs = np.broadcast_to(v, c.shape)
    pvs = None if pv is None else np.broadcast_to(pv, c.shape)
    if tree is None:
        free = c if pm is None else (c / vs + pm / pvs) / (1.0 / vs + 1.0 / pvs)
        out = np.maximum(free, 0.0)
    else:
        parent = np.asarray(tree.parent)
        is_leaf = np.ones(n, dtype=bool)
        is_leaf[parent[parent >= 0]] = False
        shift = 1e6 * (1.0 + np.sqrt(np.nanmax(v)) + np.abs(x_hat).max())
        base = _up(np.full((1, n, r), shift), parent, is_leaf)  # (1, N, r): consistent

        def solve(offset):
            return project_consistent(
                c + offset,
                hierarchy=tree,
                features=FeatureSet.from_breaks(r, []),
                variances=vs,
                prior_mean=None if pm is None else pm + offset,
                prior_variances=pvs,
            ).values

        out = np.maximum(solve(0.0), 0.0)
        free = solve(base) - base
    rms = np.sqrt(np.mean((out - x_hat[None]) ** 2, axis=0))
    return rms, np.sqrt(np.mean((free - x_hat[None]) ** 2, axis=0))


#: Largest number of leaves for the dense per-step covariance (shared errors between levels;
#: O(w·nodes³) per period, as the planner's cross-level combination): larger trees use the
#: independent-errors tree passes (:func:`tree_posterior_variance`).
DENSE_LEAVES = 64


def _shared_correlation(var: np.ndarray, matrix: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """(r,) correlation ρ in [0, 1] of the leaves' errors implied by the root's variance.

    An error that is linear in the leaves' values (the interpolation error of equally spaced
    samples; a profile's forecast error) is additive: the root's is the sum of its leaves'. With
    one correlation ρ between every pair of leaves, ``v_root = Σ v_l + ρ((Σ √v_l)² − Σ v_l)``.
    """
    vl = var[leaves]  # (L, r)
    root = var[0]  # the root is row 0 (breadth-first); ``matrix`` is not needed
    s1 = vl.sum(axis=0)
    s2 = np.sqrt(vl).sum(axis=0) ** 2 - s1
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(s2 > 0, (root - s1) / s2, 0.0)
    return np.clip(np.nan_to_num(rho), 0.0, 1.0)


def _dense_period(
    v,
    noise,
    pv,
    matrix,
    leaves,
    rho_prior: float | None = None,
    cross=None,
    prior_fit=None,
    interp=None,
    pinned=None,
    white=None,
) -> np.ndarray:
    """(N, r) error variance of Algorithm 4's linear estimate with errors shared between levels.

    Observations of node a at a step: measurement ``c_a`` (weight 1/v_a) and prior mean
    (weight 1/τ²_a). Estimate of the leaves ``G Aᵀ (W c + Q f)`` with ``G = (Aᵀ(W + Q)A)⁻¹``;
    error covariance ``K (W Σ_c W + Q Σ_f Q) Kᵀ`` with ``K = A G Aᵀ``, where the measurement
    error is the noise (independent between nodes) plus an interpolation error and the prior's
    error is a forecast error, both additive over the tree (an aggregate's is the sum of its
    leaves') with one correlation between leaves (:func:`_shared_correlation`; for the prior,
    ``rho_prior`` where the root has no prior of its own to infer it from). ``pinned`` (N, r):
    unmeasured readings (:func:`_pin_unmeasured`), which share no error with the others.
    ``white`` (N, r): the part of ``interp`` from white noise between samples (the nugget,
    :func:`_bridge`), additive over the tree with a correlation of its own: a household's
    appliances switch independently of each other, while its sub-meters' daily shapes move
    together; one correlation for both overstated the total 1.6x.
    """
    a = matrix  # (N, L)
    n, r = v.shape
    wt = 1.0 / v
    qt = np.zeros_like(v) if pv is None else 1.0 / pv
    info = np.einsum("nl,nt,nm->tlm", a, wt + qt, a)  # (r, L, L)
    g = np.linalg.inv(info)
    k = np.einsum("nl,tlm,km->tnk", a, g, a)  # (r, N, N)

    def shared(var, rho=None):  # (r, N, N) covariance of an additive error, node variances var
        if rho is None:
            rho = _shared_correlation(var, a, leaves)
        sd = np.sqrt(var[leaves])  # (L, r)
        cl = rho[:, None, None] * np.einsum("lt,mt->tlm", sd, sd)
        idx = np.arange(sd.shape[0])
        cl[:, idx, idx] = sd.T**2
        return np.einsum("nl,tlm,km->tnk", a, cl, a)

    if interp is None:  # the weights' own interpolation error (as planned)
        interp = np.maximum(v - noise, 0.0)
    if white is None:
        cov_c = shared(interp)
    else:
        white = np.minimum(white, interp)
        cov_c = shared(interp - white) + shared(white)
    idx = np.arange(n)
    cov_c[:, idx, idx] += noise.T
    middle = wt.T[:, :, None] * cov_c * wt.T[:, None, :]
    if pv is not None:  # steps without a prior (τ² = inf) have weight 0
        finite = np.isfinite(pv)
        rho = None
        if rho_prior is not None and not finite[0].all():  # the root has no prior
            rho = np.full(r, rho_prior)
        true_pv = pv if prior_fit is None else _true_prior(pv, *prior_fit)
        cov_p = shared(np.where(finite, true_pv, 0.0), rho)
        middle += qt.T[:, :, None] * cov_p * qt.T[:, None, :]
        if cross is not None:  # Cov(measurement error, prior error), additive over the tree
            # between leaves with the interpolation error's correlation (both share it)
            rho_c = _shared_correlation(interp, a, leaves)
            sc = np.sqrt(cross[leaves])
            cl = rho_c[:, None, None] * np.outer(sc, sc)[None]
            cl[:, np.arange(len(leaves)), np.arange(len(leaves))] = cross[leaves][None, :]
            if pinned is not None:  # a pinned reading has no error to share
                kept = ~pinned[leaves].T  # (r, L)
                cl = cl * kept[:, :, None] * kept[:, None, :]
            cov_cf = np.einsum("nl,tlm,km->tnk", a, cl, a)
            both = wt.T[:, :, None] * cov_cf * qt.T[:, None, :]
            middle += both + both.transpose(0, 2, 1)
    cov = np.einsum("tij,tjk,tlk->til", k, middle, k)
    return np.maximum(np.einsum("tii->it", cov), 0.0)


#: Draws per period of the Monte Carlo that scales the tree passes of trees above
#: :data:`DENSE_LEAVES` leaves for the errors they share (:func:`_shared_factor`).
SHARED_DRAWS = 32


def _up(leaf_values: np.ndarray, parent: np.ndarray, is_leaf: np.ndarray) -> np.ndarray:
    """(D, N, r) every node the sum of its leaves, from leaf rows already in place."""
    out = np.where(is_leaf[None, :, None], leaf_values, 0.0)
    for a in range(len(parent) - 1, 0, -1):  # children before parents (breadth-first reversed)
        out[:, parent[a]] += out[:, a]
    return out


def _shared_factor(
    v, noise, pv, tree, interp, rho_prior, cross, prior_fit, rng, draws=SHARED_DRAWS
) -> np.ndarray:
    """(N,) factor on the tree passes' variance of every node: errors shared between nodes.

    The tree passes (:func:`tree_posterior_variance`) are exact when every observation's
    error is independent with the variance its weight assumes. The interpolation and forecast
    errors are instead additive over the tree (an aggregate's is its leaves' sum, one
    correlation between leaves, as in :func:`_dense_period`). Their effect is estimated by a
    Monte Carlo of that error model through Algorithm 4's own solver
    (:func:`postproc.project_consistent`, linear here: the stand-in truth is far from 0) with
    the *same* draws under the independent model; per node, the ratio of the two simulated
    variances pooled over the period's steps (common random numbers: its relative error is far
    below the ``sqrt(2/(draws·r))`` of either) scales the exact independent figure. O(draws ·
    nodes · r), no nodes × nodes matrix.
    """
    from postproc import FeatureSet, project_consistent

    n, r = v.shape
    parent = np.asarray(tree.parent)
    is_leaf = np.ones(n, dtype=bool)
    is_leaf[parent[parent >= 0]] = False
    leaves = np.flatnonzero(is_leaf)
    zn = rng.standard_normal((draws, n, r))
    u = rng.standard_normal((draws, n, r))
    z = rng.standard_normal((draws, 1, r))
    interp = np.maximum(v - noise, 0.0) if interp is None else interp
    s = np.sqrt(interp)
    rho = _shared_correlation(interp, None, leaves)  # (r,)
    shared = s * (np.sqrt(1.0 - rho)[None, None] * u + np.sqrt(rho)[None, None] * z)
    e_c = np.sqrt(noise)[None] * zn + _up(shared, parent, is_leaf)
    e_c_ind = np.sqrt(v)[None] * zn
    e_f = e_f_ind = None
    if pv is not None:
        finite = np.isfinite(pv)
        tau2 = np.where(finite, pv, 0.0)
        true = tau2 if prior_fit is None else np.where(finite, _true_prior(tau2, *prior_fit), 0.0)
        sf = np.sqrt(true)
        if rho_prior is not None and not finite[0].all():
            rho_f = np.full(r, float(rho_prior))
        else:
            rho_f = _shared_correlation(true, None, leaves)
        kappa = np.zeros((n, 1))
        if cross is not None:  # Cov(interpolation, forecast) per node, through shared draws
            with np.errstate(divide="ignore", invalid="ignore"):
                k = cross[:, None] / np.sqrt(interp * true)
            valid = finite & np.isfinite(k)  # the mean over a node's valid steps
            count = np.maximum(valid.sum(axis=1, keepdims=True), 1)
            kappa = np.clip(np.where(valid, k, 0.0).sum(axis=1, keepdims=True) / count, 0, 1)
        u2 = kappa * u + np.sqrt(1.0 - kappa**2) * rng.standard_normal((draws, n, r))
        z2 = kappa.mean() * z + np.sqrt(1.0 - kappa.mean() ** 2) * rng.standard_normal(z.shape)
        own = sf * (np.sqrt(1.0 - rho_f)[None, None] * u2 + np.sqrt(rho_f)[None, None] * z2)
        e_f = _up(own, parent, is_leaf)
        e_f_ind = np.sqrt(tau2)[None] * u2
    base = 1e6 * (1.0 + np.sqrt(np.nanmax(v)))
    truth = _up(np.full((1, n, r), base), parent, is_leaf)[0]  # far from 0: (O3) never binds
    fs = FeatureSet.from_breaks(r, [])
    vs = np.broadcast_to(v, (draws, n, r))
    pvs = None if pv is None else np.broadcast_to(pv, (draws, n, r))

    def solve(ec, ef):
        kw = {} if ef is None else {"prior_mean": truth + ef, "prior_variances": pvs}
        out = project_consistent(truth + ec, hierarchy=tree, features=fs, variances=vs, **kw)
        return ((out.values - truth) ** 2).mean(axis=0).sum(axis=1)  # (N,)

    corr = solve(e_c, e_f)
    ind = solve(e_c_ind, e_f_ind)
    return np.where(ind > 0, corr / np.where(ind > 0, ind, 1.0), 1.0)


def _replay(meas: np.ndarray, cfg, hist):
    """Every period's measurement, plan and prior, recomputed from the published measurements
    (``_autoplan.replan``, keeping the measurements)."""
    from dpstream.pipelines._autoplan import run_periods
    from dpstream.pipelines._period_steps import as_measurement

    w = cfg.w
    n_full = meas.shape[0] // w
    full = meas[: n_full * w].reshape(n_full, w, -1).transpose(0, 2, 1)
    tail = meas[n_full * w :].T
    return run_periods(
        full, tail, cfg, history=hist, measure=lambda i, vals, plan: as_measurement(vals, plan, cfg)
    )


class PlanningRecord:
    """What a ``k="auto"`` release planned, kept with it so that :func:`std_errors` need not
    replay the planner (``attrs["planning"]``): every period's measurement, plan and prior.

    All three are functions of the published measurements and public parameters
    (``_autoplan.replan``), so keeping them publishes nothing new; :func:`std_errors` uses them
    only while they belong to the measurements beside them (else it replays). Shared, never
    copied (``DataFrame.attrs`` are deep-copied by pandas operations: this object is immutable
    and returns itself), and not written to files (a release read back replays).
    """

    __slots__ = ("measured", "plans", "priors", "_key")

    def __init__(self, measured, plans, priors, measurements) -> None:
        self.measured = tuple(measured)
        self.plans = tuple(plans)
        self.priors = tuple(priors)
        self._key = id(measurements), np.shape(measurements)

    def __deepcopy__(self, memo) -> PlanningRecord:
        return self

    def __copy__(self) -> PlanningRecord:
        return self

    def __repr__(self) -> str:
        return f"PlanningRecord({len(self.plans)} periods)"

    def matches(self, measurements: np.ndarray) -> bool:
        """True if these plans were made from exactly ``measurements`` (T, N)."""
        meas = np.asarray(measurements, dtype=np.float64)
        if not self.measured or np.shape(meas) != self._key[1]:
            return False
        mine = np.concatenate([m.values.T for m in self.measured], axis=0)
        return mine.shape == meas.shape and np.array_equal(mine, meas, equal_nan=True)


def _blind_interpolation(measured, plans, cfg) -> dict[int, np.ndarray]:
    """Interpolation error variance (N, r) of the periods planned blind (``basis == "rule"``).

    Their plans know the noise only (nothing was measured before them). After the release the
    other periods' measurements are public: their variogram (noise taken out,
    :func:`planner.variogram`) gives the interpolation error of the blind periods' samples by the
    kriging identity (:func:`planner.kriging_bias`), as the planner computes it for later periods.
    """
    from mechanisms.optstream._sampling import interpolation_matrix
    from planner import kriging_bias, period_roughness, variogram

    blind = [i for i, p in enumerate(plans) if p.basis == "rule"]
    stats = [
        period_roughness(m.values, m.noise, m.sampled)
        for m in measured
        if m.values.shape[1] == cfg.w
    ]
    if not blind or len(stats) < 2:
        return {}
    total = stats[0]
    for s in stats[1:]:
        total = total + s
    gamma = variogram(total)
    out = {}
    for i in blind:
        r = measured[i].values.shape[1]
        mask = np.zeros((1, r), dtype=bool)
        mask[0, plans[i].positions(r)] = True
        out[i] = kriging_bias(gamma[:, :r], interpolation_matrix(mask)[0])
    return out


def _rough_interpolation(measured, plans, cfg) -> dict[int, np.ndarray] | None:
    """Interpolation error variance (N, r) of every period under the *rough* variogram.

    The variogram of the released measurements (pooled over the periods, noise taken out,
    :func:`planner.variogram`) is only observed at lags between sample steps; below the
    sample spacing the planner extrapolates it as a random walk (``γ(h) ∝ h``), which a load
    that switches within a spacing (a household: appliances on and off) exceeds several times,
    and which the published values cannot check (the samples sit at the same steps every day).
    The rough figure takes ``γ(h) = sill`` for every lag ``h >= 1`` (the sill: the variogram's
    value at its longest lags), the largest interpolation error a stationary load with that
    sill can have between samples: an upper figure, by the kriging identity
    (:func:`planner.kriging_bias`). None without two full measured periods.
    """
    from mechanisms.optstream._sampling import interpolation_matrix
    from planner import kriging_bias, period_roughness, variogram

    stats = [
        period_roughness(m.values, m.noise, m.sampled)
        for m in measured
        if m.values.shape[1] == cfg.w
    ]
    if len(stats) < 2:
        return None
    total = stats[0]
    for s in stats[1:]:
        total = total + s
    gamma = variogram(total)
    if gamma is None:
        return None
    flat = np.repeat(gamma.max(axis=1, keepdims=True), gamma.shape[1], axis=1)
    flat[:, 0] = 0.0
    out = {}
    for i, m in enumerate(measured):
        r = m.values.shape[1]
        mask = np.zeros((1, r), dtype=bool)
        mask[0, plans[i].positions(r)] = True
        out[i] = kriging_bias(flat[:, :r], interpolation_matrix(mask)[0])
    return out


def _prior_correlation(measured, priors, leaves: np.ndarray, plans=None) -> float | None:
    """One correlation between the leaves' forecast errors, from the published measurements.

    The residuals ``d = x̃ − f`` of every period with a prior (measurement minus the prior's
    mean) carry the forecast error plus the measurement's error; their noise is independent
    between leaves, so off the diagonal their mean products estimate the shared part (the
    forecast's and the interpolation's errors: a day warmer than the profile everywhere).
    ρ = Σ_{l≠m} E[d_l d_m] / Σ_{l≠m} √(s_l s_m), with s_l = E[d_l²] minus the noise variance.
    None without at least one period with a prior. A step where a leaf's reading was
    unmeasured, or its prior has ~0 weight (``plans``: variance 10⁴ times the measurement's or
    more, a history of unmeasured readings), is left out.
    """
    cross = None
    noise = None
    count = 0
    for i, (m, prior) in enumerate(zip(measured, priors, strict=True)):
        if prior is None:
            continue
        r = m.values.shape[1]
        d = m.values[leaves] - prior.mean[leaves, :r]
        ok = np.isfinite(d).all(axis=0)
        if plans is not None:
            v = np.asarray(plans[i].variances, dtype=np.float64)[leaves, :r]
            ok &= (np.asarray(prior.variance, dtype=np.float64)[leaves, :r] < 1e4 * v).all(axis=0)
        if (obs := getattr(m, "observed", None)) is not None:  # a step with an unmeasured
            ok &= np.asarray(obs, dtype=bool)[leaves, :r].all(axis=0)  # leaf: no residual
        d = d[:, ok]
        if not d.size:
            continue
        cross = d @ d.T if cross is None else cross + d @ d.T
        nz = m.noise[leaves][:, ok].sum(axis=1)
        noise = nz if noise is None else noise + nz
        count += d.shape[1]
    if cross is None or len(leaves) < 2:
        return None
    cross = cross / count
    s = np.maximum(np.diag(cross) - noise / count, 0.0)
    off = ~np.eye(len(leaves), dtype=bool)
    denom = np.sqrt(np.outer(s, s))[off].sum()
    if denom <= 0:
        return None
    return float(np.clip(cross[off].sum() / denom, 0.0, 1.0))


#: Bounds of the residual check's factor ``s`` on the prior's variance τ² (few, noisy residuals:
#: a guard). Residuals may tighten τ² at most 2x and widen it 4x, plus the bias part ``b²``
#: (:func:`_prior_error_fit`). With a lower bound of 0 the fit (noisy at ε = 0.1: the noise at
#: a sample is 4-20x the forecast's error) often put all of the error in ``b²``, and single
#: releases' late periods were understated up to 4x (28 days, 10 seeds); with 1 the rural
#: node's late periods were overstated (0.77).
PRIOR_SCALE_BOUNDS = (0.5, 4.0)

#: Rounds of iteratively reweighted least squares in :func:`_prior_error_fit`.
_FIT_ROUNDS = 4


def _residual_rows(measured, plans, priors):
    """Per period with a prior: (ok (N, r) usable residuals, sampled, d², noise, v, τ²)."""
    from dpstream.pipelines._period_steps import _UNMEASURED

    for m, plan, prior in zip(measured, plans, priors, strict=True):
        if prior is None:
            continue
        r = m.values.shape[1]
        v = np.array(plan.variances[:, :r], dtype=np.float64)
        pv = np.array(prior.variance[:, :r], dtype=np.float64)
        d2 = (m.values - prior.mean[:, :r]) ** 2
        ok = np.isfinite(v) & np.isfinite(pv) & np.isfinite(d2) & (v < _UNMEASURED)
        if (obs := getattr(m, "observed", None)) is not None:  # an unmeasured reading is no
            ok &= np.asarray(obs, dtype=bool)[:, :r]  # residual (its 0 is pinned)
        ok &= pv < 1e4 * v  # a prior of ~0 weight (its history unmeasured) checks nothing
        yield ok, np.asarray(m.sampled, dtype=bool)[:, :r], d2, m.noise[:, :r], v, pv


def _prior_error_fit(measured, plans, priors, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per node ``(s, b²)``: the prior's error variance is ``s·τ² + b²``, fitted to the
    published residuals at the sampled steps.

    There ``d = x̃ − f`` is the forecast's error plus noise of known variance, so
    ``E[d² − noise] = s·τ² + b²``. The profile's τ² shrinks as released periods accumulate
    (``postproc.profile_prior``: its day-to-day model ``σ²(1 + Σa²) + Σa²e²``), but the
    forecast's own bias against the true period does not (a level that walks over the month,
    weather): ``b²`` is that part, which a factor on τ² alone (pooled over the month) puts in
    the early periods and takes from the late ones. Weighted least squares of ``d² − noise`` on
    ``(τ², 1)`` with weights ``1/(noise + s·τ² + b²)²`` (the variance of a Gaussian square,
    iterated from ``s = 1, b² = 0``), ``s`` in :data:`PRIOR_SCALE_BOUNDS`, ``b² ≥ 0`` (the
    box's best point). A node without residuals keeps ``(1, 0)``.
    """
    s_min, hi = PRIOR_SCALE_BOUNDS
    s, b = np.ones(n), np.zeros(n)
    for _ in range(_FIT_ROUNDS):
        sums = np.zeros((5, n))  # Σw, Σw·x, Σw·x², Σw·y, Σw·x·y (x = τ², y = d² − noise)
        for ok, sampled, d2, noise, _v, pv in _residual_rows(measured, plans, priors):
            at = ok & sampled
            x = np.where(at, pv, 0.0)
            y = np.where(at, d2 - noise, 0.0)
            den = noise + s[:, None] * x + b[:, None]
            w = np.where(at & (den > 0), 1.0 / np.where(den > 0, den, 1.0) ** 2, 0.0)
            for j, term in enumerate((w, w * x, w * x * x, w * y, w * x * y)):
                sums[j] += term.sum(axis=1)
        has = (sums[0] > 0) & (sums[2] > 0)
        if not has.any():
            break
        s, b = _box_fit(sums, s_min, hi)
        s, b = np.where(has, s, 1.0), np.where(has, b, 0.0)
    return s, b


def _box_fit(sums: np.ndarray, s_min: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Per node, the weighted least squares ``y ≈ s·x + b`` over the box ``s`` in
    ``[s_min, hi]``, ``b ≥ 0``, from the sums ``(Σw, Σwx, Σwx², Σwy, Σwxy)`` (5, N): the
    interior optimum if it is in the box, else the best point of its three edges."""
    sw, sx, sxx, sy, sxy = sums
    sw_, sxx_ = np.where(sw > 0, sw, 1.0), np.where(sxx > 0, sxx, 1.0)

    def sse(ss, bb):  # the weighted squared error, up to a constant
        return sxx * ss**2 + sw * bb**2 + 2 * sx * ss * bb - 2 * sxy * ss - 2 * sy * bb

    det = sw * sxx - sx**2
    ok = det > 1e-12 * sw_ * sxx_
    det_ = np.where(ok, det, 1.0)
    s_in = (sw * sxy - sx * sy) / det_
    b_in = (sxx * sy - sx * sxy) / det_
    inside = ok & (s_in >= s_min) & (s_in <= hi) & (b_in >= 0)
    best_s = np.clip(sxy / sxx_, s_min, hi)  # the edge b = 0
    best_b = np.zeros_like(sw)
    best = sse(best_s, best_b)
    for edge in (s_min, hi):  # the edges s = s_min and s = hi
        bb = np.maximum((sy - edge * sx) / sw_, 0.0)
        e = sse(edge, bb)
        better = e < best
        best_s = np.where(better, edge, best_s)
        best_b = np.where(better, bb, best_b)
        best = np.minimum(e, best)
    return np.where(inside, s_in, best_s), np.where(inside, b_in, best_b)


def _true_prior(pv: np.ndarray, scale, bias) -> np.ndarray:
    """The prior's error variance as the residual check states it: ``s·τ² + b²``, within
    :data:`PRIOR_SCALE_BOUNDS` times τ² (a guard: at ε = 0.1 a small node's fit from a few
    dozen residuals can put ``b²`` at 6x τ², an 80-feeder tree's feeder then stated 3.7x its
    error); τ² where there is no check."""
    if scale is None:
        return pv
    finite = np.isfinite(pv)
    tau2 = np.where(finite, pv, 0.0)
    b = 0.0 if bias is None else bias[:, None]
    lo, hi = PRIOR_SCALE_BOUNDS
    true = np.clip(tau2 * scale[:, None] + b, lo * tau2, hi * tau2)
    return np.where(finite, true, pv)  # no prior (τ² = ∞) stays none


def _residual_check(measured, plans, priors):
    """Per node: the prior's error variance ``s·τ² + b²`` (the factor ``s`` on its stated
    variance τ² and the bias part ``b²``), and the covariance C of the measurement's and the
    prior's errors, all from the published forecast residuals.

    The residual ``d = x̃ − f`` (measurement minus the prior's forecast) of a period with a prior
    is published-values-only (a one-step-ahead backtest). At a **sampled** step the measurement
    is the value plus noise of known variance, independent of the forecast, so
    ``E[d²] = noise + s·τ² + b²`` (:func:`_prior_error_fit`). Between samples
    ``E[d²] = v + s·τ² + b² − 2C``: with equally spaced samples at the same positions every
    day, the forecast (a profile of earlier measurements) shares the measurements'
    interpolation error, so ``C > 0`` and combining the two cancels less than independent errors
    would; ``C = Σ (v + s·τ² + b² − d²) / (2·count)``, in [0, √(E[interpolation error²]·E[s·τ²
    + b²])] (only the interpolation error can be shared). Returns ``(s, b², C)``, or None
    without a period with a prior.
    """
    if not measured:
        return None
    n = measured[0].values.shape[0]
    zeros = [np.zeros(n) for _ in range(6)]
    s_cnt, u_v, u_tau, u_d2, u_int, u_cnt = zeros
    scale, bias = _prior_error_fit(measured, plans, priors, n)
    for ok, sampled, d2, noise, v, pv in _residual_rows(measured, plans, priors):
        s_cnt += (ok & sampled).sum(axis=1)
        between = ok & ~sampled
        u_v += np.where(between, v, 0.0).sum(axis=1)
        u_tau += np.where(between, _true_prior(pv, scale, bias), 0.0).sum(axis=1)
        u_d2 += np.where(between, d2, 0.0).sum(axis=1)
        u_int += np.where(between, np.maximum(v - noise, 0.0), 0.0).sum(axis=1)
        u_cnt += between.sum(axis=1)
    if not (s_cnt.any() or u_cnt.any()):
        return None
    per = np.maximum(u_cnt, 1)
    c = np.maximum((u_v + u_tau - u_d2) / per / 2.0, 0.0)
    c = np.where(u_cnt > 0, np.minimum(c, np.sqrt(u_int / per * u_tau / per)), 0.0)
    return scale, bias, c


def _depths(parent: np.ndarray) -> np.ndarray:
    """(N,) depth of every node (root 0) from the breadth-first parent rows (-1: a root)."""
    depth = np.zeros(len(parent), dtype=int)
    for a, q in enumerate(parent):
        if q >= 0:
            depth[a] = depth[q] + 1
    return depth


def _segments(sampled_row: np.ndarray):
    """Consecutive sampled steps ``(i, j)`` of one node's period (``j − i ≥ 2``: a step between)."""
    cols = np.flatnonzero(sampled_row)
    return [(int(i), int(j)) for i, j in zip(cols[:-1], cols[1:], strict=True) if j - i > 1]


def _local_roughness(measured, parent) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Per period, the load's variogram by step of day ``V_t(h) = c_t + σ²_t·h`` (``h ≥ 1``):
    (N, w) its roughness ``σ²_t`` (variance per step of a random walk) and (N, w) its nugget
    ``c_t`` (the jump of ``V`` at lag 1: white noise around a smooth profile, ``Var = c_t/2``),
    at every step of the period, from the published samples up to that period.

    The planner's variogram (:func:`planner.variogram`) pools the squared increments of every
    pair of samples over the whole day: one roughness for the night's flat load and the
    morning's ramp alike, and the interpolation error it predicts between two samples is the
    same at 03:00 as at 08:00. The published measurements show where the load moves: per pair
    of consecutive samples ``(i, j)`` of a period, ``y = (x̃_j − x̃_i)² − n_i − n_j`` (``n``:
    their noise variances, known) estimates ``V(j − i)`` over that stretch (its mean slope
    included: a ramp's curvature between two samples cannot be told from its slope, so the
    figure is an upper one there), attributed to the steps strictly between.

    *The nugget* (issue 30 follow-up for single households). A random walk's increments over
    consecutive stretches are independent; around a smooth profile, white noise (a household's
    appliances switching within a spacing) makes them anti-correlated: for three consecutive
    samples ``i < j < l``, ``E[(x̃_j − x̃_i)(x̃_l − x̃_j)] + n_j = ½(V(l−i) − V(j−i) − V(l−j))
    = −c/2`` under ``V(h) = c + σ²h``, whatever the spacings (the microstructure-noise estimate
    of the realised-variance literature, lag-one autocovariance of increments). So per node
    ``ĉ = −2·mean(Δ₁Δ₂ + n_j)`` over its triples up to the period, shrunk toward 0 by empirical
    Bayes (method of moments, positive part: ``ĉ·max(0, 1 − se²/ĉ²)``, ``se`` the standard
    error of the mean from the products' own spread), and never below 0 (a smooth load's
    increments are positively correlated: no nugget). Its share of the node's mean ``y``,
    ``φ = ĉ/ȳ`` in [0, 1], splits every pair: ``φ·y`` is nugget, ``(1 − φ)·y/(j − i)`` walk
    per step; both follow the step of day.

    Per step ``t`` and node, the mean of each part over the pairs covering it, over the periods
    so far (as the planner reads only earlier periods: a period's figure does not change when
    later periods are released); relative to the node's mean over the steps, pooled over the
    nodes of a level (depth: the same steps, different scales) and shrunk toward the pooled
    level by its sampling variance (a Gaussian square: relative variance 2 per ``y``,
    ``2·ḡ²/n_t``) against the spread between steps (empirical Bayes, method of moments). Steps
    no pair covers keep the node's mean. None without measurements.
    """
    if not measured:
        return None
    n = measured[0].values.shape[0]
    w = max(m.values.shape[1] for m in measured)
    depth = _depths(np.asarray(parent))
    ysum, zsum, zcnt = np.zeros((n, w)), np.zeros((n, w)), np.zeros((n, w))
    y2sum, z2sum = np.zeros((n, w)), np.zeros((n, w))
    pairs = np.zeros((3, n))  # per node over consecutive pairs: count, Σ y, Σ Δ²
    triples: dict[tuple[int, int, int], np.ndarray] = {}  # per position: (7, N) sums
    result = []
    for m in measured:
        x = np.asarray(m.values, dtype=np.float64)
        nz = np.asarray(m.noise, dtype=np.float64)
        smp = np.asarray(m.sampled, dtype=bool)[:, : x.shape[1]]
        if (obs := getattr(m, "observed", None)) is not None:  # an unmeasured reading: no sample
            smp = smp & np.asarray(obs, dtype=bool)[:, : x.shape[1]]
        patterns, which = np.unique(smp, axis=0, return_inverse=True)
        for p, row in enumerate(patterns):  # nodes sampled at the same steps together
            nodes = np.flatnonzero(np.ravel(which) == p)
            for i, j in _segments(row):
                y = (x[nodes, j] - x[nodes, i]) ** 2 - nz[nodes, i] - nz[nodes, j]
                ok = np.isfinite(y)
                ysum[nodes[ok], i + 1 : j] += y[ok, None]
                zsum[nodes[ok], i + 1 : j] += y[ok, None] / (j - i)
                zcnt[nodes[ok], i + 1 : j] += 1
                y2sum[nodes[ok], i + 1 : j] += y[ok, None] ** 2
                z2sum[nodes[ok], i + 1 : j] += (y[ok, None] / (j - i)) ** 2
                pairs[0, nodes[ok]] += 1
                pairs[1, nodes[ok]] += y[ok]
                pairs[2, nodes[ok]] += (x[nodes, j] - x[nodes, i])[ok] ** 2
            cols = np.flatnonzero(row)
            for i, j, k in zip(cols[:-2], cols[1:-1], cols[2:], strict=True):
                d1, d2 = x[nodes, j] - x[nodes, i], x[nodes, k] - x[nodes, j]
                ok = np.isfinite(d1 * d2 + nz[nodes, j])
                g = triples.setdefault((int(i), int(j), int(k)), np.zeros((7, n)))
                for row, term in enumerate((1.0, d1, d2, d1 * d2, nz[nodes, j], d1**2, d2**2)):
                    g[row, nodes[ok]] += np.broadcast_to(term, d1.shape)[ok]
        share = _nugget_share(triples, pairs)[:, None]
        walk = _shrunk_roughness(zsum, zcnt, depth, z2sum)
        jump = _shrunk_roughness(share * ysum, zcnt, depth, share**2 * y2sum)
        result.append((walk, jump))
    return result


def _nugget_share(triples: dict, pairs: np.ndarray) -> np.ndarray:
    """(N,) the nugget's share ``φ = ĉ/ȳ`` in [0, 1] of the mean squared increment between
    consecutive samples (see :func:`_local_roughness`), shrunk toward 0 by its sampling
    variance (positive part), 0 without a triple seen twice.

    ``triples``: per sample positions ``(i, j, l)``, (7, N) sums over the periods sampled there
    of 1, Δ₁, Δ₂, Δ₁Δ₂, n_j, Δ₁² and Δ₂². ``ĉ = −2·(Ĉov(Δ₁, Δ₂) + n_j)``, the covariance
    *within* each position over the periods (pooled, ``m − 1`` degrees of freedom from ``m``
    periods): the day's profile, the same from day to day, is taken out with the positions'
    means (its curvature makes consecutive increments anti-correlated around a peak sampled
    every few hours, which is not white noise). ``pairs`` (3, N): per node over consecutive
    pairs, their count and Σ y. The sampling variance of the pooled covariance is taken as
    without a nugget (independent increments: ``Var(Δ₁)·Var(Δ₂)`` per degree of freedom, the
    pooled within-position variances, noise included)."""
    n = pairs.shape[1]
    cov, noise, dof, var1, var2, raw, count = (np.zeros(n) for _ in range(7))
    for g in triples.values():
        m, s1, s2, s12, sn, q1, q2 = g
        raw += s12 + sn  # across positions: the day's profile left in
        count += m
        has = m >= 2
        mm = np.where(has, m, 1.0)
        cov += np.where(has, s12 - s1 * s2 / mm, 0.0)
        noise += np.where(has, sn * (m - 1) / mm, 0.0)
        var1 += np.where(has, q1 - s1**2 / mm, 0.0)
        var2 += np.where(has, q2 - s2**2 / mm, 0.0)
        dof += np.where(has, m - 1, 0.0)
    pair_cnt, pair_sum = pairs[:2]
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.maximum(np.minimum(-2.0 * (cov + noise) / dof, -2.0 * raw / count), 0.0)
        ybar = pair_sum / pair_cnt
        se2 = 4.0 * (var1 / dof) * (var2 / dof) / dof
        c = c * np.maximum(1.0 - se2 / (c * c), 0.0)
        share = np.where((dof >= 1) & (ybar > 0), c / ybar, 0.0)
    return np.clip(np.nan_to_num(share), 0.0, 1.0)


def _shrunk_roughness(
    zsum: np.ndarray, zcnt: np.ndarray, depth: np.ndarray, z2sum: np.ndarray
) -> np.ndarray:
    """(N, w) :func:`_local_roughness` of the sums so far (see there): ``zsum``, ``zcnt`` and
    ``z2sum`` the sum, count and sum of squares of the pairs' figures covering each step.

    The level's ratio per step is a ratio of sums over its nodes (``Σ_a local_a / Σ_a
    mean_a``): a mean of per-node ratios divided by noise-corrected means near 0 at ε = 0.1 and
    stated a rural node 20x its error in one early period. Its sampling variance is the larger
    of the Gaussian square's (relative variance 2) and the pairs' own spread (the noise's
    Laplace tails)."""
    n, w = zsum.shape
    with np.errstate(invalid="ignore", divide="ignore"):
        local = zsum / zcnt  # NaN where no pair covers a step
        mean = zsum.sum(axis=1) / zcnt.sum(axis=1)  # each node's over all its pairs
        spread_pairs = np.maximum(z2sum / zcnt - local**2, 0.0) / zcnt  # of each local mean
    mean = np.maximum(np.nan_to_num(mean), 0.0)
    out = np.repeat(mean[:, None], w, axis=1)
    for lev in np.unique(depth):
        rows = (depth == lev) & (mean > 0)
        if not rows.any():
            continue
        has = (zcnt[rows] > 0).all(axis=0)
        if has.sum() < 2:
            continue
        scale = mean[rows].sum()
        g = local[rows][:, has].sum(axis=0) / scale  # the level's ratio per step
        gauss = 2.0 * (mean[rows, None] * g[None]) ** 2 / zcnt[rows][:, has]
        sampling = np.maximum(gauss, spread_pairs[rows][:, has]).sum(axis=0) / scale**2
        gbar = float(g.mean())
        spread = max(float(np.var(g)) - float(sampling.mean()), 0.0)
        shrunk = np.maximum(gbar + spread / (spread + sampling) * (g - gbar), 0.0)
        out[np.ix_(rows, np.flatnonzero(has))] = mean[rows, None] * shrunk[None, :]
    # the node's level itself, shrunk toward 0 by its sampling variance (positive part, the
    # count of pairs covering its most covered step: the pairs of one period share its day);
    # at ε = 0.1 a few noise-dominated early periods made it an upper figure several times
    # over (rural 0.76 over 28 days; 0.83 with this, 12 seeds over 14 days)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread_mean = np.maximum(z2sum.sum(axis=1) / zcnt.sum(axis=1) - mean**2, 0.0)
        var_mean = spread_mean / np.maximum(zcnt.max(axis=1), 1.0)
        keep = np.where(mean > 0, np.maximum(1.0 - var_mean / mean**2, 0.0), 0.0)
    return out * np.nan_to_num(keep)[:, None]


def _bridge(
    sigma2: np.ndarray, sampled: np.ndarray, nugget: np.ndarray | None = None
) -> np.ndarray:
    """(N, r) interpolation error variance between each node's samples of a load with the
    variogram ``V_t(h) = c_t + σ²_t·h`` (``h ≥ 1``; :func:`_local_roughness`): a random walk of
    roughness ``σ²_t`` (N, w) plus white noise of variance ``c_t/2`` (``nugget``, N, w; none if
    None) around it.

    Linear interpolation at ``t`` between samples ``i < t < j``, ``λ = (t − i)/(j − i)``, misses
    ``x_t − (1 − λ)x_i − λx_j``: the walk's part is the Brownian bridge ``σ²_t·(t − i)(j − t)/
    (j − i)``, the white noise's ``(c_t/2)·(1 + (1 − λ)² + λ²)``, independent of it (by the
    kriging identity ``Var = (1 − λ)V(t − i) + λV(j − t) − λ(1 − λ)V(j − i)``, which gives the
    sum). At the midpoint of a spacing ``s``: ``σ²s/4 + 3c/4``, so for a pure nugget
    (``V(s) = c``) three times the bridge fitted to ``V(s)`` alone. 0 at a sample; held beyond
    the first or last sample ``s``: ``σ²_t·|t − s| + c_t``."""
    n, r = sampled.shape
    shape = np.zeros((n, r))  # the bridge's (t − i)(j − t)/(j − i), per sampling pattern
    white = np.zeros((n, r))  # the white noise's (1 + (1 − λ)² + λ²)/2
    t = np.arange(r)
    patterns, which = np.unique(sampled, axis=0, return_inverse=True)
    for p, row in enumerate(patterns):
        cols = np.flatnonzero(row)
        if not cols.size:
            continue
        f = np.zeros(r)
        g = np.zeros(r)
        for i, j in _segments(row):
            k = t[i + 1 : j]
            f[i + 1 : j] = (k - i) * (j - k) / (j - i)
            lam = (k - i) / (j - i)
            g[i + 1 : j] = 0.5 * (1.0 + (1.0 - lam) ** 2 + lam**2)
        f[: cols[0]] = cols[0] - t[: cols[0]]
        f[cols[-1] + 1 :] = t[cols[-1] + 1 :] - cols[-1]
        g[: cols[0]] = 1.0
        g[cols[-1] + 1 :] = 1.0
        rows = np.ravel(which) == p
        shape[rows] = f
        white[rows] = g
    out = sigma2[:, :r] * shape
    if nugget is not None:
        out = out + nugget[:, :r] * white
    return out


def _between_samples(walk: np.ndarray, jump: np.ndarray, sampled: np.ndarray):
    """(N, r) interpolation error variance between samples, and (N, r) its white-noise part:
    the larger of the Brownian bridge of the roughness ``walk`` (every squared increment a
    random walk's, mean slope included: an upper figure on a smooth ramp) and the white noise
    of the nugget ``jump`` (:func:`_local_roughness`, :func:`_bridge`), step by step.

    Not their sum: the bridge already carries the whole squared increment between two samples,
    and on aggregated loads it is an upper figure (ramps are near-linear between samples); the
    regional nodes' deviations from the day's profile are anti-correlated at a spacing of
    4.5 hours too (a peak's height varies from day to day), a nugget of 7-25 % of the squared
    increments that, added, stated them 5-10 % wider (issue 28's slice). A household's
    sub-meters are 40-100 % nugget, where the white noise's ``3/4·c`` at mid-spacing is up to
    three times the bridge's."""
    white = _bridge(np.zeros_like(jump), sampled, jump)
    return np.maximum(_bridge(walk, sampled), white), white


def _optstream_auto(
    released, tree, history, n_bootstrap, seed, interpolation="planned"
) -> tuple[np.ndarray, str]:
    record = released.attrs.get("privacy", {})
    cfg = _auto_config(released, tree, record)
    meas = np.asarray(released.attrs["measurements"], dtype=np.float64)
    hist = None
    if released.attrs["plan_config"].get("history"):
        if history is None:
            raise ParameterError(
                f"The 'history' parameter of {_OWNER} is required: the release was planned with "
                "public history, which its plans and priors read. Pass the same history frame."
            )
        hist = np.asarray(history, dtype=np.float64)
    planning = released.attrs.get("planning")
    if isinstance(planning, PlanningRecord) and planning.matches(meas):
        measured, plans, priors = planning.measured, planning.plans, planning.priors
    else:  # read back from a file, or changed: recompute from the published measurements
        measured, plans, priors = _replay(meas, cfg, hist)
    x = np.asarray(released, dtype=np.float64)
    return _auto_errors(x, measured, plans, priors, cfg, tree, n_bootstrap, seed, interpolation)


def _pin_unmeasured(m, r: int) -> np.ndarray | None:
    """(N, r) True at a period's unmeasured readings (``missing="unmeasured"``, the public
    mask its measurement keeps), or None for complete readings."""
    if m.observed is None:
        return None
    pinned = ~np.asarray(m.observed, dtype=bool)[:, :r]
    return pinned if pinned.any() else None


def _pinned_inputs(pinned, v, noise, pv, interp):
    """The error model's inputs with unmeasured readings pinned, as Algorithm 4 pins them
    (:func:`dpstream.pipelines._period_steps.post_process_periods`): a measurement of 0 with a
    negligible variance (1e-9 of the smallest observed one) and no error, no prior weight. The
    aggregates above are then sums over the observed leaves, as released; the figure of an
    observed value carries the noise of its node's interpolation through its *observed*
    samples (``Measurement.noise``), the interpolation error as planned."""
    pin = 1e-9 * float(v[~pinned].min(initial=1.0))
    v = np.where(pinned, pin, v)
    noise = np.where(pinned, pin, noise)
    pv = None if pv is None else np.where(pinned, np.inf, pv)
    interp = None if interp is None else np.where(pinned, 0.0, interp)
    return v, noise, pv, interp


def _auto_errors(
    x, measured, plans, priors, cfg, tree, n_bootstrap, seed, interpolation
) -> tuple[np.ndarray, str]:
    """(T, N) stated errors of consecutive periods of released values ``x`` from their
    measurements, plans and priors (the release's, replayed, or a store's)."""
    blind = _blind_interpolation(measured, plans, cfg)
    rough = _rough_interpolation(measured, plans, cfg) if interpolation == "rough" else None
    n = x.shape[1]
    parent = tree.parent if tree is not None else np.full(n, -1)
    dense = tree is not None and len(tree.leaves) <= DENSE_LEAVES
    rho_large = None
    if tree is not None and not dense:
        all_leaves = np.array([tree.index(leaf) for leaf in tree.leaves])
        rho_large = _prior_correlation(measured, priors, all_leaves, plans)
    if dense:
        matrix = np.asarray(tree.matrix, dtype=np.float64)
        leaves = np.array([tree.index(leaf) for leaf in tree.leaves])
        rho_prior = _prior_correlation(measured, priors, leaves, plans)
    check = _residual_check(measured, plans, priors)
    prior_fit, cross = (None, None) if check is None else (check[:2], check[2])
    local = _local_roughness(measured, parent) if rough is None else None
    out = np.empty_like(x)
    rng = np.random.default_rng(seed)  # simulation only: publishes nothing private
    w = cfg.w
    boot = 0
    for i, (plan, prior) in enumerate(zip(plans, priors, strict=True)):
        lo = i * w
        r = min(w, x.shape[0] - lo)
        v, pv = _weights(plan, prior, r)
        if i in blind:  # planned blind: its interpolation error from the other periods
            v = v + blind[i]
        noise = np.asarray(measured[i].noise[:, :r], dtype=np.float64)
        interp = white = None
        if local is not None:  # the roughness by step of day: a ramp between two samples
            smp = np.asarray(measured[i].sampled, dtype=bool)[:, :r]
            walk, jump = local[i]
            between, white = _between_samples(walk[:, :r], jump[:, :r], smp)
            interp = np.maximum(v - noise, between)
        if rough is not None:  # the rough variogram's interpolation error (an upper figure)
            interp = np.maximum(v - noise, rough[i])
        pinned = _pin_unmeasured(measured[i], r)
        if pinned is not None:  # as post_process_periods: a known 0, no prior
            v, noise, pv, interp = _pinned_inputs(pinned, v, noise, pv, interp)
            white = None if white is None else np.where(pinned, 0.0, white)
        if dense:
            se = np.sqrt(
                _dense_period(
                    v,
                    noise,
                    pv,
                    matrix,
                    leaves,
                    rho_prior,
                    cross,
                    prior_fit,
                    interp,
                    pinned,
                    white,
                )  # fmt: skip
            )
        elif tree is None and pv is not None and cross is not None:
            # independent columns: x̂ = (c/v + f/τ²) / (1/v + 1/τ²) per value, with Cov(c, f)
            wc, wf = 1.0 / v, np.where(np.isfinite(pv), 1.0 / pv, 0.0)
            cov = np.where(np.isfinite(pv), cross[:, None], 0.0)
            scaled = wf**2 * np.where(np.isfinite(pv), _true_prior(pv, *prior_fit), 0.0)
            own = wc if interp is None else wc**2 * (noise + interp)  # the measurement's
            se = np.sqrt((own + scaled + 2.0 * wc * wf * cov) / (wc + wf) ** 2)
        elif tree is None and pv is None and interp is not None:  # the measurement alone
            se = np.sqrt(noise + interp)
        else:
            combined = v if pv is None else 1.0 / (1.0 / v + 1.0 / pv)
            var = tree_posterior_variance(combined, parent)
            if tree is not None:  # above DENSE_LEAVES leaves: the errors they share
                f = _shared_factor(v, noise, pv, tree, interp, rho_large, cross, prior_fit, rng)
                var = var * f[:, None]
            se = np.sqrt(var)
        period = x[lo : lo + r].T
        at_zero = period <= 0
        if pinned is not None:  # published empty: the model's 0 (aggregates sum the others)
            period = np.where(pinned, 0.0, period)
            at_zero = at_zero & ~pinned  # a pinned 0 is exact: no (O3) there
        if at_zero.any() and n_bootstrap > 0:  # non-negativity binds somewhere
            vb = v if interp is None else noise + interp
            true_pv = None if pv is None or prior_fit is None else _true_prior(pv, *prior_fit)
            # The linear figure (the full error model: errors shared between nodes, the
            # measurement's and the prior's) times what non-negativity does to the error under
            # the bootstrap's simpler model (its draws independent between nodes: alone it
            # understated a household's total 1.5x, issue 30 follow-up), at the steps where it
            # binds. Algorithm 4 separates by step (singleton features), so elsewhere the
            # released values are its linear estimate: a bootstrap around released values near
            # 0 would count draws crossing 0 that the release did not have there (a household's
            # sub-meters were understated 1.3-1.6x by it).
            cols = np.flatnonzero(at_zero.any(axis=0))  # the steps to bootstrap
            sub = [None if a is None else a[:, cols] for a in (period, vb, pv, true_pv)]
            clipped, free = _bootstrap(sub[0], sub[1], sub[2], tree, n_bootstrap, rng, sub[3])
            clip = np.where(free > 0, clipped / np.where(free > 0, free, 1.0), 1.0)
            if tree is None:  # independent columns: where the value itself is 0
                clip = np.where(at_zero[:, cols], clip, 1.0)
            se = se.copy()
            se[:, cols] = se[:, cols] * clip
            boot += 1
        if pinned is not None:  # no value published, no error stated
            se = np.where(pinned, np.nan, se)
        out[lo : lo + r] = se.T
    how = (
        "OptStream k=auto: the error of Algorithm 4's estimate with the plans' variances "
        "(noise; interpolation and prior errors shared between levels) "
        + (
            "dense per step, exact "
            if dense
            else "per column, exact "
            if tree is None
            else "by the tree passes scaled per node for the shared errors (Monte Carlo, "
            f"{SHARED_DRAWS} draws per period), exact in expectation "
        )
        + f"where non-negativity does not bind; parametric bootstrap ({n_bootstrap} draws) in "
        f"the {boot} of {len(plans)} period(s) holding a 0; interpolation error "
        + ("as planned." if rough is None else "of the rough variogram (an upper figure).")
    )
    return out, how


def store_std_errors(
    store, ordinals, released: pd.DataFrame, *, n_bootstrap: int = 200, seed: int | None = 0
) -> pd.DataFrame:
    """:func:`std_errors` of ``k="auto"`` periods read back from a :class:`dpstream.ReleaseStore`.

    Parameters
    ----------
    store : dpstream.ReleaseStore
        An open store of ``k="auto"`` releases.
    ordinals : sequence of int
        The store's ordinals of the consecutive w-periods of ``released``, in order.
    released : pandas.DataFrame
        Those periods' released values (rows: the periods' steps in order, columns: the store's
        nodes), as the store returned them.

    Returns
    -------
    pandas.DataFrame
        Aligned with ``released``. Each period's figures come from what the store keeps of it
        (its published measurement and plan) and the prior its planner had (rebuilt from the
        earlier stored measurements, :func:`dpstream.store._auto.plan_state`): the figures
        :func:`std_errors` states for a release, period by period. *Privacy*: post-processing
        of the stored (released) measurements, no budget.
    """
    from dpstream._ledger import calibrated
    from dpstream.pipelines._autoplan import _config
    from dpstream.store._auto import plan_state, unpack
    from postproc import Hierarchy

    c = store.config or {}
    if c.get("k") != "auto":
        raise ParameterError(
            f"The 'store' parameter of {_OWNER} holds int-k (k={c.get('k')!r}) periods: the "
            "store does not keep their measurements; standard errors of a store need k='auto'."
        )
    tree = None if c.get("hierarchy") is None else Hierarchy(children=c["hierarchy"])
    delta = c.get("delta")
    cfg = _config(
        epsilon=calibrated(c["epsilon"]), alpha=c["alpha"], w=c["w"],
        delta=None if delta is None else calibrated(delta), noise=c["noise"],
        target=c["target"], level_shares=c["level_shares"], hierarchy=tree,
        nodes=tuple(c["nodes"]), prior=c["prior"],
    )  # fmt: skip
    ordinals = [int(o) for o in ordinals]
    rows = {o: blob for o, _, blob in store._measured(max(ordinals) + 1, len(ordinals) + 1)}
    measured, plans, priors = [], [], []
    for i, o in enumerate(ordinals):
        if o not in rows:
            raise ParameterError(
                f"The 'ordinals' parameter of {_OWNER} names period {o}, which the store holds "
                "without its measurements."
            )
        m, plan = unpack(rows[o])
        r = min(cfg.w, len(released) - i * cfg.w)
        prior = plan_state(store, o, cfg).plan(r)[1] if cfg.use_prior else None
        measured.append(m)
        plans.append(plan)
        priors.append(prior)
    frame = released[list(c["nodes"])]
    x = np.asarray(frame, dtype=np.float64)
    values, how = _auto_errors(x, measured, plans, priors, cfg, tree, n_bootstrap, seed, "planned")
    out = pd.DataFrame(values, index=frame.index, columns=frame.columns)
    out.attrs = {"method": "From the store, period by period. " + how}
    return out


def std_errors(
    released: pd.DataFrame | pd.Series,
    *,
    hierarchy: object = None,
    history: object = None,
    n_bootstrap: int = 200,
    seed: int | None = 0,
    interpolation: str = "planned",
) -> pd.DataFrame | pd.Series:
    """The standard error (root-mean-square error) of every value of a release.

    Parameters
    ----------
    released : pandas.DataFrame or Series
        A release as :func:`dpstream.release_optstream` returned it (``k="auto"``, or an int
        ``k`` up to 64 leaves), with its ``attrs`` (the privacy record, the published
        measurements and plans or per-period estimates).
    hierarchy : mapping parent -> children, optional
        The hierarchy the release was made with (``attrs["hierarchy"]`` if absent).
    history : pandas.DataFrame, optional
        The public history the release was planned with, if any.
    n_bootstrap : int, default 200
        Draws of the parametric bootstrap of periods where non-negativity binds (0: the linear
        figure everywhere).
    seed : int, default 0
        Seed of the bootstrap's simulation (it releases nothing; a fixed seed makes the stated
        errors reproducible).
    interpolation : {"planned", "rough"}, default "planned"
        The interpolation error between samples: ``"planned"``, the planner's own prediction
        and at least the larger of the Brownian bridge of the roughness by step of day and the
        white noise of a nugget (see the module notes; calibrated for aggregated loads such as
        the regional hierarchy, single households 0.92-1.68 per node); ``"rough"``, the
        largest a stationary load with the measured sill can have (``γ(h) = sill`` from lag
        1): it overstates aggregated loads about 3x (``docs/results/std_errors_domain.md``).

    Returns
    -------
    pandas.DataFrame or Series
        Same index and columns as ``released``; ``attrs["method"]`` says how the figures were
        computed and ``attrs["note"]`` what they do not include. Empty (NaN) where the
        release is empty (an unmeasured reading, ``missing="unmeasured"``).

    Raises
    ------
    ParameterError
        A release without the public information its errors need (a record, the measurements
        of ``k="auto"`` or the estimates of an int ``k``), an int-``k`` release above 64 leaves,
        with ``weights="paper"`` or unmeasured readings, or a hierarchy that does not match.

    Notes
    -----
    See the module docstring: [FV19] Alg. 4 (§5.2) as generalised least squares on a tree, its
    inverse information matrix by an upward and a downward pass; a parametric bootstrap where
    non-negativity (O3) binds. *Privacy*: post-processing of the release ([FV19] Theorem 3):
    only ``attrs`` and the released values are read.

    *Domain*: the stated figure is calibrated (empirical / stated RMSE per node 0.81-1.05 with
    ``k="auto"``, mostly conservative since the roughness by step of day; within 0.8-1.25 with
    an int k) for aggregated loads such as the regional hierarchy, at ε = 1 and 0.1. On single
    households (sub-meters that switch within a sample spacing) it is 0.92-1.68 per node since
    the nugget (1.4-2.3x short before): the spikiest sub-meters (laundry, kitchen) are still
    understated. It does not include biases the released values cannot show. See "What the
    stated figure includes, and where it does not hold" in ``docs/results/std_errors_*.md``.

    Examples
    --------
    >>> import pandas as pd, dpstream
    >>> idx = pd.date_range("2016-01-01", periods=96, freq="30min")
    >>> frame = pd.DataFrame({"a": 100.0, "b": 50.0}, index=idx)
    >>> tree = {"total": ["a", "b"]}
    >>> out = dpstream.release_optstream(frame, epsilon=1.0, alpha=10, hierarchy=tree, seed=1)
    >>> se = dpstream.std_errors(out, hierarchy=tree)
    >>> se.shape == out.shape and bool((se > 0).all().all())
    True
    """
    if not isinstance(released, pd.DataFrame | pd.Series):
        raise ParameterError(
            f"The 'released' parameter of {_OWNER} must be a pandas DataFrame or Series "
            f"returned by a dpstream release. Got {type(released).__name__} instead."
        )
    if interpolation not in ("planned", "rough"):
        raise ParameterError(
            f"The 'interpolation' parameter of {_OWNER} must be one of ('planned', 'rough'). "
            f"Got {interpolation!r} instead."
        )
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 0:
        raise ParameterError(
            f"The 'n_bootstrap' parameter of {_OWNER} must be an int in [0, inf). "
            f"Got {n_bootstrap!r} instead."
        )
    series = isinstance(released, pd.Series)
    frame = released.to_frame() if series else released
    if series:
        frame.attrs = dict(released.attrs)
    record = frame.attrs.get("privacy")
    if not isinstance(record, dict):
        raise ParameterError(
            f"The 'released' parameter of {_OWNER} carries no privacy record "
            "(attrs['privacy']): pass the frame a dpstream release returned (or read it with "
            "its sidecar)."
        )
    mechanism = record.get("mechanism")
    params = record.get("parameters") or {}
    if mechanism == "optstream" and params.get("k") != "auto" and "estimates" in frame.attrs:
        if params.get("missing") == "unmeasured" or params.get("weights") == "paper":
            raise ParameterError(
                f"The 'released' parameter of {_OWNER} is an int-k OptStream release with "
                f"weights={params.get('weights')!r}, missing={params.get('missing', 'error')!r}: "
                "standard errors are computed for the 'variance' and 'noise' weights of "
                "complete readings."
            )
        tree = _hierarchy(frame, hierarchy)
        from ._std_errors_fixed import optstream_fixed

        values, how = optstream_fixed(frame, tree, n_bootstrap, seed)
        note = (
            "Root-mean-square error: noise carried exactly through Algorithm 4, and the "
            "interpolation error between samples from each node's variogram of the published "
            "samples; a parametric bootstrap where non-negativity binds."
        )
    elif mechanism == "optstream":
        if params.get("k") != "auto" or "measurements" not in frame.attrs:
            raise ParameterError(
                f"The 'released' parameter of {_OWNER} is an OptStream release with k = "
                f"{params.get('k')!r}: its sample positions and feature queries are not "
                "published, so the interpolation error of its values cannot be computed from "
                "the release. Release with k='auto' (the default), which publishes them."
            )
        tree = _hierarchy(frame, hierarchy)
        values, how = _optstream_auto(frame, tree, history, n_bootstrap, seed, interpolation)
        note = (
            "Root-mean-square error: noise, interpolation between samples and the prior's "
            "shrinkage as the planner predicts them."
        )
    else:
        raise ParameterError(
            f"The 'released' parameter of {_OWNER} is a {mechanism!r} release; standard errors "
            "are computed for OptStream (k='auto') releases here, and for range queries "
            " of tops/pak/bt by 'dpstream query'."
        )
    out = pd.DataFrame(values, index=frame.index, columns=frame.columns)
    out.attrs = {"method": how, "note": note}
    if series:
        s = out.iloc[:, 0].rename(released.name)
        s.attrs = out.attrs
        return s
    return out
