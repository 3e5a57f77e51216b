"""One OptStream period split into subtrees of the hierarchy: Dask *inside* a period.

The daily job releases one period, so parallelism across periods gives it nothing. Here the
hierarchy is cut at a depth ``c`` (:func:`choose_cut`): every node of depth ``c`` roots a
subtree, the nodes above form the *top*. One object per subtree, :class:`SubtreeRelease`,
does everything that touches the subtree's data where it lives (in this process, or as a Dask
actor on a worker): it reads its leaves from the source (never through the task graph), sums
its aggregates, draws its nodes' noise ([FV19] Alg. 2: sample, perturb, reconstruct, and the
feature queries of Alg. 4 line 1), estimates its weights, and takes part in the distributed
elimination of Algorithm 4 line 2 (:mod:`postproc._split`). The client measures the few top
nodes (their values are sums of the subtree roots' values), solves the top of the elimination
and pushes the roots' values back down. :func:`release_split` is the same function for one
process (``client=None``) and for Dask.

Randomness (seeded runs): every internal node draws from its own stream and the leaf children
of a node from one stream of that node (``SeedSequence(seed, spawn_key=(ordinal, row, 0))``
and ``(ordinal, row, 1)``, ``row`` the node's row in ``hierarchy.nodes``), each group in a
fixed order. The draws therefore do not depend on the cut, the number of workers or the
order of work: a split release equals its one-process run to rounding. With ``seed=None``
every subtree object draws from its own :class:`~mechanisms.core._random.SecureBits`.

Scope: a fixed k, equally spaced samples or the L1 sampler (one SVT per level on the level's
summed score: one round of the subtrees per step). The default ``k="auto"`` is split by
:mod:`dpstream.engine._auto_split`, which reuses this module's streams, cut and calls.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from mechanisms import DomainError, ParameterError
from mechanisms.core._noise import snap_to_lattice
from mechanisms.core._random import bit_source
from mechanisms.optstream._estimates import (
    feature_answers,
    feature_noise,
    optstream_split,
    perturb_noise,
)
from mechanisms.optstream._sampling import (
    interpolation_weights,
    l1_score,
    null_rate_threshold,
    reconstruct,
    sample_equal_window,
    svt_noises,
)
from postproc import FeatureSet, Hierarchy, bias_aware_variances, project_consistent
from postproc._split import SubtreeSolver, TopTree, node_depths, solve_split, subtrees

__all__ = [
    "SplitSpec",
    "SubtreeRelease",
    "SubtreeTask",
    "choose_cut",
    "measure_nodes",
    "release_split",
]

#: Subtrees per worker the automatic cut aims for (load balance against per-task overhead).
SUBTREES_PER_WORKER = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitSpec:
    """Public parameters of one split period (everything fixed before the release)."""

    epsilon: float
    """ε of every window of w steps (ε/h per level, [FV19] Theorem 13)."""
    w: int
    """Period length and privacy window."""
    k: int
    """Equally spaced samples per period, 1 <= k <= w."""
    alpha: float
    """Per-step change α that calibrates the noise."""
    features: FeatureSet
    """The feature chain of a full period."""
    level_sizes: tuple[int, ...]
    """Number of nodes of each level of the whole hierarchy (the lattice's rounding count)."""
    weights: str = "variance"
    """``"variance"`` (noise + interpolation bias, as release_optstream) or ``"noise"``."""
    shares: tuple[float, ...] | None = None
    """Relative budget (s, p, o) or None for the default split."""
    sampling: str = "equal"
    """``"equal"`` or ``"l1"`` ([FV19] Alg. 3: one SVT per level on the level's summed score)."""
    theta: float | None = None
    """Public SVT threshold of the L1 sampler (None: the null-rate threshold)."""

    def __post_init__(self) -> None:
        if self.sampling not in ("equal", "l1"):
            raise ParameterError(
                "The 'sampling' parameter of a split release must be 'equal' or 'l1'. "
                f"Got {self.sampling!r} instead."
            )
        if self.weights not in ("variance", "noise"):
            raise ParameterError(
                "The 'weights' parameter of a split release must be 'variance' or 'noise'. "
                f"Got {self.weights!r} instead."
            )
        if self.features.w != self.w:
            raise ParameterError(
                f"The 'features' parameter of SplitSpec must partition w = {self.w} steps."
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class SubtreeTask:
    """What a subtree's object needs: public parameters and where its data is, a few hundred
    bytes whatever the subtree's size (no large graph, issue 22). The object builds its
    structure where it runs from the whole hierarchy (:func:`tree_structure`)."""

    spec: SplitSpec
    ordinal: int
    """The period's ordinal (keys the seeded streams)."""
    seed: object
    """None (secure source) or an int (experiments only)."""
    index: int
    """Which subtree: its root's place among the cut depth's nodes (``subtrees`` order)."""
    cut: int
    """Depth of the subtree's root in the whole hierarchy."""
    key: str
    """Names the period's hierarchy in the per-process cache (:func:`tree_structure`)."""
    nodes_digest: str
    """:func:`_nodes_digest` of the whole hierarchy."""
    source: Callable = field(hash=False)
    """``source(leaves)`` -> the period's values (len(leaves), w) of those leaves, validated."""


#: The structure of the whole tree of the call being built in this process (one entry):
#: ``key -> (subtree maps, subtree rows, parent rows, extra)``, shared by its subtrees.
_STRUCTURE: dict = {}
_STRUCTURE_LOCK = threading.Lock()


def _nodes_digest(hierarchy: Hierarchy) -> str:
    """A digest of the hierarchy's node names in order (public)."""
    return _names_digest(hierarchy.nodes)


def _names_digest(names) -> str:
    """A digest of node names in order (public)."""
    import hashlib

    return hashlib.sha256("\x00".join(names).encode()).hexdigest()


def tree_structure(
    key: str, digest: str, cut: int, hierarchy: Hierarchy | dict, extra: Callable | None = None
):
    """``(subtree maps, subtree rows, parent rows, extra(hierarchy))`` of the whole tree cut at
    ``cut`` (:func:`postproc._split.subtrees`), built once per process for the call ``key``
    and shared by the subtrees built there (the last call's is dropped), where the subtree
    objects run: ``hierarchy`` is the :class:`Hierarchy`, or on Dask its ``{parent:
    children}`` names scattered once per worker (never in a task's graph; a Hierarchy does not
    pickle), checked against the client's node ``digest``. :func:`forget_structure` drops it
    once every subtree is built."""
    with _STRUCTURE_LOCK:
        got = _STRUCTURE.get(key)
        if got is None:
            if not isinstance(hierarchy, Hierarchy):  # the {parent: children} scattered
                hierarchy = Hierarchy(children=hierarchy)
            if _nodes_digest(hierarchy) != digest:
                raise RuntimeError("a subtree's hierarchy is not the client's")  # internal
            maps, rows = subtrees(hierarchy, cut)
            more = None if extra is None else extra(hierarchy)
            _STRUCTURE.clear()
            _STRUCTURE[key] = got = (maps, rows, hierarchy.parent, more)
    return got


def forget_structure(key: str) -> None:
    """Drop the call's whole-tree structure from this process (every subtree is built)."""
    with _STRUCTURE_LOCK:
        _STRUCTURE.pop(key, None)


def choose_cut(hierarchy: Hierarchy, n_workers: int, cut: int | None = None) -> int:
    """The depth whose nodes root the subtrees.

    Given ``cut``: checked (1 <= cut, every node of depth <= cut has children). Else the
    shallowest depth with at least ``SUBTREES_PER_WORKER * n_workers`` nodes, or the deepest
    admissible one; 0 when the hierarchy cannot be split (the root's children are leaves):
    then the whole tree is one subtree run by the client.
    """
    depth = node_depths(hierarchy)
    is_leaf = np.ones(depth.size, dtype=bool)
    is_leaf[hierarchy.parent[hierarchy.parent >= 0]] = False
    deepest = int(depth[is_leaf].min()) - 1  # every node down to this depth has children
    if cut is not None:
        if (
            isinstance(cut, bool)
            or not isinstance(cut, int | np.integer)
            or not (1 <= cut <= deepest)
        ):
            raise ParameterError(
                f"The 'cut' parameter of release_split must be a depth in [1, {deepest}] (the "
                f"subtree roots must have children). Got {cut!r} instead."
            )
        return int(cut)
    if deepest < 1:
        return 0
    counts = np.bincount(depth)
    for d in range(1, deepest + 1):
        if counts[d] >= SUBTREES_PER_WORKER * n_workers:
            return d
    return deepest


def _streams(seed: object, ordinal: int, secure):
    """``stream(row, kind)`` -> the bit source of a node's own draws (kind 0) or of its
    leaf children's (kind 1)."""
    if seed is None:
        return lambda row, kind: secure
    base = int(seed)
    return lambda row, kind: bit_source(
        np.random.SeedSequence(base, spawn_key=(int(ordinal), int(row), int(kind)))
    )


def measure_nodes(
    values: np.ndarray,
    *,
    spec: SplitSpec,
    depths: np.ndarray,
    rows: np.ndarray,
    parent_rows: np.ndarray,
    is_leaf: np.ndarray,
    stream: Callable,
    masks: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Perturb, reconstruct and the feature queries of some nodes of one period.

    ``values`` (n, w); ``depths``, ``rows``, ``parent_rows``, ``is_leaf`` (n,) place each node
    in the whole hierarchy; ``masks`` (h, w) are the sample sets of every level
    (:func:`sample_masks`). Returns the estimates ``c̃`` and their noise variances (n, P), as
    :func:`mechanisms.optstream._estimates._estimates`, with each group's noise from its own
    stream (module notes).

    *Privacy*: per level ε/h split into ε_s, ε_p, ε_o as [FV19] Alg. 2 and Theorem 13
    (:func:`~mechanisms.optstream._estimates.optstream_split`, every window); the noise of
    level ℓ is calibrated for the level's ``spec.level_sizes[ℓ]`` nodes and its k samples,
    whichever nodes this call measures.
    """
    n, w = values.shape
    fs = spec.features
    queries = fs.partitions[1:]
    split = _split_of(spec)
    est = np.empty((n, fs.n_parts))
    var = np.empty((n, fs.n_parts))
    # groups: an internal node alone (kind 0); the leaf children of one parent (kind 1)
    key_row = np.where(is_leaf, parent_rows, rows)
    order = np.lexsort((np.arange(n), is_leaf, key_row))
    keys = np.stack([key_row[order], is_leaf[order]], axis=1)
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
    bounds = np.r_[starts, n]
    noises: dict[int, tuple] = {}
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        idx = order[a:b]
        level = int(depths[idx[0]])
        if level not in noises:
            size = spec.level_sizes[level]
            mask = masks[level][None]
            k = int(mask.sum())
            noises[level] = (
                mask,
                interpolation_weights(mask)[0],
                perturb_noise(k=k, alpha=spec.alpha, epsilon=split.perturb, n_nodes=size),
                [
                    feature_noise(
                        window=spec.w,
                        alpha=spec.alpha,
                        epsilon=split.features / len(queries),
                        n_coords=len(q) * size,
                    )
                    for q in queries
                ],
            )
        mask, weights, pnoise, fnoises = noises[level]
        bits = stream(key_row[idx[0]], int(is_leaf[idx[0]]))
        x = values[idx]
        noisy = pnoise.release(x[:, mask[0]], bits)  # [FV19 §3.2]
        est[idx, :w] = reconstruct(mask, noisy[None])[0]  # [FV19 §3.3]
        var[idx, :w] = weights * pnoise.variance
        col = w
        for q, fnoise in zip(queries, fnoises, strict=True):  # [FV19 Alg. 4 l. 1]
            est[idx, col : col + len(q)] = fnoise.release(feature_answers(x, q), bits)
            var[idx, col : col + len(q)] = fnoise.variance
            col += len(q)
    return est, var


def _split_of(spec: SplitSpec):
    return optstream_split(
        spec.epsilon,
        sampling=spec.sampling,
        n_levels=len(spec.level_sizes),
        has_features=spec.features.n_features > 1,
        windows="any",
        shares=spec.shares,
    )


def sample_masks(spec: SplitSpec, scores: Callable | None, stream: Callable) -> np.ndarray:
    """The sample set (h, w) of every level of one full period.

    ``"equal"``: the equally spaced pattern. ``"l1"``: [FV19] Algorithm 3 per level, exactly
    as :func:`mechanisms.optstream._sampling.sample_l1` on the level's values with the bits
    ``stream(level, 2)`` (ρ, then one μ per step asked), the level's summed score coming from
    ``scores(tp (h,), i)`` -> (h,): the sums over the subtrees and the top of
    :func:`~mechanisms.optstream._sampling.l1_score` (one round of the subtrees per step).

    *Privacy*: ε_s per period and level (SVT, [FV19] Theorem 7 with ΔL = 2α(w - k), see
    ``sample_l1``); the score is the level's sum whichever process adds its parts.
    """
    h, w, k = len(spec.level_sizes), spec.w, spec.k
    masks = np.zeros((h, w), dtype=bool)
    if spec.sampling == "equal":
        masks[:, sample_equal_window(w, k, w)] = True
        return masks
    masks[:, 0] = True
    k_eff = min(k, w)
    if k_eff >= w:
        masks[:] = True
        return masks
    if k_eff <= 1:
        return masks
    eps_s = _split_of(spec).sample
    theta = spec.theta
    if theta is None:
        theta = null_rate_threshold(w=w, k=k, epsilon=eps_s, alpha=spec.alpha)
    rho, mu = svt_noises(w=w, k=k, epsilon=eps_s, alpha=spec.alpha)
    gamma = rho.granularity
    bits = [stream(level, 2) for level in range(h)]
    thresholds = [  # [FV19 Alg. 3 l. 2]
        float(snap_to_lattice(theta, gamma)) + float(rho.sample(1, bits[lv])[0]) for lv in range(h)
    ]
    tp = np.zeros(h, dtype=np.int64)
    count = np.ones(h, dtype=np.int64)
    active = np.ones(h, dtype=bool)
    for i in range(1, w):
        summed = scores(tp.copy(), i)
        for lv in np.flatnonzero(active):
            score = float(snap_to_lattice(summed[lv], gamma))
            if score + float(mu.sample(1, bits[lv])[0]) >= thresholds[lv]:  # [FV19 Alg. 3 l. 5]
                masks[lv, i] = True
                tp[lv] = i
                count[lv] += 1
            if w - 1 - i <= k_eff - count[lv]:  # [FV19 Alg. 3 l. 8-9]
                masks[lv, i + 1 :] = True
                count[lv] += w - 1 - i
                active[lv] = False
            elif count[lv] >= k_eff:  # [FV19 Alg. 3 l. 10]
                active[lv] = False
        if not active.any():
            break
    return masks


def level_scores(values: np.ndarray, depths: np.ndarray, tp: np.ndarray, i: int) -> np.ndarray:
    """The L1 scores ``L1^[tp_l, i]`` (h,) summed over the given nodes of each level."""
    out = np.zeros(tp.size)
    for lv in np.unique(depths):
        x = values[depths == lv][None]
        out[lv] = l1_score(x, tp[lv : lv + 1], i)[0]
    return out


def _weights(
    spec: SplitSpec, est: np.ndarray, var: np.ndarray, depths: np.ndarray, masks: np.ndarray
) -> np.ndarray:
    """Weights of Algorithm 4 line 2 (inverse variances; per node, so per subtree)."""
    if spec.weights == "noise":
        return 1.0 / var
    present = np.unique(depths)
    v = bias_aware_variances(
        est[None],
        var[None],
        masks[present][None],
        levels=[np.flatnonzero(depths == lv) for lv in present],
        features=spec.features,
    )[0]
    return 1.0 / v


class SolverCalls:
    """The elimination's calls (:class:`postproc._split.SubtreeSolver`) on ``self.solver``,
    delegated so a Dask actor's proxy reaches them; one definition for the fixed-k and the
    k="auto" subtree objects."""

    solver: object

    def scale(self, offset_b):
        return self.solver.scale(offset_b)

    def summary(self, rhs):
        return self.solver.summary(rhs)

    def descend(self, z_root, add):
        return self.solver.descend(z_root, add)

    def gradient(self, offset):
        return self.solver.gradient(offset)

    def extent(self):
        return self.solver.extent()

    def start(self):
        return self.solver.start()

    def infeasible(self, x_tol, g_tol):
        return self.solver.infeasible(x_tol, g_tol)

    def swap(self):
        return self.solver.swap()

    def problem(self):
        return self.solver.problem()

    def set_leaves(self, x):
        return self.solver.set_leaves(x)

    def node_values(self) -> np.ndarray:
        """The released values (n, w) of the subtree's nodes, >= 0 and consistent."""
        return self.solver.node_values()


class SubtreeRelease(SolverCalls):
    """Everything of one subtree that touches its data, where it runs (a Dask actor or here).

    Lifecycle: built (reads and validates its leaves), :meth:`root_values` (the top's input),
    :meth:`measure` (after the period is charged: draws its noise), then the elimination's
    calls (:class:`postproc._split.SubtreeSolver`'s methods) and :meth:`node_values`.
    """

    def __init__(self, task: SubtreeTask, hierarchy: Hierarchy | dict) -> None:
        self.task = task
        maps, rows, parent, _ = tree_structure(task.key, task.nodes_digest, task.cut, hierarchy)
        self.rows = rows[task.index]
        self.parent_rows = parent[self.rows]
        self.tree = Hierarchy(children=maps[task.index])
        del maps, rows, parent
        leaves = np.asarray(task.source(self.tree.leaves), dtype=np.float64)
        if leaves.shape != (len(self.tree.leaves), task.spec.w):
            raise DomainError(
                f"A subtree's source must give ({len(self.tree.leaves)}, {task.spec.w}) "
                f"values. Got shape {leaves.shape}."
            )
        self.values = np.asarray(self.tree.sparse_matrix @ leaves)  # (n, w), aggregates summed
        self.depth = node_depths(self.tree) + task.cut
        self.solver: SubtreeSolver | None = None

    def forget_structure(self) -> None:
        """Drop the whole tree's structure from this process once every subtree is built."""
        forget_structure(self.task.key)

    def root_values(self) -> np.ndarray:
        """The subtree root's values (w,): the top nodes' values are their sums."""
        return self.values[0].copy()

    def l1_scores(self, tp: np.ndarray, i: int) -> np.ndarray:
        """The subtree's part of every level's L1 score at step ``i`` (:func:`sample_masks`)."""
        return level_scores(self.values, self.depth, tp, i)

    def measure(self, masks: np.ndarray) -> int:
        """Draw the subtree's noise for the levels' sample sets ``masks`` (h, w) and set up
        its part of the elimination; its node count."""
        task, spec = self.task, self.task.spec
        depth = self.depth
        is_leaf = np.ones(depth.size, dtype=bool)
        is_leaf[self.tree.parent[self.tree.parent >= 0]] = False
        est, var = measure_nodes(
            self.values,
            spec=spec,
            depths=depth,
            rows=self.rows,
            parent_rows=self.parent_rows,
            is_leaf=is_leaf,
            stream=_streams(task.seed, task.ordinal, bit_source(None)),
            masks=masks,
        )
        self.values = None  # the true values are not needed any more
        weights = _weights(spec, est, var, depth, masks)
        del var
        self.solver = SubtreeSolver(self.tree, spec.features, est, weights)
        self.tree = None  # the solver keeps its index arrays only (memory at scale)
        return int(depth.size)


def _local_call(objects: list) -> Callable:
    def call(method: str, args: Sequence[tuple], only: int | None = None) -> list:
        if only is not None:
            return getattr(objects[only], method)(*args[only])
        return [getattr(o, method)(*a) for o, a in zip(objects, args, strict=True)]

    return call


def _actor_call(actors: list) -> Callable:
    def call(method: str, args: Sequence[tuple], only: int | None = None) -> list:
        if only is not None:
            return getattr(actors[only], method)(*args[only]).result()
        futures = [getattr(a, method)(*x) for a, x in zip(actors, args, strict=True)]
        return [f.result() for f in futures]

    return call


@contextmanager
def split_client(scheduler: str | None = None, n_workers: int = 2, processes: bool = True):
    """A Dask client for :func:`release_split`: the ``scheduler``'s, or a ``LocalCluster`` of
    ``n_workers`` single-threaded workers (processes, or threads) made and closed here."""
    from ._run import _client

    with _client(scheduler, n_workers, processes=processes) as client:
        yield client


def release_split(
    spec: SplitSpec,
    hierarchy: Hierarchy,
    source: Callable,
    *,
    ordinal: int,
    seed: object = None,
    cut: int | None = None,
    client=None,
    charge: Callable[[], None] | None = None,
    n_workers: int = 2,
    names=None,
) -> np.ndarray:
    """Release one period of ``hierarchy`` split into subtrees: values (N, w), nodes in
    ``hierarchy.nodes`` order, >= 0 and consistent.

    Parameters
    ----------
    spec
        The period's public parameters.
    hierarchy
        The whole hierarchy.
    source
        ``source(leaves)`` -> the period's values (len(leaves), w) of those leaves, read where
        it is called (a Dask worker reads its subtree's leaves itself). Must be picklable for
        Dask (e.g. :class:`dpstream.store._source.ParquetLeaves`).
    ordinal, seed
        The period's ordinal and None (secure source) or an int (experiments only).
    cut
        Depth of the subtree roots; None: :func:`choose_cut` for ``n_workers``.
    client
        A ``distributed.Client`` (one actor per subtree on its workers) or None (here).
    charge
        Called once every subtree has read and validated its data and before any draw.
    names
        With ``client``: the hierarchy's ``{parent: children}`` already scattered to every
        worker (a future; :func:`release_periods_split` scatters it once per call), or None
        (scattered here). Each subtree object builds its structure from it where it runs
        (:func:`tree_structure`): a task carries public scalars only.

    Notes
    -----
    *Privacy*: the release of :func:`measure_nodes` for every node (ε per window of w steps,
    [FV19] Theorem 13) followed by post-processing ([FV19] Theorem 3).
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
        raise ParameterError(
            "The 'seed' parameter of a split release must be None or an int (each node "
            f"group's stream is keyed from it). Got {type(seed).__name__} instead."
        )
    c = choose_cut(hierarchy, n_workers if client is not None else 1, cut)
    if c == 0:
        raise ParameterError(
            "The 'hierarchy' of a split release must have a level below the root whose nodes "
            "all have children (leaves directly under the root cannot be split); release "
            "the period in one process."
        )
    rows = subtrees(hierarchy, c)[1]
    parent = hierarchy.parent
    key, digest = uuid.uuid4().hex, _nodes_digest(hierarchy)
    tasks = [
        SubtreeTask(
            spec=spec,
            ordinal=int(ordinal),
            seed=None if seed is None else int(seed),
            index=s,
            cut=c,
            key=key,
            nodes_digest=digest,
            source=source,
        )
        for s in range(len(rows))
    ]
    if client is None:
        objects = [SubtreeRelease(t, hierarchy) for t in tasks]
        call = _local_call(objects)
    else:  # the hierarchy once per worker (``names``: once per call), outside the graph
        if names is None:
            names = client.scatter(dict(hierarchy.children), broadcast=True, hash=False)
        futures = [client.submit(SubtreeRelease, t, names, actor=True) for t in tasks]
        objects = [f.result() for f in futures]
        del futures
        call = _actor_call(objects)
    call("forget_structure", [()] * len(tasks))
    cut_values = np.stack(call("root_values", [()] * len(tasks)))
    # the top: values from the roots' sums, measured here (before: the period's charge)
    depth = node_depths(hierarchy)
    is_leaf = np.ones(depth.size, dtype=bool)
    is_leaf[parent[parent >= 0]] = False
    top_rows = np.flatnonzero(depth < c)
    shape = (top_rows.size, spec.features.n_parts)
    structure = TopTree(hierarchy, c, spec.features, np.zeros(shape), np.ones(shape))
    top_values = structure.sums(cut_values)
    top_depth = depth[top_rows]
    if charge is not None:
        charge()
    stream = _streams(seed, ordinal, bit_source(None))

    def scores(tp: np.ndarray, i: int) -> np.ndarray:  # a level's L1 score: top + subtrees
        parts = call("l1_scores", [(tp, i)] * len(tasks))
        return level_scores(top_values, top_depth, tp, i) + np.sum(parts, axis=0)

    masks = sample_masks(spec, scores, stream)
    call("measure", [(masks,)] * len(tasks))
    top_est, top_var = measure_nodes(
        top_values,
        spec=spec,
        depths=top_depth,
        rows=top_rows,
        parent_rows=parent[top_rows],
        is_leaf=is_leaf[top_rows],
        stream=stream,
        masks=masks,
    )
    weights = _weights(spec, top_est, top_var, top_depth, masks)
    top = TopTree(hierarchy, c, spec.features, top_est, weights)

    def gather() -> None:  # the stall fallback: the whole problem in this process
        parts = call("problem", [()] * len(tasks))
        n = len(hierarchy.nodes)
        est = np.empty((n, spec.features.n_parts))
        wts = np.empty_like(est)
        est[top_rows], wts[top_rows] = top.c, top.weights
        for (ce, we), r in zip(parts, rows, strict=True):
            est[r], wts[r] = ce, we
        rel = project_consistent(
            est, hierarchy=hierarchy, features=spec.features, weights=wts
        ).values[0]
        call("set_leaves", [(_leaf_steps(hierarchy, rel, r),) for r in rows])

    solve_split(top, call, gather=gather)
    out = np.empty((len(hierarchy.nodes), spec.w))
    for s, r in enumerate(rows):  # one subtree at a time: never two copies of the release
        out[r] = call("node_values", [()] * len(tasks), only=s)
    out[top_rows] = top.sums(out[top.cut_rows])
    return out


def _leaf_steps(hierarchy: Hierarchy, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The leaf rows of a subtree (its BFS order) from the whole release's node values."""
    is_leaf = np.ones(len(hierarchy.nodes), dtype=bool)
    is_leaf[hierarchy.parent[hierarchy.parent >= 0]] = False
    return values[rows[is_leaf[rows]]]


def split_applies(
    hierarchy: Hierarchy | None,
    sampling: str,
    weights: str,
    cut: int | None,
    n_workers: int,
    seed: object = None,
) -> bool:
    """Whether a store period can be split into subtrees: variance or noise weights and a
    hierarchy with a level below the root whose nodes all have children. A bad ``cut``, or a
    ``seed`` that is neither None nor an int, is refused here (before anything is stored)."""
    if hierarchy is None or sampling not in ("equal", "l1") or weights not in ("variance", "noise"):
        return False
    if choose_cut(hierarchy, n_workers, cut) == 0:
        return False
    check_split_seed(seed)
    return True


def check_split_seed(seed: object) -> None:
    """A split release keys each node group's stream from ``seed``: None or an int."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
        raise ParameterError(
            "The 'seed' parameter of a split release must be None or an int (each node "
            f"group's stream is keyed from it). Got {type(seed).__name__} instead."
        )


def release_periods_split(
    spec,
    periods: Sequence[tuple[int, Callable, Callable]],
    *,
    seed: object,
    cut: int | None,
    scheduler: str | None,
    n_workers: int,
    put: Callable[[int, np.ndarray], None],
    progress: Callable | None = None,
    local: bool = False,
) -> None:
    """The store's split periods on one Dask cluster kept for the call (``local``: in this
    process): for each ``(ordinal, source, charge)`` in time order, :func:`release_split`
    then ``put(ordinal, values (N, w))`` (committed before the next period starts)."""
    tree = spec.hierarchy
    split = SplitSpec(
        epsilon=spec.epsilon,
        w=spec.w,
        k=spec.k,
        alpha=spec.alpha,
        features=spec.features,
        level_sizes=tuple(len(level) for level in tree.levels),
        weights=spec.weights,
        shares=spec.shares,
        sampling=spec.sampling,
        theta=spec.theta,
    )
    with _maybe_client(local, scheduler, n_workers) as client:
        names = None
        if client is not None:  # once per worker and call, outside the graph
            names = client.scatter(dict(tree.children), broadcast=True, hash=False)
        for ordinal, source, charge in periods:
            out = release_split(
                split,
                tree,
                source,
                ordinal=ordinal,
                seed=seed,
                cut=cut,
                client=client,
                charge=charge,
                n_workers=n_workers,
                names=names,
            )
            put(ordinal, out)
            if progress is not None:
                progress(1)


@contextmanager
def _maybe_client(local: bool, scheduler: str | None, n_workers: int):
    if local:
        yield None
        return
    with split_client(scheduler, n_workers) as client:
        yield client
