"""The in-stream planner of ``release_optstream(k="auto")`` as one object: its state, ``plan``,
``update``.

:class:`StreamPlanner` holds what the planner knows before a period -- the measurements already
released (or public history), the running variogram statistics and the previous period's plan
-- and plans the next period (:func:`planner.plan_period`: k, noise, level shares, the window
budget; and the profile prior, :func:`postproc.profile_prior`, given as ``prior_model``). The
release pipeline, the store and the engine only call it::

    planner = StreamPlanner(cfg, prior_model=profile_prior)
    planner.add_history(public)                # optional: public periods, noise-free
    planner.carry(earlier_plans)               # optional: the last plan of an earlier release
    plan, prior = planner.plan()               # public values only
    measurement = <the private step with plan>
    planner.update(measurement, plan)

State (per node, for the N nodes it plans; issue 22.1). With ``prior_state`` (the release's
default, :class:`postproc.PriorState`) only running sums: the variogram's sufficient statistics
(:class:`planner.RoughnessStats`) and the prior's (12 arrays of N x w); the variogram's
look-back of :data:`LOOKBACK` periods as two blocks of sums (:data:`VARIOGRAM_WINDOW` =
``"blocks"``, the default: :meth:`StreamPlanner.roughness`; ``"forgetting"``, session 7's rule,
multiplies every sum by (L − 1)/L before a period is added past L), the prior's look-back of
:data:`PRIOR_DAYS` by forgetting (that factor with L = :data:`PRIOR_DAYS`), the prior's weights
of older periods folded relative to a reference measurement (exact for a period measured like
it), the last 6 released periods held to weigh them exactly and the stream's first period held
until it leaves the look-back (see :class:`postproc.PriorState`): O(N w) bytes, the same at any
look-back (about 1.4 GB at 100,000 feeders, w = 48, of which the 7 held periods are 0.85 GB).
Without it (exact, the reference of the golden tests): the last :data:`PRIOR_DAYS` periods'
measurements, read by ``prior_model`` (O(N w · PRIOR_DAYS), 6.4 GB at 100,000 feeders) and a period
leaving the variogram's look-back subtracted exactly. While a block of public history is in the
variogram's look-back (its first L − 1 released periods) the streaming state also holds what the
block's oldest-first fade needs (:data:`HISTORY_FADE` = ``"lowrank"``, the default since session
13): each node's shares of its roughness over the block's L periods as r = :data:`HISTORY_RANK` = 8
period profiles (L, r) and r weights per node (r, N), r·8 = 64 bytes per node (6.4 MB per 100,000
nodes) and L·r·8 = 1.8 kB whatever N; the (L, N) shares exist only while
:meth:`StreamPlanner.add_history` reads the block. None without history. (``"periods"``, session
12's default, kept the (L, N) shares: 224 bytes per node, growing with L; a state saved with them
still loads and fades by them.)

Subtrees (issue 22.2, the per-subtree engine)
---------------------------------------------
For a hierarchy of more than ``_MAX_BLUE_LEAVES`` leaves (and for independent streams) every
node's predicted error is its own (the prediction does not combine levels), so a subtree's
nodes are planned independently of the rest, given from the top only the previous plan (the
same for every node) and the configuration (ε, α, w, δ, target, levels). Run one planner per
subtree with a configuration restricted to its nodes (levels keep the global level numbers,
possibly empty), then::

    total = sum(p.scores() for p in planners)  # CandidateScores: additive over nodes
    for p in planners: plan_i, prior_i = p.plan(scores=total)

Each plan then holds the same choice (k, noise, shares, budget, predicted: over all target
nodes) and its subtree's per-node arrays. What a subtree cannot see: the prior's variance
floor (``_FLOOR`` times the mean noise of *all* nodes; it binds only for near-noise-free
nodes), an aggregate above the cut (its measurement if its level has no share is the sum of
leaves in other subtrees) and ``predicted_with_prior`` (a mean over the subtree's nodes).
Small trees combine the levels in the prediction and must be planned whole.

*Privacy*: everything here reads public values only (released measurements, declared-public
history, earlier plans): post-processing ([FV19] Theorem 3), nothing spent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mechanisms import ParameterError

from ._roughness import RoughnessStats, period_roughness, variogram
from ._stream_plan import (
    NOISES,
    CandidateScores,
    PeriodPlan,
    plan_period,
    share_grid,
    within_budget,
)

__all__ = [
    "LOOKBACK",
    "PRIOR_DAYS",
    "AutoConfig",
    "Measurement",
    "StreamPlanner",
    "carried_previous",
    "subtree_config",
]

#: Measured periods the variogram looks back on.
LOOKBACK = 28
#: Measured periods the prior weighs (by precision: noisy released days count less than public
#: ones, so a longer look-back only adds information; model assumption: the daily profile
#: drifts little over two months).
PRIOR_DAYS = 56
#: The streaming variogram's look-back (:meth:`StreamPlanner.roughness`): ``"blocks"`` (the
#: default since session 11: two blocks of sums, the previous one leaving at its mean rate;
#: public history read for its last L = :data:`LOOKBACK` periods; the exact window at each full
#: block) or ``"forgetting"`` (session 7's rule: every sum times (L − 1)/L before a period is
#: added past L periods, which kept last month's history in the look-back and moved the
#: level-share cells by up to +5.9 %; ``docs/results/optstream_defaults_findings.md``).
VARIOGRAM_WINDOW = "blocks"
#: How the two-block window's previous block leaves when it is public history (a block of the
#: last L = :data:`LOOKBACK` periods read by :meth:`StreamPlanner.add_history`), oldest period
#: first as the exact window (:meth:`StreamPlanner.roughness`): ``"lowrank"`` (the default
#: since session 13: as ``"periods"``, with the (L, N) shares kept as their rank-r factors,
#: r = :data:`HISTORY_RANK`: O(N r), whatever L; on the five diagnostic cells of
#: ``scripts/optstream_history_fade.py`` (5 nodes: exact at r ≥ 5) within ±0.001 % of
#: ``"periods"``, r = 4 +0.031 % on household Feb 10; at 2,000 synthetic feeders the faded
#: part within 6 % of ``"periods"``' at the 99th percentile, the mean rate's 42 %:
#: ``scripts/optstream_history_fade_scale.py``), ``"periods"`` (session 12's default: each
#: history period's share of each node's roughness is kept, (L, N) numbers, and the block's
#: (N, w) sums are scaled per node by the share of its periods still in the window),
#: ``"trend"`` or ``"weekly"`` (each period's sums fitted in its position over a line,
#: or a line and a 7-period cycle, from one or seven more (N, w) moments: O(N w), but measured
#: further from the exact planner) -- or ``"mean"`` (session 11's rule: at the block's mean
#: rate, as a released block; regional Jun α/ε = 10 national +1.19 % against the exact planner,
#: ``"periods"`` −0.10 %: ``scripts/optstream_history_fade.py``). A released previous block
#: always leaves at its mean rate (releases without history are unchanged, bit for bit).
HISTORY_FADE = "lowrank"
#: Rank r of :data:`HISTORY_FADE` = ``"lowrank"``: the history block's per-node shares of its
#: periods, (L, N), kept as r period profiles (L, r) and r weights per node (r, N) (at most N
#: of them). Measured (``docs/results/optstream_defaults_findings.md``): r = 8.
HISTORY_RANK = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoConfig:
    """Public, data-independent settings of one auto-planned release."""

    epsilon: float
    """ε per window of w steps (the user's)."""
    alpha: float
    """α of the (w, α) unit."""
    w: int
    """Steps per period (and per window)."""
    delta: float | None
    """δ of (ε, δ) (Gaussian), or None."""
    noise: str
    """``"laplace"``, ``"gaussian"`` or ``"auto"``."""
    target: str
    """Nodes whose mean error is minimised: ``"leaves"``, ``"root"``, ``"all"``."""
    level_shares: object
    """None (planned), ``"equal"``, ``"bottom-up"`` or one share per level."""
    matrix: object = field(hash=False)
    """Aggregation matrix (N, L): scipy.sparse CSR (the identity without a hierarchy)."""
    levels: tuple[np.ndarray, ...] = field(hash=False)
    """Node indices of each level, root level first, leaves last."""
    leaf_nodes: np.ndarray = field(hash=False)
    """Node index of each leaf (column of ``matrix``)."""
    use_prior: bool = True
    """Fold the profile prior into Algorithm 4."""
    plan_with_prior: bool = False
    """Choose the planner's candidates by their error combined with the prior (when there is
    one; ``plan_period(choose_with_prior=...)``); the combined prediction is recorded always."""
    whole: bool = True
    """False for one subtree of a larger hierarchy (:func:`subtree_config`): its prediction
    never combines levels (``plan_period(combine=False)``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """Released estimates of one period (outputs of the private step) and their noise."""

    values: np.ndarray = field(hash=False)
    """(N, r) reconstructed estimates x̃ of every node (aggregates of share-0 levels: summed)."""
    noise: np.ndarray = field(hash=False)
    """(N, r) noise variance of each estimate."""
    sampled: np.ndarray = field(hash=False)
    """(N, r) True at the sampled steps (unbiased estimates)."""
    observed: np.ndarray | None = field(default=None, hash=False)
    """(N, r) False at a reading left unmeasured (``missing="unmeasured"``: a public mask; the
    node's estimate there is interpolated through its observed samples, and ``sampled`` is
    False there); None: every reading observed."""


def _shares(cfg: AutoConfig) -> list[tuple[float, ...]]:
    h = len(cfg.levels)
    if cfg.level_shares is None:
        return share_grid(h)
    if cfg.level_shares == "equal":
        return [within_budget(tuple([1.0 / h] * h))]
    if cfg.level_shares == "bottom-up":
        return [tuple([0.0] * (h - 1) + [1.0])]
    return [tuple(cfg.level_shares)]


def _measured_nodes(n: int, plan: PeriodPlan | None, cfg: AutoConfig) -> np.ndarray:
    """(N,) nodes whose estimate is their own measurement: the leaves, and the aggregates of
    levels with a share. An aggregate summed from its leaves (or from public history) holds
    no information its leaves' priors lack: a prior on it too would count the same days
    twice in Algorithm 4 (measured: regional α/ε = 10, leaves 412 -> 346 kW)."""
    own = np.zeros(n, dtype=bool)
    own[cfg.leaf_nodes] = True
    if plan is not None:
        for share, nodes in zip(plan.shares, cfg.levels, strict=True):
            if share > 0:
                own[nodes] = True
    return own


def _error_variance(m: Measurement, plan: PeriodPlan, cfg: AutoConfig) -> np.ndarray:
    """Predicted error variance of a measurement: the plan's (noise plus interpolation), with
    share-0 aggregates given the sum of their leaves' (their estimate is that sum)."""
    v = np.array(plan.variances[:, : m.values.shape[1]], dtype=np.float64)
    bad = ~np.isfinite(v).all(axis=1)
    if bad.any():  # independence of the leaves' errors assumed
        v[bad] = cfg.matrix[bad] @ v[cfg.leaf_nodes]
    return np.where(np.isfinite(v), v, m.noise)


#: Error variance of an unmeasured reading's estimate, times the period's largest predicted
#: error: the prior gives it (almost) no weight.
_UNMEASURED_ERROR = 1e8


def _unmeasured(m: Measurement, error: np.ndarray, own: np.ndarray):
    """The planner's statistics skip unmeasured readings (``m.observed``): their error is made
    huge (the prior's precision weights ~0) and a node without a measured step of its own in
    the period is not its own measurement there (left out of its prior). The variogram skips
    them through ``m.sampled`` (False there)."""
    if m.observed is None:
        return error, own
    finite = np.isfinite(error)
    big = _UNMEASURED_ERROR * max(float(np.max(error[finite], initial=0.0)), 1.0)
    error = np.where(m.observed, np.maximum(error, m.noise), big)
    return error, own & m.sampled.any(axis=1)


def subtree_config(cfg: AutoConfig, nodes: np.ndarray) -> AutoConfig:
    """``cfg`` restricted to ``nodes`` (indices of the whole tree's nodes): a subtree below a
    cut, or the aggregates above it (module notes, Subtrees). Levels keep their global
    numbers (an empty level stays, so the level shares still apply); the matrix keeps the rows
    of ``nodes`` and the columns of those of their leaves that are in ``nodes`` (none for the
    top: an aggregate of a share-0 level is then the caller's sum of its subtrees).

    Raises ParameterError for a hierarchy of at most ``_MAX_BLUE_LEAVES`` leaves: its
    prediction combines the levels of the whole tree, which must be planned at once.
    """
    from scipy import sparse

    from ._stream_plan import _uses_combination

    if _uses_combination(cfg.matrix):
        raise ParameterError(
            "subtree_config: this hierarchy's prediction combines its levels (at most 64 "
            "leaves); plan it whole with one StreamPlanner."
        )
    nodes = np.asarray(nodes, dtype=np.int64)
    local = np.full(cfg.matrix.shape[0], -1, dtype=np.int64)
    local[nodes] = np.arange(nodes.size)
    mat = sparse.csr_matrix(cfg.matrix)[nodes]
    leaf_cols = np.flatnonzero(np.asarray((mat != 0).sum(axis=0)).reshape(-1))
    leaf_of_col = np.asarray(cfg.leaf_nodes)[leaf_cols]
    keep = local[leaf_of_col] >= 0  # the top above a cut holds aggregates without leaves
    leaf_cols, leaf_of_col = leaf_cols[keep], leaf_of_col[keep]
    return AutoConfig(
        epsilon=cfg.epsilon, alpha=cfg.alpha, w=cfg.w, delta=cfg.delta, noise=cfg.noise,
        target=cfg.target, level_shares=cfg.level_shares, matrix=mat[:, leaf_cols].tocsr(),
        levels=tuple(local[lv][local[lv] >= 0] for lv in cfg.levels),
        leaf_nodes=local[leaf_of_col], use_prior=cfg.use_prior,
        plan_with_prior=cfg.plan_with_prior, whole=False,
    )  # fmt: skip


def carried_previous(
    plans: list[dict], lengths: list[int], w: int, *, gap: int = 0
) -> tuple[np.ndarray, np.ndarray, str] | None:
    """The ``previous`` of :func:`planner.plan_period` for the first period after an earlier
    release (issue 24.1: the window rule across calls).

    Parameters
    ----------
    plans
        The earlier release's plan records (``DataFrame.attrs["plan"]``: k, budget, noise),
        in time order.
    lengths
        Steps of each of those periods (the last may be a shorter tail).
    w
        The window.
    gap
        Steps between the earlier release's end and the new period (none released).

    Returns
    -------
    (sampled steps, cost per sample, noise) or None
        The samples of the earlier release's last w steps, at steps counted from w steps
        before the new period (so a short tail and the period before it are both seen), each
        with its period's budget / k; None when there are none.
    """
    from mechanisms.optstream._sampling import sample_equal

    pos, cost, noise = [], [], None
    end = gap  # steps from the boundary back to the end of the period being read
    for rec, r in zip(reversed(plans), reversed(lengths), strict=True):
        if end >= w:
            break
        k = int(rec["k"])
        noise = noise or rec["noise"]
        if rec["noise"] != noise:
            raise ParameterError(
                "The earlier release passed as 'history' mixes noises; its window budget "
                "cannot be carried over. Pass one release of one noise."
            )
        steps = sample_equal(int(r), k) + (w - end - int(r))  # in the w-frame
        keep = steps >= 0
        pos.append(steps[keep])
        cost.append(np.full(int(keep.sum()), float(rec["budget"]) / k))
        end += int(r)
    if not pos or not np.concatenate(pos).size:
        return None
    return np.concatenate(pos), np.concatenate(cost), noise


#: Period of the cycle of :data:`HISTORY_FADE` = ``"weekly"`` (days of a week).
_CYCLE = 7


def _basis(name: str, length: int) -> np.ndarray:
    """(length, J + 1) basis functions φ_j(i) of a history block's fade at its positions
    i = 0 .. length − 1: the constant first, then the centred line, then (``"weekly"``) the
    cosines and sines of the harmonics 1 .. 3 of :data:`_CYCLE` periods."""
    i = np.arange(length, dtype=np.float64)
    cols = [np.ones(length), i - (length - 1) / 2.0]
    if name == "weekly":
        for q in range(1, _CYCLE // 2 + 1):
            cols += [np.cos(2 * np.pi * q * i / _CYCLE), np.sin(2 * np.pi * q * i / _CYCLE)]
    return np.stack(cols, axis=1)


def history_profiles(gram: np.ndarray, rank: int) -> np.ndarray:
    """B (L, r): the ``rank`` leading eigenvectors of a history block's (L, L) Gram matrix
    G Gᵀ (:meth:`_HistoryMoments.gram`), made orthogonal to the constant exactly (G's
    columns sum to zero, so its leading directions are): the fade is 1 at n = 0."""
    _, vecs = np.linalg.eigh(np.asarray(gram, dtype=np.float64))  # ascending
    b = vecs[:, ::-1][:, : max(int(rank), 0)]
    return b - b.mean(axis=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class _HistoryMoments:
    """What a block of public history keeps for its oldest-first fade (:data:`HISTORY_FADE`,
    :meth:`StreamPlanner.roughness`): ``"periods"``, each period's roughness per node (summed
    over the lags); ``"lowrank"``, the same while :meth:`StreamPlanner.add_history` reads the
    block, then (:meth:`complete`) only its rank-r factors; ``"trend"``/``"weekly"``, the
    moments Σᵢ φ_j(i)·rᵢ over its periods i (j ≥ 1: the constant's is the block's own sums).
    Its noise part is not kept (history is noise-free)."""

    basis: str
    """The :data:`HISTORY_FADE` it was kept for."""
    squares: np.ndarray = field(hash=False)
    """``"periods"`` (and ``"lowrank"`` while the block is read): (L, N); ``"lowrank"``
    complete: (r, N), the node weights C; else (J, N, w)."""
    counts: np.ndarray = field(hash=False)
    """``"periods"``/``"lowrank"``: (0, w); else (J, w), or (J, N, w) with per-node counts."""
    profiles: np.ndarray | None = field(default=None, hash=False)
    """``"lowrank"`` complete: (L, r), the period profiles B; None otherwise."""

    @classmethod
    def empty(cls, basis: str, n: int, w: int) -> _HistoryMoments:
        if basis in ("periods", "lowrank"):
            return cls(basis=basis, squares=np.zeros((LOOKBACK, n)), counts=np.zeros((0, w)))
        j = _basis(basis, 1).shape[1] - 1
        return cls(basis=basis, squares=np.zeros((j, n, w)), counts=np.zeros((j, w)))

    def add(self, r: RoughnessStats, i: int) -> _HistoryMoments:
        """With the block's period at position ``i``."""
        if self.basis in ("periods", "lowrank"):  # each period's share of each node's roughness
            squares = self.squares.copy()
            squares[i] = r.squares.sum(axis=1)
            return _HistoryMoments(basis=self.basis, squares=squares, counts=self.counts)
        phi = _basis(self.basis, LOOKBACK)[i, 1:]
        counts = np.asarray(r.counts, dtype=np.float64)
        return _HistoryMoments(
            basis=self.basis,
            squares=self.squares + phi[:, None, None] * r.squares[None],
            counts=self.counts + phi.reshape((-1,) + (1,) * counts.ndim) * counts[None],
        )

    def _centred_shares(self) -> np.ndarray:
        """G = F − 1/L (L, N): each node's shares of its roughness over the block's periods
        (a node without roughness: 1/L each) less the mean rate; columns summing to zero."""
        total = self.squares.sum(axis=0)
        share = np.divide(self.squares, total, out=np.full(self.squares.shape, 1.0 / LOOKBACK),
                          where=total > 0)  # fmt: skip
        return share - 1.0 / LOOKBACK

    def gram(self) -> np.ndarray | None:
        """(L, L) G Gᵀ of a ``"lowrank"`` block read but not yet factored (additive over
        nodes: the subtrees' sum is the whole tree's); None otherwise."""
        if self.basis != "lowrank" or self.profiles is not None:
            return None
        g = self._centred_shares()
        return g @ g.T

    def complete(self, rank: int, profiles: np.ndarray | None = None) -> _HistoryMoments:
        """The block read: ``"lowrank"`` keeps its shares' rank-``rank`` factors only (other
        fades: unchanged). ``profiles``: B (L, r) given (:func:`history_profiles` of the
        whole tree's :meth:`gram`, for a subtree's planner), else this block's own.

        Each node's shares of its roughness over the block's L periods, F (L, N) (columns
        summing to one; a node without roughness: 1/L each), less the mean rate, G = F − 1/L,
        are factored G ≈ B C by their leading r principal directions: the eigenvectors of the
        (L, L) Gram matrix G Gᵀ (O(L² N), nothing N × N), B (L, r) the r leading ones (made
        orthogonal to the constant exactly: G's columns sum to zero, so its directions are),
        C = Bᵀ G (r, N). Exact (B C = G) when F has rank ≤ r: G = (I − 𝟙𝟙ᵀ/L) F. The common
        part of the nodes' day-to-day roughness (weekends, holidays) is what the leading
        directions hold."""
        if self.basis != "lowrank" or self.profiles is not None:
            return self
        g = self._centred_shares()
        if profiles is None:  # (rank at most N: G's rank)
            profiles = history_profiles(g @ g.T, min(int(rank), g.shape[1]))
        b = np.asarray(profiles, dtype=np.float64)
        return _HistoryMoments(basis=self.basis, squares=b.T @ g, counts=self.counts,
                               profiles=b)  # fmt: skip

    def part(self, s0: RoughnessStats, n: int) -> RoughnessStats:
        """The block's sums ``s0`` still in the look-back after ``n`` newer periods: its
        periods i ≥ n, fitted (:meth:`StreamPlanner.roughness`), kept within [0, ``s0``]."""
        if self.basis in ("periods", "lowrank"):
            rate = (LOOKBACK - n) / LOOKBACK
            if self.profiles is not None:  # the mean rate and the rank-r shares' correction
                frac = np.clip(rate + self.profiles[n:].sum(axis=0) @ self.squares, 0.0, 1.0)
            else:
                total = self.squares.sum(axis=0)
                frac = np.divide(self.squares[n:].sum(axis=0), total,
                                 out=np.full(total.shape, rate), where=total > 0)  # fmt: skip
            return RoughnessStats(squares=s0.squares * frac[:, None], noise=s0.noise * rate,
                                  counts=s0.counts * rate)  # fmt: skip
        phi = _basis(self.basis, LOOKBACK)
        # fitted r_i = φ(i) β with β = pinv(ΦᵀΦ) M (M_0 = s0): the tail's weights of M
        c = np.linalg.pinv(phi.T @ phi) @ phi[n:].sum(axis=0)

        def tail(total, moments):
            total = np.asarray(total, dtype=np.float64)
            out = c[0] * total + np.tensordot(c[1:], moments, axes=1)
            return np.clip(out, 0.0, np.maximum(total, 0.0))

        return RoughnessStats(squares=tail(s0.squares, self.squares),
                              noise=s0.noise * ((LOOKBACK - n) / LOOKBACK),
                              counts=tail(s0.counts, self.counts))  # fmt: skip

    @property
    def nbytes(self) -> int:
        extra = 0 if self.profiles is None else self.profiles.nbytes
        return int(self.squares.nbytes + self.counts.nbytes + extra)


class StreamPlanner:
    """The in-stream planner: its state, :meth:`plan` (the next period), :meth:`update`.

    Parameters
    ----------
    cfg : AutoConfig
        The release's public settings (the nodes this planner plans: all, or one subtree).
    prior_model : callable, optional
        :func:`postproc.profile_prior` (or one with its signature) when ``cfg.use_prior``;
        None: no prior.
    prior_state : callable, optional
        :class:`postproc.PriorState` (or one with its signature): the prior and the variogram
        kept as running sums, O(N w) whatever the look-back (module notes, State). None: the
        last :data:`PRIOR_DAYS` periods are held and ``prior_model`` reads them (exact; the
        periods' memory).

    See the module notes for the state and for planning subtrees separately.
    """

    def __init__(
        self,
        cfg: AutoConfig,
        *,
        prior_model: Callable | None = None,
        prior_state: Callable | None = None,
    ) -> None:
        self.cfg = cfg
        self.prior_model = prior_model if cfg.use_prior else None
        self.streaming = prior_state is not None
        """True: running sums only (no period held); False: the periods are held."""
        n = cfg.matrix.shape[0]
        leaf = np.zeros(n, dtype=bool)
        leaf[np.asarray(cfg.leaf_nodes, dtype=np.int64)] = True
        self._agg = np.flatnonzero(~leaf)
        self._state = self._agg_state = None
        if self.streaming and self.prior_model is not None:
            self._state = prior_state(n, cfg.w, days=PRIOR_DAYS)
            if self._agg.size:  # aggregates' whole series, for the coherent variance
                self._agg_state = prior_state(self._agg.size, cfg.w, days=PRIOR_DAYS)
        keep = max(LOOKBACK, PRIOR_DAYS) if self.prior_model is not None else LOOKBACK
        keep = 0 if self.streaming else keep
        self._measured: deque[Measurement] = deque(maxlen=keep)
        self._errors: deque[np.ndarray] = deque(maxlen=keep)
        self._independent: deque[np.ndarray] = deque(maxlen=keep)
        self._rough: RoughnessStats | None = None
        self._n_rough = 0
        self._rough_prev: RoughnessStats | None = None
        """Streaming: the previous block of :data:`LOOKBACK` periods' variogram sums."""
        self._moment: _HistoryMoments | None = None
        """Streaming, :data:`HISTORY_FADE` not ``"mean"``, while the current block is public
        history: what its fade keeps of its periods; None otherwise."""
        self._moment_prev: _HistoryMoments | None = None
        """The same for the previous block, while it is read (:meth:`roughness`)."""
        self.previous: tuple[np.ndarray, object, str] | None = None
        """(sampled steps, cost per sample, noise) of the samples before the next period."""
        self.noise: str | None = None
        """The call's noise, once a period (or a carried plan) fixed it."""
        self.n_measured = 0
        """Full periods measured (history included)."""
        self.from_history = 0
        """Of which public history."""

    # -- state --------------------------------------------------------------------------------

    @property
    def measurements(self) -> list[Measurement]:
        """The measured periods the planner still holds (at most the longer look-back; none
        when :attr:`streaming`)."""
        return list(self._measured)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays of the planner's state (held periods, running sums)."""
        total = sum(a.nbytes for m in self._measured for a in (m.values, m.noise, m.sampled))
        total += sum(a.nbytes for a in (*self._errors, *self._independent))
        for mo in (self._moment, self._moment_prev):
            total += 0 if mo is None else mo.nbytes
        for r in (self._rough, self._rough_prev):
            if r is not None:
                total += sum(a.nbytes for a in (r.squares, r.noise, np.asarray(r.counts)))
        for st in (self._state, self._agg_state):
            total += 0 if st is None else st.nbytes
        return int(total)

    def export(self) -> tuple[dict, dict]:
        """A streaming planner's state without its held periods, to be saved (the release
        store, issue 22): ``(arrays, scalars)``, the variogram's sums and the prior's
        (:meth:`postproc.PriorState.export`, keys prefixed ``prior_`` and ``agg_``), the
        previous plan's samples and the counters. Read back by :meth:`restore` with the held
        periods' measurements and plans."""
        if not self.streaming:
            raise ValueError("StreamPlanner.export: only a streaming state (prior_state=)")
        arrays = {}
        scalars = {
            "n_rough": self._n_rough,
            "noise": self.noise,
            "n_measured": self.n_measured,
            "from_history": self.from_history,
        }
        if self._rough is not None:
            arrays.update(rough_squares=self._rough.squares, rough_noise=self._rough.noise,
                          rough_counts=np.asarray(self._rough.counts))  # fmt: skip
        if self._rough_prev is not None:
            arrays.update(rough_prev_squares=self._rough_prev.squares,
                          rough_prev_noise=self._rough_prev.noise,
                          rough_prev_counts=np.asarray(self._rough_prev.counts))  # fmt: skip
        for key, mo in (("moment", self._moment), ("moment_prev", self._moment_prev)):
            if mo is not None:  # only while a block of public history is in the look-back
                arrays.update({f"{key}_squares": mo.squares, f"{key}_counts": mo.counts})
                if mo.profiles is not None:  # "lowrank": its period profiles
                    arrays[f"{key}_profiles"] = mo.profiles
                scalars[f"{key}_basis"] = mo.basis
        if self.previous is not None:
            pos, cost, noise = self.previous
            arrays.update(previous_pos=np.asarray(pos), previous_cost=np.asarray(cost))
            scalars["previous_noise"] = noise
        for key, st in (("prior", self._state), ("agg", self._agg_state)):
            if st is not None:
                a, sc = st.export()
                arrays.update({f"{key}_{k}": v for k, v in a.items()})
                scalars[key] = sc
        return arrays, scalars

    def restore(self, arrays: dict, scalars: dict, held, *, copy: bool = True) -> None:
        """Inverse of :meth:`export` on a new streaming planner of the same configuration:
        ``held`` gives the prior's held periods (its last released full periods, at most
        ``recent``) as ``(Measurement, PeriodPlan)``, oldest first (an iterable, read once:
        each plan can be dropped once its error variance is formed). ``copy=False``: the
        prior's sums are ``arrays``' own (:meth:`postproc.PriorState.restore`)."""
        self._n_rough = int(scalars["n_rough"])
        self.noise = scalars["noise"]
        self.n_measured = int(scalars["n_measured"])
        self.from_history = int(scalars["from_history"])
        self._rough = None
        if "rough_squares" in arrays:
            counts = arrays["rough_counts"]
            self._rough = RoughnessStats(squares=arrays["rough_squares"],
                                         noise=arrays["rough_noise"], counts=counts)  # fmt: skip
        self._rough_prev = None  # a state saved before the two blocks has none
        if "rough_prev_squares" in arrays:
            self._rough_prev = RoughnessStats(squares=arrays["rough_prev_squares"],
                                              noise=arrays["rough_prev_noise"],
                                              counts=arrays["rough_prev_counts"])  # fmt: skip
        # a state saved before the history's moments has none: its history block leaves at
        # the mean rate
        for key in ("moment", "moment_prev"):
            mo = None
            if f"{key}_squares" in arrays:
                mo = _HistoryMoments(basis=scalars[f"{key}_basis"],
                                     squares=arrays[f"{key}_squares"],
                                     counts=arrays[f"{key}_counts"],
                                     profiles=arrays.get(f"{key}_profiles"))  # fmt: skip
            setattr(self, f"_{key}", mo)
        self.previous = None
        if "previous_pos" in arrays:
            cost = arrays["previous_cost"]
            self.previous = (arrays["previous_pos"], cost.item() if cost.ndim == 0 else cost,
                             scalars["previous_noise"])  # fmt: skip
        items = []
        for m, plan in held:
            own = _measured_nodes(m.values.shape[0], plan, self.cfg)
            error, own = _unmeasured(m, _error_variance(m, plan, self.cfg), own)
            items.append((m, error, own))
            del m, plan  # (a held iterator's plan goes now)
        a = self._agg
        for key, attr in (("prior", "_state"), ("agg", "_agg_state")):
            if key not in scalars:
                continue
            prefix = f"{key}_"
            sub = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            rows = [(m.values, m.noise, m.sampled, e, own) for m, e, own in items]
            if key == "agg":
                rows = [(m.values[a], m.noise[a], np.asarray(m.sampled)[a], e[a],
                         np.ones(a.size, dtype=bool)) for m, e, _ in items]  # fmt: skip
            setattr(self, attr, type(getattr(self, attr)).restore(sub, scalars[key], rows,
                                                                  copy=copy))  # fmt: skip

    def update(
        self, m: Measurement, plan: PeriodPlan | None = None, *, roughness: bool = True
    ) -> None:
        """Record a released period's measurement (and the plan that produced it); a full
        period of public history has ``plan=None``. ``roughness=False`` (only for periods
        that leave the variogram's look-back before the next plan, :meth:`extend`) skips its
        variogram statistics."""
        if m.values.shape[1] == self.cfg.w:  # the tail (last, shorter period) plans nothing
            if self.streaming and VARIOGRAM_WINDOW == "blocks":
                if roughness and self._n_rough >= LOOKBACK:  # the block is full (roughness())
                    self._rough_prev, self._rough, self._n_rough = self._rough, None, 0
                    self._moment_prev, self._moment = self._moment, None
            elif self._n_rough == LOOKBACK and self.streaming:  # forgetting (module notes)
                self._rough = self._rough.scaled((LOOKBACK - 1.0) / LOOKBACK)
                self._n_rough -= 1
            elif self._n_rough == LOOKBACK:  # the oldest period leaves the look-back
                old = self._measured[-LOOKBACK]
                self._rough = self._rough - period_roughness(old.values, old.noise, old.sampled)
                self._n_rough -= 1
            if roughness:
                new = period_roughness(m.values, m.noise, m.sampled)
                if self._moment is not None:  # a history block being read (add_history)
                    self._moment = self._moment.add(new, self._n_rough)
                self._rough = new if self._rough is None else self._rough + new
                self._n_rough += 1
                if self._n_rough >= LOOKBACK:  # the previous block no longer read
                    self._moment_prev = None
            self._measured.append(m)
            error, own = _unmeasured(
                m,
                m.noise if plan is None else _error_variance(m, plan, self.cfg),
                _measured_nodes(m.values.shape[0], plan, self.cfg),
            )
            if self.streaming:
                self._add_to_state(m, error, own, public=plan is None)
            else:
                self._errors.append(error)
                self._independent.append(own)
            self.n_measured += 1
        if plan is not None:
            pos = plan.positions(m.values.shape[1])
            self.previous = (pos, plan.budget / pos.size, plan.noise)
            self.noise = plan.noise

    add = update

    def _add_to_state(self, m: Measurement, error, own, *, public: bool) -> None:
        if self._state is None:
            return
        self._state.add(m.values, m.noise, m.sampled, error, own, public=public)
        if self._agg_state is not None:
            a = self._agg
            self._agg_state.add(
                m.values[a], m.noise[a], np.asarray(m.sampled)[a], error[a],
                np.ones(a.size, dtype=bool), public=public,
            )  # fmt: skip

    def extend(self, items: list[tuple[Measurement, PeriodPlan | None]]) -> None:
        """:meth:`update` with every ``(measurement, plan)``, in time order, computing the
        variogram statistics of the last :data:`LOOKBACK` full periods only (the store
        rebuilding its planner: the others would be added and taken out again)."""
        full = [i for i, (m, _) in enumerate(items) if m.values.shape[1] == self.cfg.w]
        first = full[-LOOKBACK] if len(full) >= LOOKBACK and not self.streaming else 0
        if first > 0:  # older periods, and whatever the planner held, leave the look-back
            self._rough, self._n_rough = None, 0
        for i, (m, plan) in enumerate(items):
            self.update(m, plan, roughness=i >= first)

    def add_history(self, measurements: list[Measurement], *, factor: bool = True) -> None:
        """Public history, full periods oldest first (noise-free measurements). With
        :data:`VARIOGRAM_WINDOW` = ``"blocks"`` a streaming planner's variogram reads the last
        :data:`LOOKBACK` of them only: the older ones would have left its look-back before the
        first plan (as they leave the periods state's).

        With :data:`HISTORY_FADE` = ``"lowrank"`` the block's (L, N) shares exist only while it
        is read here: they are factored at the end (rank :data:`HISTORY_RANK`). ``factor=False``
        (one subtree of a split tree) keeps them until :meth:`factor_history` is given the
        whole tree's profiles (the sum of every part's :meth:`history_gram`)."""
        full = [i for i, m in enumerate(measurements) if m.values.shape[1] == self.cfg.w]
        blocks = self.streaming and VARIOGRAM_WINDOW == "blocks"
        first = full[-LOOKBACK] if blocks and len(full) > LOOKBACK else 0
        # a whole block of history, read into an empty look-back: what its fade needs is kept
        # for the oldest-first fade (HISTORY_FADE, roughness())
        fade = (blocks and HISTORY_FADE != "mean" and len(full) >= LOOKBACK
                and self._rough is None and self._rough_prev is None)  # fmt: skip
        for i, m in enumerate(measurements):
            if fade and i == first:
                n = self.cfg.matrix.shape[0]
                self._moment = _HistoryMoments.empty(HISTORY_FADE, n, self.cfg.w)
            self.update(m, roughness=i >= first)
        if factor:  # the block read: "lowrank" keeps its factors only
            self.factor_history()
        self.from_history = self.n_measured

    def history_gram(self) -> np.ndarray | None:
        """(L, L) Gram matrix of the history block's centred shares, read by
        ``add_history(factor=False)`` and not yet factored (``"lowrank"``); None otherwise."""
        return None if self._moment is None else self._moment.gram()

    def factor_history(self, profiles: np.ndarray | None = None) -> None:
        """Keep the history block's rank-r factors only (``"lowrank"``; a no-op otherwise):
        with ``profiles`` B (L, r) given (:func:`history_profiles` of the whole tree's Gram
        matrix: a split tree's parts factor alike, as one planner), else its own."""
        if self._moment is not None:
            self._moment = self._moment.complete(HISTORY_RANK, profiles)

    def carry(self, previous: tuple[np.ndarray, np.ndarray, str] | None) -> None:
        """Start after an earlier release (:func:`carried_previous`): its last w steps' samples
        bound the first period's budget and its noise is kept."""
        if previous is None:
            return
        allowed = NOISES if self.cfg.noise == "auto" else (self.cfg.noise,)
        if previous[2] not in allowed:
            raise ParameterError(
                f"The 'noise' parameter of release_optstream is {self.cfg.noise!r}, but the "
                f"earlier release passed as 'history' ended with {previous[2]!r} noise: windows "
                "straddling the two would mix currencies. Use the same noise (or 'auto')."
            )
        self.previous = previous
        self.noise = previous[2]

    # -- planning -----------------------------------------------------------------------------

    def roughness(self) -> RoughnessStats | None:
        """The variogram's statistics over the look-back (:func:`planner.variogram` reads
        them): the sums of the last :data:`LOOKBACK` full periods; a streaming planner's, with
        :data:`VARIOGRAM_WINDOW` = ``"blocks"`` (the default), from two blocks of at most
        ``L = LOOKBACK`` periods, the current one (n periods) and the one before, weighing
        the previous block by ``(L − n) / L``: the periods that would have left a window of L
        are taken out at the previous block's mean rate (a sliding window from two sums; exact
        when the current block is full, or when the periods of the previous block are alike).
        Of public history only the last L periods are read (:meth:`add_history`): a history of
        L periods or more fills one block, the exact window at the first plan. Total weight L,
        as the exact window's; the periods state subtracts the oldest period itself. State: two
        (N, w) sums, whatever L. With ``"forgetting"`` one sum, every term times (L − 1)/L
        before a period is added past L (it kept a month of public history in the look-back
        long after the exact window had dropped it:
        ``docs/results/optstream_defaults_findings.md``).

        A previous block of public history (:data:`HISTORY_FADE` not ``"mean"``) leaves
        oldest period first instead, as the exact window. ``"periods"`` keeps beside the
        block's sums S₀ = Σᵢ rᵢ (periods i = 0 .. L − 1) each period's share of each node's
        roughness, pᵢ = Σ_h rᵢ(h) / Σ_h S₀(h) over the lags h ((L, N) numbers, kept while
        the block is read), and takes the part still in the window after n released periods
        as S₀ · Σ_{i≥n} pᵢ per node (counts and noise at the mean rate: those of public
        history do not vary): exact when each node's periods differ in level only, not in the
        shape of their variogram (weekends smoother than weekdays are a level).
        ``"lowrank"`` (the default) factors the shares less the mean rate once the block is
        read, F − 1/L ≈ B C (:meth:`_HistoryMoments.complete`: B (L, r) the leading
        eigenvectors of the (L, L) Gram matrix, C (r, N)), and takes S₀ per node times
        clip((L − n)/L + (Σ_{i≥n} B[i]) C, 0, 1): O(N r) kept, exact when F has rank ≤ r
        (the nodes' day-to-day roughness shares r patterns: weekends, holidays).
        ``"trend"`` / ``"weekly"`` keep instead moments M_j = Σᵢ φ_j(i)·rᵢ of a few
        basis functions (a line, and the harmonics of a 7-period cycle), take each period's
        sums as their least-squares fit rᵢ ≈ φ(i)ᵀβ, β = (ΦᵀΦ)⁺ M, and the part as
        Σ_{i≥n} φ(i)ᵀβ within [0, S₀]: O(N w) (one or seven more sums), exact when each (node,
        lag)'s roughness is in the basis' span.
        """
        prev = self._rough_prev
        if prev is None or self._n_rough >= LOOKBACK:
            return self._rough
        n = self._n_rough
        if self._moment_prev is not None and HISTORY_FADE != "mean":
            part = self._moment_prev.part(prev, n)
        else:
            part = prev.scaled((LOOKBACK - n) / LOOKBACK)
        return part if self._rough is None else self._rough + part

    def _gamma(self) -> np.ndarray | None:
        stats = self.roughness()
        return None if stats is None else variogram(stats)

    def _noises(self) -> tuple[str, ...]:
        cfg = self.cfg
        if self.noise is not None:
            return (self.noise,)
        if cfg.noise == "auto":
            return NOISES if cfg.delta is not None else ("laplace",)
        return (cfg.noise,)

    def _prior(self, r: int):
        """(prior, coherent variance) for a period of r steps, or (None, None)."""
        if self.prior_model is None:
            return None, None
        if self.streaming:
            prior = self._state.prior(r, period=self.cfg.w)
            if prior is None:
                return None, None
            out = np.array(prior.variance, dtype=np.float64)
            whole = None if self._agg_state is None else self._agg_state.prior(r, period=self.cfg.w)
            if whole is not None:
                out[self._agg] = whole.variance
            return prior, out
        if len(self._measured) < 2:
            return None, None
        ms = list(self._measured)[-PRIOR_DAYS:]
        # lists of the periods' (N, r) arrays, not stacked: profile_prior reads them a block
        # of nodes at a time (stacked, each was 2 GB at 100,000 feeders x 56 periods)
        series = (
            [m.values[:, :r] for m in ms],
            [m.noise[:, :r] for m in ms],
            [m.sampled[:, :r] for m in ms],
        )
        error = [e[:, :r] for e in list(self._errors)[-PRIOR_DAYS:]]
        prior = self.prior_model(
            *series,
            days=PRIOR_DAYS,
            error=error,
            independent=np.stack(list(self._independent)[-PRIOR_DAYS:]),
            period=self.cfg.w,
        )
        return prior, self._coherent_variance(prior, series, error)

    def _coherent_variance(self, prior, series, error) -> np.ndarray | None:
        """(N, r) error variance of each node's forecast as a whole, for the planner's
        prediction (``plan_period(prior_coherent=...)``): a leaf's is its prior's; an
        aggregate's comes from its whole series, the periods summed from its leaves included
        (what its released value, the sum of its leaves' merged estimates, inherits from their
        correlated forecasts)."""
        if prior is None:
            return None
        out = np.array(prior.variance, dtype=np.float64)
        agg = np.ones(out.shape[0], dtype=bool)
        agg[self.cfg.leaf_nodes] = False
        if agg.any():
            whole = self.prior_model(
                *([a[agg] for a in x] for x in series),
                days=PRIOR_DAYS,
                error=[a[agg] for a in error],
                period=self.cfg.w,
            )
            if whole is not None:
                out[agg] = whole.variance
        return out

    def _call(self, r: int, tail_of: PeriodPlan | None, prior, coherent, **extra):
        cfg = self.cfg
        basis = "history" if self.n_measured == self.from_history else "released"
        return plan_period(
            self._gamma(),
            matrix=cfg.matrix,
            levels=list(cfg.levels),
            epsilon=cfg.epsilon,
            alpha=cfg.alpha,
            w=cfg.w,
            r=r,
            delta=cfg.delta,
            noises=self._noises(),
            target=cfg.target,
            previous=self.previous,
            candidates=None if tail_of is None else (min(tail_of.k, r),),
            shares=_shares(cfg) if tail_of is None else [tail_of.shares],
            basis=basis,
            prior_variance=None if prior is None else prior.variance,
            choose_with_prior=cfg.plan_with_prior,
            prior_coherent=coherent,
            combine=None if cfg.whole else False,
            **extra,
        )

    def scores(self, r: int | None = None, *, tail_of: PeriodPlan | None = None) -> CandidateScores:
        """This planner's nodes' :class:`planner.CandidateScores` for the next period (add the
        subtrees' and pass the sum to :meth:`plan`)."""
        r = self.cfg.w if r is None else r
        prior, coherent = self._prior(r) if self.cfg.plan_with_prior else (None, None)
        return self._call(r, tail_of, prior, coherent, scores_only=True)

    def plan(
        self,
        r: int | None = None,
        *,
        tail_of: PeriodPlan | None = None,
        scores: CandidateScores | None = None,
    ):
        """Plan the next period of r steps (default w; ``tail_of``: the plan a shorter last
        period keeps). Returns ``(PeriodPlan, ProfilePrior or None)``.

        ``scores``: every subtree's :meth:`scores` added (module notes); default: this
        planner's own.
        """
        r = self.cfg.w if r is None else r
        prior, coherent = self._prior(r)
        plan = self._call(r, tail_of, prior, coherent, scores=scores)
        return plan, prior
