"""Repeated draws of Mechanism 1's final sum c(σ, n), vectorised (experiments, [PAK19] §VII).

The paper's accuracy experiments (Figs. 8-11) run Mechanism 1 hundreds of times on one stream
and look at the error of the last prefix sum. A full release builds 2(n − m) tree nodes each
time; the final sum needs far less. With τ the released threshold and γ, γ' the lattices of the
prefix and tree noises (both fixed by τ and public sizes):

    c(σ, n) = [Σ_{i ≤ m} u_γ(σ(i), τ)·γ + Lap_γ(τ/ε₂)]                   ([PAK19] Mech. 1 step 2)
            + [Σ_{i > m} u_γ'(σ(i), τ)·γ' + Σ_{popcount(n − m) nodes} Lap_γ'(L·τ/ε)]  (steps 3-6)

where u_γ(x, τ) = clip(rint(min(x, τ)/γ), 0, ⌊τ/γ⌋) is the lattice snapping of ``pak_release``:
the prefix sum of BT at its last step is the sum of the popcount(n − m) nodes of
``dyadic_cover(n − m)``, which tile the suffix, each an exact lattice sum plus one independent
node noise. So every repetition has exactly the distribution of
``pak_release(...).prefix_sums[-1]`` (same threshold draw, same calibrations, same lattices),
with popcount(n − m) + 2 draws instead of 2(n − m) + 2, and the lattice sums come from one sort
of the stream: O(n log n) once, then O(log n) per repetition. ``tests/mechanisms/
test_pak_final_sums.py`` checks the sums exactly against ``pak_release`` under a zero-noise
probe and the distribution against full releases.

*Privacy*: this is an experiment helper: R repetitions are R releases of the same data
(sequential composition, R·(ε, δ)); seeded runs are not releases.
"""

from __future__ import annotations

import math

import numpy as np

from ..core._noise import LaplaceNoise
from ..core._random import BitSource
from ..core._validation import check_integer
from ..counting._tree import _levels
from ._calibration import pak_threshold_calibration
from ._mechanism1 import _validate
from ._threshold import _release_threshold, mechanism_threshold

__all__ = ["pak_final_sums"]


class _LatticeSums:
    """Σ_i clip(rint(min(x_i, τ)/γ), 0, ⌊τ/γ⌋) for any τ and power of two γ, in O(log n).

    min(x, τ) then rint then clip equals clip(rint(x/γ), 0, ⌊τ/γ⌋) up to ties of τ/γ itself;
    we compute exactly what ``pak_release`` computes: units of min(x, τ) are
    rint(min(x, τ)/γ) = min(rint(x/γ), rint(τ/γ)), then clipped to ⌊τ/γ⌋ (rint is monotone).
    """

    def __init__(self, values: np.ndarray) -> None:
        self._sorted = np.sort(values)
        self._cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def _units(self, gamma: float) -> tuple[np.ndarray, np.ndarray]:
        if gamma not in self._cache:
            units = np.maximum(np.rint(self._sorted / gamma), 0.0)
            csum = np.concatenate([[0.0], np.cumsum(units)])  # exact: integers below 2⁵³
            self._cache[gamma] = (units, csum)
        return self._cache[gamma]

    def __call__(self, tau: float, gamma: float) -> float:
        units, csum = self._units(gamma)
        top = min(np.rint(tau / gamma), math.floor(tau / gamma))
        k = int(np.searchsorted(units, top, side="right"))
        return float(csum[k] + top * (units.size - k)) * gamma


def pak_final_sums(
    values: object,
    *,
    bound: float,
    epsilon: float,
    delta: float,
    time_lag: int,
    repetitions: int,
    seed: object = None,
    eps1_share: float = 0.85,
    lam: float = 0.85,
    p: float = 0.005,
    beta_lt: float = 0.004,
    r: float = 1.5,
    noise: str = "laplace",
    guard: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """``repetitions`` independent draws of Mechanism 1's c(σ, n) and their thresholds τ.

    Same parameters as :func:`~mechanisms.pak_release` (with ``threshold=True``); returns
    ``(final_sums, thresholds)``, arrays of length ``repetitions``. See the module notes for
    why each draw has the distribution of ``pak_release(...).prefix_sums[-1]``.
    """
    bits, params, arr, bnd, eps, dlt, m = _validate(
        values, bound, epsilon, delta, time_lag, seed, None,
        eps1_share, lam, p, beta_lt, r, noise, True, guard=guard,
    )  # fmt: skip
    reps = check_integer(repetitions, "repetitions", "pak_final_sums", maximum=1 << 22)
    eps1 = eps * params.eps1_share
    eps2 = eps - eps1
    prefix, suffix = arr[:m], arr[m:]
    cal = pak_threshold_calibration(
        prefix, bound=bnd, epsilon=eps1, delta=dlt, lam=params.lam, p=params.p,
        beta_lt=params.beta_lt, r=params.r, noise=params.noise,
    )  # fmt: skip
    n_suffix = suffix.size
    levels = _levels(n_suffix)
    k = n_suffix.bit_count()
    prefix_sums, suffix_sums = _LatticeSums(prefix), _LatticeSums(suffix)
    finals = np.empty(reps)
    taus = np.empty(reps)
    for i in range(reps):
        finals[i], taus[i] = _one(cal, bits, bnd, m, eps, eps2, levels, n_suffix, k,
                                  prefix_sums, suffix_sums, params.guard)  # fmt: skip
    return finals, taus


def _one(
    cal, bits: BitSource, bnd, m, eps, eps2, levels, n_suffix, k, prefix_sums, suffix_sums, guard
) -> tuple[float, float]:
    th = _release_threshold(cal, bits, clip=True)  # [PAK19 Mech. 1 step 1]
    tau = float(mechanism_threshold(th.unclipped, bnd, guard=guard))  # as pak_release
    prefix_noise = LaplaceNoise(sensitivity=tau, epsilon=eps2, magnitude=m * tau)
    c_m = prefix_sums(tau, prefix_noise.granularity) + float(prefix_noise.sample(1, bits)[0])
    tree_noise = LaplaceNoise(sensitivity=levels * tau, epsilon=eps, magnitude=n_suffix * tau)
    tree = suffix_sums(tau, tree_noise.granularity) + float(tree_noise.sample(k, bits).sum())
    return c_m + tree, tau
