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
the inputs). zCDP composes by adding ρ (Bun and Steinke 2016, Lemma 2.3) and converts to
approximate DP as ``(ρ + 2√(ρ ln(1/δ)), δ)`` (Bun and Steinke 2016, Proposition 1.3), which is
what the privacy record states. For k large enough the Gaussian's ``√k`` beats Laplace's ``k``:
at ε = 1, δ = 10⁻⁶ the noise standard deviation of the Gaussian is below Laplace's from about
k = 14 on (:func:`gaussian_gain`).

Noise is drawn through :class:`mechanisms.GaussianNoise` (the secure discrete Gaussian sampler
of ``mechanisms.core``); this module only calibrates it.
"""

from __future__ import annotations

import math

from ..core._errors import ParameterError
from ..core._noise import GaussianNoise, lattice_granularity
from ..core._validation import check_integer, check_positive

__all__ = [
    "dp_to_zcdp",
    "gaussian_gain",
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
    l2 = a * math.sqrt(k)
    factor = 1.0 / math.sqrt(2.0 * r)
    gamma = lattice_granularity(l2 * factor)
    sigma = (l2 + gamma * math.sqrt(k * n)) * factor
    return GaussianNoise(sigma=sigma, granularity=gamma)


def gaussian_gain(*, k: int, epsilon: float, delta: float) -> float:
    """Laplace noise standard deviation over the Gaussian's, for k steps at the same (ε, δ).

    Laplace: scale kα/ε, standard deviation √2·kα/ε. Gaussian: α√k/√(2ρ) with ρ =
    :func:`dp_to_zcdp` (ε, δ). Above 1 the Gaussian is less noisy (α cancels; lattice terms
    ignored).

    Examples
    --------
    >>> gain = [gaussian_gain(k=k, epsilon=1.0, delta=1e-6) for k in (4, 48)]
    >>> gain[0] < 1 < gain[1]
    True
    """
    k = check_integer(k, "k", "gaussian_gain")
    rho = dp_to_zcdp(epsilon, delta)
    laplace_sd = math.sqrt(2.0) * k / epsilon
    gauss_sd = math.sqrt(k) / math.sqrt(2.0 * rho)
    return laplace_sd / gauss_sd
