"""ToPS end to end: threshold optimizer → perturber → smoother ([ToPS21]; tops-notes §1–3).

The first m = ``time_lag`` values are read by the threshold optimizer only
(:func:`~mechanisms.tops_threshold`, ε_θ); nothing else about them is released. Every later value
is clipped to θ and fed to the online consistent F-ary hierarchy (``_tops_tree.py``, ε_r), whose
leaf estimates the smoother turns into one final value per step as the steps arrive
(``_smoothers.py``). Range sums are answered from the released hierarchy by its canonical
decomposition, with partial leaves from the smoothed values (:meth:`TopsRelease.range_sum`).

Steps are indexed after the time lag: released step i is absolute step m + i (0-based).
"""

from __future__ import annotations

import numpy as np

from ..core._budget import BudgetLedger
from ..core._renamed import UNSET, renamed_keyword
from ..core._validation import check_integer, check_positive, check_stream
from ._shape import DEFAULT_SHAPE_SHARE
from ._stream import ToPSStream
from ._threshold import DEFAULT_C
from ._tree import TopsRelease

__all__ = ["tops_perturb", "tops_release"]


def _validated_values(values, bound, time_lag, owner, *, minimum_lag=1):
    bnd = check_positive(bound, "bound", owner)
    if not isinstance(time_lag, int | np.integer) or isinstance(time_lag, bool):
        check_integer(time_lag, "time_lag", owner)  # type errors before reading the data
    arr = check_stream(values, "values", owner, bound=bnd, min_length=2 if minimum_lag else 1)
    m = check_integer(time_lag, "time_lag", owner, minimum=minimum_lag, maximum=arr.size - 1)
    return arr, bnd, m


def tops_release(
    values: object,
    *,
    bound: float,
    epsilon_threshold: float,
    epsilon_perturb: float,
    time_lag: int,
    fanout: int = 16,
    seed: object = None,
    smoother: str = "recent",
    leaf_size: int | None = None,
    levels: int | None = None,
    candidates: object = None,
    c: float = DEFAULT_C,
    threshold_method: str = "laplace",
    smoothing: float = UNSET,
    ledger: BudgetLedger | None = None,
    alpha: float = UNSET,
    shape_rule: str = "smoothing",
    shape_share: float = DEFAULT_SHAPE_SHARE,
    threshold_correction: str = "mse",
    threshold_score: str = "auto",
) -> TopsRelease:
    """Release a stream with ToPS: private θ, consistent hierarchy, smoothed steps ([ToPS21]).

    Parameters
    ----------
    values
        The stream v₁ … v_n, every value in [0, ``bound``]; n ≥ 2.
    bound
        Public bound B.
    epsilon_threshold
        ε_θ of the threshold optimizer on the first m values.
    epsilon_perturb
        ε_r of the perturber on the n − m later values.
    time_lag
        m, 1 ≤ m < n.
    fanout
        F ≥ 2 of the hierarchy.
    seed
        None (OS secure source), or an int / bit source (tests and experiments only).
    smoother, leaf_size, levels, candidates, c, threshold_method, smoothing, ledger
        See :class:`ToPSStream` (horizon r = n − m).
    shape_rule, shape_share
        How g and L are chosen (default ``"smoothing"``: least predicted range-query MSE, the
        smoother's error estimated privately from the prefix with ``shape_share``·ε_θ;
        ``"paper"``: [ToPS21]'s pruning rule). See :class:`ToPSStream`.
    threshold_correction, threshold_score
        ``"mse"`` (default), ``"overshoot"`` or ``"none"``; ``"auto"`` (default),
        ``"paper"`` or ``"scale_free"`` (:class:`ToPSStream`).

    Returns
    -------
    TopsRelease
        ``.threshold``, ``.values`` (length n − m) and ``.range_sum(i, j)`` over released steps.

    Notes
    -----
    Runs :class:`ToPSStream` over the whole stream in one ``extend``: the batch and the stream
    draw the same noise in the same order and give identical releases for the same seed.

    *Privacy*: event-level max(ε_θ, ε_r)-DP (:class:`ToPSStream`).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).exponential(1.0, 5000).clip(0, 50)
    >>> rel = tops_release(x, bound=50.0, epsilon_threshold=1.0, epsilon_perturb=1.0,
    ...                    time_lag=1000, seed=1)
    >>> rel.values.size, rel.threshold < 50.0, rel.leaf_size, rel.shape_rule
    (4000, True, 32, 'smoothing')
    """
    owner = "tops_release"
    arr, bnd, m = _validated_values(values, bound, time_lag, owner)
    return _batch(
        arr,
        owner,
        (smoothing, alpha),
        bound=bnd,
        epsilon_threshold=epsilon_threshold,
        epsilon_perturb=epsilon_perturb,
        time_lag=m,
        horizon=arr.size - m,
        fanout=fanout,
        smoother=smoother,
        leaf_size=leaf_size,
        levels=levels,
        candidates=candidates,
        c=c,
        threshold_method=threshold_method,
        shape_rule=shape_rule,
        shape_share=shape_share,
        threshold_correction=threshold_correction,
        threshold_score=threshold_score,
        seed=seed,
        ledger=ledger,
    )


def tops_perturb(
    values: object,
    *,
    threshold: float,
    bound: float,
    epsilon: float,
    fanout: int = 16,
    leaf_size: int | None = None,
    levels: int | None = None,
    smoother: str = "recent",
    smoothing: float = UNSET,
    seed: object = None,
    ledger: BudgetLedger | None = None,
    alpha: float = UNSET,
) -> TopsRelease:
    """The perturber and smoother alone, with a public θ: every value is released.

    Parameters
    ----------
    values
        The stream, every value in [0, ``bound``]; clipped to θ before release.
    threshold
        θ ∈ (0, B], public (chosen without looking at ``values``).
    bound
        Public bound B.
    epsilon
        ε_r of the hierarchy.
    fanout, leaf_size, levels, smoother, smoothing, seed, ledger
        As for :class:`ToPSStream` (horizon = ``len(values)``).

    Returns
    -------
    TopsRelease
        With ``time_lag`` 0 and ``threshold_release`` None.

    Notes
    -----
    *Privacy*: event-level ε-DP (Laplace mechanism on each tree, L1 sensitivity L·θ; trees
    are disjoint). θ must not depend on ``values`` (use :func:`tops_release` for that).
    """
    owner = "tops_perturb"
    bnd = check_positive(bound, "bound", owner)
    arr = check_stream(values, "values", owner, bound=bnd)
    return _batch(
        arr,
        owner,
        (smoothing, alpha),
        bound=bnd,
        epsilon_threshold=1.0,
        epsilon_perturb=epsilon,
        time_lag=0,
        horizon=arr.size,
        fanout=fanout,
        smoother=smoother,
        threshold=threshold,
        leaf_size=leaf_size,
        levels=levels,
        seed=seed,
        ledger=ledger,
    )


def _batch(arr: object, owner: str, smoothing_alpha: tuple, **stream_args) -> TopsRelease:
    """Run :class:`ToPSStream` over the whole validated stream in one ``extend`` (the batch
    and the stream draw the same noise in the same order); ``smoothing_alpha`` is the new and
    the deprecated keyword of the exponential smoother (issue 12)."""
    smoothing, alpha = smoothing_alpha
    smoothing = renamed_keyword(
        smoothing, alpha, new="smoothing", old="alpha", owner=owner, default=UNSET, stacklevel=4
    )
    stream = ToPSStream(**stream_args, smoothing=smoothing, _owner=owner)
    stream.extend(arr)
    return stream.release()
