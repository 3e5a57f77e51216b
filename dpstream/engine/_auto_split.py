"""The default release (``k="auto"``) of one period split into subtrees (issue 22.2).

:mod:`dpstream.engine._subtree` splits a fixed-k period; this module splits the default. The
hierarchy is cut at a depth ``c`` (:func:`~dpstream.engine._subtree.choose_cut`); every
subtree is one :class:`SubtreeAuto` (here, or a Dask actor kept for the whole call) that holds
its own in-stream planner (:class:`planner.StreamPlanner` on
:func:`planner.subtree_config` of its nodes) across periods, and the client holds the planner of
the few nodes above the cut (the *top*). A subtree object's task carries public scalars
only; the object builds its own structure where it runs (its nodes, rows and
``subtree_config``) from the hierarchy's names, scattered once per worker outside the task
graph (:func:`_part_structure`; issue 22: no "large graph" at a million nodes). Per period
(:meth:`AutoSplit.release`):

1. every subtree reads its leaves from the source (never through the task graph), validates
   them and sums its aggregates; the top's values are sums of the subtree roots';
2. each planner scores the candidates on its nodes (:meth:`~planner.StreamPlanner.scores`);
   the scores are additive over nodes (:class:`planner.CandidateScores`), so their sum chooses
   exactly what the whole tree's planner chooses, and every planner finishes its part of the
   plan (and its nodes' profile prior) from that sum;
3. the period is charged (``charge``), then every node is measured: equally spaced samples
   with the plan's Laplace or discrete Gaussian noise, reconstructed by interpolation ([FV19]
   Alg. 2, as :func:`dpstream.pipelines._period_steps.measure_period`), each node group from
   its own stream (seeded: ``SeedSequence(seed, spawn_key=(ordinal, row, kind))``, as the
   fixed-k split), so the draws do not depend on the cut or the workers. An aggregate of a
   level with share 0 gets the sum of its leaves' estimates (a top node's from the subtrees'
   leaf sums);
4. Algorithm 4 with the planner's variances and the prior folded into each node's term
   (:func:`postproc._prior.merge_prior`) as the distributed elimination of
   :func:`postproc._split.solve_split`;
5. every planner records its nodes' measurement (:meth:`~planner.StreamPlanner.update`).

Through the store (:func:`release_auto_periods_split`), every part's planner state is saved
with each released period (its running sums, :mod:`dpstream.store._planner_state`, the store's
``split_state`` table keyed by the cut and the part's root, in the period's transaction: each
subtree's fetched from its object one at a time, the top's with its few held periods). The
next run loads them where the parts run (:meth:`AutoSplit.load_saved`: a worker opens the
store file read-only and reads its state and its own rows of the held periods' records), so
day by day through the store plans as one planner over every day, past the look-backs
(tested), and nothing whole-tree crosses the client. A part without its state (an older
store, a period released whole or at another cut since) makes every part replay the stored
periods (:meth:`AutoSplit.rebuild`: exact within the look-backs only).

:func:`release_auto_whole` is the same period in one process, on the whole tree with one
planner: the reference the split equals (to rounding, seeded).

Memory at scale (issue 22.3: a million meters, 10 subtrees on 2 workers). A subtree object
whose planner holds at least :data:`SPILL_BYTES` keeps it in a file of its process between
calls (:class:`_Spill`: pickled, so read back bitwise; the prior's all-zero sums as shapes;
each held period's arrays written once to a file of its own), so a worker holds one of its
subtrees' planners at a time, not all of them (from the 8th day each is ~38 (n, w) arrays).
Its plan and prior wait in files while the other parts plan, and its measurement and plan
while the elimination runs; the prior is dropped once folded into Algorithm 4's terms. The
files are in the Dask worker's local directory (or a temporary one) and go with the object.

Exactness. A subtree's nodes are planned as in the whole tree when the tree has more than 64
leaves (the planner's prediction then treats every node on its own, see
:mod:`planner._stream_planner`, Subtrees); a smaller tree is refused (:class:`ParameterError`:
release it whole). What a part cannot see, and the client supplies: a share-0 top aggregate's
estimate, noise and predicted error (sums over its subtrees' leaves), the largest predicted
variance of the period (Algorithm 4's weight of unmeasured nodes), and the profile prior's
variance floor (``postproc._prior._FLOOR`` times the mean noise of *all* nodes: the parts'
floor sums are added before each plan, :func:`_set_floor_others`). One theoretical difference
is left: when a state folds its oldest held period (after 7 released ones) it uses the other
parts' floor sums of the plan before, not after, the period; the floor only binds there for a
node whose measurement error is below a millionth of the mean noise, which no plan gives.
``predicted_with_prior`` (recorded, not used) is the target-weighted mean of the parts' (an
aggregate above the cut weighs no leaves). Seeded, the split equals :func:`release_auto_whole`
to rounding (tests: 1e-9).

*Privacy*: the measurement of every node is that of ``release_optstream(k="auto")`` for the
plan (each level's noise calibrated for the whole level's node count), so a window costs what
it costs there ([FV19] Theorems 8 and 13, ``planner.window_budget``); plans, priors, scores
and the elimination read public values only (post-processing, [FV19] Theorem 3).
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from mechanisms import DomainError, ParameterError
from mechanisms.core._random import bit_source
from mechanisms.optstream._sampling import interpolation_matrix
from planner._stream_plan import PeriodPlan
from planner._stream_planner import AutoConfig, Measurement, StreamPlanner, subtree_config
from postproc import FeatureSet, Hierarchy, project_consistent
from postproc._prior import merge_prior
from postproc._split import SubtreeSolver, TopTree, node_depths, solve_split, subtrees

from ..pipelines._period_steps import _UNMEASURED  # share-0 nodes' variance factor
from ._subtree import (
    SolverCalls,
    _actor_call,
    _leaf_steps,
    _local_call,
    _names_digest,
    _nodes_digest,
    _streams,
    check_split_seed,
    choose_cut,
    forget_structure,
    tree_structure,
)

__all__ = [
    "AutoSplit",
    "AutoSubtreeTask",
    "SubtreeAuto",
    "auto_split_applies",
    "measure_auto_nodes",
    "release_auto_periods_split",
    "release_auto_whole",
]


def measure_auto_nodes(
    values: np.ndarray,
    plan: PeriodPlan,
    *,
    cfg: AutoConfig,
    level: np.ndarray,
    level_sizes: tuple[int, ...],
    rows: np.ndarray,
    parent_rows: np.ndarray,
    is_leaf: np.ndarray,
    stream: Callable,
) -> np.ndarray:
    """Sample, perturb and reconstruct some nodes of one period under a k="auto" plan.

    ``values`` (n, r); ``cfg`` the release's (its α); ``level``, ``rows``, ``parent_rows``,
    ``is_leaf`` (n,) place each node in the whole hierarchy; ``level_sizes`` are the whole
    levels' node counts (each level's noise is calibrated for all its nodes, as
    :func:`~dpstream.pipelines._period_steps.measure_period`).
    Returns the estimates x̃ (n, r), NaN for the nodes of a level with share 0. Each group (an
    internal node alone; the leaf children of one parent) draws from ``stream(row, kind)``,
    its nodes in order.

    *Privacy*: per level, the plan's budget times the level's share over the k samples of a
    window ([FV19] §3.2 and Theorem 13; Gaussian: ρ-zCDP), as ``measure_period``.
    """
    from ..pipelines._period_steps import _level_noise

    n, r = values.shape
    pos = plan.positions(r)
    mask = np.zeros((1, r), dtype=bool)
    mask[0, pos] = True
    m = interpolation_matrix(mask)[0][:, pos].T  # (k, r): x̃ = y @ m  [FV19 §3.3]
    est = np.full((n, r), np.nan)
    key_row = np.where(is_leaf, parent_rows, rows)
    order = np.lexsort((np.arange(n), is_leaf, key_row))
    keys = np.stack([key_row[order], is_leaf[order]], axis=1)
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
    bounds = np.r_[starts, n]
    noises: dict[int, object] = {}
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        idx = order[a:b]
        lv = int(level[idx[0]])
        share = plan.shares[lv]
        if share <= 0:
            continue
        if lv not in noises:
            noises[lv] = _level_noise(plan, cfg, pos.size, share, int(level_sizes[lv]))
        bits = stream(key_row[idx[0]], int(is_leaf[idx[0]]))
        noisy = noises[lv].release(values[np.ix_(idx, pos)], bits)  # [FV19 §3.2]
        est[idx] = noisy @ m
    return est


def _weights_and_estimates(est, plan: PeriodPlan, prior, big: float):
    """Algorithm 4's (c̃, W) of some nodes as ``post_process_periods`` forms them: inverse
    predicted variances (share-0 nodes: ``1/big``), the prior folded in."""
    r = est.shape[1]
    v = np.asarray(plan.variances[:, :r], dtype=np.float64)
    finite = np.isfinite(v)
    v = np.where(finite, np.maximum(v, 1e-12 * big / _UNMEASURED), big)
    wts = 1.0 / v
    if prior is None:
        return est, wts
    c2, w2 = merge_prior(est[None], wts[None], prior.mean[None, :, :r], prior.variance[None, :, :r])
    return c2[0], w2[0]


def _max_finite(plan: PeriodPlan, r: int) -> float:
    v = plan.variances[:, :r]
    finite = np.isfinite(v)
    return float(v[finite].max()) if finite.any() else -np.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoSubtreeTask:
    """What a subtree's object needs for the whole call: public scalars only, a few hundred
    bytes whatever the subtree's size (issue 22: no large graph). The object builds its
    structure where it runs from the whole hierarchy (:func:`_part_structure`)."""

    cfg: AutoConfig = field(hash=False)
    """The release's :class:`~planner.AutoConfig` without its per-node arrays (``matrix``,
    ``levels``, ``leaf_nodes``: rebuilt from the hierarchy where the object runs)."""
    index: int
    """Which subtree: its root's place among the cut depth's nodes (``subtrees`` order)."""
    cut: int
    """Depth of the subtree's root."""
    level_sizes: tuple[int, ...]
    """Node count of every level of the whole hierarchy."""
    key: str
    """Names the call's hierarchy in the per-process cache (:func:`_part_structure`)."""
    nodes_digest: str
    """:func:`_nodes_digest` of the whole hierarchy (the rows built where the object runs
    are checked to be the client's)."""


