"""ToPS smoothers: consistent block estimates → one value per time step ([ToPS21] §3, smoother).

The perturber releases one consistent estimate eₖ per *leaf block* of g steps (the sum of the
clipped values of block k). A smoother turns them into per-step values online:

* every step of block k except its last is given a **prediction** pₖ (a per-step value) that
  depends on the released estimates e₀ … eₖ₋₁ only, so it is final the moment the step arrives;
* the last step of block k is given eₖ − (g − 1)·pₖ when block k completes, so **every complete
  block of the output sums to its consistent estimate** (up to one floating-point rounding).

The smoothers differ in their prediction (all divided by g to be per step):

=============  =========================================================================
``recent``     pₖ = eₖ₋₁/g, the previous block ([ToPS21]'s choice)
``mean``       pₖ = mean(e₀ … eₖ₋₁)/g, the running mean
``median``     pₖ = median(e₀ … eₖ₋₁)/g, the running median (robust to noisy blocks)
``exponential`` pₖ = uₖ₋₁/g with u₀ = e₀, uₖ = (1 − s)·uₖ₋₁ + s·eₖ, s = ``smoothing``
=============  =========================================================================

Block 0 has no past: its prediction is the public ``prior`` (ToPS uses θ/2, the middle of the
clipped range [0, θ]). Steps after the last complete block (a trailing partial block) carry the
prediction only. Smoothing reads released values only: it is post-processing, free of privacy
cost. The same incremental code runs in the stream and in the batch, so both give identical
floats whatever the chunking.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from ..core._errors import ParameterError
from ..core._renamed import UNSET, renamed_attribute, renamed_keyword
from ..core._validation import check_choice, check_integer, check_probability

__all__ = ["SMOOTHERS", "Smoother", "smooth_blocks"]

#: The smoothers ToPS offers, ``recent`` (the paper's) first.
SMOOTHERS = ("recent", "mean", "median", "exponential")
#: Default smoothing factor s of the exponential smoother (its weight on the newest block).
DEFAULT_SMOOTHING = 0.25


def __getattr__(name: str) -> float:
    if name == "DEFAULT_ALPHA":  # renamed (issue 12): α is the (w, α) unit's word
        import warnings

        warnings.warn(
            "mechanisms.tops._smoothers.DEFAULT_ALPHA is renamed DEFAULT_SMOOTHING (issue 12).",
            DeprecationWarning,
            stacklevel=2,
        )
        return DEFAULT_SMOOTHING
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_smoother(name: object, owner: str) -> str:
    return check_choice(name, "smoother", owner, SMOOTHERS)


class Smoother:
    """Incremental smoother: holds the prediction for the next block and updates it.

    Parameters
    ----------
    name
        One of :data:`SMOOTHERS`.
    block
        Leaf size g (steps per block).
    prior
        Public per-step prediction for block 0 (before any estimate is released).
    smoothing
        Smoothing factor s ∈ (0, 1] of the exponential smoother, its weight on the newest
        block (ignored by the others). ``alpha`` is its deprecated name.
    """

    __slots__ = ("name", "block", "smoothing", "prediction", "_count", "_sum", "_u", "_lo", "_hi")

    alpha = renamed_attribute("alpha", "smoothing", "Smoother")

    def __init__(
        self,
        name: str,
        *,
        block: int,
        prior: float,
        smoothing: float = UNSET,
        alpha: float = UNSET,
    ) -> None:
        owner = "Smoother"
        smoothing = renamed_keyword(
            smoothing, alpha, new="smoothing", old="alpha", owner=owner, default=DEFAULT_SMOOTHING
        )
        self.name = _check_smoother(name, owner)
        self.block = check_integer(block, "block", owner)
        self.smoothing = check_probability(
            smoothing, "smoothing", owner, closed_low=False, closed_high=True
        )
        prior = float(prior)
        if not math.isfinite(prior):
            raise ParameterError(f"The 'prior' parameter of {owner} must be finite. Got {prior!r}.")
        self.prediction = prior
        """Per-step prediction of the current (open) block."""
        self._count = 0
        self._sum = 0.0
        self._u = 0.0
        self._lo: list[float] = []  # max-heap (negated) of the lower half, for the median
        self._hi: list[float] = []  # min-heap of the upper half

    def feed(self, estimates: np.ndarray) -> np.ndarray:
        """Take newly released block estimates in order; return the prediction after each one.

        ``out[k]`` is the per-step prediction of the block that follows ``estimates[k]``; the
        last entry is the new :attr:`prediction`.
        """
        est = np.asarray(estimates, dtype=np.float64)
        if est.size == 0:
            return np.empty(0)
        g = float(self.block)
        if self.name == "recent":
            out = est / g
        elif self.name == "mean":
            sums = np.cumsum(np.concatenate(([self._sum], est)))[1:]  # sequential additions
            counts = self._count + np.arange(1, est.size + 1, dtype=np.float64)
            self._sum = float(sums[-1])
            out = sums / counts / g
        elif self.name == "median":
            out = np.empty(est.size)
            for k, e in enumerate(est.tolist()):
                out[k] = self._push_median(e) / g
        else:
            out = np.empty(est.size)
            u, a = self._u, self.smoothing
            for k, e in enumerate(est.tolist()):
                u = e if self._count + k == 0 else (1.0 - a) * u + a * e
                out[k] = u / g
            self._u = u
        self._count += est.size
        self.prediction = float(out[-1])
        return out

    def _push_median(self, e: float) -> float:
        lo, hi = self._lo, self._hi
        if not lo or e <= -lo[0]:
            heapq.heappush(lo, -e)
        else:
            heapq.heappush(hi, e)
        if len(lo) > len(hi) + 1:
            heapq.heappush(hi, -heapq.heappop(lo))
        elif len(hi) > len(lo):
            heapq.heappush(lo, -heapq.heappop(hi))
        if len(lo) > len(hi):
            return -lo[0]
        return 0.5 * (-lo[0] + hi[0])


def block_values(
    predictions: np.ndarray, estimates: np.ndarray, block: int, first: int, count: int
) -> np.ndarray:
    """Per-step values of ``count`` consecutive steps starting at step ``first``.

    ``predictions[k]`` is the per-step prediction of block ``first // block + k`` and
    ``estimates[k]`` the estimate of that block when it completes within these steps (blocks
    that complete are exactly the first ``estimates.size`` ones spanned).
    """
    steps = first + np.arange(count, dtype=np.int64)
    rel = steps // block - first // block
    out = predictions[rel].astype(np.float64, copy=True)
    last = (steps + 1) % block == 0
    if estimates.size:
        done = rel[last]
        out[last] = estimates[done] - (block - 1) * predictions[done]
    return out


def smooth_blocks(
    estimates: object,
    *,
    block: int,
    length: int | None = None,
    smoother: str = "recent",
    prior: float = 0.0,
    smoothing: float = UNSET,
    alpha: float = UNSET,
) -> np.ndarray:
    """Per-step values from consistent block estimates ([ToPS21] smoother; module notes).

    Parameters
    ----------
    estimates
        Consistent estimates e₀, e₁, … of consecutive blocks of ``block`` steps.
    block
        Leaf size g.
    length
        Number of steps to produce: at least g·len(estimates) and less than g·(len + 1) (the
        extra steps form a trailing partial block that gets the prediction only). Default
        g·len(estimates).
    smoother
        One of :data:`SMOOTHERS`.
    prior
        Public per-step prediction of block 0.
    smoothing
        Smoothing factor s ∈ (0, 1] of the exponential smoother (default 0.25); ``alpha`` is
        its deprecated name.

    Returns
    -------
    numpy.ndarray
        ``length`` per-step values; every complete block sums to its estimate.

    Examples
    --------
    >>> smooth_blocks([4.0, 8.0], block=2, prior=1.0).tolist()
    [1.0, 3.0, 2.0, 6.0]
    """
    owner = "smooth_blocks"
    smoothing = renamed_keyword(
        smoothing, alpha, new="smoothing", old="alpha", owner=owner, default=DEFAULT_SMOOTHING
    )
    est = np.array(estimates, dtype=np.float64, copy=True)
    if est.ndim != 1 or not np.all(np.isfinite(est)):
        raise ParameterError(
            f"The 'estimates' parameter of {owner} must be a one-dimensional array of finite "
            "floats."
        )
    g = check_integer(block, "block", owner)
    n_full = est.size * g
    total = n_full if length is None else check_integer(length, "length", owner, minimum=0)
    if not n_full <= total < n_full + g:
        raise ParameterError(
            f"The 'length' parameter of {owner} must lie in [{n_full}, {n_full + g - 1}] for "
            f"{est.size} blocks of {g} steps. Got {length!r} instead."
        )
    sm = Smoother(smoother, block=g, prior=prior, smoothing=smoothing)
    preds = np.concatenate(([sm.prediction], sm.feed(est)))
    return block_values(preds, est, g, 0, total)
