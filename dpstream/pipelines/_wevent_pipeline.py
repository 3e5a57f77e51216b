"""Release pipelines of the w-event baselines: Laplace, DFT and PeGaSus ([FV19] §6–7).

Each pipeline validates everything first (``prepare_frame``: no noise is
drawn and nothing is released on bad input), derives the aggregates of a hierarchy from its
leaves, releases every node's stream period by period with the same baseline at ε/h per level
([FV19] Theorem 13, h = number of levels), truncates negative values to zero ([FV19] §6:
"if an algorithm reports negative noisy value ... we truncate it to zero"; post-processing),
and returns a frame aligned to the input with one column per node (``Hierarchy.nodes`` order).

``alpha`` and the neighbour relation
------------------------------------
``alpha`` (default 1.0) is the largest change of one value the release hides: (w, α)-
indistinguishability ([FV19] Def. 3), Δ = α per value; α = 1 is w-event privacy for counts
([FV19] §5.1). ``alpha=None`` is plain w-event privacy on values in a declared public range
[0, bound] (Δ = bound; ``bound`` is then required). ``bound``, when given, is also checked
against the data (leaf values above it are a :class:`~mechanisms.DomainError`). Neighbours
are those of :mod:`dpstream.pipelines._frames`: within one window of w steps, at each step one leaf
(possibly a different one at each step) moves by at most Δ, and its ancestors with it.

Lengths not divisible by ``w``: the last, partial period is released with the same
mechanism and the same noise calibration as a full period (see :mod:`dpstream.pipelines._frames`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from mechanisms import (
    Budget,
    BudgetLedger,
    ParameterError,
    PrivacyGuarantee,
    WAlphaIndistinguishability,
    WEventDFT,
    WEventLaplace,
    WEventPegasus,
    bit_source,
)
from mechanisms.core._validation import check_integer, check_positive

from ._frames import (
    StreamFrame,
    ValueNeighbours,
    from_periods,
    prepare_frame,
    to_periods,
    value_neighbours,
)
from ._privacy import attach_record, charge_release, check_ledger, release_record

__all__ = ["release_dft", "release_laplace", "release_pegasus"]

Progress = Callable[[int], None]
#: Periods released per batch (between two progress updates).
BATCH = 32


def _magnitude(prepared: StreamFrame, bound: float | None) -> float:
    """Public bound on |node value|: n_leaves · bound (0 when no bound is declared)."""
    return 0.0 if bound is None else float(bound) * len(prepared.leaves)


Mechanism = WEventLaplace | WEventDFT | WEventPegasus


def level_nodes(prepared: StreamFrame) -> list[np.ndarray]:
    """Node indices of each level (one flat level of every column without a hierarchy)."""
    tree = prepared.hierarchy
    if tree is None:
        return [np.arange(prepared.n_nodes)]
    return [np.array([tree.index(n) for n in level]) for level in tree.levels]


def _run(
    prepared: StreamFrame,
    mechanisms: Mechanism | list[Mechanism],
    *,
    w: int,
    seed: object,
    progress: Progress | None,
    owner: str,
    epsilon: float,
    neighbours: ValueNeighbours,
    bound: float | None,
    ledger: BudgetLedger | None,
    parameters: dict,
    missing: str = "error",
) -> pd.DataFrame | pd.Series:
    """Release every node's periods; ``mechanisms``: one for every level, or one per level
    (in :func:`level_nodes` order). The per-level budget ε/h is in each mechanism; the whole
    ε is charged to ``ledger`` under the release's unit before the first draw."""
    budget = Budget(epsilon)
    bits = bit_source(seed)  # validates the seed; draws nothing
    paid = charge_release(  # after validation, before any draw; the data set's by default
        ledger, budget, neighbours.unit, owner, frame=prepared, seeded=seed is not None
    )
    periods = to_periods(prepared.values, w)
    levels = level_nodes(prepared)
    if not isinstance(mechanisms, list):
        mechanisms = [mechanisms] * len(levels)
    full = np.empty_like(periods.full)
    tail = np.array(periods.tail)
    for lo in range(0, periods.full.shape[0], BATCH):
        hi = min(lo + BATCH, periods.full.shape[0])
        for nodes, mech in zip(levels, mechanisms, strict=True):
            full[lo:hi, nodes] = mech.release(periods.full[lo:hi, nodes], bits)
        if progress is not None:
            progress(hi - lo)
    if tail.shape[1]:
        for nodes, mech in zip(levels, mechanisms, strict=True):
            tail[nodes] = mech.release(periods.tail[nodes], bits)
        if progress is not None:
            progress(1)
    mechanism = mechanisms[-1]
    out = from_periods(full, tail)
    np.maximum(out, 0.0, out=out)  # [FV19] §6: negative values are truncated to zero
    result = prepared.to_frame(out)
    per_level = mechanism.guarantee
    guarantee = PrivacyGuarantee(
        unit=per_level.unit,
        budget=Budget(epsilon=mechanism.epsilon * prepared.n_levels),
        proof=f"{per_level.proof}; ε/h per level, h = {prepared.n_levels} ([FV19] Theorem 13)",
    )
    result.attrs["dpstream"] = {
        "mechanism": type(mechanism).__name__,
        "guarantee": str(guarantee),
        "levels": prepared.n_levels,
        "epsilon_per_level": mechanism.epsilon,
        "seeded": seed is not None,
    }
    record = release_record(
        unit=neighbours.unit,
        budget=budget,
        proof=guarantee.proof,
        mechanism=owner.removeprefix("release_"),
        parameters={
            "levels": prepared.n_levels,
            **parameters,
            **({} if missing == "error" else {"missing": missing}),
        },
        bound=bound,
        seeded=seed is not None,
    )
    attach_record(result, record, paid)
    return result


