"""Binary-tree (BT) continual counting ([CSS11], [DNPR10]; [PAK19] §II-D, Fig. 1).

Tree and noise scale (our derivation; [PAK19]'s "B log₂ n / ε" is approximate)
--------------------------------------------------------------------------------
Only *complete* dyadic nodes are built: level h holds ``n >> h`` nodes, node (h, k) covering the
steps [k·2ʰ + 1 .. (k + 1)·2ʰ]. The prefix [1..i] is the disjoint union of the nodes
(h, (i >> h) − 1) for the set bits h of i (popcount(i) nodes, all complete since they end at or
before i ≤ n). Those levels are 0..⌊log₂ n⌋, so the tree has **L = ⌊log₂ n⌋ + 1 = n.bit_length()**
levels, and L is tight: step 1 lies in the node [1..2ʰ] of every level. For n = 8 this gives
L = 4 (nodes [1..1], [1..2], [1..4], [1..8]), not log₂ 8 = 3: the paper's count undercounts.

Each step lies in at most one node per level, so replacing one value of [0, B] by another moves
at most L node sums by at most B each: the vector of node sums has **L1 sensitivity L·B** and
every node gets :class:`LaplaceNoise` with ``sensitivity=L*B``, ``magnitude=n*B``: Laplace scale
b = (L·B + γ)/ε, variance 2b² up to the lattice correction of ``LaplaceNoise.variance``.

Lattice (floating-point safety). Each input is snapped to the noise lattice γℤ and clipped to
[0, ⌊B/γ⌋γ] ⊂ [0, B] *before* summing; node sums are then exact integers of γ, so the L1
sensitivity is exactly ≤ L·B ≤ L·B + γ (the rounding needs no further slack), and every
released value is an exact double on γℤ. Cost: a deterministic rounding error of at most γ/2
per input (γ ≤ 2⁻²⁴·b), zero for inputs already on the lattice (e.g. integers).

Draw order. Node noise is drawn in one call per block of 2¹⁶ steps for the nodes completing in
it, level-major within the block (``_tree_blocks``).
The streaming :class:`BinaryTreeCounter` and the batch :func:`binary_tree_release` therefore
consume the same bits and, with the same seed, release identical values.

Estimates from the noisy nodes (online, consistent): see :mod:`._tree_estimates`.
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
    check_integer,
    check_ledger,
    check_noise_range,
    check_positive,
    check_seed,
    check_stream,
)
from ._tree_blocks import tree_in_blocks
from ._tree_estimates import (
    _consistent_nodes,
    _consistent_variance_units,
    _online_level_variances,
    _online_nodes,
    _popcounts,
    tree_range_variance,
)

__all__ = [
    "TreeRelease",
    "binary_tree_final_sums",
    "binary_tree_noise",
    "binary_tree_prefix_sums",
    "binary_tree_release",
    "dyadic_cover",
    "tree_range_variance",
]

_PROOF = "[CSS11] binary mechanism, [DNPR10]: node sums have L1 sensitivity L·B; Laplace mechanism"


def _levels(n: int) -> int:
    return int(n).bit_length()  # ⌊log₂ n⌋ + 1


def _node_count(n: int) -> int:
    return 2 * n - int(n).bit_count()


def _check_tree_range(n: int, epsilon: float, bound: float, owner: str) -> None:
    """Refuse (before any draw) a B, ε, n whose node noise or sums leave exact doubles."""
    check_noise_range(
        owner,
        "'bound' and 'epsilon'",
        noise_scale=_levels(n) * bound / epsilon,
        bound=bound,
        released_magnitude=n * bound,
    )


def binary_tree_noise(n: int, *, epsilon: float, bound: float) -> LaplaceNoise:
    """The noise of every node of the BT counter of length ``n`` (see module notes)."""
    n = check_integer(n, "n", "binary_tree_noise")
    eps = check_positive(epsilon, "epsilon", "binary_tree_noise")
    bnd = check_positive(bound, "bound", "binary_tree_noise")
    return LaplaceNoise(sensitivity=_levels(n) * bnd, epsilon=eps, magnitude=n * bnd)


def dyadic_cover(i: int, n: int | None = None) -> list[tuple[int, int]]:
    """The nodes (level h, index k) whose disjoint union is [1..i], highest level first.

    Node (h, k) covers the steps [k·2ʰ + 1 .. (k + 1)·2ʰ]. [PAK19] Fig. 1: ``dyadic_cover(7)``
    is [(2, 0), (1, 2), (0, 6)], i.e. [1..4], [5..6], [7..7].
    """
    i = check_integer(i, "i", "dyadic_cover", maximum=n)
    return [(h, (i >> h) - 1) for h in reversed(range(i.bit_length())) if (i >> h) & 1]


def _lattice_units(values: np.ndarray, noise: LaplaceNoise, bound: float) -> np.ndarray:
    """Inputs as multiples of γ (exact integers in float64), snapped and clipped to [0, ⌊B/γ⌋]."""
    top = math.floor(bound / noise.granularity)
    units = np.multiply(values, 1.0 / noise.granularity)  # exact: γ is a power of two
    np.rint(units, out=units)
    np.clip(units, 0, top, out=units)
    return units


def _prefix_from_nodes(nodes: tuple[np.ndarray, ...], n: int) -> np.ndarray:
    """c(i) = c(i − 2ʰ) + node(h, (i >> h) − 1) with h = trailing zeros of i, level by level from
    the top (the source i − 2ʰ has more trailing zeros, so it is already filled)."""
    out = np.zeros(n + 1, dtype=np.float64)
    for h in reversed(range(len(nodes))):
        step = 1 << h
        targets = out[step : n + 1 : 2 * step]
        m = targets.size
        targets[:] = out[0 : n + 1 : 2 * step][:m] + nodes[h][0 : 2 * m : 2]
    return out[1:]


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeRelease:
    """A BT release of a whole stream: noisy prefix sums, their variance, and the noisy nodes.

    Auditors: ``nodes[h][k]`` is the released noisy sum of node (h, k) = steps
    [k·2ʰ + 1 .. (k + 1)·2ʰ], drawn from ``noise``; ``dyadic_cover(i)`` lists the nodes of c(σ, i).
    """

    prefix_sums: np.ndarray
    """Noisy c(σ, i) for i = 1..n (index i − 1)."""
    nodes: tuple[np.ndarray, ...]
    """Noisy node sums, one read-only array per level h = 0..L−1 (``n >> h`` nodes each)."""
    noise: LaplaceNoise
    """The noise every node received (sensitivity L·B)."""
    scale: float
    """Laplace scale b of each node's noise (not a standard deviation)."""
    levels: int
    """Number of tree levels L = ⌊log₂ n⌋ + 1."""
    epsilon: float
    """Privacy loss ε of the whole release."""
    bound: float
    """Public bound B on every value."""
    guarantee: PrivacyGuarantee
    """Event-level ε-DP ([CSS11], [DNPR10])."""
    seeded: bool = False
    """True when a seed drove the noise: an experiment, not a release."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        for arr in (self.prefix_sums, *self.nodes):
            arr.setflags(write=False)

    @property
    def variance(self) -> np.ndarray:
        """Exact noise variance of each prefix sum: popcount(i)·``noise.variance`` (computed on
        demand: it is public, and storing it would add n doubles to every release)."""
        out = _popcounts(self.n)
        out *= self.noise.variance
        out.setflags(write=False)
        return out

    @property
    def privacy(self) -> PrivacyRecord:
        """The public record of this release (unit, ε, B, mechanism, seeded...)."""
        return PrivacyRecord.from_guarantee(
            self.guarantee,
            mechanism="binary-tree",
            parameters={"n": self.n, "levels": self.levels},
            bound=self.bound,
            seeded=self.seeded,
        )

    def range_sum(self, i: int, j: int) -> RangeSum:
        """Estimated sum of steps i..j (0-based, inclusive): c(σ, j + 1) − c(σ, i), with the
        exact noise standard error (:func:`tree_range_variance`)."""
        i, j = check_range(i, j, first=0, stop=self.n, owner="TreeRelease.range_sum")
        before = self.prefix_sums[i - 1] if i > 0 else 0.0
        var = tree_range_variance(i, j, self.noise.variance)
        return RangeSum(float(self.prefix_sums[j] - before), math.sqrt(var))

    def to_frame(self, index: object = None):
        """One row per step: ``value`` (c(σ, k + 1) − c(σ, k)), ``prefix_sum`` and its noise
        ``std_error``; ``index`` is the input's index (default: a ``step`` RangeIndex)."""
        columns = {
            "value": np.diff(self.prefix_sums, prepend=0.0),
            "prefix_sum": self.prefix_sums,
            "std_error": np.sqrt(self.variance),
        }
        return step_frame(
            columns, n=self.n, time_lag=0, index=index, owner="TreeRelease.to_frame", result=self
        )

    def summary(self) -> str:
        """A short text table of the release (released values and public parameters)."""
        rows = [
            ("steps n", self.n),
            ("bound B", self.bound),
            ("epsilon", self.epsilon),
            ("tree levels L", self.levels),
            ("Laplace scale b per node", self.scale),
            ("released total c(σ, n)", float(self.prefix_sums[-1])),
            ("its std. error (noise)", math.sqrt(float(self.variance[-1]))),
        ]
        return summary_text("Binary-tree release [CSS11] [DNPR10]", rows, result=self)

    def online_nodes(self) -> tuple[np.ndarray, ...]:
        """Bottom-up node estimates zₕ (each known when its node completes)."""
        return _online_nodes(self.nodes, self.noise.variance)

    def online_prefix_sums(self) -> np.ndarray:
        """Prefix sums from the bottom-up estimates (streaming-compatible variance reduction)."""
        return _prefix_from_nodes(self.online_nodes(), self.n)

    def online_variance(self) -> np.ndarray:
        """Exact variance of :meth:`online_prefix_sums`: Σ_{h ∈ bits(i)} vₕ."""
        var = _online_level_variances(self.levels, self.noise.variance)
        out = np.zeros(1 << self.levels, dtype=np.float64)  # index i; bit h set: add vₕ
        for h in range(self.levels):
            out.reshape(-1, 2, 1 << h)[:, 1, :] += var[h]
        return out[1 : self.n + 1]

    def consistent_nodes(self) -> tuple[np.ndarray, ...]:
        """BLUE node estimates ([HRMS10] §4): children sum to parents."""
        return _consistent_nodes(self.online_nodes())

    def consistent_prefix_sums(self) -> np.ndarray:
        """Prefix sums of the BLUE leaves (the cumulative sum of consistent leaf estimates)."""
        return np.cumsum(self.consistent_nodes()[0])

    def consistent_variance(self) -> np.ndarray:
        """Exact variance of :meth:`consistent_prefix_sums` (module notes)."""
        return self.noise.variance * _consistent_variance_units(self.n, self.levels)