def _scalars(cfg: AutoConfig) -> AutoConfig:
    """``cfg`` without its per-node arrays (what a subtree task carries)."""
    return replace(cfg, matrix=None, levels=(), leaf_nodes=None)


def _part_structure(task: AutoSubtreeTask, hierarchy: Hierarchy | dict):
    """``(children map, rows, parent rows, subtree config)`` of ``task``'s subtree, built
    where the object runs from the whole ``hierarchy`` (on Dask its ``{parent: children}``
    names, scattered once per worker, never in a task's graph; a :class:`Hierarchy` does not
    pickle): :func:`~dpstream.engine._subtree.tree_structure`, with the whole tree's
    configuration (its matrix, levels and leaves exactly as
    :func:`dpstream.pipelines._autoplan._config` forms them), built once per process and call
    and shared by the subtrees built there."""

    def whole(h: Hierarchy) -> AutoConfig:
        return replace(
            task.cfg,
            matrix=h.sparse_matrix,
            levels=tuple(np.array([h.index(x) for x in lv]) for lv in h.levels),
            leaf_nodes=np.array([h.index(x) for x in h.leaves]),
        )

    maps, rows, parent, cfg = tree_structure(
        task.key, task.nodes_digest, task.cut, hierarchy, extra=whole
    )
    r = rows[task.index]
    return maps[task.index], r, parent[r], subtree_config(cfg, r)


#: A subtree object keeps its planner in a file of its process between calls once the planner
#: holds this many bytes, and its period's measurement and plan during the elimination (issue
#: 22: a worker holds one subtree's planner at a time, not all of them; a million meters on
#: two workers hold five subtrees each). Tests set it to 0 to spill every planner.
SPILL_BYTES = 32 << 20
#: Bytes of a subtree's saved planner state fetched (and stored as one row) at a time: held
#: by the worker and the client at once while the client also holds the day's values and
#: record (the store's rows may be smaller than its ``MEASURED_PART_BYTES``; read back joined).
STATE_FETCH_BYTES = 64 << 20


class _Zeros:
    """An all-zero float64 array as its shape in a spill file (a prior's sums before their
    first fold: zeros never written take no memory, so they are not written either)."""

    __slots__ = ("shape",)

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


def _is_zeros(a) -> bool:
    return (
        isinstance(a, np.ndarray) and a.dtype == np.float64 and a.size > 64
        and not a.any() and not np.signbit(a).any()
    )  # fmt: skip


def _prior_states(planner) -> list:
    return [st for st in (getattr(planner, "_state", None), getattr(planner, "_agg_state", None))
            if st is not None]  # fmt: skip


class _HeldPickler(pickle.Pickler):
    """Pickles a planner with its held periods' arrays (``held``: id -> array) as files of
    their own, each written once (:class:`_Spill`)."""

    def __init__(self, f, spill: _Spill, held: dict) -> None:
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.spill, self.held = spill, held

    def persistent_id(self, a):
        if id(a) not in self.held or self.held[id(a)] is not a:
            return None
        spill = self.spill
        path = spill._known(a)
        if path is None:  # a held period's array, new: its own file, once
            spill._count += 1
            path = spill._path(f"held-{spill._count}.npy")
            np.save(path, a, allow_pickle=False)
            spill._remember(a, path)
            spill._held_files.add(path)
        return path


class _HeldUnpickler(pickle.Unpickler):
    """Reads what :class:`_HeldPickler` wrote (a held array from its file)."""

    def __init__(self, f, spill: _Spill) -> None:
        super().__init__(f)
        self.spill = spill

    def persistent_load(self, path):
        a = np.load(path, allow_pickle=False)
        self.spill._remember(a, path)
        return a


