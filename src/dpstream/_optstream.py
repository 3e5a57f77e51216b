"""The OptStream release pipeline: frame in, consistent private frame out ([FV19] Alg. 2 + 4)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import Budget, BudgetLedger, ParameterError, bit_source
from mechanisms._optstream import (
    OPTSTREAM_SAMPLINGS,
    OptStreamEstimates,
    _estimates,
    optstream_split,
)
from mechanisms._validation import check_integer, check_positive
from postproc import FeatureSet, Hierarchy, project_consistent

from ._frames import from_periods, prepare_frame, to_periods, value_neighbours

__all__ = ["release_optstream"]

_OWNER = "release_optstream"


def _post_process(
    est: OptStreamEstimates, hierarchy: Hierarchy | None, nodes: tuple[str, ...], fs: FeatureSet
) -> np.ndarray:
    """Algorithm 4 line 2 over the whole hierarchy, one problem per period: (B, N, r)."""
    if hierarchy is not None:
        return project_consistent(est.estimates, hierarchy=hierarchy, features=fs).values
    out = np.empty((est.estimates.shape[0], len(nodes), fs.w))
    for j, name in enumerate(nodes):  # independent columns: one stream each
        rel = project_consistent(
            est.estimates[:, j : j + 1, :], hierarchy=Hierarchy.single(name), features=fs
        )
        out[:, j, :] = rel.values[:, 0, :]
    return out


def release_optstream(
    frame: pd.DataFrame,
    *,
    epsilon: float,
    w: int = 48,
    k: int = 10,
    sampling: str = "l1",
    theta: float | None = None,
    hierarchy: object = None,
    alpha: float = 1.0,
    seed: object = None,
) -> pd.DataFrame:
    """Release load streams with OptStream: consistent, non-negative, (w, α)-private.

    Every w-period of every node (leaves as given, aggregates derived from the leaves) is
    sampled, perturbed and reconstructed, its feature queries are answered with noise
    ([FV19] Alg. 2, 3, Alg. 4 line 1), and all of it is post-processed in one weighted
    least-squares problem per period over the whole hierarchy ([FV19] Alg. 4, §5.2;
    :func:`postproc.project_consistent`, weights λ = 1/m_i).

    Parameters
    ----------
    frame : pandas.DataFrame
        One column per leaf stream (non-negative loads), time-indexed (DatetimeIndex or
        integer index, strictly increasing). A Series is one stream.
    epsilon : float
        Privacy loss ε > 0 of the whole release (every window of w steps, all levels).
    w : int, default 48
        Period length and privacy window (48 half-hours = one day).
    k : int, default 10
        Samples per period, 1 <= k <= w ([FV19] §6: 10).
    sampling : {"l1", "equal"}, default "l1"
        The L1/SVT adaptive sampler ([FV19] Algorithm 3) or equally spaced samples (free).
    theta : float, optional
        Public SVT threshold θ of the L1 sampler, compared with the L1 interpolation score of a
        segment summed over the nodes of one level (data units × steps); must not be derived
        from the data. The paper used θ = 1000 MW "about one tenth of the average load, publicly
        revealed". Default (None): the data-independent null-rate threshold
        ``b_μ·ln(w/2k)`` (:func:`mechanisms._sampling.null_rate_threshold`), with which a
        segment without signal is cut at the equally spaced rate k/w. Ignored for "equal".
    hierarchy : mapping parent -> children, optional
        Leaves are the frame's columns; the result has one column per node, children summing
        to their parent at every step. None: each column is released on its own.
    alpha : float, default 1.0
        α of the privacy unit, in the data's units (see Notes).
    seed : int, optional
        None (default) draws from the operating system's secure source; an int makes the output
        reproducible and is for tests and experiments only (not for release).

    Returns
    -------
    pandas.DataFrame
        One column per node (``Hierarchy.nodes`` order, or the input columns), aligned to the
        input index; consistent (children sum to parents, day-parts to the day) and >= 0.

    Raises
    ------
    ParameterError
        Bad ε, w <= 0, k outside [1, w], unknown sampling, negative θ, α <= 0, a hierarchy that
        is not a tree, names unknown columns or lists a parent among the leaves.
    DomainError
        A frame that is not time-indexed, unsorted or duplicated stamps, NaN/inf or negative
        loads, a parent column that is not the sum of its leaves.
        All raised before any noise is drawn or budget charged.

    Notes
    -----
    Lengths not divisible by w: the last ``r = T mod w`` steps are released as a shorter
    period with the full period's calibration (features: singletons + the whole tail) --
    the rule of ``dpstream._frames``.

    *Privacy*: (w, α)-indistinguishability ([FV19] Def. 3, §5.1): within any w consecutive
    steps, at each step the leaf values change by at most α in total (one customer's load moves
    by at most α; the customer may differ between steps; aggregates move with their leaves).
    α enters every sensitivity linearly: ΔL = 2α(w − k) for the sampler (Theorem 6), kα for the
    k samples (Theorem 8), wα for each feature partition (Theorem 9 claims 1 -- wrong under
    w-event neighbours, every value of the period may change). Plain w-event privacy of a
    stream whose values lie in a public range [0, B] is α = B. The hierarchy's h levels get
    ε/h each (Theorem 13); one sample set per period is shared by the nodes of a level, so the
    level composes as one stream. With the L1 sampler a window straddling two periods meets
    two samplers: the split (ε_s, ε_p, ε_o) = (ε, ε, 2ε)/(6h) makes that worst case ε
    (equally spaced: (0, ε, ε)/(2h)); see ``mechanisms._optstream``. The ledger is charged
    ε/h per level before any noise is drawn; post-processing is free (Theorem 3).

    Examples
    --------
    >>> import pandas as pd
    >>> idx = pd.date_range("2016-01-01", periods=96, freq="30min")
    >>> frame = pd.DataFrame({"a": 100.0, "b": 50.0}, index=idx)
    >>> out = release_optstream(frame, epsilon=1.0, hierarchy={"total": ["a", "b"]}, seed=1)
    >>> list(out.columns), bool((out >= 0).all().all())
    (['total', 'a', 'b'], True)
    >>> bool(abs(out["total"] - out["a"] - out["b"]).max() < 1e-6)
    True
    """
    eps = check_positive(epsilon, "epsilon", _OWNER)
    w = check_integer(w, "w", _OWNER)
    k = check_integer(k, "k", _OWNER, minimum=1, maximum=w)
    if sampling not in OPTSTREAM_SAMPLINGS:
        raise ParameterError(
            f"The 'sampling' parameter of {_OWNER} must be one of {OPTSTREAM_SAMPLINGS}. "
            f"Got {sampling!r} instead."
        )
    if theta is not None:
        theta = check_positive(theta, "theta", _OWNER, allow_zero=True)
    neighbours = value_neighbours(w=w, alpha=alpha, bound=None, owner=_OWNER)
    sf = prepare_frame(frame, owner=_OWNER, hierarchy=hierarchy)
    tree = sf.hierarchy
    if tree is None:
        levels = [list(range(sf.n_nodes))]
    else:
        levels = [[tree.index(n) for n in level] for level in tree.levels]
    periods = to_periods(sf.values, w)

    ledger = BudgetLedger(Budget(eps))
    common = {
        "epsilon": eps,
        "k": k,
        "alpha": neighbours.delta,
        "sampling": sampling,
        "theta": theta,
        "levels": levels,
        "window": w,
        "windows": "any",
        "shares": None,
    }
    bits = bit_source(seed)
    jobs = []
    if periods.full.shape[0]:
        jobs.append((periods.full, FeatureSet.default(w)))
    r = periods.tail.shape[1]
    if r:
        jobs.append((periods.tail[None], FeatureSet.default(r)))
    # Charge before drawing: every level's worst-case window loss (ε/h each).
    # (optstream_split gives every level ε/h, rounded down; Budget.split rounds the same way.)
    optstream_split(eps, sampling=sampling, n_levels=len(levels), windows="any")
    for li, part in enumerate(ledger.total.split([1.0 / len(levels)] * len(levels))):
        ledger.charge(part, f"{_OWNER} level {li}")
    released = []
    for values, fs in jobs:
        est = _estimates(values, features=fs.partitions, bits=bits, **common)
        released.append(_post_process(est, tree, sf.nodes, fs))
    full = released[0] if periods.full.shape[0] else np.empty((0, sf.n_nodes, w))
    tail = released[-1][0] if r else None
    out = from_periods(full, tail)
    return sf.to_frame(np.maximum(out, 0.0))