def _tree_release(
    values: object,
    *,
    epsilon: float,
    bound: float,
    bits: BitSource,
    owner: str = "binary_tree_release",
    ledger: BudgetLedger | None = None,
    seeded: bool = False,
) -> TreeRelease:
    """Validate everything, charge ``ledger`` (if any), then release the BT tree of ``values``
    with noise from ``bits``."""
    eps = check_positive(epsilon, "epsilon", owner)
    bnd = check_positive(bound, "bound", owner)
    ledger = check_ledger(ledger, owner)
    # Read block by block and not kept: no copy of a float64 input (peak memory, issue 16).
    vals = check_stream(values, "values", owner, bound=bnd, copy=False)
    n = vals.size
    _check_tree_range(n, eps, bnd, owner)
    noise = LaplaceNoise(sensitivity=_levels(n) * bnd, epsilon=eps, magnitude=n * bnd)
    guarantee = PrivacyGuarantee(unit=EventLevel(), budget=Budget(eps), proof=_PROOF)
    charge_ledger(ledger, guarantee.budget, owner, guarantee.unit)
    top = math.floor(bnd / noise.granularity)
    nodes_t, prefix = tree_in_blocks(vals, noise, top, _levels(n), bits)
    return TreeRelease(
        prefix_sums=prefix,
        nodes=nodes_t,
        noise=noise,
        scale=noise.scale,
        levels=_levels(n),
        epsilon=eps,
        bound=bnd,
        guarantee=guarantee,
        seeded=seeded,
    )