class _Spill:
    """Objects of one subtree kept in files of its process between the calls that use them
    (pickled: read back bitwise as they were). A planner's held periods (the prior's last
    released ones: never changed once added) are written once each, to files of their own
    that later writes of the planner refer to, and its all-zero sums not at all. The files
    live in the Dask worker's local directory (removed with the worker) or a temporary
    directory of this process, and are removed when the object is."""

    def __init__(self) -> None:
        self._dir: str | None = None
        self._paths: dict[str, str] = {}
        self._arrays: dict[int, tuple] = {}  # id -> (weak reference, file) of held arrays
        self._held_files: set[str] = set()
        self._count = 0

    def _path(self, name: str) -> str:
        import os
        import shutil
        import tempfile
        import weakref

        if self._dir is None:
            base = None
            try:
                from distributed import get_worker

                base = get_worker().local_directory
            except (ImportError, ValueError):
                pass
            self._dir = tempfile.mkdtemp(prefix="dpstream-spill-", dir=base)
            weakref.finalize(self, shutil.rmtree, self._dir, True)
        return os.path.join(self._dir, name)

    def has(self, name: str) -> bool:
        return name in self._paths

    def _known(self, a) -> str | None:
        got = self._arrays.get(id(a))
        return got[1] if got is not None and got[0]() is a else None

    def _remember(self, a: np.ndarray, path: str) -> None:
        import weakref

        self._arrays[id(a)] = (weakref.ref(a), path)

    def put(self, name: str, obj) -> None:
        """Write ``obj`` (a planner's all-zero prior sums as their shapes: the object is
        dropped after)."""
        import os

        held: dict[int, np.ndarray] = {}
        for st in _prior_states(obj) if name == "planner" else ():
            for key in type(st)._ARRAYS:
                a = getattr(st, key)
                if _is_zeros(a):
                    setattr(st, key, _Zeros(a.shape))
            for period in st._held:
                held.update({id(a): a for a in period[:5] if isinstance(a, np.ndarray)})
        path = self._path(name + ".pkl")
        with open(path, "wb") as f:
            pickler = _HeldPickler(f, self, held)
            pickler.dump(obj)
            pickler.held = pickler.spill = None  # (no reference to the arrays is left)
        self._paths[name] = path
        if name == "planner":  # held arrays no longer held: their files go
            keep = {self._known(a) for a in held.values()} - {None}
            for file in self._held_files - keep:
                os.unlink(file)
            self._held_files = keep
            self._arrays = {k: (ref, file) for k, (ref, file) in self._arrays.items()
                            if file in keep and ref() is not None}  # fmt: skip

    def get(self, name: str):
        """Read ``name`` back (the file is kept until :meth:`drop` or the next :meth:`put`)."""
        with open(self._paths[name], "rb") as f:
            unpickler = _HeldUnpickler(f, self)
            obj = unpickler.load()
            unpickler.spill = None
        for st in _prior_states(obj) if name == "planner" else ():
            for key in type(st)._ARRAYS:
                a = getattr(st, key)
                if isinstance(a, _Zeros):
                    setattr(st, key, np.zeros(a.shape))  # not written: no resident memory
        return obj

    def drop(self, name: str) -> None:
        import os

        path = self._paths.pop(name, None)
        if path is not None and os.path.exists(path):
            os.unlink(path)

    def new_file(self, name: str) -> str:
        """The path of a file ``name`` of this object's, for the caller to write (removed by
        :meth:`drop` or with the object)."""
        self.drop(name)
        self._paths[name] = self._path(name)
        return self._paths[name]

    def path(self, name: str) -> str:
        return self._paths[name]


