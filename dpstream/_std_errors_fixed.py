"""Standard errors of int-k OptStream releases (``dpstream.std_errors``, issue 30).

The release publishes per period what its ε already covers (``attrs["estimates"]``,
:func:`dpstream.pipelines._period.published_estimates`); the error of Algorithm 4's linear
estimate under the model of :func:`_fixed_covariance` is ``diag(K Σ Kᵀ)``, exact
(:func:`_gls_operator`), with a parametric bootstrap where non-negativity binds. See the notes
of :mod:`dpstream._std_errors`.

The bootstrap (:func:`_bootstrap`) stands a truth in for each period and redraws the release
around it. Two choices decide whether it states what the release does where the noise dwarfs
the loads (ε = 0.1: noise sd 70,000 kW at a sample against loads of 4,000-9,000 kW, 50-80 %
of the released values 0):

* the stand-in truth: not the released period (mostly 0, with spikes around which the draws
  are never clipped) but each leaf's linear estimate shrunk to the truth's spread around its
  mean (:func:`_bootstrap_bases`), which the release's own unbiased linear estimate and its
  stated variance give;
* the noise: Laplace at the samples, interpolated, as the release draws it
  (:func:`_laplace_noise`); the interpolation error Gaussian with the variogram's covariance.

Regional hierarchy, L1 sampler, ε = 0.1, empirical / stated with the released period and
Gaussian draws, then with both choices: 28 days, 4 seeds, 0.75-0.95 -> 0.83-0.99 (commercial
0.754 -> 0.833); 14 days, 3 seeds, 0.84-0.96 -> 0.89-0.98; equally spaced samples 0.85-0.97
-> 0.93-0.98; ε = 1 unchanged (0.98-1.08). With the true loads as the stand-in (an
experiment) 0.94-1.0: the base was most of the L1 commercial node's 0.749
(``docs/results/std_errors_fixed_k.md``).
"""

from __future__ import annotations

import numpy as np

from mechanisms import ParameterError

__all__ = ["optstream_fixed"]

_OWNER = "std_errors"


def _level_variograms(published, levels, w: int) -> np.ndarray | None:
    """(N, w) variogram of every node from the published samples (noise taken out).

    A node's singletons at its level's sampled steps are its value plus noise of known
    variance; pairs of sampled steps of every full period give the sums of
    :func:`planner.period_roughness`, and :func:`_pooled_variogram` one model per node.
    """
    from planner import period_roughness

    n = published[0]["estimates"].shape[0]
    gamma = np.full((n, w), np.nan)
    for li, nodes in enumerate(levels):
        total = None
        for period in published:
            masks = np.asarray(period["samples"], dtype=bool)
            if masks.shape[1] != w:
                continue
            vals = np.asarray(period["estimates"], dtype=np.float64)[nodes, :w]
            noise = np.asarray(period["noise"], dtype=np.float64)[nodes, :w]
            sampled = np.broadcast_to(masks[li], vals.shape)
            stats = period_roughness(vals, noise, sampled)
            total = stats if total is None else total + stats
        g = None if total is None else _pooled_variogram(total)
        if g is None:
            return None
        gamma[nodes] = g
    return gamma


def _pooled_variogram(stats) -> np.ndarray | None:
    """γ(h) = sill·min(2h/w, 1) (N, w), the sill pooled over every measured pair at lags >= w/4.

    The planner's random-walk model (:func:`planner.variogram`, few lags) for every sampler.
    Each pair at lag h gives ``(ỹ_j − ỹ_i)² − s_i² − s_j²``, unbiased for 2γ(h); the sill is
    their sum over the long lags divided by the number of pairs (one ratio, clipped at 0 once).
    Per-lag estimates are not used: at ε = 0.1 each lag's few pairs carry noise variances
    10²-10³ times the variogram, and clipping each at 0 then taking the running maximum over
    the lags (the empirical branch of :func:`planner.variogram`, which the L1 sampler's many
    lags select) kept the largest noise excursion: an interpolation error up to 33x the realised
    one, the L1 figures' overstatement (``docs/results/std_errors_fixed_k.md``).
    """
    counts = np.asarray(stats.counts, dtype=np.float64)
    n, w = stats.squares.shape
    counts = np.broadcast_to(counts, (n, w))
    lags = np.arange(w)
    long = (lags >= w / 4) & (counts > 0)
    use = np.where(long.any(axis=1)[:, None], long, counts > 0)  # no long lag: every lag
    pairs = np.where(use, counts, 0.0).sum(axis=1)
    if not (pairs > 0).all():
        return None
    diff = np.where(use, stats.squares - stats.noise, 0.0).sum(axis=1)
    sill = np.maximum(0.5 * diff / pairs, 0.0)
    return sill[:, None] * np.minimum(2.0 * lags / w, 1.0)[None, :]


