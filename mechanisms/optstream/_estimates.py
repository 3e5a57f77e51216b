"""OptStream's private measurements per w-period ([FV19] Algorithm 2, §3, §5.1, §5.2).

For every w-period and every level of a hierarchy this module runs **Sample** (equally spaced,
or the L1/SVT sampler of Algorithm 3, :mod:`._sampling`), **Perturb** (lattice Laplace on the k
samples), **Reconstruct** (linear interpolation) and the noisy **feature queries** of Algorithm 4
line 1. The result is the array of noisy estimates ``c̃`` (periods x nodes x parts) that
``postproc.project_consistent`` turns into a consistent, non-negative release (Algorithm 4
line 2, post-processing: no budget). numpy only; features are plain partitions here
(``postproc.FeatureSet.partitions`` fits).

Sensitivities, checked against the neighbour relation
-----------------------------------------------------
Unit: (w, α)-indistinguishability ([FV19] Def. 3), the one neighbour relation of every
pipeline (``dpstream.pipelines``): within w consecutive steps, at each step the leaf values change
by at most α in total (one individual's report moves by <= α; the individual, hence the leaf,
may differ from step to step). A level's nodes partition the leaves, so per step a level moves by
at most α in total. Plain w-event privacy on values in a public range [0, B] is α = B.

* Sample (Algorithm 3): ΔL = 2α(w − k), [FV19] Theorem 6 and §5.1 -- correct (see
  :func:`~._sampling.sample_l1`, which also explains the one-sample-set-per-level design).
* Perturb: the k sampled values of a level move by at most α each in total: L1 sensitivity kα
  ([FV19] §3.2 and §5.1: "Lap(kΔ_A/ε_p)" -- correct; the "parallel composition" of Theorem 8's
  proof is not what makes it so: all k samples may change, it is the L1 sum).
* Feature queries: **[FV19] Theorem 9's proof is wrong** ("each feature query is a count query
  with sensitivity 1", and §5.1 "ΔQ = α"). A feature is a partition of the period into parts of
  sizes s_1..s_m; every value of the period may change by α, so part j moves by s_j·α and the
  partition's L1 sensitivity is (s_1 + ... + s_m)·α = w·α. We calibrate with w·α per feature
  (ε_o/(p − 1) each, as Algorithm 4 line 1); ``tests/privacy/test_optstream_audit.py`` shows
  the sensitivity-α calibration failing the audit.

Windows that straddle two periods
---------------------------------
Algorithm 2 releases disjoint periods and [FV19] Lemma 1 accounts one period. Definition 2/3
quantifies over *every* window of w steps, which may straddle two periods. The feature queries
are linear (loss proportional to the changed steps: ε_o in total) and equally spaced samples
put exactly k sample steps in every window (ε_p), but with the L1 sampler each of the two
periods' samplers and up to 2k data-chosen samples may see the window: loss up to
ε_o + 2(ε_s + ε_p). With ``windows="any"`` (the default) :func:`optstream_split` scales the
shares so this worst case equals ε; ``windows="aligned"`` is the paper's per-period accounting
(ε_s = ε_p = ε_o = ε/3) and only covers windows aligned with the periods. The lattice rounding
is counted per changed step (k(α + γ) for Perturb, w(α + γ) per feature), so each period's loss
is linear in the steps of the window it holds and the two parts add up.

A stream whose length is not a multiple of w ends with a short period of r < w steps, released
alone (B = 1) with the full period's calibration (``window=w``). Its equally spaced samples are
the full pattern's steps below r (:func:`~._sampling.sample_equal_window`), so a window
straddling the last full period and the tail still holds at most k samples. (Issue 11 §1: the
tail used to get its own pattern ``sample_equal(r, k)``, and such a window held up to 1.8k
samples; ``tests/privacy/test_tail_audit.py`` measures the leak.) The L1 sampler keeps at most
min(k, r) samples and ΔL = 2α(w − k) in the tail, so the two-period bound above holds as is.
Several short periods are refused: a window could then meet more than two periods.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core._budget import Budget, BudgetLedger
from ..core._errors import ParameterError
from ..core._noise import LaplaceNoise, lattice_granularity
from ..core._random import BitSource, bit_source
from ..core._units import PrivacyGuarantee, WAlphaIndistinguishability
from ..core._validation import charge_ledger, check_integer, check_ledger, check_positive
from ._sampling import (
    interpolation_weights,
    null_rate_threshold,
    reconstruct,
    reconstruct_observed,
    sample_equal_window,
    sample_l1,
)

__all__ = [
    "OPTSTREAM_SAMPLINGS",
    "OptStreamEstimates",
    "OptStreamSplit",
    "feature_answers",
    "feature_noise",
    "optstream_estimates",
    "optstream_split",
    "perturb_noise",
]

OPTSTREAM_SAMPLINGS = ("l1", "equal")
_WINDOWS = ("any", "aligned")
_OWNER = "optstream_estimates"


@dataclass(frozen=True, slots=True, kw_only=True)
class OptStreamSplit:
    """Budget of one period and one level: ε_s, ε_p, ε_o ([FV19] Alg. 2 line 3, Theorem 13)."""

    epsilon: float
    """Total ε of the release (every window of w steps, or aligned ones; see ``windows``)."""
    n_levels: int
    """h of [FV19] Theorem 13: each level gets ε/h."""
    sample: float
    """ε_s of one period and level (0 for equally spaced sampling)."""
    perturb: float
    """ε_p of one period and level."""
    features: float
    """ε_o of one period and level (0 without feature queries)."""
    windows: str
    """``"any"``: ε covers every window; ``"aligned"``: only windows equal to a period."""


def optstream_split(
    epsilon: float,
    *,
    sampling: str = "l1",
    n_levels: int = 1,
    has_features: bool = True,
    windows: str = "any",
    shares: Sequence[float] | None = None,
) -> OptStreamSplit:
    """Split ε into ε_s, ε_p, ε_o per level ([FV19] Alg. 2 line 3, §6, Theorem 13).

    Parameters
    ----------
    epsilon
        Total privacy loss ε.
    sampling
        ``"l1"`` or ``"equal"``.
    n_levels
        Levels h of the hierarchy; each level gets ε/h.
    has_features
        False when the feature set is only the singletons (no queries, ε_o = 0).
    windows
        ``"any"`` (default): the split makes every window of w steps cost at most ε/h per
        level, ``ε_o + m(ε_s + ε_p) = ε/h`` with m = 2 for the L1 sampler and 1 for equally
        spaced samples (module Notes). ``"aligned"``: the paper's per-period accounting,
        ``ε_s + ε_p + ε_o = ε/h``.
    shares
        Relative weights (s, p, o) of the three measurements; default equal weights on the
        active ones ([FV19] §6: "split equally"): (1, 1, 1) for ``"l1"``, (0, 1, 1) for
        ``"equal"``.
    """
    owner = "optstream_split"
    eps = check_positive(epsilon, "epsilon", owner)
    h = check_integer(n_levels, "n_levels", owner)
    if sampling not in OPTSTREAM_SAMPLINGS:
        raise ParameterError(
            f"The 'sampling' parameter of {owner} must be one of {OPTSTREAM_SAMPLINGS}. "
            f"Got {sampling!r} instead."
        )
    if windows not in _WINDOWS:
        raise ParameterError(
            f"The 'windows' parameter of {owner} must be one of {_WINDOWS}. Got {windows!r}."
        )
    if shares is None:
        shares = (1.0 if sampling == "l1" else 0.0, 1.0, 1.0)
    vals = [float(v) for v in shares]
    if len(vals) != 3 or any(not np.isfinite(v) or v < 0 for v in vals) or vals[1] == 0:
        raise ParameterError(
            f"The 'shares' parameter of {owner} must be three non-negative floats (s, p, o) "
            f"with p > 0. Got {list(shares)!r} instead."
        )
    s, p, o = vals
    if sampling == "equal":
        s = 0.0
    elif s == 0:
        raise ParameterError(
            f"The 'shares' parameter of {owner} must give the L1 sampler a positive share. "
            f"Got {list(shares)!r} instead. Use sampling='equal' for a free sampler."
        )
    if not has_features:
        o = 0.0
    elif o == 0:
        raise ParameterError(
            f"The 'shares' parameter of {owner} must give the feature queries a positive share "
            f"when the feature set has queries beyond the singletons. Got {list(shares)!r} "
            "instead. To skip feature queries, pass features with only the singletons "
            "(postproc.FeatureSet.from_breaks(w, []))."
        )
    mult = 2.0 if (sampling == "l1" and windows == "any") else 1.0
    unit = (eps / h) / (mult * (s + p) + o)
    # Round the parts down so the any-window total never exceeds ε/h by an ulp.
    shrink = 1.0 - 1e-12
    return OptStreamSplit(
        epsilon=eps,
        n_levels=h,
        sample=s * unit * shrink,
        perturb=p * unit * shrink,
        features=o * unit * shrink,
        windows=windows,
    )


def _vector_noise(sensitivity: float, epsilon: float, n_changed: int) -> LaplaceNoise:
    """Lattice Laplace for a vector query: rounding each of ``n_changed`` coordinates adds γ."""
    gamma = lattice_granularity(sensitivity / epsilon)
    return LaplaceNoise(
        sensitivity=sensitivity + max(n_changed - 1, 0) * gamma, epsilon=epsilon, granularity=gamma
    )


def perturb_noise(*, k: int, alpha: float, epsilon: float, n_nodes: int = 1) -> LaplaceNoise:
    """Noise of Perturb ([FV19] §3.2, §5.1): L1 sensitivity kα of the level's k samples."""
    return _vector_noise(k * alpha, epsilon, k * n_nodes)