def binary_tree_release(
    values: object,
    *,
    epsilon: float,
    bound: float,
    seed: object = None,
    ledger: BudgetLedger | None = None,
) -> TreeRelease:
    """Release every prefix sum of a stream with the BT algorithm ([PAK19] §II-D).

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
    TreeRelease
        Noisy prefix sums, their exact variances, the noisy nodes, and the guarantee.

    Notes
    -----
    c(σ, i) is the sum of the popcount(i) noisy nodes of ``dyadic_cover(i)``; every node gets
    Laplace noise of scale (L·B + γ)/ε, L = ⌊log₂ n⌋ + 1 (module notes). Vectorised: O(n)
    memory and time, 2n − popcount(n) noise draws.

    *Privacy*: event-level ε-DP. Replacing one value changes at most L node sums by at most B
    each (L1 sensitivity L·B of the node vector), which the Laplace mechanism covers
    ([CSS11] binary mechanism, [DNPR10]); prefix sums and the consistent estimates are
    post-processing.

    Examples
    --------
    >>> rel = binary_tree_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, bound=2.0, seed=7)
    >>> rel.levels, rel.prefix_sums.shape, float(rel.variance[3] / rel.variance[0])
    (3, (4,), 1.0)
    """
    owner = "binary_tree_release"
    return _tree_release(
        values,
        epsilon=epsilon,
        bound=bound,
        bits=check_seed(seed, owner),
        owner=owner,
        ledger=ledger,
        seeded=seed is not None,
    )


