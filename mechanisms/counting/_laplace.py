"""Simple baselines for continual counting: Laplace noise on every value, then cumulate.

The other baseline of [PAK19] is BT itself with the full bound B (:func:`binary_tree_release`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core._budget import Budget, BudgetLedger
from ..core._noise import LaplaceNoise
from ..core._random import BitSource
from ..core._record import PrivacyRecord
from ..core._results import RangeSum, check_range, step_frame, summary_text
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import (
    charge_ledger,
    check_ledger,
    check_noise_range,
    check_positive,
    check_seed,
    check_stream,
)

__all__ = ["LaplaceRelease", "laplace_prefix_sums"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LaplaceRelease:
    """Per-value Laplace release of a stream, cumulated into prefix sums."""

    prefix_sums: np.ndarray
    """Noisy c(σ, i) for i = 1..n (index i − 1): the cumulative sum of ``values``."""
    variance: np.ndarray
    """Exact noise variance of each prefix sum: i·``noise.variance``."""
    values: np.ndarray
    """The released noisy values σ(i) + noise (lattice-valued)."""
    noise: LaplaceNoise
    """The noise every value received (sensitivity B)."""
    scale: float
    """Laplace scale b = (B + γ)/ε of each value's noise (not a standard deviation)."""
    epsilon: float
    """Privacy loss ε of the whole release."""
    bound: float
    """Public bound B on every value."""
    guarantee: PrivacyGuarantee
    """Event-level ε-DP (parallel composition over steps)."""
    seeded: bool = False
    """True when a seed drove the noise: an experiment, not a release."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        for arr in (self.prefix_sums, self.variance, self.values):
            arr.setflags(write=False)

    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of this release (unit, ε, B, mechanism, seeded...)."""
        return PrivacyRecord.from_guarantee(
            self.guarantee,
            mechanism="laplace-per-value",
            parameters={"n": self.n},
            bound=self.bound,
            seeded=self.seeded,
        )

    def range_sum(self, i: int, j: int) -> RangeSum:
        """Estimated sum of steps i..j (0-based, inclusive): c(σ, j + 1) − c(σ, i), with its
        noise standard error √((j − i + 1)·``noise.variance``)."""
        i, j = check_range(i, j, first=0, stop=self.n, owner="LaplaceRelease.range_sum")
        before = self.prefix_sums[i - 1] if i > 0 else 0.0
        std = math.sqrt((j - i + 1) * self.noise.variance)
        return RangeSum(float(self.prefix_sums[j] - before), std)

    def to_frame(self, index: object = None):
        """One row per step: ``value``, ``prefix_sum`` and the prefix sum's ``std_error``."""
        columns = {
            "value": self.values,
            "prefix_sum": self.prefix_sums,
            "std_error": np.sqrt(self.variance),
        }
        return step_frame(
            columns,
            n=self.n,
            time_lag=0,
            index=index,
            owner="LaplaceRelease.to_frame",
            result=self,
        )

    def summary(self) -> str:
        """A short text table of the release (released values and public parameters)."""
        rows = [
            ("steps n", self.n),
            ("bound B", self.bound),
            ("epsilon", self.epsilon),
            ("Laplace scale b per value", self.scale),
            ("released total c(σ, n)", float(self.prefix_sums[-1])),
            ("its std. error (noise)", math.sqrt(float(self.variance[-1]))),
        ]
        return summary_text("Laplace release (per value, cumulated)", rows, result=self)


def _laplace_release(
    values: object,
    *,
    epsilon: float,
    bound: float,
    bits: BitSource,
    owner: str,
    ledger: BudgetLedger | None = None,
    seeded: bool = False,
) -> LaplaceRelease:
    eps = check_positive(epsilon, "epsilon", owner)
    bnd = check_positive(bound, "bound", owner)
    ledger = check_ledger(ledger, owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    n = vals.size
    check_noise_range(
        owner, "'bound' and 'epsilon'", noise_scale=bnd / eps, bound=bnd, released_magnitude=n * bnd
    )
    guarantee = PrivacyGuarantee(
        unit=EventLevel(),
        budget=Budget(eps),
        proof="Laplace mechanism per value (sensitivity B) + parallel composition",
    )
    charge_ledger(ledger, guarantee.budget, owner, guarantee.unit)
    noise = LaplaceNoise(sensitivity=bnd, epsilon=eps, magnitude=bnd)
    noisy = noise.release(vals, bits)
    return LaplaceRelease(
        prefix_sums=np.cumsum(noisy),
        variance=np.arange(1, n + 1, dtype=np.float64) * noise.variance,
        values=noisy,
        noise=noise,
        scale=noise.scale,
        epsilon=eps,
        bound=bnd,
        guarantee=guarantee,
        seeded=seeded,
    )


def laplace_prefix_sums(
    values: object,
    *,
    epsilon: float,
    bound: float,
    seed: object = None,
    ledger: BudgetLedger | None = None,
) -> LaplaceRelease:
    """Release every value with Laplace noise of scale B/ε, then cumulate ([PAK19] §II-D).

    Parameters
    ----------
    values
        The stream σ(1..n), every value in [0, ``bound``]; finite, non-empty.
    epsilon
        Privacy loss ε > 0 of the whole release.
    bound
        Public bound B > 0 on every value.
    seed
        ``None`` (secure source, for real releases), an int (reproducible, not for release) or
        a bit source object.
    ledger
        Optional :class:`~mechanisms.BudgetLedger`, charged ε (event-level unit) after every
        argument is validated and before any draw.

    Returns
    -------
    LaplaceRelease
        Noisy values, their prefix sums and the exact variance i·Var(noise) of c(σ, i).

    Notes
    -----
    The error of c(σ, i) grows like √i (standard deviation √(2i)·B/ε), against
    polylog(n) for BT: this is the baseline BT improves on for long streams.

    *Privacy*: event-level ε-DP. Each value is released once, by the Laplace mechanism with
    sensitivity B (the lattice rounding is accounted in :class:`LaplaceNoise`); the releases read
    disjoint steps, so they compose in parallel (McSherry 2009, Thm. 4) to ε. Prefix sums are
    post-processing.

    Examples
    --------
    >>> rel = laplace_prefix_sums([1.0, 0.0, 2.0], epsilon=1.0, bound=2.0, seed=3)
    >>> rel.prefix_sums.shape, float(rel.variance[2] / rel.variance[0])
    ((3,), 3.0)
    """
    owner = "laplace_prefix_sums"
    return _laplace_release(
        values,
        epsilon=epsilon,
        bound=bound,
        bits=check_seed(seed, owner),
        owner=owner,
        ledger=ledger,
        seeded=seed is not None,
    )
