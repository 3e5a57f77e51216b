"""The audit toolkit: statistical lower bounds on the privacy loss of a mechanism.

Method (hypothesis testing, as in Ding, Wang, Wang, Zhang and Kifer, "Detecting Violations of
Differential Privacy", CCS 2018, and Jagielski, Ullman and Oprea, "Auditing Differentially
Private Machine Learning", NeurIPS 2020):

1. run the mechanism N times on a dataset D and N times on a neighbour D' (independent bit
   sources spawned from one seed, so every audit is deterministic), reducing each output to a
   scalar *statistic* chosen per mechanism to have power;
2. on the first half of both samples (the *selection* half), choose one event S among the
   threshold events {x > t} and {x ≤ t} and one direction (D over D', or D' over D), the one
   whose conservative estimate of ε is largest;
3. on the second half (fresh samples, so the selection does not bias the bound), compute
   one-sided Clopper–Pearson bounds, each at level α/2: p_lo ≤ P[M(D) ∈ S] and
   p_hi ≥ P[M(D') ∈ S]; with probability at least 1 − α,

       ε_lb = ln((p_lo − δ) / p_hi)  ≤  the true ε of the mechanism,

   because an (ε, δ)-DP mechanism has P[M(D) ∈ S] ≤ e^ε P[M(D') ∈ S] + δ for every S.

An audit *passes* at a claimed (ε, δ) when ε_lb ≤ ε: no evidence of a violation. The tests
then also run a deliberately under-noised variant with the same N and seed and require
ε_lb > ε: that is what shows the audit had the power to catch a broken mechanism.

Also here: the Tumult-style scale check (Kolmogorov–Smirnov test that accepts the true noise
scale and rejects the scale × 0.7 and × 1.3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from mechanisms import bit_source

__all__ = [
    "AuditResult",
    "ScaleTest",
    "audit",
    "audit_samples",
    "clopper_pearson",
    "epsilon_lower_bound",
    "ks_scale_test",
    "sample_pair",
]

#: Default confidence parameter: ε_lb exceeds the true ε with probability at most α.
ALPHA = 1e-3
#: Default p-value below which a Kolmogorov–Smirnov test rejects a scale.
KS_P_VALUE = 1e-6

Statistic = Callable[[object, int, object], np.ndarray]


def clopper_pearson(
    successes: np.ndarray | int, trials: int, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided (1 − α) Clopper–Pearson interval for a binomial proportion.

    Each end is a one-sided bound at level α/2: ``lo`` is the α/2 quantile of
    Beta(k, N − k + 1) (0 when k = 0), ``hi`` the 1 − α/2 quantile of Beta(k + 1, N − k)
    (1 when k = N). Vectorised over ``successes``.
    """
    k = np.asarray(successes, dtype=np.float64)
    n = float(trials)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, stats.beta.ppf(alpha / 2.0, np.maximum(k, 1), n - k + 1), 0.0)
        hi = np.where(k < n, stats.beta.ppf(1.0 - alpha / 2.0, k + 1, np.maximum(n - k, 1)), 1.0)
    return lo, hi


