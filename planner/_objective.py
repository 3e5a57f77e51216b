"""The error bound α of [PAK19] Eq. 16 as an objective over Mechanism 1's local parameters.

Modelling choices (where the paper is ambiguous; every one is also in :func:`pak_error`)
---------------------------------------------------------------------------------------
1. *Threshold budget.* The smoothing constants (a, b) of the threshold are those of the
   mechanism, :func:`mechanisms.smoothing_parameters` evaluated at ε₁ = (ε₁/ε)·ε (the share of
   ε spent on τ, Mechanism 1 step 1), with δ. The release uses the very same function, so the
   prediction and the release cannot drift apart.
2. *κ* is Eq. 11 with β_lt (:func:`mechanisms.pak_kappa`); κ > 0 is required.
3. *τ in Eq. 16* is bounded by τ_max of Eq. 13 (:func:`mechanisms.pak_tau_max`), which holds
   with probability ≥ 1 − β_rt given x̂_λp; the planned threshold is r·τ (Eq. 15).
4. *First summand.* The error of ĉ(σ, n) is the sum of the Laplace release of c(σ, m) (scale
   rτ/ε₂, Mechanism 1 step 2, ε₂ = ε − ε₁) and of the ⌈log₂(n − m)⌉-ish BT nodes on the suffix,
   each of scale rτ·log₂(n − m)/ε with the *whole* ε (steps 3–6: the suffix is disjoint from
   the prefix, parallel composition). We bound their sum with one concentration inequality
   for sums of independent Laplace variables ([CSS11] Cor. 2.9): with
   ν = rτ·√(log₂(n − m)³/ε² + 1/ε₂²), the error exceeds ν√(8 ln(1/β_Lap)) with probability
   ≤ β_Lap (provided ν ≥ b_max√(ln 1/β_Lap); ν is raised to that if needed). Without the
   prefix term this is exactly Eq. 16's first summand; with it ε₂ has a price, which is what
   keeps the optimal ε₁/ε below 1 (Tables I–II report 0.8–0.9).
5. *Second summand* as Eq. 16: (x̂_λp/(−ln p))·(√(p^r n) + √(ln 1/β_out))², with n (not
   n − m): the prefix values are clipped at rτ too for the release of c(σ, m).
6. *Constraint of Eq. 5* g(λ, p, m) ≤ β_qt is eliminated: for given β_qt and p the largest
   admissible count k* = λpm solves I_{1−p}(m − k, k + 1) = β_qt (``special.bdtrik``), so λ is
   a function of (β_qt, p), not a free variable (a free λ would make the problem a
   constrained one with the constraint always active at the optimum).
7. *Data terms.* x̂_λp and SS_b(x̂_λp) come from the sorted prefix. For the solver, the rank
   is made continuous (k real): x̂ and SS are interpolated linearly between the ranks
   m + 1 − ⌊k⌋ and m − ⌊k⌋ (exact at integer k). The plan is then evaluated *exactly* at the
   integer rank the release uses (:func:`mechanisms.quantile_rank`) with the mechanism's
   :func:`mechanisms.smooth_sensitivity_quantile`.
9. *Counter* (``counter=``, issue 14). With ``counter=None`` the suffix term is the paper's
   tree bound L³/ε² above. With a counter name (:data:`mechanisms.COUNTERS`, or ``"auto"``),
   L³/ε² is replaced by V/(2τ²) with V the counter's *exact* variance at step n − m
   (:func:`mechanisms.counter_variance` at bound τ), since a sum of independent Laplace
   variables of scales bᵢ has variance 2Σbᵢ² (so ν² = Σbᵢ² = V/2 for the trees and their
   linear estimates, whose weights are absorbed in the scales). For the smooth binary
   mechanism the noise is Gaussian of variance V, whose tails are lighter than those of the
   Laplace sum of the same ν (alone, P(|Z| > ν√(8 ln 1/β)) ≤ 2β² ≤ β for β ≤ ½); we use the
   same bound for its sum with the Laplace prefix term (a modelling choice, not a theorem).
   The plan and its predicted improvement factor then follow the counter; the baseline
   stays the paper's BT (Eq. 3).
8. *Baseline* (Eq. 3 with a concrete constant): α_BT = (1/ε)·B·√(8 ln(1/β))·(log₂ n)^{1.5},
   i.e. the first summand of Eq. 16 with τ = B, r = 1, m = 0 and β_Lap = β.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from mechanisms import (
    pak_kappa,
    pak_tau_max,
    quantile_rank,
    smooth_sensitivity_quantile,
    smoothing_parameters,
)
from mechanisms.core._renamed import renamed_attribute
from mechanisms.core._validation import check_fraction, check_integer, check_positive

from ._time_lag import max_quantile_count, quantile_count

__all__ = ["BETA_KEYS", "ErrorTerms", "PakObjective", "bt_error"]

#: The five failure probabilities of [PAK19] footnote 8, in table order.
BETA_KEYS = ("qt", "lt", "lap", "out", "rt")
_REF = BETA_KEYS.index("lap")  # the reference logit (fixed at 0) of the softmax
_FREE = tuple(i for i in range(5) if i != _REF)


def _upper_quantile(beta: float, noise: str) -> float:
    """G_ns⁻¹(1 − β) in closed form (as :func:`mechanisms.noise_quantile`, whose scipy.stats
    ``ppf`` cost most of the solver's time): Laplace(1) −ln(2β) for β ≤ ½, else ln(2(1 − β));
    N(0, 1) ``ndtri``. A test checks equality."""
    if noise == "laplace":
        return -math.log(2.0 * beta) if beta <= 0.5 else math.log(2.0 * (1.0 - beta))
    from scipy.special import ndtri

    return float(ndtri(1.0 - beta))


def bt_error(*, n: int, bound: float, epsilon: float, beta: float) -> float:
    """BT error of [PAK19] Eq. 3 with constant: (B/ε)·√(8 ln(1/β))·(log₂ n)^{1.5}."""
    owner = "bt_error"
    n = check_integer(n, "n", owner, minimum=2, maximum=1 << 52)
    bound = check_positive(bound, "bound", owner)
    epsilon = check_positive(epsilon, "epsilon", owner)
    beta = check_fraction(beta, "beta", owner)
    return bound / epsilon * math.sqrt(8.0 * math.log(1.0 / beta)) * math.log2(n) ** 1.5


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorTerms:
    """Eq. 16 and its ingredients at one setting of the local parameters."""

    r: float
    """Multiplier r ≥ 1 of the threshold (Eq. 15)."""
    lam: float
    """λ ∈ (0, 1]: the quantile estimated is the λp-quantile."""
    p: float
    """Tail probability p ≤ p_max."""
    eps1_share: float
    """ε₁/ε, the share of ε spent on the threshold."""
    beta_shares: dict
    """β_x/β for x in qt, lt, lap, out, rt (they sum to 1)."""
    count: float
    """λpm, the number of prefix values at or above x̂_λp (real in the relaxation)."""
    x_hat: float
    """x̂_λp, the empirical λp-quantile of the prefix."""
    smooth_sensitivity: float
    """SS_b(x̂_λp)."""
    a: float
    """Noise-scale constant a of the threshold (from ε₁, δ)."""
    b: float
    """Smoothing constant b of the threshold (from ε₁, δ)."""
    kappa: float
    """κ of Eq. 11 (inf when infeasible)."""
    tau_max: float
    """τ_max of Eq. 13."""
    laplace_error_bound: float
    """First summand: the Laplace/BT error at step n."""
    outlier_error_bound: float
    """Second summand: the outlier error."""
    error_bound: float
    """α of Eq. 16 = laplace_error_bound + outlier_error_bound (inf when infeasible)."""
    g: float
    """g(λ, p, m) of Eq. 5 (exact binomial CDF at ⌊λpm⌋)."""

    # old names (issue 12: α is the (w, α) unit's word), warn and point to the new ones
    alpha = renamed_attribute("alpha", "error_bound", "ErrorTerms")
    alpha_lap = renamed_attribute("alpha_lap", "laplace_error_bound", "ErrorTerms")
    alpha_out = renamed_attribute("alpha_out", "outlier_error_bound", "ErrorTerms")


class _Profiles:
    """L_k(P) = max_{i ≤ P ≤ i+k+1} (y_{i+k+1} − y_i) for every rank P the solver can visit.

    SS_b at rank P is max_k e^{−bk} L_k(P) (the definition of [PAK19] §IV-C rewritten as in
    :func:`mechanisms.smooth_sensitivity_quantile`). The table covers the ranks
    [m + 1 − ⌈p_max·m⌉, m] and k ≤ K; each column k is a sliding-window maximum of the gaps
    y_{i+k+1} − y_i (``maximum_filter1d``, O(m) per k). Pairs beyond K contribute at most
    e^{−b(K+1)}·(upper − lower); where that could matter, :meth:`ss` falls back to the
    mechanism's exact function. A test checks equality with it.
    """

    def __init__(self, padded: np.ndarray, *, p_max: float, b_min: float) -> None:
        self.y = y = padded
        self.m = m = padded.size - 2
        self.span = float(padded[-1] - padded[0])
        self.lo = lo = max(1, m + 1 - math.ceil(p_max * m) - 1)
        rows = m + 1 - lo
        kmax = min(m, rows + math.ceil(12.0 / b_min))
        kmax = max(1, min(kmax, (6 << 20) // rows))
        self.kmax = kmax
        table = np.empty((rows, kmax + 1))
        for k in range(kmax + 1):
            d = k + 1
            i = np.arange(lo - d, m + 1)
            ok = (i >= 0) & (i + d <= m + 1)
            gaps = np.where(ok, y[np.clip(i + d, 0, m + 1)] - y[np.clip(i, 0, m + 1)], -np.inf)
            # out[q] = max(gaps[q .. q + d]): the window i ∈ [P − d, P] of rank P = lo + q
            window = ndimage.maximum_filter1d(gaps, size=d + 1, origin=-((d + 1) // 2))
            table[:, k] = np.maximum(window[:rows], 0.0)
        self.table = table
        self.ks = np.arange(kmax + 1, dtype=np.float64)

    def ss(self, rank: int, b: float) -> tuple[float, float]:
        """(SS_b at ``rank``, dSS/db)."""
        if rank >= self.lo:
            vals = np.exp(-b * self.ks) * self.table[rank - self.lo]
            i = int(np.argmax(vals))
            best = float(vals[i])
            if self.kmax >= self.m or math.exp(-b * (self.kmax + 1)) * self.span <= best:
                return best, -float(self.ks[i]) * best
        xs = self.y[1:-1]  # exact fallback (slow path)
        lo_, hi_ = float(self.y[0]), float(self.y[-1])
        best = smooth_sensitivity_quantile(xs, rank, b, lo_, hi_)
        h = 1e-6 * b
        up = smooth_sensitivity_quantile(xs, rank, b + h, lo_, hi_)
        down = smooth_sensitivity_quantile(xs, rank, b - h, lo_, hi_)
        return best, (up - down) / (2 * h)


def _fd(func, x: float, rel: float = 1e-6) -> float:
    """Central finite difference of a smooth scalar function (for library functions only)."""
    h = rel * max(abs(x), 1e-12)
    return (func(x + h) - func(x - h)) / (2.0 * h)


class PakObjective:
    """α of [PAK19] Eq. 16 for one prefix and the public facts; see the module notes.

    Parameters
    ----------
    sorted_prefix
        The first m values, sorted ascending, inside [0, bound] (checked by the caller).
    n, bound, epsilon, delta, beta, p_max, noise
        The public facts: stream length n > m, bound B, ε, δ, β, p_max and the threshold's
        noise distribution.

    Notes
    -----
    The solver's vector z has 7 entries: r, ln p, ε₁/ε and four logits (ℓ_qt, ℓ_lt, ℓ_out,
    ℓ_rt); ℓ_lap ≡ 0, so β_x = β·softmax(ℓ)_x sums to β with no flat direction. λ follows from
    (β_qt, p) (modelling choice 6). :meth:`value_and_grad` returns an analytic gradient except
    for the library functions bdtrik, G_ns⁻¹ and (a, b)(ε₁), which are differentiated by
    central differences.
    """

    # old name (issue 12: α is the (w, α) unit's word), warns and points to the new one
    baseline_alpha = renamed_attribute("baseline_alpha", "baseline_error_bound", "PakObjective")

    def __init__(
        self,
        sorted_prefix: np.ndarray,
        *,
        n: int,
        bound: float,
        epsilon: float,
        delta: float,
        beta: float,
        p_max: float,
        noise: str = "laplace",
        counter: str | None = None,
    ) -> None:
        self.prefix = sorted_prefix
        self.m = m = int(sorted_prefix.size)
        self.n, self.bound, self.epsilon, self.delta = n, bound, epsilon, delta
        self.beta, self.p_max, self.noise = beta, p_max, noise
        self.y = np.concatenate(([0.0], sorted_prefix, [bound]))
        self.share_bounds = (0.1, 0.99)
        b_min = smoothing_parameters(self.share_bounds[0] * epsilon, delta, noise)[1]
        self.profiles = _Profiles(self.y, p_max=p_max, b_min=b_min)
        self.log_nodes = math.log2(n - m) if n - m > 1 else 0.0
        self.counter = counter
        # L³ of Eq. 16 (ε = 1, τ = 1), or the chosen counter's exact V/2 (modelling choice 9)
        self.suffix_units = self.log_nodes**3
        self.max_scale_units = self.log_nodes
        if counter is not None:
            from mechanisms import counter_end_variance

            # at the suffix's own ε (a zCDP counter's ρ(ε, δ) is not ∝ ε²), rescaled to ε = 1
            var = counter_end_variance(counter, n - m, epsilon=epsilon, bound=1.0, delta=delta)
            self.suffix_units = var / 2.0 * epsilon**2
            self.max_scale_units = min(self.log_nodes, math.sqrt(self.suffix_units))
        self.baseline_error_bound = bt_error(n=n, bound=bound, epsilon=epsilon, beta=beta)
        p_lo = max(p_max / 50.0, min(p_max, 2.0 / m))
        r_max = 1.0 + 2.0 * math.log(n) / -math.log(p_max)
        self.bounds = [(1.0, r_max), (math.log(p_lo), math.log(p_max)), self.share_bounds] + [
            (-10.0, 10.0)
        ] * 4

    def _dquantile(self, g: float) -> float:
        """d/dβ of G⁻¹(1 − β) = −1/density(G⁻¹(1 − β)) (Laplace(1) or N(0, 1))."""
        if self.noise == "laplace":
            return -1.0 / (0.5 * math.exp(-abs(g)))
        return -math.sqrt(2.0 * math.pi) * math.exp(0.5 * g * g)

    # -- parametrisation ------------------------------------------------------------------
    def decode(self, z: np.ndarray) -> tuple[float, float, float, np.ndarray]:
        """z -> (r, p, ε₁/ε, β_x for x in BETA_KEYS)."""
        logits = np.zeros(5)
        logits[list(_FREE)] = z[3:7]
        w = np.exp(logits - logits.max())
        return float(z[0]), min(math.exp(z[1]), self.p_max), float(z[2]), self.beta * w / w.sum()

    def encode(self, r: float, p: float, share: float, betas: dict) -> np.ndarray:
        """Inverse of :meth:`decode` (shares given as absolute β_x)."""
        logs = np.log([betas[k] for k in BETA_KEYS])
        return np.array([r, math.log(p), share, *(logs[list(_FREE)] - logs[_REF])])

    # -- the relaxed objective ------------------------------------------------------------
    def _data_terms(self, count: float, b: float) -> tuple[float, float, float, float, float]:
        """x̂, dx̂/dk, SS, dSS/dk, dSS/db at a real count k ∈ [1, pm] (linear in the rank)."""
        u = self.m + 1.0 - count
        lo = min(max(int(math.floor(u)), 1), self.m - 0)
        frac = u - lo
        if lo >= self.m:  # count ≤ 1: the rank is m (the relaxation stops at the maximum)
            lo, frac = self.m, 0.0
        hi = min(lo + 1, self.m)
        x0, x1 = self.y[lo], self.y[hi]
        s0, d0 = self.profiles.ss(lo, b)
        s1, d1 = self.profiles.ss(hi, b) if hi != lo else (s0, d0)
        x_hat = (1 - frac) * x0 + frac * x1
        ss = (1 - frac) * s0 + frac * s1
        return x_hat, -(x1 - x0), ss, -(s1 - s0), (1 - frac) * d0 + frac * d1

    def value_and_grad(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        """α(z) and its gradient; a large value with zero gradient where κ ≤ 0."""
        z = np.asarray(z, dtype=np.float64)
        r, p, share, betas = self.decode(z)
        b_qt, b_lt, b_lap, b_out, b_rt = betas
        eps, m, n = self.epsilon, self.m, self.n
        eps1, eps2 = share * eps, (1.0 - share) * eps
        big = 1e6 * self.baseline_error_bound

        def ab(e1: float) -> tuple[float, float]:
            return smoothing_parameters(e1, self.delta, self.noise)

        a, b = ab(eps1)
        da = _fd(lambda e: ab(e)[0], eps1) * eps
        db = _fd(lambda e: ab(e)[1], eps1) * eps
        G = lambda beta_: _upper_quantile(beta_, self.noise)  # noqa: E731
        g_lt, g_rt = G(b_lt), G(b_rt)
        dg_lt, dg_rt = self._dquantile(g_lt), self._dquantile(g_rt)
        denom = 1.0 - math.expm1(b) * g_lt / a
        if denom <= 1e-9:
            return big, np.zeros_like(z)
        kappa = 1.0 / denom  # [PAK19 Eq. 11]
        dk_db = kappa**2 * math.exp(b) * g_lt / a
        dk_da = -(kappa**2) * math.expm1(b) * g_lt / a**2
        dk_dglt = kappa**2 * math.expm1(b) / a

        def kstar(bq: float, pp: float) -> float:
            return float(max_quantile_count(bq, m, pp))

        count = kstar(b_qt, p)
        if count < 1.0:  # not even one value above the quantile: Eq. 5 cannot be met
            return big, np.zeros_like(z)
        dcount_dbqt = _fd(lambda v: kstar(v, p), b_qt)
        dcount_dp = _fd(lambda v: kstar(b_qt, v), p)
        x_hat, dx_dk, ss, dss_dk, dss_db = self._data_terms(count, b)

        H = g_lt + g_rt
        tau = x_hat + kappa * ss / a * H  # [PAK19 Eq. 13]
        # first summand (modelling choice 4)
        nu2 = self.suffix_units / eps**2 + 1.0 / eps2**2
        ln_lap = math.log(1.0 / b_lap)
        bmax = max(self.max_scale_units / eps, 1.0 / eps2)
        if nu2 >= bmax**2 * ln_lap:
            nu = math.sqrt(nu2)
            C = math.sqrt(8.0 * ln_lap) * nu
            dC_deps2 = math.sqrt(8.0 * ln_lap) * (-1.0 / eps2**3) / nu
            dC_dblap = -math.sqrt(8.0) * nu / (2.0 * b_lap * math.sqrt(ln_lap))
        else:
            C = math.sqrt(8.0) * ln_lap * bmax
            dC_deps2 = (
                -math.sqrt(8.0) * ln_lap / eps2**2
                if 1.0 / eps2 > self.max_scale_units / eps
                else 0.0
            )
            dC_dblap = -math.sqrt(8.0) * bmax / b_lap
        alpha_lap = C * r * tau
        # second summand [PAK19 Eq. 16]
        lnp = math.log(p)
        root = math.sqrt(p**r * n)
        ln_out = math.log(1.0 / b_out)
        S = root + math.sqrt(ln_out)
        alpha_out = x_hat * S**2 / -lnp
        alpha = alpha_lap + alpha_out

        # gradient with respect to the primitive parameters
        dA_dx = C * r + S**2 / -lnp
        dA_dss = C * r * kappa * H / a
        dA_dkappa = C * r * ss * H / a
        dA_da = -C * r * kappa * ss * H / a**2
        dA_dH = C * r * kappa * ss / a
        d_r = C * tau + x_hat / -lnp * 2 * S * root * lnp / 2.0
        d_p_direct = x_hat * (2 * S * root * r / (2 * p) / -lnp + S**2 / (p * lnp**2))
        d_count = dA_dx * dx_dk + dA_dss * dss_dk
        d_b = dA_dss * dss_db + dA_dkappa * dk_db
        d_a = dA_da + dA_dkappa * dk_da
        d_share = (d_a * da + d_b * db) + r * tau * dC_deps2 * (-eps)
        d_p = d_p_direct + d_count * dcount_dp
        dbeta = np.array(
            [
                d_count * dcount_dbqt,
                dA_dkappa * dk_dglt * dg_lt + dA_dH * dg_lt,
                r * tau * dC_dblap,
                x_hat / -lnp * 2 * S * (-1.0 / (2.0 * b_out * math.sqrt(ln_out))),
                dA_dH * dg_rt,
            ]
        )
        sig = betas / self.beta
        dlogit = self.beta * sig * (dbeta - float(sig @ dbeta))
        grad = np.array([d_r, d_p * p, d_share, *dlogit[list(_FREE)]])
        if not (math.isfinite(alpha) and np.all(np.isfinite(grad))):
            return big, np.zeros_like(z)
        return float(alpha), grad

    def value(self, z: np.ndarray) -> float:
        """α(z) alone."""
        return self.value_and_grad(z)[0]

    # -- the exact evaluation -------------------------------------------------------------
    def lam_from(self, z: np.ndarray) -> float:
        """The λ the plan reports: the largest admissible integer count, as λ = (k + ½)/(pm)."""
        _, p, _, betas = self.decode(z)
        count = math.floor(float(max_quantile_count(betas[0], self.m, p)))
        return min(1.0, (count + 0.5) / (p * self.m))

    def exact(
        self, *, r: float, lam: float, p: float, share: float, betas: np.ndarray
    ) -> ErrorTerms:
        """Eq. 16 at an integer rank with the mechanism's own functions (no relaxation)."""
        from scipy import special

        eps, m, n = self.epsilon, self.m, self.n
        eps1, eps2 = share * eps, (1.0 - share) * eps
        b_qt, b_lt, b_lap, b_out, b_rt = (float(v) for v in betas)
        q = lam * p
        rank = quantile_rank(m, q)
        count = quantile_count(m, q)
        a, b = smoothing_parameters(eps1, self.delta, self.noise)
        x_hat = float(self.prefix[rank - 1])
        ss = smooth_sensitivity_quantile(self.prefix, rank, b, 0.0, self.bound)
        kappa = pak_kappa(a=a, b=b, beta_lt=b_lt, noise=self.noise)
        tau = pak_tau_max(
            quantile=x_hat,
            smooth_sensitivity=ss,
            a=a,
            kappa=kappa,
            beta_lt=b_lt,
            beta_rt=b_rt,
            noise=self.noise,
        )
        ln_lap = math.log(1.0 / b_lap)
        nu = max(
            math.sqrt(self.suffix_units / eps**2 + 1.0 / eps2**2),
            max(self.max_scale_units / eps, 1 / eps2) * math.sqrt(ln_lap),
        )
        alpha_lap = math.sqrt(8.0 * ln_lap) * nu * r * tau
        S = math.sqrt(p**r * n) + math.sqrt(math.log(1.0 / b_out))
        alpha_out = x_hat * S**2 / -math.log(p)
        return ErrorTerms(
            r=r,
            lam=lam,
            p=p,
            eps1_share=share,
            beta_shares={k: float(v) / self.beta for k, v in zip(BETA_KEYS, betas, strict=True)},
            count=float(count),
            x_hat=x_hat,
            smooth_sensitivity=ss,
            a=a,
            b=b,
            kappa=kappa,
            tau_max=tau,
            laplace_error_bound=alpha_lap,
            outlier_error_bound=alpha_out,
            error_bound=alpha_lap + alpha_out,
            g=float(special.bdtr(count, m, p)),
        )
