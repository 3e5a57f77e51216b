"""The OptStream release pipeline: frame in, consistent private frame out ([FV19] Alg. 2 + 4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from mechanisms import Budget, BudgetLedger, ParameterError, bit_source
from mechanisms.core._validation import check_integer, check_positive
from mechanisms.optstream._estimates import OPTSTREAM_SAMPLINGS, optstream_split
from postproc import FeatureSet

from ._autoplan import release_auto
from ._frames import prepare_frame, to_periods, value_neighbours
from ._period import (  # noqa: F401
    PeriodSpec,
    _post_process,
    published_estimates,
    release_block,
    release_periods,
)
from ._privacy import attach_record, charge_release, check_ledger, release_record
from ._shared import SharedDict

__all__ = ["OPTSTREAM_WEIGHTS", "release_optstream"]

_OWNER = "release_optstream"
#: Periods released per call when a ``progress`` callable listens (one update per batch).
PROGRESS_BATCH = 8

#: Weights of the post-processing (Algorithm 4, O1): see :func:`release_optstream`.
OPTSTREAM_WEIGHTS = ("variance", "noise", "paper")


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
    k: int | str = "auto",
    sampling: str | None = None,
    theta: float | None = None,
    hierarchy: object = None,
    alpha: float,
    seed: object = None,
    weights: str = "variance",
    features: object = None,
    shares: Sequence[float] | None = None,
    ledger: BudgetLedger | None = None,
    delta: float | None = None,
    noise: str = "laplace",
    target: str = "all",
    level_shares: object = None,
    prior: bool = True,
    history: object = None,
    progress: Callable[[int], None] | None = None,
    missing: str = "error",
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
    k : int or "auto", default "auto"
        ``"auto"``: every period is planned from the periods already released in this call
        (and ``history``), free post-processing (``dpstream.pipelines._autoplan``): k among
        1, 2, 3, 4, 6, 8, 12, 16, 24, 32, w (equally spaced samples, no feature queries), the
        noise, the level shares, with the predicted error in ``attrs["plan"]``; the first
        period uses the data-independent rule ``planner.rule_k`` (k = 6 for w = 48); a prior
        from earlier released periods enters Algorithm 4. An int: samples per period,
        1 <= k <= w ([FV19] §6: 10; k = w is the Laplace mechanism plus post-processing).
    sampling : {"l1", "equal"}, optional
        The L1/SVT adaptive sampler ([FV19] Algorithm 3) or equally spaced samples (free).
        Default "l1" for an int k (the paper's setting: ``k=10, sampling="l1"``); "auto"
        plans equally spaced samples (None or "equal" only).
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
    alpha : float
        α of the privacy unit, in the data's units (see Notes): the largest change of one
        value the release hides. Required: it defines what is protected (issue 24).
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
    ledger : mechanisms.BudgetLedger, None or False, default None
        The accountant charged ``epsilon`` under ``WAlphaIndistinguishability(w, alpha)``
        after validation and before any draw. None: the data set's ledger, recognised by the
        fingerprint of the columns and hierarchy (``$DPSTREAM_HOME``; streams never seen are
        registered with a ledger whose total is this release's budget); a
        :class:`dpstream._ledger.SQLiteLedger`: that file (it must be the data set's); another
        ledger: charged as well as the data set's; False: none (a throwaway experiment, said
        in the record). Seeded runs charge only the ledger given
        (:func:`dpstream._dataset.account_release`).
    delta, noise, target, level_shares, prior, history
        ``k="auto"`` only. ``noise``: "laplace" (ε-DP), "gaussian" (discrete Gaussian under
        ρ-zCDP, converted to (ε, δ); needs ``delta``) or "auto" (the planner compares them at
        the user's δ; Laplace without δ). ``target``: "leaves", "root" or "all", the nodes
        whose predicted error the level shares minimise. ``level_shares``: None (planned),
        "equal" (ε/h each), "bottom-up" (everything on the leaves) or h floats. ``prior``:
        combine each period with the mean profile of earlier released periods (empirical
        Bayes, ``postproc.profile_prior``; an aggregate only from the periods its level was
        measured in, since a sum of its leaves' estimates adds nothing their priors lack).
        ``history``: a frame with the same columns the user
        declares public (or already released), read by the planner and the prior.
    progress : callable, optional
        Called with the number of periods just released (the last, partial period counts
        one), e.g. a progress bar's ``update``.
    missing : {"error", "zero", "unmeasured"}, default "error"
        What a NaN in ``frame`` (a missing reading) means: refused (naming the first one);
        counted as 0; or *unmeasured*: the sampler and each node's reconstruction use only
        the node's observed steps (with ``k="auto"``: the planned samples, a sample at an
        unobserved reading dropped; the planner's variogram and prior skip those readings),
        aggregates are sums over the observed leaves, and the output is NaN at the
        unobserved leaf steps. Assumes the
        missingness pattern is public operational data (``docs/privacy.md``, "Missing
        readings"); the record's parameters name the policy (other than "error").

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
    With ``k="auto"`` the ledger is charged ε (and δ) once; the levels get the planned shares
    and each period a budget that keeps every window of w steps, including windows straddling
    two differently planned periods, within ε (``planner.window_budget``); the plans and the
    prior read only earlier measurements and public history (``dpstream.pipelines._autoplan``).

    Examples
    --------
    >>> import pandas as pd
    >>> idx = pd.date_range("2016-01-01", periods=96, freq="30min")
    >>> frame = pd.DataFrame({"a": 100.0, "b": 50.0}, index=idx)
    >>> out = release_optstream(
    ...     frame, epsilon=1.0, alpha=1.0, hierarchy={"total": ["a", "b"]}, seed=1
    ... )
    >>> list(out.columns), bool((out >= 0).all().all())
    (['total', 'a', 'b'], True)
    >>> bool(abs(out["total"] - out["a"] - out["b"]).max() < 1e-6)
    True
    """
    eps = check_positive(epsilon, "epsilon", _OWNER)
    w = check_integer(w, "w", _OWNER)
    if missing not in ("error", "zero", "unmeasured"):
        raise ParameterError(
            f"The 'missing' parameter of {_OWNER} must be one of ('error', 'zero', "
            f"'unmeasured'). Got {missing!r} instead."
        )
    if missing == "zero" and isinstance(frame, pd.DataFrame | pd.Series):
        frame = frame.fillna(0.0)  # a missing reading counts as 0 (±inf still refused)
    if isinstance(k, str) and k == "auto":
        return _note_missing(release_auto(
            frame, epsilon=eps, w=w, sampling=sampling, theta=theta, hierarchy=hierarchy,
            alpha=alpha, seed=seed, weights=weights, features=features, shares=shares, delta=delta,
            noise=noise, target=target, level_shares=level_shares, prior=prior, history=history,
            ledger=check_ledger(ledger, _OWNER), progress=progress, missing=missing,
        ), missing)  # fmt: skip
    k = check_integer(k, "k", _OWNER, minimum=1, maximum=w)
    sampling = "l1" if sampling is None else sampling
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
    if missing == "unmeasured" and weights == "paper":
        raise ParameterError(
            f"The 'weights' parameter of {_OWNER} must be 'variance' or 'noise' with "
            "missing='unmeasured' (unobserved steps are pinned through the variances). Got "
            "'paper' instead."
        )
    sf = prepare_frame(frame, owner=_OWNER, hierarchy=hierarchy, missing=missing)
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
    obs = None if sf.observed is None else to_periods(sf.observed.astype(np.float64), w)
    obs_full = None if obs is None else obs.full.astype(bool)
    obs_tail = None if obs is None else obs.tail.astype(bool)
    bits = bit_source(seed)  # validates the seed; draws nothing
    levels = BudgetLedger(Budget(eps))  # the per-level split ε/h fits the whole ε exactly
    for li, part in enumerate(levels.total.split([1.0 / n_levels] * n_levels)):
        levels.charge(part, f"{_OWNER} level {li}")
    paid = charge_release(  # before any draw; the data set's ledger by default
        ledger, Budget(eps), neighbours.unit, _OWNER, frame=sf, seeded=seed is not None
    )
    spec = PeriodSpec(
        epsilon=eps,
        w=w,
        k=k,
        alpha=neighbours.delta,
        sampling=sampling,
        theta=theta,
        hierarchy=sf.hierarchy,
        nodes=sf.nodes,
        features=fs,
        weights=weights,
        shares=shares,
    )
    # One implementation with the store and the Dask engine (dpstream.pipelines._period).
    keep: list = []  # the measurements and weights, published for dpstream.std_errors
    if progress is None:
        both = None if obs is None else (obs_full, obs_tail)
        out = release_block(spec, periods.full, periods.tail, bits, both, keep)
    else:
        # Periods are independent once planned: with a listener, release them in batches and
        # report each batch (issue 17); without one, in a single call as before.
        parts = []
        for lo in range(0, periods.full.shape[0], PROGRESS_BATCH):
            hi = lo + PROGRESS_BATCH
            both = None if obs is None else (obs_full[lo:hi], None)
            parts.append(release_block(spec, periods.full[lo:hi], None, bits, both, keep))
            progress(min(PROGRESS_BATCH, periods.full.shape[0] - lo))
        if periods.tail.shape[1]:
            both = None if obs is None else (obs_full[:0], obs_tail)
            parts.append(release_block(spec, periods.full[:0], periods.tail, bits, both, keep))
            progress(1)
        out = np.concatenate(parts) if parts else np.empty((0, sf.n_nodes))
    del periods  # memory (issue 22): the periods' copy of the input is no longer needed
    if sf.observed is not None:
        out = np.where(sf.observed, out, np.nan)  # nothing is published for a missing reading
    result = sf.to_frame(out)
    del out
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
            **({} if missing == "error" else {"missing": missing}),
        },
        bound=None,
        seeded=seed is not None,
    )
    attach_record(result, record, paid)
    result.attrs["estimates"] = published_estimates(keep)
    result.attrs["hierarchy"] = (
        None
        if sf.hierarchy is None
        else SharedDict(
            {  # public: std_errors
                str(a): [str(c) for c in kids] for a, kids in sf.hierarchy.children.items()
            }
        )
    )
    return result


def _note_missing(result: pd.DataFrame, missing: str) -> pd.DataFrame:
    """Name the missing-readings policy (other than "error") in the record's parameters."""
    if missing != "error" and isinstance(result.attrs.get("privacy"), dict):
        params = dict(result.attrs["privacy"].get("parameters") or {})
        params["missing"] = missing
        result.attrs["privacy"] = {**result.attrs["privacy"], "parameters": params}
    return result
