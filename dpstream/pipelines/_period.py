"""One OptStream period: the pure function both the single-process and the Dask path run.

Once planned (ε, w, k, α, sampler, θ, weights, features, hierarchy fixed before the call), the
periods of a release are independent ([FV19] Alg. 2 draws a period's samples, perturbations and
feature queries from its own values and bits; Alg. 4 line 2 solves one problem per period).
:func:`release_block` is what :func:`~dpstream.pipelines.release_optstream` runs on the full
periods and the tail of a call; :func:`release_period` is the same function on one period, what
:class:`dpstream.ReleaseStore` and the Dask engine (:mod:`dpstream.engine`) map over periods.

The ``"variance"`` weights estimate an interpolation-bias variance by the method of moments over
the periods passed together (:func:`postproc.bias_aware_variances`); one period at a time (store,
Dask) they are estimated from that period alone, so a stored period depends on its own values and
bits only -- never on which other periods were in the same run.

Randomness: :func:`period_bits` gives a period's bits -- the operating system's secure source
(drawn in the process that runs the period), or, for experiments, a child of the seed keyed by
the period's ordinal (``numpy.random.SeedSequence(seed, spawn_key=(ordinal,))``), so seeded
results do not depend on how periods are spread over processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from mechanisms import ParameterError, bit_source
from mechanisms.core._random import BitSource
from mechanisms.optstream._estimates import OptStreamEstimates, _estimates
from postproc import FeatureSet, Hierarchy, bias_aware_variances, project_consistent

from ._frames import from_periods
from ._shared import share

__all__ = [
    "PeriodSpec",
    "period_bits",
    "published_estimates",
    "release_block",
    "release_period",
    "release_periods",
]


#: Periods x nodes x parts post-processed at once (16 MB per array; :func:`_post_process`).
_BATCH_NUMBERS = 2**21


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
    observed: np.ndarray | None = None,
    keep: list | None = None,
) -> np.ndarray:
    """Algorithm 4 line 2 over the whole hierarchy, one problem per period: (B, N, r).

    ``keep``: a list that receives ``(est, variances)``, the published measurements and the
    weights Algorithm 4 used (both public: post-processing of the release,
    :func:`dpstream.std_errors`)."""
    kw = _weights(est, fs, levels, weights)
    if keep is not None:
        keep.append((est, kw.get("variances"), fs))
    if observed is not None:  # missing="unmeasured": see _pin_unobserved
        est, kw = _pin_unobserved(est, kw, observed)
    if hierarchy is not None:
        # each period's problem is its own: a batch at a time, so that Algorithm 4's
        # temporaries do not grow with the periods (issue 22: ~12 arrays of the whole month
        # at once, 19.7 GB at 100,000 feeders x 30 days); the weights above saw every period
        n_b, n_nodes, n_parts = est.estimates.shape
        batch = max(1, _BATCH_NUMBERS // max(n_nodes * n_parts, 1))
        if n_b <= batch:
            return project_consistent(est.estimates, hierarchy=hierarchy, features=fs, **kw).values
        out = np.empty((n_b, n_nodes, fs.w))
        for lo in range(0, n_b, batch):
            part = slice(lo, lo + batch)
            out[part] = project_consistent(
                est.estimates[part], hierarchy=hierarchy, features=fs,
                **{key: val[part] for key, val in kw.items()},
            ).values  # fmt: skip
        return out
    out = np.empty((est.estimates.shape[0], len(nodes), fs.w))
    for j, name in enumerate(nodes):  # independent columns: one stream each
        one = {key: val[:, j : j + 1] for key, val in kw.items()}
        rel = project_consistent(
            est.estimates[:, j : j + 1, :], hierarchy=Hierarchy.single(name), features=fs, **one
        )
        out[:, j, :] = rel.values[:, 0, :]
    return out


def _pin_unobserved(est: OptStreamEstimates, kw: dict, observed: np.ndarray):
    """Pin each unobserved reading's singleton to 0 with a negligible variance (unmeasured).

    Aggregates are sums over the observed leaves, so the consistent solution must give an
    unobserved leaf step 0 (the pipeline publishes it as NaN). Post-processing with the public
    mask: no privacy cost.
    """
    var = np.array(kw.get("variances", est.variances), dtype=np.float64)
    values = np.array(est.estimates, dtype=np.float64)
    r = observed.shape[2]
    gap = ~observed
    tiny = 1e-9 * float(np.min(var[np.isfinite(var) & (var > 0)], initial=1.0))
    values[:, :, :r][gap] = 0.0
    var[:, :, :r][gap] = tiny
    var[~np.isfinite(var)] = 1e12 * float(np.max(var[np.isfinite(var)], initial=1.0))
    return replace(est, estimates=values), {"variances": var}


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
    observed: np.ndarray | None = None,
    keep: list | None = None,
) -> np.ndarray:
    """OptStream on periods already cut and validated: (B, N, r) -> released (B, N, r).

    The core of :func:`release_optstream` (no validation of the frame, no budget ledger):
    Sample, Perturb, Reconstruct and the feature queries per level
    (:func:`mechanisms.optstream._estimates.optstream_estimates`), then Algorithm 4 line 2 with
    ``weights``. ``values`` holds every node (``nodes`` order, aggregates included); ``B``
    may stack independent trials of an experiment. Output >= 0 and consistent.
    ``observed`` (B, N, r), optional: the public mask of ``missing="unmeasured"``
    (:func:`~mechanisms.optstream._estimates.optstream_estimates`); unobserved leaf steps come
    back as 0, aggregates over the observed leaves.
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
        observed=observed,
    )
    return _post_process(est, hierarchy, nodes, features, levels, weights, observed, keep)