class SubtreeAuto(SolverCalls):
    """One subtree of a k="auto" split release: its planner (kept across periods), its data
    and its side of the elimination, where it runs (a Dask actor, or here)."""

    def __init__(self, task: AutoSubtreeTask, hierarchy: Hierarchy | dict) -> None:
        from ..pipelines._autoplan import new_planner

        self.task = task
        children, self.rows, self.parent_rows, self.cfg = _part_structure(task, hierarchy)
        self.tree = Hierarchy(children=children)
        del children
        self.level = node_depths(self.tree) + task.cut
        self.is_leaf = np.ones(self.level.size, dtype=bool)
        self.is_leaf[self.tree.parent[self.tree.parent >= 0]] = False
        self._spill = _Spill()
        self._planner: StreamPlanner | None = new_planner(self.cfg)
        self._floors = None  # every part's floor sums of the last plan (re-applied on a read)
        self._own_floors = None  # this part's floor sums when its planner is in a file
        self.values = None
        self.plan_ = self.prior = self.measurement = self.solver = self.noise_node = None
        self._rest(True)

    # -- the planner, in memory or in a file between calls (SPILL_BYTES) ----------------------
    @property
    def planner(self) -> StreamPlanner:
        """The subtree's planner (read back from its file if it was spilled)."""
        if self._planner is None:
            self._planner = self._spill.get("planner")
            _set_floor_others(self._planner, self._floors)
        return self._planner

    @planner.setter
    def planner(self, planner: StreamPlanner) -> None:
        self._planner = planner
        self._spill.drop("planner")

    def _rest(self, changed: bool) -> None:
        """End of a call that used the planner: a large planner goes to its file (written
        again only if it ``changed`` since it was read) and leaves memory."""
        p = self._planner
        if p is None or p.nbytes < SPILL_BYTES:
            return
        self._own_floors = _floor_sums(p)
        if changed or not self._spill.has("planner"):
            self._spill.put("planner", p)
        self._planner = None

    def forget_structure(self) -> None:
        """Drop the whole tree's structure from this process once every part is built."""
        forget_structure(self.task.key)

    # -- the planner's state (public values) ---------------------------------------------------
    def begin(self, history: list, carried, stored: bool):
        """Public history (noise-free :class:`Measurement` rows of this subtree); the carried
        samples of an earlier release when the store holds no period (``stored`` False).
        Returns the history block's Gram matrix (``HISTORY_FADE = "lowrank"``: factored by
        :meth:`factor_history` with the whole tree's profiles) or None."""
        self.planner.add_history(history, factor=False)
        gram = self.planner.history_gram()
        if not stored:
            self.planner.carry(carried)
        self._rest(True)
        return gram

    def factor_history(self, profiles) -> None:
        """The history block's factors over the whole tree's ``profiles`` (:meth:`begin`)."""
        self.planner.factor_history(profiles)
        self._rest(True)

    def add_stored(self, m: Measurement, plan: PeriodPlan) -> None:
        """One stored period's rows, in time order (the store's planner,
        :func:`dpstream.store._auto.plan_state`)."""
        self.planner.update(m, plan)
        self._rest(True)

    def gap(self) -> None:
        """A period was skipped before the next one: no window straddles it."""
        self.planner.previous = None
        self._rest(True)

    def reset(self) -> None:
        """A new planner (a saved state that could not be loaded is replayed instead)."""
        from ..pipelines._autoplan import new_planner

        self.planner = new_planner(self.cfg)

    def load_state(self, path: str, cut: int, ordinal: int) -> bool:
        """Load this subtree's planner state saved after period ``ordinal`` from the store
        file ``path`` (read here, read-only: its state and its rows of the held periods'
        records, :mod:`dpstream.store._planner_state`). False: none saved for this subtree
        (or not readable); the caller then replays the stored periods."""
        from ..store import _planner_state as ps

        con = ps.open_readonly(path)
        state = self._spill.new_file("loaded.npz")  # the state streamed to a file, not held
        try:
            if not ps.part_state_file(con, cut, self.tree.nodes[0], ordinal, state):
                return False

            def read(ordinals):  # one held period at a time (its plan dropped once used)
                return (ps.record_rows(con, o, self.rows) for o in ordinals)

            got = ps.load_part(state, self.planner, read, digest=_nodes_digest(self.tree))
            return got is not None
        finally:
            con.close()
            self._spill.drop("loaded.npz")
            self._rest(True)

    def state_size(self, held: list[int]) -> int | None:
        """Write this subtree's planner state after the last period, to be saved in the store
        (:func:`dpstream.store._planner_state.dumps_part`), to a file of this process, and
        return its size in bytes; the store fetches it a part at a time (:meth:`state_part`),
        so neither side holds a whole state (about 1.5 GB a subtree from the eighth day at a
        million meters) besides the planner. ``held``: the store ordinals of the last
        released full periods, oldest first (the prior holds the last of them). None for a
        planner without a streaming state."""
        import os

        from ..store._planner_state import dumps_part, held_count

        try:
            if not self.planner.streaming:
                return None
            n = held_count(self.planner)
            if n > len(held):
                return None
            path = self._spill.new_file("state.npz")
            with open(path, "wb") as f:
                dumps_part(self.planner, held[len(held) - n :] if n else [],
                           digest=_nodes_digest(self.tree), file=f)  # fmt: skip
            return os.path.getsize(path)
        finally:
            self._rest(False)

    def state_part(self, start: int, size: int) -> np.ndarray:
        """Bytes ``start`` to ``start + size`` of the state :meth:`state_size` wrote (uint8;
        Dask sends an array's buffer as it is)."""
        with open(self._spill.path("state.npz"), "rb") as f:
            f.seek(start)
            return np.frombuffer(f.read(size), dtype=np.uint8)

    def state_done(self) -> None:
        """Remove the file :meth:`state_size` wrote."""
        self._spill.drop("state.npz")

    # -- one period ------------------------------------------------------------------------------
    def load(self, source: Callable) -> np.ndarray:
        """Read and validate the subtree's leaves for the period; the root's values (w,)."""
        leaves = np.asarray(source(self.tree.leaves), dtype=np.float64)
        w = self.cfg.w
        if leaves.shape != (len(self.tree.leaves), w):
            raise DomainError(
                f"A subtree's source must give ({len(self.tree.leaves)}, {w}) values. Got "
                f"shape {leaves.shape}."
            )
        self.values = np.asarray(self.tree.sparse_matrix @ leaves)
        return self.values[0].copy()

    def scores(self):
        """This subtree's :class:`planner.CandidateScores` of the next period."""
        out = self.planner.scores()
        self._rest(False)
        return out

    def floor_sums(self):
        """The prior's variance-floor sums of this part (:func:`_floor_sums`)."""
        if self._planner is None and self._own_floors is not None:
            return self._own_floors  # (the planner is in its file: not read for 8 numbers)
        return _floor_sums(self.planner)

    def plan(self, total, floors=None) -> tuple[float | None, int]:
        """Finish the plan (and the prior) of the subtree's nodes from every part's scores
        (``floors``: every part's floor sums added, :func:`_set_floor_others`); its
        ``(predicted_with_prior, target nodes, prior sd sums)``."""
        self._floors = floors
        _set_floor_others(self.planner, floors)
        self.plan_, self.prior = _plan_part(self.planner, total)
        self._rest(False)  # (the floors are set again whenever the planner is read back)
        out = self.plan_.predicted_with_prior, _n_target(self.cfg), _prior_sd(self.prior)
        if self.plan_.variances.nbytes * 3 >= SPILL_BYTES:  # while the other parts plan:
            self._spill.put("plan", self.plan_)  # read back by measure
            if self.prior is not None:
                self._spill.put("prior", self.prior)  # read back by setup
            self.plan_ = self.prior = None
        return out

    def measure(self, seed, ordinal: int):
        """Draw the subtree's noise (after the charge). Returns, for the top: the sums over
        the subtree's leaves of their estimates (r,), of their one-sample noise variances
        and of their predicted variances (r,), and the largest finite predicted variance."""
        from ..pipelines._period_steps import as_measurement

        if self._spill.has("plan"):
            self.plan_ = self._spill.get("plan")
            self._spill.drop("plan")
        task, plan, cfg = self.task, self.plan_, self.cfg
        est = measure_auto_nodes(
            self.values,
            plan,
            cfg=cfg,
            level=self.level,
            level_sizes=task.level_sizes,
            rows=self.rows,
            parent_rows=self.parent_rows,
            is_leaf=self.is_leaf,
            stream=_streams(seed, ordinal, bit_source(None)),
        )
        self.values = None  # the true values are not needed any more
        missing = np.isnan(est[:, 0])
        leaves = cfg.leaf_nodes
        if missing.any():  # share-0 aggregates: the sum of their leaves' estimates
            est[missing] = cfg.matrix[missing] @ est[leaves]
        m = as_measurement(est, plan, cfg, level_sizes=task.level_sizes)
        self.noise_node = _export(m, plan, "noise_node")  # (n,): the noise is node x step
        self.measurement = replace(m, noise=None)  # rebuilt when the planner records it
        del m
        r = est.shape[1]
        svar_leaf = self.noise_node[leaves]
        v = plan.variances[:, :r]
        return (
            est[leaves].sum(axis=0),
            float(svar_leaf.sum()),
            v[leaves].sum(axis=0),
            _max_finite(plan, r),
        )

    def setup(self, big: float) -> int:
        """Algorithm 4's terms of the subtree (``big``: the period's unmeasured variance);
        its node count."""
        if self._spill.has("prior"):
            self.prior = self._spill.get("prior")
            self._spill.drop("prior")
        c, wts = _weights_and_estimates(self.measurement.values, self.plan_, self.prior, big)
        self.prior = None  # folded into (c, wts): not needed again
        fs = FeatureSet.from_breaks(c.shape[1], [])
        self.solver = SubtreeSolver(self.tree, fs, c, wts)
        del c, wts
        period = (self.measurement, self.plan_)
        if self.measurement.values.nbytes + self.plan_.variances.nbytes >= SPILL_BYTES:
            self._spill.put("period", period)  # read back for the record (export, finish)
            self.measurement = self.plan_ = None
        return int(self.solver.c.shape[0])

    def _period(self, keep: bool = False) -> None:
        """The period's measurement and plan back in memory (after the elimination);
        ``keep``: their file is kept (read again by a later call)."""
        if self.measurement is None and self._spill.has("period"):
            self.measurement, self.plan_ = self._spill.get("period")
            if not keep:
                self._spill.drop("period")

    def export(self, key: str) -> np.ndarray:
        """One array of the subtree's measurement and plan for the store's record
        (:func:`dpstream.store._auto.pack_parts`). A period waiting in its file is read for
        the call and not kept: between the calls (the record is gathered a key at a time,
        every subtree's in turn) a worker holds none of its subtrees' periods."""
        if key == "noise_node":
            return self.noise_node
        filed = self.measurement is None and self._spill.has("period")
        self._period(keep=True)
        try:
            return _export(self.measurement, self.plan_, key)
        finally:
            if filed:
                self.measurement = self.plan_ = None

    def solved(self) -> None:
        """Drop the elimination's arrays (the released values have been read)."""
        self.solver = None

    def finish(self, update: bool, keep: bool = False) -> None:
        """Record the period in the planner (``update``; the last period of a call that keeps
        no planner skips it) and drop the period's arrays; ``keep``: the period stays
        readable by :meth:`export` (in its file, if it waited in one; else here) until
        :meth:`drop_period`, so that the update, a worker's largest call, runs before the
        store's record is gathered on the client rather than while the client holds it."""
        self._period(keep=keep)
        m, plan = self.measurement, self.plan_
        self.solver = self.measurement = self.prior = self.plan_ = None
        if update:
            r = m.values.shape[1]
            noise = self.noise_node[:, None] * _noise_steps(plan, r)
            self.planner.update(replace(m, noise=noise), plan)
            del noise
            self._rest(True)
        if keep and not self._spill.has("period"):
            self.measurement, self.plan_ = m, plan  # (small: not in a file)
        if not keep:
            self.noise_node = None

    def drop_period(self) -> None:
        """Drop the period kept by :meth:`finish` (``keep``) once the record is gathered."""
        self._spill.drop("period")
        self.measurement = self.plan_ = self.noise_node = None


