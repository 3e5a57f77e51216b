"""The OptStream release pipeline: frame in, consistent private frame out ([FV19] Alg. 2 + 4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from mechanisms import Budget, BudgetLedger, ParameterError, bit_source
from mechanisms.core._random import BitSource
from mechanisms.core._validation import check_integer, check_positive
from mechanisms.optstream._estimates import (
    OPTSTREAM_SAMPLINGS,
    OptStreamEstimates,
    _estimates,
    optstream_split,
)
from postproc import FeatureSet, Hierarchy, bias_aware_variances, project_consistent

from ._frames import from_periods, prepare_frame, to_periods, value_neighbours
from ._privacy import attach_record, charge_release, check_ledger, release_record

__all__ = ["OPTSTREAM_WEIGHTS", "release_optstream"]

_OWNER = "release_optstream"
#: Periods released per call when a ``progress`` callable listens (one update per batch).
PROGRESS_BATCH = 8

#: Weights of the post-processing (Algorithm 4, O1): see :func:`release_optstream`.
OPTSTREAM_WEIGHTS = ("variance", "noise", "paper")


def _weights(
    est: OptStreamEstimates, fs: FeatureSet, levels: list[list[int]], weights: str
) -> dict[str, np.ndarray]:
    """Keyword for :func:`postproc.project_consistent`: variances, or the paper's weights."""
    if weights == "paper":
        return {}
    if weights == "noise":
        return {"variances": est.variances}
    return {
        "variances": bias_aware_variances(
            est.estimates, est.variances, est.samples, levels=levels, features=fs
        )
    }


def _post_process(
    est: OptStreamEstimates,
    hierarchy: Hierarchy | None,
    nodes: tuple[str, ...],
    fs: FeatureSet,
    levels: list[list[int]],
    weights: str,
) -> np.ndarray:
    """Algorithm 4 line 2 over the whole hierarchy, one problem per period: (B, N, r)."""
    kw = _weights(est, fs, levels, weights)
    if hierarchy is not None:
        return project_consistent(est.estimates, hierarchy=hierarchy, features=fs, **kw).values
    out = np.empty((est.estimates.shape[0], len(nodes), fs.w))
    for j, name in enumerate(nodes):  # independent columns: one stream each
        one = {key: val[:, j : j + 1] for key, val in kw.items()}
        rel = project_consistent(
            est.estimates[:, j : j + 1, :], hierarchy=Hierarchy.single(name), features=fs, **one
        )
        out[:, j, :] = rel.values[:, 0, :]
    return out


def release_periods(
    values: np.ndarray,
    *,
    epsilon: float,
    w: int,
    k: int,
    alpha: float,
    sampling: str,
    theta: float | None,
    hierarchy: Hierarchy | None,
    nodes: tuple[str, ...],
    features: FeatureSet,
    weights: str = "variance",
    shares: Sequence[float] | None = None,
    windows: str = "any",
    bits: BitSource,
) -> np.ndarray:
    """OptStream on periods already cut and validated: (B, N, r) -> released (B, N, r).

    The core of :func:`release_optstream` (no validation of the frame, no budget ledger):
    Sample, Perturb, Reconstruct and the feature queries per level
    (:func:`mechanisms.optstream._estimates.optstream_estimates`), then Algorithm 4 line 2 with
    ``weights``. ``values`` holds every node (``nodes`` order, aggregates included); ``B``
    may stack independent trials of an experiment. Output >= 0 and consistent.
    """
    if hierarchy is None:
        levels = [list(range(len(nodes)))]
    else:
        levels = [[hierarchy.index(n) for n in level] for level in hierarchy.levels]
    est = _estimates(
        values,
        epsilon=epsilon,
        k=k,
        alpha=alpha,
        sampling=sampling,
        theta=theta,
        features=features.partitions,
        levels=levels,
        window=w,
        windows=windows,
        shares=shares,
        bits=bits,
    )
    return _post_process(est, hierarchy, nodes, features, levels, weights)