def epsilon_lower_bound(
    p_lo: np.ndarray | float, p_hi: np.ndarray | float, delta: float = 0.0
) -> np.ndarray:
    """ε_lb = ln((p_lo − δ) / p_hi), and −inf where p_lo ≤ δ (no evidence at all)."""
    num = np.asarray(p_lo, dtype=np.float64) - delta
    den = np.asarray(p_hi, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(num > 0, np.log(np.maximum(num, 1e-300) / den), -np.inf)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditResult:
    """Outcome of one audit: the lower bound on ε and the event that gave it."""

    epsilon_lb: float
    """Lower (1 − α) confidence bound on the privacy loss, from the held-out half."""
    epsilon_hat: float
    """Point estimate ln((p̂_num − δ)/p̂_den) on the held-out half (for reports only)."""
    event: str
    """The event S and direction chosen on the selection half, e.g. "x > 1.5, D over D'"."""
    count_num: int
    """Held-out outputs in S from the numerator dataset."""
    count_den: int
    """Held-out outputs in S from the denominator dataset."""
    n_holdout: int
    """Held-out samples per dataset."""
    delta: float
    """δ subtracted in the numerator."""
    alpha: float
    """Confidence parameter of the bound."""

    def passes(self, epsilon: float) -> bool:
        """True when the audit finds no violation of ε (ε_lb ≤ ε)."""
        return self.epsilon_lb <= epsilon

    def __str__(self) -> str:
        return (
            f"eps_lb={self.epsilon_lb:.3f} (eps_hat={self.epsilon_hat:.3f}) on {self.event}; "
            f"held-out counts {self.count_num}/{self.count_den} of {self.n_holdout}, "
            f"delta={self.delta:g}, alpha={self.alpha:g}"
        )


def _counts_above(sorted_x: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    return sorted_x.size - np.searchsorted(sorted_x, thresholds, side="right")


def _event_counts(
    x: np.ndarray, y: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Counts of x and y in every candidate event: rows are {> t} then {≤ t}."""
    sx, sy = np.sort(x), np.sort(y)
    ax, ay = _counts_above(sx, thresholds), _counts_above(sy, thresholds)
    return np.concatenate([ax, x.size - ax]), np.concatenate([ay, y.size - ay])


def audit_samples(
    out_d: np.ndarray,
    out_d_prime: np.ndarray,
    *,
    delta: float = 0.0,
    alpha: float = ALPHA,
    n_thresholds: int = 512,
) -> AuditResult:
    """Lower-bound the privacy loss from scalar statistics of outputs on D and on D'.

    Both arrays hold i.i.d. draws; their first halves choose the event (threshold t, side and
    direction maximising the Clopper–Pearson ε bound on that half), their second halves give
    the reported bound. Candidate thresholds are ``n_thresholds`` quantiles of the pooled
    selection half.
    """
    x = np.asarray(out_d, dtype=np.float64).ravel()
    y = np.asarray(out_d_prime, dtype=np.float64).ravel()
    if x.size != y.size or x.size < 4:
        raise ValueError("audit_samples needs two samples of the same size (at least 4).")
    half = x.size // 2
    sel_x, sel_y, hold_x, hold_y = x[:half], y[:half], x[half:], y[half:]

    pooled = np.concatenate([sel_x, sel_y])
    levels = np.linspace(0.0, 1.0, n_thresholds + 2)[1:-1]
    thresholds = np.unique(np.quantile(pooled, levels, method="inverted_cdf"))

    kx, ky = _event_counts(sel_x, sel_y, thresholds)
    lo_x, hi_x = clopper_pearson(kx, half, alpha)
    lo_y, hi_y = clopper_pearson(ky, half, alpha)
    scores = np.concatenate(
        [epsilon_lower_bound(lo_x, hi_y, delta), epsilon_lower_bound(lo_y, hi_x, delta)]
    )
    best = int(np.argmax(scores))
    d_over_dp = best < kx.size
    row = best % kx.size
    above = row < thresholds.size
    t = float(thresholds[row % thresholds.size])

    n_hold = hold_x.size
    hx = int(np.sum(hold_x > t) if above else np.sum(hold_x <= t))
    hy = int(np.sum(hold_y > t) if above else np.sum(hold_y <= t))
    k_num, k_den = (hx, hy) if d_over_dp else (hy, hx)
    p_lo, _ = clopper_pearson(k_num, n_hold, alpha)
    _, p_hi = clopper_pearson(k_den, n_hold, alpha)
    eps_lb = float(epsilon_lower_bound(p_lo, p_hi, delta))
    eps_hat = float(epsilon_lower_bound(k_num / n_hold, max(k_den, 0.5) / n_hold, delta))
    side = ">" if above else "<="
    direction = "D over D'" if d_over_dp else "D' over D"
    result = AuditResult(
        epsilon_lb=eps_lb,
        epsilon_hat=eps_hat,
        event=f"x {side} {t:.6g}, {direction}",
        count_num=k_num,
        count_den=k_den,
        n_holdout=n_hold,
        delta=float(delta),
        alpha=float(alpha),
    )
    print(f"[audit] N={x.size} {result}")  # shown by ``pytest -rP``: the figures of the audit
    return result


def sample_pair(
    statistic: Statistic, d: object, d_prime: object, *, n: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` statistics of the mechanism on D and on D'.

    ``statistic(data, n, bits)`` runs the mechanism ``n`` times on ``data`` drawing through
    ``bits`` and returns ``n`` scalars. D and D' get independent children of
    ``mechanisms.bit_source(seed)`` (a seeded PCG64), so the audit is deterministic.
    """
    bits_d, bits_dp = bit_source(seed).spawn(2)
    out_d = np.asarray(statistic(d, n, bits_d), dtype=np.float64)
    out_dp = np.asarray(statistic(d_prime, n, bits_dp), dtype=np.float64)
    if out_d.shape != (n,) or out_dp.shape != (n,):
        raise ValueError("the statistic must return one scalar per run.")
    return out_d, out_dp


def audit(
    statistic: Statistic,
    d: object,
    d_prime: object,
    *,
    n: int,
    seed: int,
    delta: float = 0.0,
    alpha: float = ALPHA,
) -> AuditResult:
    """:func:`sample_pair` followed by :func:`audit_samples`."""
    out_d, out_dp = sample_pair(statistic, d, d_prime, n=n, seed=seed)
    return audit_samples(out_d, out_dp, delta=delta, alpha=alpha)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleTest:
    """Kolmogorov–Smirnov p-values of a sample against a scale family at three scales."""

    scale: float
    """The claimed scale."""
    factors: tuple[float, float]
    """Multipliers of the two alternatives (less noise, more noise)."""
    p_true: float
    """p-value against the claimed scale."""
    p_smaller: float
    """p-value against scale × factors[0] (less noise)."""
    p_larger: float
    """p-value against scale × factors[1] (more noise)."""

    def check(self, p_value: float = KS_P_VALUE) -> list[str]:
        """Failures: true scale rejected, or an alternative not rejected (empty when fine)."""
        fails = []
        if self.p_true < p_value:
            fails.append(f"true scale {self.scale:g} rejected (p={self.p_true:.3g})")
        if self.p_smaller >= p_value:
            s = self.scale * self.factors[0]
            fails.append(f"smaller scale {s:g} not rejected (p={self.p_smaller:.3g})")
        if self.p_larger >= p_value:
            s = self.scale * self.factors[1]
            fails.append(f"larger scale {s:g} not rejected (p={self.p_larger:.3g})")
        return fails


def ks_scale_test(
    samples: np.ndarray,
    family: Callable[[float], object],
    scale: float,
    *,
    factors: Sequence[float] = (0.7, 1.3),
) -> ScaleTest:
    """KS-test ``samples`` against ``family(scale)`` and against the scale × each factor.

    ``family(s)`` returns a frozen scipy distribution (anything with ``.cdf``), e.g.
    ``lambda s: stats.laplace(scale=s)``.
    """
    small, large = (float(f) for f in factors)
    if not small < 1.0 < large:
        raise ValueError("factors must be (less than 1, greater than 1).")
    x = np.asarray(samples, dtype=np.float64)

    def p_at(s: float) -> float:
        return float(stats.kstest(x, family(s).cdf).pvalue)

    return ScaleTest(
        scale=float(scale),
        factors=(small, large),
        p_true=p_at(scale),
        p_smaller=p_at(scale * small),
        p_larger=p_at(scale * large),
    )
