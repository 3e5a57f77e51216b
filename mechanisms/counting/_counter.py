"""The streaming binary-tree counter: push one value, get the noisy prefix sum ([PAK19] §II-D).

Same tree, noise and draw order as the batch release of :mod:`._tree` (module notes there):
with the same seed both release identical values.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from ..core._budget import Budget, BudgetLedger
from ..core._errors import DomainError
from ..core._noise import LaplaceNoise
from ..core._record import PrivacyRecord
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import (
    charge_ledger,
    check_integer,
    check_ledger,
    check_positive,
    check_seed,
)
from ._analysis import StreamAnalysis
from ._tree import _PROOF, _check_tree_range, _levels
from ._tree_blocks import block_levels, completed_before, level_offsets
from ._tree_estimates import (
    _online_level_variances,
)

__all__ = ["BinaryTreeCounter"]


class BinaryTreeCounter:
    """Streaming BT counter: push one value, get the noisy prefix sum c(σ, i) ([PAK19] §II-D).

    Keeps O(log n) state. Noise is drawn lazily, in the same blocks and order as
    :func:`binary_tree_release`, so both give identical outputs for the same seed.

    Notes
    -----
    A pushed value outside [0, B] (±inf included) is clamped to [0, B], never refused: the
    counter has already released earlier steps, and an exception on one value would reveal
    that event. Only :meth:`analysis` counts the clamps (private; never publish it). What
    cannot be clamped (not a real number, NaN) is refused with a typed error before the step
    is consumed. ``ledger`` is charged ε when the counter is built (before any draw).

    *Privacy*: event-level ε-DP for streams of at most ``n`` values in [0, ``bound``] (same
    argument as :func:`binary_tree_release`; [CSS11], [DNPR10]).

    Examples
    --------
    >>> from mechanisms import binary_tree_prefix_sums
    >>> counter = BinaryTreeCounter(4, epsilon=1.0, bound=2.0, seed=7)
    >>> stream = [1.0, 0.0, 2.0, 1.0]
    >>> out = [counter.push(x) for x in stream]
    >>> out == binary_tree_prefix_sums(stream, epsilon=1.0, bound=2.0, seed=7).tolist()
    True
    """

    def __init__(
        self,
        n: int,
        *,
        epsilon: float,
        bound: float,
        seed: object = None,
        ledger: BudgetLedger | None = None,
    ) -> None:
        owner = "BinaryTreeCounter"
        self.n = check_integer(n, "n", owner, maximum=1 << 52)
        self.epsilon = check_positive(epsilon, "epsilon", owner)
        self.bound = check_positive(bound, "bound", owner)
        bits = check_seed(seed, owner)
        ledger = check_ledger(ledger, owner)
        _check_tree_range(self.n, self.epsilon, self.bound, owner)
        self.seeded = seed is not None
        self.levels = _levels(self.n)
        self.noise = LaplaceNoise(
            sensitivity=self.levels * self.bound,
            epsilon=self.epsilon,
            magnitude=self.n * self.bound,
        )
        self.guarantee = PrivacyGuarantee(
            unit=EventLevel(), budget=Budget(self.epsilon), proof=_PROOF
        )
        charge_ledger(ledger, self.guarantee.budget, owner, self.guarantee.unit)
        self.steps = 0
        self._clamped = 0
        self._bits = bits
        self._s = block_levels(self.levels)
        self._block_size = 1 << self._s
        self._buffer: list[float] = []
        self._offsets: list[int] = []
        self._start = 0
        self._g = self.noise.granularity
        self._top = math.floor(self.bound / self._g)
        self._exact = [0] * self.levels  # exact lattice units of the last completed node per level
        self._node = [0.0] * self.levels  # last completed noisy node per level
        self._slot = [0.0] * (self.levels + 1)  # c(i − 2^tz(i)) for the steps i to come
        self._z = [0.0] * self.levels  # bottom-up estimate of the last completed node
        self._z_left = [0.0] * self.levels  # the one before (left sibling)
        vh = _online_level_variances(self.levels, self.noise.variance)
        v = self.noise.variance
        self._own = [float(vh[h] / v) for h in range(self.levels)]  # weight of the node's own sum
        self._kid = [0.0] + [float(vh[h] / (2.0 * vh[h - 1])) for h in range(1, self.levels)]

    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of the counter's release (unit, ε, B, seeded...)."""
        return PrivacyRecord.from_guarantee(
            self.guarantee,
            mechanism="binary-tree-counter",
            parameters={"n": self.n, "levels": self.levels},
            bound=self.bound,
            seeded=self.seeded,
        )

    def analysis(self) -> StreamAnalysis:
        """How many pushed values were clamped to [0, B] (private: never publish it)."""
        return StreamAnalysis(steps=self.steps, clamped=self._clamped)

    def push(self, x: float) -> float:
        """Add the next value and return the noisy prefix sum c(σ, i).

        ``x`` is clamped to [0, B] (class notes); a non-number or NaN raises a typed error and
        consumes nothing.

        Amortised O(1): the nodes completing at step i are the levels 0..tz(i), and the node
        of level h is x plus the last completed nodes of the levels below it (which tile the
        steps since its start), so no open sum is kept per level; the prefix sum follows
        c(i) = c(i − 2^tz(i)) + node(tz(i)), the batch form's recursion, double for double.
        """
        kind = type(x)
        if kind is not float and (kind is bool or kind is np.bool_ or not isinstance(x, Real)):
            raise DomainError(
                "The 'x' argument of BinaryTreeCounter.push must be a real number. Got "
                f"{kind.__name__}."
            )
        xf = float(x)
        if not 0.0 <= xf <= self.bound:  # out of range, ±inf or NaN: the slow path
            if math.isnan(xf):
                raise DomainError(
                    "The 'x' argument of BinaryTreeCounter.push must be a number, not NaN (a "
                    "NaN cannot be clamped to the bound). Impute missing values before pushing."
                )
            if self.steps < self.n:
                self._clamped += 1
            xf = min(max(xf, 0.0), self.bound)
        i = self.steps
        if i >= self.n:
            raise DomainError(
                f"BinaryTreeCounter was built for n={self.n} values and all have been pushed. "
                "Build a new counter (with a new budget) for a longer stream."
            )
        if i % self._block_size == 0:  # a block of steps starts: draw its nodes' noise
            b = min(i + self._block_size, self.n)
            count = completed_before(b) - completed_before(i)
            self._buffer = self.noise.sample(count, self._bits).tolist()
            self._offsets = level_offsets(b - i, self._s)
            self._start = i
        i += 1
        self.steps = i
        g = self._g
        run = min(max(round(xf / g), 0), self._top)
        tz = (i & -i).bit_length() - 1  # levels 0..tz complete at step i
        exact, node, buf = self._exact, self._node, self._buffer
        z, zl = self._z, self._z_left
        r = i - self._start  # step within the block, 1..S
        y = run * g + buf[r - 1]
        node[0] = y
        zl[0] = z[0]
        z[0] = y
        if tz:
            off, s, own, kid = self._offsets, self._s, self._own, self._kid
            prev = run
            for h in range(1, tz + 1):
                run += exact[h - 1]  # before it is replaced: the previous node of level h − 1
                exact[h - 1] = prev
                prev = run
                # level h ≤ s: the (r >> h)-th node of the block; above s: after its levels
                pos = off[h] + (r >> h) - 1 if h <= s else off[s + 1] + (h - s - 1)
                y = run * g + buf[pos]
                node[h] = y
                # bottom-up estimate ([HRMS10] §4), the batch form's arithmetic
                zl[h] = z[h]
                z[h] = own[h] * y + kid[h] * (zl[h - 1] + z[h - 1])
            exact[tz] = prev
            c = self._slot[tz] + y
            slot = self._slot
            for h in range(tz):
                slot[h] = c
        else:
            exact[0] = run
            c = self._slot[0] + y
        return c

    def _sum(self, per_level: list[float]) -> float:
        total = 0.0
        for h in reversed(range(self.levels)):  # same order of additions as the batch form
            if (self.steps >> h) & 1:
                total += per_level[h]
        return total

    def online_estimate(self) -> float:
        """Bottom-up (online) variance-reduced estimate of the current prefix sum."""
        return self._sum(self._z)

    def variance(self, i: int | None = None) -> float:
        """Exact noise variance of c(σ, i) (default: the current step): popcount(i)·v."""
        i = (
            self.steps
            if i is None
            else check_integer(i, "i", "BinaryTreeCounter.variance", maximum=self.n)
        )
        return i.bit_count() * self.noise.variance
