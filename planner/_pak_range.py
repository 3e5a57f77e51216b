"""The counters' noise on a range sum of L steps, averaged over the ranges an analyst asks for.

A continual counter releases prefix sums ĉ(t); the sum of the L steps a + 1..a + L is
ĉ(a + L) − ĉ(a), and its noise is the difference of the two prefixes' noise. What an analyst
means by "the RMSE of a range sum of L steps" (a day's total) is the root mean square over the
ranges of that length, not over one of them: the noise of a difference depends on where the
range sits (the tree nodes the two covers share cancel; a Toeplitz factorisation's older
coefficients partly cancel). :func:`counter_range_variance` is that mean, *exact* for every
counter with an exact range variance (:meth:`mechanisms.CounterRelease.range_variance`), over
public ranges: ``queries`` starts equally spaced in [first, n − L] (all of them when there are
fewer), the same scheme as ToPS' range error (:func:`planner._inverse.tops_length_errors`), so
a validation can score exactly those ranges.

Why exact is cheap. Every counter's noise is a fixed linear map of independent noise of one
variance (a node's Laplace, or one Gaussian coordinate's), so the mean range variance is (a
number depending on the counter, n, L and the ranges only) × that variance, and so is the
variance at step n (:func:`mechanisms.counter_end_variance`). Their ratio is computed once
(memoised, public inputs only) from one release of zeros at bound 1 — a simulation that
releases nothing — whose structure (tree, fan-out, leaves, Toeplitz coefficients) is all
``range_variance`` reads; the mean at any (ε, B) is that ratio × the end variance there.
For the two factorisations the per-range variance is vectorised: with prefix noise
Σ_{s<t} b_{t−1−s} z_s, Var(ĉ(a + L) − ĉ(a)) = σ²·(Σ_{u<a}(b_{u+L} − b_u)² + Σ_{k<L} b_k²).

The online and least-squares tree estimates (``binary_tree_online``, ``*_consistent``) have
no exact range variance here (only a Cauchy–Schwarz bound), so range planning does not offer
them (:data:`RANGE_COUNTERS`).

*Privacy*: none. Public inputs only (n, L, ε, δ, B, the counter).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from mechanisms import ParameterError, counter_end_variance
from mechanisms.core._validation import check_integer, check_positive, check_probability

__all__ = [
    "RANGE_COUNTERS",
    "best_range_counter",
    "counter_range_variance",
    "range_inputs",
    "range_starts",
]

#: Counters whose range variance is exact (module notes), in best_counter's tie order.
RANGE_COUNTERS = (
    "binary_tree",
    "kary_tree",
    "smooth_binary",
    "sqrt_factorisation",
    "blt",
    "unbounded",
    "unbounded_blt",
)
_APPROXIMATE = ("smooth_binary", "sqrt_factorisation", "blt", "unbounded_blt")
_MAX_LENGTH = {"sqrt_factorisation": 1 << 26, "blt": 1 << 24}
#: Default number of public ranges averaged over (as ToPS' range error).
QUERIES = 2000


def range_starts(first: int, n: int, length: int, queries: int = QUERIES) -> np.ndarray:
    """0-based first steps of the public ranges of ``length`` steps: ``queries`` equally spaced
    integers in [first, n − length] (all of them if there are fewer), ascending, unique."""
    count = min(int(queries), n - length - first + 1)
    if count < 1:
        raise ParameterError(
            f"No range of {length:,} steps fits in steps {first:,}..{n - 1:,}: the "
            "'range_length' must be at most the steps released after the prefix."
        )
    return np.unique(np.linspace(first, n - length, num=count).astype(np.int64))


@functools.lru_cache(maxsize=64)
def _range_ratio(counter: str, n: int, length: int, first: int, queries: int, delta: float):
    """Mean range variance over the public ranges / variance at step n, same (ε, δ, B)."""
    from mechanisms.core._random import bit_source
    from mechanisms.counting._counters import counter_release

    rel = counter_release(
        np.zeros(n), counter=counter, epsilon=1.0, bound=1.0, bits=bit_source(0), delta=delta
    )  # a simulation on zeros: only the counter's structure is read (module notes)
    starts = range_starts(first, n, length, queries)
    if counter in ("sqrt_factorisation", "blt", "unbounded_blt"):
        fr = rel.factorisation
        if counter == "sqrt_factorisation":
            from mechanisms.counting._factorisation import sqrt_coefficients

            b = sqrt_coefficients(n)
        else:
            b = np.cumsum(fr.strategy.inverse_coefficients(n))
        d2 = np.concatenate(([0.0], np.cumsum((b[length:] - b[:-length]) ** 2)))
        units = d2[starts] + float(b[:length] @ b[:length])
        mean = float(units.mean()) * fr.noise.variance
    else:
        mean = float(np.mean([rel.range_variance(int(a), int(a) + length - 1) for a in starts]))
    end = counter_end_variance(counter, n, epsilon=1.0, bound=1.0, delta=delta)
    return mean / end


def counter_range_variance(
    counter: str,
    n: int,
    range_length: int,
    *,
    epsilon: float,
    bound: float,
    delta: float = 0.0,
    first: int = 0,
    queries: int = QUERIES,
) -> float:
    """Mean noise variance of ĉ(a + L) − ĉ(a) over the public ranges (module notes).

    Parameters
    ----------
    counter
        One of :data:`RANGE_COUNTERS` (a name, not ``"auto"``: :func:`best_range_counter`).
    n
        Steps the counter releases.
    range_length
        L, steps of each range, 1 ≤ L ≤ n − first.
    epsilon, bound, delta
        The counter's ε, bound on a step and δ (the Gaussian counters need δ > 0).
    first, queries
        The ranges start at ``queries`` equally spaced steps of [first, n − L]
        (:func:`range_starts`).

    Returns
    -------
    float
        The mean variance, in the squared units of ``bound``: exact for those ranges.

    Examples
    --------
    The binary tree over 1,024 steps, every range of 8 steps (1,017 of them): on average 4.95
    nodes do not cancel between the two prefixes' covers (c(σ, 1024) itself is one node).

    >>> v = counter_range_variance("binary_tree", 1024, 8, epsilon=1.0, bound=1.0, queries=1017)
    >>> round(v / counter_end_variance("binary_tree", 1024, epsilon=1.0, bound=1.0), 2)
    4.95
    """
    owner = "counter_range_variance"
    if counter not in RANGE_COUNTERS:
        raise ParameterError(
            f"The 'counter' parameter of {owner} must be one of {RANGE_COUNTERS} (a counter "
            f"with an exact range variance). Got {counter!r} instead."
        )
    n = check_integer(n, "n", owner, minimum=2)
    first = check_integer(first, "first", owner, minimum=0, maximum=n - 1)
    length = check_integer(range_length, "range_length", owner, minimum=1, maximum=n - first)
    queries = check_integer(queries, "queries", owner, minimum=1)
    end = counter_end_variance(counter, n, epsilon=epsilon, bound=bound, delta=delta)
    return _range_ratio(counter, n, length, first, queries, float(delta)) * end


def best_range_counter(
    n: int, range_length: int, *, epsilon: float, delta: float, first: int = 0,
    queries: int = QUERIES,
) -> str:  # fmt: skip
    """The counter of :data:`RANGE_COUNTERS` (fixed-n ones; δ > 0 admits the Gaussian ones)
    with the least mean range variance (:func:`counter_range_variance`). Public inputs only."""
    best, best_v = "binary_tree", math.inf
    for name in RANGE_COUNTERS:
        if name.startswith("unbounded") or (name in _APPROXIMATE and not delta > 0.0):
            continue
        if n > _MAX_LENGTH.get(name, n):
            continue
        v = counter_range_variance(
            name, n, range_length, epsilon=epsilon, bound=1.0, delta=delta, first=first,
            queries=queries,
        )  # fmt: skip
        if v < best_v:
            best, best_v = name, v
    return best


def range_inputs(counter, n, m, range_length, queries, epsilon, delta) -> dict:
    """Validated range inputs of :func:`plan_pak_mse` and the counter (``"auto"`` resolved)."""
    owner = "plan_pak_mse"
    n = check_integer(n, "n", owner, minimum=3)
    if not 2 <= m < n:
        raise ParameterError(
            f"The 'prefix' argument of {owner} must hold 2 <= m < n = {n:,} values. Got m = {m:,}."
        )
    length = check_integer(range_length, "range_length", owner, minimum=1, maximum=n - m)
    count = check_integer(queries, "queries", owner, minimum=1)
    if counter == "auto":
        counter = best_range_counter(
            n - m, length, epsilon=check_positive(epsilon, "epsilon", owner),
            delta=check_probability(delta, "delta", owner), queries=count,
        )  # fmt: skip
    elif counter not in RANGE_COUNTERS:
        raise ParameterError(
            f"The 'counter' parameter of {owner} must be 'auto' or one of {RANGE_COUNTERS} "
            f"with a 'range_length' (a counter with an exact range variance). Got {counter!r} "
            "instead."
        )
    return {"counter": counter, "L": length, "Q": count}
