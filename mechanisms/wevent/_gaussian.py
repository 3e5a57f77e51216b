"""Gaussian noise for (w, α) units with zero-concentrated DP accounting (opt-in).

Under (w, α)-indistinguishability ([FV19] Def. 3) a level of a hierarchy moves by at most α in
total at each step of a window of w steps. A query reading ``k`` steps of one window (the k
samples of OptStream, or every value: k = w) therefore has

* L1 sensitivity ``k·α`` (what the Laplace mechanism pays), and
* L2 sensitivity ``α·√k`` (at each step the level's change is a vector of L1 norm <= α, hence
  L2 norm <= α; the k steps are orthogonal coordinates).

The discrete Gaussian with standard deviation σ on a shift of L2 norm Δ₂ is ρ-zCDP with
``ρ = Δ₂² / (2σ²)`` (Canonne, Kamath and Steinke 2020, Theorem 14; the shift must lie on the
noise lattice, which the lattice rounding guarantees, at the price of adding ``γ·√n`` to Δ₂ for
n rounded coordinates: each coordinate of the two rounded inputs moves by at most γ more than
the inputs). zCDP composes by adding ρ (Bun and Steinke 2016, Lemma 2.3); the generic
conversion to approximate DP is ``(ρ + 2√(ρ ln(1/δ)), δ)`` (Bun and Steinke 2016, Proposition
1.3, :func:`zcdp_to_dp`), but since issue 27 the budget and the privacy record use the tight
curve below (:func:`gaussian_rho`, :func:`gaussian_epsilon`). For k large enough the
Gaussian's ``√k`` beats Laplace's ``k``: at ε = 1, δ = 10⁻⁶ the noise standard deviation of the
Gaussian is below Laplace's from k = 9 on (k = 14 with the [BS16] conversion;
:func:`gaussian_gain`).

**Tight (ε, δ) (issue 27).** Every release that enters a Gaussian ρ total (the levels of
OptStream's ``noise="gaussian"``, the w-event Gaussian) is a Gaussian mechanism: a query of L2
sensitivity Δᵢ with noise σᵢ is μᵢ-GDP with μᵢ = Δᵢ/σᵢ = √(2ρᵢ), and Gaussian mechanisms
compose *exactly*: μ² = Σ μᵢ² = 2ρ (Dong, Roth and Su 2022, Cor. 3.3 [DRS22]). So splitting ρ
is splitting μ², and the tight (ε, δ) of the whole is the analytic Gaussian curve of μ ([BW18]
Thm. 8, the one :meth:`GaussianNoise.for_mechanism` uses): :func:`gaussian_rho` and
:func:`gaussian_epsilon` replace the [BS16] conversion (σ/Δ 5.35 → 4.23 at (1, 10⁻⁶), ρ 0.0175
→ 0.0280 per window). A PLD accountant would add nothing: composed Gaussians *are* one Gaussian.

For the discrete Gaussian actually drawn (``docs/privacy.md``, "Tight (ε, δ) for composed
discrete Gaussians"): on the lattice, a coordinate's discrete Gaussian p (parameter s ≥ 2²⁴
lattice units) and the rounded continuous Gaussian r = rint(N(μ, s²)) — post-processing of the
continuous mechanism — satisfy |ln p(x)/r(x)| ≤ η = 2.4·10⁻¹³ within 40s of μ (ln p/r = ln ∫ of
exp(−(2at + t²)/(2s²)) over t ∈ [−½, ½], a = x − μ, between −1/(24s²) and a²/(24s⁴)·(1 + 2·10⁻⁶)),
and both put below 10⁻²⁰⁰ outside. Over at most m = 2²⁸ shifted coordinates per window, each
shifted by at most 8s (μ ≤ 8 is enforced), the discrete release is (ε + 2mη, δ + 10⁻¹⁹⁰)-DP
wherever the continuous one is (ε, δ)-DP: the ε is calibrated with that margin (1.3·10⁻⁴)
removed. Where the [BS16] conversion is larger (tiny ε, huge ε) it is used instead (also valid:
the discrete Gaussian is exactly ρ-zCDP).

Noise is drawn through :class:`mechanisms.GaussianNoise` (the secure discrete Gaussian sampler
of ``mechanisms.core``); this module only calibrates it.
"""