#: Bytes of a pickled source above which shipping it to every subtree is refused (Dask's own
#: "large graph" warning starts at 10 MB of graph; an actor call does not raise it).
_MAX_SOURCE_BYTES = 1 << 20


def _check_source(source: Callable) -> None:
    """Warn (an error under ``filterwarnings = error``) when the source carries data: workers
    must read their leaves where they run, never receive them from the client."""
    import pickle
    import warnings

    size = len(pickle.dumps(source, protocol=pickle.HIGHEST_PROTOCOL))
    if size > _MAX_SOURCE_BYTES:
        warnings.warn(
            f"Large graph: the source sent to every subtree is {size / 1e6:.1f} MB pickled. "
            "Pass a source that reads the leaves where it is called (e.g. ParquetLeaves).",
            UserWarning,
            stacklevel=3,
        )


def _floor_sums(planner: StreamPlanner):
    """The variance-floor sums (:meth:`postproc.PriorState.floor_sums`) of a planner's prior
    states: ``(all nodes, aggregates)``, None where a state is absent (no prior, or the
    planner holds its periods: ``profile_prior``'s floor is then this part's own)."""
    return tuple(
        None if st is None else np.array(st.floor_sums(), dtype=np.float64)
        for st in (getattr(planner, "_state", None), getattr(planner, "_agg_state", None))
    )


def _add_floor_sums(parts: list) -> tuple:
    """The whole tree's floor sums: every part's added, per state."""
    out = []
    for i in range(2):
        got = [p[i] for p in parts if p[i] is not None]
        out.append(np.sum(got, axis=0) if got else None)
    return tuple(out)


def _set_floor_others(planner: StreamPlanner, floors) -> None:
    """Give each prior state of a part the other parts' floor sums, so that the prior's
    variance floor is the whole tree's (it binds for a node whose forecast error is below a
    millionth of the mean noise: noise-free public history)."""
    if floors is None:
        return
    own = _floor_sums(planner)
    for st, total, mine in zip(
        (getattr(planner, "_state", None), getattr(planner, "_agg_state", None)),
        floors, own, strict=True,
    ):  # fmt: skip
        if st is not None and total is not None and mine is not None:
            st.floor_others = tuple(float(x) for x in total - mine)


