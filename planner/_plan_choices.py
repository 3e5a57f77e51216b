"""What a period's plan may choose and what it may spend: the candidate k, the level
shares, the window budget across periods and the data-independent first k
(:func:`planner.plan_period` chooses among them).

Budgets across periods
----------------------
Every window of w steps must cost at most the user's budget, including windows straddling two
periods planned differently. With equally spaced samples a sample of a period released with
budget E (ε, or ρ for the Gaussian; per level summed) and k samples costs E/k when it changes
(Laplace: L1 sensitivity kα, scale kα/E; Gaussian: ρ adds over samples). A window starting at
step s of period p holds the samples of p at steps >= s and those of p + 1 at steps < s, so
period p + 1 may spend at most

    E_{p+1} = min(E, min_s (E − E_p/k_p · #{j ∈ S_p : j >= s}) · k_{p+1} / #{j ∈ S_{p+1} : j < s}),

which is E when k does not change (every window then holds exactly k samples) and smaller for
the period after a change. :func:`window_budget` computes it; the planner predicts each
candidate with its own budget, so a change of k pays for itself or is not made.

The rule without data
---------------------
Before anything is released (and without ``history``) no roughness is known. The error model
then depends on the unknown roughness c (a random walk, γ(h) = c·h) and on α/ε only through
c/(α/ε)²: α/ε scales out, so a data-independent rule is a function of w (and h) alone.
:func:`rule_k` takes the k whose worst ratio to the best k is smallest over every roughness
between the largest at which k = 1 is the best and the smallest at which k = w (Laplace per
value) is: minimax regret over the range in which the choice of k matters. For w = 48 it is
k = 6, within a factor 2.6 of the best k over that whole range.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from mechanisms.optstream._sampling import interpolation_matrix, sample_equal

from ._roughness import kriging_bias

__all__ = ["default_candidates", "rule_k", "share_grid", "window_budget", "within_budget"]


def default_candidates(w: int) -> tuple[int, ...]:
    """k = 1, 2, 3, 4, 6, 8, 12, 16, 24, 32 and w (those not above w)."""
    return tuple(sorted({k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, w) if k <= w}))


def within_budget(shares: tuple[float, ...]) -> tuple[float, ...]:
    """``shares`` with an exact sum of at most 1 (issue 24.4): the largest share lowered by
    the fewest ulps that make the floats' exact (rational) sum <= 1.

    Floats such as (0.1, 0.1, 0.8) or five times 0.2 sum to 1 in floating point but to
    1 + 2⁻⁵⁴ exactly; a window charged those shares would cost that much more than ε. The
    change is below the floats' own rounding (at most a few ulps of one share), never up.

    Examples
    --------
    >>> within_budget((0.1, 0.1, 0.8))
    (0.1, 0.1, 0.7999999999999999)
    """
    vals = [float(v) for v in shares]
    if not vals:
        return ()
    i = max(range(len(vals)), key=lambda j: vals[j])
    while sum((Fraction(v) for v in vals), Fraction(0)) > 1 and vals[i] > 0:
        vals[i] = math.nextafter(vals[i], 0.0)
    return tuple(vals)


def share_grid(n_levels: int, step: float = 0.1) -> list[tuple[float, ...]]:
    """Level shares on a simplex grid of ``step``, the leaf level (last) always > 0.

    Includes equal shares 1/h and bottom-up (everything on the leaves). Every candidate sums
    to at most 1 exactly (:func:`within_budget`).
    """
    return list(_share_grid(int(n_levels), float(step)))


@lru_cache(maxsize=32)
def _share_grid(n_levels: int, step: float) -> tuple[tuple[float, ...], ...]:
    """:func:`share_grid`, computed once per (levels, step): the exact-sum check is 0.16 s at
    5 levels, and a tree planned in subtrees asks for it twice per part and period."""
    if n_levels == 1:
        return ((1.0,),)
    m = round(1.0 / step)
    out = {tuple([1.0 / n_levels] * n_levels)}
    for combo in itertools.product(range(m + 1), repeat=n_levels - 1):
        rest = m - sum(combo)
        if rest > 0:
            out.add(tuple(c / m for c in combo) + (rest / m,))
    return tuple(sorted(within_budget(sh) for sh in out))


def window_budget(
    previous: tuple[np.ndarray, float] | None, positions: np.ndarray, total: float
) -> float:
    """The largest budget of the next period keeping every window within ``total`` (Notes).

    Parameters
    ----------
    previous
        (sampled steps of the previous period, its cost per sample E_p/k_p), or None. The
        cost may also be an array, one per sampled step: the samples of the last w steps
        before the period, possibly of several earlier periods (a short tail, another call),
        at steps counted from w steps before the period's start.
    positions
        Sampled steps of the next period.
    total
        The user's budget per window (ε, or ρ).
    """
    if previous is None:
        return total
    prev_pos, prev_cost = previous
    prev_pos = np.asarray(prev_pos)
    order = np.argsort(prev_pos, kind="stable")
    prev_pos = prev_pos[order]
    pos = np.sort(np.asarray(positions))
    k = pos.size
    horizon = max(int(prev_pos.max(initial=0)), int(pos.max(initial=0))) + 1
    s = np.arange(1, horizon + 1)
    head = np.searchsorted(pos, s, side="left")  # #{j in S_next: j < s}
    first = np.searchsorted(prev_pos, s, side="left")
    ok = head > 0
    if np.ndim(prev_cost) == 0:
        spent = prev_cost * (prev_pos.size - first)  # E_p/k_p · #{j in S_prev: j >= s}
    else:  # one cost per earlier sample (samples of several earlier periods)
        cost = np.asarray(prev_cost, dtype=np.float64)[order]
        suffix = np.concatenate([np.cumsum(cost[::-1])[::-1], [0.0]])
        spent = suffix[first]
    limits = (total - spent[ok]) * k / head[ok]
    best = min(total, float(limits.min(initial=total)))
    return max(best * (1.0 - 1e-12), 0.0)


@lru_cache(maxsize=64)
def rule_k(w: int, n_levels: int = 1) -> int:
    """The data-independent k of the first period (module Notes: minimax regret).

    Examples
    --------
    >>> rule_k(48)
    6
    """
    ks = default_candidates(w)
    noise = []
    bias = []
    lag = np.arange(w, dtype=np.float64)
    for k in ks:
        mask = np.zeros((1, w), dtype=bool)
        mask[0, sample_equal(w, k)] = True
        m = interpolation_matrix(mask)[0]
        noise.append(2.0 * (k * n_levels) ** 2 * (m * m).sum(axis=1))  # α/ε = 1
        bias.append(kriging_bias(lag[None, :], m)[0])  # random walk, c = 1
    noise_a, bias_a = np.array(noise), np.array(bias)  # (K, w)
    cs = np.logspace(-6, 8, 800)
    err = np.sqrt(noise_a[None] + cs[:, None, None] * bias_a[None]).mean(axis=2)  # (C, K)
    best = err.min(axis=1)
    choice = err.argmin(axis=1)
    fewest = np.flatnonzero(choice == 0)
    every = np.flatnonzero(choice == len(ks) - 1)
    lo = int(fewest[-1]) if fewest.size else 0
    hi = int(every[0]) + 1 if every.size else len(cs)
    regret = (err[lo:hi] / best[lo:hi, None]).max(axis=0)
    return int(ks[int(np.argmin(regret))])