from __future__ import annotations

import math

from ..core._errors import ParameterError
from ..core._noise import (
    GaussianNoise,
    _analytic_gaussian_factor,
    _gaussian_delta,
    lattice_granularity,
)
from ..core._validation import check_integer, check_positive

__all__ = [
    "dp_to_zcdp",
    "gaussian_epsilon",
    "gaussian_gain",
    "gaussian_rho",
    "gaussian_window_noise",
    "zcdp_to_dp",
]


def _check_delta(delta: object, owner: str) -> float:
    d = check_positive(delta, "delta", owner)
    if not d < 1.0:
        raise ParameterError(
            f"The 'delta' parameter of {owner} must be a float in (0, 1). Got {delta!r} instead."
        )
    return d


def zcdp_to_dp(rho: float, delta: float) -> float:
    """ε of the (ε, δ)-DP guarantee implied by ρ-zCDP: ``ρ + 2√(ρ ln(1/δ))``.

    Bun and Steinke (2016), Proposition 1.3.

    Examples
    --------
    >>> round(zcdp_to_dp(0.5, 1e-6), 4)
    5.7565
    """
    r = check_positive(rho, "rho", "zcdp_to_dp")
    d = _check_delta(delta, "zcdp_to_dp")
    return r + 2.0 * math.sqrt(r * math.log(1.0 / d))


def dp_to_zcdp(epsilon: float, delta: float) -> float:
    """The largest ρ whose :func:`zcdp_to_dp` conversion is at most (ε, δ).

    Solves ``ρ + 2√(ρ L) = ε`` with ``L = ln(1/δ)``: ``√ρ = √(L + ε) − √L``, rounded down by a
    relative 1e-12 so the conversion never exceeds ε.

    Examples
    --------
    >>> rho = dp_to_zcdp(1.0, 1e-6)
    >>> zcdp_to_dp(rho, 1e-6) <= 1.0
    True
    """
    eps = check_positive(epsilon, "epsilon", "dp_to_zcdp")
    d = _check_delta(delta, "dp_to_zcdp")
    big_l = math.log(1.0 / d)
    root = math.sqrt(big_l + eps) - math.sqrt(big_l)
    return root * root * (1.0 - 1e-12)


#: Shifted lattice coordinates allowed per window (all Gaussian queries composed in it).
_MAX_COORDINATES = 1 << 28
#: Of them, per query (a level of a period): at most 16 such queries per window.
_MAX_QUERY_COORDINATES = 1 << 24
#: |ln p/r| per coordinate for s ≥ 2²⁴ within 40s of the mean: 40²/(24·2⁴⁸)·(1 + 2·10⁻⁶).
_ETA = 2.4e-13
#: ε paid for the discrete draws: 2·m·η.
_DISCRETE_SLACK = 2.0 * _MAX_COORDINATES * _ETA
#: μ = √(2ρ) at most 8 (every coordinate's shift ≤ 8s, inside the 40s of the bound).
_MAX_RHO = 32.0


def gaussian_rho(epsilon: float, delta: float) -> float:
    """The largest ρ = μ²/2 whose composed Gaussian releases are (ε, δ)-DP: tight.

    μ-GDP is (ε, δ)-DP iff ``Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) <= δ`` ([DRS22] Cor. 2.13,
    [BW18] Thm. 8); μ = 1/u with u = ``_analytic_gaussian_factor(ε − 2mη, δ)`` (module notes:
    the margin pays for the discrete draws), capped at μ = 8; never below :func:`dp_to_zcdp`.

    Examples
    --------
    >>> round(gaussian_rho(1.0, 1e-6) / dp_to_zcdp(1.0, 1e-6), 2)
    1.6
    """
    owner = "gaussian_rho"
    eps = check_positive(epsilon, "epsilon", owner)
    d = _check_delta(delta, owner)
    loose = dp_to_zcdp(eps, d)
    if eps <= 2.0 * _DISCRETE_SLACK:
        return loose
    u = _analytic_gaussian_factor(eps - _DISCRETE_SLACK, d)
    return max(min(0.5 / (u * u), _MAX_RHO), loose)