def published_estimates(keep: list) -> list[dict[str, np.ndarray | None]]:
    """Per period (in order), what the release publishes for :func:`dpstream.std_errors`.

    ``estimates`` (N, P): the noisy measurements c̃ (the reconstructed singletons, then every
    feature's parts); ``noise`` (N, P): their noise variances; ``variances`` (N, P): the
    weights Algorithm 4 used (None for the paper's weights); ``samples`` (h, r): each level's
    sample set; ``features``: the period's feature chain (public). ``keep`` as
    :func:`release_block` filled it.

    Notes
    -----
    *Privacy*: no extra loss. Per period and level the mechanism's outputs are the sample set
    S (for the L1 sampler the SVT's own output, its vector of above/below answers, ε_s: [FV19]
    Alg. 3, Theorem 7; Lyu et al. 2017 Thm. 2, see
    :func:`mechanisms.optstream._sampling.sample_l1`; a public pattern when equally spaced),
    the noisy samples (ε_p, Theorem 8) and the noisy feature answers (ε_o, Theorem 9
    with w·α): Lemma 1 and Theorem 13 compose exactly these outputs, so the release's ε already
    covers publishing them. The reconstruction ξ^S, the noise variances (functions of S and
    public parameters) and the weights (functions of the above, ``postproc.bias_aware_variances``)
    are post-processing (Theorem 3).
    """
    out: list[dict[str, np.ndarray | None]] = []
    for est, var, fs in keep:
        for b in range(est.estimates.shape[0]):
            out.append(
                {
                    "estimates": share(est.estimates[b]),  # shared by derived frames
                    "noise": share(est.variances[b]),
                    "variances": None if var is None else share(np.asarray(var)[b]),
                    "samples": share(est.samples[b]),
                    "features": fs,
                }
            )
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PeriodSpec:
    """Everything fixed before a release that a period needs (public parameters only)."""

    epsilon: float
    """ε of every window of w steps (all levels; ε/h each, [FV19] Theorem 13)."""
    w: int
    """Period length and privacy window."""
    k: int
    """Samples per period, 1 <= k <= w."""
    alpha: float
    """Per-step change Δ that calibrates the noise (α, or the bound B for plain w-event)."""
    sampling: str
    """``"l1"`` or ``"equal"`` ([FV19] Alg. 3 or equally spaced samples)."""
    theta: float | None
    """Public SVT threshold of the L1 sampler (None: the null-rate threshold)."""
    hierarchy: Hierarchy | None
    """The resolved hierarchy, or None (independent columns)."""
    nodes: tuple[str, ...]
    """Node order of the period arrays (``Hierarchy.nodes`` or the input columns)."""
    features: FeatureSet
    """The feature chain of a full period."""
    weights: str = "variance"
    """Weights of Algorithm 4 line 2 (see :func:`release_optstream`)."""
    shares: tuple[float, ...] | None = None
    """Relative budget (s, p, o), or None for the default split."""
    missing: str = "error"
    """``"unmeasured"``: a NaN in a period's values is a missing reading (the public mask of
    ``missing="unmeasured"``, :func:`release_block`); otherwise values are complete."""

    def __post_init__(self) -> None:
        if self.missing not in ("error", "zero", "unmeasured"):
            raise ParameterError(
                "The 'missing' parameter of PeriodSpec must be one of ('error', 'zero', "
                f"'unmeasured'). Got {self.missing!r} instead."
            )
        if self.features.w != self.w:
            raise ParameterError(
                f"The 'features' parameter of PeriodSpec must partition w = {self.w} steps. "
                f"Got a FeatureSet of w = {self.features.w}."
            )
        if self.shares is not None:
            object.__setattr__(self, "shares", tuple(float(s) for s in self.shares))

    def _common(self) -> dict:
        return {
            "epsilon": self.epsilon,
            "w": self.w,
            "k": self.k,
            "alpha": self.alpha,
            "sampling": self.sampling,
            "theta": self.theta,
            "hierarchy": self.hierarchy,
            "nodes": self.nodes,
            "weights": self.weights,
            "shares": self.shares,
        }