def _plan_part(planner: StreamPlanner, total):
    """``planner.plan(scores=total)`` for one part (a part without target nodes has no mean
    of its own to predict: numpy's empty-mean warning is expected there)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
        return planner.plan(scores=total)


def _n_target(cfg: AutoConfig) -> int:
    """Target nodes of a part (``cfg.target`` over its levels)."""
    if cfg.target == "leaves":
        return int(len(cfg.levels[-1]))
    if cfg.target == "root":
        return int(len(cfg.levels[0]))
    return int(sum(len(lv) for lv in cfg.levels))


def _prior_sd(prior) -> tuple[float, int] | None:
    """(Σ over the nodes of the prior's standard deviation at step 0, nodes) or None."""
    if prior is None:
        return None
    return float(np.sqrt(prior.variance[:, 0]).sum()), int(prior.variance.shape[0])


def _mean_with_prior(parts: list) -> float | None:
    """The whole tree's ``predicted_with_prior``: the parts' means weighted by their target
    nodes (an aggregate above the cut uses no leaf weights: recorded, never used)."""
    got = [(p, n) for p, n, _ in parts if n > 0]
    if not got or any(p is None for p, _ in got):
        return None
    return float(sum(p * n for p, n in got) / sum(n for _, n in got))


def _rows_of(m: Measurement, plan: PeriodPlan | None, rows: np.ndarray):
    """A whole-tree (Measurement, PeriodPlan or None) restricted to ``rows``."""
    sub = Measurement(
        values=m.values[rows], noise=m.noise[rows], sampled=np.asarray(m.sampled)[rows]
    )
    if plan is None:
        return sub, None
    return sub, replace(
        plan,
        predicted_nodes=plan.predicted_nodes[rows],
        variances=plan.variances[rows],
        sample_variance=plan.sample_variance[rows],
    )


def _check_splittable(cfg: AutoConfig, hierarchy: Hierarchy | None, c: int) -> None:
    from planner._stream_plan import _uses_combination

    if hierarchy is None or c == 0 or _uses_combination(cfg.matrix):
        raise ParameterError(
            "The 'hierarchy' of a split k='auto' release must have more than 64 leaves and a "
            "level below the root whose nodes all have children: a smaller tree's plan "
            "combines its levels and is planned whole. Release it in one process (no cut, "
            "engine='local'), or use an int k."
        )


class AutoSplit:
    """A k="auto" release split into subtrees, kept for a call (its planners live across
    periods): :meth:`release` one full period after another, in time order.

    Parameters
    ----------
    cfg
        The release's :class:`~planner.AutoConfig` (the whole tree).
    hierarchy
        The whole hierarchy (more than 64 leaves; a level below the root whose nodes all have
        children).
    cut
        Depth of the subtree roots; None: :func:`~dpstream.engine._subtree.choose_cut`.
    client
        A ``distributed.Client`` (one actor per subtree) or None (objects of this process).
    n_workers
        Workers the automatic cut aims for.

    Raises
    ------
    ParameterError
        A tree of at most 64 leaves (planned whole), or a bad ``cut``.
    """

    def __init__(
        self,
        cfg: AutoConfig,
        hierarchy: Hierarchy,
        *,
        cut: int | None = None,
        client=None,
        n_workers: int = 2,
    ) -> None:
        from ..pipelines._autoplan import new_planner

        c = choose_cut(hierarchy, n_workers if client is not None else 1, cut)
        _check_splittable(cfg, hierarchy, c)
        self.cfg, self.hierarchy, self.cut = cfg, hierarchy, c
        self.rows = subtrees(hierarchy, c)[1]
        depth = node_depths(hierarchy)
        self.top_rows = np.flatnonzero(depth < c)
        self.level_sizes = tuple(len(lv) for lv in cfg.levels)
        key, digest = uuid.uuid4().hex, _nodes_digest(hierarchy)
        tasks = [
            AutoSubtreeTask(cfg=_scalars(cfg), index=s, cut=c, level_sizes=self.level_sizes,
                            key=key, nodes_digest=digest)
            for s in range(len(self.rows))
        ]  # fmt: skip
        self.n = len(tasks)
        self.client = client
        if client is None:
            self._objects = [SubtreeAuto(t, hierarchy) for t in tasks]
            self.call = _local_call(self._objects)
        else:  # the hierarchy once per worker, outside the graph; each part's task is small
            tree = client.scatter(dict(hierarchy.children), broadcast=True, hash=False)
            futures = [client.submit(SubtreeAuto, t, tree, actor=True) for t in tasks]
            self._objects = [f.result() for f in futures]
            del futures, tree
            self.call = _actor_call(self._objects)
        self.each("forget_structure")
        self.top_cfg = subtree_config(cfg, self.top_rows)
        self.top_planner = new_planner(self.top_cfg)
        self.roots = [hierarchy.nodes[int(r[0])] for r in self.rows]
        self.top_digest = _names_digest([hierarchy.nodes[int(i)] for i in self.top_rows])
        self.top_held: dict[int, bytes] = {}
        """The top's measurement and plan of the recent periods (``pack``'d, by ordinal): the
        held periods its saved state carries (a few nodes)."""
        self.top_level = depth[self.top_rows]
        self.structure = TopTree(
            hierarchy, c, FeatureSet.from_breaks(cfg.w, []),
            np.zeros((self.top_rows.size, cfg.w)), np.ones((self.top_rows.size, cfg.w)),
        )  # fmt: skip

    def each(self, method: str, *args) -> list:
        return self.call(method, [args] * self.n)

    def load_saved(self, store, last: int, *, history: bool = False) -> bool:
        """Load every part's planner state saved after period ``last`` (the last stored one)
        at this cut: the top's here, each subtree's where it runs (it reads the store file
        itself, :meth:`SubtreeAuto.load_state`). False, with every planner new again, when a
        part has none (an older store, a period released whole or at another cut since), or
        ``history`` is given now that the saved planners never read: the caller then
        replays (:meth:`rebuild`)."""
        from pathlib import Path

        from ..store import _planner_state as ps

        if set(self.roots) | {""} <= ps.saved_roots(store._con, self.cut, last):
            blob = ps.part_state(store._con, self.cut, "", last)
            got = None if blob is None else ps.load_part(
                blob, self.top_planner, lambda o: None, digest=self.top_digest)  # fmt: skip
            if got is not None and not (history and not self.top_planner.from_history):
                path = str(Path(store.path).resolve())
                if all(self.each("load_state", path, self.cut, int(last))):
                    self.top_held = dict(zip(got[0], got[1], strict=True))
                    return True
        from ..pipelines._autoplan import new_planner

        self.top_planner = new_planner(self.top_cfg)
        self.top_held = {}
        self.each("reset")
        return False

    def saved_states(self, held: list[int]):
        """Every part's planner state after the last period, as the store saves it:
        ``(cut, root, bytes or its parts)``, the top's (root "") first as bytes, then each
        subtree's as an iterable of its parts, fetched one at a time
        (:meth:`dpstream.store._store.ReleaseStore._put` reads them inside the period's
        transaction); ``held``: the ordinals of the last released full periods,
        oldest first. Nothing for planners without a streaming state."""
        from ..store._planner_state import dumps_part, held_count

        if not self.top_planner.streaming:
            return
        n = held_count(self.top_planner)
        top = held[len(held) - n :] if n else []
        if any(o not in self.top_held for o in top):
            return
        self.top_held = {o: self.top_held[o] for o in top}
        yield self.cut, "", dumps_part(self.top_planner, top, digest=self.top_digest,
                                       held_arrays=[self.top_held[o] for o in top])  # fmt: skip
        for s, root in enumerate(self.roots):
            size = self.call("state_size", [(held,)] * self.n, only=s)
            if size is not None:
                yield self.cut, root, self._state_parts(s, size)

    def _state_parts(self, s: int, size: int):
        """Subtree ``s``'s saved state (``size`` bytes, :meth:`SubtreeAuto.state_size`) in the
        store's parts, fetched one at a time from where it runs; its file removed after."""
        from ..store._store import MEASURED_PART_BYTES

        step = min(MEASURED_PART_BYTES, STATE_FETCH_BYTES)
        try:
            for start in range(0, max(size, 1), step):
                yield self.call("state_part", [(start, step)] * self.n, only=s)
        finally:
            self.call("state_done", [()] * self.n, only=s)

    def rebuild(self, history: list, items, carried=None, gap: bool = False) -> None:
        """The planners' state before the first period: public ``history`` (noise-free
        :class:`Measurement` values of the whole tree) and the stored periods' whole-tree
        ``(Measurement, PeriodPlan)`` (an iterable read one period at a time; as
        :func:`dpstream.store._auto.plan_state`), each sliced here per part and dropped;
        ``carried``: an earlier release's last samples (used when nothing is stored);
        ``gap``: a period was skipped before the next one. An item may be ``(ordinal,
        Measurement, PeriodPlan)``: the top keeps its rows for its saved state."""
        from ..store._auto import pack

        items = iter(items)
        first = next(items, None)
        top = self.top_rows
        self.top_planner.add_history([_rows_of(m, None, top)[0] for m in history], factor=False)
        grams = self.call("begin", [([_rows_of(m, None, r)[0] for m in history], carried,
                                     first is not None) for r in self.rows])  # fmt: skip
        grams = [g for g in [self.top_planner.history_gram(), *grams] if g is not None]
        if grams:  # "lowrank": every part factors its shares over the whole tree's profiles
            from planner._stream_planner import HISTORY_RANK, history_profiles

            profiles = history_profiles(sum(grams), HISTORY_RANK)
            self.top_planner.factor_history(profiles)
            self.each("factor_history", profiles)
        if first is None:
            self.top_planner.carry(carried)
        leaf = self.cfg.leaf_nodes
        mat = self.cfg.matrix[top]
        item = first
        while item is not None:
            o, m, p = item if len(item) == 3 else (None, *item)
            tm, tp = _rows_of(m, p, top)
            r = tm.values.shape[1]
            leaf_var = np.asarray(mat @ np.where(np.isfinite(p.variances[leaf, :r]),
                                                 p.variances[leaf, :r], 0.0))  # fmt: skip
            fixed = self._top_plan(tp, tm, leaf_var)
            self.top_planner.update(tm, fixed)
            if o is not None:
                self.top_held[int(o)] = pack(tm, fixed)
            self.call("add_stored", [_rows_of(m, p, r) for r in self.rows])
            del m, p, tm, tp, item
            item = next(items, None)
        if gap:
            self.top_planner.previous = None
            self.each("gap")

    @staticmethod
    def _top_plan(plan: PeriodPlan, m: Measurement, leaf_var: np.ndarray) -> PeriodPlan:
        """The top's plan as its planner records it: a share-0 aggregate's predicted variance
        is the sum of its leaves' (``leaf_var``; the whole tree's ``_error_variance``)."""
        r = m.values.shape[1]
        v = np.array(plan.variances[:, :r], dtype=np.float64)
        bad = ~np.isfinite(v).all(axis=1)
        v[bad] = leaf_var[bad]
        return replace(plan, variances=v)

    def release(
        self,
        source: Callable,
        *,
        ordinal: int,
        seed: object = None,
        charge: Callable[[], None] | None = None,
        pack: bool = False,
        update: bool = True,
    ):
        """Plan, charge, measure and post-process one full period.

        Returns ``(values (N, w), plan, record)``: the released values in ``hierarchy.nodes``
        order (>= 0, consistent), the top's plan (its scalars are every part's: k, noise,
        shares, budget, predicted) and, with ``pack``, the period's measurement and plan as
        the store keeps them (:func:`dpstream.store._auto.pack_parts`, streamed from the parts
        one array at a time; else None). ``update=False`` leaves the planners as they were
        (the last period of a call whose planners are dropped: no state written).
        """
        cfg, w = self.cfg, self.cfg.w
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int | np.integer)):
            raise ParameterError(
                "The 'seed' parameter of a split release must be None or an int (each node "
                f"group's stream is keyed from it). Got {type(seed).__name__} instead."
            )
        if self.client is not None:
            _check_source(source)
        roots = np.stack(self.call("load", [(source,)] * self.n))
        top_values = self.structure.sums(roots)
        total = self.top_planner.scores()
        for part in self.each("scores"):
            total = total + part
        floors = _add_floor_sums([_floor_sums(self.top_planner), *self.each("floor_sums")])
        _set_floor_others(self.top_planner, floors)
        top_plan, top_prior = _plan_part(self.top_planner, total)
        parts = [(top_plan.predicted_with_prior, _n_target(self.top_cfg), _prior_sd(top_prior))]
        parts += self.each("plan", total, floors)
        top_plan = replace(top_plan, predicted_with_prior=_mean_with_prior(parts))
        sds = [p[2] for p in parts]
        self.prior_summary = None if sds[0] is None else (
            top_prior.n_periods, sum(a for a, _ in sds) / sum(n for _, n in sds))  # fmt: skip
        if charge is not None:
            charge()  # committed before any draw
        parts = self.each("measure", seed, int(ordinal))
        hier = self.hierarchy
        stream = _streams(seed, ordinal, bit_source(None))
        is_leaf = np.zeros(self.top_rows.size, dtype=bool)
        est = measure_auto_nodes(
            top_values, top_plan, cfg=cfg, level=self.top_level,
            level_sizes=self.level_sizes, rows=self.top_rows,
            parent_rows=hier.parent[self.top_rows], is_leaf=is_leaf, stream=stream,
        )  # fmt: skip
        del top_values
        leaf_est = self.structure.sums(np.stack([p[0] for p in parts]))
        leaf_svar = self.structure.sums(np.array([[p[1]] for p in parts]))[:, 0]
        leaf_var = self.structure.sums(np.stack([p[2] for p in parts]))
        missing = np.isnan(est[:, 0])
        est[missing] = leaf_est[missing]
        top_m = _top_measurement(est, top_plan, self.top_cfg, self.level_sizes, leaf_svar)
        big = max([p[3] for p in parts] + [_max_finite(top_plan, w)]) * _UNMEASURED
        self.each("setup", big)
        c, wts = _weights_and_estimates(top_m.values, top_plan, top_prior, big)
        top = TopTree(hier, self.cut, FeatureSet.from_breaks(w, []), c, wts)

        def gather() -> None:  # the stall fallback: the whole problem in this process
            probs = self.each("problem")
            n = len(hier.nodes)
            ce, we = np.empty((n, w)), np.empty((n, w))
            ce[self.top_rows], we[self.top_rows] = top.c, top.weights
            for (a, b), r in zip(probs, self.rows, strict=True):
                ce[r], we[r] = a, b
            fs = FeatureSet.from_breaks(w, [])
            rel = project_consistent(ce, hierarchy=hier, features=fs, weights=we).values[0]
            self.call("set_leaves", [(_leaf_steps(hier, rel, r),) for r in self.rows])

        solve_split(top, self.call, gather=gather)
        del c, wts
        out = np.empty((len(hier.nodes), w))
        for s, r in enumerate(self.rows):  # one subtree at a time
            out[r] = self.call("node_values", [()] * self.n, only=s)
        out[self.top_rows] = self.structure.sums(out[self.structure.cut_rows])
        self.each("solved")  # the elimination's arrays dropped before the record is streamed
        if pack:  # the planners' update first (the workers' largest call), the record after
            self.each("finish", update, True)
            record = self._pack(top_m, top_plan)
            self.each("drop_period")
        else:
            record = None
            self.each("finish", update)
        if update:
            fixed = self._top_plan(top_plan, top_m, leaf_var)
            self.top_planner.update(top_m, fixed)
            if self.top_planner.streaming:  # the top's rows of the period, for its saved state
                from ..store._auto import pack

                self.top_held[int(ordinal)] = pack(top_m, fixed)
        return out, top_plan, record

    def _pack(self, top_m: Measurement, top_plan: PeriodPlan):
        """The period's measurement and plan of every node, streamed from the parts (top
        first) into the store's record (:func:`dpstream.store._auto.pack_parts`)."""
        from ..store._auto import PART_KEYS, pack_parts

        order = np.concatenate([self.top_rows, *self.rows])

        def chunks(key: str):
            yield _export(top_m, top_plan, key)
            for s in range(self.n):
                yield self.call("export", [(key,)] * self.n, only=s)

        return pack_parts(top_plan, order, {key: chunks(key) for key in PART_KEYS})


