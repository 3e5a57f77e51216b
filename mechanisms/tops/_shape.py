"""ToPS tree shape by predicted range-query error, smoother included ([ToPS21] §3; tops-notes §2).

[ToPS21]'s pruning rule (:func:`~mechanisms.tops_leaf_size`) charges a partial leaf x²θ²/36, as
if the smoothed values inside a leaf were off by a fraction of θ at every step. On real streams
the smoother's error depends on how much the stream moves from one leaf block to the next, not
on θ: on the household minutes at ε = 0.05 the rule picks g = 256 (3 levels) where g = 4096
errs 1.7× less. This module predicts, for every candidate (leaf size g, levels L) of a fan-out
F, the mean squared error of a uniform random range query over the horizon r,

    MSE(g, L) = v·U(g, L) + (5/3)·v·u_L + 2·D(g) + F₀(g),

* v·U(g, L): the exact noise of the consistent answer over the complete leaves of the queries
  (:func:`~mechanisms.tops._variance.mean_query_units`, v = the node variance at θ, ∝ L²θ²);
* (5/3)·v·u_L: the noise of the two partial leaves (u_L = one consistent leaf's variance in
  node units; planner notes of ``planner/_tops_plan.py``);
* 2·D(g): the smoother's own error at the two ends. With the ``recent`` smoother a query
  that starts or ends p steps into block k has signal error
  H_k(p) = Σ_{t<p} (x_{kg+t} − ē_{k−1}), ē_{k−1} the previous block's per-step mean, and
  D(g) = E_{k,p}[H_k(p)²], p uniform in [0, g). D(1) = 0 (no partial leaves).
* F₀(g): block 0, which has no previous block: its steps are predicted by the public prior θ/2
  (``mechanisms.tops._smoothers``), so a query that starts p steps into it is off by
  p·(θ/2 − μ), μ the block's per-step mean. A uniform random query starts there with
  probability 1 − (1 − g/r)², and E[p²] = (g − 1)(2g − 1)/6; μ is private, and the term is
  taken at its public bound (θ/2 − μ)² ≤ θ²/4 (μ ∈ [0, θ]):
  F₀(g) = (1 − (1 − g/r)²)·(g − 1)(2g − 1)/6·θ²/4. It grows like g³/r: negligible while
  g ≪ r^{1/2}, decisive when r is only a few hundred leaves (issue 23: on 2^20 whole-minute
  durations, ⌊Exp(60)⌋ ≤ 1,440, at ε_θ = ε_r = 1 the rule without it chose g = 2048, L = 2,
  whose queries starting in block 0 erred by up to 1.9·10⁶, and lost 3× to the authors'
  g = 256, L = 3; ``bench/bench_tops_authors.py``).

and takes the minimum. Every term but D is public (shape, θ, ε_r).

How D(g) is estimated: privately, from the prefix, at a stated cost
-------------------------------------------------------------------
D depends on the stream's local variation, which no public input describes (B is "usually
far too large", and a daily cycle is invisible to it). The prefix (the m values the threshold
optimizer reads) is the only data before the tree starts, so the rule spends a share
``shape_share`` (default 1/4) of ε_θ on it, sequentially after θ (the prefix's total stays
ε_θ; the perturber's parallel part is untouched). Squared errors have a sensitivity far above
their size, so the released statistic is the mean absolute error

    A(g) = (1/((K − 1)g))·Σ_{k=1}^{K−1} Σ_{p=0}^{g−1} |H_k(p)|,  K = ⌊m/g⌋ blocks of the prefix
                                                            clipped to the released θ,

and D(g) is predicted as ``SQUARE_RATIO``·E[A(g)² | Â(g)] (2: the measured ratio E[H²]/E[|H|]²
on the household minutes is 1.75–2.5 for g ≥ 256, where D matters; π/2 would be a normal H).
E[A² | Â] is the posterior mean of A² under a flat prior on A ≥ 0 and the Laplace likelihood of
the released Â with the public scale b (:func:`posterior_square`): Â² + 2b² for Â ≫ b and 2b²
for Â ≤ 0. Clipping Â at 0 instead would predict no smoothing error at all for the leaf sizes
whose Â came out negative, and pick them for that reason.
*Sensitivity*: replacing one clipped value x by x' (|x − x'| ≤ θ) in block j moves H_j(p) by ≤ θ
for the ≤ g − 1 values p past it and H_{j+1}(p) by p·θ/g (through ē_j), so Σ_{k,p}|ΔH| ≤
(3/2)(g − 1)θ and |ΔA(g)| ≤ 3(g − 1)θ/(2g(K − 1)); the vector (A(g))_g over the candidate sizes
has L1 sensitivity Δ = Σ_g of those. Each of its d coordinates with g > 1 is snapped to the
noise lattice γ separately, which can add γ per coordinate to the distance of two neighbours'
vectors, so it is released with :class:`~mechanisms.LaplaceNoise` of scale (Δ + d·γ)/ε_shape
(issue 24: one γ was accounted for the ~7 rounded coordinates): ε_shape-DP on the prefix
given θ. Candidates are powers of two g ≤ min(r, m/16)
(at least 16 blocks each, to keep Δ small). The prediction and the choice are post-processing.

When the statistic cannot help, it is not bought (issue 23)
-----------------------------------------------------------
Whatever the data, a released Â(g) ≤ 0 makes the rule predict D(g) = ``SQUARE_RATIO``·2b²,
so the statistic cannot resolve a smoothing term 2·D below its *floor* 8b², b = Δ/ε_shape. Δ
and every public term of MSE(g, L) (noise, partial noise, F₀) are proportional to θ and θ²,
so the floor's ratio to the least public MSE,

    ρ = 8(Δ/ε_shape)² / min_{g,L} [v·U + (5/3)·v·u_L + F₀](g, L),

does not depend on θ: it is a function of m, r, F, ε_r and ε_shape = ``shape_share``·ε_θ
alone (:func:`shape_resolution`), known before any value is read. When ρ > ``RESOLUTION`` =
1/10 the statistic's noise floor alone is more than a tenth of the error it is weighed against,
and the rule spends nothing on it: the threshold gets all of ε_θ, and the shape is the least
public MSE at the released θ (D taken as 0: below the floor it cannot be told apart).
Measured at ε_r = 0.05, m = 2¹⁶ (``docs/results/tops_authors_*.md``): ρ ≈ 1.0–1.3 at
ε_shape = 0.0025 (ε_θ = 0.01), 0.26–0.33 at 0.005 (ε_θ = 0.02), 0.04–0.05 at 0.0125
(ε_θ = 0.05), 0.01 at ε_θ = 0.1; at ε_r = 1, ρ ≤ 0.02 for ε_θ = 1. In the first two the
statistic picked 2048/2 in 31 of 100 runs on i.i.d. durations where 4096/2 errs less, while
its quarter of ε_θ widened the threshold's spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..core._budget import Budget
from ..core._noise import LaplaceNoise, lattice_granularity
from ..core._random import BitSource
from ..core._units import EventLevel, PrivacyGuarantee
from ._tree import _max_levels, max_levels, tops_leaf_size, tops_levels, tops_noise
from ._variance import leaf_variance_units, mean_query_units

__all__ = [
    "DEFAULT_SHAPE_SHARE",
    "SHAPE_RULES",
    "SQUARE_RATIO",
    "TopsShape",
    "first_block_error",
    "leaf_candidates",
    "partial_errors",
    "posterior_square",
    "public_error",
    "shape_errors",
    "shape_resolution",
]

#: ``"smoothing"``: the predicted-MSE rule of this module; ``"paper"``: [ToPS21]'s pruning rule.
SHAPE_RULES = ("smoothing", "paper")
#: Share of ε_θ the smoothing rule spends on the prefix's local variation.
DEFAULT_SHAPE_SHARE = 0.25
#: Predicted E[H²] per E[|H|]² (module notes).
SQUARE_RATIO = 2.0
#: Fewest prefix blocks a candidate leaf size must leave.
MIN_BLOCKS = 16
#: Largest noise floor of the statistic, per least public MSE, at which it is bought.
RESOLUTION = 0.1
_PROOF = (
    "ToPS shape rule: Laplace mechanism on the mean absolute smoothing errors of the clipped "
    "prefix (L1 sensitivity Σ_g 3(g − 1)θ/(2g(K_g − 1)) plus one lattice step per rounded "
    "coordinate)"
)


def leaf_candidates(time_lag: int, horizon: int) -> np.ndarray:
    """Powers of two g ≤ min(r, m/16), 1 included (module notes; public inputs only)."""
    top = max(1, min(int(horizon), int(time_lag) // MIN_BLOCKS))
    return 2 ** np.arange(int(math.log2(top)) + 1, dtype=np.int64)


def partial_errors(values: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A(g), D(g)) of the ``recent`` smoother for every g (DATA-DEPENDENT: never release).

    A is the mean |H_k(p)|, D the mean H_k(p)² over blocks k ≥ 1 of ``values`` and p ∈ [0, g)
    (module notes); NaN where ``values`` holds fewer than two blocks of g.
    """
    x = np.asarray(values, dtype=np.float64)
    a = np.full(len(sizes), np.nan)
    d = np.full(len(sizes), np.nan)
    for n, g in enumerate(np.asarray(sizes).tolist()):
        blocks = x.size // g
        if g == 1 and blocks >= 2:
            a[n] = d[n] = 0.0
            continue
        if blocks < 2:
            continue
        b = x[: blocks * g].reshape(blocks, g)
        steps = b[1:] - b[:-1].mean(axis=1, keepdims=True)
        h = np.cumsum(steps[:, :-1], axis=1)  # H_k(p) for p = 1..g−1 (H_k(0) = 0)
        a[n] = float(np.abs(h).sum() / (steps.size))
        d[n] = float(np.square(h).sum() / (steps.size))
    return a, d