def _feature_set(features: object, w: int) -> FeatureSet:
    if features is None:
        return FeatureSet.default(w)
    fs = features if isinstance(features, FeatureSet) else FeatureSet(w=w, partitions=features)
    if fs.w != w:
        raise ParameterError(
            f"The 'features' parameter of {_OWNER} must partition a period of w = {w} steps. "
            f"Got a FeatureSet of w = {fs.w}."
        )
    return fs


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
    weights: str = "variance",
    features: object = None,
    shares: Sequence[float] | None = None,
    ledger: BudgetLedger | None = None,
    progress: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """Release load streams with OptStream: consistent, non-negative, (w, α)-private.

    Every w-period of every node (leaves as given, aggregates derived from the leaves) is
    sampled, perturbed and reconstructed, its feature queries are answered with noise
    ([FV19] Alg. 2, 3, Alg. 4 line 1), and all of it is post-processed in one weighted
    least-squares problem per period over the whole hierarchy ([FV19] Alg. 4, §5.2;
    :func:`postproc.project_consistent`).

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
        Samples per period, 1 <= k <= w ([FV19] §6: 10; k = w is the Laplace mechanism plus
        post-processing). The best k falls as α/ε grows (``docs/results``).
    sampling : {"l1", "equal"}, default "l1"
        The L1/SVT adaptive sampler ([FV19] Algorithm 3) or equally spaced samples (free).
    theta : float, optional
        Public SVT threshold θ of the L1 sampler, compared with the L1 interpolation score of a
        segment summed over the nodes of one level (data units × steps); must not be derived
        from the data. The paper used θ = 1000 MW "about one tenth of the average load, publicly
        revealed". Default (None): the data-independent null-rate threshold
        ``b_μ·ln(w/2k)`` (:func:`mechanisms.optstream._sampling.null_rate_threshold`), with which a
        segment without signal is cut at the equally spaced rate k/w. Ignored for "equal".
    hierarchy : mapping parent -> children, optional
        Leaves are the frame's columns; the result has one column per node, children summing
        to their parent at every step. None: each column is released on its own.
    alpha : float, default 1.0
        α of the privacy unit, in the data's units (see Notes).
    seed : int, optional
        None (default) draws from the operating system's secure source; an int makes the output
        reproducible and is for tests and experiments only (not for release).
    weights : {"variance", "noise", "paper"}, default "variance"
        Weights of the post-processing objective (O1). ``"variance"``: inverse error
        variances, the noise variance of every estimate plus, on the steps between samples,
        an interpolation-bias variance estimated from the feature residuals
        (:func:`postproc.bias_aware_variances`, post-processing of private values, estimated
        over all periods of this call). ``"noise"``: inverse noise variances only.
        ``"paper"``: [FV19] Alg. 4's ``λ_i = 1/m_i``. No effect on privacy.
    features : postproc.FeatureSet or sequence of partitions, optional
        The feature chain F_1 ≺ ... ≺ F_p of a period, the singletons first ([FV19] §3.4).
        Default :meth:`postproc.FeatureSet.default`: singletons, the day parts [0,14),
        [14,24), [24,36), [36,48) (w = 48 only), the whole period. Only the singletons: no
        feature query (ε_o = 0).
    shares : (s, p, o), optional
        Relative budget of sampler, perturbation and feature queries
        (:func:`mechanisms.optstream_split`); default equal shares of the active
        steps ([FV19] §6).
    ledger : mechanisms.BudgetLedger, optional
        The accountant charged ``epsilon`` under ``WAlphaIndistinguishability(w, alpha)``
        after validation and before any draw (e.g. :class:`dpstream._ledger.SQLiteLedger`);
        None: a fresh ledger of exactly ``epsilon``.
    progress : callable, optional
        Called with the number of periods just released (the last, partial period counts
        one), e.g. a progress bar's ``update``.

    Returns
    -------
    pandas.DataFrame
        One column per node (``Hierarchy.nodes`` order, or the input columns), aligned to the
        input index; consistent (children sum to parents, day-parts to the day) and >= 0.
        ``attrs["privacy"]`` is the release's :meth:`mechanisms.PrivacyRecord.to_dict`.

    Raises
    ------
    ParameterError
        Bad ε, w <= 0, k outside [1, w], unknown sampling or weights, negative θ, α <= 0,
        features that are not a chain of partitions of the period, bad shares, a hierarchy
        that is not a tree, names unknown columns or lists a parent among the leaves.
    DomainError
        A frame that is not time-indexed, unsorted or duplicated stamps, NaN/inf or negative
        loads, a parent column that is not the sum of its leaves.
        All raised before any noise is drawn or budget charged.

    Notes
    -----
    Lengths not divisible by w: the last ``r = T mod w`` steps are released as a shorter
    period with the full period's calibration (features: singletons + the whole tail) --
    the rule of ``dpstream.pipelines``.

    *Privacy*: (w, α)-indistinguishability ([FV19] Def. 3, §5.1), the neighbour relation of
    ``dpstream.pipelines``: within any w consecutive steps, at each step one leaf (one customer's
    load; the customer, hence the leaf, may differ between steps) moves by at most α, its
    ancestors with it. α enters every sensitivity linearly: ΔL = 2α(w − k) for the sampler
    (Theorem 6), kα for the k samples (Theorem 8), wα for each feature partition (Theorem 9
    claims 1 -- wrong under w-event neighbours, every value of the period may change). Plain
    w-event privacy of a stream whose values lie in a public range [0, B] is α = B. The
    hierarchy's h levels get ε/h each (Theorem 13); one sample set per period is shared by the
    nodes of a level, so the level composes as one stream. With the L1 sampler a window
    straddling two periods meets two samplers: the split (ε_s, ε_p, ε_o) = (ε, ε, 2ε)/(6h)
    makes that worst case ε (equally spaced: (0, ε, ε)/(2h)); see ``mechanisms.optstream``.
    The accountant (``ledger``) is charged ε under WAlphaIndistinguishability(w, α) before any
    noise is drawn (the per-level split ε/h is checked to fit ε); post-processing, its
    weights included, is free (Theorem 3).

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
    if weights not in OPTSTREAM_WEIGHTS:
        raise ParameterError(
            f"The 'weights' parameter of {_OWNER} must be one of {OPTSTREAM_WEIGHTS}. "
            f"Got {weights!r} instead."
        )
    if theta is not None:
        theta = check_positive(theta, "theta", _OWNER, allow_zero=True)
    fs = _feature_set(features, w)
    neighbours = value_neighbours(w=w, alpha=alpha, bound=None, owner=_OWNER)
    check_ledger(ledger, _OWNER)
    sf = prepare_frame(frame, owner=_OWNER, hierarchy=hierarchy)
    n_levels = sf.n_levels
    # Validates shares; every level gets ε/h, rounded down as Budget.split does.
    optstream_split(
        eps,
        sampling=sampling,
        n_levels=n_levels,
        has_features=fs.n_features > 1,
        windows="any",
        shares=shares,
    )
    periods = to_periods(sf.values, w)
    bits = bit_source(seed)  # validates the seed; draws nothing
    levels = BudgetLedger(Budget(eps))  # the per-level split ε/h fits the whole ε exactly
    for li, part in enumerate(levels.total.split([1.0 / n_levels] * n_levels)):
        levels.charge(part, f"{_OWNER} level {li}")
    charge_release(ledger, Budget(eps), neighbours.unit, _OWNER)  # before any draw
    common = {
        "epsilon": eps,
        "w": w,
        "k": k,
        "alpha": neighbours.delta,
        "sampling": sampling,
        "theta": theta,
        "hierarchy": sf.hierarchy,
        "nodes": sf.nodes,
        "weights": weights,
        "shares": shares,
        "bits": bits,
    }
    n_full, r = periods.full.shape[0], periods.tail.shape[1]
    full = np.empty((0, sf.n_nodes, w))
    if n_full:
        # Periods are independent once planned: with a listener, release them in batches and
        # report each batch (issue 17); without one, in a single call as before.
        step = n_full if progress is None else PROGRESS_BATCH
        parts = []
        for lo in range(0, n_full, step):
            parts.append(release_periods(periods.full[lo : lo + step], features=fs, **common))
            if progress is not None:
                progress(parts[-1].shape[0])
        full = np.concatenate(parts)
    tail = None
    if r:
        # Singletons + the whole tail (even for r = 1): the tail keeps the full periods' split.
        tail_fs = FeatureSet.from_breaks(r, [(0, r)] if fs.n_features > 1 else [])
        tail = release_periods(periods.tail[None], features=tail_fs, **common)[0]
        if progress is not None:
            progress(1)
    out = from_periods(full, tail)
    result = sf.to_frame(np.maximum(out, 0.0))
    record = release_record(
        unit=neighbours.unit,
        budget=Budget(eps),
        proof=f"[FV19] Theorems 6, 8, 9 and 13 (ε/h per level, h = {n_levels})",
        mechanism="optstream",
        parameters={
            "k": k,
            "sampling": sampling,
            "theta": theta,
            "weights": weights,
            "shares": None if shares is None else list(shares),
            "levels": n_levels,
        },
        bound=None,
        seeded=seed is not None,
    )
    attach_record(result, record)
    return result