def _export(m: Measurement, plan: PeriodPlan, key: str) -> np.ndarray:
    """One array of a part's measurement and plan (rows in the part's order): ``values``;
    ``noise_node``, the one-sample noise variance of each node (the measurement's noise is
    its product with the interpolation's diagonal, one factor per step, exactly as
    :func:`~dpstream.pipelines._period_steps.as_measurement` forms it: checked); the plan's
    per-node arrays."""
    if key == "values":
        return np.asarray(m.values)
    if key == "noise_node":
        col = int(np.flatnonzero(np.asarray(m.sampled[0]))[0])  # the diagonal is 1 there
        node = np.array(m.noise[:, col], dtype=np.float64)
        if not np.array_equal(m.noise, node[:, None] * _noise_steps(plan, m.values.shape[1])):
            raise RuntimeError("a split measurement's noise is not node x step")  # internal
        return node
    return np.asarray(getattr(plan, key[len("plan_") :]))


def _noise_steps(plan: PeriodPlan, r: int) -> np.ndarray:
    """(1, r) the interpolation's diagonal ``diag(M Mᵀ)`` of the plan's samples."""
    pos = plan.positions(r)
    mask = np.zeros((1, r), dtype=bool)
    mask[0, pos] = True
    m = interpolation_matrix(mask)[0]
    return np.diag(m @ m.T)[None, :]