def _fixed_covariance(period, gamma, rho, tree, levels, n) -> tuple[np.ndarray, np.ndarray]:
    """Observation design H_f (P, r) and the error covariance (N·P, N·P) of one period.

    Singletons of node a: ``x̃_a = M_a(x_a + n_a)``, an error ``M_a n_a`` (Laplace at the
    samples, independent between nodes) minus the interpolation error ``(I − M_a) x_a``; with
    ``x_a`` the sum of its leaves, ``Cov = −Σ_{l,m} (I − M_a) Γ_lm (I − M_b)ᵀ`` over the leaves
    under a and b (Γ_lm(s, t) = γ_lm(|s − t|), the cross-variogram ``ρ·√(γ_l γ_m)``, ρ from the
    root's own variogram; the constant of a covariance cancels because the rows of ``M`` sum
    to 1: the kriging identity). Feature parts: exact sums plus independent Laplace noise.
    """
    from mechanisms.optstream._sampling import interpolation_matrix

    fs = period["features"]
    noise = np.asarray(period["noise"], dtype=np.float64)
    masks = np.asarray(period["samples"], dtype=bool)
    r = masks.shape[1]
    p = noise.shape[1]
    hf = np.zeros((p, r))
    hf[np.arange(r), np.arange(r)] = 1.0
    row = r
    for feature in fs.partitions[1:]:
        for part in feature:
            hf[row, list(part)] = 1.0
            row += 1
    level_of = np.empty(n, dtype=np.int64)
    for li, nodes in enumerate(levels):
        level_of[nodes] = li
    mats = [interpolation_matrix(m[None])[0] for m in masks]  # (r, r) per level
    cov = np.zeros((n * p, n * p))
    for a in range(n):  # noise: independent between nodes
        li = level_of[a]
        at = np.flatnonzero(masks[li])
        m = mats[li]
        cov[a * p : a * p + r, a * p : a * p + r] = (m[:, at] * noise[a, at]) @ m[:, at].T
        idx = np.arange(a * p + r, (a + 1) * p)
        cov[idx, idx] = noise[a, r:]
    if gamma is not None:
        lag = np.abs(np.arange(r)[:, None] - np.arange(r)[None, :])
        if tree is None:
            under = np.eye(n)
            leaf_rows = np.arange(n)
        else:
            under = np.asarray(tree.matrix, dtype=np.float64)  # (N, L)
            leaf_rows = np.array([tree.index(leaf) for leaf in tree.leaves])
        gl = gamma[leaf_rows][:, lag]  # (L, r, r)
        ops = [np.eye(r) - mats[level_of[a]] for a in range(n)]
        for a in range(n):
            for b in range(a, n):
                la = np.flatnonzero(under[a])
                lb = np.flatnonzero(under[b])
                g = np.zeros((r, r))
                for i in la:
                    for j in lb:
                        if i == j:
                            g += gl[i]
                        elif tree is not None and rho > 0:
                            g += rho * np.sqrt(gl[i] * gl[j])
                block = -ops[a] @ g @ ops[b].T
                cov[a * p : a * p + r, b * p : b * p + r] += block
                if b != a:
                    cov[b * p : b * p + r, a * p : a * p + r] += block.T
    return hf, cov