def _common(
    frame: object,
    *,
    owner: str,
    epsilon: object,
    w: object,
    hierarchy: object,
    alpha: object,
    bound: object,
    ledger: object,
    missing: str = "error",
) -> tuple[StreamFrame, float, int, float, bool, dict]:
    """Validate the shared arguments; return (frame, ε per level, w, Δ, alpha_unit, the
    keywords of :func:`_run` that carry the accounting)."""
    eps = check_positive(epsilon, "epsilon", owner)
    w = check_integer(w, "w", owner)
    neighbours = value_neighbours(w=w, alpha=alpha, bound=bound, owner=owner)
    check_ledger(ledger, owner)
    if missing not in ("error", "zero"):
        raise ParameterError(
            f"The 'missing' parameter of {owner} must be 'error' or 'zero' ('unmeasured' is "
            f"OptStream's, release_optstream). Got {missing!r} instead."
        )
    prepared = prepare_frame(frame, owner=owner, hierarchy=hierarchy, bound=bound, missing=missing)
    alpha_unit = isinstance(neighbours.unit, WAlphaIndistinguishability)
    accounting = {
        "owner": owner,
        "epsilon": eps,
        "neighbours": neighbours,
        "bound": None if bound is None else float(bound),
        "ledger": ledger,
        "missing": missing,
    }
    return prepared, eps / prepared.n_levels, w, neighbours.delta, alpha_unit, accounting


def release_laplace(
    frame: pd.DataFrame | pd.Series,
    *,
    epsilon: float,
    w: int = 48,
    hierarchy: object = None,
    alpha: float | None,
    seed: object = None,
    bound: float | None = None,
    progress: Progress | None = None,
    ledger: BudgetLedger | None = None,
    missing: str = "error",
) -> pd.DataFrame | pd.Series:
    """Release every node's stream with Laplace noise on every value ([FV19] §6, "Laplace").

    Parameters
    ----------
    frame : pandas.DataFrame or pandas.Series
        One column per leaf stream, DatetimeIndex or integer index, finite non-negative values.
    epsilon : float
        Privacy loss per window of ``w`` steps, for the whole release (all levels).
    w : int, default 48
        Window (period) length in steps (48 half-hours: one day).
    hierarchy : mapping parent -> list of children, optional
        Leaves are the frame's columns; aggregates are derived from them.
    alpha : float or None
        Protected change of one value ((w, α)-indistinguishability), in the data's units;
        None: plain w-event privacy on [0, ``bound``]. Required: it defines the privacy unit.
    seed : int, optional
        For tests and experiments only: a seeded release is *not* private.
    bound : float, optional
        Public bound on leaf values (required when ``alpha`` is None).
    progress : callable, optional
        Called with the number of periods released after each batch.
    ledger : mechanisms.BudgetLedger, None or False, default None
        The accountant charged ``epsilon`` under the release's unit
        (``WAlphaIndistinguishability(w, alpha)``, or ``WEvent(w)`` with ``alpha=None``) after
        validation and before any draw. None: the data set's ledger (by the fingerprint of the
        columns and hierarchy); False: none, said in the record; as for
        :func:`dpstream._dataset.account_release`.
    missing : {"error", "zero"}, default "error"
        A NaN (a missing reading): refused, naming the first one, or counted as 0 (the record's
        parameters then say ``missing: "zero"``).

    Returns
    -------
    pandas.DataFrame
        One column per node, same index as ``frame``, values ≥ 0 (a Series for a Series input
        without hierarchy). ``result.attrs["privacy"]`` is the release's
        :meth:`mechanisms.PrivacyRecord.to_dict`; ``result.attrs["dpstream"]`` the guarantee.

    Notes
    -----
    Each value gets Lap(w·Δ/(ε/h)), Δ = α (or bound), h = levels of the hierarchy.

    *Privacy*: ε per window of w steps under (w, α)-indistinguishability (or w-event privacy
    on [0, bound]): :class:`mechanisms.WEventLaplace` per node at ε/h; per step one node of
    each level changes, so a level's changes total at most w·Δ and its loss is ε/h; the h
    levels compose ([FV19] Theorem 13); truncation at 0 is post-processing.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"a": [5.0] * 96, "b": [7.0] * 96})
    >>> out = release_laplace(frame, epsilon=1.0, alpha=1.0, hierarchy={"ab": ["a", "b"]}, seed=1)
    >>> list(out.columns), out.shape
    (['ab', 'a', 'b'], (96, 3))
    """
    owner = "release_laplace"
    prepared, eps, w, dlt, unit, accounting = _common(
        frame, owner=owner, epsilon=epsilon, w=w, hierarchy=hierarchy, alpha=alpha, bound=bound,
        ledger=ledger, missing=missing,
    )  # fmt: skip
    mech = WEventLaplace(
        epsilon=eps, w=w, delta=dlt, alpha_unit=unit, magnitude=_magnitude(prepared, bound)
    )
    return _run(prepared, mech, w=w, seed=seed, progress=progress, parameters={}, **accounting)