def release_block(
    spec: PeriodSpec,
    full: np.ndarray,
    tail: np.ndarray | None,
    bits,
    observed: tuple[np.ndarray, np.ndarray | None] | None = None,
    keep: list | None = None,
) -> np.ndarray:
    """Release full periods (B, N, w) and a partial tail (N, r), r < w: (B·w + r, N), >= 0.

    The tail is released as a shorter period with the full period's calibration (features:
    singletons + the whole tail, even for r = 1), the rule of ``dpstream.pipelines``.
    ``observed``: the public masks (full, tail) of ``missing="unmeasured"``, or None (then,
    with ``spec.missing == "unmeasured"``, the NaN in the values mark the missing readings).
    Missing readings come back as NaN. ``keep``: a list that receives, per block of periods
    (the full ones, then the tail), the measurements and Algorithm 4's variances
    (:func:`_post_process`).
    """
    n_nodes = len(spec.nodes)
    if observed is None and spec.missing == "unmeasured":
        observed = (
            ~np.isnan(full),
            None if tail is None or not np.asarray(tail).size else ~np.isnan(tail),
        )
    obs_full, obs_tail = (None, None) if observed is None else observed
    out_full = np.empty((0, n_nodes, spec.w))
    if full.shape[0]:
        out_full = release_periods(
            full,
            features=spec.features,
            bits=bits,
            observed=obs_full,
            keep=keep,
            **spec._common(),
        )
    out_tail = None
    if tail is not None and tail.shape[1]:
        r = tail.shape[1]
        tail_fs = FeatureSet.from_breaks(r, [(0, r)] if spec.features.n_features > 1 else [])
        out_tail = release_periods(
            tail[None],
            features=tail_fs,
            bits=bits,
            observed=None if obs_tail is None else obs_tail[None],
            keep=keep,
            **spec._common(),
        )[0]
    out = from_periods(out_full, out_tail)
    # in place only on an array of its own: from_periods may return a view of out_full,
    # which a caller may hold (read-only when it is a shared release array)
    owned = out.flags.owndata and out.flags.writeable
    del out_full, out_tail  # one copy of the output at a time (issue 22)
    out = np.maximum(out, 0.0, out=out if owned else None)
    if observed is not None:  # nothing is published for a missing reading
        gaps = []
        if full.shape[0]:
            gaps.append(from_periods(np.asarray(~obs_full, dtype=np.float64)))
        if obs_tail is not None:
            gaps.append(np.asarray(~obs_tail, dtype=np.float64).T)
        if gaps:
            out[np.concatenate(gaps) > 0] = np.nan
    return out


def release_period(spec: PeriodSpec, values: np.ndarray, bits) -> np.ndarray:
    """Release one period: values (N, r) of every node, r <= w -> released (N, r), >= 0.

    :func:`release_block` on a single period (full when r = w, else a tail).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != len(spec.nodes) or not 0 < x.shape[1] <= spec.w:
        raise ParameterError(
            f"The 'values' parameter of release_period must have shape ({len(spec.nodes)}, r) "
            f"with 0 < r <= w = {spec.w}. Got shape {x.shape}."
        )
    if x.shape[1] == spec.w:
        return release_block(spec, x[None], None, bits).T
    return release_block(spec, np.empty((0, x.shape[0], spec.w)), x, bits).T


def period_bits(seed: object, ordinal: int) -> BitSource:
    """The bits of period ``ordinal``: the secure source (seed None), the bit source given, or
    a child of an int seed keyed by the ordinal (experiments only; not for release)."""
    if seed is None or (hasattr(seed, "random_raw") and hasattr(seed, "spawn")):
        return bit_source(seed)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ParameterError(
            f"The 'seed' parameter must be None, an int or a bit source. Got "
            f"{type(seed).__name__} instead."
        )
    return bit_source(np.random.SeedSequence(int(seed), spawn_key=(int(ordinal),)))