def _gls_operator(under: np.ndarray, hf: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """K (N·r, N·P): Algorithm 4's linear estimate of every node from the observations.

    Observations of node a: ``H_f A_a x`` (singletons and feature parts of the sum of its
    leaves), weights ``1/v``; the leaves' estimate ``G Hᵀ W c̃`` with ``H = A ⊗ H_f`` and
    ``G = (Hᵀ W H)⁻¹`` ([FV19] Alg. 4 line 2 without (O3), §5.2), the nodes' ``(A ⊗ I) G Hᵀ W``.
    """
    r = hf.shape[1]
    h = np.kron(under, hf)
    hw = h.T / np.asarray(variances, dtype=np.float64).reshape(-1)
    return np.kron(under, np.eye(r)) @ np.linalg.solve(hw @ h, hw)


def _root_correlation(gamma, tree) -> float:
    """One correlation of the leaves' variograms from the root's own (the cross-variogram
    ``ρ·√(γ_l γ_m)``): ``γ_root = Σ γ_l + ρ Σ_{l≠m} √(γ_l γ_m)``, pooled over lags."""
    if tree is None or gamma is None:
        return 0.0
    leaves = np.array([tree.index(leaf) for leaf in tree.leaves])
    gl = gamma[leaves]
    s1 = gl.sum(axis=0)
    s2 = np.sqrt(gl).sum(axis=0) ** 2 - s1
    den = s2.sum()
    return float(np.clip((gamma[0] - s1).sum() / den, 0.0, 1.0)) if den > 0 else 0.0


#: Largest number of leaf values (leaves x steps) of one period for the exact int-k path.
FIXED_VARIABLES = 64 * 48


#: The bootstrap's stand-in truth: "shrunk" (:func:`_bootstrap_bases`) or "released".
BOOTSTRAP_BASE = "shrunk"


def _bootstrap_bases(linear, variances, under) -> list[np.ndarray]:
    """Per period (N, r), the stand-in truth of the parametric bootstrap.

    The released period is a poor one where the noise dwarfs the values (ε = 0.1: noise sd
    70,000 kW at a sample against loads of 4,000-9,000): it is mostly 0 with spikes, and
    around a spike the bootstrap's draws are never clipped, so it states the full noise where
    the real release, around a small truth, is clipped half the time. Instead each leaf's
    linear estimate (Algorithm 4 without (O3): unbiased, its error variance ``σ²`` the stated
    linear figure) is shrunk towards the leaf's mean over every period, keeping the spread the
    truth has (constrained Bayes, Louis 1984: ``m + √(1 − σ̄²/s²)·(x_lin − m)``, ``s²`` the
    estimates' spread around ``m``), clipped at 0; aggregates are the sums of their leaves.
    """
    if BOOTSTRAP_BASE == "released":
        return [None] * len(linear)
    leaf_rows = [int(np.flatnonzero((under[:, j] == 1) & (under.sum(axis=1) == 1))[0])
                 for j in range(under.shape[1])]  # fmt: skip
    lin = np.concatenate([x[leaf_rows] for x in linear], axis=1)  # (L, T)
    var = np.concatenate([v[leaf_rows] for v in variances], axis=1)
    m = lin.mean(axis=1, keepdims=True)
    s2 = ((lin - m) ** 2).mean(axis=1, keepdims=True)
    sig = var.mean(axis=1, keepdims=True)
    f = np.sqrt(np.clip(1.0 - sig / np.where(s2 > 0, s2, 1.0), 0.0, 1.0))
    out = []
    for x in linear:
        leaves = np.maximum(m + f * (x[leaf_rows] - m), 0.0)
        out.append(under @ leaves)
    return out


def _gaussian(cov: np.ndarray, n_draws: int, rng) -> np.ndarray:
    """(n_draws, D) Gaussian draws of covariance ``cov`` (clipped to PSD if need be)."""
    jitter = 1e-9 * max(float(np.trace(cov)), 1e-300) / cov.shape[0]
    try:
        root = np.linalg.cholesky(cov + jitter * np.eye(cov.shape[0]))
    except np.linalg.LinAlgError:  # an empirical variogram need not be valid: clip
        ev, evec = np.linalg.eigh(cov)
        root = evec * np.sqrt(np.maximum(ev, 0.0))
    return (root @ rng.standard_normal((cov.shape[0], n_draws))).T


#: The bootstrap's noise draw: "laplace" as the release draws it, "gaussian" its covariance.
BOOTSTRAP_NOISE = "laplace"


def _laplace_noise(period, levels, n: int, n_draws: int, rng) -> np.ndarray:
    """(n_draws, N·P) the measurement noise as the release draws it: Laplace of the published
    variance at each level's samples, interpolated (``M_a``), and Laplace on every feature
    part ([FV19] Perturb; :func:`_fixed_covariance`'s noise part, the same covariance)."""
    from mechanisms.optstream._sampling import interpolation_matrix

    noise = np.asarray(period["noise"], dtype=np.float64)
    masks = np.asarray(period["samples"], dtype=bool)
    r = masks.shape[1]
    p = noise.shape[1]
    out = np.zeros((n_draws, n, p))
    for li, nodes in enumerate(levels):
        at = np.flatnonzero(masks[li])
        m = interpolation_matrix(masks[li][None])[0][:, at]  # (r, samples)
        for a in nodes:
            lap = rng.laplace(0.0, np.sqrt(noise[a, at] / 2.0), (n_draws, at.size))
            out[:, a, :r] = lap @ m.T
            out[:, a, r:] = rng.laplace(0.0, np.sqrt(noise[a, r:] / 2.0), (n_draws, p - r))
    return out.reshape(n_draws, -1)


def _bootstrap(
    base, period, cov, cov_noise, hf, wts, fs, tree, levels, columns, n_draws, rng, released=None
) -> np.ndarray:
    """(N, r) stated RMSE of a period where non-negativity binds: measurements drawn around
    ``base`` (the noise as the release draws it, :func:`_laplace_noise`; the interpolation
    error Gaussian with the model's covariance), Algorithm 4 with (O3) solved again, the
    root-mean-square difference from ``base``."""
    from postproc import Hierarchy, project_consistent

    if base is None:  # BOOTSTRAP_BASE = "released"
        base = released
    n = base.shape[0]
    if BOOTSTRAP_NOISE == "laplace":
        draws = _laplace_noise(period, levels, n, n_draws, rng)
        draws = draws + _gaussian(cov - cov_noise, n_draws, rng)
    else:
        draws = _gaussian(cov, n_draws, rng)
    c0 = np.stack([hf @ base[a] for a in range(n)])  # (N, P)
    sims = c0[None] + draws.reshape(n_draws, n, -1)
    vs = np.broadcast_to(wts.reshape(n, -1), sims.shape)
    if tree is not None:
        sol = project_consistent(sims, hierarchy=tree, features=fs, variances=vs).values
    else:
        sol = np.stack(
            [
                project_consistent(
                    sims[:, j : j + 1],
                    hierarchy=Hierarchy.single(str(name)),
                    features=fs,
                    variances=vs[:, j : j + 1],
                ).values[:, 0]
                for j, name in enumerate(columns)
            ],
            axis=1,
        )
    return np.sqrt(np.mean((np.maximum(sol, 0.0) - base[None]) ** 2, axis=0))


def optstream_fixed(frame, tree, n_draws, seed) -> tuple[np.ndarray, str]:
    """Int-k OptStream: the exact error of Algorithm 4's linear estimate (module notes), a
    parametric bootstrap in the periods where non-negativity binds."""

    published = frame.attrs["estimates"]
    x = np.asarray(frame, dtype=np.float64)
    n = x.shape[1]
    w = int(frame.attrs["privacy"].get("w") or published[0]["samples"].shape[1])
    if tree is None:
        levels = [np.arange(n)]
        under = np.eye(n)
    else:
        levels = [np.array([tree.index(c) for c in lv]) for lv in tree.levels]
        under = np.asarray(tree.matrix, dtype=np.float64)
    n_leaves = under.shape[1]
    if n_leaves * w > FIXED_VARIABLES:
        raise ParameterError(
            f"The 'released' parameter of {_OWNER} is an int-k OptStream release of "
            f"{n_leaves} leaves: its exact errors need a ({n_leaves}·w)² matrix per period; "
            f"int-k standard errors are computed up to {FIXED_VARIABLES // w} leaves (w = {w})."
        )
    gamma = _level_variograms(published, levels, w)
    rho = _root_correlation(gamma, tree)
    rng = np.random.default_rng(seed)  # simulation only: publishes nothing private
    out = np.empty_like(x)
    parts = []
    for period in published:  # the linear estimate's operator, error covariance and values
        wts = np.asarray(period["variances"], dtype=np.float64).reshape(-1)
        r = np.asarray(period["samples"]).shape[1]
        hf, cov = _fixed_covariance(period, None if gamma is None else gamma[:, :r], rho,
                                    tree, levels, n)  # fmt: skip
        k = _gls_operator(under, hf, wts)
        var = np.maximum(((k @ cov) * k).sum(axis=1).reshape(n, r), 0.0)
        linear = (k @ np.asarray(period["estimates"], dtype=np.float64).reshape(-1)).reshape(n, r)
        parts.append((hf, cov, k, wts, var, linear))
    base_of = _bootstrap_bases([p[5] for p in parts], [p[4] for p in parts], under)
    lo = boot = 0
    for i, period in enumerate(published):
        hf, cov, k, wts, var, _ = parts[i]
        r = var.shape[1]
        se = np.sqrt(var)
        released = x[lo : lo + r].T  # (N, r)
        if (released <= 0).any() and n_draws > 0:  # non-negativity binds: parametric bootstrap
            _, cov_noise = _fixed_covariance(period, None, rho, tree, levels, n)
            se = _bootstrap(
                base_of[i], period, cov, cov_noise, hf, wts, period["features"], tree, levels,
                frame.columns, n_draws, rng, released,
            )  # fmt: skip
            boot += 1
        out[lo : lo + r] = se.T
        lo += r
    how = (
        f"OptStream k={frame.attrs['privacy']['parameters'].get('k')}: the error of "
        "Algorithm 4's linear estimate (features included) under the published noise and the "
        f"interpolation error of the samples' variogram (leaves correlated, ρ = {rho:.2f}), "
        f"exact where non-negativity does not bind; parametric bootstrap ({n_draws} draws, "
        "Laplace noise around each leaf's linear estimate shrunk to the truth's spread) in "
        f"the {boot} of {len(published)} period(s) holding a 0."
    )
    return out, how