def feature_noise(*, window: int, alpha: float, epsilon: float, n_coords: int) -> LaplaceNoise:
    """Noise of one feature query (Algorithm 4 line 1): L1 sensitivity w·α (not 1, see Notes).

    The lattice rounding is counted once per step of the window (scale w(α + γ)/ε), not once
    per changed coordinate of one period (``min(n_coords, w)``): a window straddling two
    periods may change a part in each of them, and only with one γ per changed step is each
    period's loss at most (changed steps / w)·ε, which adds up to ε over the two periods.
    ``n_coords`` (parts x nodes of the feature) is kept for callers; it cannot lower the count.
    """
    check_integer(n_coords, "n_coords", "feature_noise")
    return _vector_noise(window * alpha, epsilon, window)


def feature_answers(x: np.ndarray, partition: Sequence[Sequence[int]]) -> np.ndarray:
    """Exact answers Q_F(D) of one feature: the sum of the values in each part ([FV19] §3.4).

    ``x`` has steps on its last axis; the result has one entry per part on its last axis.

    Examples
    --------
    [FV19] Example 3 (0-based steps):

    >>> x = np.array([10, 15, 20, 23, 41, 72, 55, 50, 88, 72, 40, 18.0])
    >>> feature_answers(x, [range(0, 4), range(4, 9), range(9, 12)]).tolist()
    [68.0, 306.0, 130.0]
    """
    arr = np.asarray(x, dtype=np.float64)
    return np.stack([arr[..., list(part)].sum(axis=-1) for part in partition], axis=-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class OptStreamEstimates:
    """Noisy measurements of every node and feature part, per period (Alg. 2 + Alg. 4 l. 1)."""

    estimates: np.ndarray
    """``c̃`` (B, N, P): the reconstructed ``x̃`` (the singletons) then every feature's parts."""
    variances: np.ndarray
    """(B, N, P) noise variances: interpolated perturbation noise for ``x̃`` (excluding the
    interpolation bias: ``postproc.bias_aware_variances`` adds an estimate), the Laplace
    variance for the parts."""
    samples: np.ndarray
    """(B, h, r) boolean sample sets, one per period and level."""
    split: OptStreamSplit
    """ε_s, ε_p, ε_o of each period and level."""
    thetas: tuple[float, ...]
    """SVT threshold θ used at each level (NaN for equally spaced sampling)."""
    guarantee: PrivacyGuarantee
    """What the measurements protect and what they cost."""


def _levels(levels: object, n_nodes: int) -> list[np.ndarray]:
    if levels is None:
        return [np.arange(n_nodes)]
    out = [np.asarray(list(level), dtype=np.int64) for level in levels]  # type: ignore[union-attr]
    flat = np.sort(np.concatenate(out)) if out else np.empty(0, dtype=np.int64)
    if any(lv.size == 0 for lv in out) or not np.array_equal(flat, np.arange(n_nodes)):
        raise ParameterError(
            f"The 'levels' parameter of {_OWNER} must partition the node indices "
            f"0..{n_nodes - 1} into non-empty levels."
        )
    return out


def optstream_estimates(
    values: object,
    *,
    epsilon: float,
    k: int = 10,
    alpha: float = 1.0,
    sampling: str = "l1",
    theta: float | None = None,
    features: Sequence[Sequence[Sequence[int]]] | None = None,
    levels: Sequence[Sequence[int]] | None = None,
    window: int | None = None,
    windows: str = "any",
    shares: Sequence[float] | None = None,
    seed: object = None,
    ledger: BudgetLedger | None = None,
    observed: object = None,
) -> OptStreamEstimates:
    """Run Sample, Perturb, Reconstruct and the feature queries on every period and node.

    Parameters
    ----------
    values
        True values (B, N, r): B periods, N nodes (every node of the hierarchy, aggregates
        included), r <= w steps. Finite.
    epsilon
        Total ε (split by :func:`optstream_split`; each level gets ε/h, [FV19] Theorem 13).
    k
        Samples per period, 1 <= k <= w.
    alpha
        α of the unit: largest per-step change of the leaves (in total), in the values' units.
    sampling
        ``"l1"`` (Algorithm 3) or ``"equal"``.
    theta
        Public SVT threshold θ, compared with a level's summed L1 score. ``None``: the
        data-independent :func:`~._sampling.null_rate_threshold` (accepts at the equally
        spaced rate k/w when there is no signal).
    features
        Partitions of the period, finest first, the singletons first (as
        ``postproc.FeatureSet.partitions``); default singletons + the whole period.
    levels
        Node indices of each level (h lists partitioning 0..N−1); default one level.
    window
        The w of the calibration (default r). ``r < window`` is a short last period: it keeps
        the full period's calibration and sample pattern, and must come alone (B = 1).
    windows, shares
        See :func:`optstream_split`.
    seed
        ``None`` (secure source) or an int (reproducible, not for release).
    ledger
        Optional :class:`~mechanisms.BudgetLedger`, charged the guarantee (ε, unit
        (w, α)-indistinguishability) once, after validation and before any draw.
    observed
        Optional boolean mask (B, N, r) of observed readings, *public* (the ``unmeasured``
        policy for missing readings): ``values`` may be NaN where it is False. Unobserved
        entries are replaced by the constant 0 before anything is computed (so every feature
        answer is a sum over the observed readings), the sampler's scores and each node's
        reconstruction use only the node's observed steps
        (:func:`~._sampling.sample_l1`, :func:`~._sampling.reconstruct_observed`).

    Returns
    -------
    OptStreamEstimates

    Notes
    -----
    Per level ℓ (values ``x_ℓ`` (B, n_ℓ, r)): S = Sample (one set per period, shared by the
    level's nodes), ``x̃_S = x_S + Lap(kα/ε_p)``, ``x̃ = ξ^S`` (hold after the last sample),
    ``c̃_F = Q_F(x) + Lap(wα(p − 1)/ε_o)`` for F = F_2..F_p.

    *Privacy*: per period and level, ε_s + ε_p + ε_o by sequential composition ([FV19]
    Lemma 1; Theorems 7, 8, 9 with the sensitivities of the module Notes); any window of w steps
    costs at most ε/h per level with ``windows="any"``; levels compose sequentially: ε
    ([FV19] Theorem 13). Unit: (w, α)-indistinguishability, [FV19] Def. 3.

    *Unobserved readings* (``observed``): the neighbour relation is taken with the mask fixed
    (public operational data, ``docs/privacy.md``, "Missing readings"). An unobserved entry
    is the constant 0 in both neighbours, so every sensitivity above still bounds the change;
    the sampler only drops score terms through a public gate and the reconstruction is
    post-processing of the noisy samples with the mask: the loss is unchanged.
    """
    ledger = check_ledger(ledger, _OWNER)
    bits = bit_source(seed)
    return _estimates(
        values,
        epsilon=epsilon,
        k=k,
        alpha=alpha,
        sampling=sampling,
        theta=theta,
        features=features,
        levels=levels,
        window=window,
        windows=windows,
        shares=shares,
        bits=bits,
        ledger=ledger,
        observed=observed,
    )


def _estimates(
    values: object,
    *,
    epsilon: float,
    k: int,
    alpha: float,
    sampling: str,
    theta: float | None,
    features: Sequence[Sequence[Sequence[int]]] | None,
    levels: Sequence[Sequence[int]] | None,
    window: int | None,
    windows: str,
    shares: Sequence[float] | None,
    bits: BitSource,
    ledger: BudgetLedger | None = None,
    observed: object = None,
) -> OptStreamEstimates:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 3 or 0 in x.shape:
        raise ParameterError(
            f"The 'values' parameter of {_OWNER} must be a non-empty array (periods, nodes, "
            f"steps). Got shape {x.shape}."
        )
    obs = None
    if observed is not None:
        obs = np.asarray(observed)
        if obs.dtype != bool or obs.shape != x.shape:
            raise ParameterError(
                f"The 'observed' parameter of {_OWNER} must be a boolean array of the values' "
                f"shape {x.shape}. Got {obs.dtype} of shape {obs.shape}."
            )
        x = np.where(obs, x, 0.0)  # a public constant where nothing was observed
        if obs.all():
            obs = None
    if not np.isfinite(x).all():
        from ..core._errors import DomainError

        raise DomainError(
            f"The 'values' argument of {_OWNER} must hold finite numbers only (no NaN or "
            "infinity; issue 11 §5: never a count of offending private values)."
        )
    n_b, n_nodes, r = x.shape
    w = r if window is None else check_integer(window, "window", _OWNER, minimum=r)
    if r < w and n_b > 1:
        # Consecutive short periods would put more than k samples (equal), more than two
        # samplers (L1) and more than w·α of feature change in one window of w steps.
        raise ParameterError(
            f"The 'values' parameter of {_OWNER} must hold full periods of window = {w} steps; "
            f"a short period (r < w) may only be the last one of a stream, released alone. "
            f"Got {n_b} periods of r = {r} steps."
        )
    k = check_integer(k, "k", _OWNER, minimum=1, maximum=w)
    alpha = check_positive(alpha, "alpha", _OWNER)
    if theta is not None:
        theta = check_positive(theta, "theta", _OWNER, allow_zero=True)
    if features is None:
        features = [[[t] for t in range(r)], [list(range(r))]] if r > 1 else [[[0]]]
    parts = [[list(part) for part in feature] for feature in features]
    if len(parts[0]) != r:
        raise ParameterError(
            f"The 'features' parameter of {_OWNER} must start with the {r} singletons."
        )
    queries = parts[1:]
    lv = _levels(levels, n_nodes)
    split = optstream_split(
        epsilon,
        sampling=sampling,
        n_levels=len(lv),
        has_features=bool(queries),
        windows=windows,
        shares=shares,
    )
    n_parts = sum(len(f) for f in parts)
    est = np.empty((n_b, n_nodes, n_parts))
    var = np.empty((n_b, n_nodes, n_parts))
    masks = np.empty((n_b, len(lv), r), dtype=bool)
    # Every noise is built (and its range checked) before the charge; the charge comes before
    # the first draw (DESIGN: budgets are charged before anything is drawn).
    pnoises = [
        perturb_noise(k=k, alpha=alpha, epsilon=split.perturb, n_nodes=len(nodes)) for nodes in lv
    ]
    fnoises = [
        [
            feature_noise(
                window=w,
                alpha=alpha,
                epsilon=split.features / len(queries),
                n_coords=len(feature) * len(nodes),
            )
            for feature in queries
        ]
        for nodes in lv
    ]
    proof = (
        "[FV19] Lemma 1 + Thm. 7 (SVT, ΔL = 2α(w−k)), Thm. 8 (Δ = kα), Thm. 9 with the "
        "corrected sensitivity wα per feature, Thm. 13 (ε/h per level); "
        + (
            "every window of w steps"
            if windows == "any" or sampling == "equal"
            else "windows aligned with the periods only"
        )
    )
    guarantee = PrivacyGuarantee(
        unit=WAlphaIndistinguishability(w=w, alpha=alpha), budget=Budget(split.epsilon), proof=proof
    )
    charge_ledger(ledger, guarantee.budget, _OWNER, guarantee.unit)
    thetas = []
    for li, nodes in enumerate(lv):
        xl = x[:, nodes, :]
        if sampling == "l1":
            th = (
                null_rate_threshold(w=w, k=k, epsilon=split.sample, alpha=alpha)
                if theta is None
                else theta
            )
            mask = sample_l1(
                xl,
                k=k,
                epsilon=split.sample,
                alpha=alpha,
                theta=th,
                bits=bits,
                window=w,
                observed=None if obs is None else obs[:, nodes, :],
            )
        else:
            th = float("nan")
            mask = np.zeros((n_b, r), dtype=bool)
            mask[:, sample_equal_window(r, k, w)] = True  # the full pattern, cut (tail leak)
        thetas.append(float(th))
        masks[:, li] = mask
        noise = pnoises[li]
        taken = xl.transpose(0, 2, 1)[mask].reshape(n_b, -1, len(nodes)).transpose(0, 2, 1)
        noisy = noise.release(taken, bits)  # [FV19 §3.2]
        if obs is None:
            est[:, nodes, :r] = reconstruct(mask, noisy)  # [FV19 §3.3]
            var[:, nodes, :r] = (interpolation_weights(mask) * noise.variance)[:, None, :]
        else:  # each node through its observed samples only
            rec, wts = reconstruct_observed(mask, noisy, obs[:, nodes, :])
            est[:, nodes, :r] = rec
            var[:, nodes, :r] = wts * noise.variance
        col = r
        for feature, fnoise in zip(queries, fnoises[li], strict=True):  # [FV19 Alg. 4 l. 1]
            m = len(feature)
            est[:, nodes, col : col + m] = fnoise.release(feature_answers(xl, feature), bits)
            var[:, nodes, col : col + m] = fnoise.variance
            col += m
    for arr in (est, var, masks):
        arr.setflags(write=False)
    return OptStreamEstimates(
        estimates=est,
        variances=var,
        samples=masks,
        split=split,
        thetas=tuple(thetas),
        guarantee=guarantee,
    )