def _top_measurement(est, plan, top_cfg, level_sizes, leaf_svar) -> Measurement:
    """The top nodes' :class:`Measurement`: a share-0 aggregate's noise is the sum of its
    leaves' (``leaf_svar``: their one-sample variances summed over the subtrees)."""
    from ..pipelines._period_steps import as_measurement

    m = as_measurement(est, plan, top_cfg, level_sizes=level_sizes)
    shares = np.array(plan.shares)
    level = np.empty(est.shape[0], dtype=np.int64)
    for li, nodes in enumerate(top_cfg.levels):
        level[nodes] = li
    unmeasured = shares[level] <= 0
    if not unmeasured.any():
        return m
    r = est.shape[1]
    pos = plan.positions(r)
    mask = np.zeros((1, r), dtype=bool)
    mask[0, pos] = True
    mm = interpolation_matrix(mask)[0]
    noise = np.array(m.noise)
    noise[unmeasured] = leaf_svar[unmeasured, None] * np.diag(mm @ mm.T)[None, :]
    return Measurement(values=m.values, noise=noise, sampled=m.sampled)


def release_auto_whole(
    planner: StreamPlanner,
    cfg: AutoConfig,
    hierarchy: Hierarchy,
    values: np.ndarray,
    *,
    ordinal: int,
    seed: object = None,
) -> tuple[np.ndarray, PeriodPlan, Measurement]:
    """One full k="auto" period of the whole tree in one process, drawn from the split's
    per-node streams: ``planner.plan()``, :func:`measure_auto_nodes` on every node,
    Algorithm 4 (:func:`~dpstream.pipelines._period_steps.post_process_periods`),
    ``planner.update``. The reference that :class:`AutoSplit` equals. ``values`` (N, w)."""
    from ..pipelines._period_steps import as_measurement, post_process_periods

    plan, prior = planner.plan()
    level = node_depths(hierarchy)
    is_leaf = np.ones(level.size, dtype=bool)
    is_leaf[hierarchy.parent[hierarchy.parent >= 0]] = False
    est = measure_auto_nodes(
        values, plan, cfg=cfg, level=level,
        level_sizes=tuple(len(lv) for lv in cfg.levels), rows=np.arange(level.size),
        parent_rows=hierarchy.parent, is_leaf=is_leaf,
        stream=_streams(seed, ordinal, bit_source(None)),
    )  # fmt: skip
    missing = np.isnan(est[:, 0])
    if missing.any():
        est[missing] = cfg.matrix[missing] @ est[cfg.leaf_nodes]
    m = as_measurement(est, plan, cfg)
    out = post_process_periods([m], [plan], [prior], hierarchy)[0]
    planner.update(m, plan)
    return np.maximum(out, 0.0), plan, m


def auto_split_applies(cfg: AutoConfig, tree, cut, n_workers: int, seed, owner: str) -> bool:
    """Whether the store splits its k="auto" periods (``engine="dask"`` or a ``cut``).

    A hierarchy of more than 64 leaves with a level below the root whose nodes all have
    children: True. Otherwise the period is planned whole: with ``engine="dask"`` and no
    ``cut`` the store falls back to one worker per period (False); a ``cut`` given is refused
    (:class:`ParameterError`), as is a bad ``cut`` or a seed that is not an int.
    """
    from planner._stream_plan import _uses_combination

    c = 0 if tree is None else choose_cut(tree, n_workers, cut)
    if c == 0 or _uses_combination(cfg.matrix):
        if cut is not None:
            raise ParameterError(
                f"The 'cut' parameter of {owner} splits k='auto' periods of a hierarchy of more "
                "than 64 leaves only (a smaller tree's plan combines its levels and is planned "
                "whole). Drop cut, or pass an int k."
            )
        return False
    check_split_seed(seed)
    return True


def release_auto_periods_split(
    store, cfg: AutoConfig, tree: Hierarchy, grid, ordinals: list[int], sources: list[Callable],
    *, charge: Callable[[int], None], seed, cut, scheduler, n_workers: int, history=None,
    progress=None, local: bool = False,
) -> None:  # fmt: skip
    """The store's k="auto" periods split into subtrees, in time order, on one cluster kept for
    the call (``local``: objects of this process): the planners rebuilt from the store (as
    :func:`dpstream.store._auto.plan_state`), then per period :meth:`AutoSplit.release` and
    one committed period with its measurement and plan (as
    :func:`dpstream.store._auto.release_auto_period`). ``charge(ordinal)`` commits the
    period's charge; it runs after every subtree has read and validated its leaves and
    before any draw."""
    from ..pipelines._autoplan import LOOKBACK, PRIOR_DAYS, STREAMING_STATE
    from ..pipelines._period_steps import history_measurements
    from ..store._auto import unpack
    from ..store._planner_state import _held_ordinals, held_count
    from ._subtree import _maybe_client

    hist, carried = history or (None, None)
    with _maybe_client(local, scheduler, n_workers) as client:
        split = AutoSplit(cfg, tree, cut=cut, client=client, n_workers=n_workers)
        first = ordinals[0]
        held = _stored_ordinals(store, first, max(LOOKBACK, PRIOR_DAYS))
        gap = bool(held) and held[-1] != first - 1  # no window of w steps straddles it
        if held and STREAMING_STATE and split.load_saved(store, held[-1], history=hist is not None):
            if gap:
                split.top_planner.previous = None
                split.each("gap")
        else:  # no saved state (an older store...): replay the stored periods
            stored = ((o, *unpack(store._measured(o + 1, 1)[0][2])) for o in held)  # one a time
            split.rebuild(history_measurements(hist, cfg.w), stored, carried, gap)
        for o, source in zip(ordinals, sources, strict=True):
            held = split.top_planner.n_measured
            n_held = held_count(split.top_planner)
            out, plan, blob = split.release(
                source, ordinal=o, seed=seed, charge=lambda o=o: charge(o), pack=True,
            )  # fmt: skip
            label = grid.label(o)
            rec = {"period": int(o), "start": str(label), **plan.record()}
            if plan.noise == "gaussian" and cfg.delta is not None:
                from mechanisms.wevent._gaussian import gaussian_epsilon

                rec["epsilon_dp"] = gaussian_epsilon(plan.budget, cfg.delta)
            summary = split.prior_summary
            rec["prior_periods"] = 0 if summary is None else summary[0]
            rec["prior_sd"] = None if summary is None else summary[1]
            rec["planned_on"] = f"{held} stored period(s)"
            recent = [*_held_ordinals(store, o, n_held, cfg.w), int(o)]  # the prior's last
            store._put(o, label, out, rec, seeded=seed is not None, measured=blob,
                       split_state=split.saved_states(recent))  # fmt: skip
            del out, blob
            if progress is not None:
                progress(1)


def _stored_ordinals(store, before: int, n: int) -> list[int]:
    """The ordinals of the last ``n`` stored periods before ``before`` that carry
    measurements (as ``ReleaseStore._measured``), in time order, without their records."""
    rows = store._con.execute(
        "SELECT ordinal FROM periods WHERE ordinal < ? AND measured IS NOT NULL "
        "ORDER BY ordinal DESC LIMIT ?",
        (int(before), int(n)),
    ).fetchall()
    return [int(o) for (o,) in reversed(rows)]