def release_dft(
    frame: pd.DataFrame | pd.Series,
    *,
    epsilon: float,
    w: int = 48,
    k: int = 10,
    hierarchy: object = None,
    alpha: float | None,
    seed: object = None,
    bound: float | None = None,
    progress: Progress | None = None,
    ledger: BudgetLedger | None = None,
    missing: str = "error",
) -> pd.DataFrame | pd.Series:
    """Release every node's stream from its k lowest noisy Fourier coefficients ([FV19] §6).

    Parameters are those of :func:`release_laplace`, plus

    k : int, default 10
        Complex coefficients kept per period (lowest frequencies, 1 ≤ k ≤ w; more than
        w//2 + 1 keeps every frequency of a real signal and is clipped to that).

    Notes
    -----
    Per period: orthonormal real DFT, the k lowest frequencies perturbed with Laplace of
    scale √(k·w·min(2n, w))·Δ/(ε/h) for a level of n nodes (√(2kw)·Δ/(ε/h) for one node),
    zero-padded, inverted; then truncated at 0. Over [FV19] §6's √k·Δ₂/ε the factor √2 covers
    windows straddling two periods and √n changes spread over the n nodes of a level, one
    node per step (see :class:`~mechanisms.WEventDFT` and the neighbour relation above).

    *Privacy*: ε per window of w steps (unit as in :func:`release_laplace`), ε/h per level
    ([FV19] Theorem 13).
    """
    owner = "release_dft"
    w_checked = check_integer(w, "w", owner)
    k = check_integer(k, "k", owner, maximum=w_checked)
    prepared, eps, w, dlt, unit, accounting = _common(
        frame, owner=owner, epsilon=epsilon, w=w, hierarchy=hierarchy, alpha=alpha, bound=bound,
        ledger=ledger, missing=missing,
    )  # fmt: skip
    mechs = [
        WEventDFT(
            epsilon=eps,
            w=w,
            k=k,
            delta=dlt,
            alpha_unit=unit,
            magnitude=_magnitude(prepared, bound),
            streams=len(nodes),
        )
        for nodes in level_nodes(prepared)
    ]
    return _run(
        prepared, mechs, w=w, seed=seed, progress=progress, parameters={"k": k}, **accounting
    )


def release_pegasus(
    frame: pd.DataFrame | pd.Series,
    *,
    epsilon: float,
    w: int = 48,
    hierarchy: object = None,
    alpha: float | None,
    seed: object = None,
    bound: float | None = None,
    perturb_share: float = 0.8,
    threshold: float | None = None,
    smoother: str = "median",
    progress: Progress | None = None,
    ledger: BudgetLedger | None = None,
    missing: str = "error",
) -> pd.DataFrame | pd.Series:
    """Release every node's stream with PeGaSus adapted to w-events ([PGS17], [FV19] §7).

    Parameters are those of :func:`release_laplace`, plus

    perturb_share : float, default 0.8
        Share of each level's ε for the perturber; the grouper gets the rest ([PGS17] §6).
    threshold : float, optional
        Grouper threshold on the deviation of a group (values' units); default 5·w·Δ/ε_g.
    smoother : {"median", "mean"}, default "median"
        Statistic of the perturbed values of a step's group (so far).

    Notes
    -----
    *Privacy*: ε per window of w steps (unit as in :func:`release_laplace`), ε/h per level
    ([FV19] Theorem 13); see :class:`~mechanisms.WEventPegasus`.
    """
    owner = "release_pegasus"
    if threshold is not None:
        threshold = check_positive(threshold, "threshold", owner)
    if smoother not in ("median", "mean"):
        raise ParameterError(
            f"The 'smoother' parameter of {owner} must be one of ['median', 'mean']. "
            f"Got {smoother!r} instead."
        )
    prepared, eps, w, dlt, unit, accounting = _common(
        frame, owner=owner, epsilon=epsilon, w=w, hierarchy=hierarchy, alpha=alpha, bound=bound,
        ledger=ledger, missing=missing,
    )  # fmt: skip
    mech = WEventPegasus(
        epsilon=eps,
        w=w,
        delta=dlt,
        alpha_unit=unit,
        perturb_share=perturb_share,
        threshold=threshold,
        smoother=smoother,
        magnitude=_magnitude(prepared, bound),
    )
    parameters = {
        "perturb_share": perturb_share,
        "threshold": threshold,
        "smoother": smoother,
    }
    return _run(
        prepared, mech, w=w, seed=seed, progress=progress, parameters=parameters, **accounting
    )