def posterior_square(released: np.ndarray, scale: float) -> np.ndarray:
    """E[A² | Â] for a flat prior on A ≥ 0 and Â = A + Laplace(b) (module notes).

    With y = Â and e = exp(−max(y, 0)/b): (2y⁺² + 4b² − 2b²e)/(2 − e), which is 2b² at y ≤ 0
    and tends to y² + 2b² as y/b grows (integrate A² e^{−|A − y|/b} over A ≥ 0 on [0, y] and
    [y, ∞)).
    """
    y = np.maximum(np.asarray(released, dtype=np.float64), 0.0)
    b = float(scale)
    e = np.exp(-y / b)
    return (2.0 * y * y + 4.0 * b * b - 2.0 * b * b * e) / (2.0 - e)


def deviation_sensitivity(sizes: np.ndarray, time_lag: int, threshold: float) -> float:
    """L1 sensitivity of (A(g))_g on a prefix of m values clipped to θ (module notes)."""
    total = 0.0
    for g in np.asarray(sizes).tolist():
        if g > 1:
            total += 1.5 * (g - 1) * threshold / (g * (time_lag // g - 1))
    return total


def shape_resolution(
    *,
    time_lag: int,
    horizon: int,
    epsilon_perturb: float,
    fanout: int,
    epsilon: float,
    levels: int | None = None,
) -> float:
    """ρ: the statistic's noise floor 8(Δ/ε)² per least public MSE (module notes).

    Public inputs only (m, r, ε_r, F, ε = the statistic's budget); θ cancels, so both are
    taken at θ = 1. Validated inputs; ``inf`` with fewer than two candidate sizes.
    """
    sizes = leaf_candidates(time_lag, horizon)
    if sizes.size < 2:
        return math.inf
    b = deviation_sensitivity(sizes, time_lag, 1.0) / epsilon
    return 8.0 * b * b / public_error(
        horizon=horizon, epsilon_perturb=epsilon_perturb, fanout=fanout, sizes=sizes,
        levels=levels,
    )  # fmt: skip


def public_error(
    *,
    horizon: int,
    epsilon_perturb: float,
    fanout: int,
    sizes: np.ndarray,
    levels: int | None = None,
) -> float:
    """The least public MSE(g, L) per θ² over g in ``sizes`` (noise, partial noise and F₀, D
    taken as 0; every term ∝ θ²). Public inputs only (validated); cached, as every stream and
    every simulated run of the planner asks for the same shapes."""
    gs = tuple(int(g) for g in np.asarray(sizes).tolist())
    lv = None if levels is None else int(levels)
    return _public_error(int(horizon), float(epsilon_perturb), int(fanout), gs, lv)


@lru_cache(maxsize=1024)
def _public_error(horizon: int, epsilon: float, fanout: int, sizes: tuple, levels) -> float:
    public = shape_errors(
        horizon=horizon, epsilon=epsilon, threshold=1.0, fanout=fanout,
        sizes=np.array(sizes, dtype=np.int64), smoothing=np.zeros(len(sizes)), levels=levels,
    )  # fmt: skip
    return min(e.mse for e in public)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeError:
    """Predicted range-query MSE of one tree shape (module notes)."""

    leaf_size: int
    fanout: int
    levels: int
    noise: float
    """v·U(g, L): noise over the complete leaves."""
    partial_noise: float
    """(5/3)·v·u_L: noise of the two partial leaves."""
    smoothing: float
    """2·D(g): the smoother's error at the two ends."""
    first_block: float = 0.0
    """F₀(g): block 0's prior θ/2 at its public bound (module notes)."""

    @property
    def mse(self) -> float:
        """noise + partial_noise + smoothing + first_block."""
        return self.noise + self.partial_noise + self.smoothing + self.first_block


def first_block_error(leaf_size: int, horizon: int, threshold: float) -> float:
    """F₀(g) = (1 − (1 − g/r)²)·(g − 1)(2g − 1)/6·θ²/4 (module notes; public inputs)."""
    g, r = float(leaf_size), float(horizon)
    start = 1.0 - (1.0 - min(g, r) / r) ** 2
    return start * (g - 1.0) * (2.0 * g - 1.0) / 6.0 * threshold * threshold / 4.0


def shape_errors(
    *,
    horizon: int,
    epsilon: float,
    threshold: float,
    fanout: int,
    sizes: np.ndarray,
    smoothing: np.ndarray,
    levels: int | None = None,
) -> list[ShapeError]:
    """Predicted MSE of every (g, L) with g in ``sizes`` (D(g) = ``smoothing``; NaN: skipped)
    and 1 ≤ L ≤ the levels of one tree covering r (or L = ``levels``). Validated inputs."""
    out = []
    for g, dg in zip(np.asarray(sizes).tolist(), np.asarray(smoothing).tolist(), strict=True):
        if not math.isfinite(dg):
            continue
        top = min(_max_levels(horizon, g, fanout), max_levels(fanout))
        for lv in range(1, top + 1) if levels is None else (levels,):
            v = tops_noise(threshold=threshold, epsilon=epsilon, levels=lv, tree_size=1).variance
            out.append(
                ShapeError(
                    leaf_size=g,
                    fanout=fanout,
                    levels=lv,
                    noise=v * mean_query_units(horizon, g, fanout, lv),
                    partial_noise=5.0 / 3.0 * v * leaf_variance_units(lv, fanout),
                    smoothing=2.0 * dg,
                    first_block=first_block_error(g, horizon, threshold),
                )
            )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TopsShape:
    """The tree shape chosen by the smoothing rule, with the released statistic."""

    leaf_size: int
    """g, the chosen leaf size."""
    levels: int
    """L, the chosen number of levels."""
    predicted_mse: float
    """Predicted range-query MSE of the chosen shape, truncation bias excluded."""
    sizes: np.ndarray
    """The public candidate leaf sizes."""
    deviation: np.ndarray
    """Released noisy A(g) per candidate (mean |smoothing error| of a partial leaf); NaN
    when the statistic was not bought."""
    epsilon: float
    """ε spent on the prefix for the shape (0 when the statistic was not bought)."""
    noise: LaplaceNoise | None
    """The noise added to A (sensitivity Δ, ε); None when the statistic was not bought."""
    guarantee: PrivacyGuarantee | None
    """Event-level ε on the prefix (given the released θ); None when nothing was spent."""
    resolution: float = 0.0
    """ρ, the statistic's noise floor per least public MSE (public; module notes)."""

    @property
    def statistic(self) -> bool:
        """Whether the shape statistic was released (ρ ≤ :data:`RESOLUTION`)."""
        return self.noise is not None

    def __post_init__(self) -> None:
        for arr in (self.sizes, self.deviation):
            arr.setflags(write=False)


def initial_shape(
    *,
    deferred: bool,
    horizon: int,
    epsilon_perturb: float,
    fanout: int,
    sizes: np.ndarray,
    leaf_size: int | None,
    levels: int | None,
) -> tuple[int | None, int | None, int, int]:
    """(g, L, most levels, largest tree size) of a stream before θ (validated inputs).

    While the smoothing rule waits for θ (``deferred``), g is None and L is None unless given,
    and the bounds cover every candidate shape (for the noise-range checks); otherwise g and L
    are the given ones or [ToPS21]'s rule (:func:`tops_leaf_size`, :func:`tops_levels`).
    """
    if deferred:
        shapes = []
        for g in np.asarray(sizes).tolist():
            top = min(_max_levels(horizon, g, fanout), max_levels(fanout))
            shapes.append((top if levels is None else int(levels), g))
        most = max(lv for lv, _ in shapes)
        tree = max(g * fanout ** (lv - 1) for lv, g in shapes)
        return None, None if levels is None else int(levels), most, tree
    g = tops_leaf_size(horizon, epsilon_perturb, fanout) if leaf_size is None else int(leaf_size)
    lv = tops_levels(horizon, g, fanout) if levels is None else int(levels)
    return g, lv, lv, g * fanout ** (lv - 1)


def release_deviation(
    prefix: np.ndarray, threshold: float, sizes: np.ndarray, epsilon: float, bits: BitSource
) -> tuple[np.ndarray, LaplaceNoise]:
    """The ε-DP release of (A(g))_g on the prefix clipped to θ (module notes): Laplace noise
    of the vector's L1 sensitivity. Internal (validated inputs)."""
    m = int(prefix.size)
    exact, _ = partial_errors(np.minimum(prefix, threshold), sizes)
    delta = deviation_sensitivity(sizes, m, threshold)
    magnitude = float(sizes[-1]) * threshold
    # Every coordinate with g > 1 is snapped to the lattice on its own, and each snap can add
    # γ to the L1 distance of two neighbours' vectors: the released vector's sensitivity is
    # Δ + d·γ (d such coordinates; A(1) ≡ 0 is on the lattice for both). LaplaceNoise adds one
    # γ itself, so it is given Δ + (d − 1)·γ on a lattice fixed from Δ/ε (public) first.
    gamma = lattice_granularity(delta / epsilon, magnitude)
    rounded = int(np.count_nonzero(np.asarray(sizes) > 1))
    noise = LaplaceNoise(
        sensitivity=delta + max(rounded - 1, 0) * gamma,
        epsilon=epsilon,
        magnitude=magnitude,
        granularity=gamma,
    )
    return noise.release(exact, bits), noise


def choose_shape(
    prefix: np.ndarray,
    *,
    threshold: float,
    horizon: int,
    epsilon_perturb: float,
    fanout: int,
    epsilon: float,
    bits: BitSource,
    levels: int | None = None,
    resolution: float = 0.0,
) -> TopsShape:
    """Release A(g) of the clipped prefix (ε) and take the shape of least predicted MSE.

    Internal (validated inputs, at least two candidate sizes); module notes. ``epsilon`` = 0:
    the statistic is not bought (ρ > :data:`RESOLUTION`), nothing is drawn and D is taken as 0.
    """
    sizes = leaf_candidates(int(prefix.size), horizon)
    if epsilon > 0.0:
        released, noise = release_deviation(prefix, threshold, sizes, epsilon, bits)
        released[sizes == 1] = 0.0  # public: a leaf of one step has no partial leaf
        square = posterior_square(released, noise.scale)  # post-processing
        square[sizes == 1] = 0.0
    else:  # public inputs and θ only
        released, noise, square = np.full(sizes.size, np.nan), None, np.zeros(sizes.size)
    errs = shape_errors(
        horizon=horizon,
        epsilon=epsilon_perturb,
        threshold=threshold,
        fanout=fanout,
        sizes=sizes,
        smoothing=SQUARE_RATIO * square,
        levels=levels,
    )
    best = min(errs, key=lambda e: e.mse)
    return TopsShape(
        leaf_size=best.leaf_size,
        levels=best.levels,
        predicted_mse=best.mse,
        sizes=sizes,
        deviation=released,
        epsilon=epsilon,
        noise=noise,
        guarantee=None
        if noise is None
        else PrivacyGuarantee(unit=EventLevel(), budget=Budget(epsilon), proof=_PROOF),
        resolution=resolution,
    )
