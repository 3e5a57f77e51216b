"""Local-DP mean reports on [−1, 1]: Duchi's, the Piecewise and the Hybrid mechanism ([HM19]).

[HM19] Wang, Xiao, Yang, Zhao, Hui, Shin, Shin, Yu. Collecting and Analyzing Multidimensional
       Data with Local Differential Privacy. ICDE 2019 (arXiv 1907.00782; the numbering below
       is the paper's: Alg. 1 Duchi et al.'s solution, Alg. 2 the Piecewise Mechanism, §III-C
       the Hybrid Mechanism).

Each user holds t ∈ [−1, 1] and sends one report t*; every report is unbiased, E[t* | t] = t,
so the server's estimate of a sum is the sum of the reports.

* **Duchi** (Alg. 1): t* = ±D, D = (e^ε + 1)/(e^ε − 1), with P[t* = +D] = 1/2 + t·(e^ε − 1)/
  (2e^ε + 2). Var[t* | t] = D² − t². The two outputs have probabilities in ratio at most e^ε.
* **Piecewise** (Alg. 2): C = (e^{ε/2} + 1)/(e^{ε/2} − 1), ℓ(t) = (C + 1)/2·t − (C − 1)/2,
  r(t) = ℓ(t) + C − 1. With probability e^{ε/2}/(e^{ε/2} + 1), t* is uniform on [ℓ(t), r(t)],
  otherwise uniform on [−C, ℓ(t)) ∪ (r(t), C]: densities p = (e^ε − e^{ε/2})/(2e^{ε/2} + 2)
  inside and p/e^ε outside. Var[t* | t] = t²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²).
* **Hybrid** (§III-C): Piecewise with probability α, Duchi otherwise; α = 1 − e^{−ε/2} when
  ε > 0.61 and α = 0 (Duchi only) otherwise. With that α the t² terms cancel and
  Var[t* | t] = (e^{ε/2} + 3)/(3e^{ε/2}(e^{ε/2} − 1)) + (e^ε + 1)²/(e^{ε/2}(e^ε − 1)²) for every
  t; for ε ≤ 0.61 the worst case is D² (at t = 0).

Floating-point safety. Duchi's two outputs ±D are the same doubles for every input. The
Piecewise output is sampled as a real and then rounded to the lattice γℤ, γ = 2^{⌊log₂ C⌋ − 24}
(a public constant of ε): every input then has the same support, and each lattice point's
probability is the integral of the ideal density over its cell, whose ratio between inputs is
at most e^ε. The real is ``lo + (hi − lo)·u`` with u a 53-bit uniform; its rounding only moves
mass across a cell edge within ~2⁻⁵²·C of it, a relative deviation of at most ~2⁻²⁶ of one
cell's probability (documented, as the noise module documents its 2⁻⁵²). Rounding moves the mean
by at most γ²/4 per report (the cells inside a region are symmetric; only the two partial
end cells contribute), below 10⁻¹⁴·C².

*Privacy*: each mechanism is ε-LDP ([HM19] §III-B for PM; §III-A and Duchi et al. 2018 for
Alg. 1); HM picks one of two ε-LDP mechanisms with a probability that does not depend on t, so
its output law is a fixed mixture and every event's probability ratio stays ≤ e^ε. The choice
of α is a utility decision, not a privacy one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core._noise import lattice_granularity
from ..core._random import BitSource, uniform_open
from ..core._validation import check_stream
from ._randomizers import bernoulli, check_local_epsilon

__all__ = ["HYBRID_SWITCH_EPSILON", "DuchiMechanism", "HybridMechanism", "PiecewiseMechanism"]

#: Below or at this ε the Hybrid Mechanism uses Duchi's mechanism only ([HM19] §III-C).
HYBRID_SWITCH_EPSILON = 0.61


def _check_unit_reports(t: object, owner: str) -> np.ndarray:
    return check_stream(t, "t", owner, bound=1.0, lower=-1.0)


def _as_t(t: object) -> np.ndarray:
    return np.asarray(t, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class DuchiMechanism:
    """Duchi et al.'s one-dimensional mechanism ([HM19] Alg. 1): t* = ±D, unbiased for t.

    Notes
    -----
    *Privacy*: ε-LDP: P[+D | t] ∈ [1/(e^ε + 1), e^ε/(e^ε + 1)], so for any t, t' the ratio of
    either output's probabilities is at most e^ε.
    """

    epsilon: float
    """Privacy loss ε of one report, in (0, 50]."""
    output: float = field(init=False)
    """D = (e^ε + 1)/(e^ε − 1) = coth(ε/2), the magnitude of every report."""

    def __post_init__(self) -> None:
        eps = check_local_epsilon(self.epsilon, "DuchiMechanism")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "output", 1.0 / math.tanh(eps / 2.0))

    def report(self, t: object, bits: BitSource) -> np.ndarray:
        """One report per entry of ``t`` (each in [−1, 1])."""
        arr = _check_unit_reports(t, "DuchiMechanism.report")
        return _duchi_sample(arr, math.tanh(self.epsilon / 2.0), self.output, bits)

    def variance(self, t: object) -> np.ndarray:
        """Var[t* | t] = D² − t²."""
        return self.output**2 - _as_t(t) ** 2

    @property
    def max_variance(self) -> float:
        """Largest variance over t ∈ [−1, 1] (at t = 0): D²."""
        return self.output**2


def _duchi_sample(t: np.ndarray, slope: float, d: float, bits: BitSource) -> np.ndarray:
    """±d with P[+d] = 1/2 + slope·t/2 (slope = tanh(ε/2) = (e^ε − 1)/(e^ε + 1))."""
    plus = uniform_open(bits, t.size) < 0.5 + 0.5 * slope * t  # [HM19 Alg. 1]
    return np.where(plus, d, -d)


@dataclass(frozen=True, slots=True, kw_only=True)
class PiecewiseMechanism:
    """The Piecewise Mechanism ([HM19] Alg. 2): unbiased reports on [−C, C].

    Notes
    -----
    Densities p = (e^ε − e^{ε/2})/(2e^{ε/2} + 2) on the window [ℓ(t), r(t)] of width C − 1 and
    p/e^ε elsewhere on [−C, C]; the window is chosen with probability e^{ε/2}/(e^{ε/2} + 1).
    Outputs are rounded to the lattice :attr:`granularity` (module notes).

    *Privacy*: ε-LDP ([HM19] §III-B): the density at any point is p or p/e^ε whatever t is.
    """

    epsilon: float
    """Privacy loss ε of one report, in (0, 50]."""
    c: float = field(init=False)
    """C = (e^{ε/2} + 1)/(e^{ε/2} − 1) = coth(ε/4), the output range is [−C, C]."""
    p_window: float = field(init=False)
    """Probability e^{ε/2}/(e^{ε/2} + 1) that the report falls in the window around t."""
    density: float = field(init=False)
    """p, the density inside the window (p/e^ε outside)."""
    granularity: float = field(init=False)
    """Lattice spacing γ = 2^{⌊log₂ C⌋ − 24} of the reports."""

    def __post_init__(self) -> None:
        eps = check_local_epsilon(self.epsilon, "PiecewiseMechanism")
        c = 1.0 / math.tanh(eps / 4.0)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "p_window", 1.0 / (1.0 + math.exp(-eps / 2.0)))
        half = math.exp(eps / 2.0)
        object.__setattr__(self, "density", (math.exp(eps) - half) / (2.0 * half + 2.0))
        object.__setattr__(self, "granularity", lattice_granularity(c))

    def report(self, t: object, bits: BitSource) -> np.ndarray:
        """One report per entry of ``t`` (each in [−1, 1])."""
        arr = _check_unit_reports(t, "PiecewiseMechanism.report")
        return _piecewise_sample(arr, self.c, self.p_window, self.granularity, bits)

    def variance(self, t: object) -> np.ndarray:
        """Var[t* | t] = t²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²) ([HM19] §III-B)."""
        em1 = math.expm1(self.epsilon / 2.0)
        return _as_t(t) ** 2 / em1 + (em1 + 4.0) / (3.0 * em1 * em1)

    @property
    def max_variance(self) -> float:
        """Largest variance over t ∈ [−1, 1] (at |t| = 1)."""
        return float(self.variance(1.0))


def _piecewise_sample(
    t: np.ndarray, c: float, p_window: float, gamma: float, bits: BitSource
) -> np.ndarray:
    """Piecewise reports with range constant ``c`` and window probability ``p_window``.

    Takes C and the window probability as arguments (not ε) so that audits can run the same
    sampler with a miscalibrated C.
    """
    inside = uniform_open(bits, t.size) < p_window
    u = uniform_open(bits, t.size)
    left = 0.5 * (c + 1.0) * t - 0.5 * (c - 1.0)  # ℓ(t)  [HM19 Alg. 2]
    width = c - 1.0
    y_in = left + width * u
    y_out = -c + (c + 1.0) * u  # uniform on a segment of length C + 1 = 2C − (C − 1) ...
    y_out = np.where(y_out < left, y_out, y_out + width)  # ... with the window cut out
    y = np.where(inside, y_in, y_out)
    top = math.floor(c / gamma + 0.5)
    return np.clip(np.rint(y / gamma), -top, top) * gamma


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridMechanism:
    """The Hybrid Mechanism ([HM19] §III-C): Piecewise w.p. α, Duchi otherwise.

    Notes
    -----
    α = 1 − e^{−ε/2} if ε > 0.61 else 0. The reports are unbiased for t, with variance
    α·Var_PM(t) + (1 − α)·Var_Duchi(t) (a mixture of two unbiased reports), which is the
    constant (e^{ε/2} + 3)/(3e^{ε/2}(e^{ε/2} − 1)) + (e^ε + 1)²/(e^{ε/2}(e^ε − 1)²) for
    ε > 0.61 ([HM19] §III-C).

    *Privacy*: ε-LDP: a data-independent mixture of two ε-LDP mechanisms (module notes).
    """

    epsilon: float
    """Privacy loss ε of one report, in (0, 50]."""
    alpha: float = field(init=False)
    """Probability of using the Piecewise Mechanism."""
    piecewise: PiecewiseMechanism = field(init=False)
    """The Piecewise component (same ε)."""
    duchi: DuchiMechanism = field(init=False)
    """Duchi's component (same ε)."""

    def __post_init__(self) -> None:
        eps = check_local_epsilon(self.epsilon, "HybridMechanism")
        alpha = -math.expm1(-eps / 2.0) if eps > HYBRID_SWITCH_EPSILON else 0.0
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "piecewise", PiecewiseMechanism(epsilon=eps))
        object.__setattr__(self, "duchi", DuchiMechanism(epsilon=eps))

    def report(self, t: object, bits: BitSource) -> np.ndarray:
        """One report per entry of ``t`` (each in [−1, 1])."""
        arr = _check_unit_reports(t, "HybridMechanism.report")
        return _hybrid_sample(arr, self.alpha, self.piecewise, self.duchi, bits)

    def variance(self, t: object) -> np.ndarray:
        """Var[t* | t] = α·Var_PM(t) + (1 − α)·Var_Duchi(t)."""
        return self.alpha * self.piecewise.variance(t) + (1.0 - self.alpha) * self.duchi.variance(t)

    @property
    def max_variance(self) -> float:
        """Largest variance over t ∈ [−1, 1]: the quadratic in t peaks at t = 0 or |t| = 1."""
        return float(max(self.variance(0.0), self.variance(1.0)))


def _hybrid_sample(
    t: np.ndarray,
    alpha: float,
    piecewise: PiecewiseMechanism,
    duchi: DuchiMechanism,
    bits: BitSource,
) -> np.ndarray:
    """HM reports; every branch is drawn for every entry (the draws do not depend on t)."""
    d_out = _duchi_sample(t, math.tanh(duchi.epsilon / 2.0), duchi.output, bits)
    if alpha == 0.0:
        return d_out
    use_pm = bernoulli(bits, t.size, alpha)  # [HM19 §III-C]
    pm_out = _piecewise_sample(t, piecewise.c, piecewise.p_window, piecewise.granularity, bits)
    return np.where(use_pm, pm_out, d_out)