def binary_tree_prefix_sums(
    values: object,
    *,
    epsilon: float,
    bound: float,
    seed: object = None,
    ledger: BudgetLedger | None = None,
) -> np.ndarray:
    """Noisy prefix sums c(σ, 1..n) of the BT algorithm (see :func:`binary_tree_release`)."""
    owner = "binary_tree_prefix_sums"
    return _tree_release(
        values,
        epsilon=epsilon,
        bound=bound,
        bits=check_seed(seed, owner),
        owner=owner,
        ledger=ledger,
    ).prefix_sums


#: Most noise draws binary_tree_final_sums makes in one call (repetitions × popcount(n)).
_MAX_FINAL_DRAWS = 1 << 28


def binary_tree_final_sums(
    values: object,
    *,
    epsilon: float,
    bound: float,
    repetitions: int = 1,
    seed: object = None,
    ledger: BudgetLedger | None = None,
) -> np.ndarray:
    """``repetitions`` independent draws of the BT final sum c(σ, n), vectorised.

    c(σ, n) only involves the popcount(n) nodes of ``dyadic_cover(n)``, each the exact lattice
    sum of its steps plus one independent node noise. So R repetitions need R·popcount(n)
    draws, not R·(2n − popcount(n)): the [PAK19] §VII-A experiment (20,000 runs at
    n = 25,000,000) takes seconds. Same distribution as ``binary_tree_release(...).
    prefix_sums[-1]``; variance popcount(n)·``binary_tree_noise(n, ...).variance``.

    *Privacy*: each repetition is an event-level ε-DP release of the same data, so a
    ``ledger`` is charged ``repetitions``·ε (sequential composition); at most 2²⁸ draws
    (repetitions × popcount(n)) per call.
    """
    owner = "binary_tree_final_sums"
    eps = check_positive(epsilon, "epsilon", owner)
    bnd = check_positive(bound, "bound", owner)
    reps = check_integer(repetitions, "repetitions", owner, maximum=_MAX_FINAL_DRAWS // 64)
    bits = check_seed(seed, owner)
    ledger = check_ledger(ledger, owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    n = vals.size
    _check_tree_range(n, eps, bnd, owner)
    charge_ledger(ledger, Budget(eps * reps), owner, EventLevel())
    noise = LaplaceNoise(sensitivity=_levels(n) * bnd, epsilon=eps, magnitude=n * bnd)
    total = float(_lattice_units(vals, noise, bnd).sum()) * noise.granularity
    k = n.bit_count()
    return total + noise.sample(reps * k, bits).reshape(reps, k).sum(axis=1)
