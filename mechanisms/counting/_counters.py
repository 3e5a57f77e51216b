"""One interface over the continual counters: release, exact variance, and the best for a unit.

Counters (names accepted by ``counter=``):

* ``"binary_tree"``: the paper's BT ([PAK19] §II-D), prefix sums from the popcount(i) raw nodes;
  Var = popcount(i)·v (:mod:`._tree`). Pure ε; streaming (:class:`BinaryTreeCounter`).
* ``"binary_tree_online"``: the same noisy nodes, bottom-up inverse-variance estimates
  (Honaker 2015; [HRMS10] §4 first pass); Var = Σ_{h ∈ bits(i)} vₕ. Pure ε; streaming
  (:meth:`BinaryTreeCounter.online_estimate`).
* ``"binary_tree_consistent"``: the same noisy nodes, the least-squares (BLUE) leaves
  ([HRMS10] §4): the best linear unbiased estimate of every prefix from the nodes. Pure ε;
  batch only (the top-down pass needs the whole tree).
* ``"kary_tree"``: the k-ary tree with negative digits ([APT24], :mod:`._kary`), k chosen
  from n (public); Var = (Σₕ|dₕ(t)|)·v. Pure ε; streaming (:class:`KaryTreeCounter`).
* ``"kary_tree_consistent"``: the same k-ary blocks, the least-squares (BLUE) leaves over the
  complete forest (:func:`kary_least_squares_units`); pure ε; batch only.
* ``"smooth_binary"``: the smooth binary mechanism with discrete Gaussian noise
  (:mod:`._smooth`, [AP23]), calibrated by the analytic Gaussian at (ε, δ); needs δ > 0;
  streaming (:class:`SmoothBinaryCounter`); the same variance k·σ² at every step. Its estimate
  is the plain sum of the k cover nodes (unbiased; no least-squares pass over its nodes).
* ``"sqrt_factorisation"``: the square-root matrix factorisation A = C·C ([FHU23],
  :mod:`._factorisation`) with discrete Gaussian noise on a lattice; needs δ > 0; continual
  (lower triangular); batch by FFT, streaming in O(t) a step (:class:`SqrtFactorisationCounter`).
* ``"blt"``: a buffered linear Toeplitz factorisation ([DMRST24], :mod:`._blt`) fitted offline
  to within 1% of the square root's worst step; needs δ > 0; continual, streaming in O(d) a
  step (:class:`BLTCounter`).

Continual and batch. A *continual* counter's release at t reads only steps ≤ t (it could be
published at t); the two ``*_consistent`` counters are *batch*: their least squares read nodes
completed after t. :func:`best_counter` takes ``release="batch"`` (every counter: the whole
stream is released at once, as Mechanism 1 and ToPS do here) or ``"continual"``.

All post-processing of one set of noisy values: choosing an estimate costs no privacy. The
variances are exact functions of public inputs (n, ε, δ, B), so :func:`best_counter` may use
them before any data is seen.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ..core._errors import ParameterError
from ..core._random import BitSource
from ..core._units import PrivacyGuarantee
from ..core._validation import (
    check_integer,
    check_positive,
    check_probability,
    check_stream,
)
from ._blt import BLTRelease, _blt_release, blt_variance
from ._factorisation import (
    SqrtFactorisationRelease,
    _sqrt_release,
    sqrt_coefficients,
    sqrt_factorisation_variance,
)
from ._kary import (
    KaryTreeRelease,
    _digits,
    _kary_release,
    best_fanout,
    kary_least_squares_units,
    kary_noise,
    kary_variance_units,
)
from ._open_blt import _unbounded_blt_release, unbounded_blt_variance
from ._smooth import SmoothBinaryRelease, _smooth_release, smooth_binary_noise
from ._tree import TreeRelease, _levels, _tree_release, binary_tree_noise
from ._tree_estimates import (
    _consistent_variance_units,
    _online_level_variances,
    _popcounts,
)
from ._unbounded import (
    UnboundedKaryRelease,
    _unbounded_release,
    unbounded_kary_range_variance,
    unbounded_kary_variance,
)

__all__ = [
    "COUNTERS",
    "CounterRelease",
    "best_counter",
    "counter_end_variance",
    "counter_release",
    "counter_variance",
    "tree_counter_release",
]

#: The counters of the family, in the order :func:`best_counter` breaks ties.
COUNTERS = (
    "binary_tree",
    "binary_tree_online",
    "binary_tree_consistent",
    "kary_tree",
    "kary_tree_consistent",
    "smooth_binary",
    "sqrt_factorisation",
    "blt",
)
#: Counters that need no stream length (:mod:`._unbounded`, :mod:`._open_blt`): accepted by
#: name, never chosen by :func:`best_counter` (a counter sized to a known n is better).
OPEN_COUNTERS = ("unbounded", "unbounded_blt")
#: Counters that need δ > 0.
_APPROXIMATE = ("smooth_binary", "sqrt_factorisation", "blt", "unbounded_blt")
#: Counters whose estimate at t reads nodes completed after t (batch only).
_BATCH_ONLY = ("binary_tree_consistent", "kary_tree_consistent")
#: Longest stream of the counters that have one (the factorisations' lattice and constants).
_MAX_LENGTH = {"sqrt_factorisation": 1 << 26, "blt": 1 << 24}


def check_counter(counter: object, owner: str, *, delta: float = 0.0) -> str:
    """Return ``counter`` if it names a counter usable at this δ (``"auto"`` and the
    :data:`OPEN_COUNTERS` allowed)."""
    if counter != "auto" and counter not in COUNTERS and counter not in OPEN_COUNTERS:
        raise ParameterError(
            f"The 'counter' parameter of {owner} must be one of "
            f"{('auto', *COUNTERS, *OPEN_COUNTERS)}. Got {counter!r} instead."
        )
    if counter in _APPROXIMATE and not delta > 0.0:
        raise ParameterError(
            f"The 'counter' parameter of {owner} is {counter!r}, which needs a 'delta' in "
            "(0, 1) (Gaussian noise). Got delta=0. Pass a δ such as 1/n², or a tree "
            "counter for pure ε-DP."
        )
    return str(counter)


def _online_units(n: int) -> np.ndarray:
    levels = _levels(n)
    var = _online_level_variances(levels, 1.0)
    out = np.zeros(1 << levels, dtype=np.float64)
    for h in range(levels):
        out.reshape(-1, 2, 1 << h)[:, 1, :] += var[h]
    return out[1 : n + 1]


def _checked(counter, n, epsilon, bound, delta, owner: str) -> tuple[str, int, float, float, float]:
    n = check_integer(n, "n", owner)
    eps = check_positive(epsilon, "epsilon", owner)
    bnd = check_positive(bound, "bound", owner)
    dlt = check_probability(delta, "delta", owner)
    return check_counter(counter, owner, delta=dlt), int(n), float(eps), float(bnd), float(dlt)


def counter_end_variance(
    counter: str, n: int, *, epsilon: float, bound: float, delta: float = 0.0
) -> float:
    """Exact noise variance of the last prefix sum c(σ, n): :func:`counter_variance`'s last entry.

    What Mechanism 1's error, Eq. 16 and :func:`best_counter` depend on. The pure-ε counters'
    variance is (units at n) x (one node's noise variance); the units are O(n) to compute
    (seconds at n = 2.5·10⁷) and do not depend on ε or B, so they are memoised per (counter, n):
    a pure function of public inputs, which the planner asks for many times; floats only.
    """
    counter, n, eps, bnd, dlt = _checked(counter, n, epsilon, bound, delta, "counter_end_variance")
    if counter == "auto":
        counter = best_counter(n, epsilon=eps, bound=bnd, delta=dlt)
    if counter == "smooth_binary":
        noise, _, _, _, k = smooth_binary_noise(n, epsilon=eps, delta=dlt, bound=bnd)
        return float(k * noise.variance)
    if counter == "unbounded":  # closed forms at the one step n (no n in the counter)
        return float(unbounded_kary_variance(np.array([n]), epsilon=eps, bound=bnd)[0])
    if counter == "unbounded_blt":
        return float(unbounded_blt_variance(n, epsilon=eps, delta=dlt, bound=bnd)[0])
    if counter in ("sqrt_factorisation", "blt"):
        return float(counter_variance(counter, n, epsilon=eps, bound=bnd, delta=dlt)[-1])
    if counter in ("kary_tree", "kary_tree_consistent"):
        node = kary_noise(n, epsilon=eps, bound=bnd, fanout=best_fanout(n)).variance
    else:
        node = binary_tree_noise(n, epsilon=eps, bound=bnd).variance
    return float(_end_units(counter, n) * node)


@functools.lru_cache(maxsize=256)
def _end_units(counter: str, n: int) -> float:
    """The last entry of a pure-ε counter's variance in units of one node's noise variance."""
    if counter in ("kary_tree", "kary_tree_consistent"):
        units = kary_variance_units if counter == "kary_tree" else kary_least_squares_units
        return float(units(n, best_fanout(n))[-1])
    if counter == "binary_tree":
        return float(_popcounts(n)[-1])
    if counter == "binary_tree_online":
        return float(_online_units(n)[-1])
    return float(_consistent_variance_units(n, _levels(n))[-1])


def counter_variance(
    counter: str, n: int, *, epsilon: float, bound: float, delta: float = 0.0
) -> np.ndarray:
    """Exact noise variance of every prefix sum i = 1..n of ``counter`` (public inputs only)."""
    counter, n, eps, bnd, dlt = _checked(counter, n, epsilon, bound, delta, "counter_variance")
    if counter == "auto":
        counter = best_counter(n, epsilon=eps, bound=bnd, delta=dlt)
    if counter == "smooth_binary":
        noise, _, _, _, k = smooth_binary_noise(n, epsilon=eps, delta=dlt, bound=bnd)
        return np.full(n, k * noise.variance)
    if counter == "sqrt_factorisation":
        return sqrt_factorisation_variance(n, epsilon=eps, delta=dlt, bound=bnd)
    if counter == "unbounded":  # closed forms, no n (steps 1..n of the open counters)
        return unbounded_kary_variance(np.arange(1, n + 1), epsilon=eps, bound=bnd)
    if counter == "unbounded_blt":
        return unbounded_blt_variance(np.arange(1, n + 1), epsilon=eps, delta=dlt, bound=bnd)
    if counter == "blt":
        return blt_variance(n, epsilon=eps, delta=dlt, bound=bnd)
    if counter in ("kary_tree", "kary_tree_consistent"):
        k = best_fanout(n)
        units = (kary_variance_units if counter == "kary_tree" else kary_least_squares_units)(n, k)
        return units * kary_noise(n, epsilon=eps, bound=bnd, fanout=k).variance
    v = binary_tree_noise(n, epsilon=eps, bound=bnd).variance
    if counter == "binary_tree":
        return _popcounts(n) * v
    if counter == "binary_tree_online":
        return _online_units(n) * v
    return _consistent_variance_units(n, _levels(n)) * v


def best_counter(
    n: int,
    *,
    epsilon: float,
    bound: float,
    delta: float = 0.0,
    at: str = "end",
    release: str = "batch",
) -> str:
    """The counter with the smallest exact variance: at step n (``at="end"``, what Mechanism 1's
    final error depends on), on average over the steps (``at="mean"``) or at the worst step
    (``at="max"``, what a continual release guarantees at every t). Only counters valid
    at this δ compete (pure ε when δ = 0); ``release="continual"`` keeps the counters whose
    estimate at t reads only steps ≤ t, ``"batch"`` (a stream released at once, as Mechanism 1
    and ToPS do) every counter. Public: no data involved."""
    if at not in ("end", "mean", "max"):
        raise ParameterError(
            "The 'at' parameter of best_counter must be 'end', 'mean' or 'max'. Got "
            f"{at!r} instead."
        )
    if release not in ("batch", "continual"):
        raise ParameterError(
            "The 'release' parameter of best_counter must be 'batch' or 'continual'. Got "
            f"{release!r} instead."
        )
    best, best_v = "binary_tree", math.inf
    for name in COUNTERS:
        if name in _APPROXIMATE and not delta > 0.0:
            continue
        if release == "continual" and name in _BATCH_ONLY:
            continue
        if n > _MAX_LENGTH.get(name, n):
            continue
        if at == "end":
            value = counter_end_variance(name, n, epsilon=epsilon, bound=bound, delta=delta)
        else:
            var = counter_variance(name, n, epsilon=epsilon, bound=bound, delta=delta)
            value = float(var.mean() if at == "mean" else var.max())
        if value < best_v:
            best, best_v = name, value
    return best


@dataclass(frozen=True, slots=True, kw_only=True)
class CounterRelease:
    """Prefix sums released by one counter, their exact variances, and the guarantee."""

    counter: str
    """The counter's name (one of :data:`COUNTERS`)."""
    prefix_sums: np.ndarray
    """The estimate of c(σ, i) for i = 1..n (index i − 1)."""
    variance: np.ndarray
    """Exact noise variance of each prefix sum."""
    tree: TreeRelease | None
    """The BT release (its noisy nodes) for the tree counters; None otherwise."""
    smooth: SmoothBinaryRelease | None = None
    """The smooth-binary release for ``"smooth_binary"``; None otherwise."""
    kary: KaryTreeRelease | None = None
    """The k-ary release for ``"kary_tree"``; None otherwise."""
    factorisation: SqrtFactorisationRelease | BLTRelease | None = None
    """The matrix-factorisation release for ``"sqrt_factorisation"`` / ``"blt"`` /
    ``"unbounded_blt"``; else None."""
    unbounded: UnboundedKaryRelease | None = None
    """The open-stream k-ary release for ``"unbounded"``; None otherwise."""
    guarantee: PrivacyGuarantee
    """Event-level guarantee (ε for trees; (ε, δ) from ρ-zCDP for the smooth binary)."""
    n: int = field(init=False)
    """Stream length."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        self.prefix_sums.setflags(write=False)
        self.variance.setflags(write=False)

    def range_variance(self, i: int, j: int) -> float:
        """Noise variance of c(σ, j + 1) − c(σ, i) (steps i..j, 0-based): exact for the raw BT
        and the smooth binary (the nodes shared by the two covers cancel, the others are
        independent: |cover Δ cover|·v); for the online/consistent estimates the upper bound
        (√Var(c(i)) + √Var(c(j + 1)))² (Cauchy–Schwarz)."""
        from ._tree_estimates import tree_range_variance

        if self.counter == "binary_tree":
            return tree_range_variance(i, j, self.tree.noise.variance)
        if self.counter == "kary_tree":
            kr = self.kary
            coef: dict[tuple[int, int], int] = {}
            for t, sign in ((j + 1, 1), (i, -1)):
                if t == 0:
                    continue
                digits = _digits(np.array([t]), kr.fanout, kr.levels)[:, 0]
                pos = 0
                for h in reversed(range(kr.levels)):
                    d, size = int(digits[h]), kr.fanout**h
                    lo = pos // size if d >= 0 else pos // size + d
                    for b in range(lo, lo + abs(d)):
                        coef[(h, b)] = coef.get((h, b), 0) + sign * (1 if d > 0 else -1)
                    pos += d * size
            return float(sum(c * c for c in coef.values())) * kr.noise.variance
        if self.counter == "unbounded":  # exact: blocks shared by both prefixes cancel
            ur = self.unbounded
            return unbounded_kary_range_variance(
                i + 1, j + 1, epsilon=ur.epsilon, bound=ur.bound, fanout=ur.fanout
            )
        if self.counter in ("sqrt_factorisation", "blt", "unbounded_blt"):
            fr = self.factorisation  # c̃(t) = Σ_{s<t} b_{t−1−s} z_s: Toeplitz rows, exact
            b = (
                sqrt_coefficients(self.n)
                if self.counter == "sqrt_factorisation"
                else np.cumsum(fr.strategy.inverse_coefficients(self.n))
            )
            hi = b[j::-1][:i] - (b[i - 1 :: -1] if i > 0 else b[:0])
            return float(hi @ hi + b[: j - i + 1] @ b[: j - i + 1]) * fr.noise.variance
        if self.counter == "smooth_binary":
            sm = self.smooth
            b = int(sm.leaves[j])
            a = int(sm.leaves[i - 1]) if i > 0 else 0
            shared = sum(1 for h in range(sm.height) if (a >> h) & 1 and (a >> h) == (b >> h))
            return (a.bit_count() + b.bit_count() - 2 * shared) * sm.noise.variance
        vi = float(self.variance[i - 1]) if i > 0 else 0.0
        return (math.sqrt(vi) + math.sqrt(float(self.variance[j]))) ** 2


def counter_release(
    values: object,
    *,
    counter: str,
    epsilon: float,
    bound: float,
    bits: BitSource,
    delta: float = 0.0,
    owner: str = "counter_release",
) -> CounterRelease:
    """Release every prefix sum of ``values`` with ``counter`` (validated; draws from ``bits``).

    The tree counters draw exactly the BT's nodes (same bits, same order as
    :func:`binary_tree_release`) and differ only in the estimate read from them.
    """
    dlt = check_probability(delta, "delta", owner)
    counter = check_counter(counter, owner, delta=dlt)
    if counter == "auto":  # n is public (the stream's length); validate before choosing
        bnd = check_positive(bound, "bound", owner)
        n = check_stream(values, "values", owner, bound=bnd).size
        counter = best_counter(
            n, epsilon=check_positive(epsilon, "epsilon", owner), bound=bnd, delta=dlt
        )
    if counter in ("kary_tree", "kary_tree_consistent"):
        kr = _kary_release(
            values,
            epsilon=epsilon,
            bound=bound,
            bits=bits,
            owner=owner,
            least_squares=counter == "kary_tree_consistent",
        )
        return _own_release(counter, kr, kary=kr)
    if counter == "unbounded":
        ur = _unbounded_release(values, epsilon=epsilon, bound=bound, bits=bits, owner=owner)
        return _own_release(counter, ur, unbounded=ur)
    if counter in ("sqrt_factorisation", "blt", "unbounded_blt"):
        release = {
            "sqrt_factorisation": _sqrt_release,
            "blt": _blt_release,
            "unbounded_blt": _unbounded_blt_release,
        }[counter]
        fr = release(values, epsilon=epsilon, delta=dlt, bound=bound, bits=bits, owner=owner)
        return _own_release(counter, fr, factorisation=fr)
    if counter == "smooth_binary":
        rel = _smooth_release(
            values, epsilon=epsilon, delta=dlt, bound=bound, bits=bits, owner=owner
        )
        return _own_release(counter, rel, smooth=rel)
    tree = _tree_release(values, epsilon=epsilon, bound=bound, bits=bits, owner=owner)
    return tree_counter_release(tree, counter)


def _own_release(counter: str, rel, **part) -> CounterRelease:
    """A non-tree counter's own release ``rel`` as a :class:`CounterRelease` (its sums, exact
    variances and guarantee; ``part`` names the field that keeps ``rel``)."""
    return CounterRelease(
        counter=counter,
        prefix_sums=np.array(rel.prefix_sums),
        variance=np.array(rel.variance),
        tree=None,
        guarantee=rel.guarantee,
        **part,
    )


def tree_counter_release(tree: TreeRelease, counter: str) -> CounterRelease:
    """The estimate ``counter`` (a tree counter) read from the noisy nodes of ``tree``."""
    if counter == "binary_tree":
        sums, var = tree.prefix_sums, tree.variance
    elif counter == "binary_tree_online":
        sums, var = tree.online_prefix_sums(), tree.online_variance()
    else:
        sums, var = tree.consistent_prefix_sums(), tree.consistent_variance()
    return CounterRelease(
        counter=counter,
        prefix_sums=np.array(sums),
        variance=np.array(var),
        tree=tree,
        smooth=None,
        guarantee=tree.guarantee,
    )