def gaussian_epsilon(rho: float, delta: float) -> float:
    """The tight ε at δ of Gaussian releases whose ρ = Σ Δᵢ²/(2σᵢ²) is ``rho``.

    The smallest ε with the μ = √(2ρ) curve at most δ ([BW18] Thm. 8), plus 2mη for the
    discrete draws (module notes); never above :func:`zcdp_to_dp`. Inverse of
    :func:`gaussian_rho`: ``gaussian_epsilon(gaussian_rho(ε, δ), δ) <= ε``.

    Examples
    --------
    >>> round(gaussian_epsilon(0.5, 1e-6), 3), round(zcdp_to_dp(0.5, 1e-6), 3)
    (4.887, 5.757)
    """
    from scipy.optimize import brentq

    owner = "gaussian_epsilon"
    r = check_positive(rho, "rho", owner)
    d = _check_delta(delta, owner)
    loose = zcdp_to_dp(r, d)
    if r > _MAX_RHO:
        return loose
    u = 1.0 / math.sqrt(2.0 * r)
    if _gaussian_delta(0.0, u) <= d:
        eps = 0.0
    else:
        hi = 1.0
        while _gaussian_delta(hi, u) > d:
            hi *= 2.0
        eps = brentq(lambda e: _gaussian_delta(e, u) - d, 0.0, hi, xtol=1e-14, rtol=1e-13)
        eps *= 1.0 + 1e-9
        while _gaussian_delta(eps, u) > d:
            eps *= 1.0 + 1e-9
    return min(eps + _DISCRETE_SLACK, loose)


def gaussian_window_noise(*, k: int, alpha: float, rho: float, n_nodes: int = 1) -> GaussianNoise:
    """Discrete Gaussian noise making k steps of one level of a window ρ-zCDP.

    Parameters
    ----------
    k
        Steps of one window the query reads (OptStream's samples; w for every value).
    alpha
        α of the (w, α) unit, in the data's units.
    rho
        ρ of the zCDP guarantee of this query.
    n_nodes
        Nodes of the level (every node's k values are rounded to the lattice).

    Notes
    -----
    σ = (α√k + γ√(k·n))/√(2ρ) with γ the lattice spacing (module notes): the L2 sensitivity α√k
    plus the rounding of the k·n released coordinates, then Canonne et al. (2020) Theorem 14.

    *Privacy*: ρ-zCDP for (w, α)-indistinguishable neighbours, per level and window (the k
    read steps of any window, see the module notes).
    """
    owner = "gaussian_window_noise"
    k = check_integer(k, "k", owner)
    a = check_positive(alpha, "alpha", owner)
    r = check_positive(rho, "rho", owner)
    n = check_integer(n_nodes, "n_nodes", owner)
    if k * n > _MAX_QUERY_COORDINATES:
        raise ParameterError(
            f"The 'k' and 'n_nodes' parameters of {owner} must release at most "
            f"{_MAX_QUERY_COORDINATES} coordinates per window (the bound of the tight (ε, δ) "
            f"for discrete draws, docs/privacy.md). Got k·n_nodes = {k * n}. Split the level."
        )
    l2 = a * math.sqrt(k)
    factor = 1.0 / math.sqrt(2.0 * r)
    gamma = lattice_granularity(l2 * factor)
    sigma = (l2 + gamma * math.sqrt(k * n)) * factor
    return GaussianNoise(sigma=sigma, granularity=gamma)


def gaussian_gain(*, k: int, epsilon: float, delta: float) -> float:
    """Laplace noise standard deviation over the Gaussian's, for k steps at the same (ε, δ).

    Laplace: scale kα/ε, standard deviation √2·kα/ε. Gaussian: α√k/√(2ρ) with ρ =
    :func:`gaussian_rho` (ε, δ) (tight, module notes). Above 1 the Gaussian is less noisy (α
    cancels; lattice terms ignored).

    Examples
    --------
    >>> gain = [gaussian_gain(k=k, epsilon=1.0, delta=1e-6) for k in (4, 48)]
    >>> gain[0] < 1 < gain[1]
    True
    """
    k = check_integer(k, "k", "gaussian_gain")
    rho = gaussian_rho(epsilon, delta)
    laplace_sd = math.sqrt(2.0) * k / epsilon
    gauss_sd = math.sqrt(k) / math.sqrt(2.0 * rho)
    return laplace_sd / gauss_sd
